//! The verdict queue both MQTT threads and `send` share: `VerdictQueue`
//! (the line output: bounded, drop-oldest), the state behind one lock
//! (queued, handed to rumqttc, in flight), expiry and requeueing.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::stats::{DropReason, MqttStats};
use crate::line::part_deadline::SEND_MARGIN;
use crate::line::verdict::{LineOutput, LineVerdict};

/// Verdicts handed to rumqttc and not yet acknowledged, at most: few enough
/// that a disconnect strands little, enough to keep a loopback or LAN busy.
pub(super) const WINDOW: usize = 16;

/// What went to the broker and is not acknowledged yet.
#[derive(Debug, Clone)]
// A verdict waits in the queue by value: boxing it would allocate per part.
#[allow(clippy::large_enum_variant)]
pub(super) enum Sent {
    Verdict(LineVerdict),
    /// A retained status message (`online` / `offline`).
    Status,
}

/// The queue and connection state both MQTT threads and `send` share.
pub(super) struct State {
    /// Verdicts waiting to be handed over, oldest first.
    pub(super) queue: VecDeque<LineVerdict>,
    pub(super) connected: bool,
    /// Handed to rumqttc, not yet written (matched in order with `Outgoing::Publish`).
    pub(super) handed: VecDeque<Sent>,
    /// Written, waiting for PUBACK, by packet id.
    pub(super) inflight: HashMap<u16, Sent>,
    /// `finish` was called: no more verdicts come.
    pub(super) stopping: bool,
    /// The threads must end now.
    pub(super) closed: bool,
    /// A queue overflow was logged since the queue last emptied.
    pub(super) overflow_logged: bool,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) wake: Condvar,
    pub(super) stats: Arc<MqttStats>,
    pub(super) capacity: usize,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A queued verdict that can no longer arrive before its deadline becomes
    /// the part's `late` fail (the line must hear about every part); a `late`
    /// fail that can no longer arrive in its time is dropped (`expired`).
    pub(super) fn sweep_expired(&self, state: &mut State, now: Instant) {
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
    pub(super) fn requeue_unacked(&self, state: &mut State) {
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
pub(super) struct VerdictQueue {
    pub(super) shared: Arc<Shared>,
    /// MQTT could not start: every verdict is counted as dropped `unavailable`.
    pub(super) unavailable: bool,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::testing::verdict;
    use super::*;
    use crate::decision::Reason;

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
}
