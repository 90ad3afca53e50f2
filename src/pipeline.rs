//! Wires the stages together and drives a run.
//!
//! ```text
//! host mode:
//!  GStreamer streaming thread        preprocess thread        infer thread          output thread
//!  capture::Capture ──FrameRing──▶ PreprocessStage ──chan──▶ InferStage ──chan──▶ OutputStage ──▶ results file, log
//!        ▲  (SPSC, lock-free)            │  ▲                                            │
//!        └──────── free slots ───────────┘  └──────────── free work records ─────────────┘
//!
//! device mode (preprocess = "cuda" with a GPU engine):
//!                                    device thread (one CUDA stream)
//!  capture::Capture ──FrameRing──▶ DeviceStage: DeviceRunner + dyn DeviceEngine ──chan──▶ OutputStage ──▶ ...
//!        ▲                               │  ▲   (frame kernel, models, mask)          │
//!        └──────── free slots ───────────┘  └──────────── free work records ─────────┘
//! ```
//!
//! Which mode runs is decided from the config alone (`engine_choice::device_plan`)
//! before any engine is opened; the stage that runs opens each model once and
//! its geometry sizes the work records.
//!
//! New model files on reload are prepared on this (the calling) thread, on
//! the running engine, and swapped in between two frames by the infer thread
//! (host mode) or the device thread (device mode): `model_swap`.
//!
//! The output stage hands each verdict to the line (`line::Line`: MQTT, and a
//! deadline thread fed by the ring producer that fails a part `late` when its
//! verdict is not ready in time); see `line` for that side.
//!
//! After a verdict went to the line, the output stage hands frames due to a
//! `[shadow]` to the shadow thread (`shadow`: its own engine, nice 19, never
//! waited for) and writes their result lines once the shadow's verdict is
//! in them:
//!
//! ```text
//! OutputStage ──ShadowHandoff (try, 2 records)──▶ shadow thread ──verdict──▶ OutputStage (line written)
//! ```
//!
//! The calling thread keeps the service side: signals, reload, watchdog, READY/STOPPING.

use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, select};

mod sources;

