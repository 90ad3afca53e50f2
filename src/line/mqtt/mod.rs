//! Verdicts to an MQTT broker (MQTT 5, `rumqttc`).
//!
//! ```text
//! Line ──send()──▶ VerdictQueue (bounded, drop-oldest) ──▶ "mqtt-publish" thread ──try_publish──▶ rumqttc Client
//!                                                                                                     │ request channel
//!                        "mqtt" thread: owns the Connection, drives its event loop ◀──────────────────┘
//!                        (connect, backoff, ConnAck → status online, PubAck → published, errors → outage)
//! ```
//!
//! Rules the design keeps:
//! - Publishing never blocks inspection: `send` only takes a short lock and queues.
//! - Nothing leaves after it expired: a verdict that can no longer reach the
//!   broker before its deadline becomes the part's `late` fail (which may
//!   still go out for one more deadline period), and a `late` fail past that
//!   is dropped (`expired`), before anything is handed over; at most `WINDOW` are handed to
//!   rumqttc at a time, and only while connected (under the queue's lock, so a
//!   disconnect cannot slip in between). On a disconnect rumqttc's own resend
//!   list (where stale publishes would otherwise wait, rumqtt issue 211) is
//!   emptied; what was not acknowledged goes back to the front of our queue,
//!   where it is either sent again in time or dropped as expired.
//! - MQTT 5 message expiry is whole seconds: each publish carries the time left
//!   rounded up (at least 1 s), so a broker never keeps it much past its expiry;
//!   the client-side check is what keeps the exact deadline.
//! - Every verdict handed to MQTT ends as exactly one of: published (QoS 1:
//!   acknowledged by the broker; QoS 0: written), or dropped for a reason.
//! - `<topic>/status` is `online` (retained) after each connect, and the last
//!   will, `offline` (retained, QoS 1), when the connection dies; a clean stop
//!   publishes `offline` itself.

mod client;
pub mod message;
mod start_error;
mod tls;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{LineOutput, LineVerdict, ModelIds, SEND_MARGIN};
use crate::config::MqttConfig;
use crate::stats::LatencyHistogram;

/// Verdicts handed to rumqttc and not yet acknowledged, at most: few enough
/// that a disconnect strands little, enough to keep a loopback or LAN busy.
const WINDOW: usize = 16;

/// Why a verdict did not reach the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The queue was full (broker slow or away): the oldest waiting verdict went.
    QueueFull,
    /// Its deadline passed before it could be sent (or acknowledged before a disconnect).
    Expired,
    /// The broker answered the publish with an error (e.g. not authorised by its ACL).
    Rejected,
    /// MQTT could not start (password file, CA file): nothing is sent this run.
    Unavailable,
    /// Still waiting when the service stopped and the flush time ran out.
    Shutdown,
}

impl DropReason {
    pub const ALL: [DropReason; 5] = [
        DropReason::QueueFull,
        DropReason::Expired,
        DropReason::Rejected,
        DropReason::Unavailable,
        DropReason::Shutdown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::Expired => "expired",
            DropReason::Rejected => "rejected",
            DropReason::Unavailable => "unavailable",
            DropReason::Shutdown => "shutdown",
        }
    }
}

/// MQTT counters, shareable (atomics): the pipeline, STATUS= and a metrics
/// endpoint read them at any time.
pub struct MqttStats {
    /// `mqtt://host:port`, for messages.
    pub broker: String,
    pub connected: AtomicBool,
    /// Verdicts handed to MQTT.
    pub offered: AtomicU64,
    /// Acknowledged by the broker (QoS 1) or written (QoS 0).
    pub published: AtomicU64,
    /// By `DropReason` (index in `DropReason::ALL`).
    pub dropped: [AtomicU64; DropReason::ALL.len()],
    /// Verdicts that could not leave before their deadline (broker away or
    /// slow) and were sent as `late` fails instead.
    pub late: AtomicU64,
    /// Times the connection was lost (or could not be made at start).
    pub outages: AtomicU64,
    /// Unix milliseconds when the current outage began; 0 while connected.
    pub down_since_ms: AtomicU64,
    /// CPU time the two MQTT threads used (added when each ends): MQTT's cost.
    pub cpu_ns: AtomicU64,
    /// Parts before this `seq` (a benchmark's warm-up) stay out of the two
    /// latency histograms, as they stay out of the stage histograms; 0 for a
    /// service run, where every part counts.
    measure_from_seq: u64,
    /// Capture to the broker's acknowledgement (QoS 1) per published verdict.
    ack_latency: Mutex<LatencyHistogram>,
    /// Verdict (handed to the line) to the broker's acknowledgement: MQTT's own share.
    send_latency: Mutex<LatencyHistogram>,
}

