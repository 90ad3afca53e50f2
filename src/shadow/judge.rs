//! The shadow thread: opens the shadow (at start and on reload), judges the
//! frames handed to it, compares each with production's verdict and sends
//! its verdict back for the frame's result line.
//!
//! It runs at the lowest CPU priority (nice 19, which the engine's own
//! threads, made on this thread, inherit), so on a busy machine it takes
//! what the frame path leaves: it falls behind and frames are skipped
//! (counted), never queued.

use std::ops::ControlFlow;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, select};

use super::agreement::{Flip, ShadowAgreement, ShadowState};
use super::archive::{Disagreement, DisagreementArchive};
use super::engine::{self, ShadowRefused};
use super::handoff::{ShadowGate, ShadowOutcome, ShadowRecord, ShadowVerdict};
use crate::config::{Config, ShadowConfig};
use crate::decision::{self, Decision};
use crate::frame::{FailedStage, FrameSource, Next, PixelDemand, TensorGeometry};
use crate::infer::batcher::{BatchPath, Batcher};
use crate::infer::{BatchBuffers, BatchPolicy, BatchRuns, InferenceBackend, infer_batch};
use crate::model_id::ModelIds;
use crate::preprocess::{Preprocessor, cpu_preprocessor};

/// Records in flight between the output thread and the shadow: one being
/// judged, one waiting. More would only queue frames the shadow is late for.
pub const RECORDS: usize = 2;

/// Engine failures in a row after which the shadow is stopped.
const FAILURES_IN_A_ROW: u32 = 5;

/// A (re)configuration for the shadow thread: production's whole config
/// (`[shadow]`, the models and engine it derives from, `[archive]`).
pub struct ShadowChange {
    pub production: Box<Config>,
    /// Where the outcome of opening goes, when someone waits for it.
    pub reply: Option<Sender<Result<(), ShadowRefused>>>,
}

/// The shadow as it runs.
struct Running {
    backend: Box<dyn InferenceBackend>,
    models: Arc<ModelIds>,
    shadow: ShadowConfig,
    /// The engine config it was opened from, to tell whether a reload
    /// changes it.
    config: Config,
    /// The CPU preprocessing (device path frames, and the mask channel).
    preprocessor: Preprocessor,
    failures_in_a_row: u32,
}

pub struct ShadowJudge {
    pub(super) frames: Receiver<Box<ShadowRecord>>,
    pub(super) verdicts: Sender<ShadowVerdict>,
    pub(super) free: Sender<Box<ShadowRecord>>,
    pub(super) changes: Receiver<ShadowChange>,
    pub(super) gate: Arc<ShadowGate>,
    pub(super) demand: Arc<PixelDemand>,
    pub(super) host_tensors: bool,
    pub(super) agreement: Arc<ShadowAgreement>,
    /// Production's tensor shapes: a shadow must have the same.
    pub(super) geometry: TensorGeometry,
    pub(super) records_made: bool,
    running: Option<Running>,
    /// A shadow removed by a reload: it still judges the frames handed over
    /// before the output thread saw it go, then is dropped (`RETIRE_AFTER`
    /// without a frame).
    retired: Option<(Running, std::time::Instant)>,
    /// The models that judged last, for the lines of frames no engine could
    /// judge any more.
    last_models: Option<Arc<ModelIds>>,
    archive: Option<DisagreementArchive>,
    /// The records being judged together, and their outcomes (reused).
    #[allow(clippy::vec_box)]
    batch: Vec<Box<ShadowRecord>>,
    outcomes: Vec<ShadowOutcome>,
    buffers: BatchBuffers,
}

/// How long a removed shadow waits for frames handed over before its removal.
const RETIRE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

