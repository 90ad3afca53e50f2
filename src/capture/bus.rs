//! Watching the pipeline's bus: during start (did it start?) and afterwards on
//! the capture thread (EOS, errors, PLAYING), which turns the end of the stream
//! into the ring's `End` event and sets the pipeline to NULL.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;

use std::sync::Arc;

use super::error::CaptureError;
use super::error::EndOfStream;
use super::state::CaptureShared;
use super::teardown;

/// How long `stop()` waits for the EOS it sent to come out of the pipeline.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest the capture thread blocks on the bus before re-checking its flags
/// (it is normally woken by a message; `wake` posts one) and flushing pending
/// drops: a run of dropped frames is reported within this time even when the
/// source goes quiet.
const BUS_POLL: Duration = Duration::from_secs(1);
/// Name of the application message that wakes the capture thread.
const WAKE: &str = "sealcheck-capture-wake";

/// What a bus message means for us.
pub(crate) enum BusEvent {
    Eos,
    Error(CaptureError),
    /// The pipeline finished prerolling.
    AsyncDone,
    Other,
}

/// Interprets one message; keeps `shared`'s streaming flag current.
pub(crate) fn handle(
    message: &gst::Message,
    pipeline: &gst::Pipeline,
    shared: &CaptureShared,
    hint: &'static str,
) -> BusEvent {
    use gst::MessageView;
    let from_pipeline = message
        .src()
        .is_some_and(|src| src == pipeline.upcast_ref::<gst::Object>());
    match message.view() {
        MessageView::Eos(..) => BusEvent::Eos,
        MessageView::Error(err) => BusEvent::Error(CaptureError::Bus {
            origin: shared.origin.clone(),
            element: element_path(message),
            message: err.error().to_string(),
            debug: err.debug().map(|d| d.to_string()),
            hint,
        }),
        MessageView::Warning(warning) => {
            log::warn!(target: "sealcheck::capture",
                source = shared.origin.as_str(), element = element_path(message).as_str(),
                debug = warning.debug().map(|d| d.to_string()).unwrap_or_default().as_str();
                "GStreamer warning: {}", warning.error());
            BusEvent::Other
        }
        MessageView::AsyncDone(..) if from_pipeline => BusEvent::AsyncDone,
        MessageView::StateChanged(change) if from_pipeline => {
            shared.set_streaming(change.current() == gst::State::Playing);
            BusEvent::Other
        }
        // A live source joined or left: latency must be computed again.
        MessageView::Latency(..) => {
            let _ = pipeline.recalculate_latency();
            BusEvent::Other
        }
        // The clock went away (e.g. an RTSP source was removed): select a new one.
        MessageView::ClockLost(..) => {
            let _ = pipeline.set_state(gst::State::Paused);
            let _ = pipeline.set_state(gst::State::Playing);
            BusEvent::Other
        }
        _ => BusEvent::Other,
    }
}

/// The element that posted a message, as a pipeline path.
fn element_path(message: &gst::Message) -> String {
    message.src().map_or_else(
        || "(unknown)".to_string(),
        |src| src.path_string().to_string(),
    )
}

/// The first error among the messages already on the bus. A source that fails
/// posts its error and then pushes EOS downstream, so when the appsink sees EOS
/// the error is already queued: it, not the EOS, says how the stream ended.
pub(crate) fn queued_error(
    bus: &gst::Bus,
    pipeline: &gst::Pipeline,
    shared: &CaptureShared,
    hint: &'static str,
) -> Option<CaptureError> {
    while let Some(message) = bus.timed_pop(gst::ClockTime::ZERO) {
        if let BusEvent::Error(error) = handle(&message, pipeline, shared, hint) {
            return Some(error);
        }
    }
    None
}

/// Makes the capture thread look at its flags now.
pub(crate) fn wake(bus: &gst::Bus) {
    let _ = bus.post(gst::message::Application::new(gst::Structure::new_empty(
        WAKE,
    )));
}

/// How watching one pipeline ended.
pub(crate) enum Watched {
    /// The stream ended: EOS, an error, or a stop or shutdown request.
    End(EndOfStream),
    /// No frame came for `waited` although the pipeline reported neither an
    /// error nor end-of-stream: the source is frozen.
    Frozen { waited: Duration },
}

