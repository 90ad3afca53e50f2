//! Keeps a repeating error from flooding the journal.
//!
//! The first occurrence is logged at once. Repeats within the window are only counted,
//! and the count rides along with the next occurrence that is let through:
//! "camera error repeated 57 times in the last 10 s; latest: ...". A service that runs
//! for months with a flapping camera must still leave a readable journal.
//!
//! Each error site owns its own `RateLimiter`; there is no global registry to lock.

use std::fmt;
use std::time::{Duration, Instant};

/// Where the limiter reads the time; a trait so tests can drive time by hand.
pub trait Clock {
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Occurrences that were held back since the last one logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suppressed {
    /// How many occurrences were not logged.
    pub count: u64,
    /// Time from the last logged occurrence to now: the span the count covers.
    pub over: Duration,
}

impl fmt::Display for Suppressed {
    /// `repeated 57 times in the last 10 s`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.over.as_secs_f64();
        let times = if self.count == 1 { "time" } else { "times" };
        if secs >= 10.0 {
            write!(
                f,
                "repeated {} {times} in the last {:.0} s",
                self.count, secs
            )
        } else {
            write!(
                f,
                "repeated {} {times} in the last {:.1} s",
                self.count, secs
            )
        }
    }
}

/// What to do with one occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Log it; `Some` carries the repeats held back since the previous logged one.
    Log(Option<Suppressed>),
    /// Count it and say nothing.
    Hold,
}

impl Admission {
    /// Whether the occurrence is to be logged (for a caller that writes its
    /// own line and does not say how many were held back).
    pub fn is_log(self) -> bool {
        matches!(self, Admission::Log(_))
    }
}

/// Lets one occurrence through per `window`, counting the rest.
#[derive(Debug)]
pub struct RateLimiter<C: Clock = MonotonicClock> {
    window: Duration,
    clock: C,
    last_logged: Option<Instant>,
    held: u64,
}

impl RateLimiter<MonotonicClock> {
    pub fn new(window: Duration) -> Self {
        RateLimiter::with_clock(window, MonotonicClock)
    }
}

