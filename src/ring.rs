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
//!
//! The files: `event` (what goes through: `RingEvent`, `StreamEnd`,
//! `Popped`), `sync` (std's or loom's primitives), `wake` (the state both
//! ends share: who to wake, the stop flag, the marker count, parking),
//! `pool` (`frame_ring`: the slots and both rings), `producer` (capture's
//! end and `StopHandle`), `consumer` (preprocessing's end), `set` (several
//! cameras' rings read by one thread); `tests` and, under the `loom`
//! feature, `loom_model` (the hand-over protocol under the model checker).

mod consumer;
mod event;
mod pool;
mod producer;
mod set;
mod sync;
mod wake;

#[cfg(all(test, feature = "loom"))]
mod loom_model;
#[cfg(all(test, not(feature = "loom")))]
mod tests;

pub use consumer::RingConsumer;
pub use event::{Popped, RingEvent, StreamEnd};
pub use pool::{frame_ring, frame_ring_in, frame_ring_with_capacity};
pub use producer::{RingProducer, StopHandle};
pub use set::RingSet;
