//! The frame pool and the two lock-free SPSC rings between capture and preprocessing.
//!
//! ```text
//!   GStreamer streaming thread                         preprocess thread
//!   RingProducer ──"full": RingEvent (Frame, Dropped, Failed, End)─────▶ RingConsumer
//!        ▲                                                                  │
//!        └───────────────"free": Box<FrameSlot> (recycled slots)────────────┘
//! ```
//!
//! `pool_size` slots are allocated once; afterwards a `Box<FrameSlot>` only moves
//! between the rings, which allocates nothing. Each side parks its thread when it
//! has to wait and the other side unparks it after handing something over, so
//! nobody spins and nobody takes a lock.
//!
//! Accounting: every frame the source delivers reaches the consumer exactly once,
//! as a `Frame`, as part of a `Dropped` run, or as `Failed`, in capture order, and
//! `End` comes last. The "full" ring holds at most `pool_size` frames (there are
//! no more slots) plus at most `MARKER_ROOM` markers, plus two entries kept for
//! the final flush of pending drops and `End`, so pushing a frame or the end never
//! fails. Consecutive drops are coalesced into one pending run, pushed as one
//! `Dropped` marker before the next event, at `End`, or when capture calls
//! `flush_pending_drops` (its bus thread does so at least once a second, for a
//! source that went quiet). When the marker room is used up (a consumer far
//! behind), a frame that arrives while a run is pending joins the run, so that
//! order holds; its slot is kept for the next frame.

mod set;
pub use set::RingSet;

use std::num::NonZeroUsize;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

// The ring's own protocol (wake-ups, the stop flag, the marker count) runs on
// loom's primitives under the `loom` feature, so `loom_model` below can explore
// its interleavings; `ringbuf` itself is outside loom's view (see there).
#[cfg(feature = "loom")]
use loom::sync::Arc;
#[cfg(feature = "loom")]
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
#[cfg(feature = "loom")]
use loom::thread::{self, Thread};
#[cfg(not(feature = "loom"))]
use std::sync::Arc;
#[cfg(not(feature = "loom"))]
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
#[cfg(not(feature = "loom"))]
use std::thread::{self, Thread};

use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};

use crate::config::OverflowPolicy;
use crate::frame::{CameraIndex, FrameMeta, FrameSlot, StageMessage};

/// Markers (`Dropped`, `Failed`) that may wait in the "full" ring at once.
const MARKER_ROOM: usize = 16;
/// Entries kept free for the last flush of pending drops and for `End`.
const END_ROOM: usize = 2;
/// Longest a producer waiting for a free slot sleeps before looking at the stop
/// flag again (it is normally woken at once by `recycle` or `StopHandle`).
const PRODUCER_PARK: Duration = Duration::from_millis(20);
/// Park slice for a thread that is not the one registered to be woken (should not
/// happen: each side is used from one thread), so it still sees events promptly.
const UNREGISTERED_PARK: Duration = Duration::from_millis(1);

/// Why a stream ended, as the producer's side tells it (for the camera's frames,
/// `capture::EndOfStream`). The ring only makes one itself, `stopped()`, when
/// the producer is dropped before it pushed `End`.
pub trait StreamEnd: Send + std::fmt::Debug + 'static {
    /// The end of a stream the producer's side stopped (or dropped) on purpose.
    fn stopped() -> Self;

    /// How bad this end is, when several streams end and one reason must
    /// stand for all (`RingSet`): the greatest wins.
    fn severity(&self) -> u8 {
        0
    }
}

/// What the producer (capture) hands to the consumer (preprocessing), in
/// capture order; `End` carries the producer's reason (`StreamEnd`).
#[derive(Debug)]
pub enum RingEvent<End> {
    /// A captured frame; give the slot back with `RingConsumer::recycle`.
    Frame(Box<FrameSlot>),
    /// Consecutive frames `meta.seq .. meta.seq + count - 1` were dropped under
    /// the drop policy (every slot was busy); `meta` is the first one's.
    Dropped { meta: FrameMeta, count: u64 },
    /// A delivered frame that could not be copied or mapped: it gets an `error` result.
    Failed { meta: FrameMeta, message: String },
    /// No more events will come.
    End(End),
}

