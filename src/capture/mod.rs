//! Capture: a GStreamer source into the frame ring.
//!
//! ```text
//! {source per [source] kind} - ... - {videoconvert} - {video/x-raw,format=RGB} - {appsink "sink"}
//!                                                                                   │ new-sample (streaming thread)
//!                                                                                   ▼
//!                     FrameSink: seq, capture time, slot (overflow policy), row copy ──▶ ring::RingProducer
//! bus ──▶ capture thread: PLAYING → streaming; EOS → End(Finished|Stopped); error → End(Error); then NULL
//!         live source:    error, EOS or frozen → NULL, wait (backoff), rebuild (`recover`); stop → End(Stopped)
//! ```
//!
//! `launch` turns `[source]` into a pipeline, `frame_sink` is the appsink
//! callback, `bus` watches the pipeline, `recover` rebuilds a lost live source,
//! `status` says whether it is up, `decode` reads single image files for
//! `sealcheck inspect`. `Capture::start` returns only once the source has shown
//! it works (prerolled, first frame, or a short grace for live sources), so a
//! missing file fails the start with a clear error, not a late `End`; a missing
//! camera is waited for (`recover`).

mod bus;
mod decode;
mod error;
mod frame_sink;
mod image_feeder;
mod launch;
mod recover;
mod replay;
mod rgb_plane;
mod state;
mod status;
mod teardown;

pub use decode::decode_image_file;
pub use error::{CaptureError, EndOfStream};
pub use replay::{Replay, load_frames};
pub use state::CaptureProbe;
pub use status::{OutageEnded, SourceStatus};

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use crate::config::SourceConfig;
use crate::ring;
use crate::service::Liveness;
use bus::BusEvent;
use frame_sink::FrameSink;
use state::CaptureShared;

/// What capture hands to preprocessing through the frame ring, in capture order.
pub type CaptureEvent = ring::RingEvent<EndOfStream>;
/// Capture's end of the frame ring (`ring::frame_ring` makes the pair).
pub type RingProducer = ring::RingProducer<EndOfStream>;
/// The reading end of one camera's frame ring.
pub type RingConsumer = ring::RingConsumer<EndOfStream>;
/// The reading end of every camera's ring: preprocessing, or the device stage.
pub type CameraRings = ring::RingSet<EndOfStream>;

/// Longest a stored source (file, images, test) may take to preroll at start.
const PREROLL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long start watches a live source (camera, RTSP, or a user pipeline that
/// does not preroll) for an early error before handing over to the capture thread.
const LIVE_START_GRACE: Duration = Duration::from_secs(2);
/// Bus polling slice while start waits (it also watches for the first frame).
const START_POLL: Duration = Duration::from_millis(20);
/// Longest a shutdown waits for the capture thread: a teardown it is in
/// takes at most `teardown::TEARDOWN_LIMIT`. Shorter than the stop guard's
/// grace (`service::STOP_GRACE`), so a stop ends by its own path.
const CAPTURE_JOIN_LIMIT: Duration = Duration::from_millis(2500);

/// Initialises GStreamer once per process.
pub(crate) fn init() -> Result<(), CaptureError> {
    gst::init().map_err(|e| CaptureError::Init {
        message: e.to_string(),
    })
}

/// The GStreamer library version in use, e.g. "GStreamer 1.22.0", for `--version`.
pub fn gstreamer_version() -> String {
    gst::version_string().to_string()
}

/// A running source. Frames go into the ring given to `start`; the stream ends
/// with exactly one `End` event. Dropping it shuts the source down.
///
/// A live source (camera, RTSP, or a `[source] pipeline` marked `live`) that is
/// lost (error, end-of-stream, or no frame for `frame_timeout_ms`) is rebuilt
/// by the capture thread (`recover`), for as long as it takes; so is one that is
/// missing at start. Only a stop or a problem no retry fixes ends its stream.
pub struct Capture {
    /// Capture's state, as any thread reads it; `Capture` derefs to it, so
    /// the accessors (`frames_delivered`, `is_streaming`, ...) are written once.
    probe: CaptureProbe,
    thread: Option<JoinHandle<()>>,
    /// The image-sequence source's decoding thread.
    feeder: Option<JoinHandle<()>>,
}

/// One started pipeline, handed to the capture thread.
pub(crate) struct Running {
    pub(crate) pipeline: gst::Pipeline,
    pub(crate) bus: gst::Bus,
    pub(crate) saw_eos: bool,
    feeder: Option<JoinHandle<()>>,
}

impl std::ops::Deref for Capture {
    type Target = CaptureProbe;

    fn deref(&self) -> &CaptureProbe {
        &self.probe
    }
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("source", &self.probe.shared.origin)
            .field("frames_delivered", &self.frames_delivered())
            .field("streaming", &self.is_streaming())
            .field("source_up", &self.probe.shared.status.is_up())
            .field("ended", &self.probe.shared.has_ended())
            .finish()
    }
}