impl ShadowJudge {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        frames: Receiver<Box<ShadowRecord>>,
        verdicts: Sender<ShadowVerdict>,
        free: Sender<Box<ShadowRecord>>,
        changes: Receiver<ShadowChange>,
        gate: Arc<ShadowGate>,
        demand: Arc<PixelDemand>,
        host_tensors: bool,
        agreement: Arc<ShadowAgreement>,
        geometry: TensorGeometry,
    ) -> Self {
        ShadowJudge {
            frames,
            verdicts,
            free,
            changes,
            gate,
            demand,
            host_tensors,
            agreement,
            geometry,
            records_made: false,
            running: None,
            retired: None,
            last_models: None,
            archive: None,
            batch: Vec::with_capacity(RECORDS),
            outcomes: Vec::with_capacity(RECORDS),
            buffers: BatchBuffers::default(),
        }
    }

    /// Judges what is handed over, and applies changes between batches,
    /// until the output stage ends.
    pub fn run(mut self) {
        crate::archive::lower_thread_priority();
        let mut inbox = Inbox {
            // The inbox alone reads changes from now on.
            changes: std::mem::replace(&mut self.changes, crossbeam_channel::never()),
            frames: self.frames.clone(),
        };
        // Never waits for a second record: a record waiting is a result
        // line waiting.
        let policy = BatchPolicy {
            max_batch: RECORDS,
            wait: std::time::Duration::ZERO,
        };
        // Ends when the output stage is gone: its hand-over closes.
        Batcher::new(policy, Arc::default()).run(&mut inbox, &mut self);
        self.stop_taking_frames();
    }

    /// A shadow removed by a reload is dropped once no frame came for
    /// `RETIRE_AFTER`: its engine's memory goes back then.
    fn drop_retired_when_idle(&mut self) {
        if self
            .retired
            .as_ref()
            .is_some_and(|(_, since)| since.elapsed() >= RETIRE_AFTER)
        {
            self.retired = None;
        }
    }

    fn stop_taking_frames(&self) {
        self.gate.set_every(0);
        self.demand.set_shadow_every(0);
    }

    fn start_taking_frames(&self, every: u64) {
        self.gate.set_every(every);
        if !self.host_tensors {
            // The device path keeps pixels on the host only when asked.
            self.demand.set_shadow_every(every);
        }
    }

    fn apply(&mut self, change: ShadowChange) {
        let production = change.production;
        let outcome = self.apply_config(&production);
        if let Some(reply) = change.reply {
            let _ = reply.send(outcome);
        }
    }

    fn apply_config(&mut self, production: &Config) -> Result<(), ShadowRefused> {
        match (&production.archive, &mut self.archive) {
            (Some(config), Some(archive)) => archive.reconfigure(config),
            (Some(config), None) => self.archive = Some(DisagreementArchive::open(config)),
            (None, _) => self.archive = None,
        }
        let Some(shadow) = &production.shadow else {
            if let Some(running) = self.running.take() {
                log::info!(target: "sealcheck::shadow", "[shadow] removed on reload: the shadow stopped");
                // Frames already handed over are still judged by it.
                self.retired = Some((running, std::time::Instant::now()));
            }
            self.stop_taking_frames();
            self.agreement.set_state(ShadowState::Off, None);
            return Ok(());
        };
        if let Some(running) = &mut self.running
            && same_models(&running.shadow, shadow)
            && engine::engine_config(production, shadow)
                .is_ok_and(|c| same_engine(&c, &running.config))
        {
            // Only `every` or the archive changed.
            running.shadow = shadow.clone();
            self.agreement.set_running(
                running.backend.kind().as_str(),
                (*running.models).clone(),
                shadow.every,
            );
            self.start_taking_frames(shadow.every);
            return Ok(());
        }
        if self.running.is_none() {
            self.agreement.set_state(ShadowState::Opening, None);
        }
        // No frame waits (nor its result line) while another engine opens:
        // none is offered meanwhile, and those already here are judged by
        // the running one first.
        self.stop_taking_frames();
        while let Ok(record) = self.frames.try_recv() {
            self.judge(record);
        }
        let started = std::time::Instant::now();
        match engine::open(production, shadow, self.geometry) {
            Ok(opened) => {
                if !self.records_made {
                    for _ in 0..RECORDS {
                        let _ = self
                            .free
                            .send(ShadowRecord::new(&self.geometry, production.decision));
                    }
                    self.records_made = true;
                }
                let kind = opened.backend.kind();
                log::info!(target: "sealcheck::shadow", engine = kind.as_str(), reason = opened.reason.as_str(),
                    segmentation = opened.models.segmentation.as_str(), classifier = opened.models.classifier.as_str(),
                    every = shadow.every, open_ms = started.elapsed().as_secs_f64() * 1e3;
                    "shadow running: it judges frames beside production and never touches a verdict");
                self.agreement
                    .set_running(kind.as_str(), (*opened.models).clone(), shadow.every);
                self.retired = None;
                self.running = Some(Running {
                    backend: opened.backend,
                    models: opened.models,
                    shadow: shadow.clone(),
                    preprocessor: cpu_preprocessor(&opened.config, self.geometry),
                    config: opened.config,
                    failures_in_a_row: 0,
                });
                self.start_taking_frames(shadow.every);
                Ok(())
            }
            Err(refused) => {
                log::error!(target: "sealcheck::shadow", step = refused.step, key = refused.key, detail = refused.detail.as_str(); "{refused}; production runs on without it");
                if let Some(running) = &self.running {
                    log::warn!(target: "sealcheck::shadow", "the shadow that was running goes on");
                    self.start_taking_frames(running.shadow.every);
                } else {
                    self.agreement
                        .set_state(ShadowState::Refused, Some(refused.to_string()));
                }
                Err(refused)
            }
        }
    }

    /// Judges one frame as a batch of one (frames handed over before
    /// another engine opens).
    fn judge(&mut self, record: Box<ShadowRecord>) {
        self.batch.push(record);
        self.judge_batch();
    }

    /// Judges the records gathered, compares each, and sends each verdict
    /// back: exactly one verdict per record received, whatever happens.
    fn judge_batch(&mut self) -> BatchRuns {
        let mut records = std::mem::take(&mut self.batch);
        let mut outcomes = std::mem::take(&mut self.outcomes);
        outcomes.clear();
        let engine = match (self.running.as_mut(), self.retired.as_mut()) {
            (Some(running), _) => Some(running),
            (None, Some((retired, since))) => {
                *since = std::time::Instant::now();
                Some(retired)
            }
            (None, None) => None,
        };
        let (made, models) = match engine {
            Some(running) => (
                running.judge(&mut records, &mut self.buffers, &mut outcomes),
                Arc::clone(&running.models),
            ),
            // Only after the engine failed too often (a removed one retires).
            None => {
                outcomes.extend(records.iter().map(|_| {
                    ShadowOutcome::Failed("the shadow was stopped before this frame".to_string())
                }));
                let models = self.last_models.clone().unwrap_or_else(|| {
                    Arc::new(ModelIds {
                        segmentation: "unknown".to_string(),
                        classifier: "unknown".to_string(),
                        recipe: None,
                    })
                });
                (BatchRuns::default(), models)
            }
        };
        for (record, outcome) in records.drain(..).zip(outcomes.drain(..)) {
            self.conclude(record, outcome, Arc::clone(&models));
        }
        self.batch = records;
        self.outcomes = outcomes;
        made
    }

    /// Compares one judged frame with production, keeps a disagreement,
    /// counts a failure, and sends the verdict and the record back.
    fn conclude(
        &mut self,
        record: Box<ShadowRecord>,
        outcome: ShadowOutcome,
        models: Arc<ModelIds>,
    ) {
        let seq = record.work.meta.seq;
        let camera = record.work.meta.camera;
        self.last_models = Some(Arc::clone(&models));
        let verdict = ShadowVerdict {
            seq,
            camera,
            outcome,
            models,
        };
        match &verdict.outcome {
            ShadowOutcome::Judged { decision, mask_iou } => {
                if let Some(r) = self.running.as_mut() {
                    r.failures_in_a_row = 0;
                }
                if let Some(snapshot) =
                    self.agreement
                        .record(&record.production, decision, *mask_iou)
                {
                    let s = &snapshot.since_start;
                    let w = &snapshot.last_1000;
                    log::info!(target: "sealcheck::shadow", compared = s.compared,
                        agreement = s.agreement.unwrap_or(f64::NAN),
                        pass_to_fail = s.flips.pass_to_fail, fail_to_pass = s.flips.fail_to_pass,
                        last_1000_pass_to_fail = w.flips.pass_to_fail, last_1000_fail_to_pass = w.flips.fail_to_pass,
                        mask_iou_mean = s.mask_iou_mean.unwrap_or(f64::NAN), mask_iou_worst = s.mask_iou_worst.unwrap_or(f64::NAN),
                        p99_abs_delta_defect_prob = s.p99_abs_delta_defect_prob.unwrap_or(f64::NAN),
                        skipped = snapshot.skipped, failures = snapshot.failures;
                        "shadow agreement");
                }
                if Flip::between(record.production.verdict, decision.verdict).is_some()
                    && let Some(archive) = &mut self.archive
                {
                    let mut line = record.production_line.clone();
                    verdict.append_to(&mut line);
                    archive.keep(&Disagreement {
                        meta: &record.work.meta,
                        pixels: &record.pixels,
                        mask_hw: self.geometry.seg_hw,
                        production_mask: record
                            .production_mask_valid
                            .then_some(record.production_mask.as_slice()),
                        shadow_mask: &record.work.mask,
                        production: &record.production,
                        shadow: decision,
                        result_line: &line,
                    });
                }
            }
            ShadowOutcome::Failed(message) => {
                self.agreement.failed();
                if let Some(r) = self.running.as_mut() {
                    r.failures_in_a_row += 1;
                    if r.failures_in_a_row == 1 {
                        log::warn!(target: "sealcheck::shadow", seq, error = message.as_str(); "the shadow's engine failed a frame; production is not affected");
                    }
                    if r.failures_in_a_row >= FAILURES_IN_A_ROW {
                        let problem = format!(
                            "the shadow's engine failed {FAILURES_IN_A_ROW} frames in a row (last: {message}); it was stopped, production runs on; reload to try again"
                        );
                        log::error!(target: "sealcheck::shadow", seq, error = message.as_str(); "{problem}");
                        self.running = None;
                        self.stop_taking_frames();
                        self.agreement
                            .set_state(ShadowState::Stopped, Some(problem));
                    }
                }
            }
        }
        // The output thread is waiting for this line; it may be gone at the end.
        let _ = self.verdicts.send(verdict);
        let _ = self.free.send(record);
    }
}

