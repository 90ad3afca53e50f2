//! What TensorRT tells us while it works: its logger (into `log`, target
//! `tensorrt`) and the progress of an engine build (log lines with the
//! percentage done and the time spent, since a build takes minutes on a Jetson).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The `log` target TensorRT's own messages go to (`RUST_LOG=tensorrt=debug`).
pub const LOG_TARGET: &str = "tensorrt";

/// Called by trt_bridge's ILogger for every TensorRT message.
/// Severity is TensorRT's: 0 internal error, 1 error, 2 warning, 3 info, 4 verbose.
pub fn log_from_tensorrt(severity: i32, message: &str) {
    let level = match severity {
        0 | 1 => log::Level::Error,
        2 => log::Level::Warn,
        // TensorRT's info level is chatty (every tactic, every layer): debug for us.
        3 => log::Level::Debug,
        _ => log::Level::Trace,
    };
    log::log!(target: LOG_TARGET, level, "{}", message.trim_end());
}

/// One phase TensorRT announced, possibly inside another.
#[derive(Debug, Clone, PartialEq)]
struct Phase {
    name: String,
    steps: i32,
    done: i32,
}

/// Follows TensorRT's IProgressMonitor callbacks for one engine build and
/// logs "42% after 73 s" lines, at most every `interval` (and at 100%).
#[derive(Debug)]
pub struct BuildProgress {
    /// Which engine, for the log lines.
    label: String,
    started: Instant,
    interval: Duration,
    last_logged: Option<Instant>,
    /// Open phases, outermost first.
    phases: Vec<Phase>,
    /// Set by a shutdown request: the build stops at its next step.
    cancel: Option<Arc<AtomicBool>>,
}

impl BuildProgress {
    pub fn new(label: impl Into<String>, cancel: Option<Arc<AtomicBool>>) -> Self {
        BuildProgress {
            label: label.into(),
            started: Instant::now(),
            interval: Duration::from_secs(5),
            last_logged: None,
            phases: Vec::new(),
            cancel,
        }
    }

    /// Fraction of the whole build done, from the open phases: each nested
    /// phase subdivides one step of its parent.
    pub fn fraction(&self) -> f64 {
        let mut fraction = 0.0;
        let mut scale = 1.0;
        for phase in &self.phases {
            if phase.steps <= 0 {
                break;
            }
            let steps = f64::from(phase.steps);
            fraction += scale * f64::from(phase.done.clamp(0, phase.steps)) / steps;
            scale /= steps;
        }
        fraction.clamp(0.0, 1.0)
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn phase_start(&mut self, phase: &str, parent: &str, steps: i32) {
        // A phase's parent is open; anything opened after the parent and not
        // finished was abandoned by TensorRT, so drop it.
        if let Some(at) = self.phases.iter().position(|p| p.name == parent) {
            self.phases.truncate(at + 1);
        } else if parent.is_empty() {
            self.phases.clear();
        }
        log::debug!(target: "sealcheck::tensorrt", engine = self.label.as_str(), phase, parent, steps; "build phase started");
        self.phases.push(Phase {
            name: phase.to_string(),
            steps,
            done: 0,
        });
    }

    /// Returns false to cancel the build.
    pub fn step_complete(&mut self, phase: &str, step: i32) -> bool {
        if let Some(open) = self.phases.iter_mut().rev().find(|p| p.name == phase) {
            open.done = step.saturating_add(1);
        }
        self.maybe_log(Instant::now());
        !self.cancelled()
    }

    pub fn phase_finish(&mut self, phase: &str) {
        if let Some(at) = self.phases.iter().rposition(|p| p.name == phase) {
            self.phases.truncate(at);
        }
        if self.phases.is_empty() {
            log::info!(target: "sealcheck::tensorrt", engine = self.label.as_str(),
                elapsed_s = round1(self.elapsed().as_secs_f64()); "engine build: 100%");
        }
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    fn maybe_log(&mut self, now: Instant) {
        if self
            .last_logged
            .is_some_and(|at| now.duration_since(at) < self.interval)
        {
            return;
        }
        self.last_logged = Some(now);
        let percent = (self.fraction() * 100.0).floor();
        let phase = self.phases.last().map(|p| p.name.as_str()).unwrap_or("");
        log::info!(target: "sealcheck::tensorrt", engine = self.label.as_str(), percent, phase,
            elapsed_s = round1(self.elapsed().as_secs_f64());
            "engine build: {percent}% after {:.0} s", self.elapsed().as_secs_f64());
    }
}

fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_phase_subdivides_its_parent_step() {
        let mut progress = BuildProgress::new("seg", None);
        progress.phase_start("Building", "", 4);
        assert_eq!(progress.fraction(), 0.0);
        progress.step_complete("Building", 0);
        assert!((progress.fraction() - 0.25).abs() < 1e-9);
        progress.phase_start("Tactics", "Building", 10);
        progress.step_complete("Tactics", 4);
        // 1/4 done + 5/10 of the second quarter.
        assert!(
            (progress.fraction() - (0.25 + 0.5 * 0.25)).abs() < 1e-9,
            "{}",
            progress.fraction()
        );
        progress.phase_finish("Tactics");
        progress.step_complete("Building", 3);
        assert!((progress.fraction() - 1.0).abs() < 1e-9);
        progress.phase_finish("Building");
        assert!(progress.phases.is_empty());
    }

    #[test]
    fn abandoned_child_phase_is_dropped_when_a_sibling_starts() {
        let mut progress = BuildProgress::new("cls", None);
        progress.phase_start("Top", "", 2);
        progress.phase_start("A", "Top", 3);
        progress.phase_start("A.1", "A", 5);
        progress.phase_start("B", "Top", 3);
        let names: Vec<&str> = progress.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["Top", "B"]);
    }

    #[test]
    fn cancel_flag_stops_the_build_at_the_next_step() {
        let cancel = Arc::new(AtomicBool::new(false));
        let mut progress = BuildProgress::new("seg", Some(Arc::clone(&cancel)));
        progress.phase_start("Top", "", 2);
        assert!(progress.step_complete("Top", 0));
        cancel.store(true, Ordering::Relaxed);
        assert!(!progress.step_complete("Top", 1));
    }

    #[test]
    fn zero_step_phase_does_not_divide_by_zero() {
        let mut progress = BuildProgress::new("seg", None);
        progress.phase_start("Empty", "", 0);
        progress.step_complete("Empty", 0);
        assert_eq!(progress.fraction(), 0.0);
    }
}
