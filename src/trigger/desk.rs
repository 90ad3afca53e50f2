//! `TriggerDesk`: where a camera's triggers come in (Modbus, HTTP). It
//! accepts or refuses each one at once, numbers the accepted ones (the
//! line's part order), starts their deadline clock, and queues them for the
//! frame path (`PartRings`), which gives each exactly one result.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::frame::{CameraIndex, FrameMeta, Part, TriggerTime, TriggeredBy};
use crate::line::deadline::DeadlineFeed;

/// Triggers that may wait for their frame at once, per camera. A camera at
/// 30 frames/s and a trigger every frame keeps one or two waiting; a full
/// backlog means the frame path is far behind or the camera is gone, and a
/// PLC sees TriggerReady low.
pub const BACKLOG: usize = 64;

/// Why a trigger was refused (the PLC sees TriggerReady low, the HTTP
/// caller a 503 with this text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the station is not online (starting, stopping, or its camera is not streaming)")]
    Offline,
    #[error(
        "{BACKLOG} triggers are already waiting for frames; the camera or the frame path is behind"
    )]
    Backlog,
    #[error(
        "the camera is triggered on its own input line ([trigger] mode = \"camera\"): a PLC's trigger is not taken"
    )]
    ByCamera,
}

/// An accepted trigger waiting for its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub part: Part,
    /// The part's moment: the trigger plus `delay_ms`. The first frame
    /// captured at or after it is the part's.
    pub moment: Instant,
}

impl Pending {
    pub fn trigger(&self) -> TriggerTime {
        self.part
            .trigger
            .expect("a pending part always has its trigger")
    }
}

/// Whether the station may take triggers: told by the pipeline.
type OnlineProbe = Box<dyn Fn() -> bool + Send + Sync>;
/// What happens at once for an accepted part (firing the camera).
type AcceptHook = Box<dyn Fn(&Part) + Send + Sync>;

/// One camera's trigger desk, shared by the servers (requests) and the
/// frame path (matching).
pub struct TriggerDesk {
    camera: CameraIndex,
    delay: Duration,
    waiting: Mutex<Waiting>,
    /// Service ready and not stopping (the pipeline sets it).
    ready: AtomicBool,
    /// The camera streams (capture's probe); unset = streaming.
    streaming: OnceLock<OnlineProbe>,
    /// Called with each accepted part, after the desk's lock is released:
    /// a software-triggered camera's TriggerSoftware (set once, at start).
    on_accept: OnceLock<AcceptHook>,
    accepted: AtomicU64,
    /// Frames no trigger claimed (not judged; `plc` mode).
    pub(super) passed_over: AtomicU64,
    refused: AtomicU64,
    /// `camera` mode: the camera's input line triggers; the desk only says
    /// whether the station is online and refuses every trigger.
    by_camera: bool,
}

pub(super) struct Waiting {
    pub(super) queue: VecDeque<Pending>,
    /// The next accepted trigger's `Part::number`.
    next_number: u64,
    /// Each accepted part's deadline clock (`[decision] deadline_ms`).
    deadline: Option<DeadlineFeed>,
    /// The frame path read its cameras' end: a trigger now would never
    /// get its result, so none is taken.
    pub(super) closed: bool,
}

impl TriggerDesk {
    pub fn new(camera: CameraIndex, delay: Duration) -> TriggerDesk {
        TriggerDesk {
            camera,
            delay,
            waiting: Mutex::new(Waiting {
                queue: VecDeque::with_capacity(BACKLOG),
                next_number: 0,
                deadline: None,
                closed: false,
            }),
            ready: AtomicBool::new(false),
            streaming: OnceLock::new(),
            on_accept: OnceLock::new(),
            accepted: AtomicU64::new(0),
            passed_over: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            by_camera: false,
        }
    }

    /// The desk of a camera triggered on its own input line (`camera`
    /// mode): online as any desk, every trigger refused (`Refused::ByCamera`).
    pub fn triggered_by_camera(camera: CameraIndex) -> TriggerDesk {
        TriggerDesk {
            by_camera: true,
            ..TriggerDesk::new(camera, Duration::ZERO)
        }
    }