impl<C: Clock> RateLimiter<C> {
    pub fn with_clock(window: Duration, clock: C) -> Self {
        RateLimiter {
            window,
            clock,
            last_logged: None,
            held: 0,
        }
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    /// Record one occurrence and decide whether it is logged.
    pub fn admit(&mut self) -> Admission {
        let now = self.clock.now();
        match self.last_logged {
            Some(last) if now.saturating_duration_since(last) < self.window => {
                self.held = self.held.saturating_add(1);
                Admission::Hold
            }
            last => {
                let suppressed = match last {
                    Some(last) if self.held > 0 => Some(Suppressed {
                        count: self.held,
                        over: now.saturating_duration_since(last),
                    }),
                    _ => None,
                };
                self.last_logged = Some(now);
                self.held = 0;
                Admission::Log(suppressed)
            }
        }
    }

    /// The window since the last logged occurrence has passed (or none was
    /// logged): the next one is logged at once. For a caller that keeps a
    /// limiter per key (per peer address) and forgets the quiet ones.
    pub fn is_quiet(&self) -> bool {
        let now = self.clock.now();
        self.last_logged
            .is_none_or(|last| now.saturating_duration_since(last) >= self.window)
    }

    /// Repeats still held back once the window has passed, for a caller that wants to
    /// report them even if the error never comes back (at shutdown, on a timer).
    /// Returns `None` while the window is still open or nothing was held.
    pub fn flush(&mut self) -> Option<Suppressed> {
        let now = self.clock.now();
        let last = self.last_logged?;
        let since = now.saturating_duration_since(last);
        if self.held == 0 || since < self.window {
            return None;
        }
        let suppressed = Suppressed {
            count: self.held,
            over: since,
        };
        self.held = 0;
        self.last_logged = Some(now);
        Some(suppressed)
    }

    /// Log `message` at `level` under `what` (a short name for the error, such as
    /// "camera error"), unless the limiter holds it. A logged line that follows held
    /// repeats reads `camera error repeated 57 times in the last 10 s; latest: <message>`
    /// and carries `repeated=57` as a key-value.
    pub fn log(
        &mut self,
        level: log::Level,
        target: &str,
        what: &str,
        message: fmt::Arguments<'_>,
    ) {
        match self.admit() {
            Admission::Hold => {}
            Admission::Log(None) => {
                log::log!(target: target, level, "{what}: {message}");
            }
            Admission::Log(Some(s)) => {
                log::log!(target: target, level, repeated = s.count;
                    "{what} {s}; latest: {message}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// Test double: a clock that moves only when the test says so.
    #[derive(Clone)]
    struct ManualClockForTest {
        now: Rc<Cell<Instant>>,
    }

    impl ManualClockForTest {
        fn new() -> Self {
            ManualClockForTest {
                now: Rc::new(Cell::new(Instant::now())),
            }
        }
        fn advance(&self, by: Duration) {
            self.now.set(self.now.get() + by);
        }
    }

    impl Clock for ManualClockForTest {
        fn now(&self) -> Instant {
            self.now.get()
        }
    }

    fn limiter(window_s: u64) -> (RateLimiter<ManualClockForTest>, ManualClockForTest) {
        let clock = ManualClockForTest::new();
        (
            RateLimiter::with_clock(Duration::from_secs(window_s), clock.clone()),
            clock,
        )
    }

    #[test]
    fn first_occurrence_is_logged_at_once() {
        let (mut l, _clock) = limiter(10);
        assert_eq!(l.admit(), Admission::Log(None));
    }

    #[test]
    fn repeats_within_the_window_are_held_and_counted() {
        let (mut l, clock) = limiter(10);
        assert_eq!(l.admit(), Admission::Log(None));
        for _ in 0..57 {
            clock.advance(Duration::from_millis(100));
            assert_eq!(l.admit(), Admission::Hold);
        }
        clock.advance(Duration::from_millis(4300)); // 10 s after the first
        assert_eq!(
            l.admit(),
            Admission::Log(Some(Suppressed {
                count: 57,
                over: Duration::from_secs(10)
            }))
        );
        // The count starts again after a summary.
        clock.advance(Duration::from_secs(1));
        assert_eq!(l.admit(), Admission::Hold);
    }

    #[test]
    fn an_occurrence_after_a_quiet_window_has_no_summary() {
        let (mut l, clock) = limiter(10);
        assert_eq!(l.admit(), Admission::Log(None));
        clock.advance(Duration::from_secs(30));
        assert_eq!(l.admit(), Admission::Log(None));
    }

    #[test]
    fn a_flood_logs_once_per_window() {
        let (mut l, clock) = limiter(10);
        let mut logged = 0;
        // 10 minutes of an error every 10 ms.
        for _ in 0..60_000 {
            if matches!(l.admit(), Admission::Log(_)) {
                logged += 1;
            }
            clock.advance(Duration::from_millis(10));
        }
        assert_eq!(logged, 60);
    }

    #[test]
    fn flush_reports_held_repeats_only_after_the_window() {
        let (mut l, clock) = limiter(10);
        assert_eq!(l.flush(), None);
        l.admit();
        l.admit();
        l.admit();
        clock.advance(Duration::from_secs(5));
        assert_eq!(l.flush(), None, "window still open");
        clock.advance(Duration::from_secs(5));
        assert_eq!(
            l.flush(),
            Some(Suppressed {
                count: 2,
                over: Duration::from_secs(10)
            })
        );
        assert_eq!(l.flush(), None, "already reported");
    }

    #[test]
    fn a_limiter_is_quiet_once_its_window_has_passed() {
        let (mut l, clock) = limiter(10);
        assert!(l.is_quiet(), "nothing logged yet");
        l.admit();
        clock.advance(Duration::from_secs(9));
        assert!(!l.is_quiet());
        clock.advance(Duration::from_secs(1));
        assert!(l.is_quiet());
    }

    #[test]
    fn summary_reads_as_an_operator_expects() {
        let s = Suppressed {
            count: 57,
            over: Duration::from_secs(10),
        };
        assert_eq!(s.to_string(), "repeated 57 times in the last 10 s");
        let one = Suppressed {
            count: 1,
            over: Duration::from_millis(2500),
        };
        assert_eq!(one.to_string(), "repeated 1 time in the last 2.5 s");
    }
}