use crate::capture::{CameraRings, CaptureError, EndOfStream, SourceStatus};
use crate::config::{self, Config, ConfigError};
use crate::frame::{CameraIndex, FrameSlot};
use crate::frame::{FrameWork, StageMessage, TensorGeometry};
use crate::infer::device_stage::{
    DeviceFrameError, DeviceModelsOpener, DeviceStage, DeviceStartFailed, DeviceSwap,
};
use crate::infer::{self, InferError, InferStage, ModelSwap};
use crate::line::mqtt::{MqttCounts, MqttLine, MqttStats};
use crate::line::{Line, LineCounts, LineStats, ModelIds};
use crate::model_swap::{self, RunningEngine};
use crate::output::{
    LiveSettings, OutputCamera, OutputError, OutputStage, ResultSink, ResultsFileStatus,
};
use crate::preprocess::{
    FramePreprocessError, FramePreprocessor, PreprocessStage, cpu_preprocessor,
};
use crate::ring;
use crate::service::{Liveness, Notifier, ServiceSignal};
use crate::shadow::{self, AgreementSnapshot, ShadowAgreement, ShadowControl, ShadowState};
use crate::stats::{ResultCounters, RunStats};
use crate::status::{
    NoStatus, OperatorTaps, RunInfo, RunReport, RunState, ServerFeed, StatusFeed, StatusServer,
    Telemetry,
};

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Inference(#[from] InferError),
    /// The device stage (a GPU engine with CUDA preprocessing) could not start.
    #[error(transparent)]
    Device(DeviceFrameError),
    #[error(transparent)]
    Preprocess(#[from] FramePreprocessError),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("cannot start the {0} thread: {1}")]
    Spawn(&'static str, std::io::Error),
    #[error("the {0} thread panicked; results up to the panic were written")]
    Panicked(&'static str),
    #[error(transparent)]
    Status(#[from] crate::status::StatusError),
}

/// How a run ended, and what it did.
pub struct RunSummary {
    pub backend: String,
    pub backend_reason: String,
    pub frames_delivered: u64,
    pub results_written: u64,
    pub elapsed: Duration,
    pub stats: RunStats,
    pub end: EndOfStream,
    /// True when the run ended because SIGTERM/SIGINT asked it to.
    pub stopped_by_signal: bool,
    /// Result lines that could not be written to the results file (disk full,
    /// I/O error): the run exits non-zero when any was lost.
    pub results_lost: u64,
    /// Times the live source was lost (or missing at start) and rebuilt.
    pub source_outages: u64,
    /// Verdicts the line got (one per part), and how many were `late`.
    pub line: LineCounts,
    /// The MQTT side, when `[mqtt]` is configured.
    pub mqtt: Option<MqttCounts>,
    /// The shadow's agreement with production, when a `[shadow]` ran.
    pub shadow: Option<AgreementSnapshot>,
    /// With `max_batch` above 1 on the host path: (engine runs, frames in
    /// them, max_batch).
    pub batches: Option<(u64, u64, usize)>,
    /// The cameras' names by index (`[cameras.NAME]`); empty with `[source]`.
    pub camera_names: Vec<String>,
}

/// Live counters of the line side, for anything that reports during a run
/// (STATUS=, a metrics endpoint): cheap to clone, read without locking the
/// frame path.
#[derive(Clone)]
pub struct LineTelemetry {
    pub line: Arc<LineStats>,
    pub mqtt: Option<Arc<MqttStats>>,
}

impl LineTelemetry {
    /// What STATUS= adds: the late count, and an MQTT outage when there is one.
    pub fn status_note(&self) -> String {
        let mut note = String::new();
        let late = self.line.snapshot().late;
        if late > 0 {
            note.push_str(&format!("; late {late}"));
        }
        if let Some(outage) = self.mqtt.as_ref().and_then(|m| m.status_note()) {
            note.push_str("; ");
            note.push_str(&outage);
        }
        note
    }
}

impl RunSummary {
    pub fn fps(&self) -> f64 {
        self.results_written as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The summary printed at the end of `run` and `bench`.
    pub fn render(&self) -> String {
        let s = &self.stats;
        let mut out = format!(
            "backend: {} ({})\nframes: {} delivered, {} results\nverdicts: {}\nthroughput: {:.2} frames/s over {:.2} s\n",
            self.backend,
            self.backend_reason,
            self.frames_delivered,
            self.results_written,
            s.status_line(self.fps()),
            self.fps(),
            self.elapsed.as_secs_f64(),
        );
        if self.source_outages > 0 {
            out.push_str(&format!(
                "source: lost {} time(s), recovered inside the process\n",
                self.source_outages
            ));
        }
        if self.results_lost > 0 {
            out.push_str(&format!(
                "results file: {} lines could not be written (the journal has their verdicts when log_verdicts = true)\n",
                self.results_lost
            ));
        }
        out.push_str(&s.latency_table());
        out.push_str(&s.camera_table(&self.camera_names));
        if let Some((runs, frames, max_batch)) = self.batches {
            out.push_str(&format!(
                "batches: {runs} engine runs for {frames} frames (mean {:.2} frames, max_batch {max_batch})\n",
                frames as f64 / runs.max(1) as f64
            ));
        }
        out.push_str(&self.render_line());
        if let Some(shadow) = &self.shadow {
            out.push_str(&shadow.render());
        }
        out
    }

    /// The line's part of the summary: verdicts, late, MQTT.
    pub fn render_line(&self) -> String {
        let mut out = format!(
            "line: {} verdicts, {} late\n",
            self.line.sent, self.line.late
        );
        if let Some(mqtt) = &self.mqtt {
            out.push_str(&mqtt.render());
        }
        out
    }
}

/// Everything a run needs from outside the pipeline.
pub struct RunContext {
    pub notifier: Notifier,
    /// Stop / reload / force-stop requests (from signals, or a test).
    pub signals: Receiver<ServiceSignal>,
    /// Where frames come from.
    pub source: SourcePlan,
    /// Frames before this `seq` get results but stay out of the statistics (warm-up).
    pub measure_from_seq: u64,
}

impl RunContext {
    /// A run of the configured source, as `sealcheck run` does it.
    pub fn configured(notifier: Notifier, signals: Receiver<ServiceSignal>) -> Self {
        RunContext {
            notifier,
            signals,
            source: SourcePlan::Configured,
            measure_from_seq: 0,
        }
    }
}

pub enum SourcePlan {
    /// The source the config names, through GStreamer.
    Configured,
    /// Frames decoded beforehand, replayed round-robin `count` times (`bench`).
    /// `rate`, if given, paces them like a camera (frames per second).
    Replay {
        frames: Arc<Vec<FrameSlot>>,
        count: u64,
        rate: Option<f64>,
        /// How late (ms) each paced frame was offered after its due time,
        /// every camera's together: the replay thread's own wake-up, which
        /// counts in the frames' latency and which a camera does not have.
        offer_lateness: Arc<std::sync::Mutex<crate::stats::LatencyHistogram>>,
    },
}

/// The started stages of one run.
struct Stages {
    capture: sources::StationSources,
    /// The stage that reads the ring: preprocess, or the device stage (which
    /// also infers); it reports how capture ended.
    ring_reader: JoinHandle<EndOfStream>,
    /// The infer thread; none with the device stage.
    infer: Option<JoinHandle<()>>,
    output: JoinHandle<Result<u64, OutputError>>,
    output_done: Receiver<()>,
    /// Each camera's deadline thread; each ends once its capture is gone
    /// and every part is claimed.
    deadlines: Vec<crate::line::deadline::DeadlineThread>,
    /// Whether the results file is written, and lines lost (for metrics too).
    results_file: ResultsFileStatus,
    /// Where reloaded models go, and the engine they must match; none when
    /// the path cannot swap (new models then need a restart).
    model_swap: Option<ModelSwapTarget>,
    /// The shadow thread's control: `[shadow]` at start and on reload.
    shadow: ShadowControl,
    /// How the infer (or device) thread batched, and its `max_batch`.
    batches: Option<(Arc<infer::BatchCounts>, usize)>,
}

struct ModelSwapTarget {
    sink: SwapSink,
    running: RunningEngine,
    /// Where an accepted swap's models are reported (the status server's
    /// `model_info` follows them).
    report: Arc<RunReport>,
}

/// The thread that takes new models, and what it takes.
enum SwapSink {
    /// The infer thread: a whole engine.
    Host(Sender<ModelSwap>),
    /// The device thread: an engine its runner binds; `opener` opens it on
    /// the running device.
    Device {
        swaps: Sender<DeviceSwap>,
        opener: Arc<dyn DeviceModelsOpener>,
    },
}

/// Runs the pipeline until the source ends or a stop is requested.
pub fn run(config: Config, context: RunContext) -> Result<RunSummary, PipelineError> {
    let started = Instant::now();
    // The status server answers from the start ("starting" while models load).
    let pixel_demand = Arc::new(crate::frame::PixelDemand::default());
    // What the run reports of itself; the status server, when on, reads it.
    let report = RunReport::new();
    let operators = config.status.as_ref().map(|_| {
        Telemetry::new(
            config.service.stall_timeout,
            context.notifier.ping_interval().is_some(),
            config
                .decision
                .deadline
                .unwrap_or(crate::status::metrics::DEFAULT_DEADLINE),
            Arc::clone(&pixel_demand),
            config.archive.clone(),
            report.subscribe(),
        )
    });
    let _status_server = match (&config.status, &operators) {
        (Some(status), Some(t)) => Some(StatusServer::start(status.listen, Arc::clone(t))?),
        _ => None,
    };
    // What each result feeds the status server; with [status] off, nothing.
    let status_feed: Box<dyn StatusFeed> = match &operators {
        Some(t) => Box::new(ServerFeed::new(Arc::clone(t))),
        None => Box::new(NoStatus),
    };
    // Every result is counted once, here: /metrics, the page and the summary read it.
    let results = status_feed.result_counters();
    // The shadow's agreement, counted by its thread (`/metrics` has the counters).
    let shadow_agreement = Arc::new(ShadowAgreement::new(status_feed.shadow_counters()));
    if config.shadow.is_none() {
        shadow_agreement.set_state(ShadowState::Off, None);
    }
    report.set_shadow(Arc::clone(&shadow_agreement));
    let stats = Arc::new(Mutex::new(RunStats::new(results.clone())));
    let liveness = Liveness::new();
    let (reload_tx, reload_rx) = bounded::<LiveSettings>(4);
    let models = Arc::new(ModelIds::of(&config));
    let mqtt = config
        .mqtt
        .as_ref()
        .map(|m| MqttLine::start(m, (*models).clone(), context.measure_from_seq));
    // One line per camera (its own part numbers and deadline), counted together.
    let line_stats = Arc::new(LineStats::default());
    let lines: Vec<Arc<Line>> = config
        .cameras
        .iter()
        .map(|camera| {
            Arc::new(Line::of_camera(
                mqtt.iter().map(MqttLine::output).collect(),
                camera.decision.deadline,
                camera.name.as_deref().map(Arc::from),
                Arc::clone(&line_stats),
            ))
        })
        .collect();
    let telemetry = LineTelemetry {
        line: Arc::clone(&line_stats),
        mqtt: mqtt.as_ref().map(MqttLine::stats),
    };
    report.set_liveness(liveness.clone());
    let (mut stages, engine) = start_stages(
        &config,
        &context,
        (&stats, &results, &shadow_agreement),
        &liveness,
        reload_rx,
        (&lines, &models),
        (status_feed, &report),
        Arc::clone(&pixel_demand),
    )?;
    report.set_info(run_info(&config, &models, &engine.name));
    let run_started = Instant::now();
    context.notifier.ready();
    report.set_external(crate::status::ExternalStats {
        line: Some(Arc::clone(&telemetry.line)),
        mqtt: telemetry.mqtt.clone(),
        source: stages.capture.first_status(),
        cameras: stages.capture.camera_sources(),
        results_file: Some(stages.results_file.clone()),
    });
    report.set_state(RunState::Running);
    log::info!(target: "sealcheck::pipeline", source = config.first_source().kind.name(), cameras = config.cameras.len(), results = config.output.results.display().to_string().as_str(); "pipeline running");

    let watchdog = crate::service::spawn_watchdog(
        context.notifier.clone(),
        liveness.clone(),
        config.service.stall_timeout,
        stages.capture.streaming_probe(),
        {
            let stats = Arc::clone(&stats);
            let telemetry = telemetry.clone();
            let sources = stages.capture.named_statuses();
            let results_file = stages.results_file.clone();
            move || {
                let fps_since = run_started.elapsed().as_secs_f64().max(1e-9);
                let line = stats
                    .lock()
                    .map(|s| s.status_line(s.counts().frames as f64 / fps_since))
                    .unwrap_or_default();
                problems_first(&sources, &results_file, line) + &telemetry.status_note()
            }
        },
    )
    .map_err(|e| PipelineError::Spawn("watchdog", e))?;

    let camera_names: Vec<String> = config
        .cameras
        .iter()
        .filter_map(|c| c.name.clone())
        .collect();
    let mut current = config;
    let mut signals = context.signals.clone();
    let mut stopped_by_signal = false;
    let mut drain_deadline: Option<Instant> = None;
    loop {
        let timeout = drain_deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        select! {
            recv(stages.output_done) -> _ => break,
            recv(signals) -> signal => match signal {
                Ok(ServiceSignal::Stop) if drain_deadline.is_none() => {
                    log::info!(target: "sealcheck::pipeline", drain_timeout_s = current.service.drain_timeout.as_secs_f64(); "stop requested: stopping the source and finishing frames in flight");
                    context.notifier.stopping();
                    report.set_state(RunState::Stopping);
                    stopped_by_signal = true;
                    arm_stop_guard(current.service.drain_timeout);
                    stages.capture.stop();
                    drain_deadline = Some(Instant::now() + current.service.drain_timeout);
                }
                Ok(ServiceSignal::Stop) | Ok(ServiceSignal::ForceStop) => {
                    log::warn!(target: "sealcheck::pipeline", "second stop request: exiting without waiting for frames in flight");
                    stopped_by_signal = true;
                    break;
                }
                Ok(ServiceSignal::Reload) => {
                    context.notifier.reloading();
                    reload(&mut current, &reload_tx, stages.model_swap.as_ref(), &mut stages.shadow);
                    context.notifier.ready();
                }
                // Nobody can send any more (a bench or a test): stop listening.
                Err(_) => signals = crossbeam_channel::never(),
            },
            default(timeout) => {
                if drain_deadline.is_some_and(|d| Instant::now() >= d) {
                    let left = stages.unfinished();
                    log::error!(target: "sealcheck::pipeline", in_flight = liveness.in_flight(), left_behind = left.as_str();
                        "frames in flight did not finish within drain_timeout_s; exiting, leaving behind the {left} thread(s)");
                    break;
                }
            }
        }
    }
    // Test-only (feature `fault-injection`); a no-op otherwise.
    crate::fault::maybe_hang_after_stop(stopped_by_signal);
    if drain_deadline.is_none() {
        context.notifier.stopping();
    }
    report.set_state(RunState::Stopping);
    drop(watchdog);
    let frames_delivered = stages.capture.frames_delivered();
    let source_outages = stages.capture.outages();
    let results_file = stages.results_file.clone();
    let shadow_ran = stages.shadow.started();
    let batches = stages.batches.as_ref().map(|(counts, max_batch)| {
        let (runs, frames) = counts.snapshot();
        (runs, frames, *max_batch)
    });
    let drained = drain_deadline.is_none()
        || stages.output_done.try_recv().is_ok()
        || stages.output.is_finished();
    let (end, results_written) = if drained {
        let ring_reader = if stages.infer.is_some() {
            "preprocess"
        } else {
            "device"
        };
        let end = stages
            .ring_reader
            .join()
            .map_err(|_| PipelineError::Panicked(ring_reader))?;
        if let Some(infer) = stages.infer {
            infer.join().map_err(|_| PipelineError::Panicked("infer"))?;
        }
        let written = stages
            .output
            .join()
            .map_err(|_| PipelineError::Panicked("output"))??;
        (end, written)
    } else {
        (EndOfStream::Stopped, liveness.finished())
    };
    stages.capture.shutdown();
    // Capture is gone: each deadline thread fails what is still open at its
    // deadline (nothing, after a full drain), then ends.
    for (deadline, line) in stages.deadlines.into_iter().zip(&lines) {
        let deadline_wait = line.deadline().unwrap_or_default() + Duration::from_secs(1);
        if !deadline.join_within(deadline_wait) {
            log::warn!(target: "sealcheck::line", waited_ms = deadline_wait.as_millis() as u64;
                "a deadline thread did not end after capture; it is left behind");
        }
    }
    let mqtt = mqtt.map(|m| m.finish(MQTT_FLUSH));
    let line_counts = line_stats.snapshot();
    report.set_state(RunState::Stopped);
    let stats = Arc::try_unwrap(stats)
        .map(|m| m.into_inner().unwrap_or_default())
        .unwrap_or_else(|shared| {
            std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner()))
        });
    Ok(RunSummary {
        backend: engine.name,
        backend_reason: engine.reason,
        frames_delivered,
        results_written,
        elapsed: started.elapsed().min(run_started.elapsed()),
        stats,
        end,
        stopped_by_signal,
        line: line_counts,
        mqtt,
        results_lost: results_file.lost_lines(),
        source_outages,
        // Final: the output stage waited for the shadow's last verdicts.
        shadow: shadow_ran.then(|| shadow_agreement.snapshot()),
        batches,
        camera_names,
    })
}

/// Arms the last word on a stop (`service::StopGuard`): the process ends
/// `drain_timeout` plus `STOP_GRACE` after the request, whatever is stuck.
fn arm_stop_guard(drain_timeout: Duration) {
    let limit = drain_timeout + crate::service::STOP_GRACE;
    if let Err(e) = crate::service::StopGuard::arm(limit) {
        log::warn!(target: "sealcheck::pipeline", error = e.to_string().as_str();
            "cannot start the stop guard; a stuck thread could keep the process from ending");
    }
}

impl Stages {
    /// The stage threads still running, by name ("none" when all ended).
    fn unfinished(&self) -> String {
        let mut left = Vec::new();
        let ring_reader = if self.infer.is_some() {
            "preprocess"
        } else {
            "device"
        };
        if !self.ring_reader.is_finished() {
            left.push(ring_reader);
        }
        if self.infer.as_ref().is_some_and(|t| !t.is_finished()) {
            left.push("infer");
        }
        if !self.output.is_finished() {
            left.push("output");
        }
        if left.is_empty() {
            "none".to_string()
        } else {
            left.join(", ")
        }
    }
}

/// The engine a run uses and why, for the log and the summary.
struct ChosenEngine {
    name: String,
    reason: String,
}

/// The stages that read the ring, as started.
enum FramePath {
    /// One device thread: preprocessing and both models on the GPU; `swap`
    /// when its engine can take new models on reload.
    Device {
        thread: JoinHandle<EndOfStream>,
        swap: Option<(
            RunningEngine,
            Sender<DeviceSwap>,
            Arc<dyn DeviceModelsOpener>,
        )>,
        /// Most frames the device thread judges in one batch.
        max_batch: usize,
    },
    /// Preprocess and infer threads, to be started once the output stage runs.
    Host {
        consumer: CameraRings,
        free_rx: Receiver<Box<FrameWork>>,
        backend: Box<dyn infer::InferenceBackend>,
        frame_preprocessor: FramePreprocessor,
    },
}

/// The STATUS= text: what is wrong first (camera lost, results file not
/// written), then the counts.
fn problems_first(
    sources: &[(Option<String>, SourceStatus)],
    results_file: &ResultsFileStatus,
    counts: String,
) -> String {
    let mut line = sources::StationSources::describe_outages(sources);
    if !results_file.is_writable() {
        line.push_str(&format!(
            "results file NOT WRITTEN ({} lines lost); ",
            results_file.lost_lines()
        ));
    }
    line.push_str(&counts);
    line
}

/// Work records for batches of up to `max_batch`: preprocess and output
/// each hold one frame plus one waiting, and infer a batch while the next
/// gathers; more only adds queueing latency, not throughput.
fn work_records(max_batch: usize) -> usize {
    2 * max_batch.max(1) + 2
}

/// At the end of a run, how long verdicts still queued may take to reach the broker.
const MQTT_FLUSH: Duration = Duration::from_secs(2);

#[allow(clippy::too_many_arguments)]
fn start_stages(
    config: &Config,
    context: &RunContext,
    (stats, results, shadow_agreement): (
        &Arc<Mutex<RunStats>>,
        &ResultCounters,
        &Arc<ShadowAgreement>,
    ),
    liveness: &Liveness,
    reload: Receiver<LiveSettings>,
    (lines, models): (&[Arc<Line>], &Arc<ModelIds>),
    (status_feed, report): (Box<dyn StatusFeed>, &Arc<RunReport>),
    pixel_demand: Arc<crate::frame::PixelDemand>,
) -> Result<(Stages, ChosenEngine), PipelineError> {
    // One ring per camera, each with its own pool and drop policy; one
    // reader takes from all of them (`ring::RingSet`).
    let mut producers = Vec::with_capacity(config.cameras.len());
    let mut consumers = Vec::with_capacity(config.cameras.len());
    let mut deadlines = Vec::with_capacity(config.cameras.len());
    for (index, (camera, line)) in config.cameras.iter().zip(lines).enumerate() {
        let (producer, consumer) = ring::frame_ring(camera.source.pool_size);
        let mut producer = producer.for_camera(index as CameraIndex);
        // Each part's deadline clock starts as capture hands the frame on.
        let (mut deadline_feed, deadline) = crate::line::deadline::start(Arc::clone(line))
            .map_err(|e| PipelineError::Spawn("deadline", e))?;
        producer.on_delivery(move |meta| deadline_feed.delivered(meta));
        producers.push(producer);
        consumers.push(consumer);
        deadlines.push(deadline);
    }
    let consumer = CameraRings::new(consumers);
    // Room for the most work records a run may make (see `work_records`
    // below, decided once the engine tells how it batches).
    let most_records = work_records(config.inference.max_batch);
    let (free_tx, free_rx) = bounded::<Box<FrameWork>>(most_records);
    let (to_infer, infer_in) = bounded::<StageMessage>(most_records);
    let (to_output, output_in) = bounded::<StageMessage>(most_records);
    let (done_tx, output_done) = bounded::<()>(1);
    // The warm-up's frames are of the size the source will deliver, where
    // the config or the replay says it.
    let warm_up = match &context.source {
        SourcePlan::Configured => infer::WarmUpSize::largest(
            config
                .cameras
                .iter()
                .map(|camera| infer::WarmUpSize::of_source(&camera.source.kind)),
        ),
        SourcePlan::Replay { frames, .. } => {
            frames.first().map_or(infer::WarmUpSize::ModelInput, |f| {
                infer::WarmUpSize::Source {
                    width: f.width as usize,
                    height: f.height as usize,
                }
            })
        }
    };
    // Host or device mode is decided from the config before any engine is
    // opened; whichever runs opens each model once and tells the geometry.
    // The device path is warmed up on its own thread before this returns.
    let batch_counts = Arc::new(infer::BatchCounts::default());
    let (mut frame_path, geometry, engine) = open_frame_path(
        config,
        consumer,
        free_rx,
        to_output.clone(),
        (liveness, models, &pixel_demand, &batch_counts),
        warm_up,
    )?;
    log::info!(target: "sealcheck::pipeline", backend = engine.name.as_str(), reason = engine.reason.as_str(); "inference backend chosen");
    // The archive and the page's live view, sized for the masks of these models.
    let taps = OperatorTaps::new(
        status_feed,
        config.archive.as_ref(),
        Arc::clone(&pixel_demand),
        geometry.seg_hw,
    )
    .map_err(|e| PipelineError::Spawn("archive", e))?;
    let batching = match &frame_path {
        FramePath::Host { backend, .. } => {
            let max_batch = config.inference.max_batch.min(backend.max_batch());
            if config.inference.max_batch > 1 && max_batch == 1 {
                log::info!(target: "sealcheck::pipeline", max_batch = config.inference.max_batch;
                    "the models have a batch dimension of 1: frames are judged one after another (export them with a dynamic batch to judge frames ready at once in one run)");
            }
            infer::BatchPolicy {
                max_batch,
                wait: config.inference.batch_wait,
            }
        }
        FramePath::Device { max_batch, .. } => infer::BatchPolicy {
            max_batch: *max_batch,
            wait: config.inference.batch_wait,
        },
    };
    let mut records: Vec<Box<FrameWork>> = (0..work_records(batching.max_batch))
        .map(|_| Box::new(FrameWork::new(&geometry)))
        .collect();
    let mut batch_buffers = infer::BatchBuffers::default();
    // Only its mask-channel resize is used by the infer thread.
    let mask_preprocessor = cpu_preprocessor(config, geometry);
    if let FramePath::Host {
        backend,
        frame_preprocessor,
        ..
    } = &mut frame_path
    {
        // Before capture starts and READY=1: no camera frame waits behind
        // the engines' first runs, and the first one is judged as fast as
        // the hundredth.
        let started = Instant::now();
        let frame = infer::WarmUpFrame::new(warm_up, &geometry);
        // Each batch size too: an engine sizes its output (and may tune)
        // at the first run of a new size.
        infer::warm_up_host(
            backend.as_mut(),
            frame_preprocessor,
            &mask_preprocessor,
            config.segmentation.mask_class,
            frame.view(),
            &mut records,
            batching.max_batch,
            &mut batch_buffers,
        )?;
        log::info!(target: "sealcheck::pipeline", engine = engine.name.as_str(), path = "host",
            frames = records.len(), max_batch = batching.max_batch, width = frame.view().width, height = frame.view().height,
            size_from = warm_up.origin(), ms = started.elapsed().as_secs_f64() * 1e3;
            "engines warmed up before the start");
    }
    for work in records {
        let _ = free_tx.send(work);
    }
    // The shadow judges beside production from the first frame: opened,
    // checked and warmed up before capture starts; a refusal is logged and
    // production runs on.
    let (shadow_handoff, mut shadow) = shadow::lane(
        geometry,
        matches!(frame_path, FramePath::Host { .. }),
        Arc::clone(&pixel_demand),
        Arc::clone(shadow_agreement),
    );
    shadow.apply(config, true);

    let sink = ResultSink::open(&config.output)?;
    let results_file = sink.status();
    let output = OutputStage {
        input: output_in,
        recycle: free_tx,
        reload,
        settings: LiveSettings {
            decisions: config.cameras.iter().map(|c| c.decision).collect(),
            output: config.output.clone(),
            archive: config.archive.clone(),
        },
        defect_class: config.classifier.defect_class,
        sink,
        stats: Arc::clone(stats),
        counters: results.clone(),
        liveness: liveness.clone(),
        measure_from_seq: context.measure_from_seq,
        cameras: config
            .cameras
            .iter()
            .zip(lines)
            .map(|(camera, line)| OutputCamera {
                name: camera.name.as_deref().map(Arc::from),
                line: Some(Arc::clone(line)),
            })
            .collect(),
        models: Some(Arc::clone(models)),
        taps: Box::new(taps),
        shadow: Some(shadow_handoff),
    };
    let output = spawn("output", move || {
        let result = output.run();
        let _ = done_tx.send(());
        result
    })?;
    let model_swap;
    let (ring_reader, infer) = match frame_path {
        FramePath::Device { thread, swap, .. } => {
            model_swap = swap.map(|(running, swaps, opener)| ModelSwapTarget {
                sink: SwapSink::Device { swaps, opener },
                running,
                report: Arc::clone(report),
            });
            (thread, None)
        }
        FramePath::Host {
            consumer,
            free_rx,
            backend,
            frame_preprocessor,
        } => {
            let (swaps, swap_rx) = bounded::<ModelSwap>(1);
            model_swap = Some(ModelSwapTarget {
                sink: SwapSink::Host(swaps),
                running: RunningEngine {
                    kind: backend.kind(),
                    geometry,
                },
                report: Arc::clone(report),
            });
            let infer = InferStage {
                input: infer_in,
                output: to_output,
                models: Arc::clone(models),
                swaps: swap_rx,
                backend,
                preprocessor: mask_preprocessor,
                mask_class: config.segmentation.mask_class,
                liveness: liveness.clone(),
                batching,
                batch_buffers,
                batch_counts: Arc::clone(&batch_counts),
            };
            let infer = spawn("infer", move || infer.run())?;
            let preprocess = PreprocessStage {
                input: consumer,
                output: to_infer,
                free_work: free_rx,
                preprocessor: frame_preprocessor,
                liveness: liveness.clone(),
                pixel_demand,
            };
            (spawn("preprocess", move || preprocess.run())?, Some(infer))
        }
    };
    let capture = sources::StationSources::start(
        config,
        &context.source,
        context.measure_from_seq,
        producers,
        liveness,
    )?;
    Ok((
        Stages {
            capture,
            ring_reader,
            infer,
            output,
            output_done,
            deadlines,
            model_swap,
            batches: (batching.max_batch > 1).then_some((batch_counts, batching.max_batch)),
            results_file,
            shadow,
        },
        engine,
    ))
}

/// Starts the device thread when the config asks for device mode (it warms
/// up on frames of `warm_up` size before it reports), or opens the host
/// engine and preprocessor; either way each model is opened once.
/// `auto` whose GPU engines cannot run here goes on in host mode.
fn open_frame_path(
    config: &Config,
    consumer: CameraRings,
    free_rx: Receiver<Box<FrameWork>>,
    to_output: crossbeam_channel::Sender<StageMessage>,
    (liveness, models, pixel_demand, batch_counts): (
        &Liveness,
        &Arc<ModelIds>,
        &Arc<crate::frame::PixelDemand>,
        &Arc<infer::BatchCounts>,
    ),
    warm_up: infer::WarmUpSize,
) -> Result<(FramePath, TensorGeometry, ChosenEngine), PipelineError> {
    let (consumer, free_rx) = match infer::device_stage::device_plan(config) {
        None => (consumer, free_rx),
        Some(plan) => {
            let (swaps, swap_rx) = bounded::<DeviceSwap>(1);
            let stage = DeviceStage {
                input: consumer,
                output: to_output,
                free_work: free_rx,
                liveness: liveness.clone(),
                models: Arc::clone(models),
                swaps: swap_rx,
                pixel_demand: Arc::clone(pixel_demand),
                batch_counts: Arc::clone(batch_counts),
            };
            match stage.spawn(config, plan, warm_up) {
                Ok((thread, started)) => {
                    let engine = ChosenEngine {
                        name: started.kind.as_str().to_string(),
                        reason: started.reason,
                    };
                    let running = RunningEngine {
                        kind: started.kind,
                        geometry: started.geometry,
                    };
                    let swap = started.swap_opener.map(|opener| (running, swaps, opener));
                    let path = FramePath::Device {
                        thread,
                        swap,
                        max_batch: started.max_batch,
                    };
                    return Ok((path, started.geometry, engine));
                }
                Err(DeviceStartFailed {
                    error,
                    stage: Some(stage),
                }) => {
                    log::info!(target: "sealcheck::pipeline", error:% = error;
                        "auto: no GPU engine for the device path; choosing a host-mode engine");
                    (stage.input, stage.free_work)
                }
                Err(DeviceStartFailed { error, .. }) => {
                    return Err(match error {
                        DeviceFrameError::Open(e) => PipelineError::Inference(e),
                        other => PipelineError::Device(other),
                    });
                }
            }
        }
    };
    let selection = infer::open_backend(config)?;
    let geometry = infer::geometry(
        selection.backend.segmentation_io(),
        selection.backend.classifier_io(),
    )?;
    let frame_preprocessor = FramePreprocessor::open(config, geometry)?;
    let engine = ChosenEngine {
        name: selection.backend.kind().as_str().to_string(),
        reason: selection.reason,
    };
    let path = FramePath::Host {
        consumer,
        free_rx,
        backend: selection.backend,
        frame_preprocessor,
    };
    Ok((path, geometry, engine))
}

fn spawn<T: Send + 'static>(
    name: &'static str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, PipelineError> {
    thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|e| PipelineError::Spawn(name, e))
}

/// Re-reads the config file. Thresholds and output settings apply at once;
/// new model files are swapped in between two frames once they pass
/// `model_swap::prepare` (host path) or `prepare_device` (GPU device path);
/// anything else that changed is logged as needing a restart. An invalid file is rejected and the running config stays.
fn reload(
    current: &mut Config,
    apply: &crossbeam_channel::Sender<LiveSettings>,
    model_swap: Option<&ModelSwapTarget>,
    shadow: &mut ShadowControl,
) {
    let new = match config::load(&current.path) {
        Ok(new) => new,
        Err(e) => {
            log::error!(target: "sealcheck::config", path = current.path.display().to_string().as_str(), error = e.to_string().as_str(); "reload rejected: the config file is invalid; the running config stays");
            return;
        }
    };
    for section in restart_sections(current, &new, model_swap.is_some()) {
        log::warn!(target: "sealcheck::config", section = section; "reload: [{section}] changed but only applies after `systemctl restart sealcheck`");
    }
    // Thresholds apply per camera; a camera added or removed needs a
    // restart (restart_sections said so), and the running ones keep theirs.
    let same_cameras = same_camera_names(current, &new);
    if same_cameras {
        for (running, reloaded) in current.cameras.iter_mut().zip(&new.cameras) {
            running.decision = reloaded.decision;
        }
    }
    let settings = LiveSettings {
        decisions: current.cameras.iter().map(|c| c.decision).collect(),
        output: new.output.clone(),
        archive: new.archive.clone(),
    };
    if apply.send(settings).is_err() {
        return;
    }
    log::info!(target: "sealcheck::config", path = new.path.display().to_string().as_str(); "config reloaded: decision and output settings applied");
    // Keep the running values of what needs a restart, so the next reload compares against them.
    current.decision = new.decision;
    current.output = new.output.clone();
    current.acceptance_images = new.acceptance_images.clone();
    current.archive = new.archive.clone();
    if let Some(target) = model_swap
        && model_swap::paths_changed(current, &new)
        && model_swap::only_paths_changed(current, &new)
    {
        swap_models(current, &new, target);
    }
    // After the swap: a shadow that names no model of its own follows
    // production's (swapped) models. The shadow opens on its own thread
    // and a refusal keeps the running one.
    if current.shadow.is_some() || new.shadow.is_some() {
        current.shadow = new.shadow.clone();
        shadow.apply(current, false);
    }
}

/// Opens, checks, gates and warms up the reloaded config's models, then hands
/// them to the infer or device thread. Runs while systemd shows the reload
/// in progress.
fn swap_models(current: &mut Config, new: &Config, target: &ModelSwapTarget) {
    let started = Instant::now();
    log::info!(target: "sealcheck::model_swap", segmentation:% = new.segmentation.path.display(), classifier:% = new.classifier.path.display(), acceptance_images = new.acceptance_images.is_some(); "new model files named: opening them beside the running ones");
    let prepared = match &target.sink {
        SwapSink::Host(swaps) => model_swap::prepare(current, new, target.running).map(|swap| {
            let info = model_info(new, &swap.models);
            let models = Arc::clone(&swap.models);
            let sent = swaps.send(swap).is_ok();
            if sent {
                target.report.set_models(info);
            }
            (models, sent)
        }),
        SwapSink::Device { swaps, opener } => {
            model_swap::prepare_device(current, new, target.running, opener.as_ref()).map(
                |mut swap| {
                    // The device thread may still fail to bind it: the
                    // status follows only a swap that happened.
                    let info = model_info(new, &swap.models);
                    let report = Arc::clone(&target.report);
                    swap.on_swapped = Some(Box::new(move || report.set_models(info)));
                    let models = Arc::clone(&swap.models);
                    (models, swaps.send(swap).is_ok())
                },
            )
        }
    };
    match prepared {
        Ok((models, sent)) => {
            let (seg, cls) = (models.segmentation.clone(), models.classifier.clone());
            if !sent {
                return;
            }
            log::info!(target: "sealcheck::model_swap", segmentation = seg.as_str(), classifier = cls.as_str(), prepare_ms = started.elapsed().as_secs_f64() * 1e3; "new models accepted: they judge from the next frame on");
            current.segmentation = new.segmentation.clone();
            current.classifier = new.classifier.clone();
        }
        Err(refused) => {
            log::error!(target: "sealcheck::model_swap", step = refused.step, detail = refused.detail.as_str(), segmentation:% = new.segmentation.path.display(), classifier:% = new.classifier.path.display(); "{refused}");
        }
    }
}

/// Whether both configs name the same cameras in the same order.
fn same_camera_names(old: &Config, new: &Config) -> bool {
    old.cameras.len() == new.cameras.len()
        && old
            .cameras
            .iter()
            .zip(&new.cameras)
            .all(|(a, b)| a.name == b.name)
}

/// Config sections that differ and cannot change while running.
fn restart_sections(old: &Config, new: &Config, models_swap: bool) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if !same_camera_names(old, new) {
        changed.push("cameras (a camera added, removed or renamed)");
    } else if old
        .cameras
        .iter()
        .zip(&new.cameras)
        .any(|(a, b)| a.source != b.source)
    {
        changed.push("source");
    }
    if old.inference != new.inference {
        changed.push("inference");
    }
    let swappable = models_swap && model_swap::only_paths_changed(old, new);
    if (old.segmentation != new.segmentation || old.classifier != new.classifier) && !swappable {
        changed.push("models");
    }
    if old.logging != new.logging {
        changed.push("logging");
    }
    if old.service != new.service {
        changed.push("service");
    }
    if old.mqtt != new.mqtt {
        changed.push("mqtt");
    }
    if old.status != new.status {
        changed.push("status");
    }
    changed
}