impl Running {
    /// Judges `records` in as few engine runs as the engine allows
    /// (`infer_batch`), one outcome each into `outcomes`, in order.
    fn judge(
        &mut self,
        records: &mut [Box<ShadowRecord>],
        buffers: &mut BatchBuffers,
        outcomes: &mut Vec<ShadowOutcome>,
    ) -> BatchRuns {
        for record in records.iter_mut() {
            let work = &mut record.work;
            work.error = None;
            if !record.tensors_ready
                && let Err(e) = self.preprocessor.frame_to_tensors(
                    record.pixels.image(),
                    &mut work.seg_input,
                    &mut work.cls_input,
                )
            {
                // Marked: the batch skips it.
                work.error = Some((FailedStage::Preprocess, e.to_string()));
            }
        }
        let mask_class = self.config.segmentation.mask_class;
        let made = infer_batch(
            self.backend.as_mut(),
            &self.preprocessor,
            mask_class,
            records,
            buffers,
        );
        for record in records.iter_mut() {
            let work = &mut record.work;
            if let Some((stage, message)) = work.error.take() {
                outcomes.push(ShadowOutcome::Failed(format!(
                    "{}: {message}",
                    stage.as_str()
                )));
                continue;
            }
            let decision: Decision =
                decision::decide(work, self.config.classifier.defect_class, &record.settings);
            let mask_iou = record
                .production_mask_valid
                .then(|| super::agreement::mask_iou(&record.production_mask, &work.mask));
            outcomes.push(ShadowOutcome::Judged { decision, mask_iou });
        }
        made
    }
}

