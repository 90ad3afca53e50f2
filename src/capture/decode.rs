//! Image files to RGB frames, through the same GStreamer decoders and the same
//! row copy as live capture (for `sealcheck inspect`, and file by file for an
//! image-sequence source):
//!
//! ```text
//! {filesrc} - {jpegdec | pngdec | decodebin} - {videoconvert} - {video/x-raw,format=RGB} - {appsink}
//! ```
//!
//! Each file is its own stream: the pipeline prerolls on it (the decoded frame
//! waits in the appsink) and goes back to READY. `ImageDecoder` keeps the last
//! pipeline for the next file of the same format, since building one costs
//! about as much as decoding a frame.

use std::path::Path;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::error::CaptureError;
use super::library::init;
use super::rgb_plane::RgbPlane;
use crate::frame::FrameSlot;

/// How long decoding one image may take before it is given up.
const DECODE_TIMEOUT: gst::ClockTime = gst::ClockTime::from_seconds(10);

/// How far from the end of a file its end marker may lie (some cameras pad files).
const END_MARKER_WINDOW: u64 = 4096;

/// Decodes a JPEG or PNG (anything `decodebin` reads) into `slot` as packed RGB.
/// `slot.meta` is left as it is. Errors name the file.
pub fn decode_image_file(path: &Path, slot: &mut FrameSlot) -> Result<(), CaptureError> {
    let fail = |reason: String| CaptureError::Image {
        path: path.to_path_buf(),
        reason,
    };
    let sample = ImageDecoder::new().decode(path)?;
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

/// Decodes image files one after another, reusing its pipeline while the
/// format stays the same.
#[derive(Default)]
pub(crate) struct ImageDecoder {
    /// The pipeline of the last file, in READY, if that file decoded.
    idle: Option<DecodePipeline>,
}

impl ImageDecoder {
    pub(crate) fn new() -> Self {
        ImageDecoder::default()
    }

    /// One image file as a sample of RGB video (buffer and caps), which
    /// outlives the pipeline's next use. Errors name the file.
    pub(crate) fn decode(&mut self, path: &Path) -> Result<gst::Sample, CaptureError> {
        let fail = |reason: String| CaptureError::Image {
            path: path.to_path_buf(),
            reason,
        };
        if !path.is_file() {
            return Err(fail("no such file".to_string()));
        }
        let format = check_complete(path).map_err(fail)?;
        let location = path
            .to_str()
            .ok_or_else(|| fail("the path is not valid UTF-8".to_string()))?;
        let pipeline = match self.idle.take() {
            Some(idle) if idle.format == format => idle,
            // A pipeline of another format is dropped (to NULL) here.
            _ => DecodePipeline::new(format).map_err(fail)?,
        };
        let sample = pipeline.decode(location).map_err(fail)?;
        // Only a pipeline that just worked is kept: after an error it is rebuilt.
        if pipeline.pipeline.set_state(gst::State::Ready).is_ok() {
            self.idle = Some(pipeline);
        }
        Ok(sample)
    }
}

/// An image file's format, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImageFormat {
    Jpeg,
    Png,
    /// Anything else: left to `decodebin`.
    Other,
}

impl ImageFormat {
    /// JPEG and PNG name their decoder: finding it through `decodebin`
    /// (typefinding, autoplugging) costs more than decoding one frame.
    fn launch(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => {
                "filesrc name=src ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false"
            }
            ImageFormat::Png => {
                "filesrc name=src ! pngdec ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false"
            }
            ImageFormat::Other => {
                "filesrc name=src ! decodebin ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false"
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::Png => "PNG",
            ImageFormat::Other => "image",
        }
    }
}

/// One decoding pipeline; set to NULL when dropped.
struct DecodePipeline {
    format: ImageFormat,
    pipeline: gst::Pipeline,
    src: gst::Element,
    appsink: gst_app::AppSink,
    bus: gst::Bus,
}