impl MqttStats {
    fn new(broker: String, measure_from_seq: u64) -> Self {
        MqttStats {
            broker,
            connected: AtomicBool::new(false),
            offered: AtomicU64::new(0),
            published: AtomicU64::new(0),
            dropped: Default::default(),
            late: AtomicU64::new(0),
            outages: AtomicU64::new(0),
            down_since_ms: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
            measure_from_seq,
            ack_latency: Mutex::new(LatencyHistogram::default()),
            send_latency: Mutex::new(LatencyHistogram::default()),
        }
    }

    fn drop_verdicts(&self, reason: DropReason, count: u64) {
        let i = DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        self.dropped[i].fetch_add(count, Ordering::Relaxed);
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|d| d.load(Ordering::Relaxed)).sum()
    }

    fn record_ack(&self, verdict: &LineVerdict) {
        if verdict.seq < self.measure_from_seq {
            return;
        }
        let ms = verdict.captured_instant.elapsed().as_secs_f64() * 1e3;
        if let Ok(mut h) = self.ack_latency.lock() {
            h.record(ms);
        }
        if let Ok(mut h) = self.send_latency.lock() {
            h.record((ms - verdict.latency_ms).max(0.0));
        }
    }

    fn set_down(&self, down: bool) {
        self.connected.store(!down, Ordering::Relaxed);
        let since = if down {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_millis() as u64)
        } else {
            0
        };
        self.down_since_ms.store(since, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> MqttCounts {
        let mut dropped = [0; DropReason::ALL.len()];
        for (d, a) in dropped.iter_mut().zip(&self.dropped) {
            *d = a.load(Ordering::Relaxed);
        }
        let quantiles = |h: &Mutex<LatencyHistogram>| {
            h.lock()
                .ok()
                .and_then(|h| Some([h.quantile(0.5)?, h.quantile(0.99)?, h.quantile(0.999)?]))
        };
        let ack_ms = quantiles(&self.ack_latency);
        let send_ms = quantiles(&self.send_latency);
        MqttCounts {
            broker: self.broker.clone(),
            connected: self.connected.load(Ordering::Relaxed),
            offered: self.offered.load(Ordering::Relaxed),
            published: self.published.load(Ordering::Relaxed),
            dropped,
            late: self.late.load(Ordering::Relaxed),
            outages: self.outages.load(Ordering::Relaxed),
            ack_ms,
            send_ms,
            cpu_ms: self.cpu_ns.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }

    /// For STATUS=: empty while connected, else what is wrong.
    pub fn status_note(&self) -> Option<String> {
        if self.connected.load(Ordering::Relaxed) {
            return None;
        }
        let since = self.down_since_ms.load(Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Some(format!(
            "MQTT broker {} unreachable for {} s ({} verdicts dropped so far)",
            self.broker,
            now.saturating_sub(since) / 1000,
            self.dropped_total()
        ))
    }
}

/// A copy of `MqttStats` at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct MqttCounts {
    pub broker: String,
    pub connected: bool,
    pub offered: u64,
    pub published: u64,
    pub dropped: [u64; DropReason::ALL.len()],
    /// Verdicts turned into `late` fails in the queue (see `MqttStats::late`).
    pub late: u64,
    pub outages: u64,
    /// Capture to broker acknowledgement, ms: p50, p99, p99.9 (QoS 1 only).
    pub ack_ms: Option<[f64; 3]>,
    /// Verdict to broker acknowledgement, ms: p50, p99, p99.9 (QoS 1 only).
    pub send_ms: Option<[f64; 3]>,
    /// CPU milliseconds of the MQTT threads (complete once `finish` returned).
    pub cpu_ms: f64,
}

impl MqttCounts {
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    pub fn dropped(&self, reason: DropReason) -> u64 {
        DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.dropped[i])
    }

    /// Lines for the run summary and `bench`.
    pub fn render(&self) -> String {
        let reasons: Vec<String> = DropReason::ALL
            .iter()
            .zip(self.dropped)
            .map(|(r, n)| format!("{} {n}", r.as_str()))
            .collect();
        let mut out = format!(
            "mqtt: {}: published {}, dropped {} ({}), late in queue {}, outages {}, cpu {:.1} ms\n",
            self.broker,
            self.published,
            self.dropped_total(),
            reasons.join(", "),
            self.late,
            self.outages,
            self.cpu_ms
        );
        if let Some([p50, p99, p999]) = self.ack_ms {
            out.push_str(&format!(
                "mqtt capture->ack ms: p50 {p50:.2}, p99 {p99:.2}, p99.9 {p999:.2}\n"
            ));
        }
        if let Some([p50, p99, p999]) = self.send_ms {
            out.push_str(&format!(
                "mqtt verdict->ack ms: p50 {p50:.2}, p99 {p99:.2}, p99.9 {p999:.2}\n"
            ));
        }
        out
    }
}

