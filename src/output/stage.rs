//! The output thread: each frame's decision, its verdict to the line, its
//! result line in capture order (waiting for the shadow's verdict where one
//! is due), the counts and the taps, and its work record back.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};

use super::cycles::CycleGather;
use super::frame_spans::FrameSpans;
use super::pending::PendingLines;
use super::result_line::{FrameLatencies, format_output_line};
use super::results_file::{OutputError, ResultSink};
use super::taps::ResultTaps;
use crate::config::{ArchiveConfig, CavityLayout, DecisionConfig, OutputConfig};
use crate::cycle::CycleVerdicts;
use crate::decision::{self, Decision, Reason};
use crate::frame::{FailedStage, FrameMeta, FrameWork, PartMiss, StageMessage};
use crate::line::{Delivery, Line, ModelIds};
use crate::service::Liveness;
use crate::shadow::{LINE_WAIT, ShadowHandoff, ShadowVerdict};
use crate::stats::{ResultCounters, RunStats};

/// Settings the operator may change at run time (SIGHUP).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSettings {
    /// Each camera's thresholds and deadline, by `FrameMeta::camera`.
    pub decisions: Vec<DecisionConfig>,
    pub output: OutputConfig,
    pub archive: Option<ArchiveConfig>,
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
    /// The cycle being gathered, for cameras with a cavity layout.
    pub cycles: CycleGather,
}

/// One camera as the output stage sees it.
pub struct OutputCamera {
    /// `[cameras.NAME]`'s name, written into its lines; `None` for `[source]`.
    pub name: Option<Arc<str>>,
    /// Where its verdicts go to the line (MQTT, the deadline); `None`:
    /// results file only.
    pub line: Option<Arc<Line>>,
    /// Its cavity layout: each frame is a cycle of cavities, one work
    /// record each, gathered here (`cycles.rs`); `None`: one seal a frame.
    pub layout: Option<Arc<CavityLayout>>,
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

    /// The thresholds `camera`'s frame is decided with: the camera's own,
    /// under the recipe the frame's models were taken for (`models`), so
    /// thresholds change with the models, at the same part.
    pub fn thresholds(
        &self,
        camera: crate::frame::CameraIndex,
        models: Option<&ModelIds>,
    ) -> DecisionConfig {
        let own = self.decision_of(camera);
        match models.and_then(|m| m.recipe.as_deref()) {
            Some(recipe) => recipe.decision(own),
            None => *own,
        }
    }
}

