//! The rule that pairs a camera's triggers with its frames, as functions
//! over the triggers waiting (oldest first); `PartRings` applies it.
//!
//! - A frame captured at `t` belongs to the oldest waiting trigger whose
//!   moment (trigger + `delay_ms`) is at or before `t`.
//! - Every other waiting trigger whose moment is at or before `t` would
//!   claim the same frame: each fails `overrun`.
//! - A trigger whose moment plus `frame_wait_ms` passed before `t`, or
//!   passed by the clock while no frame of its camera is waiting, fails
//!   `no_frame`.
//! - A frame no trigger claims is passed over (counted, not judged).
//!
//! Frames come in capture order and triggers in moment order, so only the
//! front of the queue is ever looked at.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::desk::Pending;

/// How long past a trigger's `frame_wait_ms` the clock waits before it
/// fails the trigger `no_frame` when no frame is waiting: a frame stamped
/// just in time may still be on its way into the ring (its copy).
pub const CAPTURE_GRACE: Duration = Duration::from_millis(5);

/// What one frame did to the waiting triggers, in the order their results go out.
#[derive(Debug, Default, PartialEq)]
pub struct FrameClaim {
    /// Triggers whose wait ended before this frame: `no_frame`, first.
    pub no_frame: Vec<Pending>,
    /// The trigger this frame is the part of; `None`: passed over.
    pub claimed_by: Option<Pending>,
    /// Further triggers that wanted this same frame: `overrun`, after it.
    pub overrun: Vec<Pending>,
}

/// Applies the rule to a frame captured at `captured`.
pub fn claim(
    waiting: &mut VecDeque<Pending>,
    captured: Instant,
    frame_wait: Duration,
) -> FrameClaim {
    let mut out = FrameClaim::default();
    while let Some(front) = waiting.front()
        && front.moment + frame_wait < captured
    {
        out.no_frame.extend(waiting.pop_front());
    }
    if waiting.front().is_some_and(|p| p.moment <= captured) {
        out.claimed_by = waiting.pop_front();
        while waiting.front().is_some_and(|p| p.moment <= captured) {
            out.overrun.extend(waiting.pop_front());
        }
    }
    out
}

/// The triggers whose wait ended by `now` (with `CAPTURE_GRACE`), taken
/// from the front; call only while no frame of the camera is waiting.
pub fn expire(waiting: &mut VecDeque<Pending>, now: Instant, frame_wait: Duration) -> Vec<Pending> {
    let mut out = Vec::new();
    while waiting
        .front()
        .is_some_and(|p| p.moment + frame_wait + CAPTURE_GRACE <= now)
    {
        out.extend(waiting.pop_front());
    }
    out
}

/// When the next trigger's wait ends, if one waits.
pub fn next_expiry(waiting: &VecDeque<Pending>, frame_wait: Duration) -> Option<Instant> {
    waiting
        .front()
        .map(|p| p.moment + frame_wait + CAPTURE_GRACE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Part, TriggerTime, TriggeredBy};

    const WAIT: Duration = Duration::from_millis(100);

    fn pending(number: u64, moment: Instant) -> Pending {
        Pending {
            part: Part {
                number,
                id: 4711 + number,
                trigger: Some(TriggerTime::now(TriggeredBy::Plc)),
                framed: true,
            },
            moment,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_first_frame_at_or_after_the_moment_is_the_parts() {
        let t0 = Instant::now();
        let mut q = VecDeque::from([pending(0, t0 + ms(10))]);
        // Captured before the moment: passed over, the trigger still waits.
        assert_eq!(claim(&mut q, t0 + ms(9), WAIT), FrameClaim::default());
        assert_eq!(q.len(), 1);
        // At the moment exactly: claimed.
        let c = claim(&mut q, t0 + ms(10), WAIT);
        assert_eq!(c.claimed_by.map(|p| p.part.number), Some(0));
        assert!(c.no_frame.is_empty() && c.overrun.is_empty() && q.is_empty());
    }

    #[test]
    fn two_triggers_before_one_frame_make_an_overrun_after_it() {
        let t0 = Instant::now();
        let mut q = VecDeque::from([
            pending(0, t0),
            pending(1, t0 + ms(5)),
            pending(2, t0 + ms(50)),
        ]);
        let c = claim(&mut q, t0 + ms(20), WAIT);
        assert_eq!(c.claimed_by.map(|p| p.part.number), Some(0));
        assert_eq!(
            c.overrun.iter().map(|p| p.part.number).collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(q.len(), 1, "the trigger after the frame still waits");
    }

    #[test]
    fn a_frame_after_the_wait_fails_the_trigger_no_frame_and_claims_the_next() {
        let t0 = Instant::now();
        let mut q = VecDeque::from([pending(0, t0), pending(1, t0 + ms(150))]);
        let c = claim(&mut q, t0 + ms(160), WAIT);
        assert_eq!(
            c.no_frame.iter().map(|p| p.part.number).collect::<Vec<_>>(),
            vec![0]
        );
        assert_eq!(c.claimed_by.map(|p| p.part.number), Some(1));
        // A frame exactly at the end of the wait still counts.
        let mut q = VecDeque::from([pending(0, t0)]);
        let c = claim(&mut q, t0 + WAIT, WAIT);
        assert_eq!(c.claimed_by.map(|p| p.part.number), Some(0));
    }

    #[test]
    fn the_clock_fails_waiting_triggers_only_after_wait_and_grace() {
        let t0 = Instant::now();
        let mut q = VecDeque::from([pending(0, t0), pending(1, t0 + ms(30))]);
        assert!(expire(&mut q, t0 + WAIT, WAIT).is_empty());
        assert_eq!(next_expiry(&q, WAIT), Some(t0 + WAIT + CAPTURE_GRACE));
        let gone = expire(&mut q, t0 + WAIT + CAPTURE_GRACE, WAIT);
        assert_eq!(
            gone.iter().map(|p| p.part.number).collect::<Vec<_>>(),
            vec![0]
        );
        assert_eq!(q.len(), 1);
        assert_eq!(expire(&mut q, t0 + ms(200), WAIT).len(), 1);
        assert_eq!(next_expiry(&q, WAIT), None);
    }
}
