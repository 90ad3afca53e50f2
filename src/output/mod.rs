//! The last stage: decide each frame, hand its verdict to the line
//! (`line::Line`: MQTT and, at a deadline, `late`), append its JSON line to
//! the results file, log it, count it, and hand its buffers back for the next frame.
//!
//! Results are written in capture order (the channel preserves it) and every
//! delivered frame gets exactly one line: inspected, dropped or failed.

mod pending;
mod results_file;
mod taps;

pub use crate::timestamp::write_rfc3339;
pub use results_file::{OutputError, ResultSink, ResultsFileStatus};
pub use taps::{Latencies, ResultTaps};

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crossbeam_channel::{Receiver, Sender, select};
use serde::Serialize;

use crate::config::{ArchiveConfig, DecisionConfig, OutputConfig};
use crate::decision::{self, Decision, Reason};
use crate::frame::{FailedStage, FrameMeta, FrameWork, StageMessage};
use crate::json_line::{self, write_json};
use crate::line::{Delivery, Line, ModelIds};
use crate::service::Liveness;
use crate::shadow::{LINE_WAIT, ShadowHandoff, ShadowVerdict};
use crate::stats::{ResultCounters, RunStats};
use pending::PendingLines;

/// Settings the operator may change at run time (SIGHUP).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSettings {
    /// Each camera's thresholds and deadline, by `FrameMeta::camera`.
    pub decisions: Vec<DecisionConfig>,
    pub output: OutputConfig,
    pub archive: Option<ArchiveConfig>,
}

/// Latencies of one frame in milliseconds: preprocess, segment, classify, total.
pub type FrameLatencies = [f64; 4];

/// Formats one result line into `line` (cleared first). Reuses the buffer's
/// capacity: no allocation once it has grown to a line's size.
pub fn format_result(
    line: &mut String,
    camera: Option<&str>,
    meta: &FrameMeta,
    decision: &Decision,
    latencies: Option<&FrameLatencies>,
) {
    let mut result = ResultLine::new(meta, decision, latencies);
    result.camera = camera;
    write_json(line, &result);
}

/// Formats the output stage's result line into `line` (cleared first):
/// `format_result`'s line with `"late"` (the line got a `late` fail for this
/// part instead of this result) and `"models"` (the model ids) after it.
pub fn format_output_line(
    line: &mut String,
    camera: Option<&str>,
    meta: &FrameMeta,
    decision: &Decision,
    latencies: Option<&FrameLatencies>,
    late: bool,
    models: Option<&ModelIds>,
) {
    let mut result = ResultLine::new(meta, decision, latencies);
    result.camera = camera;
    write_json(
        line,
        &OutputLine {
            result,
            late,
            models,
        },
    );
}

/// One frame's result, as the results file (and `inspect`, which names the
/// image first) writes it; the key order is the line's.
#[derive(Serialize)]
pub struct ResultLine<'a> {
    /// With `[cameras.NAME]`: the camera (its `seq` counts on its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    camera: Option<&'a str>,
    seq: u64,
    #[serde(serialize_with = "json_line::rfc3339")]
    ts: SystemTime,
    verdict: &'static str,
    reason: &'static str,
    #[serde(serialize_with = "json_line::six_decimals")]
    defect_prob: Option<f64>,
    #[serde(serialize_with = "json_line::six_decimals")]
    seal_area: Option<f64>,
    /// `null` for a frame no stage timed (not inspected, not captured).
    latency_ms: Option<LatencyMs>,
}

impl ResultLine<'_> {
    pub fn new(meta: &FrameMeta, decision: &Decision, latencies: Option<&FrameLatencies>) -> Self {
        ResultLine {
            camera: None,
            seq: meta.seq,
            ts: meta.captured_at,
            verdict: decision.verdict.as_str(),
            reason: decision.reason.as_str(),
            defect_prob: decision.defect_prob,
            seal_area: decision.seal_area,
            latency_ms: latencies.map(|&[preprocess, segment, classify, total]| LatencyMs {
                preprocess,
                segment,
                classify,
                total,
            }),
        }
    }
}

#[derive(Serialize)]
struct LatencyMs {
    #[serde(serialize_with = "json_line::three_decimals")]
    preprocess: f64,
    #[serde(serialize_with = "json_line::three_decimals")]
    segment: f64,
    #[serde(serialize_with = "json_line::three_decimals")]
    classify: f64,
    #[serde(serialize_with = "json_line::three_decimals")]
    total: f64,
}