impl Capture {
    /// Builds the pipeline for `source`, sets it PLAYING and waits until it has
    /// shown it works. Marks `liveness` for every delivered frame and with the
    /// source's state. On error the ring gets `End(Error)` too and the error
    /// says which source failed and what to check. A live source that cannot be
    /// opened or reached is not an error: capture starts, says so once, and
    /// keeps trying (`source_status` tells).
    pub fn start(
        source: &SourceConfig,
        producer: RingProducer,
        liveness: Liveness,
    ) -> Result<Capture, CaptureError> {
        Self::start_camera(None, source, producer, liveness)
    }

    /// As `start`, for camera `camera` of several (`[cameras.NAME]`): every
    /// log line and error of its capture names it first
    /// (`source="camera side: rtsp://…"`).
    pub fn start_camera(
        camera: Option<&str>,
        source: &SourceConfig,
        producer: RingProducer,
        liveness: Liveness,
    ) -> Result<Capture, CaptureError> {
        let described = launch::describe(&source.kind);
        let origin = match camera {
            Some(name) => format!("camera {name}: {described}"),
            None => described,
        };
        let mut shared = CaptureShared::new(
            origin,
            source.overflow,
            source.pool_size,
            source.kind.is_live(),
            producer,
            liveness,
        );
        shared.liveness.set_source_name(&shared.origin);
        if source.kind.is_live() {
            shared.recovery = Some(source.recovery);
            shared.liveness.set_source_managed(true);
        }
        let shared = Arc::new(shared);
        match Self::start_capture(source, &shared) {
            Ok(capture) => Ok(capture),
            Err(e) => {
                shared.end(EndOfStream::Error(e.clone()));
                Err(e)
            }
        }
    }

    fn start_capture(
        source: &SourceConfig,
        shared: &Arc<CaptureShared>,
    ) -> Result<Capture, CaptureError> {
        let mut first = match open_pipeline(source, shared, true) {
            Ok(running) => Some(running),
            Err(e) if shared.recovery.is_some() && recover::may_recover(&e) => {
                recover::source_lost(shared, &e.to_string(), false, true);
                None
            }
            Err(e) => return Err(e),
        };
        let feeder = first.as_mut().and_then(|running| running.feeder.take());
        shared.set_pipeline(first.as_ref().map(|running| running.pipeline.clone()));
        let thread = {
            let (shared, source) = (Arc::clone(shared), source.clone());
            std::thread::Builder::new()
                .name("capture".into())
                .spawn(move || match (shared.recovery, first) {
                    (Some(_), first) => recover::run(shared, source, first),
                    (None, Some(running)) => {
                        let hint = launch::hint(&source.kind);
                        let end = match bus::watch(
                            &running.pipeline,
                            &running.bus,
                            &shared,
                            hint,
                            running.saw_eos,
                            None,
                        ) {
                            bus::Watched::End(end) => end,
                            bus::Watched::Frozen { .. } => EndOfStream::Stopped,
                        };
                        bus::finish(&running.pipeline, &shared, end);
                    }
                    (None, None) => shared.end(EndOfStream::Stopped),
                })
        };
        match thread {
            Ok(thread) => Ok(Capture {
                probe: CaptureProbe {
                    shared: Arc::clone(shared),
                },
                thread: Some(thread),
                feeder,
            }),
            Err(e) => {
                shared.abort_waits();
                if let Some(pipeline) = shared.pipeline() {
                    let _ = pipeline.set_state(gst::State::Null);
                }
                shared.set_pipeline(None);
                join_feeder(feeder, shared);
                Err(CaptureError::Thread {
                    origin: shared.origin.clone(),
                    reason: e.to_string(),
                })
            }
        }
    }

