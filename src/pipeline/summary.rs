//! How a run ended, and what it did: `RunSummary` and the text printed at
//! the end of `run` and `bench`.

use std::time::Duration;

use crate::capture::EndOfStream;
use crate::line::LineCounts;
use crate::line::mqtt::MqttCounts;
use crate::shadow::AgreementSnapshot;
use crate::stats::RunStats;

/// A run's camera losses, every camera together: each loss, whether it
/// ended with a frame, and the reopen tries that failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceOutages {
    /// Times a live source was lost (or missing at start).
    pub lost: u64,
    /// Losses that ended: a frame came again.
    pub recovered: u64,
    /// Reopen tries that failed (each logged as a loss of its own).
    pub failed_tries: u64,
}

impl SourceOutages {
    /// The summary's line, `None` without a loss. `frames` delivered in the
    /// run: none at all means the camera never streamed.
    pub fn render(&self, frames: u64) -> Option<String> {
        if self.lost == 0 {
            return None;
        }
        let mut line = format!("source: lost {} time(s)", self.lost);
        match self.recovered {
            0 => line.push_str(", never recovered"),
            n if n == self.lost => line.push_str(", recovered inside the process each time"),
            n => line.push_str(&format!(", recovered inside the process {n} time(s)")),
        }
        if self.failed_tries > 0 {
            line.push_str(&format!(
                "; {} reopen tr{} failed",
                self.failed_tries,
                if self.failed_tries == 1 { "y" } else { "ies" }
            ));
        }
        if self.recovered < self.lost {
            line.push_str("; still lost at the end");
        }
        if frames == 0 {
            line.push_str("; no frame ever arrived (the journal has why, and the hint)");
        }
        line.push('\n');
        Some(line)
    }
}

/// One GenICam camera's frames over the run, as its stream delivered them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenicamFrameCounts {
    /// `[cameras.NAME]`'s name; `None` for `[source]`.
    pub camera: Option<String>,
    /// Frames that arrived whole (each one judged).
    pub whole: u64,
    /// Frames the camera sent that did not arrive whole (lost packets):
    /// dropped by Aravis, never judged.
    pub incomplete: u64,
}

impl GenicamFrameCounts {
    /// The summary's line for this camera, always (0 incomplete included).
    pub fn render(&self) -> String {
        let camera = match &self.camera {
            Some(name) => format!("camera {name}"),
            None => "camera".to_string(),
        };
        let mut line = format!(
            "{camera}: {} incomplete frame(s) (lost packets: dropped by Aravis, never judged), {} whole",
            self.incomplete, self.whole
        );
        if self.incomplete > 0 {
            line.push_str(
                "; see docs/OPERATIONS.md, \"GigE settings\" (socket buffer, packet size)",
            );
        }
        line.push('\n');
        line
    }
}

