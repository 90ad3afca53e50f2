//! Is the pipeline doing its job? The answer feeds systemd's watchdog.
//!
//! ```text
//! capture --frame_captured--> preprocess --frame_preprocessed--> infer --frame_inferred-->
//!     output --frame_finished--> Liveness <--is_alive()-- watchdog thread (+ source probe)
//! ```
//!
//! Each stage marks its frames on shared atomics (a few relaxed stores and one clock read
//! per frame, no lock, no allocation). The watchdog thread reads them every few seconds
//! and pings systemd only while results move. A pipeline wedged anywhere (a hung camera
//! driver, a deadlocked inference call, a blocked disk) stops the pings, and systemd
//! restarts the service: the one remedy an unattended machine has. So does an engine
//! that fails every frame for a stall timeout: results still move, but each is an
//! `error` (a CUDA context after a sticky error, such as an illegal address, fails
//! every call at once until the process ends).
//!
//! With several cameras (`Liveness::for_another_camera`) frames count together,
//! and each camera's source has a record of its own. A camera that is lost and
//! being rebuilt is capture's business, whichever it is; a camera whose source
//! capture can no longer bring back (`Health::SourceStuck`, named) stops the
//! pings, whichever it is.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::notify::Notifier;
use super::ratelimit::{Admission, RateLimiter};
use crate::frame::FailedStage;

/// A capture thread that manages its source (see `Liveness::set_source_managed`)
/// and has not beaten for this long (or the stall timeout, if longer) is stuck.
const CAPTURE_BEAT_LIMIT: Duration = Duration::from_secs(3);

/// Live-source pipelines abandoned in a row (none delivering a frame between
/// them) after which the source counts as stuck: each one left a thread
/// blocked in an element, and only a new process frees them.
pub const MAX_ABANDONED_IN_A_ROW: u64 = 3;

/// The stages in pipeline order; the order breaks ties when guessing where a stall is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Capture,
    Preprocess,
    Infer,
    Output,
}

