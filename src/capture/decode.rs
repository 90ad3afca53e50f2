//! One image file to an RGB frame, through the same GStreamer decoders and the
//! same row copy as live capture (for `sealcheck inspect`, and per file for an
//! image-sequence source):
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
    let sample = decode_image_sample(path)?;
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

/// Decodes one image file into a sample of RGB video (buffer and caps), which
/// outlives the decoding pipeline. Errors name the file.
pub(crate) fn decode_image_sample(path: &Path) -> Result<gst::Sample, CaptureError> {
    let fail = |reason: String| CaptureError::Image {
        path: path.to_path_buf(),
        reason,
    };
    if !path.is_file() {
        return Err(fail("no such file".to_string()));
    }
    check_complete(path).map_err(fail)?;
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
    appsink
        .try_pull_preroll(gst::ClockTime::ZERO)
        .ok_or_else(|| fail("the decoder produced no frame".to_string()))
}

/// How far from the end of a file its end marker may lie (some cameras pad files).
const END_MARKER_WINDOW: u64 = 4096;

/// A JPEG or PNG cut short (a camera or a copy that stopped mid-file) still
/// decodes, its missing rows grey, and the decoders say nothing: sealcheck
/// would inspect a picture that is not all there. So the file's end is checked:
/// a JPEG needs its end-of-image marker (FF D9), a PNG its IEND chunk, within
/// the last `END_MARKER_WINDOW` bytes. Other formats are left to the decoder.
fn check_complete(path: &Path) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |e: std::io::Error| format!("cannot read it: {e}");
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut head = Vec::with_capacity(8);
    (&mut file).take(8).read_to_end(&mut head).map_err(io)?;
    let (format, marker): (&str, &[u8]) = if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        ("JPEG", &[0xFF, 0xD9])
    } else if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        ("PNG", b"IEND")
    } else {
        return Ok(());
    };
    let mut tail = Vec::with_capacity(END_MARKER_WINDOW as usize);
    file.seek(SeekFrom::Start(len.saturating_sub(END_MARKER_WINDOW)))
        .map_err(io)?;
    file.read_to_end(&mut tail).map_err(io)?;
    if tail.windows(marker.len()).any(|w| w == marker) {
        Ok(())
    } else {
        Err(format!(
            "the {format} data stops before its end marker: the file is truncated \
             (was it still being written, or cut short in a copy?)"
        ))
    }
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