    /// Each accepted part's deadline starts at its trigger (set once, at start).
    pub fn set_deadline_feed(&self, feed: DeadlineFeed) {
        self.lock().deadline = Some(feed);
    }

    /// No trigger is taken any more (the run ends): the deadline clock's
    /// feed goes, so its thread ends once every part is claimed or late.
    pub fn end_deadline_clock(&self) {
        let mut waiting = self.lock();
        waiting.closed = true;
        waiting.deadline = None;
    }

    /// How the desk learns whether its camera streams (set once, at start).
    pub fn set_streaming_probe(&self, probe: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.streaming.set(Box::new(probe));
    }

    /// What to do at once for each accepted part, e.g. fire a GenICam
    /// camera's TriggerSoftware (set once, at start). The frame that comes
    /// back is the first after the trigger: the part's, by the usual rule.
    pub fn set_on_accept(&self, hook: impl Fn(&Part) + Send + Sync + 'static) {
        let _ = self.on_accept.set(Box::new(hook));
    }

    /// The service is ready (after READY=1) or no longer (stopping).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Service ready and camera streaming (Modbus `Online`).
    pub fn online(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.streaming.get().is_none_or(|probe| probe())
    }

    /// A trigger would be accepted now (Modbus `TriggerReady`, without the
    /// PLC's own TriggerEnable).
    pub fn ready(&self) -> bool {
        self.online() && self.can_take()
    }

    /// The desk itself would take a trigger (not `camera` mode, backlog not
    /// full), whether or not the station is online.
    pub fn can_take(&self) -> bool {
        !self.by_camera && self.lock().queue.len() < BACKLOG
    }

    /// Triggers accepted so far (Modbus `AcquisitionCount`, mod 65536).
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Triggers refused so far (offline, backlog, `camera` mode).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Frames of this camera no trigger claimed.
    pub fn passed_over(&self) -> u64 {
        self.passed_over.load(Ordering::Relaxed)
    }

    /// One inspection of part `id`, asked now. Accepted: the part, which
    /// gets exactly one result (its verdict, or a fail: `no_frame`,
    /// `overrun`, `late`). Refused: nothing happens, and nothing is owed.
    pub fn trigger(&self, id: u64, by: TriggeredBy) -> Result<Part, Refused> {
        let refuse = |why| {
            self.refused.fetch_add(1, Ordering::Relaxed);
            Err(why)
        };
        if self.by_camera {
            return refuse(Refused::ByCamera);
        }
        if !self.online() {
            return refuse(Refused::Offline);
        }
        let mut waiting = self.lock();
        if waiting.closed {
            return refuse(Refused::Offline);
        }
        if waiting.queue.len() >= BACKLOG {
            return refuse(Refused::Backlog);
        }
        // The time is taken under the lock: a frame the frame path takes
        // after this trigger's time finds the trigger queued (see `PartRings`).
        let trigger = TriggerTime::now(by);
        let part = Part {
            number: waiting.next_number,
            id,
            trigger: Some(trigger),
            framed: true,
        };
        waiting.next_number += 1;
        waiting.queue.push_back(Pending {
            part,
            moment: trigger.instant + self.delay,
        });
        if let Some(feed) = &mut waiting.deadline {
            feed.delivered(&self.part_meta(part, trigger));
        }
        drop(waiting);
        self.accepted.fetch_add(1, Ordering::Relaxed);
        if let Some(hook) = self.on_accept.get() {
            hook(&part);
        }
        Ok(part)
    }

    /// The meta of a part no frame stands behind (yet): its trigger's times.
    pub fn part_meta(&self, part: Part, trigger: TriggerTime) -> FrameMeta {
        FrameMeta {
            seq: 0,
            camera: self.camera,
            captured_at: trigger.at,
            captured_instant: trigger.instant,
            part: Part {
                framed: false,
                ..part
            },
        }
    }

    /// The frame path's side: the triggers waiting, oldest first.
    pub(super) fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, Waiting> {
        // Every statement leaves the queue whole: a panic elsewhere leaves it usable.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