/// The output stage's line (`format_output_line`): the result's fields,
/// then what the output stage adds.
#[derive(Serialize)]
struct OutputLine<'a> {
    #[serde(flatten)]
    result: ResultLine<'a>,
    late: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    models: Option<&'a ModelIds>,
}

/// What the output thread needs; built by `pipeline`.
pub struct OutputStage {
    pub input: Receiver<StageMessage>,
    /// Work records go back to preprocess for the next frame.
    pub recycle: Sender<Box<FrameWork>>,
    /// New settings after a reload.
    pub reload: Receiver<LiveSettings>,
    pub settings: LiveSettings,
    pub defect_class: usize,
    pub sink: ResultSink,
    pub stats: Arc<Mutex<RunStats>>,
    /// Every result line is counted here once (the run summary, `/metrics`
    /// and the status page all read these counters).
    pub counters: ResultCounters,
    pub liveness: Liveness,
    /// Frames before this `seq` are written but left out of the statistics (warm-up).
    pub measure_from_seq: u64,
    /// The cameras, by `FrameMeta::camera`: each one's name and line.
    pub cameras: Vec<OutputCamera>,
    /// Ids of the models, written into every result line: those that judged
    /// the frame, else (a frame no model saw) the ones that judged the last.
    pub models: Option<Arc<ModelIds>>,
    /// Metrics, the status page and the archive (`status::OperatorTaps`).
    pub taps: Box<dyn ResultTaps>,
    /// Where frames due to the shadow go, and its verdicts come from (the
    /// pipeline always gives one: a `[shadow]` may come with a reload);
    /// `None`: results are written as they come.
    pub shadow: Option<ShadowHandoff>,
}

/// One camera as the output stage sees it.
pub struct OutputCamera {
    /// `[cameras.NAME]`'s name, written into its lines; `None` for `[source]`.
    pub name: Option<Arc<str>>,
    /// Where its verdicts go to the line (MQTT, the deadline); `None`:
    /// results file only.
    pub line: Option<Arc<Line>>,
}

/// How often an idle output thread flushes the file and the taps.
const IDLE: Duration = Duration::from_millis(500);

impl LiveSettings {
    /// The thresholds of `camera` (the first camera's for an index out of
    /// range, which the pipeline never makes).
    pub fn decision_of(&self, camera: crate::frame::CameraIndex) -> &DecisionConfig {
        self.decisions
            .get(usize::from(camera))
            .unwrap_or(&self.decisions[0])
    }
}

impl OutputStage {
    /// The camera's name for a log line ("" for `[source]`).
    fn camera_label(&self, camera: crate::frame::CameraIndex) -> &str {
        self.cameras
            .get(usize::from(camera))
            .and_then(|c| c.name.as_deref())
            .unwrap_or_default()
    }

    /// Runs until `End`; returns the number of result lines written.
    pub fn run(mut self) -> Result<u64, OutputError> {
        let mut line = String::with_capacity(512);
        let mut pending = PendingLines::default();
        let mut written = 0u64;
        let input = self.input.clone();
        let verdicts = self
            .shadow
            .as_ref()
            .map_or_else(crossbeam_channel::never, |s| s.verdicts().clone());
        loop {
            // The idle tick also writes a line that waited LINE_WAIT for the
            // shadow (LINE_WAIT is longer than IDLE).
            let message = select! {
                recv(input) -> message => match message {
                    Ok(m) => m,
                    Err(_) => break,
                },
                recv(verdicts) -> verdict => {
                    if let Ok(verdict) = verdict {
                        pending.attach(&verdict);
                    }
                    self.write_pending(&mut pending, false)?;
                    continue;
                },
                default(IDLE) => {
                    self.apply_reload()?;
                    self.write_pending(&mut pending, false)?;
                    self.sink.flush()?;
                    self.taps.idle();
                    continue;
                },
            };
            self.apply_reload()?;
            match message {
                StageMessage::Inspect(mut work) => {
                    let thresholds = self.settings.decision_of(work.meta.camera);
                    let decision = decision::decide(&work, self.defect_class, thresholds);
                    let t = &work.timings;
                    let total = work.meta.captured_instant.elapsed().as_secs_f64() * 1e3;
                    let latencies = [t.preprocess_ms, t.segment_ms, t.classify_ms, total];
                    if let Some((stage, message)) = &work.error {
                        log::warn!(target: "sealcheck::verdict", camera = self.camera_label(work.meta.camera), seq = work.meta.seq, stage = stage.as_str(), error = message.as_str(); "frame failed in {}: {message}", stage.as_str());
                    }
                    if let Some(models) = &work.models {
                        self.models = Some(Arc::clone(models));
                    }
                    let meta = work.meta;
                    self.emit(
                        &mut line,
                        &mut pending,
                        &meta,
                        &decision,
                        Some(&latencies),
                        Some(&mut work),
                    )?;
                    written += 1;
                    // The preprocess stage may already be gone at the end of a run.
                    let _ = self.recycle.send(work);
                }
                StageMessage::NotInspected { first, count } => {
                    for i in 0..count {
                        let meta = FrameMeta {
                            seq: first.seq + i,
                            ..first
                        };
                        self.emit(
                            &mut line,
                            &mut pending,
                            &meta,
                            &Decision::not_inspected(),
                            None,
                            None,
                        )?;
                        written += 1;
                    }
                }
                StageMessage::CaptureFailed { meta, message } => {
                    log::warn!(target: "sealcheck::verdict", camera = self.camera_label(meta.camera), seq = meta.seq, stage = "capture", error = message.as_str(); "frame could not be captured: {message}");
                    self.emit(
                        &mut line,
                        &mut pending,
                        &meta,
                        &Decision::error(),
                        None,
                        None,
                    )?;
                    written += 1;
                }
                StageMessage::End => break,
            }
            self.write_pending(&mut pending, false)?;
        }
        self.finish_shadow(&mut pending, &verdicts)?;
        // Lines that never reached the file are counted in the sink's status.
        self.sink.close();
        self.taps.finish();
        Ok(written)
    }

