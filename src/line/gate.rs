//! `Line`, the gate between the decision stage, the deadline thread and the
//! outputs: whoever claims part N first hands its verdict (or a `late` fail)
//! to the outputs, once and in part order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::part_deadline::{PartDeadline, SEND_MARGIN};
use super::stats::LineStats;
use super::verdict::{LineOutput, LineVerdict};
use crate::config::CavityLayout;
use crate::cycle::CycleVerdicts;
use crate::decision::{Decision, Reason};
use crate::frame::FrameMeta;
use crate::model_id::ModelIds;

/// How the line got a part, as the results file and the log record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The line got this verdict.
    OnTime,
    /// The line got a `late` fail for this part instead.
    Late,
}

/// The gate between the decision stage, the deadline thread and the outputs.
pub struct Line {
    /// The part the line waits for next.
    next: Mutex<u64>,
    /// Whose parts these are (each camera has its own line and part numbers).
    camera: Option<Arc<str>>,
    outputs: Vec<Arc<dyn LineOutput>>,
    /// `[decision] deadline_ms` in nanoseconds; 0 = off. Changes on reload.
    deadline_ns: AtomicU64,
    stats: Arc<LineStats>,
    /// The camera's cavity layout: a `late` fail fails each judged cavity.
    layout: Option<Arc<CavityLayout>>,
    /// The models (and recipe) judging now: the last verdict's, or a recipe
    /// switch's; a `late` fail names them. `None` until either.
    judging: Mutex<Option<Arc<ModelIds>>>,
}

impl Line {
    pub fn new(outputs: Vec<Arc<dyn LineOutput>>, deadline: Option<Duration>) -> Line {
        Line::of_camera(outputs, deadline, None, Arc::default())
    }

    /// The line of one camera of several: its parts are numbered on their
    /// own, its verdicts name it, and `stats` counts with the other cameras'.
    pub fn of_camera(
        outputs: Vec<Arc<dyn LineOutput>>,
        deadline: Option<Duration>,
        camera: Option<Arc<str>>,
        stats: Arc<LineStats>,
    ) -> Line {
        let line = Line {
            next: Mutex::new(0),
            camera,
            outputs,
            deadline_ns: AtomicU64::new(0),
            stats,
            layout: None,
            judging: Mutex::new(None),
        };
        line.set_deadline(deadline);
        line
    }

    /// This line's camera judges a cycle of cavities per part (`layout`):
    /// its `late` fails then fail every judged cavity.
    pub fn with_layout(mut self, layout: Option<Arc<CavityLayout>>) -> Line {
        self.layout = layout;
        self
    }

    pub fn stats(&self) -> &Arc<LineStats> {
        &self.stats
    }

