//! The heartbeat record: what each stage marks per frame (counts and times on shared
//! atomics, no lock, no allocation) and what capture reports about each camera's source.
//! The verdict read from it is `health`; the thread that reads it is `watchdog`.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use crate::frame::FailedStage;

/// The stages in pipeline order; the order breaks ties when guessing where a stall is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Capture,
    Preprocess,
    Infer,
    Output,
}

impl Stage {
    pub(super) const ALL: [Stage; 4] = [
        Stage::Capture,
        Stage::Preprocess,
        Stage::Infer,
        Stage::Output,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Capture => "capture",
            Stage::Preprocess => "preprocess",
            Stage::Infer => "infer",
            Stage::Output => "output",
        }
    }
}

/// Marks the stages set; cheap to clone (two `Arc`s) and share with every stage thread.
#[derive(Debug, Clone)]
pub struct Liveness {
    pub(super) shared: Arc<Shared>,
    /// This handle's camera's source (the first camera's: `Shared::first_source`).
    pub(super) source: Arc<SourceRecord>,
}

#[derive(Debug)]
pub(super) struct Shared {
    /// Times below are nanoseconds since `origin` plus one, so 0 means "never".
    pub(super) origin: Instant,
    pub(super) captured: AtomicU64,
    pub(super) finished: AtomicU64,
    /// Last time each stage handed a frame on, indexed by `Stage as usize`.
    pub(super) last_advance: [AtomicU64; 4],
    /// Last time a frame finished with a verdict from the models.
    pub(super) last_inspected: AtomicU64,
    /// When the pipeline last went from empty to holding a frame: a frame arriving after
    /// a long idle spell gets a full stall timeout, not the idle time held against it.
    pub(super) busy_since: AtomicU64,
    /// The first engine failure since the last inspected result (0: none), the
    /// latest, and the stage of the latest (`FailedStage as u8`).
    pub(super) failing_since: AtomicU64,
    pub(super) last_failure: AtomicU64,
    pub(super) failed_stage: AtomicU8,
    /// The first camera's source. Alone, it is the station's, for the
    /// verdicts on an empty pipeline (idle, waiting, lost), as the watchdog's
    /// probe records it; with several cameras the station streams while any
    /// camera's record does (`station_source`) and the probe writes nothing.
    pub(super) first_source: Arc<SourceRecord>,
    /// Every further camera's source (`Liveness::for_another_camera`), in
    /// the order they were set up. Locked when a camera is set up and when
    /// health is judged, never on the frame path.
    pub(super) other_sources: Mutex<Vec<Arc<SourceRecord>>>,
}

/// One camera's source, as capture reports it (`Liveness::for_another_camera`
/// gives each further camera its own). Health judges every camera's for a
/// source stuck; the station's verdicts read the first camera's.
#[derive(Debug)]
pub(super) struct SourceRecord {
    pub(super) source_streaming: AtomicBool,
    /// When `source_streaming` last changed (or the record was made).
    pub(super) source_since: AtomicU64,
    /// Capture lost a live source and is rebuilding it.
    pub(super) source_lost: AtomicBool,
    /// Capture watches and rebuilds this source itself (a live source): while its
    /// thread beats, a source that is not streaming is capture's business.
    pub(super) source_managed: AtomicBool,
    /// Last beat of the capture thread (see `capture_heartbeat`).
    pub(super) capture_beat: AtomicU64,
    /// Pipelines abandoned over the whole run (`capture::teardown`); the
    /// one count of them: `capture::SourceStatus` reads it for the metrics.
    pub(super) abandoned: AtomicU64,
    /// Live-source pipelines abandoned since the source last delivered a frame.
    pub(super) abandoned_in_a_row: AtomicU64,
    /// Abandoned pipelines whose teardown thread is still blocked.
    pub(super) abandoned_stuck: AtomicU64,
    /// When the last pipeline was abandoned (0: never).
    pub(super) last_abandoned: AtomicU64,
    /// Since when rebuilds fail to start while an abandoned pipeline still
    /// blocks (0: they do not): the device is held by the pipeline left behind.
    pub(super) refused_while_abandoned_since: AtomicU64,
    /// The source as capture names it, for the watchdog's and /healthz's words.
    pub(super) source_name: OnceLock<Arc<str>>,
}

impl SourceRecord {
    /// A source not streaming since `since` (a stamp).
    fn new(since: u64) -> Self {
        SourceRecord {
            source_streaming: AtomicBool::new(false),
            source_since: AtomicU64::new(since),
            source_lost: AtomicBool::new(false),
            source_managed: AtomicBool::new(false),
            capture_beat: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            abandoned_in_a_row: AtomicU64::new(0),
            abandoned_stuck: AtomicU64::new(0),
            last_abandoned: AtomicU64::new(0),
            refused_while_abandoned_since: AtomicU64::new(0),
            source_name: OnceLock::new(),
        }
    }

    /// The source's name, for naming it in a verdict ("another camera" if
    /// capture never named it).
    pub(super) fn name(&self) -> Arc<str> {
        self.source_name
            .get()
            .cloned()
            .unwrap_or_else(|| Arc::from("another camera"))
    }
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness::new()
    }
}