    /// Asks the source to finish: end-of-stream is sent to the source, so frames
    /// already in the pipeline still arrive; then the ring gets `End(Stopped)`.
    /// If EOS does not come out within a few seconds the pipeline is shut down.
    /// Returns at once: the capture thread sends the event, because sending it
    /// can wait for a state change that itself waits for the consumer (a
    /// consumer calling `stop` must not deadlock with a streaming thread that
    /// waits for a free slot). During an outage the stream ends at once.
    pub fn stop(&self) {
        if self
            .probe
            .shared
            .stop_requested
            .swap(true, Ordering::AcqRel)
        {
            return;
        }
        log::info!(target: "sealcheck::capture", source = self.probe.shared.origin.as_str(); "stopping capture: sending end-of-stream to the source");
        self.wake();
    }

    /// Ends capture now (no waiting for frames in the pipeline): `End(Stopped)`
    /// unless the stream already ended, pipeline to NULL, capture thread joined.
    pub fn shutdown(mut self) {
        self.shut_down();
    }

    fn wake(&self) {
        if let Some(bus) = self.probe.shared.pipeline().and_then(|p| p.bus()) {
            bus::wake(&bus);
        }
    }

    fn shut_down(&mut self) {
        self.probe
            .shared
            .shutdown_requested
            .store(true, Ordering::Release);
        self.probe.shared.abort_waits();
        self.wake();
        let joined = self
            .thread
            .take()
            .is_none_or(|thread| self.join_capture_thread(thread));
        // Also covers a capture thread that died before finishing. One left
        // behind may be using the pipeline: it is not touched again here.
        match self.probe.shared.pipeline() {
            Some(pipeline) if joined => {
                bus::finish(&pipeline, &self.probe.shared, EndOfStream::Stopped)
            }
            _ => self.probe.shared.end(EndOfStream::Stopped),
        }
        // The pipeline's callbacks hold `shared`: let go of it so both are freed.
        self.probe.shared.set_pipeline(None);
        // The pipeline is NULL: a push the feeder is blocked in returns now.
        join_feeder(self.feeder.take(), &self.probe.shared);
    }

    /// Joins the capture thread, or leaves it behind when it does not end in
    /// `CAPTURE_JOIN_LIMIT` (it is inside GStreamer and GStreamer does not come
    /// back): a shutdown never waits on the camera for longer than that.
    /// True when it was joined.
    fn join_capture_thread(&self, thread: JoinHandle<()>) -> bool {
        let until = Instant::now() + CAPTURE_JOIN_LIMIT;
        while !thread.is_finished() && Instant::now() < until {
            std::thread::sleep(START_POLL);
        }
        if !thread.is_finished() {
            log::error!(target: "sealcheck::capture", source = self.probe.shared.origin.as_str(), waited_ms = CAPTURE_JOIN_LIMIT.as_millis() as u64;
                "the capture thread did not end within {:.0} s of the shutdown (blocked inside GStreamer); it is left behind",
                CAPTURE_JOIN_LIMIT.as_secs_f64());
            return false;
        }
        if thread.join().is_err() {
            log::error!(target: "sealcheck::capture", source = self.probe.shared.origin.as_str(); "the capture thread panicked");
        }
        true
    }

