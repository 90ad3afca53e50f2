//! Is the camera there? A small shared record of the source's state for the
//! watchdog's STATUS line, the metrics and the status page: `source_up`, how many
//! outages there were, how many tries the current one took, and when the next
//! try comes. Capture writes it (rarely: on a loss, a try, a return); readers
//! only load atomics, so nobody on the frame path ever waits for it.
//!
//! ```text
//! capture thread: lost() ──▶ try_failed() ... try_failed() ──▶ (first frame) back()
//!                 source_up: true ─────────▶ false ─────────────────────────▶ true
//! ```
//!
//! Pipelines abandoned in a teardown (`capture::teardown`) are counted once,
//! in the camera's `service::Liveness` record (whose health verdict needs
//! them: in a row, still stuck, since when); this view reads them from there
//! (`abandoned`, `abandoned_still_stuck`) and keeps no count of its own.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::service::Liveness;

/// A cheap, cloneable view of the source's state (one `Arc`).
#[derive(Debug, Clone)]
pub struct SourceStatus {
    inner: Arc<Inner>,
    /// The camera's liveness record: the owner of the abandoned-pipeline counts.
    liveness: Liveness,
}

#[derive(Debug)]
struct Inner {
    /// Origin of the `*_ns` fields (monotonic).
    epoch: Instant,
    up: AtomicBool,
    /// Outages begun so far (a camera missing at start counts as one).
    outages: AtomicU64,
    /// Outages that ended with a frame (`back`), over the whole run.
    recoveries: AtomicU64,
    /// Rebuilds that failed, over the whole run.
    failed_tries: AtomicU64,
    /// Rebuilds tried in the current outage.
    tries_this_outage: AtomicU64,
    /// Losses found by the frame timeout (a frozen source), over the whole run.
    frozen: AtomicU64,
    /// Nanoseconds from `epoch` to the start of the current outage, plus one; 0 = none.
    lost_at_ns: AtomicU64,
    /// Wall-clock start of the current outage, in milliseconds since 1970.
    lost_at_unix_ms: AtomicU64,
    /// Nanoseconds from `epoch` to the next rebuild, plus one; 0 = none planned.
    next_try_ns: AtomicU64,
    /// The current outage began at start: the camera has not been seen yet.
    missing_at_start: AtomicBool,
    /// Why the source was last lost or last failed to come back.
    last_error: Mutex<String>,
}

/// What `back()` reports about the outage that just ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutageEnded {
    pub lasted: Duration,
    pub tries: u64,
}

impl SourceStatus {
    /// A source that is up (or about to be started), whose abandoned
    /// pipelines are counted in `liveness` (the camera's record, which
    /// `capture::teardown` reports them to).
    pub fn new(liveness: &Liveness) -> SourceStatus {
        SourceStatus {
            liveness: liveness.clone(),
            inner: Arc::new(Inner {
                epoch: Instant::now(),
                up: AtomicBool::new(true),
                outages: AtomicU64::new(0),
                recoveries: AtomicU64::new(0),
                failed_tries: AtomicU64::new(0),
                tries_this_outage: AtomicU64::new(0),
                frozen: AtomicU64::new(0),
                lost_at_ns: AtomicU64::new(0),
                lost_at_unix_ms: AtomicU64::new(0),
                next_try_ns: AtomicU64::new(0),
                missing_at_start: AtomicBool::new(false),
                last_error: Mutex::new(String::new()),
            }),
        }
    }

    /// Frames can come: the source is streaming or starting normally.
    pub fn is_up(&self) -> bool {
        self.inner.up.load(Ordering::Acquire)
    }

    /// Outages so far (only goes up).
    pub fn outages(&self) -> u64 {
        self.inner.outages.load(Ordering::Relaxed)
    }

    /// Outages that ended with a frame so far (only goes up); fewer than
    /// `outages` while one is open.
    pub fn recoveries(&self) -> u64 {
        self.inner.recoveries.load(Ordering::Relaxed)
    }

