//! Several cameras' rings read by one thread, fairly.
//!
//! ```text
//!  camera 0: RingProducer ──▶ RingConsumer ─┐
//!  camera 1: RingProducer ──▶ RingConsumer ─┼─ RingSet::pop (round robin) ──▶ preprocess / device thread
//!  camera 2: RingProducer ──▶ RingConsumer ─┘
//! ```
//!
//! Invariants (tested below):
//! - every event of every ring comes out once, each ring's in its own order;
//!   frames carry their camera (`FrameMeta::camera`, stamped by the producer);
//! - a ring with an event waiting is served within one turn of the others:
//!   the search starts after the ring served last, so when every camera has
//!   frames queued they take turns, and none starves another;
//! - an empty ring is never waited for: `pop` returns the first event of any
//!   ring, and parks only when all are empty (each producer wakes this thread);
//! - a camera's own `End` is kept; the set's `End` comes once every ring has
//!   ended, and is the most severe of theirs (`StreamEnd::severity`);
//! - `recycle` gives a slot back to the ring of the camera that filled it.

use std::time::{Duration, Instant};

use super::consumer::RingConsumer;
use super::event::{RingEvent, StreamEnd};
use super::wake::{park_timeout, time_left};
use crate::frame::{CameraIndex, FrameSlot};

/// The reading end of every camera's ring.
pub struct RingSet<End> {
    rings: Vec<RingConsumer<End>>,
    /// Each camera's end, once its ring delivered it.
    ends: Vec<Option<End>>,
    /// Where the next search starts: one past the ring served last.
    next: usize,
}

impl<End: StreamEnd> RingSet<End> {
    /// The set of `rings`, ring `i` being camera `i`'s. At least one.
    pub fn new(rings: Vec<RingConsumer<End>>) -> Self {
        assert!(!rings.is_empty(), "a ring set needs at least one camera");
        let ends = rings.iter().map(|_| None).collect();
        RingSet {
            rings,
            ends,
            next: 0,
        }
    }

    /// The next event of any camera, waiting (parked) up to `timeout` when
    /// none is ready. `None` on timeout. `End` only once every camera ended.
    pub fn pop(&mut self, timeout: Duration) -> Option<RingEvent<End>> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let mut park = Duration::MAX;
            let mut all_ended = true;
            for k in 0..self.rings.len() {
                let i = (self.next + k) % self.rings.len();
                if self.ends[i].is_some() {
                    continue;
                }
                all_ended = false;
                // A zero wait: the ring registers this thread to be woken
                // and returns at once when it has nothing.
                match self.rings[i].pop(Duration::ZERO) {
                    Some(RingEvent::End(end)) => self.ends[i] = Some(end),
                    Some(event) => {
                        self.next = (i + 1) % self.rings.len();
                        return Some(event);
                    }
                    None => park = park.min(self.rings[i].park_limit()),
                }
            }
            if all_ended || self.ends.iter().all(Option::is_some) {
                return self.take_end().map(RingEvent::End);
            }
            let wait = time_left(deadline)?;
            park_timeout(park.min(wait));
        }
    }

    /// Gives a slot back to the camera whose ring it came from.
    pub fn recycle(&mut self, slot: Box<FrameSlot>) {
        // After the set's end there is no ring to take it: it is freed.
        if let Some(ring) = self.rings.get_mut(usize::from(slot.meta.camera)) {
            ring.recycle(slot);
        }
    }

    /// How many cameras feed this set.
    pub fn cameras(&self) -> usize {
        self.rings.len()
    }

    /// Whether camera `camera`'s ring holds an event not yet popped.
    pub fn is_waiting(&self, camera: CameraIndex) -> bool {
        self.rings
            .get(usize::from(camera))
            .is_some_and(|ring| ring.queued() > 0)
    }

    /// Whether camera `camera`'s stream has ended.
    pub fn has_ended(&self, camera: CameraIndex) -> bool {
        self.ends
            .get(usize::from(camera))
            .is_some_and(Option::is_some)
    }

    /// The set's end, once: the most severe camera end (the first of equals).
    fn take_end(&mut self) -> Option<End> {
        let worst = (0..self.ends.len())
            .filter(|&i| self.ends[i].is_some())
            .max_by_key(|&i| {
                (
                    self.ends[i].as_ref().map_or(0, StreamEnd::severity),
                    std::cmp::Reverse(i),
                )
            })?;
        let end = self.ends[worst].take();
        // The others are spent too: mark them so no later call returns again.
        self.rings.clear();
        self.ends.clear();
        end
    }
}