impl Drop for DecodePipeline {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

impl DecodePipeline {
    fn new(format: ImageFormat) -> Result<Self, String> {
        init().map_err(|e| e.to_string())?;
        let pipeline = gst::parse::launch(format.launch())
            .map_err(|e| {
                format!(
                    "the decoding pipeline cannot be built ({e}); are gstreamer1.0-plugins-base \
                     and gstreamer1.0-plugins-good installed?"
                )
            })?
            .downcast::<gst::Pipeline>()
            .map_err(|_| "the decoding pipeline is not a pipeline".to_string())?;
        let src = pipeline
            .by_name("src")
            .ok_or_else(|| "the decoding pipeline has no filesrc".to_string())?;
        let appsink = pipeline
            .by_name("sink")
            .and_then(|sink| sink.downcast::<gst_app::AppSink>().ok())
            .ok_or_else(|| "the decoding pipeline has no appsink".to_string())?;
        appsink.set_caps(Some(
            &gst_video::VideoCapsBuilder::new()
                .format(gst_video::VideoFormat::Rgb)
                .build(),
        ));
        let bus = pipeline
            .bus()
            .ok_or_else(|| "the decoding pipeline has no bus".to_string())?;
        Ok(DecodePipeline {
            format,
            pipeline,
            src,
            appsink,
            bus,
        })
    }

    /// Prerolls on the file at `location` (the pipeline is in NULL or READY).
    fn decode(&self, location: &str) -> Result<gst::Sample, String> {
        // Messages of the previous file must not answer for this one.
        while self.bus.pop().is_some() {}
        self.src.set_property("location", location);
        if self.pipeline.set_state(gst::State::Paused).is_err() {
            return Err(
                bus_error(&self.bus).unwrap_or_else(|| "the decoder refused to start".to_string())
            );
        }
        let done = self.bus.timed_pop_filtered(
            DECODE_TIMEOUT,
            &[
                gst::MessageType::AsyncDone,
                gst::MessageType::Error,
                gst::MessageType::Eos,
            ],
        );
        match done.as_ref().map(|m| m.view()) {
            Some(gst::MessageView::AsyncDone(..)) => {}
            Some(gst::MessageView::Error(err)) => return Err(error_text(err)),
            Some(_) => return Err("the file holds no image".to_string()),
            None => {
                return Err(format!(
                    "decoding took longer than {} s",
                    DECODE_TIMEOUT.seconds()
                ));
            }
        }
        self.appsink
            .try_pull_preroll(gst::ClockTime::ZERO)
            .ok_or_else(|| "the decoder produced no frame".to_string())
    }
}

/// A JPEG or PNG cut short (a camera or a copy that stopped mid-file) still
/// decodes, its missing rows grey, and the decoders say nothing: sealcheck
/// would inspect a picture that is not all there. So the file's end is checked:
/// a JPEG needs its end-of-image marker (FF D9), a PNG its IEND chunk, within
/// the last `END_MARKER_WINDOW` bytes. Other formats are left to the decoder.
fn check_complete(path: &Path) -> Result<ImageFormat, String> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |e: std::io::Error| format!("cannot read it: {e}");
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut head = Vec::with_capacity(8);
    (&mut file).take(8).read_to_end(&mut head).map_err(io)?;
    let (format, marker): (ImageFormat, &[u8]) = if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        (ImageFormat::Jpeg, &[0xFF, 0xD9])
    } else if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        (ImageFormat::Png, b"IEND")
    } else {
        return Ok(ImageFormat::Other);
    };
    let mut tail = Vec::with_capacity(END_MARKER_WINDOW as usize);
    file.seek(SeekFrom::Start(len.saturating_sub(END_MARKER_WINDOW)))
        .map_err(io)?;
    file.read_to_end(&mut tail).map_err(io)?;
    if tail.windows(marker.len()).any(|w| w == marker) {
        Ok(format)
    } else {
        Err(format!(
            "the {} data stops before its end marker: the file is truncated \
             (was it still being written, or cut short in a copy?)",
            format.name()
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
