//! Capture's end of the ring: `RingProducer` takes free slots and pushes
//! events in order, coalescing drops into runs; `StopHandle` wakes it.

use std::time::Duration;

use ringbuf::traits::{Consumer, Observer, Producer};
use ringbuf::{HeapCons, HeapProd};

use super::event::{RingEvent, StreamEnd};
use super::sync::{Arc, Ordering, fence};
use super::wake::{Shared, park_timeout, register};
use crate::config::OverflowPolicy;
use crate::frame::{CameraIndex, FrameMeta, FrameSlot};

/// Markers (`Dropped`, `Failed`) that may wait in the "full" ring at once.
pub(super) const MARKER_ROOM: usize = 16;
/// Entries kept free for the last flush of pending drops and for `End`.
pub(super) const END_ROOM: usize = 2;
/// Longest a producer waiting for a free slot sleeps before looking at the stop
/// flag again (it is normally woken at once by `recycle` or `StopHandle`).
const PRODUCER_PARK: Duration = Duration::from_millis(20);

/// Called with each delivered frame's meta, in `seq` order (`RingProducer::on_delivery`).
type DeliveryObserver = Box<dyn FnMut(&FrameMeta) + Send>;

/// Capture's end: takes free slots, pushes events. Dropping it without `End`
/// having been pushed pushes `End(End::stopped())`, so the consumer always sees an end.
pub struct RingProducer<End: StreamEnd> {
    pub(super) full: HeapProd<RingEvent<End>>,
    pub(super) free: HeapCons<Box<FrameSlot>>,
    pub(super) shared: Arc<Shared>,
    /// A run of dropped frames not yet in the ring: the first one's meta and the count.
    pub(super) pending_drops: Option<(FrameMeta, u64)>,
    /// A slot taken from the pool whose frame was folded into the drops (see `push`);
    /// the next `acquire_slot` returns it.
    pub(super) spare: Option<Box<FrameSlot>>,
    pub(super) ended: bool,
    /// Told of every delivered frame as it is pushed (see `on_delivery`).
    pub(super) on_delivery: Option<DeliveryObserver>,
    /// Stamped on every event's meta as it is pushed (`for_camera`).
    pub(super) camera: CameraIndex,
    /// Every event's part is the camera-counted one (`parts_counted_by_camera`).
    pub(super) counted_parts: bool,
}

impl<End: StreamEnd> std::fmt::Debug for RingProducer<End> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingProducer")
            .field("capacity", &self.full.capacity())
            .field("free_slots", &self.free.occupied_len())
            .field(
                "pending_drops",
                &self.pending_drops.map(|(meta, count)| (meta.seq, count)),
            )
            .field("ended", &self.ended)
            .finish()
    }
}

impl<End: StreamEnd> RingProducer<End> {
    /// A free slot for the next frame. `Block` waits (parked, woken by `recycle`)
    /// until one is free, stop is requested or the consumer is gone; `Drop`
    /// returns `None` at once when none is free. `None` after `End` was pushed.
    pub fn acquire_slot(&mut self, policy: OverflowPolicy) -> Option<Box<FrameSlot>> {
        if self.ended {
            return None;
        }
        if let Some(slot) = self.spare.take() {
            return Some(slot);
        }
        if let Some(slot) = self.free.try_pop() {
            return Some(slot);
        }
        if policy == OverflowPolicy::Drop {
            return None;
        }
        let park_limit = register(&self.shared.producer_thread);
        fence(Ordering::SeqCst);
        loop {
            if let Some(slot) = self.free.try_pop() {
                return Some(slot);
            }
            if self.shared.stop.load(Ordering::Acquire) || !self.free.write_is_held() {
                // Stopping, or no consumer left to give slots back.
                return None;
            }
            park_timeout(park_limit.unwrap_or(PRODUCER_PARK));
        }
    }