/// The capture thread's watch over one pipeline: returns when the stream ends
/// or, with a `frame_timeout`, when no frame came for that long (frozen). The
/// caller pushes `End` or rebuilds. `saw_eos` is set when EOS was already seen
/// during start.
pub(crate) fn watch(
    pipeline: &gst::Pipeline,
    bus: &gst::Bus,
    shared: &CaptureShared,
    hint: &'static str,
    saw_eos: bool,
    frame_timeout: Option<&dyn Fn() -> Duration>,
) -> Watched {
    let started = Instant::now();
    let mut stop_deadline: Option<Instant> = None;
    let mut eos = saw_eos;
    loop {
        if eos || shared.sink_eos.load(Ordering::Acquire) {
            if let Some(error) = queued_error(bus, pipeline, shared, hint) {
                return Watched::End(EndOfStream::Error(error));
            }
            return Watched::End(if shared.stop_requested.load(Ordering::Acquire) {
                EndOfStream::Stopped
            } else {
                EndOfStream::Finished
            });
        }
        if shared.shutdown_requested.load(Ordering::Acquire) {
            return Watched::End(EndOfStream::Stopped);
        }
        if stop_deadline.is_none() && shared.stop_requested.load(Ordering::Acquire) {
            stop_deadline = Some(Instant::now() + STOP_TIMEOUT);
            send_eos_off_thread(pipeline, shared);
        }
        shared.flush_pending_drops();
        shared.liveness.capture_heartbeat();
        let now = Instant::now();
        let mut wait = BUS_POLL;
        if let Some(deadline) = stop_deadline {
            if now >= deadline {
                log::warn!(target: "sealcheck::capture", source = shared.origin.as_str(), waited_ms = STOP_TIMEOUT.as_millis() as u64;
                    "the source did not finish within the stop timeout after end-of-stream was sent; shutting it down");
                return Watched::End(EndOfStream::Stopped);
            }
            wait = wait.min(deadline - now);
        } else if let Some(frame_timeout) = frame_timeout {
            // Quiet since the last frame of this pipeline, or since it started.
            let last = shared
                .last_frame_at()
                .filter(|t| *t >= started)
                .unwrap_or(started);
            let limit = frame_timeout();
            let quiet = now.saturating_duration_since(last);
            if quiet >= limit {
                return Watched::Frozen { waited: quiet };
            }
            wait = wait.min(limit - quiet + Duration::from_millis(1));
        }
        let Some(message) = bus.timed_pop(gst::ClockTime::from_nseconds(wait.as_nanos() as u64))
        else {
            continue;
        };
        match handle(&message, pipeline, shared, hint) {
            BusEvent::Eos => eos = true,
            BusEvent::Error(e) => return Watched::End(EndOfStream::Error(e)),
            BusEvent::AsyncDone | BusEvent::Other => {}
        }
    }
}

/// Sends end-of-stream to the sources from a thread of its own: a base source
/// takes its live lock to accept the event, and a source blocked in a read
/// holds that lock, so the send would block the capture thread with it. The
/// stop timeout bounds the wait either way; a send that never returns leaves
/// its thread behind, as an abandoned pipeline does.
fn send_eos_off_thread(pipeline: &gst::Pipeline, shared: &CaptureShared) {
    let (pipeline_for_thread, origin) = (pipeline.clone(), shared.origin.clone());
    let spawned = std::thread::Builder::new()
        .name("capture-eos".into())
        .spawn(move || {
            if !send_eos_to_sources(&pipeline_for_thread) {
                log::warn!(target: "sealcheck::capture", source = origin.as_str(); "no source element took the end-of-stream event; the stop timeout will end capture");
            }
        });
    if spawned.is_err() && !send_eos_to_sources(pipeline) {
        log::warn!(target: "sealcheck::capture", source = shared.origin.as_str(); "no source element took the end-of-stream event; the stop timeout will end capture");
    }
}

/// Sends end-of-stream to the pipeline's source elements. Sent to each source
/// rather than to the pipeline, whose `send_event` takes the pipeline's state
/// lock and so waits for any state change in progress.
/// False when no element took it.
fn send_eos_to_sources(pipeline: &gst::Pipeline) -> bool {
    let mut sent = false;
    let mut sources = pipeline.iterate_sources();
    loop {
        match sources.next() {
            Ok(Some(source)) => sent |= source.send_event(gst::event::Eos::new()),
            Ok(None) => break,
            // The pipeline changed while iterating: start over.
            Err(gst::IteratorError::Resync) => sources.resync(),
            Err(gst::IteratorError::Error) => break,
        }
    }
    sent || pipeline.send_event(gst::event::Eos::new())
}

/// Stops the pipeline and pushes `End`. After an error or a forced stop the
/// streaming thread may be waiting for a slot: it is woken first; an element
/// blocked elsewhere (in a read, in a driver) cannot hold the end up for more
/// than `teardown::TEARDOWN_LIMIT`: the pipeline is abandoned.
pub(crate) fn finish(pipeline: &gst::Pipeline, shared: &Arc<CaptureShared>, end: EndOfStream) {
    let _ = teardown::stop_pipeline(pipeline, shared, "the stream is ending");
    // Stopped or abandoned, nobody may touch it again.
    if shared.pipeline().is_some_and(|p| &p == pipeline) {
        shared.set_pipeline(None);
    }
    shared.end(end);
}
