//! Every camera's source of a run: one GStreamer capture (or replay) and
//! one ring per camera, each with its own thread, drop policy and recovery.
//! The ring set (`ring::RingSet`) is where their frames meet.

use std::sync::Arc;

use crate::capture::{Capture, GenicamCounters, Replay, RingProducer, SourceStatus};
use crate::config::Config;
use crate::service::Liveness;
use crate::status::CameraSource;

use super::context::SourcePlan;
use super::error::PipelineError;
use super::summary::SourceOutages;

/// The running source of one camera: a GStreamer capture or a replay from memory.
enum FrameSource {
    Capture(Capture),
    Replay(Replay),
}

/// One camera's running source and what names it.
struct CameraFeed {
    name: Option<String>,
    kind: &'static str,
    /// Sends a frame only when triggered (`SourceKind::is_triggered`).
    triggered: bool,
    source: FrameSource,
}

/// Every camera's running source, by `FrameMeta::camera`.
pub(super) struct StationSources {
    cameras: Vec<CameraFeed>,
}

impl StationSources {
    /// Starts camera `i`'s source on `producers[i]`. The first camera's
    /// capture reports its source to `liveness`; the others report to a
    /// record of their own (`Liveness::for_another_camera`). The watchdog
    /// judges every camera's record for a source stuck beyond rebuilding.
    pub(super) fn start(
        config: &Config,
        plan: &SourcePlan,
        measure_from_seq: u64,
        producers: Vec<RingProducer>,
        liveness: &Liveness,
    ) -> Result<StationSources, PipelineError> {
        let mut cameras = Vec::with_capacity(producers.len());
        for (index, (camera, producer)) in config.cameras.iter().zip(producers).enumerate() {
            let liveness = if index == 0 {
                liveness.clone()
            } else {
                liveness.for_another_camera()
            };
            let source = match plan {
                SourcePlan::Configured => {
                    match Capture::start_camera(
                        camera.name.as_deref(),
                        &camera.source,
                        producer,
                        liveness,
                    ) {
                        Ok(capture) => FrameSource::Capture(capture),
                        Err(error) => {
                            // Those already running stop before the error is told.
                            StationSources { cameras }.shutdown();
                            return Err(PipelineError::Capture(error));
                        }
                    }
                }
                SourcePlan::Replay {
                    frames,
                    count,
                    rate,
                    offer_lateness,
                } => FrameSource::Replay(
                    Replay::start(
                        Arc::clone(frames),
                        (*count, measure_from_seq, config.cameras.len() as u64),
                        rate.map(|rate| (rate, Arc::clone(offer_lateness))),
                        producer,
                        liveness,
                    )
                    .map_err(|e| PipelineError::Spawn("replay", e))?,
                ),
            };
            cameras.push(CameraFeed {
                name: camera.name.clone(),
                kind: camera.source.kind.name(),
                triggered: camera.source.kind.is_triggered(),
                source,
            });
        }
        Ok(StationSources { cameras })
    }

    /// Asks every source to stop; their ends reach the ring set.
    pub(super) fn stop(&self) {
        for camera in &self.cameras {
            match &camera.source {
                FrameSource::Capture(c) => c.stop(),
                FrameSource::Replay(r) => r.stop(),
            }
        }
    }

    /// Frames delivered by all cameras together.
    pub(super) fn frames_delivered(&self) -> u64 {
        self.cameras
            .iter()
            .map(|camera| match &camera.source {
                FrameSource::Capture(c) => c.probe().frames_delivered(),
                FrameSource::Replay(r) => r.frames_delivered(),
            })
            .sum()
    }

    /// Up or lost, outages and tries of a live source; `None` for a replay.
    fn status(camera: &CameraFeed) -> Option<SourceStatus> {
        match &camera.source {
            FrameSource::Capture(c) => Some(c.source_status()),
            FrameSource::Replay(_) => None,
        }
    }

    /// The first camera's source status (the only one with `[source]`).
    pub(super) fn first_status(&self) -> Option<SourceStatus> {
        self.cameras.first().and_then(Self::status)
    }

    /// A GenICam camera's frame counts; `None` for every other source.
    fn genicam(camera: &CameraFeed) -> Option<GenicamCounters> {
        match &camera.source {
            FrameSource::Capture(c) => c.genicam_counters(),
            FrameSource::Replay(_) => None,
        }
    }