    /// A cloneable view of capture's state for another thread (the watchdog).
    pub fn health_probe(&self) -> CaptureProbe {
        self.probe.clone()
    }

    /// Up or lost, outages and tries (for STATUS=, metrics, the status page).
    pub fn source_status(&self) -> SourceStatus {
        self.probe.shared.status.clone()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Builds the pipeline for `source`, sets it PLAYING and waits until it has
/// shown it works; `first` is false on a rebuild (logged at debug only, so an
/// outage is logged once, not once per try).
pub(crate) fn open_pipeline(
    source: &SourceConfig,
    shared: &Arc<CaptureShared>,
    first: bool,
) -> Result<Running, CaptureError> {
    init()?;
    let kind = &source.kind;
    let hint = launch::hint(kind);
    let (pipeline, appsink) = launch::create_pipeline(kind, &shared.origin)?;
    let bus = pipeline
        .bus()
        .ok_or_else(|| start_error(kind, &shared.origin, "the pipeline has no bus".into()))?;
    let mut sink = FrameSink::new(Arc::clone(shared));
    let eos = {
        let (shared, bus) = (Arc::clone(shared), bus.clone());
        let generation = shared.generation();
        move |_: &gst_app::AppSink| {
            // An abandoned pipeline's late EOS is not the next pipeline's.
            if shared.is_current(generation) {
                shared.sink_eos.store(true, Ordering::Release);
                bus::wake(&bus);
            }
        }
    };
    appsink.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |appsink| sink.on_new_sample(appsink))
            .eos(eos)
            .build(),
    );
    if first {
        log::info!(target: "sealcheck::capture", source = shared.origin.as_str(), overflow = format!("{:?}", source.overflow).as_str(), pool_size = source.pool_size; "starting capture");
    }

    let started = match pipeline.set_state(gst::State::Playing) {
        Ok(success) => success,
        Err(_) => {
            let reason =
                first_error(&bus).unwrap_or_else(|| "the pipeline refused to start".to_string());
            let _ = pipeline.set_state(gst::State::Null);
            return Err(start_error(kind, &shared.origin, reason));
        }
    };
    let feeder = match Capture::start_feeder(source, &pipeline, shared) {
        Ok(feeder) => feeder,
        Err(e) => {
            let _ = pipeline.set_state(gst::State::Null);
            return Err(e);
        }
    };
    // A live pipeline does not preroll; give it a short grace to fail or deliver.
    if started == gst::StateChangeSuccess::NoPreroll {
        shared.set_live();
    }
    let live = shared.is_live();
    let saw_eos = match wait_until_running(&pipeline, &bus, shared, hint, live) {
        Ok(saw_eos) => saw_eos,
        Err(reason) => {
            let _ = teardown::stop_pipeline(&pipeline, shared, "it failed to start");
            join_feeder(feeder, shared);
            if shared.recovery.is_some() {
                shared.ready_for_rebuild();
            }
            return Err(start_error(kind, &shared.origin, reason));
        }
    };
    Ok(Running {
        pipeline,
        bus,
        saw_eos,
        feeder,
    })
}

impl Capture {
    /// An image sequence's files are decoded one by one by `image_feeder`,
    /// which needs the pipeline out of NULL before it pushes.
    fn start_feeder(
        source: &SourceConfig,
        pipeline: &gst::Pipeline,
        shared: &Arc<CaptureShared>,
    ) -> Result<Option<JoinHandle<()>>, CaptureError> {
        let crate::config::SourceKind::Images {
            location,
            framerate,
        } = &source.kind
        else {
            return Ok(None);
        };
        let appsrc = pipeline
            .by_name("src")
            .and_then(|src| src.downcast::<gst_app::AppSrc>().ok())
            .ok_or_else(|| CaptureError::Launch {
                origin: shared.origin.clone(),
                message: "the image-sequence pipeline has no appsrc named src".to_string(),
                hint: launch::hint(&source.kind),
            })?;
        image_feeder::spawn(appsrc, location.clone(), *framerate, Arc::clone(shared)).map(Some)
    }
}