impl Stage {
    const ALL: [Stage; 4] = [
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

/// The verdict on the pipeline at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Inspected results moved within the stall timeout (or frames entered the pipeline
    /// less than a stall timeout ago).
    Alive { in_flight: u64 },
    /// Nothing in flight and the source is streaming: waiting for frames (a triggered
    /// camera, a paused line).
    Idle,
    /// Nothing in flight and the source is not streaming, for less than the stall timeout
    /// (opening the camera, a short reconnect).
    WaitingForSource { for_: Duration },
    /// Nothing in flight and a live source lost, with capture rebuilding it (see
    /// `Liveness::set_source_lost`): the process is healthy and a restart would
    /// not bring the camera back, so the watchdog keeps pinging. The status text
    /// says since when and when the next try comes.
    SourceLost { for_: Duration },
    /// Frames in flight but no inspected result for `for_` (longer than the stall
    /// timeout), or the source not streaming for that long; `stage` is where frames most
    /// likely stopped.
    Stalled {
        stage: Stage,
        for_: Duration,
        in_flight: u64,
    },
    /// Every frame since the last inspected result failed in preprocessing or a
    /// model, for `for_` (at least the stall timeout, from the first failure to the
    /// latest): the engine is broken, and a restart is the remedy worth trying.
    Failing { stage: FailedStage, for_: Duration },
    /// A camera's live source that capture cannot bring back inside the
    /// process; a restart can. Its pipelines do not stop when it is lost:
    /// capture abandoned `in_a_row` of them in a row (at least
    /// `MAX_ABANDONED_IN_A_ROW`), or one it abandoned still blocks
    /// (`still_stuck`) and no new pipeline has started for `for_` (a stall
    /// timeout or more: the device stays busy, held by the pipeline left
    /// behind). Or (`capture_silent`, a camera after the first) its capture
    /// thread has not beaten for `for_` while the source is down: blocked in
    /// a driver call or ended, nothing rebuilds the source.
    SourceStuck {
        in_a_row: u64,
        still_stuck: u64,
        for_: Duration,
        capture_silent: bool,
        /// Whose source: `None` for the first camera's (the only one with
        /// `[source]`; `Liveness::source_name` names it), else the name
        /// capture gave another camera's (`camera side: RTSP camera ...`).
        camera: Option<Arc<str>>,
    },
}

impl Health {
    /// Whether the watchdog should be pinged.
    pub fn is_alive(&self) -> bool {
        !matches!(
            self,
            Health::Stalled { .. } | Health::Failing { .. } | Health::SourceStuck { .. }
        )
    }
}

/// Marks the stages set; cheap to clone (two `Arc`s) and share with every stage thread.
#[derive(Debug, Clone)]
pub struct Liveness {
    shared: Arc<Shared>,
    /// This handle's camera's source (the first camera's: `Shared::first_source`).
    source: Arc<SourceRecord>,
}

#[derive(Debug)]
struct Shared {
    /// Times below are nanoseconds since `origin` plus one, so 0 means "never".
    origin: Instant,
    captured: AtomicU64,
    finished: AtomicU64,
    /// Last time each stage handed a frame on, indexed by `Stage as usize`.
    last_advance: [AtomicU64; 4],
    /// Last time a frame finished with a verdict from the models.
    last_inspected: AtomicU64,
    /// When the pipeline last went from empty to holding a frame: a frame arriving after
    /// a long idle spell gets a full stall timeout, not the idle time held against it.
    busy_since: AtomicU64,
    /// The first engine failure since the last inspected result (0: none), the
    /// latest, and the stage of the latest (`FailedStage as u8`).
    failing_since: AtomicU64,
    last_failure: AtomicU64,
    failed_stage: AtomicU8,
    /// The first camera's source. Alone, it is the station's, for the
    /// verdicts on an empty pipeline (idle, waiting, lost), as the watchdog's
    /// probe records it; with several cameras the station streams while any
    /// camera's record does (`station_source`) and the probe writes nothing.
    first_source: Arc<SourceRecord>,
    /// Every further camera's source (`Liveness::for_another_camera`), in
    /// the order they were set up. Locked when a camera is set up and when
    /// health is judged, never on the frame path.
    other_sources: Mutex<Vec<Arc<SourceRecord>>>,
}

/// One camera's source, as capture reports it (`Liveness::for_another_camera`
/// gives each further camera its own). Health judges every camera's for a
/// source stuck; the station's verdicts read the first camera's.
#[derive(Debug)]
struct SourceRecord {
    source_streaming: AtomicBool,
    /// When `source_streaming` last changed (or the record was made).
    source_since: AtomicU64,
    /// Capture lost a live source and is rebuilding it.
    source_lost: AtomicBool,
    /// Capture watches and rebuilds this source itself (a live source): while its
    /// thread beats, a source that is not streaming is capture's business.
    source_managed: AtomicBool,
    /// Last beat of the capture thread (see `capture_heartbeat`).
    capture_beat: AtomicU64,
    /// Live-source pipelines abandoned since the source last delivered a frame.
    abandoned_in_a_row: AtomicU64,
    /// Abandoned pipelines whose teardown thread is still blocked.
    abandoned_stuck: AtomicU64,
    /// When the last pipeline was abandoned (0: never).
    last_abandoned: AtomicU64,
    /// Since when rebuilds fail to start while an abandoned pipeline still
    /// blocks (0: they do not): the device is held by the pipeline left behind.
    refused_while_abandoned_since: AtomicU64,
    /// The source as capture names it, for the watchdog's and /healthz's words.
    source_name: OnceLock<Arc<str>>,
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
            abandoned_in_a_row: AtomicU64::new(0),
            abandoned_stuck: AtomicU64::new(0),
            last_abandoned: AtomicU64::new(0),
            refused_while_abandoned_since: AtomicU64::new(0),
            source_name: OnceLock::new(),
        }
    }

    /// `Health::SourceStuck` (of no camera named) when abandoned pipelines
    /// piled up, or when rebuilds have failed to start for a stall timeout
    /// while one still blocks.
    fn stuck(&self, now_stamp: u64, stall_timeout: Duration) -> Option<Health> {
        let in_a_row = self.abandoned_in_a_row.load(Ordering::Relaxed);
        let still_stuck = self.abandoned_stuck.load(Ordering::Relaxed);
        let ago = |t: u64| Duration::from_nanos(now_stamp.saturating_sub(t));
        if in_a_row >= MAX_ABANDONED_IN_A_ROW {
            return Some(Health::SourceStuck {
                in_a_row,
                still_stuck,
                for_: ago(self.last_abandoned.load(Ordering::Relaxed)),
                capture_silent: false,
                camera: None,
            });
        }
        let refused_since = self.refused_while_abandoned_since.load(Ordering::Relaxed);
        (still_stuck > 0 && refused_since != 0 && ago(refused_since) >= stall_timeout).then(|| {
            Health::SourceStuck {
                in_a_row,
                still_stuck,
                for_: ago(refused_since),
                capture_silent: false,
                camera: None,
            }
        })
    }

    /// `Health::SourceStuck` (of no camera named) when capture manages this
    /// source, the source has been down for longer than the stall timeout,
    /// and the capture thread has not beaten for as long as it may (blocked
    /// in a driver call, or ended): nothing will rebuild the source. A source
    /// down while its thread beats is being rebuilt: capture's business. A
    /// source capture does not manage (a file, a replay) ends for good at its
    /// end of stream while the others go on, and has no thread to judge.
    fn capture_silent(&self, now_stamp: u64, stall_timeout: Duration) -> Option<Health> {
        if !self.source_managed.load(Ordering::Relaxed)
            || self.source_streaming.load(Ordering::Relaxed)
        {
            return None;
        }
        let ago = |t: u64| Duration::from_nanos(now_stamp.saturating_sub(t));
        let down_for = ago(self.source_since.load(Ordering::Relaxed));
        let silent_for = ago(self.capture_beat.load(Ordering::Relaxed));
        (down_for > stall_timeout && silent_for > stall_timeout.max(CAPTURE_BEAT_LIMIT)).then(
            || Health::SourceStuck {
                in_a_row: self.abandoned_in_a_row.load(Ordering::Relaxed),
                still_stuck: self.abandoned_stuck.load(Ordering::Relaxed),
                for_: silent_for,
                capture_silent: true,
                camera: None,
            },
        )
    }

    /// The source's name, for naming it in a verdict ("another camera" if
    /// capture never named it).
    fn name(&self) -> Arc<str> {
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
    pub fn pipeline_abandoned(&self) -> u64 {
        self.source.abandoned_stuck.fetch_add(1, Ordering::Relaxed);
        self.source
            .last_abandoned
            .store(self.stamp(Instant::now()), Ordering::Relaxed);
        self.source
            .abandoned_in_a_row
            .fetch_add(1, Ordering::Relaxed)
            + 1
    }

    /// An abandoned pipeline's teardown finished after all.
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

    /// Health at `now`, after recording `source_streaming` (see `set_source_streaming`):
    /// alive while inspected results moved within `stall_timeout`, or while nothing is
    /// in flight and the source is streaming.
    /// With several cameras the probe's answer (any camera streaming) is
    /// not recorded: each camera's capture keeps its own record, the first
    /// camera's included, and the station's state is read from all of them.
    pub fn is_alive(
        &self,
        now: Instant,
        stall_timeout: Duration,
        source_streaming: bool,
    ) -> Health {
        if self.station_source().is_none() {
            self.set_source_streaming(source_streaming);
        }
        self.health(now, stall_timeout)
    }

    /// With several cameras: whether any camera's source streams, and the
    /// latest change of any of them (a stamp); `None` with one camera.
    fn station_source(&self) -> Option<(bool, u64)> {
        let others = self
            .shared
            .other_sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if others.is_empty() {
            return None;
        }
        let every = std::iter::once(&self.shared.first_source).chain(others.iter());
        Some(every.fold((false, 0), |(streaming, since), source| {
            (
                streaming || source.source_streaming.load(Ordering::Relaxed),
                since.max(source.source_since.load(Ordering::Relaxed)),
            )
        }))
    }

    /// Health at `now` with the source state last recorded: the station's,
    /// whichever camera's handle asks.
    pub fn health(&self, now: Instant, stall_timeout: Duration) -> Health {
        let s = &self.shared;
        let in_flight = self.in_flight();
        let last_inspected = s.last_inspected.load(Ordering::Relaxed);
        let now_stamp = self.stamp(now);
        let ago = |t: u64| Duration::from_nanos(now_stamp.saturating_sub(t));
        let first = &s.first_source;

        if let Some(stuck) = self.stuck_camera(now_stamp, stall_timeout) {
            return stuck;
        }
        // Measured between failures, not up to now: a short run of failures
        // followed by a quiet camera is not a broken engine.
        let failing_since = s.failing_since.load(Ordering::Relaxed);
        if failing_since != 0 {
            let failing_for = Duration::from_nanos(
                s.last_failure
                    .load(Ordering::Relaxed)
                    .saturating_sub(failing_since),
            );
            if failing_for >= stall_timeout {
                return Health::Failing {
                    stage: failed_stage(s.failed_stage.load(Ordering::Relaxed)),
                    for_: failing_for,
                };
            }
        }
        if in_flight > 0 {
            let quiet_for = ago(last_inspected.max(s.busy_since.load(Ordering::Relaxed)));
            if quiet_for <= stall_timeout {
                return Health::Alive { in_flight };
            }
            return Health::Stalled {
                stage: self.stuck_stage(),
                for_: quiet_for,
                in_flight,
            };
        }
        if last_inspected != 0 && ago(last_inspected) <= stall_timeout {
            return Health::Alive { in_flight: 0 };
        }
        // The station's source: the one camera's, or with several whether
        // any streams, down since the last of them changed.
        let (streaming, since) = self.station_source().unwrap_or((
            first.source_streaming.load(Ordering::Relaxed),
            first.source_since.load(Ordering::Relaxed),
        ));
        if streaming {
            return Health::Idle;
        }
        let down_for = ago(since);
        let managed = first.source_managed.load(Ordering::Relaxed)
            && ago(first.capture_beat.load(Ordering::Relaxed))
                <= stall_timeout.max(CAPTURE_BEAT_LIMIT);
        if managed && first.source_lost.load(Ordering::Relaxed) {
            return Health::SourceLost { for_: down_for };
        }
        if down_for <= stall_timeout || managed {
            Health::WaitingForSource { for_: down_for }
        } else {
            Health::Stalled {
                stage: Stage::Capture,
                for_: down_for,
                in_flight: 0,
            }
        }
    }

    /// The first camera, in set-up order, whose source capture cannot bring
    /// back inside the process: `Health::SourceStuck`, naming it unless it
    /// is the first camera. Every camera's source is judged alike for
    /// abandoned pipelines. With several cameras every camera's also when
    /// it is down and its capture thread went silent, the first's included
    /// (its record is its capture's own; the watchdog's probe goes to the
    /// station's): alone, that camera is `Health::Stalled` at capture once
    /// the pipeline is empty, but among others that inspect the pipeline is
    /// never empty.
    fn stuck_camera(&self, now_stamp: u64, stall_timeout: Duration) -> Option<Health> {
        let first = &self.shared.first_source;
        if let Some(stuck) = first.stuck(now_stamp, stall_timeout) {
            return Some(stuck);
        }
        let others = self
            .shared
            .other_sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !others.is_empty()
            && let Some(silent) = first.capture_silent(now_stamp, stall_timeout)
        {
            return Some(silent);
        }
        others.iter().find_map(|source| {
            let mut stuck = source
                .stuck(now_stamp, stall_timeout)
                .or_else(|| source.capture_silent(now_stamp, stall_timeout))?;
            if let Health::SourceStuck { camera, .. } = &mut stuck {
                *camera = Some(source.name());
            }
            Some(stuck)
        })
    }

    /// The stage that stopped first: its last hand-off is the oldest. A stage that never
    /// handed a frame on is older than any that did; ties go to the earlier stage.
    fn stuck_stage(&self) -> Stage {
        let mut oldest = Stage::Capture;
        let mut oldest_time = u64::MAX;
        for stage in Stage::ALL {
            let t = self.shared.last_advance[stage as usize].load(Ordering::Relaxed);
            if t < oldest_time {
                oldest = stage;
                oldest_time = t;
            }
        }
        oldest
    }

    fn mark(&self, stage: Stage) -> u64 {
        let now = self.stamp(Instant::now());
        self.shared.last_advance[stage as usize].store(now, Ordering::Relaxed);
        now
    }

    fn stamp(&self, t: Instant) -> u64 {
        let ns = t.saturating_duration_since(self.shared.origin).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX - 1).saturating_add(1)
    }
}

