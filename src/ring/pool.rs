//! The frame pool and the two rings made at once: `frame_ring` gives the
//! producer (capture) and the consumer (preprocessing) their ends.

use std::sync::OnceLock;

use ringbuf::HeapRb;
use ringbuf::traits::{Producer, Split};

use super::consumer::RingConsumer;
use super::event::{RingEvent, StreamEnd};
use super::producer::{END_ROOM, MARKER_ROOM, RingProducer};
use super::sync::{Arc, AtomicBool, AtomicUsize};
use super::wake::Shared;
use crate::frame::FrameSlot;
use crate::frame_bytes::SlotMemory;

/// Creates the pool (`pool_size` empty slots; each grows to the frame size on
/// its first frame) and the two rings. `pool_size` is at least 1.
pub fn frame_ring<End: StreamEnd>(pool_size: usize) -> (RingProducer<End>, RingConsumer<End>) {
    frame_ring_with_capacity(pool_size, 0)
}

/// As `frame_ring`, with each slot's buffer reserved to `slot_bytes` up front
/// (for a source whose frame size is known before it starts).
pub fn frame_ring_with_capacity<End: StreamEnd>(
    pool_size: usize,
    slot_bytes: usize,
) -> (RingProducer<End>, RingConsumer<End>) {
    ring_of(pool_size, || FrameSlot::with_capacity(slot_bytes))
}

/// As `frame_ring`, each slot's bytes growing from `memory` (page-locked
/// once the device path installs its allocator there, before capture starts).
pub fn frame_ring_in<End: StreamEnd>(
    pool_size: usize,
    memory: &SlotMemory,
) -> (RingProducer<End>, RingConsumer<End>) {
    ring_of(pool_size, || FrameSlot::in_memory(memory.clone()))
}

fn ring_of<End: StreamEnd>(
    pool_size: usize,
    slot: impl Fn() -> FrameSlot,
) -> (RingProducer<End>, RingConsumer<End>) {
    let pool_size = pool_size.max(1);
    let full = HeapRb::<RingEvent<End>>::new(pool_size + MARKER_ROOM + END_ROOM);
    let free = HeapRb::<Box<FrameSlot>>::new(pool_size);
    let (full_prod, full_cons) = full.split();
    let (mut free_prod, free_cons) = free.split();
    for _ in 0..pool_size {
        // The free ring holds exactly `pool_size`: this cannot be full.
        let _ = free_prod.try_push(Box::new(slot()));
    }
    let shared = Arc::new(Shared {
        producer_thread: OnceLock::new(),
        consumer_thread: OnceLock::new(),
        stop: AtomicBool::new(false),
        markers_in_ring: AtomicUsize::new(0),
    });
    let producer = RingProducer {
        full: full_prod,
        free: free_cons,
        shared: Arc::clone(&shared),
        pending_drops: None,
        spare: None,
        ended: false,
        on_delivery: None,
        camera: 0,
        counted_parts: false,
    };
    let consumer = RingConsumer {
        full: full_cons,
        free: free_prod,
        shared,
    };
    (producer, consumer)
}