/// CPU time the calling thread has used so far.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return 0;
    }
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// What went to the broker and is not acknowledged yet.
#[derive(Debug, Clone)]
// A verdict waits in the queue by value: boxing it would allocate per part.
#[allow(clippy::large_enum_variant)]
enum Sent {
    Verdict(LineVerdict),
    /// A retained status message (`online` / `offline`).
    Status,
}

/// The queue and connection state both MQTT threads and `send` share.
struct State {
    /// Verdicts waiting to be handed over, oldest first.
    queue: VecDeque<LineVerdict>,
    connected: bool,
    /// Handed to rumqttc, not yet written (matched in order with `Outgoing::Publish`).
    handed: VecDeque<Sent>,
    /// Written, waiting for PUBACK, by packet id.
    inflight: HashMap<u16, Sent>,
    /// `finish` was called: no more verdicts come.
    stopping: bool,
    /// The threads must end now.
    closed: bool,
    /// A queue overflow was logged since the queue last emptied.
    overflow_logged: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    stats: Arc<MqttStats>,
    capacity: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A queued verdict that can no longer arrive before its deadline becomes
    /// the part's `late` fail (the line must hear about every part); a `late`
    /// fail that can no longer arrive in its time is dropped (`expired`).
    fn sweep_expired(&self, state: &mut State, now: Instant) {
        let in_time = |v: &LineVerdict| v.deadline.is_none_or(|d| now + SEND_MARGIN <= d.expires);
        let mut late = 0;
        for v in state.queue.iter_mut() {
            if !v.is_late_fail() && !in_time(v) {
                *v = v.clone().into_late_fail();
                late += 1;
            }
        }
        if late > 0 {
            self.stats.late.fetch_add(late, Ordering::Relaxed);
        }
        let before = state.queue.len();
        state.queue.retain(in_time);
        let expired = (before - state.queue.len()) as u64;
        if expired > 0 {
            self.stats.drop_verdicts(DropReason::Expired, expired);
        }
    }

    /// Puts verdicts that were sent but not acknowledged back at the front of
    /// the queue (oldest first), for a fresh send after the reconnect.
    fn requeue_unacked(&self, state: &mut State) {
        let mut unacked: Vec<LineVerdict> = state
            .handed
            .drain(..)
            .chain(state.inflight.drain().map(|(_, s)| s))
            .filter_map(|s| match s {
                Sent::Verdict(v) => Some(v),
                Sent::Status => None,
            })
            .collect();
        unacked.sort_by_key(|v| v.seq);
        for v in unacked.into_iter().rev() {
            state.queue.push_front(v);
        }
        while state.queue.len() > self.capacity {
            state.queue.pop_front();
            self.stats.drop_verdicts(DropReason::QueueFull, 1);
        }
    }
}