/// What `/metrics` and the page say about this run: backend, source, model ids.
fn run_info(config: &Config, ids: &ModelIds, backend: &str) -> RunInfo {
    RunInfo {
        backend: backend.to_string(),
        source: config.first_source().kind.name().to_string(),
        cameras: config.cameras.iter().map(|c| c.name.clone()).collect(),
        models: model_info(config, ids),
    }
}

/// Role, file name and id of each of the config's models. The ids are the
/// ones results and MQTT carry (hashed once per start or swap): hashing the
/// files again costs a second read of each model, and a file changed in
/// between would make the page name other bytes than the results do.
fn model_info(config: &Config, ids: &ModelIds) -> Vec<(&'static str, String, String)> {
    let model = |role: &'static str, path: &std::path::Path, id: &str| {
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        (role, file, id.to_string())
    };
    vec![
        model("segmentation", &config.segmentation.path, &ids.segmentation),
        model("classifier", &config.classifier.path, &ids.classifier),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
        let text = format!(
            "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"{models}/seg.onnx\"\n\
             [models.classifier]\npath = \"{models}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n{extra}"
        );
        config::parse(&text, std::path::Path::new("/tmp/sealcheck.toml")).unwrap()
    }

    #[test]
    fn a_changed_mqtt_section_needs_a_restart_and_a_deadline_does_not() {
        let old = config("[mqtt]\nurl = \"mqtt://a\"\n");
        let new = config("[mqtt]\nurl = \"mqtt://b\"\n[decision]\ndeadline_ms = 60\n");
        assert_eq!(restart_sections(&old, &new, false), vec!["mqtt"]);
        let deadline_only = config("[mqtt]\nurl = \"mqtt://a\"\n[decision]\ndeadline_ms = 60\n");
        assert!(restart_sections(&old, &deadline_only, false).is_empty());
    }

    #[test]
    fn new_model_paths_need_a_restart_only_where_no_path_can_swap() {
        let old = config("");
        let mut new = old.clone();
        new.classifier.path = "other.onnx".into();
        assert_eq!(restart_sections(&old, &new, false), vec!["models"]);
        assert!(restart_sections(&old, &new, true).is_empty());
        new.classifier.defect_class += 1;
        assert_eq!(restart_sections(&old, &new, true), vec!["models"]);
    }
}