impl Liveness {
    /// A fresh record; the source counts as not streaming until told otherwise, and gets
    /// one stall timeout from now to start.
    pub fn new() -> Liveness {
        let source = Arc::new(SourceRecord::new(1));
        let shared = Shared {
            origin: Instant::now(),
            captured: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            last_advance: Default::default(),
            last_inspected: AtomicU64::new(0),
            busy_since: AtomicU64::new(0),
            failing_since: AtomicU64::new(0),
            last_failure: AtomicU64::new(0),
            failed_stage: AtomicU8::new(FailedStage::Segment as u8),
            first_source: Arc::clone(&source),
            other_sources: Mutex::new(Vec::new()),
        };
        Liveness {
            shared: Arc::new(shared),
            source,
        }
    }

    /// A handle for a further camera's capture: frames count with this
    /// one's (in flight, progress, stalls), but its source's state (lost,
    /// streaming, abandoned pipelines) is its own, so one lost camera does
    /// not read as the station's source being lost: while capture rebuilds
    /// it, the watchdog keeps pinging and /healthz names it as lost. A
    /// source stuck beyond rebuilding counts as for the first camera
    /// (`Health::SourceStuck`, naming it), and so does a source that is down
    /// while its capture thread no longer beats. Call it when setting the
    /// camera up (it takes a lock), not per frame.
    pub fn for_another_camera(&self) -> Liveness {
        let source = Arc::new(SourceRecord::new(self.stamp(Instant::now())));
        self.shared
            .other_sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&source));
        Liveness {
            shared: Arc::clone(&self.shared),
            source,
        }
    }

    /// Capture delivered a frame (including one it then drops under overflow=drop).
    pub fn frame_captured(&self) {
        // `finished` before `captured`, as in `in_flight`, so the emptiness test errs
        // towards "was empty" (a fresh stall clock), never towards a false stall.
        let finished = self.shared.finished.load(Ordering::Relaxed);
        let captured = self.shared.captured.fetch_add(1, Ordering::Relaxed);
        let now = self.mark(Stage::Capture);
        if captured <= finished {
            self.shared.busy_since.store(now, Ordering::Relaxed);
        }
    }

    /// Preprocessing finished a frame.
    pub fn frame_preprocessed(&self) {
        self.mark(Stage::Preprocess);
    }

    /// Inference finished a frame.
    pub fn frame_inferred(&self) {
        self.mark(Stage::Infer);
    }

    /// Output wrote the result of a frame the models judged (reason ok, defect, no_seal,
    /// seal_area): progress.
    pub fn frame_finished(&self) {
        self.shared.finished.fetch_add(1, Ordering::Relaxed);
        let now = self.mark(Stage::Output);
        self.shared.last_inspected.store(now, Ordering::Relaxed);
        self.shared.failing_since.store(0, Ordering::Relaxed);
    }

    /// `frames` no trigger claimed (`[trigger] mode = "plc"`) went back to
    /// capture unjudged: they leave the pipeline, as they should.
    pub fn frames_passed_over(&self, frames: u64) {
        self.shared.finished.fetch_add(frames, Ordering::Relaxed);
        self.mark(Stage::Output);
    }

    /// Output wrote a not_inspected or error result. The frame leaves the pipeline, but
    /// this is not progress: a pipeline that only produces these (inference hung under
    /// overflow=drop, every frame failing) is not doing its job, and a restart is the
    /// remedy worth trying.
    pub fn frame_finished_uninspected(&self) {
        self.shared.finished.fetch_add(1, Ordering::Relaxed);
        self.mark(Stage::Output);
    }

    /// Output wrote the `error` result of a frame that preprocessing or a model
    /// failed (`stage`; a capture failure is `frame_finished_uninspected`): no
    /// progress, and evidence against the engine. Failures that go on for a stall
    /// timeout with no inspected result between them make `Health::Failing`.
    pub fn frame_failed_inspection(&self, stage: FailedStage) {
        self.shared.finished.fetch_add(1, Ordering::Relaxed);
        let now = self.mark(Stage::Output);
        let s = &self.shared;
        s.failed_stage.store(stage as u8, Ordering::Relaxed);
        // Only the first failure of a run starts its clock.
        let _ = s
            .failing_since
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        s.last_failure.store(now, Ordering::Relaxed);
    }

    /// Records whether the source is streaming; only changes restart its clock.
    pub fn set_source_streaming(&self, streaming: bool) {
        if self
            .source
            .source_streaming
            .swap(streaming, Ordering::Relaxed)
            != streaming
        {
            self.source
                .source_since
                .store(self.stamp(Instant::now()), Ordering::Relaxed);
        }
    }

    /// Records that capture lost a live source and is rebuilding it (true), or
    /// that the source is back (false). While lost and nothing is in flight the
    /// pipeline counts as healthy: `Health::SourceLost`.
    pub fn set_source_lost(&self, lost: bool) {
        self.source.source_lost.store(lost, Ordering::Relaxed);
        if !lost {
            // A pipeline delivered: the abandoned ones before it were not a pattern.
            self.source.abandoned_in_a_row.store(0, Ordering::Relaxed);
        }
    }

    /// Capture rebuilds this source itself when it is lost or never comes (a
    /// live source): while `capture_heartbeat` keeps coming, a source that is not
    /// streaming is waited for, not a stall.
    pub fn set_source_managed(&self, managed: bool) {
        self.source.source_managed.store(managed, Ordering::Relaxed);
        self.capture_heartbeat();
    }

    /// The capture thread is looking after the source (called at least every
    /// second or so from its loops). A capture thread that stops beating (stuck
    /// in a driver call) loses the benefit of `set_source_managed`.
    pub fn capture_heartbeat(&self) {
        let now = self.stamp(Instant::now());
        self.source.capture_beat.store(now, Ordering::Relaxed);
    }

    /// Names the source in the watchdog's and /healthz's words (set once, by capture).
    pub fn set_source_name(&self, name: &str) {
        let _ = self.source.source_name.set(Arc::from(name));
    }

    /// The source as capture named it ("the source" before it did).
    pub fn source_name(&self) -> &str {
        self.source.source_name.get().map_or("the source", |s| s)
    }

    /// Capture abandoned a pipeline that did not stop in time (its thread
    /// stays blocked); returns how many in a row, without a frame between.
    /// Called once per abandoned pipeline, by `capture::teardown` only: this
    /// record is the one count of them (`abandoned`, `abandoned_still_stuck`;
    /// `capture::SourceStatus` reads them from here).
    pub fn pipeline_abandoned(&self) -> u64 {
        self.source.abandoned.fetch_add(1, Ordering::Relaxed);
        self.source.abandoned_stuck.fetch_add(1, Ordering::Relaxed);
        self.source
            .last_abandoned
            .store(self.stamp(Instant::now()), Ordering::Relaxed);
        self.source
            .abandoned_in_a_row
            .fetch_add(1, Ordering::Relaxed)
            + 1
    }

    /// An abandoned pipeline's teardown finished after all: called by its
    /// teardown thread (`capture::teardown`) when it reaches NULL late.
    pub fn abandoned_teardown_ended(&self) {
        let _ =
            self.source
                .abandoned_stuck
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// A rebuild of the source failed to start (`true`) or started (`false`).
    /// Failures while an abandoned pipeline still blocks start the "device
    /// stays busy" clock of `Health::SourceStuck`.
    pub fn rebuild_started(&self, started: bool) {
        if started || self.source.abandoned_stuck.load(Ordering::Relaxed) == 0 {
            self.source
                .refused_while_abandoned_since
                .store(0, Ordering::Relaxed);
            return;
        }
        let now = self.stamp(Instant::now());
        let _ = self.source.refused_while_abandoned_since.compare_exchange(
            0,
            now,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Pipelines abandoned since the source last delivered a frame.
    pub fn abandoned_in_a_row(&self) -> u64 {
        self.source.abandoned_in_a_row.load(Ordering::Relaxed)
    }

    /// This camera's pipelines abandoned over the whole run (only goes up).
    pub fn abandoned(&self) -> u64 {
        self.source.abandoned.load(Ordering::Relaxed)
    }

    /// This camera's abandoned pipelines whose teardown is still blocked now.
    pub fn abandoned_still_stuck(&self) -> u64 {
        self.source.abandoned_stuck.load(Ordering::Relaxed)
    }

    /// Whether capture reported a lost live source it is rebuilding.
    pub fn source_lost(&self) -> bool {
        self.source.source_lost.load(Ordering::Relaxed)
    }

    /// Whether the source was streaming when last recorded (the watchdog
    /// records it every ping interval).
    pub fn source_streaming(&self) -> bool {
        self.source.source_streaming.load(Ordering::Relaxed)
    }

    /// Frames capture delivered so far.
    pub fn captured(&self) -> u64 {
        self.shared.captured.load(Ordering::Relaxed)
    }

    /// Frames whose result was written so far.
    pub fn finished(&self) -> u64 {
        self.shared.finished.load(Ordering::Relaxed)
    }

    /// Frames delivered whose result is not written yet.
    pub fn in_flight(&self) -> u64 {
        // `finished` first: a frame captured in between then only looks in flight,
        // never the reverse.
        let finished = self.finished();
        self.captured().saturating_sub(finished)
    }

    fn mark(&self, stage: Stage) -> u64 {
        let now = self.stamp(Instant::now());
        self.shared.last_advance[stage as usize].store(now, Ordering::Relaxed);
        now
    }

    pub(super) fn stamp(&self, t: Instant) -> u64 {
        let ns = t.saturating_duration_since(self.shared.origin).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX - 1).saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use crate::service::liveness::testing::streaming;

    #[test]
    fn counters_are_shared_between_clones() {
        let l = streaming();
        let other = l.clone();
        other.frame_captured();
        other.frame_finished();
        other.frame_captured();
        other.frame_finished_uninspected();
        assert_eq!((l.captured(), l.finished(), l.in_flight()), (2, 2, 0));
    }
}