    /// At the end: the shadow's verdicts still to come, for at most
    /// `LINE_WAIT`; then every line is written.
    fn finish_shadow(
        &mut self,
        pending: &mut PendingLines,
        verdicts: &Receiver<ShadowVerdict>,
    ) -> Result<(), OutputError> {
        let until = std::time::Instant::now() + LINE_WAIT;
        while pending.awaiting() > 0 {
            match verdicts.recv_deadline(until) {
                Ok(verdict) => {
                    pending.attach(&verdict);
                }
                Err(_) => break,
            }
        }
        self.write_pending(pending, true)
    }

    fn write_pending(
        &mut self,
        pending: &mut PendingLines,
        force: bool,
    ) -> Result<(), OutputError> {
        let sink = &mut self.sink;
        let gave_up = pending.flush(LINE_WAIT, force, |line| sink.write_line(line))?;
        if gave_up > 0 {
            log::warn!(target: "sealcheck::shadow", lines = gave_up, wait_s = LINE_WAIT.as_secs();
                "result lines written without the shadow's verdict: it did not come in time");
        }
        Ok(())
    }

    fn emit(
        &mut self,
        line: &mut String,
        pending: &mut PendingLines,
        meta: &FrameMeta,
        d: &Decision,
        latencies: Option<&FrameLatencies>,
        mut work: Option<&mut FrameWork>,
    ) -> Result<(), OutputError> {
        let camera = self.cameras.get(usize::from(meta.camera));
        let name = camera.and_then(|c| c.name.as_deref());
        // The line first: it has a deadline, the file does not.
        let delivery = camera.and_then(|c| c.line.as_ref()).map(|l| {
            let latency = latencies.map_or_else(
                || meta.captured_instant.elapsed().as_secs_f64() * 1e3,
                |l| l[3],
            );
            l.deliver(meta, d, latency, self.models.as_ref())
        });
        let late = delivery == Some(Delivery::Late);
        // Preprocessing or a model failed this frame (not capture): see Liveness.
        let engine_failure = work
            .as_ref()
            .and_then(|w| w.error.as_ref())
            .map(|(stage, _)| *stage)
            .filter(|stage| *stage != FailedStage::Capture);
        format_output_line(line, name, meta, d, latencies, late, self.models.as_deref());
        // After the line got the verdict: the shadow never delays it.
        let shadowed = match (&self.shadow, work.as_deref_mut()) {
            (Some(shadow), Some(w)) => {
                shadow.offer(w, d, self.settings.decision_of(meta.camera), line)
            }
            _ => false,
        };
        if shadowed || !pending.is_empty() {
            pending.park(meta, line, shadowed);
        } else {
            self.sink.write_line(line)?;
        }
        // Measured (not a warm-up frame): its latencies, recorded before it
        // is counted, since the first one fixes where the summary counts from.
        if meta.seq >= self.measure_from_seq
            && let Ok(mut stats) = self.stats.lock()
        {
            stats.record(latencies.copied());
            if self.cameras.len() > 1
                && let Some(l) = latencies
            {
                stats.record_camera(usize::from(meta.camera), l[3]);
            }
        }
        self.counters.record(d.reason);
        self.taps.record(meta, d, latencies, line, work);
        if self.settings.output.log_verdicts {
            let (defect_prob, seal_area) = (
                d.defect_prob.unwrap_or(f64::NAN),
                d.seal_area.unwrap_or(f64::NAN),
            );
            let latency_ms = latencies.map_or(f64::NAN, |l| l[3]);
            // `camera=` only with named cameras: a single `[source]`'s
            // journal lines stay as they were.
            match name {
                Some(camera) => log::info!(target: "sealcheck::verdict", camera = camera,
                    seq = meta.seq, verdict = d.verdict.as_str(), reason = d.reason.as_str(),
                    defect_prob = defect_prob, seal_area = seal_area, latency_ms = latency_ms,
                    late = late; "verdict"),
                None => log::info!(target: "sealcheck::verdict",
                    seq = meta.seq, verdict = d.verdict.as_str(), reason = d.reason.as_str(),
                    defect_prob = defect_prob, seal_area = seal_area, latency_ms = latency_ms,
                    late = late; "verdict"),
            }
        }
        if late && !self.settings.output.log_verdicts {
            log::debug!(target: "sealcheck::verdict", camera = name.unwrap_or_default(), seq = meta.seq, reason = d.reason.as_str(); "late result: the line got a late fail for this part");
        }
        match (d.reason, engine_failure) {
            (Reason::Error, Some(stage)) => self.liveness.frame_failed_inspection(stage),
            (Reason::NotInspected | Reason::Error, _) => self.liveness.frame_finished_uninspected(),
            _ => self.liveness.frame_finished(),
        }
        Ok(())
    }