/// Who acts when the pipeline is not alive: systemd, when it set a watchdog
/// (`supervised`), or nobody (`sealcheck run` by hand).
pub fn unhealthy_remedy(supervised: bool) -> &'static str {
    if supervised {
        "watchdog pings stopped, systemd will restart the service"
    } else {
        "no watchdog is set (not run by systemd with WatchdogSec=), so nothing restarts it: restart it by hand"
    }
}

fn failed_stage(code: u8) -> FailedStage {
    [
        FailedStage::Capture,
        FailedStage::Preprocess,
        FailedStage::Segment,
        FailedStage::Classify,
    ]
    .into_iter()
    .find(|stage| *stage as u8 == code)
    .unwrap_or(FailedStage::Segment)
}

/// The status line systemd shows: what `status_text` says (fps, verdict counts), and
/// what is wrong, when something is.
pub fn status_line(health: &Health, status_text: &str) -> String {
    match health {
        Health::Alive { .. } => status_text.to_string(),
        Health::Idle => format!("idle: source streaming, no frames; {status_text}"),
        // Capture's status text says it: "camera lost since ..., next try in ...".
        Health::SourceLost { .. } => status_text.to_string(),
        Health::WaitingForSource { for_ } => {
            format!(
                "waiting for the source for {:.0} s; {status_text}",
                for_.as_secs_f64()
            )
        }
        Health::Stalled {
            stage,
            for_,
            in_flight,
        } => format!(
            "STALLED at {} for {:.0} s ({in_flight} frames in flight), watchdog pings stopped; {status_text}",
            stage.name(),
            for_.as_secs_f64()
        ),
        Health::Failing { stage, for_ } => format!(
            "FAILING: every frame has failed in {} for {:.0} s, watchdog pings stopped; {status_text}",
            stage.as_str(),
            for_.as_secs_f64()
        ),
        Health::SourceStuck { .. } => format!(
            "SOURCE STUCK: {}, watchdog pings stopped; {status_text}",
            stuck_source_reason(health, None).unwrap_or_default()
        ),
    }
}