impl OutputStage {
    /// The camera's name for a log line ("" for `[source]`).
    /// The camera's cavity layout, if it has one (a handle: no copy).
    fn layout_of(&self, camera: crate::frame::CameraIndex) -> Option<Arc<CavityLayout>> {
        self.cameras
            .get(usize::from(camera))
            .and_then(|c| c.layout.clone())
    }

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
        let mut frame_spans = FrameSpans::default();
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
                StageMessage::Inspect(work) if work.cavity.is_some() => {
                    written +=
                        self.gather_cavity(work, &mut line, &mut pending, &mut frame_spans)?;
                }
                StageMessage::Inspect(mut work) => {
                    let thresholds = self
                        .settings
                        .thresholds(work.meta.camera, work.models.as_deref());
                    let decision = decision::decide(&work, self.defect_class, &thresholds);
                    let t = &work.timings;
                    let now = Instant::now();
                    let total = now.duration_since(work.meta.captured_instant).as_secs_f64() * 1e3;
                    if work.meta.seq >= self.measure_from_seq {
                        frame_spans.record(&work.meta, &t.stamps, now);
                    }
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
                        None,
                    )?;
                    written += 1;
                    // The preprocess stage may already be gone at the end of a run.
                    let _ = self.recycle.send(work);
                }
                StageMessage::NotInspected { first, count } => {
                    written += self.end_cut_cycle(&mut line, &mut pending, &mut frame_spans)?;
                    for i in 0..count {
                        let meta = first.nth_of_run(i);
                        let layout = self.layout_of(meta.camera);
                        let cycle = self.cycles.failed(layout.as_deref(), Reason::NotInspected);
                        self.emit(
                            &mut line,
                            &mut pending,
                            &meta,
                            &Decision::not_inspected(),
                            None,
                            None,
                            cycle.as_ref(),
                        )?;
                        written += 1;
                    }
                }
                StageMessage::CaptureFailed { meta, message } => {
                    written += self.end_cut_cycle(&mut line, &mut pending, &mut frame_spans)?;
                    log::warn!(target: "sealcheck::verdict", camera = self.camera_label(meta.camera), seq = meta.seq, stage = "capture", error = message.as_str(); "frame could not be captured: {message}");
                    let layout = self.layout_of(meta.camera);
                    let cycle = self.cycles.failed(layout.as_deref(), Reason::Error);
                    self.emit(
                        &mut line,
                        &mut pending,
                        &meta,
                        &Decision::error(),
                        None,
                        None,
                        cycle.as_ref(),
                    )?;
                    written += 1;
                }
                StageMessage::PartMissed { meta, miss } => {
                    let reason = match miss {
                        PartMiss::NoFrame => Reason::NoFrame,
                        PartMiss::Overrun => Reason::Overrun,
                    };
                    written += self.end_cut_cycle(&mut line, &mut pending, &mut frame_spans)?;
                    log::warn!(target: "sealcheck::verdict", camera = self.camera_label(meta.camera), part_id = meta.part.id, reason = reason.as_str();
                        "part {} got no frame to judge: it fails {}", meta.part.id, reason.as_str());
                    let layout = self.layout_of(meta.camera);
                    let cycle = self.cycles.failed(layout.as_deref(), reason);
                    self.emit(
                        &mut line,
                        &mut pending,
                        &meta,
                        &Decision::failed(reason),
                        None,
                        None,
                        cycle.as_ref(),
                    )?;
                    written += 1;
                }
                StageMessage::End => {
                    written += self.end_cut_cycle(&mut line, &mut pending, &mut frame_spans)?;
                    break;
                }
            }
            self.write_pending(&mut pending, false)?;
        }
        frame_spans.log();
        self.finish_shadow(&mut pending, &verdicts)?;
        // Lines that never reached the file are counted in the sink's status.
        self.sink.close();
        self.taps.finish();
        Ok(written)
    }

    /// Takes one cavity's record (`cycles.rs` gathers them); at the cycle's
    /// last, decides and writes the cycle. Returns the result lines written
    /// (0 or 1, 2 after a cycle cut short).
    fn gather_cavity(
        &mut self,
        work: Box<FrameWork>,
        line: &mut String,
        pending: &mut PendingLines,
        frame_spans: &mut FrameSpans,
    ) -> Result<u64, OutputError> {
        let mut written = 0;
        let other_frame = self
            .cycles
            .first()
            .is_some_and(|w| (w.meta.camera, w.meta.seq) != (work.meta.camera, work.meta.seq));
        if other_frame {
            written += self.end_cut_cycle(line, pending, frame_spans)?;
        }
        if self.cycles.push(work) {
            self.finish_cycle(line, pending, frame_spans)?;
            written += 1;
        }
        Ok(written)
    }

    /// Writes a cycle still gathered (before a message of another frame,
    /// and at the end), which the stages before never leave: its missing
    /// cavities fail with `error`.
    fn end_cut_cycle(
        &mut self,
        line: &mut String,
        pending: &mut PendingLines,
        frame_spans: &mut FrameSpans,
    ) -> Result<u64, OutputError> {
        let Some(first) = self.cycles.first() else {
            return Ok(0);
        };
        log::error!(target: "sealcheck::verdict", camera = self.camera_label(first.meta.camera), seq = first.meta.seq;
            "a cycle's cavities did not all arrive: the missing ones fail with error");
        self.finish_cycle(line, pending, frame_spans)?;
        Ok(1)
    }

    /// Decides each gathered cavity, writes the cycle as one result and
    /// sends the records back.
    fn finish_cycle(
        &mut self,
        line: &mut String,
        pending: &mut PendingLines,
        frame_spans: &mut FrameSpans,
    ) -> Result<(), OutputError> {
        let Some(meta) = self.cycles.first().map(|w| w.meta) else {
            return Ok(());
        };
        let Some(layout) = self
            .cameras
            .get(usize::from(meta.camera))
            .and_then(|c| c.layout.clone())
        else {
            unreachable!("cavity records come only from cameras with a layout");
        };
        // A cycle is judged by one recipe (the model thread switches only
        // between parts): its first cavity's.
        let models = self.cycles.records().first().and_then(|w| w.models.clone());
        let thresholds = self.settings.thresholds(meta.camera, models.as_deref());
        let (verdicts, timings) = self.cycles.decide(&layout, self.defect_class, &thresholds);
        let overall = verdicts.overall();
        let mut records = self.cycles.take_records();
        let failed = records.iter().find_map(|w| {
            let cavity = w.cavity.map_or(0, |t| t.number);
            w.error
                .as_ref()
                .map(|(stage, message)| (cavity, *stage, message))
        });
        if let Some((cavity, stage, message)) = failed {
            log::warn!(target: "sealcheck::verdict", camera = self.camera_label(meta.camera), seq = meta.seq, cavity = cavity, stage = stage.as_str(), error = message.as_str();
                "cavity {cavity} failed in {}: {message}", stage.as_str());
        }
        if let Some(models) = records.iter().find_map(|w| w.models.as_ref()) {
            self.models = Some(Arc::clone(models));
        }
        let now = Instant::now();
        if meta.seq >= self.measure_from_seq {
            frame_spans.record(&meta, &records[0].timings.stamps, now);
        }
        let total = now.duration_since(meta.captured_instant).as_secs_f64() * 1e3;
        let latencies = [timings[0], timings[1], timings[2], total];
        self.emit(
            line,
            pending,
            &meta,
            &overall,
            Some(&latencies),
            Some(&mut records[0]),
            Some(&verdicts),
        )?;
        for record in records.drain(..) {
            // The preprocess stage may already be gone at the end of a run.
            let _ = self.recycle.send(record);
        }
        self.cycles.give_back(records);
        Ok(())
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

    /// One result: to the line, the results file, the counts, the taps and
    /// the journal. `cycle`: a camera with a cavity layout's cavities, whose
    /// decisive one `d` is (`crate::cycle`).
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        line: &mut String,
        pending: &mut PendingLines,
        meta: &FrameMeta,
        d: &Decision,
        latencies: Option<&FrameLatencies>,
        mut work: Option<&mut FrameWork>,
        cycle: Option<&Arc<CycleVerdicts>>,
    ) -> Result<(), OutputError> {
        let camera = self.cameras.get(usize::from(meta.camera));
        let name = camera.and_then(|c| c.name.as_deref());
        // The line first: it has a deadline, the file does not.
        let delivery = camera.and_then(|c| c.line.as_ref()).map(|l| {
            // Capture to verdict; a triggered part's from its trigger.
            let latency = match (meta.part.trigger, latencies) {
                (None, Some(l)) => l[3],
                _ => meta.started_instant().elapsed().as_secs_f64() * 1e3,
            };
            l.deliver(meta, d, latency, self.models.as_ref(), cycle)
        });
        let late = delivery == Some(Delivery::Late);
        // Preprocessing or a model failed this frame (not capture): see Liveness.
        let engine_failure = work
            .as_ref()
            .and_then(|w| w.error.as_ref())
            .map(|(stage, _)| *stage)
            .filter(|stage| *stage != FailedStage::Capture);
        let cycle = cycle.map(Arc::as_ref);
        format_output_line(
            line,
            name,
            meta,
            d,
            latencies,
            late,
            self.models.as_deref(),
            cycle,
        );
        // After the line got the verdict: the shadow never delays it. The
        // shadow judges whole frames: a cycle's cavities are not offered.
        let shadowed = match (&self.shadow, work.as_deref_mut()) {
            (Some(shadow), Some(w)) if cycle.is_none() => {
                let thresholds = self.settings.thresholds(meta.camera, w.models.as_deref());
                shadow.offer(w, d, &thresholds, line)
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
        self.counters.record_recipe(
            self.models.as_deref().and_then(ModelIds::recipe_name),
            d.reason,
        );
        self.taps.record(meta, d, latencies, line, work, cycle);
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
            // A trigger's fail without a frame: no frame left the pipeline.
            _ if !meta.part.framed => {}
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
            // Under a recipe with a deadline of its own, the recipe's stays.
            let recipe = self.models.as_ref().and_then(|m| m.recipe.as_deref());
            let deadline =
                |d: &DecisionConfig| recipe.map_or(d.deadline, |r| r.decision(d).deadline);
            if deadline(new) != deadline(old)
                && let Some(line) = &camera.line
            {
                line.set_deadline(deadline(new));
                log::info!(target: "sealcheck::decision", camera = name, deadline_ms = deadline(new).map_or(0, |d| d.as_millis() as u64);
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