impl<End> std::fmt::Debug for RingSet<End> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingSet")
            .field("cameras", &self.rings.len())
            .field("next", &self.next)
            .finish()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::super::event::TestEnd;
    use super::super::pool::frame_ring;
    use super::super::producer::RingProducer;
    use super::*;
    use crate::config::OverflowPolicy;
    use crate::frame::FrameMeta;

    const WAIT: Duration = Duration::from_secs(5);

    fn push_frame(producer: &mut RingProducer<TestEnd>, seq: u64) {
        let mut slot = producer
            .acquire_slot(OverflowPolicy::Drop)
            .expect("a free slot");
        slot.meta = FrameMeta::now(seq);
        producer.push(RingEvent::Frame(slot));
    }

    fn set_of(cameras: usize, pool: usize) -> (Vec<RingProducer<TestEnd>>, RingSet<TestEnd>) {
        let (producers, consumers): (Vec<_>, Vec<_>) = (0..cameras)
            .map(|i| {
                let (p, c) = frame_ring::<TestEnd>(pool);
                (p.for_camera(i as CameraIndex), c)
            })
            .unzip();
        (producers, RingSet::new(consumers))
    }

    /// (camera, seq) of the next frame; its slot goes back to its camera.
    fn next_frame(set: &mut RingSet<TestEnd>) -> (CameraIndex, u64) {
        match set.pop(WAIT) {
            Some(RingEvent::Frame(slot)) => {
                let id = (slot.meta.camera, slot.meta.seq);
                set.recycle(slot);
                id
            }
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    #[test]
    fn cameras_with_frames_queued_take_turns() {
        let (mut producers, mut set) = set_of(3, 4);
        for seq in 0..4 {
            for p in &mut producers {
                push_frame(p, seq);
            }
        }
        let order: Vec<_> = (0..12).map(|_| next_frame(&mut set)).collect();
        let expected: Vec<_> = (0..4u64)
            .flat_map(|seq| (0..3).map(move |cam| (cam as CameraIndex, seq)))
            .collect();
        assert_eq!(order, expected);
    }

    #[test]
    fn a_busy_camera_does_not_starve_a_quiet_one() {
        let (mut producers, mut set) = set_of(2, 8);
        for seq in 0..8 {
            push_frame(&mut producers[0], seq);
        }
        assert_eq!(next_frame(&mut set), (0, 0));
        push_frame(&mut producers[1], 0);
        // Camera 1's frame comes next, ahead of camera 0's seven waiting.
        assert_eq!(next_frame(&mut set), (1, 0));
        assert_eq!(next_frame(&mut set), (0, 1));
    }

    #[test]
    fn an_empty_camera_is_never_waited_for_and_a_push_wakes_the_reader() {
        let (mut producers, mut set) = set_of(2, 4);
        let started = Instant::now();
        assert!(set.pop(Duration::from_millis(30)).is_none());
        assert!(started.elapsed() >= Duration::from_millis(30));
        let mut late = producers.pop().unwrap();
        let pusher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            push_frame(&mut late, 0);
            late
        });
        let woken = Instant::now();
        assert_eq!(next_frame(&mut set), (1, 0));
        assert!(
            woken.elapsed() < Duration::from_secs(2),
            "woken by the push"
        );
        drop(pusher.join().unwrap());
    }

    #[test]
    fn the_set_ends_once_every_camera_ended_with_the_most_severe_end() {
        let (mut producers, mut set) = set_of(2, 4);
        producers[0].push(RingEvent::End(TestEnd::Finished));
        push_frame(&mut producers[1], 0);
        assert_eq!(next_frame(&mut set), (1, 0));
        assert!(set.has_ended(0));
        assert!(
            set.pop(Duration::from_millis(10)).is_none(),
            "camera 1 goes on"
        );
        // Dropping a producer ends its stream as stopped.
        producers.truncate(1);
        match set.pop(WAIT) {
            Some(RingEvent::End(end)) => assert_eq!(end, TestEnd::Stopped),
            other => panic!("expected the end, got {other:?}"),
        }
        assert!(set.pop(Duration::ZERO).is_none(), "the end comes once");
    }

    #[test]
    fn markers_carry_their_camera() {
        let (mut producers, mut set) = set_of(2, 1);
        push_frame(&mut producers[1], 0);
        // No free slot left on camera 1: its next frame is dropped.
        producers[1].push(RingEvent::Dropped {
            meta: FrameMeta::now(1),
            count: 1,
        });
        assert_eq!(next_frame(&mut set), (1, 0));
        push_frame(&mut producers[1], 2);
        match set.pop(WAIT) {
            Some(RingEvent::Dropped { meta, count }) => {
                assert_eq!((meta.camera, meta.seq, count), (1, 1, 1))
            }
            other => panic!("expected the drop marker, got {other:?}"),
        }
        assert_eq!(next_frame(&mut set), (1, 2));
    }
}