    /// Each camera's source, for the status page and `/metrics`.
    pub(super) fn camera_sources(&self) -> Vec<CameraSource> {
        self.cameras
            .iter()
            .map(|camera| CameraSource {
                name: camera.name.clone(),
                kind: camera.kind,
                status: Self::status(camera),
                genicam: Self::genicam(camera),
            })
            .collect()
    }

    /// Each GenICam camera's frame counts with its name, in camera order.
    pub(super) fn genicam_counters(&self) -> Vec<(Option<String>, GenicamCounters)> {
        self.cameras
            .iter()
            .filter_map(|camera| Some((camera.name.clone(), Self::genicam(camera)?)))
            .collect()
    }

    /// Every camera's losses, recoveries and failed reopen tries.
    pub(super) fn outages(&self) -> SourceOutages {
        let mut all = SourceOutages::default();
        for s in self.cameras.iter().filter_map(Self::status) {
            all.lost += s.outages();
            all.recovered += s.recoveries();
            all.failed_tries += s.failed_tries();
        }
        all
    }

    /// STATUS='s words for cameras that are lost ("" when none is).
    pub(super) fn describe_outages(statuses: &[(Option<String>, SourceStatus)]) -> String {
        let mut line = String::new();
        for (name, status) in statuses {
            if let Some(outage) = status.describe_outage() {
                if let Some(name) = name {
                    line.push_str("camera ");
                    line.push_str(name);
                    line.push_str(": ");
                }
                line.push_str(&outage);
                line.push_str("; ");
            }
        }
        line
    }

    /// Named statuses of the live sources, for the watchdog's STATUS= text.
    pub(super) fn named_statuses(&self) -> Vec<(Option<String>, SourceStatus)> {
        self.cameras
            .iter()
            .filter_map(|camera| Self::status(camera).map(|s| (camera.name.clone(), s)))
            .collect()
    }

    /// A probe for the watchdog thread: is any camera healthy and streaming?
    /// (One lost camera of several must not read as the station stalled.)
    pub(super) fn streaming_probe(&self) -> Box<dyn Fn() -> bool + Send> {
        let probes: Vec<Box<dyn Fn() -> bool + Send>> = self
            .cameras
            .iter()
            .map(|camera| -> Box<dyn Fn() -> bool + Send> {
                match &camera.source {
                    FrameSource::Capture(c) => {
                        let probe = c.health_probe();
                        Box::new(move || probe.is_streaming())
                    }
                    FrameSource::Replay(_) => Box::new(|| true),
                }
            })
            .collect();
        Box::new(move || probes.iter().any(|probe| probe()))
    }

    /// Each camera's own "streaming?" probe, in camera order (a trigger
    /// desk's `Online`).
    pub(super) fn camera_streaming_probes(&self) -> Vec<Box<dyn Fn() -> bool + Send + Sync>> {
        self.cameras
            .iter()
            .map(|camera| -> Box<dyn Fn() -> bool + Send + Sync> {
                match &camera.source {
                    // A triggered camera (software or input line) sends
                    // nothing until triggered, so its pipeline may never
                    // report streaming before a trigger: it is online while
                    // its source is up.
                    FrameSource::Capture(c) if camera.triggered => {
                        let status = c.source_status();
                        Box::new(move || status.is_up())
                    }
                    FrameSource::Capture(c) => {
                        let probe = c.health_probe();
                        Box::new(move || probe.is_streaming())
                    }
                    FrameSource::Replay(_) => Box::new(|| true),
                }
            })
            .collect()
    }

    /// Each camera's software trigger, in camera order: `Some` for a
    /// GenICam camera with `trigger = "software"`.
    pub(super) fn camera_software_triggers(&self) -> Vec<Option<crate::capture::SoftwareTrigger>> {
        self.cameras
            .iter()
            .map(|camera| match &camera.source {
                FrameSource::Capture(c) => c.software_trigger(),
                FrameSource::Replay(_) => None,
            })
            .collect()
    }

    /// Each camera's exposure and gain handle (a GenICam camera's; `None`
    /// for others), in camera order: what a recipe switch sets.
    pub(super) fn camera_settings(&self) -> Vec<Option<crate::capture::CameraSettingsHandle>> {
        self.cameras
            .iter()
            .map(|camera| match &camera.source {
                FrameSource::Capture(c) => c.camera_settings(),
                FrameSource::Replay(_) => None,
            })
            .collect()
    }

    pub(super) fn shutdown(self) {
        for camera in self.cameras {
            match camera.source {
                FrameSource::Capture(c) => c.shutdown(),
                FrameSource::Replay(r) => r.shutdown(),
            }
        }
    }
}
