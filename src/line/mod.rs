//! What the line gets: exactly one verdict per part, in part order, on time or
//! failed `late` at its deadline, handed to every line output (MQTT today; a
//! GPIO reject pulse or Modbus can be added as another `LineOutput`).
//!
//! ```text
//! ring producer ──delivered(meta)──▶ DeadlineFeed ──FIFO (seq, due)──▶ deadline thread ──expire(seq)──┐
//! output stage (decision) ──deliver(seq, decision)───────────────────────────────────────────────▶ Line ──▶ LineOutput::send
//!                                                                                                           (MQTT queue, ...)
//! ```
//!
//! The gate: `Line` keeps the next part number the line is waiting for. The
//! decision stage and the deadline thread each claim a part under one short
//! lock; whoever claims part N hands its verdict to the outputs before the
//! lock is released, so the line sees every part once and in order. The
//! decision stage claims a part it decided in time and sends its real verdict;
//! the deadline thread claims a part still open at its deadline and sends a
//! `late` fail, and the real result, when it comes, only goes to the results
//! file and the log (marked late).
//!
//! A line output's `send` must not block: it queues, and when its queue is
//! full it drops the oldest verdict and counts it (the house rule: no output
//! ever slows a verdict).

pub mod deadline;
// Model ids live beside the models' config (`crate::model_id`); kept reachable here.
pub use crate::model_id;
pub mod mqtt;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::decision::Decision;
use crate::frame::FrameMeta;

pub use crate::model_id::ModelIds;

/// A verdict decided within this much of its deadline counts as late: the
/// time a message needs to reach the broker and a subscriber (loopback or a
/// plant LAN: well under a millisecond; the rest is margin).
pub const SEND_MARGIN: Duration = Duration::from_millis(2);

/// Nice value the line's timing threads (deadline, MQTT) ask for: ahead of
/// everything else on a busy machine, so a `late` fail leaves at its deadline.
const LINE_THREAD_NICE: i32 = -10;

/// Raises the calling thread's scheduling priority to `LINE_THREAD_NICE`
/// where the service may (root or `CAP_SYS_NICE`, e.g. systemd's `Nice=` or
/// `AmbientCapabilities=CAP_SYS_NICE`); otherwise it runs at the default.
pub(crate) fn raise_thread_priority() {
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
    let rc = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, LINE_THREAD_NICE)
    };
    if rc != 0 {
        log::debug!(target: "sealcheck::line", nice = LINE_THREAD_NICE;
            "cannot raise the priority of a line thread (needs CAP_SYS_NICE); it runs at the default");
    }
}

/// When a part's verdict is due, in both clocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartDeadline {
    /// Wall-clock deadline (what the message says), whole milliseconds.
    pub at: SystemTime,
    /// The same instant on the monotonic clock (what timers use).
    pub due: Instant,
    /// After this the message is useless and must not be delivered: the
    /// deadline for a verdict, the deadline plus one more `deadline_ms` for a
    /// `late` fail (the reject gate has acted by then).
    pub expires_at: SystemTime,
    pub expires: Instant,
    /// When a `late` fail for this part expires: one more deadline period.
    late_expires_at: SystemTime,
    late_expires: Instant,
}

impl PartDeadline {
    /// The deadline of a part captured at `meta`, `deadline` after capture,
    /// truncated to the millisecond so the message states it exactly.
    pub fn of(meta: &FrameMeta, deadline: Duration) -> PartDeadline {
        let exact = meta.captured_at + deadline;
        let since = exact.duration_since(UNIX_EPOCH).unwrap_or_default();
        let at = UNIX_EPOCH + Duration::from_millis(since.as_millis() as u64);
        let truncated = exact.duration_since(at).unwrap_or_default();
        let due = (meta.captured_instant + deadline)
            .checked_sub(truncated)
            .unwrap_or(meta.captured_instant);
        PartDeadline {
            at,
            due,
            expires_at: at,
            expires: due,
            late_expires_at: at + deadline,
            late_expires: due + deadline,
        }
    }

    /// The deadline of the `late` fail that replaces the verdict: it may still
    /// be delivered for one more deadline period.
    pub fn for_late_fail(self) -> PartDeadline {
        PartDeadline {
            expires_at: self.late_expires_at,
            expires: self.late_expires,
            ..self
        }
    }
}

/// One part's verdict as the line gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct LineVerdict {
    /// The frame's `seq`; also the part number until a trigger or encoder id exists.
    pub seq: u64,
    pub captured_at: SystemTime,
    pub captured_instant: Instant,
    pub decision: Decision,
    /// Capture to verdict.
    pub latency_ms: f64,
    pub deadline: Option<PartDeadline>,
    /// The models that judged the part; `None`: the models the line output
    /// started with (a `late` fail, which no model judged).
    pub models: Option<Arc<ModelIds>>,
    /// The camera's name with `[cameras.NAME]` (MQTT publishes to
    /// `<topic>/<camera>/verdict`); `None` with one `[source]`.
    pub camera: Option<Arc<str>>,
}

impl LineVerdict {
    /// This part as a `late` fail: what an output sends instead when the
    /// verdict could not leave before its deadline (e.g. the broker was away).
    pub fn into_late_fail(self) -> LineVerdict {
        LineVerdict {
            decision: Decision::late(),
            deadline: self.deadline.map(PartDeadline::for_late_fail),
            ..self
        }
    }

