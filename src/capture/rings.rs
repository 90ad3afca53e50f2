//! Capture's ends of the frame rings, named for what flows through them:
//! frames, then one `End`.

use super::error::EndOfStream;
use crate::ring;

/// What capture hands to preprocessing through the frame ring, in capture order.
pub type CaptureEvent = ring::RingEvent<EndOfStream>;
/// Capture's end of the frame ring (`ring::frame_ring` makes the pair).
pub type RingProducer = ring::RingProducer<EndOfStream>;
/// The reading end of one camera's frame ring.
pub type RingConsumer = ring::RingConsumer<EndOfStream>;
/// The reading end of every camera's ring: preprocessing, or the device stage.
pub type CameraRings = ring::RingSet<EndOfStream>;