/// Why a stuck source is stuck; `None` for any other health. It names the
/// camera the verdict names (one after the first), else `source` when given
/// (the first camera's: `Liveness::source_name`).
pub fn stuck_source_reason(health: &Health, source: Option<&str>) -> Option<String> {
    let Health::SourceStuck {
        in_a_row,
        still_stuck,
        for_,
        capture_silent,
        camera,
    } = health
    else {
        return None;
    };
    let source = camera
        .as_deref()
        .or(source)
        .map_or_else(|| "the source".to_string(), |s| format!("the source ({s})"));
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    Some(if *capture_silent {
        format!(
            "{source} is stuck: it is down and its capture thread has not looked after it for {:.0} s \
             (blocked in a driver call, or ended), so nothing rebuilds it",
            for_.as_secs_f64()
        )
    } else if *in_a_row >= MAX_ABANDONED_IN_A_ROW {
        format!(
            "{source} is stuck: {in_a_row} of its pipelines in a row did not stop when it was lost \
             (an element blocked in a read or a driver call; {still_stuck} still blocked)"
        )
    } else {
        format!(
            "{source} is stuck: {still_stuck} abandoned pipeline{} still blocked in an element and every \
             rebuild for {:.0} s failed to start (the device stays busy)",
            plural(*still_stuck),
            for_.as_secs_f64()
        )
    })
}