    pub fn deadline(&self) -> Option<Duration> {
        match self.deadline_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// A new deadline (reload); it applies to parts captured from now on.
    pub fn set_deadline(&self, deadline: Option<Duration>) {
        let ns = deadline.map_or(0, |d| {
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
        });
        self.deadline_ns.store(ns, Ordering::Relaxed);
    }

    /// The models judging from now on (a recipe switch): the `late` fails
    /// until the next verdict name them and their recipe.
    pub fn set_judging(&self, models: Arc<ModelIds>) {
        *self.judging.lock().unwrap_or_else(PoisonError::into_inner) = Some(models);
    }

    fn judging(&self) -> Option<Arc<ModelIds>> {
        self.judging
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the line already got a verdict for part `number` (`Part::number`).
    pub fn is_claimed(&self, number: u64) -> bool {
        *self.lock() > number
    }

    /// The decision stage's verdict for a part. Sent to the line when it is in
    /// time; otherwise the line gets (or already got) a `late` fail.
    pub fn deliver(
        &self,
        meta: &FrameMeta,
        decision: &Decision,
        latency_ms: f64,
        models: Option<&Arc<ModelIds>>,
        cavities: Option<&Arc<CycleVerdicts>>,
    ) -> Delivery {
        let deadline = self.deadline().map(|d| PartDeadline::of(meta, d));
        let number = meta.part.number;
        if let Some(models) = models {
            self.set_judging(Arc::clone(models));
        }
        let mut next = self.lock();
        if *next > number {
            return Delivery::Late;
        }
        if *next < number {
            // Parts that never reached the decision stage (lost on the way): the
            // line must not wait for them forever, nor get them after this one.
            log::warn!(target: "sealcheck::line", first = *next, count = number - *next;
                "parts without a result: the line gets a late fail for each");
            while *next < number {
                self.send_late(*next, meta, deadline);
                *next += 1;
            }
        }
        *next = number + 1;
        let late = deadline.is_some_and(|d| Instant::now() + SEND_MARGIN > d.due);
        if late {
            self.send_late(number, meta, deadline);
            return Delivery::Late;
        }
        self.send(&LineVerdict {
            seq: meta.seq,
            part: meta.part,
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: *decision,
            latency_ms,
            deadline,
            models: models.cloned(),
            camera: self.camera.clone(),
            cavities: cavities.cloned(),
        });
        Delivery::OnTime
    }

    /// The deadline thread: the part of `meta` reached `deadline`. Claims
    /// it, and any earlier part still open, with a `late` fail. False when
    /// the decision stage had claimed it already.
    pub fn expire(&self, meta: &FrameMeta, deadline: PartDeadline) -> bool {
        let mut next = self.lock();
        if *next > meta.part.number {
            return false;
        }
        while *next <= meta.part.number {
            self.send_late(*next, meta, Some(deadline));
            *next += 1;
        }
        true
    }

    /// A `late` fail for part `number`, in the place of the verdict of
    /// `meta`'s part or of one before it that never came (whose id and
    /// frame are not known here: the free-mode guess, `number`).
    fn send_late(&self, number: u64, meta: &FrameMeta, deadline: Option<PartDeadline>) {
        self.stats.late.fetch_add(1, Ordering::Relaxed);
        let (seq, part) = if number == meta.part.number {
            (meta.seq, meta.part)
        } else {
            (number, crate::frame::Part::free(number))
        };
        self.send(&LineVerdict {
            seq,
            part,
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: Decision::late(),
            latency_ms: meta.started_instant().elapsed().as_secs_f64() * 1e3,
            deadline: deadline.map(PartDeadline::for_late_fail),
            models: self.judging(),
            camera: self.camera.clone(),
            cavities: self.layout.as_deref().map(|layout| {
                let mut late = CycleVerdicts::with_capacity(usize::from(layout.enabled_count()));
                late.fill_failed(layout, Reason::Late);
                Arc::new(late)
            }),
        });
    }

    fn send(&self, verdict: &LineVerdict) {
        self.stats.sent.fetch_add(1, Ordering::Relaxed);
        for output in &self.outputs {
            output.send(verdict);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        // The counter is consistent between statements: a panic elsewhere leaves it usable.
        self.next.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test double: records what the line got.
    #[derive(Default)]
    struct RecordingOutput(Mutex<Vec<(u64, Reason)>>);

    impl LineOutput for RecordingOutput {
        fn send(&self, v: &LineVerdict) {
            self.0.lock().unwrap().push((v.seq, v.decision.reason));
        }
    }

    fn line(deadline_ms: u64) -> (Line, Arc<RecordingOutput>) {
        let out = Arc::new(RecordingOutput::default());
        let deadline = (deadline_ms > 0).then(|| Duration::from_millis(deadline_ms));
        (
            Line::new(vec![out.clone() as Arc<dyn LineOutput>], deadline),
            out,
        )
    }

    fn ok() -> Decision {
        Decision {
            verdict: crate::decision::Verdict::Pass,
            reason: Reason::Ok,
            defect_prob: Some(0.1),
            seal_area: Some(0.1),
        }
    }

    #[test]
    fn whoever_claims_a_part_first_sends_it_and_only_once() {
        let (line, out) = line(1000);
        let m0 = FrameMeta::now(0);
        let m1 = FrameMeta::now(1);
        assert_eq!(line.deliver(&m0, &ok(), 1.0, None, None), Delivery::OnTime);
        // The deadline thread reaches part 1 first.
        assert!(line.expire(&m1, PartDeadline::of(&m1, Duration::from_millis(1000))));
        assert_eq!(line.deliver(&m1, &ok(), 1.0, None, None), Delivery::Late);
        // A timer for part 0 firing late finds it claimed.
        assert!(!line.expire(&m0, PartDeadline::of(&m0, Duration::from_millis(1000))));
        assert_eq!(
            *out.0.lock().unwrap(),
            vec![(0, Reason::Ok), (1, Reason::Late)]
        );
        assert_eq!(line.stats().snapshot().late, 1);
    }

    #[test]
    fn a_verdict_past_its_deadline_goes_out_as_late() {
        let (line, out) = line(1);
        let m = FrameMeta::now(0);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(line.deliver(&m, &ok(), 5.0, None, None), Delivery::Late);
        assert_eq!(*out.0.lock().unwrap(), vec![(0, Reason::Late)]);
    }

    #[test]
    fn lost_parts_are_failed_in_order_before_the_next() {
        let (line, out) = line(0);
        line.deliver(&FrameMeta::now(0), &ok(), 1.0, None, None);
        line.deliver(&FrameMeta::now(3), &ok(), 1.0, None, None);
        assert_eq!(
            *out.0.lock().unwrap(),
            vec![
                (0, Reason::Ok),
                (1, Reason::Late),
                (2, Reason::Late),
                (3, Reason::Ok)
            ]
        );
    }
}