    /// Pushes an event in order. Never fails and never blocks:
    /// - `Dropped` joins the pending run of drops, flushed before the next event;
    /// - `Frame` always fits; but when pending drops cannot be flushed first (the
    ///   marker room is used up) the frame joins the drops too, so order holds,
    ///   and its slot is reused for the next frame;
    /// - `Failed` likewise joins the drops when no marker fits (logged);
    /// - `End` flushes pending drops and ends the stream; later events are ignored.
    pub fn push(&mut self, mut event: RingEvent<End>) {
        event.stamp(self.camera, self.counted_parts);
        if self.ended {
            if let RingEvent::Frame(slot) = event {
                self.spare = Some(slot);
            }
            return;
        }
        if let Some(observe) = &mut self.on_delivery {
            match &event {
                RingEvent::Frame(slot) => observe(&slot.meta),
                RingEvent::Failed { meta, .. } => observe(meta),
                RingEvent::Dropped { meta, count } => {
                    for i in 0..*count {
                        observe(&meta.nth_of_run(i));
                    }
                }
                RingEvent::End(_) => {}
            }
        }
        match event {
            RingEvent::Dropped { meta, count } => self.note_dropped(meta, count),
            RingEvent::Frame(slot) => {
                if !self.flush_pending_drops() {
                    let meta = slot.meta;
                    self.spare = Some(slot);
                    self.note_dropped(meta, 1);
                    return;
                }
                // Room is guaranteed: at most pool_size frames exist.
                match self.full.try_push(RingEvent::Frame(slot)) {
                    Ok(()) => self.shared.wake_consumer(),
                    Err(event) => {
                        log::error!(target: "sealcheck::ring", "frame ring full despite its reserve; counting the frame as dropped");
                        if let RingEvent::Frame(slot) = event {
                            let meta = slot.meta;
                            self.spare = Some(slot);
                            self.note_dropped(meta, 1);
                        }
                    }
                }
            }
            RingEvent::Failed { meta, message } => {
                let pushed = self.flush_pending_drops()
                    && self.push_marker(RingEvent::Failed { meta, message }).map_err(|event| {
                        if let RingEvent::Failed { message, .. } = event {
                            log::warn!(target: "sealcheck::ring", seq = meta.seq, error = message.as_str(); "no room for a capture failure marker: the frame is reported as dropped");
                        }
                    }).is_ok();
                if !pushed {
                    self.note_dropped(meta, 1);
                }
            }
            RingEvent::End(end) => self.finish(end),
        }
    }

    /// Makes this the ring of camera `camera` (its place in `Config::cameras`):
    /// every event pushed from now on carries it in its meta.
    pub fn for_camera(mut self, camera: CameraIndex) -> Self {
        self.camera = camera;
        self
    }

    /// `[trigger] mode = "camera"`: each frame is a part the camera
    /// triggered, its id the count of the camera's frames (`Part::counted`),
    /// stamped as it is pushed (before `on_delivery` sees it).
    pub fn parts_counted_by_camera(mut self) -> Self {
        self.counted_parts = true;
        self
    }

    /// Calls `observe` with every delivered frame's final `FrameMeta` (seq,
    /// capture time), in `seq` order, as it is pushed: the line's deadline
    /// clock starts here. It runs on the capture thread: keep it short.
    pub fn on_delivery(&mut self, observe: impl FnMut(&FrameMeta) + Send + 'static) {
        self.on_delivery = Some(Box::new(observe));
    }

    /// Frames counted as dropped but not yet in the ring.
    pub fn pending_drops(&self) -> u64 {
        self.pending_drops.map_or(0, |(_, count)| count)
    }

    /// Whether `End` was pushed.
    pub fn has_ended(&self) -> bool {
        self.ended
    }

    /// A handle that wakes a producer waiting in `acquire_slot` and makes it give up.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Whether the consumer still exists.
    pub fn consumer_alive(&self) -> bool {
        self.full.read_is_held()
    }