/// Runs until `stop` receives or disconnects: every `interval`, asks `source_streaming()`,
/// pings the watchdog if the pipeline is alive and sends a STATUS line built from
/// `status_text()`. While stalled it logs (at most once a minute) and sends no ping, so
/// systemd's `WatchdogSec=` expires and the service is restarted.
pub fn run_watchdog(
    notifier: &Notifier,
    liveness: &Liveness,
    interval: Duration,
    stall_timeout: Duration,
    stop: Receiver<()>,
    source_streaming: impl Fn() -> bool,
    status_text: impl Fn() -> String,
) {
    let mut stall_log = RateLimiter::new(Duration::from_secs(60));
    let mut was_alive = true;
    let remedy = unhealthy_remedy(notifier.ping_interval().is_some());
    loop {
        let health = liveness.is_alive(Instant::now(), stall_timeout, source_streaming());
        let alive = health.is_alive();
        if alive {
            notifier.watchdog();
            if !was_alive {
                log::info!(target: "sealcheck::service", "pipeline is moving again; watchdog pings resumed");
            }
        } else if let Admission::Log(repeats) = stall_log.admit() {
            let repeated = repeats.map(|r| r.count).unwrap_or(0);
            match health {
                Health::Stalled {
                    stage,
                    for_,
                    in_flight,
                } => log::error!(target: "sealcheck::service",
                    stage = stage.name(), stalled_s = for_.as_secs_f64(), in_flight = in_flight, repeated = repeated;
                    "pipeline stalled at {}: no inspected result for {:.1} s with {in_flight} frames in flight; {remedy}",
                    stage.name(), for_.as_secs_f64()),
                Health::SourceStuck {
                    in_a_row,
                    still_stuck,
                    ref camera,
                    ..
                } => log::error!(target: "sealcheck::service",
                    source = camera.as_deref().unwrap_or(liveness.source_name()), abandoned_in_a_row = in_a_row, still_stuck = still_stuck, repeated = repeated;
                    "{}; {remedy}", stuck_source_reason(&health, Some(liveness.source_name())).unwrap_or_default()),
                Health::Failing { stage, for_ } => log::error!(target: "sealcheck::service",
                    stage = stage.as_str(), failing_s = for_.as_secs_f64(), repeated = repeated;
                    "every frame has failed in {} for {:.1} s (each got its `error` result): the engine looks broken, \
                     for example a GPU error that sticks until the process ends; {remedy}",
                    stage.as_str(), for_.as_secs_f64()),
                _ => {}
            }
        }
        was_alive = alive;
        let line = match stuck_source_reason(&health, Some(liveness.source_name())) {
            Some(reason) => format!(
                "SOURCE STUCK: {reason}, watchdog pings stopped; {}",
                status_text()
            ),
            None => status_line(&health, &status_text()),
        };
        notifier.status(&line);
        match stop.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => continue,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Starts `run_watchdog` on its own thread, pinging at `notifier`'s ping interval (half
/// `WatchdogSec=`), or every `DEFAULT_PING_INTERVAL` when systemd set no watchdog.
/// Dropping (or `stop`ping) the handle ends the thread. Start it right after READY=1 and
/// keep it until the drain is over: systemd watches from READY=1 on.
pub fn spawn_watchdog(
    notifier: Notifier,
    liveness: Liveness,
    stall_timeout: Duration,
    source_streaming: impl Fn() -> bool + Send + 'static,
    status_text: impl Fn() -> String + Send + 'static,
) -> std::io::Result<WatchdogThread> {
    let interval = notifier
        .ping_interval()
        .unwrap_or(super::DEFAULT_PING_INTERVAL);
    WatchdogThread::spawn_with_interval(
        notifier,
        liveness,
        interval,
        stall_timeout,
        source_streaming,
        status_text,
    )
}

/// The watchdog thread; stopping (or dropping) the handle ends it.
pub struct WatchdogThread {
    stop: Option<crossbeam_channel::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WatchdogThread {
    /// As `spawn_watchdog`, with an explicit interval.
    pub fn spawn_with_interval(
        notifier: Notifier,
        liveness: Liveness,
        interval: Duration,
        stall_timeout: Duration,
        source_streaming: impl Fn() -> bool + Send + 'static,
        status_text: impl Fn() -> String + Send + 'static,
    ) -> std::io::Result<WatchdogThread> {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                run_watchdog(
                    &notifier,
                    &liveness,
                    interval,
                    stall_timeout,
                    stop_rx,
                    source_streaming,
                    status_text,
                )
            })?;
        Ok(WatchdogThread {
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Ends the loop and waits for the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The thread may already have ended; then there is nobody to tell.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic in the loop has nothing left to clean up.
            let _ = thread.join();
        }
    }
}

impl Drop for WatchdogThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::notify::NotifyAddress;
    use std::os::unix::net::UnixDatagram;

    const STALL: Duration = Duration::from_secs(5);

    fn streaming() -> Liveness {
        let l = Liveness::new();
        l.set_source_streaming(true);
        l
    }

    fn full_frame(l: &Liveness) {
        l.frame_captured();
        l.frame_preprocessed();
        l.frame_inferred();
        l.frame_finished();
    }

    fn after(secs: u64) -> Instant {
        Instant::now() + Duration::from_secs(secs)
    }

    /// A frame that preprocessing or a model failed, as output records it.
    fn failed_frame(l: &Liveness, stage: FailedStage) {
        l.frame_captured();
        l.frame_preprocessed();
        l.frame_inferred();
        l.frame_failed_inspection(stage);
    }

    const SHORT_STALL: Duration = Duration::from_millis(50);

    #[test]
    fn an_engine_failing_every_frame_is_not_alive_though_results_move() {
        let l = streaming();
        full_frame(&l);
        failed_frame(&l, FailedStage::Segment);
        std::thread::sleep(SHORT_STALL + Duration::from_millis(10));
        failed_frame(&l, FailedStage::Classify);
        let health = l.health(Instant::now(), SHORT_STALL);
        let Health::Failing { stage, for_ } = health else {
            panic!("{health:?}");
        };
        assert_eq!(stage, FailedStage::Classify);
        assert!(for_ >= SHORT_STALL, "{for_:?}");
        assert!(!health.is_alive());
        let line = status_line(&health, "12.0 fps");
        assert!(
            line.starts_with("FAILING: every frame has failed in classify"),
            "{line}"
        );
    }

    #[test]
    fn an_inspected_result_ends_a_run_of_failures() {
        let l = streaming();
        failed_frame(&l, FailedStage::Segment);
        std::thread::sleep(SHORT_STALL + Duration::from_millis(10));
        full_frame(&l);
        failed_frame(&l, FailedStage::Segment);
        // Alive, or Idle if this machine paused for longer than SHORT_STALL.
        let health = l.health(Instant::now(), SHORT_STALL);
        assert!(health.is_alive(), "{health:?}");
    }

    #[test]
    fn a_short_run_of_failures_before_a_quiet_spell_is_not_a_broken_engine() {
        let l = streaming();
        full_frame(&l);
        failed_frame(&l, FailedStage::Segment);
        failed_frame(&l, FailedStage::Segment);
        // The camera then sends nothing for a long time.
        let health = l.health(after(60), STALL);
        assert_eq!(health, Health::Idle);
    }

    #[test]
    fn capture_failures_are_not_held_against_the_engine() {
        let l = streaming();
        full_frame(&l);
        for _ in 0..2 {
            l.frame_captured();
            l.frame_finished_uninspected();
            std::thread::sleep(SHORT_STALL + Duration::from_millis(10));
        }
        let health = l.health(Instant::now(), SHORT_STALL);
        assert_eq!(health, Health::Idle);
    }

    #[test]
    fn alive_while_results_move() {
        let l = streaming();
        full_frame(&l);
        l.frame_captured();
        assert_eq!(
            l.health(Instant::now(), STALL),
            Health::Alive { in_flight: 1 }
        );
        assert!(l.health(after(4), STALL).is_alive());
        assert_eq!((l.captured(), l.finished(), l.in_flight()), (2, 1, 1));
    }

    #[test]
    fn stalled_when_frames_in_flight_stop_finishing() {
        let l = streaming();
        full_frame(&l);
        // Two frames reach inference and never come out.
        for _ in 0..2 {
            l.frame_captured();
            l.frame_preprocessed();
        }
        match l.health(after(6), STALL) {
            Health::Stalled {
                stage,
                for_,
                in_flight,
            } => {
                assert_eq!(stage, Stage::Infer);
                assert_eq!(in_flight, 2);
                assert!(for_ > STALL, "{for_:?}");
            }
            other => panic!("expected a stall, got {other:?}"),
        }
        assert!(!l.health(after(6), STALL).is_alive());
    }

    #[test]
    fn stall_hint_names_the_first_stage_that_never_moved() {
        let l = streaming();
        l.frame_captured(); // stuck in preprocess from the very first frame
        assert!(matches!(
            l.health(after(6), STALL),
            Health::Stalled {
                stage: Stage::Preprocess,
                ..
            }
        ));
    }

    #[test]
    fn stall_hint_names_output_when_writing_blocks() {
        let l = streaming();
        full_frame(&l);
        std::thread::sleep(Duration::from_millis(5));
        // A later frame passes inference but output hangs (a blocked disk).
        l.frame_captured();
        l.frame_preprocessed();
        l.frame_inferred();
        assert!(matches!(
            l.health(after(6), STALL),
            Health::Stalled {
                stage: Stage::Output,
                ..
            }
        ));
    }

    #[test]
    fn uninspected_results_are_not_progress() {
        let l = streaming();
        full_frame(&l);
        // overflow=drop with inference hung: one frame stuck, every new one not_inspected.
        l.frame_captured();
        l.frame_preprocessed();
        for _ in 0..50 {
            l.frame_captured();
            l.frame_finished_uninspected();
        }
        assert!(matches!(
            l.health(after(6), STALL),
            Health::Stalled {
                stage: Stage::Infer,
                in_flight: 1,
                ..
            }
        ));
    }

    #[test]
    fn idle_when_nothing_in_flight_and_source_streaming() {
        let l = streaming();
        full_frame(&l);
        assert_eq!(l.health(after(3600), STALL), Health::Idle);
        assert!(Health::Idle.is_alive());
    }

    #[test]
    fn a_frame_after_a_long_idle_spell_gets_a_full_stall_timeout() {
        let l = streaming();
        full_frame(&l);
        std::thread::sleep(Duration::from_millis(30));
        l.frame_captured(); // the first frame in a while, just entered
        let now = Instant::now();
        assert_eq!(
            l.health(now, Duration::from_millis(20)),
            Health::Alive { in_flight: 1 }
        );
    }

    #[test]
    fn source_not_streaming_is_waited_for_one_stall_timeout() {
        let l = Liveness::new(); // not streaming yet: opening the camera
        assert!(matches!(
            l.health(after(1), STALL),
            Health::WaitingForSource { .. }
        ));
        assert!(matches!(
            l.health(after(6), STALL),
            Health::Stalled {
                stage: Stage::Capture,
                in_flight: 0,
                ..
            }
        ));
        // It comes up: idle until frames arrive.
        assert_eq!(l.is_alive(after(6), STALL, true), Health::Idle);
    }

    #[test]
    fn a_lost_source_being_rebuilt_keeps_the_watchdog_pinging() {
        let l = Liveness::new();
        l.set_source_managed(true);
        // Not streaming yet, past the stall timeout: capture is on it.
        assert!(matches!(
            l.health(after(2), Duration::from_secs(1)),
            Health::WaitingForSource { .. }
        ));
        l.set_source_lost(true);
        let health = l.health(after(2), Duration::from_secs(1));
        assert!(
            matches!(health, Health::SourceLost { for_ } if for_ >= Duration::from_secs(1)),
            "{health:?}"
        );
        assert!(
            health.is_alive(),
            "a restart would not bring the camera back"
        );
        assert_eq!(
            status_line(&health, "camera lost since ..."),
            "camera lost since ..."
        );
        // A capture thread that stopped beating (stuck in a driver) is a stall.
        assert!(matches!(
            l.health(after(600), STALL),
            Health::Stalled {
                stage: Stage::Capture,
                ..
            }
        ));
        // Frames still in flight during the outage are held to the stall timeout.
        l.capture_heartbeat();
        l.frame_captured();
        assert!(matches!(
            l.health(after(2), Duration::from_secs(1)),
            Health::Stalled { .. }
        ));
        l.frame_finished();
        l.set_source_lost(false);
        assert!(!l.source_lost());
    }

    #[test]
    fn a_source_loss_restarts_the_clock_once() {
        let stall = Duration::from_millis(20);
        let l = streaming();
        full_frame(&l);
        std::thread::sleep(Duration::from_millis(30));
        // Idle for longer than the stall timeout, then the camera drops: it gets a fresh
        // stall timeout to come back.
        let dropped = Instant::now();
        assert!(matches!(
            l.is_alive(dropped, stall, false),
            Health::WaitingForSource { .. }
        ));
        // Still down: reporting "not streaming" again does not reset the clock.
        std::thread::sleep(Duration::from_millis(30));
        assert!(matches!(
            l.is_alive(Instant::now(), stall, false),
            Health::Stalled {
                stage: Stage::Capture,
                in_flight: 0,
                ..
            }
        ));
    }

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

    #[test]
    fn status_line_says_what_is_wrong() {
        let stalled = Health::Stalled {
            stage: Stage::Infer,
            for_: Duration::from_secs(7),
            in_flight: 3,
        };
        assert_eq!(
            status_line(&stalled, "29.8 fps"),
            "STALLED at infer for 7 s (3 frames in flight), watchdog pings stopped; 29.8 fps"
        );
        assert_eq!(
            status_line(&Health::Alive { in_flight: 2 }, "29.8 fps"),
            "29.8 fps"
        );
    }

    /// One camera (a single `[source]`): a stuck source reads word for word as
    /// it did before cameras could be several.
    #[test]
    fn one_cameras_stuck_source_reads_as_before_several_cameras() {
        let l = streaming();
        l.set_source_name("[source] pipeline filesrc");
        full_frame(&l);
        for _ in 0..3 {
            l.pipeline_abandoned();
        }
        let health = l.health(Instant::now(), STALL);
        assert!(
            matches!(
                health,
                Health::SourceStuck {
                    in_a_row: 3,
                    still_stuck: 3,
                    capture_silent: false,
                    camera: None,
                    ..
                }
            ),
            "{health:?}"
        );
        assert!(!health.is_alive());
        assert_eq!(
            status_line(&health, "29.8 fps"),
            "SOURCE STUCK: the source is stuck: 3 of its pipelines in a row did not stop when it was lost \
             (an element blocked in a read or a driver call; 3 still blocked), watchdog pings stopped; 29.8 fps"
        );
        assert_eq!(
            stuck_source_reason(&health, Some(l.source_name())).unwrap(),
            "the source ([source] pipeline filesrc) is stuck: 3 of its pipelines in a row did not stop \
             when it was lost (an element blocked in a read or a driver call; 3 still blocked)"
        );
    }

    const FRONT: &str = "camera front: RTSP camera rtsp://front";
    const SIDE: &str = "camera side: RTSP camera rtsp://side";

    /// A further camera with a live source, as capture sets it up: named,
    /// managed (its thread beats now), not streaming yet.
    fn live_camera(station: &Liveness, name: &str) -> Liveness {
        let camera = station.for_another_camera();
        camera.set_source_name(name);
        camera.set_source_managed(true);
        camera
    }

    /// A camera's source lost, and `n` rebuilt pipelines in a row that did
    /// not stop in time.
    fn lost_with_pipelines_abandoned(camera: &Liveness, n: u64) {
        camera.set_source_streaming(true);
        camera.set_source_streaming(false);
        camera.set_source_lost(true);
        for _ in 0..n {
            camera.pipeline_abandoned();
            camera.capture_heartbeat();
        }
    }

    #[test]
    fn another_cameras_abandoned_pipelines_make_its_source_stuck_naming_it() {
        let front = streaming();
        front.set_source_name(FRONT);
        let side = live_camera(&front, SIDE);
        full_frame(&front);
        lost_with_pipelines_abandoned(&side, MAX_ABANDONED_IN_A_ROW);
        // The first camera inspects normally meanwhile.
        full_frame(&front);
        front.capture_heartbeat();
        let now = Instant::now();
        let health = front.health(now, STALL);
        let Health::SourceStuck {
            in_a_row: 3,
            still_stuck: 3,
            capture_silent: false,
            camera: Some(camera),
            ..
        } = &health
        else {
            panic!("{health:?}");
        };
        assert_eq!(&**camera, SIDE);
        assert!(!health.is_alive());
        // The station's verdict, whichever camera's handle asks.
        assert_eq!(side.health(now, STALL), health);
        // The words name the side camera, not the first one the caller gives.
        assert_eq!(
            stuck_source_reason(&health, Some(front.source_name())).unwrap(),
            "the source (camera side: RTSP camera rtsp://side) is stuck: 3 of its pipelines in a row \
             did not stop when it was lost (an element blocked in a read or a driver call; 3 still blocked)"
        );
        assert!(
            status_line(&health, "29.8 fps").starts_with(
                "SOURCE STUCK: the source (camera side: RTSP camera rtsp://side) is stuck: 3 of its"
            ),
            "{}",
            status_line(&health, "29.8 fps")
        );
    }

    #[test]
    fn another_cameras_device_held_by_an_abandoned_pipeline_makes_its_source_stuck() {
        let front = streaming();
        let side = live_camera(&front, SIDE);
        full_frame(&front);
        lost_with_pipelines_abandoned(&side, 1);
        side.rebuild_started(false);
        assert_eq!(
            front.health(after(2), STALL),
            Health::Alive { in_flight: 0 }
        );
        let health = front.health(after(6), STALL);
        assert!(
            matches!(
                &health,
                Health::SourceStuck { in_a_row: 1, still_stuck: 1, capture_silent: false, camera: Some(c), for_ }
                    if &**c == SIDE && *for_ >= STALL
            ),
            "{health:?}"
        );
    }

    #[test]
    fn the_first_camera_in_set_up_order_whose_source_is_stuck_is_named() {
        let front = streaming();
        front.set_source_name(FRONT);
        let side = live_camera(&front, SIDE);
        let top = live_camera(&front, "camera top: RTSP camera rtsp://top");
        lost_with_pipelines_abandoned(&top, 3);
        lost_with_pipelines_abandoned(&side, 4);
        let health = front.health(Instant::now(), STALL);
        assert!(
            matches!(&health, Health::SourceStuck { in_a_row: 4, camera: Some(c), .. } if &**c == SIDE),
            "{health:?}"
        );
        // The first camera's comes first, named by the caller as before.
        lost_with_pipelines_abandoned(&front, 3);
        let health = front.health(Instant::now(), STALL);
        assert!(
            matches!(
                health,
                Health::SourceStuck {
                    in_a_row: 3,
                    camera: None,
                    ..
                }
            ),
            "{health:?}"
        );
        assert!(
            stuck_source_reason(&health, Some(front.source_name()))
                .unwrap()
                .starts_with("the source (camera front: RTSP camera rtsp://front) is stuck")
        );
    }

    #[test]
    fn another_camera_lost_and_being_rebuilt_keeps_the_station_alive() {
        let stall = Duration::from_millis(20);
        let front = streaming();
        let side = live_camera(&front, SIDE);
        full_frame(&front);
        // Lost, two rebuilt pipelines abandoned (below the limit) whose
        // teardowns then ended; capture keeps rebuilding, its thread beating.
        lost_with_pipelines_abandoned(&side, MAX_ABANDONED_IN_A_ROW - 1);
        side.abandoned_teardown_ended();
        side.abandoned_teardown_ended();
        side.rebuild_started(false);
        assert_eq!(
            front.health(after(2), STALL),
            Health::Alive { in_flight: 0 }
        );
        // Down for longer than the stall timeout, thread still beating.
        std::thread::sleep(stall + Duration::from_millis(10));
        side.capture_heartbeat();
        assert!(side.source_lost());
        assert_eq!(front.health(Instant::now(), stall), Health::Idle);
    }

    #[test]
    fn another_cameras_capture_thread_gone_silent_while_its_source_is_down_is_stuck() {
        let front = streaming();
        let side = live_camera(&front, SIDE);
        full_frame(&front);
        // Down, thread beating a moment ago: capture's business.
        assert_eq!(
            front.health(after(2), STALL),
            Health::Alive { in_flight: 0 }
        );
        // No beat for 10 s (the limit: the 5 s stall timeout), down as long.
        let health = front.health(after(10), STALL);
        assert!(
            matches!(
                &health,
                Health::SourceStuck { capture_silent: true, camera: Some(c), for_, .. }
                    if &**c == SIDE && *for_ >= Duration::from_secs(10)
            ),
            "{health:?}"
        );
        assert!(!health.is_alive());
        assert_eq!(
            stuck_source_reason(&health, Some(front.source_name())).unwrap(),
            "the source (camera side: RTSP camera rtsp://side) is stuck: it is down and its capture \
             thread has not looked after it for 10 s (blocked in a driver call, or ended), so nothing \
             rebuilds it"
        );
        // Streaming, its thread silent between beats: frames move.
        side.set_source_streaming(true);
        assert_eq!(front.health(after(60), STALL), Health::Idle);
        // A source capture does not manage (a file at its end) is not judged.
        let file = front.for_another_camera();
        file.set_source_name("camera top: file top.mp4");
        assert_eq!(front.health(after(60), STALL), Health::Idle);
    }

    #[test]
    fn the_first_of_several_cameras_is_judged_on_its_own_source_not_the_stations() {
        let front = Liveness::new();
        front.set_source_name(FRONT);
        front.set_source_managed(true);
        front.set_source_streaming(true);
        let side = live_camera(&front, SIDE);
        side.set_source_streaming(true);
        // The front camera goes down; its capture thread beats (rebuilding).
        front.set_source_streaming(false);
        front.capture_heartbeat();
        full_frame(&side);
        // The watchdog's probe: the station streams (the side camera does).
        assert_eq!(
            front.is_alive(after(2), STALL, true),
            Health::Alive { in_flight: 0 }
        );
        assert!(
            !front.source_streaming(),
            "the probe must not overwrite the front camera's own state"
        );
        // Its thread silent for 10 s while down: stuck, though the station streams.
        let health = front.is_alive(after(10), STALL, true);
        assert!(
            matches!(
                &health,
                Health::SourceStuck { capture_silent: true, camera: None, for_, .. }
                    if *for_ >= Duration::from_secs(10)
            ),
            "{health:?}"
        );
        assert!(
            stuck_source_reason(&health, Some(front.source_name()))
                .unwrap()
                .contains(FRONT)
        );
        // Streaming again: the station is idle between frames, as before.
        front.set_source_streaming(true);
        assert_eq!(front.is_alive(after(60), STALL, true), Health::Idle);
        // The station's state is read from the cameras' own records, not
        // written over them by the probe.
        assert_eq!(front.is_alive(after(60), STALL, false), Health::Idle);
        assert!(front.source_streaming());
    }

    #[test]
    fn watchdog_names_another_camera_whose_source_is_stuck() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let systemd = ListenerForTest::bind(&path);
        let notifier = Notifier::connect(NotifyAddress::Path(path), None).unwrap();
        let front = streaming();
        front.set_source_name(FRONT);
        let side = live_camera(&front, SIDE);
        lost_with_pipelines_abandoned(&side, MAX_ABANDONED_IN_A_ROW);
        let watchdog = WatchdogThread::spawn_with_interval(
            notifier,
            front.clone(),
            Duration::from_millis(20),
            Duration::from_millis(150),
            || true,
            || "30.0 fps".to_string(),
        )
        .unwrap();
        // The first camera inspects all along.
        for _ in 0..10 {
            full_frame(&front);
            std::thread::sleep(Duration::from_millis(10));
        }
        watchdog.stop();
        let sent = systemd.take();
        assert!(!sent.iter().any(|m| m == "WATCHDOG=1"), "{sent:?}");
        assert!(
            sent.iter().any(|m| m.starts_with(
                "STATUS=SOURCE STUCK: the source (camera side: RTSP camera rtsp://side) is stuck: 3 of its"
            )),
            "{sent:?}"
        );
    }

    /// Test double for systemd: reads every datagram on its own thread (the kernel queue
    /// holds only a few) and keeps them for the test to inspect.
    struct ListenerForTest {
        received: Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl ListenerForTest {
        fn bind(path: &std::path::Path) -> ListenerForTest {
            let socket = UnixDatagram::bind(path).unwrap();
            let received = Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = received.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = socket.recv(&mut buf) {
                    sink.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
            });
            ListenerForTest { received }
        }

        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.received.lock().unwrap())
        }
    }

    #[test]
    fn watchdog_loop_pings_while_alive_and_stops_when_stalled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let systemd = ListenerForTest::bind(&path);
        let notifier = Notifier::connect(NotifyAddress::Path(path), None).unwrap();
        let liveness = Liveness::new();
        full_frame(&liveness);

        let watchdog = WatchdogThread::spawn_with_interval(
            notifier,
            liveness.clone(),
            Duration::from_millis(20),
            Duration::from_millis(150),
            || true,
            || "30.0 fps".to_string(),
        )
        .unwrap();
        // Alive: frames keep finishing.
        for _ in 0..10 {
            full_frame(&liveness);
            std::thread::sleep(Duration::from_millis(10));
        }
        let alive = systemd.take();
        assert!(alive.iter().any(|m| m == "WATCHDOG=1"), "{alive:?}");
        assert!(alive.iter().any(|m| m == "STATUS=30.0 fps"), "{alive:?}");

        // Stalled: one frame enters and never finishes. After the stall timeout plus one
        // interval (and slack for a busy machine), no more pings.
        liveness.frame_captured();
        std::thread::sleep(Duration::from_millis(300));
        systemd.take();
        std::thread::sleep(Duration::from_millis(200));
        let stalled = systemd.take();
        assert!(
            !stalled.iter().any(|m| m == "WATCHDOG=1"),
            "pinged while stalled: {stalled:?}"
        );
        assert!(
            stalled
                .iter()
                .any(|m| m.starts_with("STATUS=STALLED at preprocess")),
            "{stalled:?}"
        );

        // It recovers when results move again.
        liveness.frame_finished();
        std::thread::sleep(Duration::from_millis(100));
        assert!(systemd.take().iter().any(|m| m == "WATCHDOG=1"));
        watchdog.stop();
    }
}
