//! A running camera source: `Capture` starts its pipeline, hands it to the
//! capture thread (which watches the bus, or rebuilds a live source through
//! `recover`), and stops or shuts it down.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;

use super::bus;
use super::error::{CaptureError, EndOfStream};
use super::genicam::{CameraSettingsHandle, GenicamCounters, GenicamLink, SoftwareTrigger};
use super::launch;
use super::open::{self, START_POLL, join_feeder};
use super::recover;
use super::rings::RingProducer;
use super::state::{CaptureProbe, CaptureShared};
use super::status::SourceStatus;
use crate::config::{SourceConfig, SourceKind};
use crate::service::Liveness;

/// Longest a shutdown waits for the capture thread: a teardown it is in
/// takes at most `teardown::TEARDOWN_LIMIT`. Shorter than the stop guard's
/// grace (`service::STOP_GRACE`), so a stop ends by its own path.
const CAPTURE_JOIN_LIMIT: Duration = Duration::from_millis(2500);

/// A running source. Frames go into the ring given to `start`; the stream ends
/// with exactly one `End` event. Dropping it shuts the source down.
///
/// A live source (camera, RTSP, or a `[source] pipeline` marked `live`) that is
/// lost (error, end-of-stream, or no frame for `frame_timeout_ms`) is rebuilt
/// by the capture thread (`recover`), for as long as it takes; so is one that is
/// missing at start. Only a stop or a problem no retry fixes ends its stream.
pub struct Capture {
    /// Capture's state, as any thread reads it; `probe()` lends it, so the
    /// accessors (`frames_delivered`, `is_streaming`, ...) are written once.
    probe: CaptureProbe,
    thread: Option<JoinHandle<()>>,
    /// The image-sequence source's decoding thread.
    feeder: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("source", &self.probe.shared.origin)
            .field("frames_delivered", &self.probe.frames_delivered())
            .field("streaming", &self.probe.is_streaming())
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
        if let SourceKind::Genicam(genicam) = &source.kind {
            shared.genicam = Some(GenicamLink::new(shared.origin.clone(), genicam.trigger));
        }
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
        let mut first = match open::open_pipeline(source, shared, true) {
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

    /// Capture's state: frames delivered, streaming, last frame, ended, failed.
    pub fn probe(&self) -> &CaptureProbe {
        &self.probe
    }

    /// A cloneable view of capture's state for another thread (the watchdog).
    pub fn health_probe(&self) -> CaptureProbe {
        self.probe.clone()
    }

    /// The software trigger of a `kind = "genicam"` camera with
    /// `trigger = "software"`; `None` for every other source. See
    /// `capture::genicam` for how to use it.
    pub fn software_trigger(&self) -> Option<SoftwareTrigger> {
        self.probe
            .shared
            .genicam
            .as_ref()
            .and_then(|link| SoftwareTrigger::new(Arc::clone(link)))
    }

    /// A `kind = "genicam"` camera's exposure and gain, set at run time (a
    /// recipe switch); `None` for other sources.
    pub fn camera_settings(&self) -> Option<CameraSettingsHandle> {
        self.probe
            .shared
            .genicam
            .as_ref()
            .map(|link| CameraSettingsHandle::new(Arc::clone(link)))
    }

    /// A `kind = "genicam"` camera's frame counts; `None` for other sources.
    pub fn genicam_counters(&self) -> Option<GenicamCounters> {
        self.probe
            .shared
            .genicam
            .as_ref()
            .map(|link| GenicamCounters::new(Arc::clone(link)))
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
