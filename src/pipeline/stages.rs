//! Starting the stages of one run, in order: one ring per camera (and its
//! deadline thread), the stage that reads the rings (device thread, or the
//! host engine warmed up), the shadow lane, the output thread, the
//! preprocess and infer threads, and last the cameras' sources. `Stages`
//! holds what was started, for `run` to stop and join.
//!
//! Every stage thread starts here, with `spawn` (named as it shows in
//! `Stages::unfinished`): "device" first in device mode, because it opens
//! the engines on its own thread and tells the models' geometry, which sizes
//! the work records, the archive and the shadow; then "output", and in host
//! mode "infer" and "preprocess".
//!
//! ```text
//! device mode: spawn("device", infer::device_stage body) ─start report─▶ spawn("output")
//! host mode:   open the host engine here ─▶ spawn("output") ─▶ spawn("infer") ─▶ spawn("preprocess")
//! then:        the cameras' sources (capture), which fill the rings
//! ```

use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use crossbeam_channel::{Receiver, bounded};

use super::context::{RunContext, SourcePlan};
use super::error::PipelineError;
use super::frame_path::{ChosenEngine, FramePath, open_host_path};
use super::reload::{ModelSwapTarget, SwapSink};
use super::sources;
use crate::capture::{CameraRings, EndOfStream, RingProducer};
use crate::config::Config;
use crate::frame::{CameraIndex, FrameWork, PixelDemand, StageMessage, TensorGeometry};
use crate::infer::device_stage::{DeviceFrameError, DeviceStage, DeviceStartFailed, DeviceSwap};
use crate::infer::{self, InferStage, ModelSwap};
use crate::line::deadline::DeadlineThread;
use crate::line::{Line, ModelIds};
use crate::model_swap::RunningEngine;
use crate::output::{
    LiveSettings, OutputCamera, OutputError, OutputStage, ResultSink, ResultsFileStatus,
};
use crate::preprocess::{PreprocessStage, Preprocessor, cpu_preprocessor};
use crate::ring;
use crate::service::Liveness;
use crate::shadow::{self, ShadowAgreement, ShadowControl};
use crate::stats::{ResultCounters, RunStats};
use crate::status::{OperatorTaps, RunReport, StatusFeed};
use crate::trigger::{PartRings, TriggerDesk, UnjudgedFrames};

/// Model swaps (a reload's, a recipe switch's) that may wait for the model
/// thread at once: it takes them all, in order, before the next part. More
/// than one waits when switches come while no part is judged.
const SWAPS_WAITING: usize = 4;

/// The started stages of one run.
pub(super) struct Stages {
    pub(super) capture: sources::StationSources,
    /// The stage that reads the ring: preprocess, or the device stage (which
    /// also infers); it reports how capture ended.
    pub(super) ring_reader: JoinHandle<EndOfStream>,
    /// The infer thread; none with the device stage.
    pub(super) infer: Option<JoinHandle<()>>,
    pub(super) output: JoinHandle<Result<u64, OutputError>>,
    pub(super) output_done: Receiver<()>,
    /// Each camera's deadline thread; each ends once its capture is gone
    /// and every part is claimed.
    pub(super) deadlines: Vec<DeadlineThread>,
    /// Whether the results file is written, and lines lost (for metrics too).
    pub(super) results_file: ResultsFileStatus,
    /// Where reloaded models go, and the engine they must match; none when
    /// the path cannot swap (new models then need a restart).
    pub(super) model_swap: Option<ModelSwapTarget>,
    /// The shadow thread's control: `[shadow]` at start and on reload.
    pub(super) shadow: ShadowControl,
    /// How the infer (or device) thread batched, and its `max_batch`.
    pub(super) batches: Option<(Arc<infer::BatchCounts>, usize)>,
    /// The archive's counts (frames it did not keep, by why), for the summary.
    pub(super) archive: crate::archive::ArchiveCounters,
}