/// A ring event as the stage after the ring takes it: a frame to work on,
/// a marker already turned into the message that stands in its place, or
/// the end.
#[derive(Debug)]
pub enum Popped<End> {
    Frame(Box<FrameSlot>),
    /// `NotInspected` for `Dropped`, `CaptureFailed` for `Failed`.
    Marker(StageMessage),
    End(End),
}

impl<End> RingEvent<End> {
    fn stamp_camera(&mut self, camera: CameraIndex) {
        match self {
            RingEvent::Frame(slot) => slot.meta.camera = camera,
            RingEvent::Dropped { meta, .. } | RingEvent::Failed { meta, .. } => {
                meta.camera = camera
            }
            RingEvent::End(_) => {}
        }
    }

    /// The one conversion of markers to stage messages, for every stage that
    /// reads the ring (preprocess, device).
    pub fn popped(self) -> Popped<End> {
        match self {
            RingEvent::Frame(slot) => Popped::Frame(slot),
            RingEvent::Dropped { meta, count } => {
                Popped::Marker(StageMessage::NotInspected { first: meta, count })
            }
            RingEvent::Failed { meta, message } => {
                Popped::Marker(StageMessage::CaptureFailed { meta, message })
            }
            RingEvent::End(end) => Popped::End(end),
        }
    }
}

/// State both ends share: who to wake, and the stop request.
#[derive(Debug)]
struct Shared {
    /// The thread that waits in `acquire_slot` (the GStreamer streaming thread).
    producer_thread: OnceLock<Thread>,
    /// The thread that waits in `pop` (the preprocess thread).
    consumer_thread: OnceLock<Thread>,
    /// Set by `StopHandle::request_stop`: a producer waiting for a slot gives up.
    stop: AtomicBool,
    /// `Dropped` and `Failed` events currently in the "full" ring.
    markers_in_ring: AtomicUsize,
}

impl Shared {
    fn wake_consumer(&self) {
        // Pairs with the fence in `RingConsumer::pop`: either the consumer sees what
        // was just pushed, or we see its registration and unpark it.
        fence(Ordering::SeqCst);
        if let Some(thread) = self.consumer_thread.get() {
            thread.unpark();
        }
    }

    fn wake_producer(&self) {
        fence(Ordering::SeqCst);
        if let Some(thread) = self.producer_thread.get() {
            thread.unpark();
        }
    }
}

/// Parks the calling thread until it is unparked, at most `limit`. Under loom,
/// which has no timed park, it waits for the unpark: a lost wake-up is then a
/// deadlock loom reports, not a delay the timeout hides.
fn park_timeout(limit: Duration) {
    #[cfg(feature = "loom")]
    {
        let _ = limit;
        thread::park();
    }
    #[cfg(not(feature = "loom"))]
    thread::park_timeout(limit);
}

/// How long a wait until `deadline` may still park (an hour at a time when
/// there is none); `None` once it has passed.
fn time_left(deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        Some(deadline) => deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero()),
        None => Some(Duration::from_secs(3600)),
    }
}

/// Registers the calling thread as the one to wake, on first use. Returns how
/// long this thread may park at most: unbounded (`None`) when it is the
/// registered thread, a short slice otherwise.
fn register(slot: &OnceLock<Thread>) -> Option<Duration> {
    let registered = slot.get_or_init(thread::current);
    if registered.id() == thread::current().id() {
        None
    } else {
        Some(UNREGISTERED_PARK)
    }
}

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
    let pool_size = pool_size.max(1);
    let full = HeapRb::<RingEvent<End>>::new(pool_size + MARKER_ROOM + END_ROOM);
    let free = HeapRb::<Box<FrameSlot>>::new(pool_size);
    let (full_prod, full_cons) = full.split();
    let (mut free_prod, free_cons) = free.split();
    for _ in 0..pool_size {
        // The free ring holds exactly `pool_size`: this cannot be full.
        let _ = free_prod.try_push(Box::new(FrameSlot::with_capacity(slot_bytes)));
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
    };
    let consumer = RingConsumer {
        full: full_cons,
        free: free_prod,
        shared,
    };
    (producer, consumer)
}

