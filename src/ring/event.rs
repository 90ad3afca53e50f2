//! What goes through the ring: `RingEvent` (frames, markers, the end), the
//! `StreamEnd` a producer ends with, and `Popped`, an event as the stage
//! after the ring takes it.

use crate::frame::{CameraIndex, FrameMeta, FrameSlot, Part, StageMessage};

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
    /// The event's frame meta (`None` for the end).
    fn meta_mut(&mut self) -> Option<&mut FrameMeta> {
        match self {
            RingEvent::Frame(slot) => Some(&mut slot.meta),
            RingEvent::Dropped { meta, .. } | RingEvent::Failed { meta, .. } => Some(meta),
            RingEvent::End(_) => None,
        }
    }

    /// Stamps the event's meta as the producer pushes it: its camera, and in
    /// `camera` mode (`counted`) its part, the camera-counted one of its `seq`.
    pub(super) fn stamp(&mut self, camera: CameraIndex, counted: bool) {
        if let Some(meta) = self.meta_mut() {
            meta.camera = camera;
            if counted {
                meta.part = Part::counted(meta.seq, meta.captured_at, meta.captured_instant);
            }
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

/// A stand-in for capture's end of stream in the ring's own tests.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq)]
pub(super) enum TestEnd {
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