impl Stages {
    /// The stage threads still running, by name ("none" when all ended).
    pub(super) fn unfinished(&self) -> String {
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

/// Work records for batches of up to `max_batch`: preprocess and output
/// each hold one frame plus one waiting, and infer a batch while the next
/// gathers; more only adds queueing latency, not throughput. With a cavity
/// layout a frame takes a record per judged cavity (`per_frame`), and the
/// batch holds at least one cycle (`batch_policy`): the output stage holds
/// at most one cycle's records but one while it gathers it, so the
/// preprocess stage always finds a record for the next cavity.
fn work_records(max_batch: usize, per_frame: usize) -> usize {
    2 * max_batch.max(per_frame).max(1) + 2
}

#[allow(clippy::too_many_arguments)]
pub(super) fn start_stages(
    config: &Config,
    context: &RunContext,
    (stats, results, shadow_agreement): (
        &Arc<Mutex<RunStats>>,
        &ResultCounters,
        &Arc<ShadowAgreement>,
    ),
    liveness: &Liveness,
    reload: Receiver<LiveSettings>,
    (lines, models, desks, unjudged): (
        &[Arc<Line>],
        &Arc<ModelIds>,
        &[Arc<TriggerDesk>],
        Option<Arc<dyn UnjudgedFrames>>,
    ),
    (status_feed, report): (Box<dyn StatusFeed>, &Arc<RunReport>),
    pixel_demand: Arc<PixelDemand>,
) -> Result<(Stages, ChosenEngine), PipelineError> {
    let slot_memory = crate::frame_bytes::SlotMemory::new();
    let (producers, rings, deadlines) = camera_rings(config, lines, desks, &slot_memory)?;
    // In `plc` mode the frame path reads parts: frames claimed by triggers.
    let consumer = if desks.is_empty() {
        PartRings::free(rings)
    } else {
        PartRings::triggered(
            rings,
            desks.to_vec(),
            config.trigger.frame_wait,
            liveness.clone(),
        )
        .show_unjudged(unjudged)
    };
    // Room for the most work records a run may make (see `work_records`
    // below, decided once the engine tells how it batches).
    let crops = crate::preprocess::CycleCrops::from_config(config);
    let per_frame = crops.most_per_frame();
    let most_records = work_records(config.inference.max_batch, per_frame);
    let (free_tx, free_rx) = bounded::<Box<FrameWork>>(most_records);
    let (to_infer, infer_in) = bounded::<StageMessage>(most_records);
    let (to_output, output_in) = bounded::<StageMessage>(most_records);
    let (done_tx, output_done) = bounded::<()>(1);
    let warm_up = warm_up_size(config, &context.source);
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
        (warm_up, slot_memory),
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
    let archive_counters = taps.archive_counters();
    let batching = batch_policy(config, &frame_path, per_frame);
    let mut records: Vec<Box<FrameWork>> = (0..work_records(batching.max_batch, per_frame))
        .map(|_| Box::new(FrameWork::new(&geometry)))
        .collect();
    let mut batch_buffers = infer::BatchBuffers::default();
    // Only its mask-channel resize is used by the infer thread.
    let mask_preprocessor = cpu_preprocessor(config, geometry);
    warm_up_host_path(
        config,
        &mut frame_path,
        (warm_up, &geometry, batching.max_batch),
        &mask_preprocessor,
        (&mut records, &mut batch_buffers),
        &engine,
    )?;
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
    if config.shadow.is_some() && config.cameras.iter().any(|c| c.source.layout.is_some()) {
        log::warn!(target: "sealcheck::shadow",
            "[shadow] judges whole frames: the cycles of a camera with a cavity layout are not offered to it (its counts leave them out)");
    }

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
        cameras: output_cameras(config, lines),
        models: Some(Arc::clone(models)),
        taps: Box::new(taps),
        shadow: Some(shadow_handoff),
        cycles: crate::output::CycleGather::with_capacity(per_frame),
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
            let (swaps, swap_rx) = bounded::<ModelSwap>(SWAPS_WAITING);
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
                crops,
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
            archive: archive_counters,
        },
        engine,
    ))
}

/// Starts the device thread when the config asks for device mode (it warms
/// up on frames of `warm_up` size before it reports, and installs its
/// page-locked allocator in `slot_memory`), or opens the host engine and
/// preprocessor; either way each model is opened once.
/// `auto` whose GPU engines cannot run here goes on in host mode.
fn open_frame_path(
    config: &Config,
    consumer: PartRings,
    free_rx: Receiver<Box<FrameWork>>,
    to_output: crossbeam_channel::Sender<StageMessage>,
    (liveness, models, pixel_demand, batch_counts): (
        &Liveness,
        &Arc<ModelIds>,
        &Arc<PixelDemand>,
        &Arc<infer::BatchCounts>,
    ),
    (warm_up, slot_memory): (infer::WarmUpSize, crate::frame_bytes::SlotMemory),
) -> Result<(FramePath, TensorGeometry, ChosenEngine), PipelineError> {
    let Some(plan) = infer::device_stage::device_plan(config) else {
        return open_host_path(config, consumer, free_rx);
    };
    let (swaps, swap_rx) = bounded::<DeviceSwap>(SWAPS_WAITING);
    let stage = DeviceStage {
        input: consumer,
        output: to_output,
        free_work: free_rx,
        liveness: liveness.clone(),
        models: Arc::clone(models),
        swaps: swap_rx,
        pixel_demand: Arc::clone(pixel_demand),
        batch_counts: Arc::clone(batch_counts),
        slot_memory,
    };
    let (device, started) = stage.thread(config, plan, warm_up);
    let thread = spawn("device", device)?;
    match started.wait(thread) {
        Ok((thread, started)) => Ok(FramePath::device(thread, started, swaps)),
        Err(DeviceStartFailed {
            error,
            stage: Some(stage),
        }) => {
            log::info!(target: "sealcheck::pipeline", error:% = error;
                "auto: no GPU engine for the device path; choosing a host-mode engine");
            let stage = *stage;
            open_host_path(config, stage.input, stage.free_work)
        }
        Err(DeviceStartFailed { error, .. }) => Err(match error {
            DeviceFrameError::Open(e) => PipelineError::Inference(e),
            other => PipelineError::Device(other),
        }),
    }
}