    /// Rebuilds that failed so far (only goes up).
    pub fn failed_tries(&self) -> u64 {
        self.inner.failed_tries.load(Ordering::Relaxed)
    }

    /// Losses found because no frame came for `frame_timeout` (only goes up).
    pub fn frozen(&self) -> u64 {
        self.inner.frozen.load(Ordering::Relaxed)
    }

    /// Pipelines abandoned because they did not stop in time (only goes up);
    /// read from the camera's `Liveness`, which counts them.
    pub fn abandoned(&self) -> u64 {
        self.liveness.abandoned()
    }

    /// Abandoned pipelines whose teardown is still blocked now (from `Liveness`).
    pub fn abandoned_still_stuck(&self) -> u64 {
        self.liveness.abandoned_still_stuck()
    }

    /// Rebuilds tried in the current outage (0 when up).
    pub fn tries_this_outage(&self) -> u64 {
        self.inner.tries_this_outage.load(Ordering::Relaxed)
    }

    /// How long the current outage has lasted; `None` while up.
    pub fn down_for(&self) -> Option<Duration> {
        self.since_ns(&self.inner.lost_at_ns)
            .map(|at| Instant::now().saturating_duration_since(at))
    }

    /// When the current outage began (wall clock); `None` while up.
    pub fn lost_since(&self) -> Option<SystemTime> {
        if self.is_up() {
            return None;
        }
        match self.inner.lost_at_unix_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(UNIX_EPOCH + Duration::from_millis(ms)),
        }
    }

    /// Time until the next rebuild; `None` while up or while a try is under way.
    pub fn next_try_in(&self) -> Option<Duration> {
        self.since_ns(&self.inner.next_try_ns)
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Why the source was last lost, or why the last try failed.
    pub fn last_error(&self) -> String {
        self.inner
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// One line for systemd's STATUS= while the source is down, e.g.
    /// "camera lost since 12:03:04 UTC (40 s, 7 tries), next try in 1.5 s", or
    /// "waiting for camera since ..." when it was missing at start; `None` while up.
    pub fn describe_outage(&self) -> Option<String> {
        if self.is_up() {
            return None;
        }
        let mut text = String::from(if self.inner.missing_at_start.load(Ordering::Relaxed) {
            "waiting for camera"
        } else {
            "camera lost"
        });
        if let Some(since) = self.lost_since() {
            let secs = since
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            text.push_str(&format!(
                " since {:02}:{:02}:{:02} UTC",
                secs / 3600 % 24,
                secs / 60 % 60,
                secs % 60
            ));
        }
        let down = self.down_for().unwrap_or_default().as_secs_f64();
        let tries = self.tries_this_outage();
        text.push_str(&format!(
            " ({down:.0} s, {tries} tr{})",
            if tries == 1 { "y" } else { "ies" }
        ));
        match self.next_try_in() {
            Some(wait) => text.push_str(&format!(", next try in {:.1} s", wait.as_secs_f64())),
            None => text.push_str(", trying now"),
        }
        Some(text)
    }

    /// The source was lost (error, end-of-stream, frozen, or missing at start).
    /// Returns false when an outage was already open (a failed rebuild's new
    /// pipeline lost again): the outage goes on and is not counted twice.
    pub(crate) fn lost(&self, reason: &str, frozen: bool, at_start: bool) -> bool {
        self.set_error(reason);
        if frozen {
            self.inner.frozen.fetch_add(1, Ordering::Relaxed);
        }
        if !self.inner.up.swap(false, Ordering::AcqRel) {
            return false;
        }
        self.inner.outages.fetch_add(1, Ordering::Relaxed);
        self.inner
            .missing_at_start
            .store(at_start, Ordering::Relaxed);
        self.inner.tries_this_outage.store(0, Ordering::Relaxed);
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_millis().max(1) as u64);
        self.inner.lost_at_unix_ms.store(unix_ms, Ordering::Relaxed);
        self.inner
            .lost_at_ns
            .store(self.stamp(Instant::now()), Ordering::Release);
        true
    }

    /// The next rebuild is planned at `at`.
    pub(crate) fn next_try_at(&self, at: Instant) {
        self.inner
            .next_try_ns
            .store(self.stamp(at), Ordering::Relaxed);
    }

    /// A rebuild is being tried now.
    pub(crate) fn trying(&self) {
        self.inner.next_try_ns.store(0, Ordering::Relaxed);
        self.inner.tries_this_outage.fetch_add(1, Ordering::Relaxed);
    }

    /// A rebuild failed (the pipeline did not start, or was lost before a frame).
    pub(crate) fn try_failed(&self, reason: &str) {
        self.inner.failed_tries.fetch_add(1, Ordering::Relaxed);
        self.set_error(reason);
    }

    /// The first frame after an outage arrived. Returns the outage's length and
    /// tries the first time it is called per outage, `None` after that (or while up).
    pub(crate) fn back(&self) -> Option<OutageEnded> {
        if self.inner.up.swap(true, Ordering::AcqRel) {
            return None;
        }
        self.inner.recoveries.fetch_add(1, Ordering::Relaxed);
        let lasted = self.down_since_stamp();
        self.inner.lost_at_ns.store(0, Ordering::Release);
        self.inner.next_try_ns.store(0, Ordering::Relaxed);
        Some(OutageEnded {
            lasted,
            tries: self.inner.tries_this_outage.swap(0, Ordering::Relaxed),
        })
    }

    fn down_since_stamp(&self) -> Duration {
        self.since_ns(&self.inner.lost_at_ns)
            .map_or(Duration::ZERO, |at| {
                Instant::now().saturating_duration_since(at)
            })
    }

    fn set_error(&self, reason: &str) {
        let mut last = self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        last.clear();
        last.push_str(reason);
    }

    fn since_ns(&self, field: &AtomicU64) -> Option<Instant> {
        match field.load(Ordering::Acquire) {
            0 => None,
            ns => Some(self.inner.epoch + Duration::from_nanos(ns - 1)),
        }
    }

    fn stamp(&self, t: Instant) -> u64 {
        let ns = t.saturating_duration_since(self.inner.epoch).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX - 1).saturating_add(1)
    }
}

