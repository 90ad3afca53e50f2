//! An image-sequence source: one thread decodes the numbered files in order,
//! each on its own, and pushes every one into the capture pipeline:
//!
//! ```text
//! feeder thread: file k ─ ImageDecoder ─▶ {appsrc "src"} - {appsink "sink"} ─▶ FrameSink
//!                  └ cannot decode: reason ─▶ CaptureShared gap reasons, empty GAP buffer ─┘
//! ```
//!
//! Why not `multifilesrc ! decodebin`: there a file the decoder cannot read
//! vanishes without a word (jpegparse skips bytes that are not JPEG; a damaged
//! file can end the stream early), so that file gets no result and every later
//! result is numbered one too low. Here every file is exactly one frame: its
//! picture, or a GAP buffer that the appsink callback turns into a `Failed`
//! event naming the file (result `fail`, reason `error`).
//!
//! The sequence runs from index 0 to the first missing file, as fast as the
//! pipeline takes frames (appsrc blocks while one decoded frame waits).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use gstreamer as gst;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;

use super::decode::ImageDecoder;
use super::error::CaptureError;
use super::state::CaptureShared;
use crate::config::image_file;

/// Starts the thread feeding `appsrc`. Call it once the pipeline is PLAYING
/// (an appsrc below PAUSED refuses buffers). The thread ends at the end of the
/// sequence, when capture is asked to stop, or when the pipeline stops taking
/// buffers (end of stream, NULL).
pub(crate) fn spawn(
    appsrc: gst_app::AppSrc,
    location: PathBuf,
    framerate: u32,
    shared: Arc<CaptureShared>,
) -> Result<JoinHandle<()>, CaptureError> {
    let origin = shared.origin.clone();
    std::thread::Builder::new()
        .name("image-feeder".into())
        .spawn(move || feed(&appsrc, &location, framerate, &shared))
        .map_err(|e| CaptureError::Thread {
            origin,
            reason: e.to_string(),
        })
}

fn feed(
    appsrc: &gst_app::AppSrc,
    location: &std::path::Path,
    framerate: u32,
    shared: &CaptureShared,
) {
    let frame_duration = gst::ClockTime::SECOND
        .nseconds()
        .checked_div(u64::from(framerate))
        .map(gst::ClockTime::from_nseconds);
    let mut decoder = ImageDecoder::new();
    let mut undecodable = 0u64;
    let mut index = 0u64;
    loop {
        if shared.stop_requested.load(Ordering::Acquire)
            || shared.shutdown_requested.load(Ordering::Acquire)
        {
            return;
        }
        let path = image_file(location, index);
        if !path.exists() {
            if index == 0 {
                // Start reports this (the config check normally catches it first).
                gst::element_error!(
                    appsrc,
                    gst::ResourceError::NotFound,
                    ("the first image {} does not exist", path.display())
                );
            }
            break;
        }
        let decoded = decoder.decode(&path).and_then(|sample| {
            match (sample.buffer_owned(), sample.caps_owned()) {
                (Some(buffer), Some(caps)) => Ok((buffer, caps)),
                _ => Err(CaptureError::Image {
                    path: path.clone(),
                    reason: "the decoder gave a frame without pixels or format".to_string(),
                }),
            }
        });
        let pushed = match decoded {
            Ok((buffer, caps)) => push_picture(appsrc, buffer, &caps, index, frame_duration),
            Err(error) => {
                undecodable += 1;
                log::warn!(target: "sealcheck::capture", source = shared.origin.as_str(), index = index,
                    file = path.display().to_string().as_str(); "{error}: the frame fails with reason error");
                shared.note_gap_reason(error.to_string());
                push_gap(appsrc, framerate)
            }
        };
        if pushed.is_err() {
            // Flushing or EOS: the pipeline is stopping and takes no more frames.
            return;
        }
        index += 1;
    }
    log::info!(target: "sealcheck::capture", source = shared.origin.as_str(), files = index, undecodable = undecodable,
        next_missing = image_file(location, index).display().to_string().as_str();
        "image sequence read to its end (the next file does not exist)");
    let _ = appsrc.end_of_stream();
}

/// Pushes a decoded picture, timestamped by its place in the sequence.
fn push_picture(
    appsrc: &gst_app::AppSrc,
    mut buffer: gst::Buffer,
    caps: &gst::Caps,
    index: u64,
    frame_duration: Option<gst::ClockTime>,
) -> Result<gst::FlowSuccess, gst::FlowError> {
    // The sample that held the buffer is gone: `make_mut` copies the metadata
    // only if the decoder still holds a reference, and shares the pixels.
    {
        let buffer = buffer.make_mut();
        buffer.set_pts(frame_duration.map(|d| d * index));
        buffer.set_duration(frame_duration);
    }
    if appsrc.caps().as_ref() != Some(caps) {
        appsrc.set_caps(Some(caps));
    }
    appsrc.push_buffer(buffer)
}

/// Pushes an empty GAP buffer: a frame that exists but has no picture.
fn push_gap(appsrc: &gst_app::AppSrc, framerate: u32) -> Result<gst::FlowSuccess, gst::FlowError> {
    if appsrc.caps().is_none() {
        // The first file failed: caps are needed before any buffer.
        appsrc.set_caps(Some(
            &gst_video::VideoCapsBuilder::new()
                .format(gst_video::VideoFormat::Rgb)
                .width(1)
                .height(1)
                .framerate(gst::Fraction::new(framerate as i32, 1))
                .build(),
        ));
    }
    let mut buffer = gst::Buffer::new();
    buffer
        .get_mut()
        .expect("a new buffer is writable")
        .set_flags(gst::BufferFlags::GAP);
    appsrc.push_buffer(buffer)
}