    fn note_dropped(&mut self, meta: FrameMeta, count: u64) {
        if count == 0 {
            return;
        }
        match &mut self.pending_drops {
            Some((first, pending)) if first.seq + *pending == meta.seq => *pending += count,
            Some(_) => {
                // Not consecutive (the caller skipped a sequence number): start a new run
                // if the old one can go; otherwise keep counting so nothing is lost.
                if self.flush_pending_drops() {
                    self.pending_drops = Some((meta, count));
                } else if let Some((first, pending)) = &mut self.pending_drops {
                    log::warn!(target: "sealcheck::ring", first = first.seq, next = meta.seq; "non-consecutive drops merged into one run");
                    *pending += count;
                }
            }
            None => self.pending_drops = Some((meta, count)),
        }
    }

    /// Pushes the pending run of drops if there is room for a marker. True when
    /// nothing is pending any more. `push` does this before every event; call
    /// it also when the source may go quiet (an idle camera), so a run of drops
    /// does not wait for the next frame to be reported.
    pub fn flush_pending_drops(&mut self) -> bool {
        let Some((meta, count)) = self.pending_drops else {
            return true;
        };
        if self.push_marker(RingEvent::Dropped { meta, count }).is_ok() {
            self.pending_drops = None;
            true
        } else {
            false
        }
    }

    /// Pushes a marker if the marker room allows it; gives it back otherwise.
    fn push_marker(&mut self, marker: RingEvent<End>) -> Result<(), RingEvent<End>> {
        if self.shared.markers_in_ring.load(Ordering::Acquire) >= MARKER_ROOM {
            return Err(marker);
        }
        // Count before pushing: the consumer decrements after popping, so the
        // count never goes below zero.
        self.shared.markers_in_ring.fetch_add(1, Ordering::AcqRel);
        match self.full.try_push(marker) {
            Ok(()) => {
                self.shared.wake_consumer();
                Ok(())
            }
            Err(marker) => {
                self.shared.markers_in_ring.fetch_sub(1, Ordering::AcqRel);
                Err(marker)
            }
        }
    }

    fn finish(&mut self, end: End) {
        if self.ended {
            return;
        }
        self.ended = true;
        // The END_ROOM reserve takes the last drop marker and End whatever the marker room.
        if let Some((meta, count)) = self.pending_drops.take() {
            self.shared.markers_in_ring.fetch_add(1, Ordering::AcqRel);
            if self
                .full
                .try_push(RingEvent::Dropped { meta, count })
                .is_err()
            {
                self.shared.markers_in_ring.fetch_sub(1, Ordering::AcqRel);
                log::error!(target: "sealcheck::ring", first = meta.seq, count = count; "frame ring full at the end: a run of dropped frames is lost");
            }
        }
        self.shared.markers_in_ring.fetch_add(1, Ordering::AcqRel);
        if self.full.try_push(RingEvent::End(end)).is_err() {
            self.shared.markers_in_ring.fetch_sub(1, Ordering::AcqRel);
            log::error!(target: "sealcheck::ring", "frame ring full at the end: the end marker is lost");
        }
        self.shared.wake_consumer();
    }
}

impl<End: StreamEnd> Drop for RingProducer<End> {
    fn drop(&mut self) {
        self.finish(End::stopped());
    }
}

/// Wakes a producer waiting for a free slot and makes it return `None`; capture
/// uses it when the source fails or is shut down.
#[derive(Debug, Clone)]
pub struct StopHandle {
    pub(super) shared: Arc<Shared>,
}

impl StopHandle {
    pub fn request_stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake_producer();
    }

    pub fn stop_requested(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }

    /// Lets the producer wait for free slots again after `request_stop`. Capture
    /// calls it when it rebuilds a lost live source: the old pipeline's streaming
    /// thread was woken and is gone, and the ring (with its `seq`) goes on.
    pub fn clear_stop(&self) {
        self.shared.stop.store(false, Ordering::Release);
    }
}
