//! The hand-over protocol both ends share: who to wake, the stop request,
//! the marker count, and how a waiting side parks.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::sync::{AtomicBool, AtomicUsize, Ordering, Thread, fence, thread};

/// Park slice for a thread that is not the one registered to be woken (should not
/// happen: each side is used from one thread), so it still sees events promptly.
const UNREGISTERED_PARK: Duration = Duration::from_millis(1);

/// State both ends share: who to wake, and the stop request.
#[derive(Debug)]
pub(super) struct Shared {
    /// The thread that waits in `acquire_slot` (the GStreamer streaming thread).
    pub(super) producer_thread: OnceLock<Thread>,
    /// The thread that waits in `pop` (the preprocess thread).
    pub(super) consumer_thread: OnceLock<Thread>,
    /// Set by `StopHandle::request_stop`: a producer waiting for a slot gives up.
    pub(super) stop: AtomicBool,
    /// `Dropped` and `Failed` events currently in the "full" ring.
    pub(super) markers_in_ring: AtomicUsize,
}

impl Shared {
    pub(super) fn wake_consumer(&self) {
        // Pairs with the fence in `RingConsumer::pop`: either the consumer sees what
        // was just pushed, or we see its registration and unpark it.
        fence(Ordering::SeqCst);
        if let Some(thread) = self.consumer_thread.get() {
            thread.unpark();
        }
    }

    pub(super) fn wake_producer(&self) {
        fence(Ordering::SeqCst);
        if let Some(thread) = self.producer_thread.get() {
            thread.unpark();
        }
    }
}

/// Parks the calling thread until it is unparked, at most `limit`. Under loom,
/// which has no timed park, it waits for the unpark: a lost wake-up is then a
/// deadlock loom reports, not a delay the timeout hides.
pub(super) fn park_timeout(limit: Duration) {
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
pub(super) fn time_left(deadline: Option<Instant>) -> Option<Duration> {
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
pub(super) fn register(slot: &OnceLock<Thread>) -> Option<Duration> {
    let registered = slot.get_or_init(thread::current);
    if registered.id() == thread::current().id() {
        None
    } else {
        Some(UNREGISTERED_PARK)
    }
}
