//! One image file to an RGB frame, through the same GStreamer decoders and the
//! same row copy as live capture (for `sealcheck inspect`):
//!
//! ```text
//! {filesrc} - {decodebin} - {videoconvert} - {video/x-raw,format=RGB} - {appsink}
//! ```
//!
//! The pipeline only prerolls: the first decoded frame waits in the appsink.

use std::path::Path;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::error::CaptureError;
use super::init;
use super::rgb_plane::RgbPlane;
use crate::frame::FrameSlot;

/// How long decoding one image may take before it is given up.
const DECODE_TIMEOUT: gst::ClockTime = gst::ClockTime::from_seconds(10);

/// Sets the pipeline to NULL however decoding ends.
struct NullOnDrop(gst::Pipeline);

impl Drop for NullOnDrop {
    fn drop(&mut self) {
        let _ = self.0.set_state(gst::State::Null);
    }
}

/// Decodes a JPEG or PNG (anything `decodebin` reads) into `slot` as packed RGB.
/// `slot.meta` is left as it is. Errors name the file.
pub fn decode_image_file(path: &Path, slot: &mut FrameSlot) -> Result<(), CaptureError> {
    let fail = |reason: String| CaptureError::Image {
        path: path.to_path_buf(),
        reason,
    };
    if !path.is_file() {
        return Err(fail("no such file".to_string()));
    }
    let location = path
        .to_str()
        .ok_or_else(|| fail("the path is not valid UTF-8".to_string()))?;
    init()?;

    let pipeline = gst::parse::launch(
        "filesrc name=src ! decodebin ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false",
    )
    .map_err(|e| fail(format!("the decoding pipeline cannot be built ({e}); is gstreamer1.0-plugins-base installed?")))?
    .downcast::<gst::Pipeline>()
    .map_err(|_| fail("the decoding pipeline is not a pipeline".to_string()))?;
    let pipeline = NullOnDrop(pipeline);
    let src = pipeline
        .0
        .by_name("src")
        .ok_or_else(|| fail("the decoding pipeline has no filesrc".to_string()))?;
    src.set_property("location", location);
    let appsink = pipeline
        .0
        .by_name("sink")
        .and_then(|sink| sink.downcast::<gst_app::AppSink>().ok())
        .ok_or_else(|| fail("the decoding pipeline has no appsink".to_string()))?;
    appsink.set_caps(Some(
        &gst_video::VideoCapsBuilder::new()
            .format(gst_video::VideoFormat::Rgb)
            .build(),
    ));

    let bus = pipeline
        .0
        .bus()
        .ok_or_else(|| fail("the decoding pipeline has no bus".to_string()))?;
    if pipeline.0.set_state(gst::State::Paused).is_err() {
        return Err(fail(
            bus_error(&bus).unwrap_or_else(|| "the decoder refused to start".to_string()),
        ));
    }
    let done = bus.timed_pop_filtered(
        DECODE_TIMEOUT,
        &[
            gst::MessageType::AsyncDone,
            gst::MessageType::Error,
            gst::MessageType::Eos,
        ],
    );
    match done.as_ref().map(|m| m.view()) {
        Some(gst::MessageView::AsyncDone(..)) => {}
        Some(gst::MessageView::Error(err)) => return Err(fail(error_text(err))),
        Some(_) => return Err(fail("the file holds no image".to_string())),
        None => {
            return Err(fail(format!(
                "decoding took longer than {} s",
                DECODE_TIMEOUT.seconds()
            )));
        }
    }
    let sample = appsink
        .try_pull_preroll(gst::ClockTime::ZERO)
        .ok_or_else(|| fail("the decoder produced no frame".to_string()))?;
    let buffer = sample
        .buffer()
        .ok_or_else(|| fail("the decoded sample has no buffer".to_string()))?;
    let caps = sample
        .caps()
        .ok_or_else(|| fail("the decoded sample has no caps".to_string()))?;
    let info = gst_video::VideoInfo::from_caps(caps)
        .map_err(|e| fail(format!("decoded caps {caps} are not video: {e}")))?;
    let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info)
        .map_err(|e| fail(format!("cannot map the decoded frame: {e}")))?;
    let plane = RgbPlane::from_frame(&frame).map_err(fail)?;
    plane.copy_into(slot);
    Ok(())
}

/// The first error waiting on the bus, as text.
fn bus_error(bus: &gst::Bus) -> Option<String> {
    let message = bus.timed_pop_filtered(gst::ClockTime::ZERO, &[gst::MessageType::Error])?;
    match message.view() {
        gst::MessageView::Error(err) => Some(error_text(err)),
        _ => None,
    }
}

fn error_text(err: &gst::message::Error) -> String {
    match err.debug() {
        Some(debug) => format!("{} ({debug})", err.error()),
        None => err.error().to_string(),
    }
}
