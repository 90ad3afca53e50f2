//! Opening one pipeline: built from `[source]`, set PLAYING and watched
//! until it has shown it works (prerolled, a first frame, or a live
//! source's grace), with GStreamer's reason when it does not.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use super::bus::{self, BusEvent};
use super::error::CaptureError;
use super::frame_sink::FrameSink;
use super::genicam;
use super::image_feeder;
use super::launch;
use super::library::init;
use super::state::CaptureShared;
use super::teardown;
use crate::config::{GenicamSource, SourceConfig, SourceKind};

/// Longest a stored source (file, images, test) may take to preroll at start.
const PREROLL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long start watches a live source (camera, RTSP, or a user pipeline that
/// does not preroll) for an early error before handing over to the capture thread.
const LIVE_START_GRACE: Duration = Duration::from_secs(2);
/// Bus polling slice while start waits (it also watches for the first frame).
pub(super) const START_POLL: Duration = Duration::from_millis(20);

/// One started pipeline, handed to the capture thread.
pub(crate) struct Running {
    pub(crate) pipeline: gst::Pipeline,
    pub(crate) bus: gst::Bus,
    pub(crate) saw_eos: bool,
    pub(crate) feeder: Option<JoinHandle<()>>,
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
    if matches!(kind, SourceKind::Genicam(_)) {
        genicam::available().map_err(|reason| CaptureError::Aravis {
            origin: shared.origin.clone(),
            reason,
        })?;
    }
    let (pipeline, appsink) = launch::create_pipeline(kind, &shared.origin)?;
    let bus = pipeline
        .bus()
        .ok_or_else(|| start_error(kind, &shared.origin, "the pipeline has no bus".into()))?;
    if let SourceKind::Genicam(config) = kind
        && let Err(e) = set_up_camera(config, &pipeline, &bus, shared)
    {
        let _ = pipeline.set_state(gst::State::Null);
        return Err(e);
    }
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
    let feeder = match start_feeder(source, &pipeline, shared) {
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

/// `aravissrc` opened the camera when its name was set: check and apply the
/// config (a refusal names the feature), keep the camera for the software
/// trigger and count its frames. No camera: the element's reason, as a start
/// error (a live source waits for it).
fn set_up_camera(
    config: &GenicamSource,
    pipeline: &gst::Pipeline,
    bus: &gst::Bus,
    shared: &Arc<CaptureShared>,
) -> Result<(), CaptureError> {
    let kind = SourceKind::Genicam(config.clone());
    let src = pipeline.by_name("src").ok_or_else(|| {
        start_error(
            &kind,
            &shared.origin,
            "the pipeline has no aravissrc".into(),
        )
    })?;
    let Some(camera) = genicam::Camera::of_element(&src) else {
        let reason = first_error(bus).unwrap_or_else(|| "Aravis found no such camera".to_string());
        return Err(start_error(&kind, &shared.origin, reason));
    };
    let camera = genicam::prepare(config, pipeline, camera, &shared.origin)?;
    if let Some(link) = &shared.genicam {
        link.check_socket_buffer(&camera);
        link.reapply_settings(&camera);
        link.set_camera(Some(camera));
        link.watch(&src);
    }
    Ok(())
}

/// An image sequence's files are decoded one by one by `image_feeder`,
/// which needs the pipeline out of NULL before it pushes.
fn start_feeder(
    source: &SourceConfig,
    pipeline: &gst::Pipeline,
    shared: &Arc<CaptureShared>,
) -> Result<Option<JoinHandle<()>>, CaptureError> {
    let SourceKind::Images {
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

/// Waits for the image feeder to end; call it with the pipeline in NULL, where
/// every push fails at once (a decode in progress still finishes first).
pub(super) fn join_feeder(feeder: Option<JoinHandle<()>>, shared: &CaptureShared) {
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

fn start_error(kind: &SourceKind, origin: &str, reason: String) -> CaptureError {
    CaptureError::Start {
        origin: origin.to_string(),
        verb: launch::start_verb(kind),
        reason,
        hint: launch::hint(kind),
    }
}