/// Waits for the image feeder to end; call it with the pipeline in NULL, where
/// every push fails at once (a decode in progress still finishes first).
fn join_feeder(feeder: Option<JoinHandle<()>>, shared: &CaptureShared) {
    if let Some(feeder) = feeder
        && feeder.join().is_err()
    {
        log::error!(target: "sealcheck::capture", source = shared.origin.as_str(); "the image feeder thread panicked");
    }
}

/// Waits until the pipeline works: prerolled or first frame (stored sources,
/// up to `PREROLL_TIMEOUT`), or no error within `LIVE_START_GRACE` (live). Returns
/// whether EOS was already seen; `Err` with GStreamer's reason on an error.
fn wait_until_running(
    pipeline: &gst::Pipeline,
    bus: &gst::Bus,
    shared: &CaptureShared,
    hint: &'static str,
    live: bool,
) -> Result<bool, String> {
    let started = Instant::now();
    let limit = if live {
        LIVE_START_GRACE
    } else {
        PREROLL_TIMEOUT
    };
    loop {
        shared.liveness.capture_heartbeat();
        if shared.sink_eos.load(Ordering::Acquire) {
            return match bus::queued_error(bus, pipeline, shared, hint) {
                Some(error) => Err(start_reason(error)),
                None => Ok(true),
            };
        }
        if shared.frames_delivered() > 0 {
            return Ok(false);
        }
        let elapsed = started.elapsed();
        if elapsed >= limit {
            if !live {
                log::warn!(target: "sealcheck::capture", source = shared.origin.as_str(), waited_s = limit.as_secs_f64();
                    "the source has not prerolled yet; continuing to wait for frames");
            }
            return Ok(false);
        }
        let slice = START_POLL.min(limit - elapsed);
        let Some(message) = bus.timed_pop(gst::ClockTime::from_nseconds(slice.as_nanos() as u64))
        else {
            continue;
        };
        match bus::handle(&message, pipeline, shared, hint) {
            BusEvent::Eos => return Ok(true),
            BusEvent::AsyncDone if !live => return Ok(false),
            BusEvent::Error(error) => return Err(start_reason(error)),
            BusEvent::AsyncDone | BusEvent::Other => {}
        }
    }
}

/// A bus error as the reason a start failed.
fn start_reason(error: CaptureError) -> String {
    match error {
        CaptureError::Bus {
            element,
            message,
            debug,
            ..
        } => bus_reason(&element, &message, debug.as_deref()),
        other => other.to_string(),
    }
}

/// The first error already posted on the bus, as a reason.
fn first_error(bus: &gst::Bus) -> Option<String> {
    let message = bus.timed_pop_filtered(
        gst::ClockTime::from_mseconds(100),
        &[gst::MessageType::Error],
    )?;
    match message.view() {
        gst::MessageView::Error(err) => {
            let element = message
                .src()
                .map_or_else(|| "(unknown)".to_string(), |s| s.path_string().to_string());
            Some(bus_reason(
                &element,
                &err.error().to_string(),
                err.debug().as_deref(),
            ))
        }
        _ => None,
    }
}

fn bus_reason(element: &str, message: &str, debug: Option<&str>) -> String {
    match debug {
        Some(debug) if !debug.is_empty() => format!("{message} (from {element}; {debug})"),
        _ => format!("{message} (from {element})"),
    }
}

fn start_error(kind: &crate::config::SourceKind, origin: &str, reason: String) -> CaptureError {
    CaptureError::Start {
        origin: origin.to_string(),
        verb: launch::start_verb(kind),
        reason,
        hint: launch::hint(kind),
    }
}