/// Capped exponential backoff between rebuilds: `min`, `2 min`, `4 min`, ... up to `max`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Backoff {
        let max = max.max(min);
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// The wait before the next try; doubles the one after, up to `max`.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// Back to `min` (the source came back).
    pub(crate) fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(3));
        let waits: Vec<u128> = (0..6).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 3000, 3000, 3000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(500));
    }

    #[test]
    fn an_outage_is_counted_once_and_reports_its_tries_when_it_ends() {
        let status = SourceStatus::new(&Liveness::new());
        assert!(status.is_up() && status.describe_outage().is_none());
        assert!(status.lost("connection refused", false, true));
        assert!(
            !status.lost("connection refused again", false, false),
            "same outage"
        );
        status.trying();
        status.try_failed("still refused");
        status.next_try_at(Instant::now() + Duration::from_secs(2));
        let line = status.describe_outage().unwrap();
        assert!(line.starts_with("waiting for camera since "), "{line}");
        assert!(
            line.contains("1 try") && line.contains("next try in"),
            "{line}"
        );
        assert_eq!((status.outages(), status.failed_tries()), (1, 1));
        assert_eq!(status.recoveries(), 0, "no frame yet");
        status.trying();
        let ended = status.back().unwrap();
        assert_eq!(ended.tries, 2);
        assert!(status.back().is_none(), "ends once");
        assert!(status.is_up() && status.down_for().is_none());
        assert!(status.lost("frozen", true, false));
        assert!(
            status
                .describe_outage()
                .unwrap()
                .starts_with("camera lost since ")
        );
        assert_eq!((status.outages(), status.frozen()), (2, 1));
    }
}
