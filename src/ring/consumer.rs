//! Preprocessing's end of the ring: `RingConsumer` pops events (parked
//! while there are none) and gives slots back.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use ringbuf::traits::{Consumer, Observer, Producer};
use ringbuf::{HeapCons, HeapProd};

use super::event::RingEvent;
use super::sync::{Arc, Ordering, fence};
use super::wake::{Shared, park_timeout, register, time_left};
use crate::frame::FrameSlot;

/// Preprocessing's end: pops events, gives slots back.
pub struct RingConsumer<End> {
    pub(super) full: HeapCons<RingEvent<End>>,
    pub(super) free: HeapProd<Box<FrameSlot>>,
    pub(super) shared: Arc<Shared>,
}

impl<End> std::fmt::Debug for RingConsumer<End> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingConsumer")
            .field("queued", &self.full.occupied_len())
            .finish()
    }
}

impl<End> RingConsumer<End> {
    /// The next event, waiting (parked, woken by the producer) up to `timeout`.
    /// `None` on timeout, or at once when the ring is empty and the producer is gone.
    pub fn pop(&mut self, timeout: Duration) -> Option<RingEvent<End>> {
        let deadline = Instant::now().checked_add(timeout);
        let park_limit = register(&self.shared.consumer_thread);
        fence(Ordering::SeqCst);
        loop {
            if let Some(event) = self.full.try_pop() {
                if !matches!(event, RingEvent::Frame(_)) {
                    self.shared.markers_in_ring.fetch_sub(1, Ordering::AcqRel);
                }
                return Some(event);
            }
            if !self.full.write_is_held() {
                return None;
            }
            let wait = time_left(deadline)?;
            park_timeout(park_limit.map_or(wait, |limit| limit.min(wait)));
        }
    }

    /// Longest this thread may park waiting for this ring (see `register`).
    pub(super) fn park_limit(&self) -> Duration {
        register(&self.shared.consumer_thread).unwrap_or(Duration::MAX)
    }

    /// Gives a slot back to capture.
    pub fn recycle(&mut self, slot: Box<FrameSlot>) {
        if self.free.try_push(slot).is_err() {
            // Only a slot from another pool could overflow the free ring.
            log::warn!(target: "sealcheck::ring", "recycled a frame slot that is not from this pool; it is freed");
        }
        self.shared.wake_producer();
    }

    /// Slots currently free (waiting for capture).
    pub fn free_slots(&self) -> usize {
        self.free.occupied_len()
    }

    /// Events waiting to be popped.
    pub fn queued(&self) -> usize {
        self.full.occupied_len()
    }

    /// Capacity of the "full" ring: frames, markers and the end reserve.
    pub fn capacity(&self) -> NonZeroUsize {
        self.full.capacity()
    }
}
