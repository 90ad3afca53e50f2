//! When a part's verdict is due (`PartDeadline`, in both clocks), and the
//! margin (`SEND_MARGIN`) a verdict needs to reach the line in time.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::frame::FrameMeta;

/// A verdict decided within this much of its deadline counts as late: the
/// time a message needs to reach the broker and a subscriber (loopback or a
/// plant LAN: well under a millisecond; the rest is margin).
pub const SEND_MARGIN: Duration = Duration::from_millis(2);

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
    /// The deadline of the part of `meta`, `deadline` after its clock
    /// started (capture; in `plc` mode its trigger), truncated to the
    /// millisecond so the message states it exactly.
    pub fn of(meta: &FrameMeta, deadline: Duration) -> PartDeadline {
        let (started_at, started) = meta.part.started(meta);
        let exact = started_at + deadline;
        let since = exact.duration_since(UNIX_EPOCH).unwrap_or_default();
        let at = UNIX_EPOCH + Duration::from_millis(since.as_millis() as u64);
        let truncated = exact.duration_since(at).unwrap_or_default();
        let due = (started + deadline)
            .checked_sub(truncated)
            .unwrap_or(started);
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

#[cfg(test)]
mod tests {
    use super::*;

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