/// What the shadow does with a batch: judge it (`ShadowJudge::judge_batch`);
/// a change (`[shadow]` on reload) is applied between batches.
impl BatchPath<Inbox> for ShadowJudge {
    type End = ();

    fn first_wait(&self) -> std::time::Duration {
        RETIRE_AFTER
    }

    fn idle(&mut self) -> ControlFlow<()> {
        self.drop_retired_when_idle();
        ControlFlow::Continue(())
    }

    /// The batch takes what the engine judging it takes in one run.
    fn begin(&mut self, _: &Box<ShadowRecord>) -> ControlFlow<(), usize> {
        let engine = self
            .running
            .as_ref()
            .or(self.retired.as_ref().map(|(r, _)| r));
        ControlFlow::Continue(engine.map_or(1, |r| r.backend.max_batch()))
    }

    fn add(&mut self, record: Box<ShadowRecord>) -> ControlFlow<()> {
        self.batch.push(record);
        ControlFlow::Continue(())
    }

    fn run(&mut self) -> Result<BatchRuns, ()> {
        let made = self.judge_batch();
        self.drop_retired_when_idle();
        Ok(made)
    }

    fn pass_on(&mut self, change: ShadowChange) -> ControlFlow<()> {
        self.apply(change);
        self.drop_retired_when_idle();
        ControlFlow::Continue(())
    }
}

/// The shadow thread's source: records handed over, and changes, whichever
/// comes first.
pub struct Inbox {
    changes: Receiver<ShadowChange>,
    frames: Receiver<Box<ShadowRecord>>,
}

impl FrameSource for Inbox {
    type Frame = Box<ShadowRecord>;
    type Other = ShadowChange;