    pub fn is_late_fail(&self) -> bool {
        self.decision.reason == crate::decision::Reason::Late
    }
}

/// Something at the line that takes verdicts: the MQTT publisher, later a
/// GPIO reject pulse. Called for every part in order, from the decision
/// thread or the deadline thread (never both at once).
pub trait LineOutput: Send + Sync {
    /// Takes one verdict without blocking (queue it; drop the oldest when full).
    fn send(&self, verdict: &LineVerdict);
}

/// How the line got a part, as the results file and the log record it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The line got this verdict.
    OnTime,
    /// The line got a `late` fail for this part instead.
    Late,
}

/// Counts of the line's verdicts; shareable (atomics), read at any time.
#[derive(Debug, Default)]
pub struct LineStats {
    /// Verdicts handed to the line outputs (one per part).
    pub sent: AtomicU64,
    /// Of those, `late` fails.
    pub late: AtomicU64,
    /// Parts that reached no deadline timer because its queue was full
    /// (they still get exactly one verdict, from the decision stage).
    pub untimed: AtomicU64,
}

/// A copy of `LineStats` at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineCounts {
    pub sent: u64,
    pub late: u64,
    pub untimed: u64,
}

impl LineStats {
    pub fn snapshot(&self) -> LineCounts {
        LineCounts {
            sent: self.sent.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
            untimed: self.untimed.load(Ordering::Relaxed),
        }
    }
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
        };
        line.set_deadline(deadline);
        line
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

    /// Whether the line already got a verdict for part `seq`.
    pub fn is_claimed(&self, seq: u64) -> bool {
        *self.lock() > seq
    }

    /// The decision stage's verdict for a part. Sent to the line when it is in
    /// time; otherwise the line gets (or already got) a `late` fail.
    pub fn deliver(
        &self,
        meta: &FrameMeta,
        decision: &Decision,
        latency_ms: f64,
        models: Option<&Arc<ModelIds>>,
    ) -> Delivery {
        let deadline = self.deadline().map(|d| PartDeadline::of(meta, d));
        let mut next = self.lock();
        if *next > meta.seq {
            return Delivery::Late;
        }
        if *next < meta.seq {
            // Parts that never reached the decision stage (lost on the way): the
            // line must not wait for them forever, nor get them after this one.
            log::warn!(target: "sealcheck::line", first = *next, count = meta.seq - *next;
                "parts without a result: the line gets a late fail for each");
            while *next < meta.seq {
                self.send_late(*next, meta, deadline);
                *next += 1;
            }
        }
        *next = meta.seq + 1;
        let late = deadline.is_some_and(|d| Instant::now() + SEND_MARGIN > d.due);
        if late {
            self.send_late(meta.seq, meta, deadline);
            return Delivery::Late;
        }
        self.send(&LineVerdict {
            seq: meta.seq,
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: *decision,
            latency_ms,
            deadline,
            models: models.cloned(),
            camera: self.camera.clone(),
        });
        Delivery::OnTime
    }

    /// The deadline thread: part `seq` (captured at `meta`) reached `deadline`.
    /// Claims it, and any earlier part still open, with a `late` fail. False
    /// when the decision stage had claimed it already.
    pub fn expire(&self, meta: &FrameMeta, deadline: PartDeadline) -> bool {
        let mut next = self.lock();
        if *next > meta.seq {
            return false;
        }
        while *next <= meta.seq {
            self.send_late(*next, meta, Some(deadline));
            *next += 1;
        }
        true
    }

    fn send_late(&self, seq: u64, meta: &FrameMeta, deadline: Option<PartDeadline>) {
        self.stats.late.fetch_add(1, Ordering::Relaxed);
        self.send(&LineVerdict {
            seq,
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: Decision::late(),
            latency_ms: meta.captured_instant.elapsed().as_secs_f64() * 1e3,
            deadline: deadline.map(PartDeadline::for_late_fail),
            models: None,
            camera: self.camera.clone(),
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
    use crate::decision::Reason;

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
        assert_eq!(line.deliver(&m0, &ok(), 1.0, None), Delivery::OnTime);
        // The deadline thread reaches part 1 first.
        assert!(line.expire(&m1, PartDeadline::of(&m1, Duration::from_millis(1000))));
        assert_eq!(line.deliver(&m1, &ok(), 1.0, None), Delivery::Late);
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
        assert_eq!(line.deliver(&m, &ok(), 5.0, None), Delivery::Late);
        assert_eq!(*out.0.lock().unwrap(), vec![(0, Reason::Late)]);
    }

    #[test]
    fn lost_parts_are_failed_in_order_before_the_next() {
        let (line, out) = line(0);
        line.deliver(&FrameMeta::now(0), &ok(), 1.0, None);
        line.deliver(&FrameMeta::now(3), &ok(), 1.0, None);
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

    #[test]
    fn deadline_is_whole_milliseconds_in_both_clocks() {
        let m = FrameMeta::now(0);
        let d = PartDeadline::of(&m, Duration::from_millis(60));
        let ms = d.at.duration_since(UNIX_EPOCH).unwrap();
        assert_eq!(ms.subsec_nanos() % 1_000_000, 0);
        let from_capture = d.due - m.captured_instant;
        assert!(
            from_capture <= Duration::from_millis(60) && from_capture > Duration::from_millis(58)
        );
    }
}