/// The line output that queues verdicts for the broker.
struct VerdictQueue {
    shared: Arc<Shared>,
    /// MQTT could not start: every verdict is counted as dropped `unavailable`.
    unavailable: bool,
}

impl LineOutput for VerdictQueue {
    fn send(&self, verdict: &LineVerdict) {
        let stats = &self.shared.stats;
        stats.offered.fetch_add(1, Ordering::Relaxed);
        if self.unavailable {
            stats.drop_verdicts(DropReason::Unavailable, 1);
            return;
        }
        let mut state = self.shared.lock();
        if state.queue.len() >= self.shared.capacity {
            state.queue.pop_front();
            stats.drop_verdicts(DropReason::QueueFull, 1);
            if !state.overflow_logged {
                state.overflow_logged = true;
                log::warn!(target: "sealcheck::mqtt", queue = self.shared.capacity, seq = verdict.seq;
                    "MQTT queue full: dropping the oldest unsent verdicts (counted) until the broker keeps up");
            }
        }
        state.queue.push_back(verdict.clone());
        drop(state);
        self.shared.wake.notify_all();
    }
}

/// The MQTT side of a run: the queue the line hands verdicts to, and the
/// threads that send them.
/// A file `[mqtt]` names (password, CA, client certificate or key) that the
/// service could not use: at start it would turn MQTT off for the run, so
/// `sealcheck check-config` reports it before a restart.
#[derive(Debug, thiserror::Error)]
#[error("[mqtt]: {0}")]
pub struct MqttFilesError(String);

/// Reads every file `[mqtt]` names as the service does at start (never
/// printing the password); connects to nothing.
pub fn check_files(config: &MqttConfig) -> Result<(), MqttFilesError> {
    client::check_files(config).map_err(|e| MqttFilesError(e.to_string()))
}

pub struct MqttLine {
    shared: Arc<Shared>,
    output: Arc<VerdictQueue>,
    running: Option<client::Running>,
}

impl MqttLine {
    /// Starts publishing to the configured broker. Never fails the run: a
    /// problem (password file, CA file) is logged with what to do, and every
    /// verdict is then counted as dropped `unavailable`; an unreachable broker
    /// is retried in the background. Parts before `measure_from_seq` (a
    /// benchmark's warm-up; 0 for a service run) are sent like any other but
    /// left out of the latency histograms.
    pub fn start(config: &MqttConfig, models: ModelIds, measure_from_seq: u64) -> MqttLine {
        let stats = Arc::new(MqttStats::new(config.broker.url(), measure_from_seq));
        stats.set_down(true);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::with_capacity(config.queue),
                connected: false,
                handed: VecDeque::with_capacity(WINDOW + 1),
                inflight: HashMap::with_capacity(2 * WINDOW),
                stopping: false,
                closed: false,
                overflow_logged: false,
            }),
            wake: Condvar::new(),
            stats,
            capacity: config.queue,
        });
        let running = match client::start(config, models, Arc::clone(&shared)) {
            Ok(running) => Some(running),
            Err(e) => {
                log::error!(target: "sealcheck::mqtt", broker = shared.stats.broker.as_str(), error = e.to_string().as_str();
                    "MQTT is off for this run: {e}; inspection and the results file go on");
                None
            }
        };
        let output = Arc::new(VerdictQueue {
            shared: Arc::clone(&shared),
            unavailable: running.is_none(),
        });
        MqttLine {
            shared,
            output,
            running,
        }
    }

    /// The line output to hand to `Line`.
    pub fn output(&self) -> Arc<dyn LineOutput> {
        self.output.clone()
    }

    pub fn stats(&self) -> Arc<MqttStats> {
        Arc::clone(&self.shared.stats)
    }

    /// After the last verdict: sends what is queued (up to `flush` long),
    /// counts the rest dropped `shutdown`, says `offline`, disconnects.
    pub fn finish(mut self, flush: Duration) -> MqttCounts {
        if let Some(running) = self.running.take() {
            running.finish(&self.shared, flush);
        }
        self.shared.stats.snapshot()
    }
}