    fn apply_reload(&mut self) -> Result<(), OutputError> {
        let Some(mut new) = self.reload.try_iter().last() else {
            return Ok(());
        };
        if new.output.results != self.settings.output.results
            || new.output.flush_each_line != self.settings.output.flush_each_line
        {
            match ResultSink::open_sharing(&new.output, self.sink.status()) {
                Ok(sink) => {
                    self.sink.close();
                    log::info!(target: "sealcheck::output", results = sink.path().display().to_string().as_str(); "results file reopened after reload");
                    self.sink = sink;
                }
                Err(e) => {
                    // Inspection goes on into the old file rather than stopping.
                    log::error!(target: "sealcheck::output", error = e.to_string().as_str(); "reload: the new results file cannot be opened; results keep going to {}", self.sink.path().display());
                    new.output.results = self.settings.output.results.clone();
                    new.output.flush_each_line = self.settings.output.flush_each_line;
                }
            }
        }
        for (index, camera) in self.cameras.iter().enumerate() {
            let (Some(old), Some(new)) =
                (self.settings.decisions.get(index), new.decisions.get(index))
            else {
                continue;
            };
            let name = camera.name.as_deref().unwrap_or_default();
            if new.deadline != old.deadline
                && let Some(line) = &camera.line
            {
                line.set_deadline(new.deadline);
                log::info!(target: "sealcheck::decision", camera = name, deadline_ms = new.deadline.map_or(0, |d| d.as_millis() as u64);
                    "per-part deadline changed by reload; it applies to frames captured from now on");
            }
            if new != old {
                log::info!(
                    target: "sealcheck::decision",
                    camera = name,
                    defect_threshold = new.defect_threshold,
                    no_seal_below = new.no_seal_below,
                    min_seal_area = new.min_seal_area,
                    max_seal_area = new.max_seal_area;
                    "decision thresholds changed by reload"
                );
            }
        }
        self.sink.set_rotation(new.output.rotation);
        if new.archive != self.settings.archive {
            self.taps.reload_archive(new.archive.as_ref());
        }
        self.settings = new;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Verdict;
    use std::time::UNIX_EPOCH;

    #[test]
    fn result_line_is_json_with_the_schema() {
        let meta = FrameMeta {
            seq: 7,
            camera: 0,
            captured_at: UNIX_EPOCH,
            captured_instant: std::time::Instant::now(),
        };
        let d = Decision {
            verdict: Verdict::Fail,
            reason: Reason::Defect,
            defect_prob: Some(0.93),
            seal_area: Some(0.2),
        };
        let mut line = String::new();
        format_result(&mut line, None, &meta, &d, Some(&[1.0, 2.0, 3.0, 7.5]));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["ts"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["verdict"], "fail");
        assert_eq!(v["reason"], "defect");
        assert!((v["defect_prob"].as_f64().unwrap() - 0.93).abs() < 1e-9);
        assert_eq!(v["latency_ms"]["total"], 7.5);
    }

    #[test]
    fn line_fields_are_appended_as_json() {
        let meta = FrameMeta {
            seq: 3,
            camera: 0,
            captured_at: UNIX_EPOCH,
            captured_instant: std::time::Instant::now(),
        };
        let mut line = String::new();
        let models = ModelIds {
            segmentation: "aaaaaaaaaaaa".into(),
            classifier: "bbbbbbbbbbbb".into(),
        };
        format_output_line(
            &mut line,
            None,
            &meta,
            &Decision::error(),
            None,
            true,
            Some(&models),
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["late"], true);
        assert_eq!(v["models"]["segmentation"], "aaaaaaaaaaaa");
        assert_eq!(v["reason"], "error");
    }

    /// People parse these lines byte for byte: the bytes are pinned as they
    /// were when the line was still written by hand (fixed decimals, nulls).
    #[test]
    fn result_line_bytes_are_pinned() {
        let meta = FrameMeta {
            seq: 7,
            camera: 0,
            captured_at: UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123),
            captured_instant: std::time::Instant::now(),
        };
        let d = Decision {
            verdict: Verdict::Fail,
            reason: Reason::Defect,
            defect_prob: Some(0.93),
            seal_area: Some(f64::NAN),
        };
        let mut line = String::new();
        format_result(
            &mut line,
            None,
            &meta,
            &d,
            Some(&[1.0, 2.25, 0.0004, 12_345.678_9]),
        );
        assert_eq!(
            line,
            "{\"seq\":7,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"fail\",\"reason\":\"defect\",\"defect_prob\":0.930000,\"seal_area\":null,\"latency_ms\":{\"preprocess\":1.000,\"segment\":2.250,\"classify\":0.000,\"total\":12345.679}}"
        );
        let d = Decision {
            verdict: Verdict::Pass,
            reason: Reason::Ok,
            defect_prob: Some(1e-7),
            seal_area: Some(-0.0),
        };
        format_result(&mut line, None, &meta, &d, Some(&[0.0, 0.0, 0.0, 0.0]));
        assert_eq!(
            line,
            "{\"seq\":7,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"pass\",\"reason\":\"ok\",\"defect_prob\":0.000000,\"seal_area\":-0.000000,\"latency_ms\":{\"preprocess\":0.000,\"segment\":0.000,\"classify\":0.000,\"total\":0.000}}"
        );
        format_result(&mut line, None, &meta, &Decision::not_inspected(), None);
        assert_eq!(
            line,
            "{\"seq\":7,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"fail\",\"reason\":\"not_inspected\",\"defect_prob\":null,\"seal_area\":null,\"latency_ms\":null}"
        );
    }

