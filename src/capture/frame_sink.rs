//! The appsink `new-sample` callback, on GStreamer's streaming thread: number
//! the frame, take a slot under the overflow policy, copy the pixels in, push.
//!
//! Per frame this allocates nothing (a slot's buffer grows only when the frame
//! size changes) and never panics: a frame that cannot be mapped becomes a
//! `Failed` event, so does a GAP buffer (a frame without a picture, such as an
//! image file that could not be decoded), and only a stream that can never work (caps that are not raw
//! video) stops the pipeline, through `element_error!` and `FlowError::Error`.

use std::sync::Arc;
use std::time::Instant;

use gstreamer as gst;
use gstreamer::element_error;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::rgb_plane::RgbPlane;
use super::rings::{CaptureEvent, RingProducer};
use super::state::CaptureShared;
use crate::frame::FrameMeta;

/// State the callback keeps between frames.
pub(crate) struct FrameSink {
    shared: Arc<CaptureShared>,
    /// The caps of the last sample and their parsed form; caps only change on
    /// renegotiation, so they are parsed once per change, not per frame.
    caps: Option<(gst::Caps, gst_video::VideoInfo)>,
    /// Frame size of the last frame copied, to log size changes once.
    frame_size: Option<(u32, u32)>,
    /// The pipeline generation this sink serves (see `CaptureShared::retire_pipeline`).
    generation: u64,
}

impl FrameSink {
    pub(crate) fn new(shared: Arc<CaptureShared>) -> Self {
        FrameSink {
            generation: shared.generation(),
            shared,
            caps: None,
            frame_size: None,
        }
    }

    pub(crate) fn on_new_sample(
        &mut self,
        appsink: &gst_app::AppSink,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        let sample = appsink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
        let shared = Arc::clone(&self.shared);
        let mut producer = shared.producer();
        let Some(producer) = producer.as_mut() else {
            // The stream already ended (stopped or failed): deliver no more.
            return Err(gst::FlowError::Flushing);
        };
        if !shared.is_current(self.generation) {
            // An abandoned pipeline woke up: its frame belongs to no stream now.
            return Err(gst::FlowError::Flushing);
        }
        let captured_instant = Instant::now();
        let seq = shared.next_seq(captured_instant);
        let meta = FrameMeta {
            seq,
            camera: 0,
            captured_at: std::time::SystemTime::now(),
            captured_instant,
            part: crate::frame::Part::free(seq),
        };

        if sample
            .buffer()
            .is_some_and(|buffer| buffer.flags().contains(gst::BufferFlags::GAP))
        {
            let message = shared.take_gap_reason();
            producer.push(CaptureEvent::Failed { meta, message });
            return Ok(gst::FlowSuccess::Ok);
        }
        let info = match self.video_info(&sample) {
            Ok(info) => info,
            Err(message) => {
                // Every later frame would fail the same way: account for this one, stop the stream.
                element_error!(appsink, gst::StreamError::Format, ("{}", message));
                producer.push(CaptureEvent::Failed { meta, message });
                return Err(gst::FlowError::Error);
            }
        };
        let Some(buffer) = sample.buffer() else {
            producer.push(CaptureEvent::Failed {
                meta,
                message: "sample without a buffer".to_string(),
            });
            return Ok(gst::FlowSuccess::Ok);
        };
        let frame = match gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info) {
            Ok(frame) => frame,
            Err(e) => {
                let message = format!("cannot map the frame buffer: {e}");
                producer.push(CaptureEvent::Failed { meta, message });
                return Ok(gst::FlowSuccess::Ok);
            }
        };
        let plane = match RgbPlane::from_frame(&frame) {
            Ok(plane) => plane,
            Err(message) => {
                producer.push(CaptureEvent::Failed { meta, message });
                return Ok(gst::FlowSuccess::Ok);
            }
        };
        self.note_frame_size(&plane);
        self.deliver(producer, &plane, meta);
        if !producer.consumer_alive() {
            element_error!(
                appsink,
                gst::ResourceError::Failed,
                ("the frame consumer is gone")
            );
            return Err(gst::FlowError::Error);
        }
        Ok(gst::FlowSuccess::Ok)
    }

    /// Copies the frame into a slot and pushes it, or counts it dropped.
    fn deliver(&self, producer: &mut RingProducer, plane: &RgbPlane<'_>, mut meta: FrameMeta) {
        match producer.acquire_slot(self.shared.policy) {
            Some(mut slot) => {
                if !self.shared.is_live() {
                    // A stored source's frame is captured when we take it: time spent
                    // waiting for a slot (backpressure) is the reader pausing, not latency.
                    // A live frame exists from its arrival, so waiting for a slot counts.
                    meta.captured_instant = Instant::now();
                    meta.captured_at = std::time::SystemTime::now();
                }
                plane.copy_into(&mut slot);
                slot.in_slot = Some(Instant::now());
                slot.meta = meta;
                producer.push(CaptureEvent::Frame(slot));
            }
            None => producer.push(CaptureEvent::Dropped { meta, count: 1 }),
        }
    }

    /// The sample's video info, parsed again only when its caps change.
    fn video_info(&mut self, sample: &gst::Sample) -> Result<gst_video::VideoInfo, String> {
        let Some(caps) = sample.caps() else {
            return Err("sample without caps".to_string());
        };
        if let Some((known, info)) = &self.caps
            && known.as_ptr() == caps.as_ptr()
        {
            return Ok(info.clone());
        }
        let info = gst_video::VideoInfo::from_caps(caps)
            .map_err(|e| format!("caps {caps} are not raw video ({e}); the appsink must receive video/x-raw,format=RGB"))?;
        self.shared
            .note_frame_rate(info.fps().numer(), info.fps().denom());
        self.caps = Some((caps.to_owned(), info.clone()));
        Ok(info)
    }

    fn note_frame_size(&mut self, plane: &RgbPlane<'_>) {
        let size = (plane.width(), plane.height());
        if self.frame_size != Some(size) {
            self.frame_size = Some(size);
            // A rebuilt live source delivering the size it had says nothing new.
            if !self.shared.note_frame_size(size) {
                return;
            }
            log::info!(target: "sealcheck::capture",
                source = self.shared.origin.as_str(), width = size.0, height = size.1,
                slot_bytes = plane.packed_len(), pool_size = self.shared.pool_size;
                "frame size {}x{}: each frame slot grows once to {} bytes if smaller", size.0, size.1, plane.packed_len());
        }
    }
}