impl Drop for MqttLine {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.finish(&self.shared, Duration::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Decision, Reason};
    use crate::frame::FrameMeta;
    use crate::line::PartDeadline;

    fn shared(capacity: usize) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                connected: false,
                handed: VecDeque::new(),
                inflight: HashMap::new(),
                stopping: false,
                closed: false,
                overflow_logged: false,
            }),
            wake: Condvar::new(),
            stats: Arc::new(MqttStats::new("mqtt://test:1883".into(), 0)),
            capacity,
        })
    }

    fn verdict(seq: u64, deadline_ms: Option<u64>) -> LineVerdict {
        let meta = FrameMeta::now(seq);
        LineVerdict {
            seq,
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: Decision::error(),
            latency_ms: 1.0,
            deadline: deadline_ms.map(|ms| PartDeadline::of(&meta, Duration::from_millis(ms))),
            models: None,
            camera: None,
        }
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_counts_it() {
        let shared = shared(2);
        let queue = VerdictQueue {
            shared: Arc::clone(&shared),
            unavailable: false,
        };
        for seq in 0..3 {
            queue.send(&verdict(seq, None));
        }
        let seqs: Vec<u64> = shared.lock().queue.iter().map(|v| v.seq).collect();
        assert_eq!(seqs, vec![1, 2]);
        let counts = shared.stats.snapshot();
        assert_eq!(
            (counts.offered, counts.dropped(DropReason::QueueFull)),
            (3, 1)
        );
    }

    #[test]
    fn a_verdict_that_cannot_leave_in_time_becomes_a_late_fail_then_expires() {
        let shared = shared(8);
        let mut state = shared.lock();
        state.queue.push_back(verdict(0, Some(20)));
        state.queue.push_back(verdict(1, None));
        let start = Instant::now();
        shared.sweep_expired(&mut state, start);
        assert_eq!(
            state.queue[0].decision.reason,
            Reason::Error,
            "still in time"
        );
        shared.sweep_expired(&mut state, start + Duration::from_millis(25));
        assert_eq!(state.queue[0].decision.reason, Reason::Late);
        assert_eq!(shared.stats.snapshot().late, 1);
        shared.sweep_expired(&mut state, start + Duration::from_millis(45));
        assert_eq!(
            state.queue.len(),
            1,
            "the late fail expired; no deadline never expires"
        );
        assert_eq!(shared.stats.snapshot().dropped(DropReason::Expired), 1);
    }

    #[test]
    fn unacknowledged_verdicts_go_back_to_the_front_in_order() {
        let shared = shared(8);
        let mut state = shared.lock();
        state.queue.push_back(verdict(5, None));
        state.handed.push_back(Sent::Verdict(verdict(4, None)));
        state.inflight.insert(7, Sent::Verdict(verdict(3, None)));
        state.inflight.insert(2, Sent::Status);
        shared.requeue_unacked(&mut state);
        let seqs: Vec<u64> = state.queue.iter().map(|v| v.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        assert!(state.handed.is_empty() && state.inflight.is_empty());
    }

    #[test]
    fn warm_up_acks_stay_out_of_the_latency_histograms() {
        let stats = MqttStats::new("mqtt://b:1883".into(), 10);
        let mut warm_up = verdict(9, None);
        warm_up.captured_instant -= Duration::from_secs(5);
        stats.record_ack(&warm_up);
        assert_eq!(
            stats.snapshot().ack_ms,
            None,
            "a warm-up part is not measured"
        );
        stats.record_ack(&verdict(10, None));
        let [_, _, p999] = stats.snapshot().ack_ms.unwrap();
        assert!(p999 < 1000.0, "only the measured part: {p999} ms");
    }

    #[test]
    fn status_says_when_the_broker_is_away() {
        let stats = MqttStats::new("mqtt://b:1883".into(), 0);
        stats.set_down(true);
        let note = stats.status_note().unwrap();
        assert!(
            note.starts_with("MQTT broker mqtt://b:1883 unreachable for 0 s"),
            "{note}"
        );
        stats.set_down(false);
        assert_eq!(stats.status_note(), None);
    }
}