    fn next(&mut self, wait: std::time::Duration) -> Next<Box<ShadowRecord>, ShadowChange> {
        select! {
            recv(self.changes) -> change => match change {
                Ok(change) => Next::Other(change),
                Err(_) => {
                    // Nobody changes the shadow any more: frames only.
                    self.changes = crossbeam_channel::never();
                    Next::Idle
                }
            },
            recv(self.frames) -> record => match record {
                Ok(record) => Next::Frame(record),
                Err(_) => Next::Closed,
            },
            default(wait) => Next::Idle,
        }
    }
}

/// Whether two `[shadow]` tables name the same models and engine (`every`
/// aside, which needs no new engine).
fn same_models(a: &ShadowConfig, b: &ShadowConfig) -> bool {
    ShadowConfig {
        every: 0,
        ..a.clone()
    } == ShadowConfig {
        every: 0,
        ..b.clone()
    }
}

/// Whether two engine configs open the same engine on the same files.
fn same_engine(a: &Config, b: &Config) -> bool {
    a.inference == b.inference && a.segmentation == b.segmentation && a.classifier == b.classifier
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameMeta;
    use crate::infer::test_engines::{FailingEngine, GEOMETRY};

    fn config() -> Config {
        let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
        let text = format!(
            "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"{models}/seg.onnx\"\n\
             [models.classifier]\npath = \"{models}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n[shadow]\n"
        );
        crate::config::parse(&text, std::path::Path::new("/tmp/sealcheck.toml")).unwrap()
    }

    #[test]
    fn an_engine_failing_frames_in_a_row_is_stopped_and_every_frame_still_gets_a_verdict() {
        let (frames_tx, frames_rx) = crossbeam_channel::bounded(8);
        let (verdicts_tx, verdicts_rx) = crossbeam_channel::bounded(8);
        let (free_tx, free_rx) = crossbeam_channel::bounded(8);
        let (_changes_tx, changes_rx) = crossbeam_channel::bounded(1);
        drop(frames_tx);
        let agreement = Arc::new(ShadowAgreement::new(Default::default()));
        let gate = Arc::new(ShadowGate::default());
        let demand = Arc::new(PixelDemand::default());
        let mut judge = ShadowJudge::new(
            frames_rx,
            verdicts_tx,
            free_tx,
            changes_rx,
            Arc::clone(&gate),
            Arc::clone(&demand),
            false,
            Arc::clone(&agreement),
            GEOMETRY,
        );
        let config = config();
        judge.running = Some(Running {
            backend: Box::new(FailingEngine::new()),
            models: Arc::new(ModelIds {
                segmentation: "s".into(),
                classifier: "c".into(),
                recipe: None,
            }),
            shadow: config.shadow.clone().unwrap(),
            preprocessor: cpu_preprocessor(&config, GEOMETRY),
            config: config.clone(),
            failures_in_a_row: 0,
        });
        judge.start_taking_frames(1);
        assert!(gate.due(7) && demand.wanted_for(7));
        for seq in 0..7 {
            let mut record = ShadowRecord::new(&GEOMETRY, config.decision);
            record.work.reset(FrameMeta::now(seq));
            record.tensors_ready = true;
            judge.judge(record);
        }
        let verdicts: Vec<ShadowVerdict> = verdicts_rx.try_iter().collect();
        assert_eq!(
            verdicts.iter().map(|v| v.seq).collect::<Vec<_>>(),
            (0..7).collect::<Vec<_>>(),
            "one verdict per frame handed over"
        );
        for (i, v) in verdicts.iter().enumerate() {
            let ShadowOutcome::Failed(message) = &v.outcome else {
                panic!("frame {i} judged by a failing engine: {v:?}");
            };
            let expected = if i < FAILURES_IN_A_ROW as usize {
                "device lost"
            } else {
                "stopped before this frame"
            };
            assert!(message.contains(expected), "frame {i}: {message}");
            assert_eq!(v.models.classifier, "c", "the last models, not blanks");
        }
        assert!(judge.running.is_none());
        assert!(
            !gate.due(0) && !demand.wanted_for(0),
            "no more frames offered"
        );
        let snapshot = agreement.snapshot();
        assert_eq!(snapshot.state, ShadowState::Stopped);
        assert_eq!((snapshot.failures, snapshot.since_start.compared), (7, 0));
        assert!(
            snapshot
                .problem
                .is_some_and(|p| p.contains("5 frames in a row") && p.contains("device lost")),
        );
        assert_eq!(free_rx.try_iter().count(), 7, "every record goes back");
    }
}