    #[test]
    fn line_fields_bytes_are_pinned() {
        let meta = FrameMeta {
            seq: 3,
            camera: 0,
            captured_at: UNIX_EPOCH,
            captured_instant: std::time::Instant::now(),
        };
        let models = ModelIds {
            segmentation: "0123456789ab".into(),
            classifier: "unreadable".into(),
        };
        let mut line = String::new();
        format_output_line(
            &mut line,
            None,
            &meta,
            &Decision::error(),
            None,
            true,
            Some(&models),
        );
        assert_eq!(
            line,
            "{\"seq\":3,\"ts\":\"1970-01-01T00:00:00.000Z\",\"verdict\":\"fail\",\"reason\":\"error\",\"defect_prob\":null,\"seal_area\":null,\"latency_ms\":null,\"late\":true,\"models\":{\"segmentation\":\"0123456789ab\",\"classifier\":\"unreadable\"}}"
        );
        format_output_line(
            &mut line,
            None,
            &meta,
            &Decision::late(),
            Some(&[1.5, 2.0, 3.0, 70.25]),
            false,
            None,
        );
        assert_eq!(
            line,
            "{\"seq\":3,\"ts\":\"1970-01-01T00:00:00.000Z\",\"verdict\":\"fail\",\"reason\":\"late\",\"defect_prob\":null,\"seal_area\":null,\"latency_ms\":{\"preprocess\":1.500,\"segment\":2.000,\"classify\":3.000,\"total\":70.250},\"late\":false}"
        );
    }

    #[test]
    fn not_inspected_line_has_nulls() {
        let meta = FrameMeta {
            seq: 1,
            camera: 0,
            captured_at: UNIX_EPOCH,
            captured_instant: std::time::Instant::now(),
        };
        let mut line = String::new();
        format_result(&mut line, None, &meta, &Decision::not_inspected(), None);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["reason"], "not_inspected");
        assert!(v["defect_prob"].is_null() && v["latency_ms"].is_null());
    }
}