/// Called with each delivered frame's meta, in `seq` order (`RingProducer::on_delivery`).
type DeliveryObserver = Box<dyn FnMut(&FrameMeta) + Send>;

/// Capture's end: takes free slots, pushes events. Dropping it without `End`
/// having been pushed pushes `End(End::stopped())`, so the consumer always sees an end.
pub struct RingProducer<End: StreamEnd> {
    full: HeapProd<RingEvent<End>>,
    free: HeapCons<Box<FrameSlot>>,
    shared: Arc<Shared>,
    /// A run of dropped frames not yet in the ring: the first one's meta and the count.
    pending_drops: Option<(FrameMeta, u64)>,
    /// A slot taken from the pool whose frame was folded into the drops (see `push`);
    /// the next `acquire_slot` returns it.
    spare: Option<Box<FrameSlot>>,
    ended: bool,
    /// Told of every delivered frame as it is pushed (see `on_delivery`).
    on_delivery: Option<DeliveryObserver>,
    /// Stamped on every event's meta as it is pushed (`for_camera`).
    camera: CameraIndex,
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
        event.stamp_camera(self.camera);
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
                        observe(&FrameMeta {
                            seq: meta.seq + i,
                            ..*meta
                        });
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
    shared: Arc<Shared>,
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

/// Preprocessing's end: pops events, gives slots back.
pub struct RingConsumer<End> {
    full: HeapCons<RingEvent<End>>,
    free: HeapProd<Box<FrameSlot>>,
    shared: Arc<Shared>,
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
    fn park_limit(&self) -> Duration {
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

/// A stand-in for capture's end of stream in the ring's own tests.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq)]
enum TestEnd {
    Finished,
    Stopped,
}

#[cfg(test)]
impl StreamEnd for TestEnd {
    fn stopped() -> Self {
        TestEnd::Stopped
    }

    fn severity(&self) -> u8 {
        match self {
            TestEnd::Finished => 0,
            TestEnd::Stopped => 1,
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    const WAIT: Duration = Duration::from_secs(5);

    /// What the capture callback does with one delivered frame.
    fn deliver(producer: &mut RingProducer<TestEnd>, seq: u64, policy: OverflowPolicy) -> bool {
        let meta = FrameMeta::now(seq);
        match producer.acquire_slot(policy) {
            Some(mut slot) => {
                slot.meta = meta;
                slot.data.clear();
                slot.data.extend_from_slice(&seq.to_le_bytes());
                producer.push(RingEvent::Frame(slot));
                true
            }
            None => {
                producer.push(RingEvent::Dropped { meta, count: 1 });
                false
            }
        }
    }

    /// Checks the events cover `0..delivered` in order with no gap; returns
    /// (frames, dropped, failed) counts and how the stream ended.
    fn account(events: &[RingEvent<TestEnd>]) -> (u64, u64, u64, Option<TestEnd>) {
        let (mut next, mut frames, mut dropped, mut failed, mut end) = (0u64, 0, 0, 0, None);
        for event in events {
            assert!(end.is_none(), "event after End: {event:?}");
            match event {
                RingEvent::Frame(slot) => {
                    assert_eq!(slot.meta.seq, next, "frame out of order");
                    assert_eq!(
                        slot.data,
                        next.to_le_bytes(),
                        "slot carries another frame's data"
                    );
                    next += 1;
                    frames += 1;
                }
                RingEvent::Dropped { meta, count } => {
                    assert_eq!(meta.seq, next, "drop run out of order");
                    assert!(*count > 0);
                    next += count;
                    dropped += count;
                }
                RingEvent::Failed { meta, .. } => {
                    assert_eq!(meta.seq, next, "failure out of order");
                    next += 1;
                    failed += 1;
                }
                RingEvent::End(e) => end = Some(e.clone()),
            }
        }
        assert_eq!(next, frames + dropped + failed);
        (frames, dropped, failed, end)
    }

    fn drain(consumer: &mut RingConsumer<TestEnd>, recycle: bool) -> Vec<RingEvent<TestEnd>> {
        let mut events = Vec::new();
        while let Some(event) = consumer.pop(WAIT) {
            let done = matches!(event, RingEvent::End(_));
            match event {
                RingEvent::Frame(slot) if recycle => {
                    events.push(RingEvent::Frame(Box::new(FrameSlot {
                        meta: slot.meta,
                        width: 0,
                        height: 0,
                        stride: 0,
                        layout: slot.layout,
                        data: slot.data.clone(),
                    })));
                    consumer.recycle(slot);
                }
                other => events.push(other),
            }
            if done {
                break;
            }
        }
        events
    }

    #[test]
    fn events_arrive_in_push_order() {
        let (mut producer, mut consumer) = frame_ring(3);
        assert!(deliver(&mut producer, 0, OverflowPolicy::Drop));
        producer.push(RingEvent::Failed {
            meta: FrameMeta::now(1),
            message: "cannot map".into(),
        });
        assert!(deliver(&mut producer, 2, OverflowPolicy::Drop));
        producer.push(RingEvent::Dropped {
            meta: FrameMeta::now(3),
            count: 2,
        });
        assert!(deliver(&mut producer, 5, OverflowPolicy::Drop));
        producer.push(RingEvent::End(TestEnd::Finished));
        let events = drain(&mut consumer, true);
        let kinds: Vec<String> = events
            .iter()
            .map(|e| match e {
                RingEvent::Frame(s) => format!("F{}", s.meta.seq),
                RingEvent::Dropped { meta, count } => format!("D{}x{count}", meta.seq),
                RingEvent::Failed { meta, message } => format!("X{}:{message}", meta.seq),
                RingEvent::End(e) => format!("{e:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            ["F0", "X1:cannot map", "F2", "D3x2", "F5", "Finished"]
        );
        assert_eq!(account(&events), (3, 2, 1, Some(TestEnd::Finished)));
    }

    #[test]
    fn end_comes_after_pending_drops() {
        let (mut producer, mut consumer) = frame_ring(1);
        assert!(deliver(&mut producer, 0, OverflowPolicy::Drop));
        for seq in 1..6 {
            assert!(
                !deliver(&mut producer, seq, OverflowPolicy::Drop),
                "pool of one is busy"
            );
        }
        // The drops are coalesced and wait for the next event.
        assert_eq!(consumer.queued(), 1);
        producer.push(RingEvent::End(TestEnd::Finished));
        let events = drain(&mut consumer, false);
        assert!(
            matches!(&events[1], RingEvent::Dropped { meta, count: 5 } if meta.seq == 1),
            "{events:?}"
        );
        assert_eq!(account(&events), (1, 5, 0, Some(TestEnd::Finished)));
    }

    #[test]
    fn a_pending_run_of_drops_can_be_flushed_without_a_next_frame() {
        let (mut producer, mut consumer) = frame_ring(1);
        assert!(deliver(&mut producer, 0, OverflowPolicy::Drop));
        assert!(!deliver(&mut producer, 1, OverflowPolicy::Drop));
        assert!(!deliver(&mut producer, 2, OverflowPolicy::Drop));
        assert_eq!(producer.pending_drops(), 2);
        assert!(matches!(consumer.pop(WAIT), Some(RingEvent::Frame(_))));
        assert!(
            consumer.pop(Duration::from_millis(10)).is_none(),
            "drops wait for the next event"
        );
        // The source goes quiet: capture's periodic flush reports the run anyway.
        assert!(producer.flush_pending_drops());
        assert_eq!(producer.pending_drops(), 0);
        assert!(
            matches!(consumer.pop(WAIT), Some(RingEvent::Dropped { meta, count: 2 }) if meta.seq == 1)
        );
    }

    #[test]
    fn dropping_the_producer_ends_the_stream() {
        let (mut producer, mut consumer) = frame_ring(2);
        assert!(deliver(&mut producer, 0, OverflowPolicy::Block));
        drop(producer);
        let events = drain(&mut consumer, true);
        assert_eq!(account(&events), (1, 0, 0, Some(TestEnd::Stopped)));
        assert!(
            consumer.pop(Duration::from_secs(60)).is_none(),
            "an ended ring must not make pop wait"
        );
    }

    #[test]
    fn drop_policy_loses_no_frame_with_a_slow_consumer() {
        const DELIVERED: u64 = 20_000;
        let (mut producer, mut consumer) = frame_ring(3);
        let taken = Arc::new(AtomicU64::new(0));
        let producer_thread = thread::spawn(move || {
            let mut passed = 0;
            for seq in 0..DELIVERED {
                if deliver(&mut producer, seq, OverflowPolicy::Drop) {
                    passed += 1;
                }
                if seq % 64 == 0 {
                    thread::yield_now();
                }
            }
            producer.push(RingEvent::End(TestEnd::Finished));
            passed
        });
        let mut events = Vec::new();
        while let Some(event) = consumer.pop(WAIT) {
            let done = matches!(event, RingEvent::End(_));
            if let RingEvent::Frame(slot) = event {
                // Slow: hold each frame a little before giving the slot back.
                thread::sleep(Duration::from_micros(200));
                taken.fetch_add(1, Ordering::Relaxed);
                events.push(RingEvent::Frame(Box::new(FrameSlot {
                    meta: slot.meta,
                    width: 0,
                    height: 0,
                    stride: 0,
                    layout: slot.layout,
                    data: slot.data.clone(),
                })));
                consumer.recycle(slot);
            } else {
                events.push(event);
            }
            if done {
                break;
            }
        }
        let passed = producer_thread.join().unwrap();
        let (frames, dropped, failed, end) = account(&events);
        assert_eq!(end, Some(TestEnd::Finished));
        assert_eq!(frames + dropped + failed, DELIVERED);
        assert!(dropped > 0, "a slow consumer should have caused drops");
        // Frames folded into drops (marker room used up) are counted as dropped.
        assert!(frames <= passed);
        assert_eq!(taken.load(Ordering::Relaxed), frames);
    }

    #[test]
    fn markers_never_overflow_a_stuck_consumer() {
        // Consumer pops nothing until the end: alternating frames (recycled by hand)
        // and drops would need far more markers than the ring holds.
        let (mut producer, mut consumer) = frame_ring(2);
        let mut seq = 0;
        for _ in 0..200 {
            deliver(&mut producer, seq, OverflowPolicy::Drop);
            seq += 1;
            producer.push(RingEvent::Dropped {
                meta: FrameMeta::now(seq),
                count: 1,
            });
            seq += 1;
            producer.push(RingEvent::Failed {
                meta: FrameMeta::now(seq),
                message: "bad buffer".into(),
            });
            seq += 1;
        }
        producer.push(RingEvent::End(TestEnd::Finished));
        assert!(consumer.queued() <= consumer.capacity().get());
        let events = drain(&mut consumer, false);
        let (frames, dropped, failed, end) = account(&events);
        assert_eq!(end, Some(TestEnd::Finished));
        assert_eq!(frames + dropped + failed, seq);
        assert_eq!(frames, 2, "only the pool's two slots can be in the ring");
    }

    #[test]
    fn block_policy_waits_for_a_recycled_slot() {
        let (mut producer, mut consumer) = frame_ring(2);
        let delivered = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&delivered);
        let producer_thread = thread::spawn(move || {
            for seq in 0..5 {
                assert!(
                    deliver(&mut producer, seq, OverflowPolicy::Block),
                    "block never drops"
                );
                counter.store(seq + 1, Ordering::SeqCst);
            }
            producer.push(RingEvent::End(TestEnd::Finished));
        });
        let first = consumer.pop(WAIT).unwrap();
        let second = consumer.pop(WAIT).unwrap();
        thread::sleep(Duration::from_millis(100));
        assert_eq!(
            delivered.load(Ordering::SeqCst),
            2,
            "producer must wait while both slots are held"
        );
        assert!(consumer.pop(Duration::from_millis(50)).is_none());
        let mut events = vec![first, second];
        for event in events.iter_mut() {
            if let RingEvent::Frame(slot) = event {
                let copy = Box::new(FrameSlot {
                    meta: slot.meta,
                    width: 0,
                    height: 0,
                    stride: 0,
                    layout: slot.layout,
                    data: slot.data.clone(),
                });
                let held = std::mem::replace(slot, copy);
                consumer.recycle(held);
            }
        }
        events.extend(drain(&mut consumer, true));
        producer_thread.join().unwrap();
        assert_eq!(account(&events), (5, 0, 0, Some(TestEnd::Finished)));
    }

    #[test]
    fn stop_wakes_a_producer_blocked_on_a_full_pool() {
        let (mut producer, mut consumer) = frame_ring(1);
        let stop = producer.stop_handle();
        let producer_thread = thread::spawn(move || {
            assert!(deliver(&mut producer, 0, OverflowPolicy::Block));
            let started = Instant::now();
            let got = producer.acquire_slot(OverflowPolicy::Block).is_some();
            (got, started.elapsed())
        });
        let held = consumer.pop(WAIT).unwrap();
        thread::sleep(Duration::from_millis(50));
        stop.request_stop();
        let (got, waited) = producer_thread.join().unwrap();
        assert!(!got, "a stopped producer gets no slot");
        assert!(waited < WAIT);
        drop(held);
    }

    #[test]
    fn pop_times_out_without_spinning_past_the_deadline() {
        let (_producer, mut consumer) = frame_ring::<TestEnd>(2);
        let started = Instant::now();
        assert!(consumer.pop(Duration::from_millis(30)).is_none());
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(30) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    }

    #[test]
    fn on_delivery_sees_every_delivered_frame_once_in_order() {
        let (mut producer, _consumer) = frame_ring(1);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        producer.on_delivery(move |meta| sink.lock().unwrap().push(meta.seq));
        // One slot: frame 0 fills it, 1..=3 are dropped (one run), 4 fails to copy.
        for seq in 0..4 {
            deliver(&mut producer, seq, OverflowPolicy::Drop);
        }
        producer.push(RingEvent::Failed {
            meta: FrameMeta::now(4),
            message: "cannot map".into(),
        });
        producer.push(RingEvent::End(TestEnd::Finished));
        // After the end nothing more is delivered.
        deliver(&mut producer, 5, OverflowPolicy::Drop);
        assert_eq!(*seen.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }
}

/// The ring's hand-over protocol under loom (`make test` runs it:
/// `cargo test --release --features loom --lib ring::loom_model`).
///
/// What is modelled: the wake-up protocol (registration in a `OnceLock`, the
/// `SeqCst` fences in `wake_*` against the ones in `pop` and `acquire_slot`,
/// park/unpark), the stop flag, the marker count and slot recycling, all on
/// loom's atomics and threads, with every `park` untimed so that a lost
/// wake-up shows as a deadlock. What is assumed: `ringbuf`'s SPSC push and pop
/// are correct; they use atomics loom cannot see, so here each is one
/// indivisible step between loom's scheduling points (its own tests and Miri
/// runs cover its internals).
#[cfg(all(test, feature = "loom"))]
mod loom_model {
    use super::*;

    /// Few preemptions: enough for every wake-up race of two threads, and the
    /// models finish in seconds.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(f);
    }

    fn frame(producer: &mut RingProducer<TestEnd>, seq: u64, policy: OverflowPolicy) -> bool {
        let meta = FrameMeta {
            seq,
            camera: 0,
            captured_at: std::time::UNIX_EPOCH,
            captured_instant: Instant::now(),
        };
        match producer.acquire_slot(policy) {
            Some(mut slot) => {
                slot.meta = meta;
                producer.push(RingEvent::Frame(slot));
                true
            }
            None => {
                producer.push(RingEvent::Dropped { meta, count: 1 });
                false
            }
        }
    }

    /// Pops to `End` with no timeout (a lost wake-up deadlocks), recycling
    /// frames; returns the seqs covered and how the stream ended.
    fn drain(consumer: &mut RingConsumer<TestEnd>) -> (Vec<u64>, TestEnd) {
        let mut seqs = Vec::new();
        loop {
            match consumer.pop(Duration::MAX) {
                Some(RingEvent::Frame(slot)) => {
                    seqs.push(slot.meta.seq);
                    consumer.recycle(slot);
                }
                Some(RingEvent::Dropped { meta, count }) => seqs.extend(meta.seq..meta.seq + count),
                Some(RingEvent::Failed { meta, .. }) => seqs.push(meta.seq),
                Some(RingEvent::End(end)) => return (seqs, end),
                None => panic!("pop without a timeout returned nothing"),
            }
        }
    }

    #[test]
    fn a_parked_consumer_never_misses_a_frame_or_the_end() {
        model(|| {
            let (mut producer, mut consumer) = frame_ring(2);
            let capture = thread::spawn(move || {
                frame(&mut producer, 0, OverflowPolicy::Drop);
                frame(&mut producer, 1, OverflowPolicy::Drop);
                producer.push(RingEvent::End(TestEnd::Finished));
            });
            let (seqs, end) = drain(&mut consumer);
            capture.join().unwrap();
            assert_eq!(seqs, [0, 1]);
            assert_eq!(end, TestEnd::Finished);
            assert_eq!(consumer.free_slots(), 2, "every slot came back");
        });
    }

    #[test]
    fn a_blocked_producer_is_woken_by_the_recycled_slot() {
        model(|| {
            // One slot: the second frame waits for the first one's slot.
            let (mut producer, mut consumer) = frame_ring(1);
            let capture = thread::spawn(move || {
                let blocked_never_drops = frame(&mut producer, 0, OverflowPolicy::Block)
                    && frame(&mut producer, 1, OverflowPolicy::Block);
                producer.push(RingEvent::End(TestEnd::Finished));
                blocked_never_drops
            });
            let (seqs, end) = drain(&mut consumer);
            assert!(capture.join().unwrap());
            assert_eq!((seqs, end), (vec![0, 1], TestEnd::Finished));
        });
    }

    #[test]
    fn stop_wakes_a_producer_waiting_for_a_slot_and_clear_stop_rearms_it() {
        model(|| {
            let (mut producer, mut consumer) = frame_ring(1);
            let stop = producer.stop_handle();
            let capture = thread::spawn(move || {
                assert!(frame(&mut producer, 0, OverflowPolicy::Block));
                // The only slot is held by the consumer: waits until stopped.
                let got = producer.acquire_slot(OverflowPolicy::Block).is_some();
                (producer, got)
            });
            let held = match consumer.pop(Duration::MAX) {
                Some(RingEvent::Frame(slot)) => slot,
                other => panic!("{other:?}"),
            };
            stop.request_stop();
            let (mut producer, got) = capture.join().unwrap();
            assert!(!got, "a stopped producer gets no slot");
            // A rebuilt source: waiting works again, and the recycled slot comes back.
            stop.clear_stop();
            consumer.recycle(held);
            assert!(producer.acquire_slot(OverflowPolicy::Block).is_some());
        });
    }

    #[test]
    fn markers_are_counted_back_to_zero_whatever_the_interleaving() {
        model(|| {
            let (mut producer, mut consumer) = frame_ring(1);
            let shared = Arc::clone(&producer.shared);
            let capture = thread::spawn(move || {
                let meta = |seq| FrameMeta {
                    seq,
                    camera: 0,
                    captured_at: std::time::UNIX_EPOCH,
                    captured_instant: Instant::now(),
                };
                producer.push(RingEvent::Failed {
                    meta: meta(0),
                    message: String::new(),
                });
                producer.push(RingEvent::Dropped {
                    meta: meta(1),
                    count: 2,
                });
                assert!(producer.flush_pending_drops());
                producer.push(RingEvent::End(TestEnd::Stopped));
            });
            let (seqs, end) = drain(&mut consumer);
            capture.join().unwrap();
            assert_eq!((seqs, end), (vec![0, 1, 2], TestEnd::Stopped));
            assert!(consumer.pop(Duration::ZERO).is_none());
            assert_eq!(shared.markers_in_ring.load(Ordering::SeqCst), 0);
        });
    }
}
