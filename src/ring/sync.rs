//! The ring's synchronisation primitives, in one place: std's, or loom's
//! under the `loom` feature.
//!
//! The ring's own protocol (wake-ups, the stop flag, the marker count) runs on
//! loom's primitives under the `loom` feature, so `loom_model` can explore
//! its interleavings; `ringbuf` itself is outside loom's view (see there).

#[cfg(feature = "loom")]
pub(super) use loom::sync::Arc;
#[cfg(feature = "loom")]
pub(super) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
#[cfg(feature = "loom")]
pub(super) use loom::thread::{self, Thread};
#[cfg(not(feature = "loom"))]
pub(super) use std::sync::Arc;
#[cfg(not(feature = "loom"))]
pub(super) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
#[cfg(not(feature = "loom"))]
pub(super) use std::thread::{self, Thread};
