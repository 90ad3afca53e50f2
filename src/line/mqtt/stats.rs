//! MQTT's counters: `MqttStats` (shared atomics and the acknowledgement
//! latencies), `MqttCounts` (a copy at one moment, rendered for the run
//! summary), `DropReason`, and the CPU time the MQTT threads used.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::line::verdict::LineVerdict;
use crate::stats::LatencyHistogram;

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
    pub(super) fn new(broker: String, measure_from_seq: u64) -> Self {
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

    pub(super) fn drop_verdicts(&self, reason: DropReason, count: u64) {
        let i = DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        self.dropped[i].fetch_add(count, Ordering::Relaxed);
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|d| d.load(Ordering::Relaxed)).sum()
    }

    pub(super) fn record_ack(&self, verdict: &LineVerdict) {
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

    pub(super) fn set_down(&self, down: bool) {
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
pub(super) fn thread_cpu_ns() -> u64 {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::testing::verdict;
    use super::*;

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
