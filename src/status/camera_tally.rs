//! One camera's tally on the output thread: its shift counts, its latest
//! result and the last hour's results by minute, in fixed-size arrays. A
//! leaf: the board keeps one per camera (`BoardState::cameras`), and
//! `cameras` joins them with the run's facts for the HTTP side.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::decision::{Decision, Reason, Verdict};
use crate::frame::FrameMeta;

const REASONS: usize = Reason::ALL.len();

/// The latest result.
#[derive(Debug, Clone, Copy)]
pub struct LastResult {
    pub seq: u64,
    /// `[trigger] mode = "plc"`: the part's id (`None` in free mode).
    pub part_id: Option<u64>,
    pub captured_at: SystemTime,
    pub verdict: Verdict,
    pub reason: Reason,
    pub latency_ms: Option<f64>,
}

/// Minutes in a camera's trend: the last hour.
pub const TREND_MINUTES: usize = 60;

/// Cameras tallied at most: a bound on the board's memory whatever index a
/// frame carries (a station has a handful; the config names each one).
pub const MAX_CAMERAS: usize = 256;

/// One minute of a camera's results (by capture time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinuteBucket {
    /// Minutes since 1970 (UTC).
    pub minute: u64,
    pub passed: u32,
    pub failed: u32,
}

/// One camera's results, kept by the output thread: fixed-size (`Copy`),
/// so recording and publishing never allocate.
#[derive(Debug, Clone, Copy)]
pub struct CameraTally {
    pub passed: u64,
    pub failed: u64,
    /// Indexed like `Reason::ALL`.
    pub by_reason: [u64; REASONS],
    pub last: Option<LastResult>,
    /// When the output thread recorded `last` (for the camera's state).
    pub last_at: Option<Instant>,
    /// A ring by minute (`minute % TREND_MINUTES`); a bucket of an older
    /// minute is stale and reads as empty.
    trend: [MinuteBucket; TREND_MINUTES],
}

impl Default for CameraTally {
    fn default() -> Self {
        CameraTally {
            passed: 0,
            failed: 0,
            by_reason: [0; REASONS],
            last: None,
            last_at: None,
            trend: [MinuteBucket::default(); TREND_MINUTES],
        }
    }
}

impl CameraTally {
    pub fn record(
        &mut self,
        meta: &FrameMeta,
        d: &Decision,
        reason_index: usize,
        latency_ms: Option<f64>,
        now: Instant,
    ) {
        let pass = d.verdict == Verdict::Pass;
        if pass {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
        self.by_reason[reason_index] += 1;
        self.last = Some(LastResult {
            seq: meta.seq,
            part_id: meta.part.triggered_id(),
            captured_at: meta.captured_at,
            verdict: d.verdict,
            reason: d.reason,
            latency_ms,
        });
        self.last_at = Some(now);
        let minute = unix_minute(meta.captured_at);
        let bucket = &mut self.trend[(minute % TREND_MINUTES as u64) as usize];
        if minute > bucket.minute {
            *bucket = MinuteBucket {
                minute,
                passed: 0,
                failed: 0,
            };
        }
        // A result older than its bucket (the clock was set back) counts in
        // the shift, not in a minute that has been reused since.
        if minute == bucket.minute {
            if pass {
                bucket.passed += 1;
            } else {
                bucket.failed += 1;
            }
        }
    }

    /// The hour up to `now_minute`, oldest first, one bucket per minute
    /// (empty where nothing was judged).
    pub fn trend(&self, now_minute: u64) -> impl Iterator<Item = MinuteBucket> + '_ {
        let first = now_minute.saturating_sub(TREND_MINUTES as u64 - 1);
        (first..=now_minute).map(move |minute| {
            let b = self.trend[(minute % TREND_MINUTES as u64) as usize];
            if b.minute == minute {
                b
            } else {
                MinuteBucket {
                    minute,
                    ..MinuteBucket::default()
                }
            }
        })
    }
}

/// Minutes since 1970 of `t` (0 before it).
pub fn unix_minute(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() / 60
}