/// The summary's archive line: frames it did not keep, by why; `None`
/// when there are no counts or it kept every one.
fn archive_line(dropped: Option<[(&'static str, u64); 4]>) -> Option<String> {
    let dropped = dropped?;
    let total: u64 = dropped.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let by: Vec<String> = dropped
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(why, n)| format!("{n} {why}"))
        .collect();
    Some(format!(
        "archive: {total} frame(s) not kept ({}; docs/OPERATIONS.md, \"The archive\")\n",
        by.join(", ")
    ))
}

/// How a run ended, and what it did.
pub struct RunSummary {
    pub backend: String,
    pub backend_reason: String,
    pub frames_delivered: u64,
    pub results_written: u64,
    pub elapsed: Duration,
    pub stats: RunStats,
    pub end: EndOfStream,
    /// True when the run ended because SIGTERM/SIGINT asked it to.
    pub stopped_by_signal: bool,
    /// Result lines that could not be written to the results file (disk full,
    /// I/O error): the run exits non-zero when any was lost.
    pub results_lost: u64,
    /// The live sources' losses, as they happened.
    pub source_outages: SourceOutages,
    /// Each GenICam camera's whole and incomplete frames, in camera order
    /// (empty without one).
    pub genicam_frames: Vec<GenicamFrameCounts>,
    /// Frames the archive should have kept and did not, by why
    /// (`ArchiveDrop::ALL`'s names and counts; all 0 when it archived
    /// nothing, `[archive]` off included, since reload may turn it on).
    pub archive_dropped: Option<[(&'static str, u64); 4]>,
    /// Verdicts the line got (one per part), and how many were `late`.
    pub line: LineCounts,
    /// The MQTT side, when `[mqtt]` is configured.
    pub mqtt: Option<MqttCounts>,
    /// The shadow's agreement with production, when a `[shadow]` ran.
    pub shadow: Option<AgreementSnapshot>,
    /// With `max_batch` above 1 on the host path: (engine runs, frames in
    /// them, max_batch).
    pub batches: Option<(u64, u64, usize)>,
    /// The cameras' names by index (`[cameras.NAME]`); empty with `[source]`.
    pub camera_names: Vec<String>,
}

impl RunSummary {
    pub fn fps(&self) -> f64 {
        self.results_written as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The summary printed at the end of `run` and `bench`.
    pub fn render(&self) -> String {
        let s = &self.stats;
        let mut out = format!(
            "backend: {} ({})\nframes: {} delivered, {} results\nverdicts: {}\nthroughput: {:.2} frames/s over {:.2} s\n",
            self.backend,
            self.backend_reason,
            self.frames_delivered,
            self.results_written,
            s.status_line(self.fps()),
            self.fps(),
            self.elapsed.as_secs_f64(),
        );
        if let Some(line) = self.source_outages.render(self.frames_delivered) {
            out.push_str(&line);
        }
        for camera in &self.genicam_frames {
            out.push_str(&camera.render());
        }
        if let Some(line) = archive_line(self.archive_dropped) {
            out.push_str(&line);
        }
        if self.results_lost > 0 {
            out.push_str(&format!(
                "results file: {} lines could not be written (the journal has their verdicts when log_verdicts = true)\n",
                self.results_lost
            ));
        }
        out.push_str(&s.latency_table());
        out.push_str(&s.camera_table(&self.camera_names));
        if let Some((runs, frames, max_batch)) = self.batches {
            out.push_str(&format!(
                "batches: {runs} engine runs for {frames} frames (mean {:.2} frames, max_batch {max_batch})\n",
                frames as f64 / runs.max(1) as f64
            ));
        }
        out.push_str(&self.render_line());
        if let Some(shadow) = &self.shadow {
            out.push_str(&shadow.render());
        }
        out
    }

    /// The line's part of the summary: verdicts, late, MQTT.
    pub fn render_line(&self) -> String {
        let mut out = format!(
            "line: {} verdicts, {} late\n",
            self.line.sent, self.line.late
        );
        if let Some(mqtt) = &self.mqtt {
            out.push_str(&mqtt.render());
        }
        out
    }
}

#[cfg(test)]
mod outage_tests {
    use super::{GenicamFrameCounts, SourceOutages, archive_line};

    #[test]
    fn each_genicam_camera_has_its_incomplete_frames_line_even_at_0() {
        let side = GenicamFrameCounts {
            camera: Some("side".into()),
            whole: 250,
            incomplete: 0,
        };
        assert_eq!(
            side.render(),
            "camera side: 0 incomplete frame(s) (lost packets: dropped by Aravis, never judged), 250 whole\n"
        );
        let source = GenicamFrameCounts {
            camera: None,
            whole: 12,
            incomplete: 121,
        };
        let line = source.render();
        assert!(
            line.starts_with("camera: 121 incomplete frame(s)")
                && line.contains("12 whole")
                && line.contains("GigE settings"),
            "{line}"
        );
    }

    #[test]
    fn the_archive_line_names_the_frames_it_skipped_by_why() {
        let none = [
            ("queue_full", 0),
            ("over_limit", 0),
            ("low_disk", 0),
            ("write_error", 0),
        ];
        assert_eq!(archive_line(None), None);
        assert_eq!(archive_line(Some(none)), None);
        let mut some = none;
        some[0].1 = 12;
        some[3].1 = 1;
        let line = archive_line(Some(some)).unwrap();
        assert!(
            line.starts_with("archive: 13 frame(s) not kept (12 queue_full, 1 write_error;"),
            "{line}"
        );
    }

    #[test]
    fn a_camera_that_never_streamed_is_not_said_to_have_recovered() {
        let never = SourceOutages {
            lost: 1,
            recovered: 0,
            failed_tries: 3,
        };
        let line = never.render(0).unwrap();
        assert!(!line.contains("recovered inside"), "{line}");
        assert!(
            line.contains("never recovered")
                && line.contains("3 reopen tries failed")
                && line.contains("no frame ever arrived"),
            "{line}"
        );
        let back = SourceOutages {
            lost: 2,
            recovered: 2,
            failed_tries: 0,
        };
        assert_eq!(
            back.render(100).unwrap(),
            "source: lost 2 time(s), recovered inside the process each time\n"
        );
        assert_eq!(SourceOutages::default().render(0), None);
    }
}