/// One ring per camera, each with its own pool and drop policy; one
/// reader takes from all of them (`ring::RingSet`). The slots grow from
/// `slot_memory` (page-locked once the device path installs its
/// allocator). Each camera's deadline thread starts here too, fed by its
/// ring's producer, or in `plc` mode (`desks` not empty) by its trigger
/// desk as it accepts each trigger.
fn camera_rings(
    config: &Config,
    lines: &[Arc<Line>],
    desks: &[Arc<TriggerDesk>],
    slot_memory: &crate::frame_bytes::SlotMemory,
) -> Result<(Vec<RingProducer>, CameraRings, Vec<DeadlineThread>), PipelineError> {
    let mut producers = Vec::with_capacity(config.cameras.len());
    let mut consumers = Vec::with_capacity(config.cameras.len());
    let mut deadlines = Vec::with_capacity(config.cameras.len());
    for (index, (camera, line)) in config.cameras.iter().zip(lines).enumerate() {
        let (producer, consumer) = ring::frame_ring_in(camera.source.pool_size, slot_memory);
        let mut producer = producer.for_camera(index as CameraIndex);
        if config.trigger.mode == crate::config::TriggerMode::Camera {
            producer = producer.parts_counted_by_camera();
        }
        let (mut deadline_feed, deadline) = crate::line::deadline::start(Arc::clone(line))
            .map_err(|e| PipelineError::Spawn("deadline", e))?;
        match desks.get(index) {
            // Each part's deadline clock starts at its trigger.
            Some(desk) => desk.set_deadline_feed(deadline_feed),
            // Each part's deadline clock starts as capture hands the frame on.
            None => producer.on_delivery(move |meta| deadline_feed.delivered(meta)),
        }
        producers.push(producer);
        consumers.push(consumer);
        deadlines.push(deadline);
    }
    Ok((producers, CameraRings::new(consumers), deadlines))
}

/// The warm-up's frames are of the size the source will deliver, where
/// the config or the replay says it.
fn warm_up_size(config: &Config, source: &SourcePlan) -> infer::WarmUpSize {
    match source {
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
    }
}

/// How the stage that runs the models batches: `max_batch` as the models
/// allow it (host) or as the device thread reported it, and `batch_wait`.
/// With a cavity layout a batch holds at least one cycle's `per_frame`
/// crops, so that a cycle is judged in one engine run where the models
/// batch.
fn batch_policy(config: &Config, frame_path: &FramePath, per_frame: usize) -> infer::BatchPolicy {
    match frame_path {
        FramePath::Host { backend, .. } => {
            let wanted = config.inference.max_batch.max(per_frame);
            if wanted > config.inference.max_batch {
                log::info!(target: "sealcheck::pipeline", max_batch = config.inference.max_batch, cavities = per_frame;
                    "a cycle's cavities are judged in one batch: max_batch raised to the cavities of one frame");
            }
            let max_batch = wanted.min(backend.max_batch());
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
    }
}

/// On the host path, runs the engines on a frame of the source's size and
/// on each batch size; the device path warmed up on its own thread.
fn warm_up_host_path(
    config: &Config,
    frame_path: &mut FramePath,
    (warm_up, geometry, max_batch): (infer::WarmUpSize, &TensorGeometry, usize),
    mask_preprocessor: &Preprocessor,
    (records, batch_buffers): (&mut [Box<FrameWork>], &mut infer::BatchBuffers),
    engine: &ChosenEngine,
) -> Result<(), PipelineError> {
    if let FramePath::Host {
        backend,
        frame_preprocessor,
        ..
    } = frame_path
    {
        // Before capture starts and READY=1: no camera frame waits behind
        // the engines' first runs, and the first one is judged as fast as
        // the hundredth.
        let started = Instant::now();
        let frame = infer::WarmUpFrame::new(warm_up, geometry);
        // Each batch size too: an engine sizes its output (and may tune)
        // at the first run of a new size.
        infer::warm_up_host(
            backend.as_mut(),
            frame_preprocessor,
            mask_preprocessor,
            config.segmentation.mask_class,
            frame.view(),
            records,
            max_batch,
            batch_buffers,
        )?;
        log::info!(target: "sealcheck::pipeline", engine = engine.name.as_str(), path = "host",
            frames = records.len(), max_batch = max_batch, width = frame.view().width, height = frame.view().height,
            size_from = warm_up.origin(), ms = started.elapsed().as_secs_f64() * 1e3;
            "engines warmed up before the start");
    }
    Ok(())
}

/// Each camera as the output stage names it and hands its verdicts on.
fn output_cameras(config: &Config, lines: &[Arc<Line>]) -> Vec<OutputCamera> {
    config
        .cameras
        .iter()
        .zip(lines)
        .map(|(camera, line)| OutputCamera {
            name: camera.name.as_deref().map(Arc::from),
            line: Some(Arc::clone(line)),
            layout: camera.source.layout.clone(),
        })
        .collect()
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
