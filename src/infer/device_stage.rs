//! The device stage: for GPU backends with `preprocess = "cuda"`, one thread
//! owns the CUDA stream and every device buffer and takes each frame from the
//! capture ring to the decision's inputs, replacing the preprocess and infer
//! threads.
//!
//! ```text
//! ring slot (page-locked; mapped with zero_copy) --held until the GPU read it--> back to capture
//!   upload stream:  H2D straight from the slot (none when mapped)
//!   compute stream: frame kernel (reads the upload, or the mapped slot in place)
//!           -> segmentation -> mask kernel -> classifier
//!           -> D2H: classifier logits + mask pixel count (<= 64 bytes)
//!   host: one wait per batch -> StageMessage::Inspect(work) to the output stage
//! ```
//!
//! The ring slots get their page-locked memory from the path
//! (`DeviceFramePath::slot_allocator`), installed in the run's
//! `SlotMemory` once the path is open and before capture starts. A slot
//! the GPU reads in place is kept here (`DeviceBatches::reading`) until the
//! path says the GPU is past it (`reads_done`: the slot's upload, or its
//! in-place kernel, completed), then handed back to capture
//! (`BatchPath::hand_back`); at the end every read is waited for and every
//! slot handed back before the path is dropped.
//!
//! Which engine, and whether this stage runs at all, is decided from the
//! config (`device_plan`) before any engine is opened; the thread opens the
//! engine once (`open_path`) and reports the models' geometry back on its
//! start channel, which sizes the pipeline's work records.
//!
//! The loop is the one batcher's (`batcher::Batcher`, over the cameras'
//! rings): frames already waiting (from any camera) are judged as one
//! batch, up to the path's `max_batch` (models with a dynamic batch) and
//! `[inference] max_batch`, waiting at most `batch_wait_us` for more; a
//! marker or the end goes out after the batch. This file says what the
//! device path does with a batch (`DeviceBatches`).
//!
//! A path may keep more than one batch on the stream (`max_in_flight`): when
//! the next frame is already waiting in the ring, the host stages it while the
//! GPU still works on the batch before. When none is waiting, the batch on the
//! GPU is finished at once (`BatchPath::idle`), so a camera's frame never
//! waits for the next one.
//!
//! The host mask, tensors and segmentation logits of `FrameWork` are not
//! filled: the decision reads only `mask_pixels` and `cls_logits`.
//!
//! New models on reload (`crate::model_swap`): the reload thread opens them
//! on the running engine through the path's `DeviceModelsOpener` while this
//! thread goes on inspecting; the prepared engine arrives as a `DeviceSwap`
//! and is taken before the next frame is staged, once every frame on the GPU
//! was completed by the old engine:
//!
//! ```text
//! frame N-1, N on the GPU (old engine) | swap waiting -> complete N-1, N -> bind new engine -> frame N+1
//! ```

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};

use super::backend::BackendKind;
use super::batch::{BatchCounts, BatchPolicy, BatchRuns};
use super::batcher::{BatchPath, Batcher, IDLE_WAIT, NotAFrame, warm_up_sizes};
use super::on_gpu::OnGpu;
use super::warm_up::{WarmUpFrame, WarmUpSize};
use crate::capture::EndOfStream;
use crate::config::Config;
use crate::frame::{
    FailedStage, FrameSlot, FrameWork, ImageView, PixelDemand, StageMessage, TensorGeometry,
};
use crate::frame_bytes::{HostPlacement, SlotMemory};
use crate::model_id::ModelIds;
use crate::trigger::PartRings;

// The device path's vocabulary and its opening, for the pipeline and the
// model swap, which see the device path only through this stage.
pub use super::device_error::DeviceFrameError;
pub use super::device_path::{
    DeviceCandidate, DeviceFramePath, DeviceModelsOpener, FrameTraffic, GpuTimings, OpenedPath,
};
pub use super::engine_choice::{DevicePlan, device_plan, open_path};

/// New models for the device thread, opened, checked and warmed up beside
/// the running ones (`crate::model_swap::prepare_device`); taken between two
/// frames with nothing in flight.
pub struct DeviceSwap {
    /// Opened by the running path's `swap_opener`, and warmed up.
    pub engine: Box<dyn DeviceCandidate>,
    pub models: Arc<ModelIds>,
    /// Called on the device thread once the new engine judges (the status
    /// server's `model_info`); not called when binding it fails.
    pub on_swapped: Option<Box<dyn FnOnce() + Send>>,
}

/// Rounds of the start-up warm-up: each puts as many frames on the stream as
/// may be in flight, then completes them. ONNX Runtime records its CUDA
/// graph only after a few ordinary runs, so one round is not enough.
pub const WARM_UP_ROUNDS: usize = 3;

/// The device path's warm-up before the start: `frame` through `path`
/// exactly as a camera frame goes (upload, frame kernel, both models, mask,
/// copies back), on the stream, tensors and tickets the first camera frame
/// will use, so allocations, the engines' first runs and a CUDA graph's
/// capture are done before it. Nothing is in flight at start, so warming
/// the real buffers is safe (a model swap warms up on buffers of its own,
/// `DeviceCandidate::warm_up`, because frames are in flight then).
/// `host_mask`: also bring the mask back, as the first frames will when
/// the archive or the live view wants them. Each batch size up to
/// `max_batch` is run (an engine sets up each input shape, and ONNX Runtime
/// records a CUDA graph per size, at its first runs). Returns the frames run.
pub fn warm_up_path(
    path: &mut dyn DeviceFramePath,
    frame: ImageView<'_>,
    (depth, max_batch): (usize, usize),
    host_mask: bool,
    work: &mut FrameWork,
) -> Result<usize, DeviceFrameError> {
    let engine = path.kind().as_str();
    let failed = |step: &'static str| {
        move |e: DeviceFrameError| DeviceFrameError::WarmUp {
            engine,
            step,
            source: Box::new(e),
        }
    };
    let mut frames = 0;
    for batch in warm_up_sizes(max_batch.min(path.max_batch())) {
        for _ in 0..WARM_UP_ROUNDS {
            for _ in 0..depth {
                for _ in 0..batch {
                    // Heap bytes: copied into staging, nothing held.
                    path.stage(frame, HostPlacement::Pageable, host_mask)
                        .map_err(failed("queue a frame"))?;
                }
                path.launch().map_err(failed("queue a batch"))?;
            }
            for _ in 0..depth * batch {
                path.complete(work).map_err(failed("complete a frame"))?;
            }
            frames += depth * batch;
        }
    }
    Ok(frames)
}

/// What the device thread reports once its engines are open.
pub struct DeviceStarted {
    pub kind: BackendKind,
    pub geometry: TensorGeometry,
    /// Most frames judged in one batch (1: the models' batch is fixed at one,
    /// or `[inference] max_batch` is 1).
    pub max_batch: usize,
    pub reason: String,
    /// Where new models are opened on reload; `None`: the path cannot swap.
    pub swap_opener: Option<Arc<dyn DeviceModelsOpener>>,
}

/// Why the device thread did not start. With `stage` given (an `auto`
/// plan whose GPU engines cannot run here), the caller may go on in host
/// mode with the channels it gets back.
pub struct DeviceStartFailed {
    pub error: DeviceFrameError,
    /// Boxed: the channels are many, and an error travels by value.
    pub stage: Option<Box<DeviceStage>>,
}

/// The device thread's channels.
pub struct DeviceStage {
    pub input: PartRings,
    pub output: Sender<StageMessage>,
    /// Work records back from the output stage (backpressure, as in preprocess).
    pub free_work: Receiver<Box<FrameWork>>,
    pub liveness: crate::service::Liveness,
    /// The ids of the running engine's model files, stamped on every frame it judges.
    pub models: Arc<ModelIds>,
    /// Model swaps accepted on reload.
    pub swaps: Receiver<DeviceSwap>,
    /// Whether the archive or the live view wants frames' pixels and masks
    /// on the host, read once per frame.
    pub pixel_demand: Arc<PixelDemand>,
    /// Batches made and the frames in them, for the run summary and `bench`.
    pub batch_counts: Arc<BatchCounts>,
    /// Where the cameras' ring slots grow their memory: the path's
    /// page-locked allocator is installed here once it is open.
    pub slot_memory: SlotMemory,
}

impl DeviceStage {
    /// Starts the device thread: it opens the path (so the stream, buffers
    /// and engines belong to it; each model is opened once), warms it up on
    /// frames of `warm_up` size (`warm_up_path`) and reports the models'
    /// geometry, or the start error, before this returns.
    pub fn spawn(
        self,
        config: &Config,
        plan: DevicePlan,
        warm_up: WarmUpSize,
    ) -> Result<(JoinHandle<EndOfStream>, DeviceStarted), DeviceStartFailed> {
        let config = config.clone();
        let frames_in_flight = config.inference.frames_in_flight;
        type Start = Result<DeviceStarted, (DeviceFrameError, Option<Box<DeviceStage>>)>;
        let (started_tx, started_rx) = bounded::<Start>(1);
        let handle = std::thread::Builder::new()
            .name("device".to_string())
            .spawn(move || match open_path(&config, plan) {
                Ok(mut opened) => {
                    let kind = opened.path.kind();
                    // Before capture starts (it waits for this thread's start
                    // message): every slot's first frame lands in page-locked memory.
                    if let Some(allocator) = opened.path.slot_allocator() {
                        self.slot_memory.install(allocator);
                        log::info!(target: "sealcheck::pipeline", zero_copy = config.inference.zero_copy.map_or("default", |z| if z { "true" } else { "false" });
                            "device stage: ring slots in page-locked memory, read by the GPU where capture wrote them");
                        prepare_slots(&self.slot_memory, warm_up);
                    }
                    let started = Instant::now();
                    let frame = WarmUpFrame::new(warm_up, &opened.geometry);
                    let frame = frame.view();
                    let depth = opened.path.max_in_flight().min(frames_in_flight).max(1);
                    let batching = BatchPolicy {
                        max_batch: opened.path.max_batch().min(config.inference.max_batch).max(1),
                        wait: config.inference.batch_wait,
                    };
                    if config.inference.max_batch > 1 && batching.max_batch == 1 {
                        log::info!(target: "sealcheck::pipeline", max_batch = config.inference.max_batch;
                            "the models have a batch dimension of 1: frames are judged one after another (export them with a dynamic batch to judge frames ready at once in one run)");
                    }
                    let mut work = FrameWork::new(&opened.geometry);
                    let host_mask = self.pixel_demand.wanted();
                    let sizes = (depth, batching.max_batch);
                    match warm_up_path(opened.path.as_mut(), frame, sizes, host_mask, &mut work) {
                        Ok(frames) => {
                            log::info!(target: "sealcheck::pipeline", engine = kind.as_str(), path = "device",
                                frames = frames, max_batch = batching.max_batch, width = frame.width, height = frame.height, size_from = warm_up.origin(),
                                ms = started.elapsed().as_secs_f64() * 1e3;
                                "engines warmed up before the start");
                        }
                        Err(e) => {
                            let _ = started_tx.send(Err((e, None)));
                            return EndOfStream::Stopped;
                        }
                    }
                    let _ = started_tx.send(Ok(DeviceStarted {
                        kind,
                        geometry: opened.geometry,
                        max_batch: batching.max_batch,
                        reason: opened.reason,
                        swap_opener: opened.path.swap_opener(),
                    }));
                    log::info!(target: "sealcheck::pipeline", backend = kind.as_str();
                        "device stage: preprocessing, both models and the mask on one CUDA stream");
                    self.run(opened.path.as_mut(), frames_in_flight, batching)
                }
                Err(e) => {
                    // `auto` may go on in host mode: hand the channels back.
                    let back =
                        (plan == DevicePlan::Auto && e.is_engine_unavailable()).then(|| Box::new(self));
                    let _ = started_tx.send(Err((e, back)));
                    EndOfStream::Stopped
                }
            })
            .map_err(|e| DeviceStartFailed {
                error: DeviceFrameError::Spawn(e),
                stage: None,
            })?;
        match started_rx.recv() {
            Ok(Ok(started)) => Ok((handle, started)),
            Ok(Err((error, stage))) => {
                let _ = handle.join();
                Err(DeviceStartFailed { error, stage })
            }
            Err(_) => Err(DeviceStartFailed {
                error: DeviceFrameError::StartLost,
                stage: None,
            }),
        }
    }

    /// Runs until capture ends, with up to `frames_in_flight` batches on the
    /// GPU (as far as the path allows), each of up to `batching.max_batch`
    /// frames (as far as the path allows); returns how it ended.
    pub fn run(
        self,
        path: &mut dyn DeviceFramePath,
        frames_in_flight: usize,
        batching: BatchPolicy,
    ) -> EndOfStream {
        let DeviceStage {
            mut input,
            output,
            free_work,
            liveness,
            models,
            swaps,
            pixel_demand,
            batch_counts,
            slot_memory: _,
        } = self;
        let depth = path.max_in_flight().min(frames_in_flight).max(1);
        let mut batches = DeviceBatches {
            on_gpu: OnGpu::with_capacity(depth, batching.max_batch),
            path,
            depth,
            max_batch: batching.max_batch,
            traffic_logged: false,
            output,
            free_work,
            liveness,
            models,
            swaps,
            pixel_demand,
            reading: VecDeque::with_capacity((depth + 1) * batching.max_batch.max(1)),
            spans: super::gpu_spans::GpuSpans::default(),
        };
        let end = Batcher::new(batching, batch_counts).run(&mut input, &mut batches);
        // Nothing may read a slot once it is back with capture, or freed.
        batches.hand_back_all(&mut input);
        if let Some(spans) = batches.spans.summary() {
            log::info!(target: "sealcheck::pipeline", spans = spans.as_str();
                "device stage: GPU time per batch, from CUDA events");
        }
        // A swap prepared too late is dropped here, while the path (whose
        // stream a prepared engine may name) still exists.
        for late in batches.swaps.try_iter() {
            drop(late);
        }
        end
    }
}

/// What the device path does with a batch: each frame is staged (upload and
/// frame kernel) as the batcher hands it over, and its ring slot goes back
/// to capture at once; the batch is launched (both models, mask, copies
/// back) when gathered, and completed later, oldest first, when the GPU
/// holds `depth` batches, when nothing is waiting in the rings, or before a
/// marker, the end or a model swap.
struct DeviceBatches<'p> {
    path: &'p mut dyn DeviceFramePath,
    on_gpu: OnGpu,
    /// Batches the GPU may hold at once.
    depth: usize,
    /// `[inference] max_batch` as the path allows it (the traffic line).
    max_batch: usize,
    traffic_logged: bool,
    output: Sender<StageMessage>,
    free_work: Receiver<Box<FrameWork>>,
    liveness: crate::service::Liveness,
    models: Arc<ModelIds>,
    swaps: Receiver<DeviceSwap>,
    pixel_demand: Arc<PixelDemand>,
    /// Ring slots the GPU may still read (uploaded from, or read in place),
    /// with their staging numbers, oldest first: handed back to capture once
    /// `reads_done` passes them, never before.
    #[allow(clippy::vec_box)]
    reading: VecDeque<(u64, Box<FrameSlot>)>,
    /// The completed batches' GPU spans, logged at the end.
    spans: super::gpu_spans::GpuSpans,
}

impl BatchPath<PartRings> for DeviceBatches<'_> {
    type End = EndOfStream;

    fn capacity(&self) -> usize {
        self.path.max_batch()
    }

    /// With a batch on the GPU, take only a frame that is already waiting:
    /// a result must not wait for a slow camera's next frame.
    fn first_wait(&self) -> Duration {
        if self.on_gpu.is_empty() {
            IDLE_WAIT
        } else {
            Duration::ZERO
        }
    }

    /// Nothing waiting: the oldest batch on the GPU is finished now.
    fn idle(&mut self) -> ControlFlow<EndOfStream> {
        stopped_unless(self.finish_oldest())
    }

    fn begin(&mut self, first: &Box<FrameSlot>) -> ControlFlow<EndOfStream> {
        if !self.take_swap(first.meta.seq) {
            return ControlFlow::Break(EndOfStream::Stopped);
        }
        if self.on_gpu.batches() >= self.depth && !self.finish_oldest() {
            return ControlFlow::Break(EndOfStream::Stopped);
        }
        if !self.traffic_logged {
            self.traffic_logged = true;
            let t = self.path.traffic(&first.image());
            log::info!(target: "sealcheck::pipeline", host_to_device = t.host_to_device,
                device_to_host = t.device_to_host, host_mask_extra = t.host_mask,
                width = first.width, height = first.height, frames_in_flight = self.depth,
                max_batch = self.max_batch;
                "device stage: bytes copied per frame (host_mask_extra: more out while the archive or the live view wants masks)");
        }
        ControlFlow::Continue(())
    }

    /// Stages `slot`'s frame as the next of the batch being built (its work
    /// record joins `on_gpu`); the slot goes back to capture at once when
    /// its bytes were copied, else once the GPU has read them.
    fn add(&mut self, rings: &mut PartRings, slot: Box<FrameSlot>) -> ControlFlow<EndOfStream> {
        let taken = Instant::now();
        let mut work = match self.free_work.try_recv() {
            Ok(work) => work,
            Err(_) => {
                // Every work record is out: finishing a batch on the GPU
                // may be what gives one back.
                if !self.finish_oldest() {
                    return ControlFlow::Break(EndOfStream::Stopped);
                }
                let Ok(work) = self.free_work.recv() else {
                    return ControlFlow::Break(EndOfStream::Stopped);
                };
                work
            }
        };
        work.reset(slot.meta);
        work.timings.stamps.in_slot = slot.in_slot;
        work.timings.stamps.taken = Some(taken);
        work.models = Some(Arc::clone(&self.models));
        // No host pass over the frame: the GPU reads the page-locked slot
        // (a copy only while the archive or the live view wants it, or for
        // a frame due to the shadow).
        let host_copy = self.pixel_demand.wanted_for(slot.meta.seq);
        let placement = slot.data.placement();
        let staged = self.path.stage(slot.image(), placement, host_copy);
        // After the stage: the GPU works on the frame while it is copied.
        if host_copy {
            work.pixels.copy_from(&slot);
        }
        match staged {
            Ok(Some(number)) => self.reading.push_back((number, slot)),
            Ok(None) => rings.recycle(slot),
            // A failed stage leaves the frame out of the batch: its error
            // marks it. Nothing of it is left on the GPU.
            Err(e) => {
                work.error = Some((e.failed_stage(), e.to_string()));
                rings.recycle(slot);
            }
        }
        self.on_gpu.stage(work);
        self.hand_back(rings);
        ControlFlow::Continue(())
    }

    /// The slots the GPU has finished reading go back to capture, oldest
    /// first (reads end in staging order).
    fn hand_back(&mut self, rings: &mut PartRings) {
        if self.reading.is_empty() {
            return;
        }
        let done = match self.path.reads_done() {
            Ok(done) => done,
            Err(e) => {
                // Kept until the end (`hand_back_all` waits for every read).
                log::warn!(target: "sealcheck::pipeline", error:% = e; "could not ask the GPU whether a frame's upload is done; its ring slot is kept");
                return;
            }
        };
        while self.reading.front().is_some_and(|(n, _)| *n < done) {
            if let Some((_, slot)) = self.reading.pop_front() {
                rings.recycle(slot);
            }
        }
    }

    fn gathered(&self) -> usize {
        self.on_gpu.staged()
    }

    fn run(&mut self) -> Result<BatchRuns, EndOfStream> {
        let launched = self.path.launch();
        Ok(self
            .on_gpu
            .launched(launched.err().as_ref(), Instant::now()))
    }

    /// Sends on a marker, or the end, once every frame before it is judged.
    fn pass_on(&mut self, message: NotAFrame<EndOfStream>) -> ControlFlow<EndOfStream> {
        if !self.finish_all() {
            return ControlFlow::Break(EndOfStream::Stopped);
        }
        match message {
            NotAFrame::Marker(message) => stopped_unless(self.output.send(message).is_ok()),
            NotAFrame::End(end) => {
                let _ = self.output.send(StageMessage::End);
                ControlFlow::Break(end)
            }
        }
    }

    /// The rings never close: their end comes as `NotAFrame::End`.
    fn closed(&mut self) -> EndOfStream {
        EndOfStream::Stopped
    }
}

/// Allocates every ring slot's page-locked memory now, before capture
/// starts, where the source's frame size is known (`WarmUpSize::Source`):
/// otherwise each slot allocates it at its first frame, on capture's
/// thread, and a run's first frames waited for it (8 cameras on the H100:
/// frames 0 to 12 of each camera up to 40 ms, docs/PERFORMANCE-gpu-pipeline.md).
fn prepare_slots(memory: &SlotMemory, size: WarmUpSize) {
    let Some(bytes) = size.rgb_frame_bytes() else {
        log::info!(target: "sealcheck::pipeline",
            "device stage: the frame size is not known before the start; each ring slot allocates its page-locked memory at its first frame");
        return;
    };
    let started = Instant::now();
    match memory.prepare(bytes) {
        Ok(blocks) => log::info!(target: "sealcheck::pipeline", slots = blocks, bytes = bytes,
            ms = started.elapsed().as_secs_f64() * 1e3;
            "device stage: every ring slot's page-locked memory allocated before the start"),
        Err(e) => log::warn!(target: "sealcheck::pipeline", error = e.as_str(), bytes = bytes;
            "device stage: page-locked memory for the ring slots could not all be allocated before the start; the rest allocate it at their first frame"),
    }
}

/// Goes on while `alive` (the output stage still takes results), else the
/// run stops.
fn stopped_unless(alive: bool) -> ControlFlow<EndOfStream> {
    match alive {
        true => ControlFlow::Continue(()),
        false => ControlFlow::Break(EndOfStream::Stopped),
    }
}

impl DeviceBatches<'_> {
    /// At the end of the run: waits until the GPU has read every slot it
    /// holds, then hands them all back.
    fn hand_back_all(&mut self, rings: &mut PartRings) {
        if self.reading.is_empty() {
            return;
        }
        if let Err(e) = self.path.wait_reads() {
            log::error!(target: "sealcheck::pipeline", error:% = e; "waiting for the frames' uploads at the end failed");
        }
        for (_, slot) in self.reading.drain(..) {
            rings.recycle(slot);
        }
    }

    /// Swaps in new models before frame `seq` when a swap is waiting: the
    /// frames on the GPU are completed by the old engine first, so none is
    /// lost or judged twice; frames from `seq` on carry the new ids. `false`
    /// when the output stage is gone.
    fn take_swap(&mut self, seq: u64) -> bool {
        let Some(swap) = self.swaps.try_iter().last() else {
            return true;
        };
        let paused = Instant::now();
        if !self.finish_all() {
            return false;
        }
        match self.path.swap_engine(swap.engine) {
            Ok(()) => {
                log::info!(target: "sealcheck::infer", first_seq = seq,
                    segmentation = swap.models.segmentation.as_str(), classifier = swap.models.classifier.as_str(),
                    previous_segmentation = self.models.segmentation.as_str(), previous_classifier = self.models.classifier.as_str(),
                    pause_ms = paused.elapsed().as_secs_f64() * 1e3;
                    "models swapped on the device path: frames from first_seq on are judged by the new models");
                self.models = swap.models;
                if let Some(swapped) = swap.on_swapped {
                    swapped();
                }
            }
            Err(e) => {
                log::error!(target: "sealcheck::model_swap", step = "bind", error:% = e,
                    segmentation = swap.models.segmentation.as_str(), classifier = swap.models.classifier.as_str();
                    "model swap refused at step `bind`: the new engine could not be bound to the device path's tensors; the running models stay");
            }
        }
        true
    }

    /// Completes every batch on the GPU, oldest first; `false` when the
    /// output stage is gone.
    fn finish_all(&mut self) -> bool {
        while self.on_gpu.batches() > 0 {
            if !self.finish_oldest() {
                return false;
            }
        }
        true
    }

    /// Completes the oldest batch on the GPU (if any) and sends its frames'
    /// results on, in the order they were staged; `false` when the output
    /// stage is gone.
    fn finish_oldest(&mut self) -> bool {
        let frames = self.on_gpu.oldest_batch();
        let mut timed = false;
        for _ in 0..frames {
            let Some(mut work) = self.on_gpu.pop_oldest() else {
                break;
            };
            // An error here is the stage's or the launch's: that frame never
            // reached the GPU's models.
            if work.error.is_none() {
                match self.path.complete(&mut work) {
                    Ok(t) => {
                        if !timed {
                            // Every frame of a batch carries the batch's spans.
                            self.spans.record(&t, frames);
                            timed = true;
                        }
                        work.timings.preprocess_ms = t.preprocess_ms;
                        work.timings.segment_ms = t.segment_ms;
                        work.timings.classify_ms = t.classify_ms;
                        work.timings.stamps.done = Some(Instant::now());
                        if let Err(e) = super::model_io::check_classifier_output(&work.cls_logits) {
                            work.error = Some((FailedStage::Classify, e.to_string()));
                        }
                    }
                    Err(e) => work.error = Some((e.failed_stage(), e.to_string())),
                }
            }
            self.liveness.frame_preprocessed();
            self.liveness.frame_inferred();
            if self.output.send(StageMessage::Inspect(work)).is_err() {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::capture::CaptureEvent;
    use crate::config::OverflowPolicy;
    use crate::frame::{PixelLayout, TensorGeometry};
    use crate::frame_bytes::SlotMemory;
    use crate::gpu::Stream;
    use crate::infer::backend::BackendKind;
    use crate::infer::device_path::{BoundTensors, DeviceEngine, SwapSite};
    use crate::infer::model_role::ModelRole;
    use crate::ring::frame_ring;

    const ONE_AT_A_TIME: BatchPolicy = BatchPolicy {
        max_batch: 1,
        wait: Duration::ZERO,
    };

    const TINY: TensorGeometry = TensorGeometry {
        seg_hw: (4, 4),
        seg_classes: 2,
        cls_hw: (2, 2),
        cls_classes: 2,
    };

    /// Test double: new models of engine `generation`; binding them makes
    /// that generation the one `bound` names (the fake path's engine).
    struct FakeCandidate {
        generation: u64,
        bound: Arc<AtomicU64>,
    }

    impl DeviceCandidate for FakeCandidate {
        fn geometry(&self) -> TensorGeometry {
            TINY
        }
        fn warm_up(&mut self) -> Result<(), DeviceFrameError> {
            Ok(())
        }
        unsafe fn bind(
            self: Box<Self>,
            _tensors: BoundTensors,
        ) -> Result<Box<dyn DeviceEngine>, DeviceFrameError> {
            self.bound.store(self.generation, Ordering::SeqCst);
            Ok(Box::new(FakeEngine))
        }
    }

    /// Test double: the engine a `FakeCandidate` binds into; the fake path
    /// judges frames itself, so nothing is ever queued on it.
    struct FakeEngine;

    impl DeviceEngine for FakeEngine {
        fn kind(&self) -> BackendKind {
            BackendKind::OnnxRuntimeCuda
        }
        fn max_batch(&self) -> usize {
            1
        }
        fn enqueue(
            &mut self,
            _role: ModelRole,
            _stream: &Stream,
            _frames: usize,
        ) -> Result<(), DeviceFrameError> {
            Err(DeviceFrameError::Unsupported("a test double's engine"))
        }
        fn swap_opener(&self, _site: SwapSite) -> Arc<dyn DeviceModelsOpener> {
            unreachable!("the fake path has no swap opener")
        }
    }

    /// Test double: a "GPU" that answers from the frame's first byte plus
    /// 1000 times its engine's generation (as at stage), so the test sees
    /// which frame each result came from and which engine judged it, and
    /// holds up to `depth` batches of up to `max_batch` frames like a stream
    /// would. Like the device runner, it refuses a swap with frames in flight.
    struct FakeDevicePath {
        /// Launched batches, oldest first: per frame its first byte, engine
        /// generation, and whether the mask was asked for.
        queued: VecDeque<Vec<(u8, u64, bool)>>,
        /// The batch being staged.
        staging: Vec<(u8, u64, bool)>,
        depth: usize,
        max_batch: usize,
        most_in_flight: usize,
        /// The size of every batch launched.
        batch_sizes: Vec<usize>,
        /// The generation of the engine bound last (`FakeCandidate::bind`).
        generation: Arc<AtomicU64>,
        /// When the frame with this first byte is submitted, this swap is
        /// sent (a reload finishing while frames are on the GPU).
        swap_on: Option<(u8, Sender<DeviceSwap>, DeviceSwap)>,
        /// `Some`: frames are read in place, like page-locked ring slots,
        /// and the reads end late: only the first `released` frames staged
        /// are read (the test moves it; the stand-in for the slots' events).
        released: Option<Arc<AtomicU64>>,
        /// Frames staged so far (each one's staging number).
        staged: u64,
    }

    impl FakeDevicePath {
        fn new(depth: usize) -> Self {
            Self::batching(depth, 1)
        }

        fn batching(depth: usize, max_batch: usize) -> Self {
            FakeDevicePath {
                queued: VecDeque::new(),
                staging: Vec::new(),
                depth,
                max_batch,
                most_in_flight: 0,
                batch_sizes: Vec::new(),
                generation: Arc::default(),
                swap_on: None,
                released: None,
                staged: 0,
            }
        }
    }

    impl DeviceFramePath for FakeDevicePath {
        fn kind(&self) -> BackendKind {
            BackendKind::OnnxRuntimeCuda
        }
        fn geometry(&self) -> TensorGeometry {
            TINY
        }
        fn max_batch(&self) -> usize {
            self.max_batch
        }
        fn stage(
            &mut self,
            frame: ImageView<'_>,
            _placement: HostPlacement,
            host_mask: bool,
        ) -> Result<Option<u64>, DeviceFrameError> {
            assert!(
                self.queued.len() < self.depth,
                "a batch staged while the most batches are in flight"
            );
            assert!(
                self.staging.len() < self.max_batch,
                "more frames staged than a batch holds"
            );
            let first = frame.data.first().copied().unwrap_or_default();
            if first == 0xDD {
                return Err(DeviceFrameError::Unsupported("a frame refused at staging"));
            }
            let number = self.staged;
            self.staged += 1;
            let generation = self.generation.load(Ordering::SeqCst);
            self.staging.push((first, generation, host_mask));
            if self.swap_on.as_ref().is_some_and(|(on, ..)| *on == first)
                && let Some((_, to_stage, swap)) = self.swap_on.take()
            {
                to_stage.send(swap).unwrap();
            }
            Ok(self.released.is_some().then_some(number))
        }
        fn reads_done(&mut self) -> Result<u64, DeviceFrameError> {
            Ok(match &self.released {
                Some(released) => released.load(Ordering::SeqCst).min(self.staged),
                None => u64::MAX,
            })
        }
        fn wait_reads(&mut self) -> Result<(), DeviceFrameError> {
            if let Some(released) = &self.released {
                released.fetch_max(self.staged, Ordering::SeqCst);
            }
            Ok(())
        }
        fn launch(&mut self) -> Result<(), DeviceFrameError> {
            if self.staging.is_empty() {
                return Ok(());
            }
            let batch = std::mem::take(&mut self.staging);
            self.batch_sizes.push(batch.len());
            self.queued.push_back(batch);
            self.most_in_flight = self.most_in_flight.max(self.queued.len());
            Ok(())
        }
        fn complete(&mut self, work: &mut FrameWork) -> Result<GpuTimings, DeviceFrameError> {
            let Some(batch) = self.queued.front_mut() else {
                return Err(DeviceFrameError::Unsupported("nothing launched"));
            };
            let (first, generation, host_mask) = batch.remove(0);
            if batch.is_empty() {
                self.queued.pop_front();
            }
            if first == 0xEE {
                return Err(DeviceFrameError::Unsupported("a failing frame"));
            }
            work.mask_pixels = u64::from(first) + 1000 * generation;
            work.cls_logits.fill(f32::from(first));
            if host_mask {
                work.mask.fill(f32::from(first));
            }
            Ok(GpuTimings {
                upload_ms: 0.5,
                preprocess_ms: 1.0,
                segment_ms: 2.0,
                classify_ms: 3.0,
                batch_ms: 7.0,
            })
        }
        fn traffic(&self, frame: &ImageView<'_>) -> FrameTraffic {
            FrameTraffic {
                host_to_device: frame.data.len(),
                device_to_host: 16,
                host_mask: 0,
            }
        }
        fn max_in_flight(&self) -> usize {
            self.depth
        }
        fn swap_engine(
            &mut self,
            candidate: Box<dyn DeviceCandidate>,
        ) -> Result<(), DeviceFrameError> {
            if !self.queued.is_empty() || !self.staging.is_empty() {
                return Err(DeviceFrameError::Swap(format!(
                    "{} batch(es) still on the stream",
                    self.queued.len()
                )));
            }
            let tensor = crate::gpu::DeviceTensor {
                ptr: 0,
                len: 0,
                element: crate::gpu::TensorElement::F32,
            };
            let tensors = BoundTensors {
                seg_input: tensor,
                seg_logits: tensor,
                cls_input: tensor,
                cls_logits: tensor,
                frames: 1,
            };
            // SAFETY: a test double's candidate never touches the tensors.
            unsafe { candidate.bind(tensors) }.map(drop)
        }
    }

    fn ids(segmentation: &str, classifier: &str) -> Arc<ModelIds> {
        Arc::new(ModelIds {
            segmentation: segmentation.to_string(),
            classifier: classifier.to_string(),
        })
    }

    /// A device stage reading a fresh ring of `slots` frame slots, with
    /// `records` work records: the ring's producer, the stage, where work
    /// records go back, and the stage's output.
    fn stage_over_ring(
        slots: usize,
        records: usize,
    ) -> (
        crate::capture::RingProducer,
        DeviceStage,
        Sender<Box<FrameWork>>,
        Receiver<StageMessage>,
        Sender<DeviceSwap>,
    ) {
        let geometry = TINY;
        let (producer, consumer) = frame_ring(slots);
        let (free_tx, free_rx) = bounded(records);
        for _ in 0..records {
            free_tx.send(Box::new(FrameWork::new(&geometry))).unwrap();
        }
        let (out_tx, out_rx) = bounded(16);
        let (swap_tx, swap_rx) = bounded(1);
        let stage = DeviceStage {
            input: PartRings::free(crate::capture::CameraRings::new(vec![consumer])),
            output: out_tx,
            free_work: free_rx,
            liveness: crate::service::Liveness::new(),
            models: ids("old-seg", "old-cls"),
            swaps: swap_rx,
            pixel_demand: Arc::default(),
            batch_counts: Arc::default(),
            slot_memory: SlotMemory::new(),
        };
        (producer, stage, free_tx, out_rx, swap_tx)
    }

    fn tiny_frame(producer: &mut crate::capture::RingProducer, seq: u64, first: u8) {
        let mut slot = producer.acquire_slot(OverflowPolicy::Block).unwrap();
        slot.meta.seq = seq;
        slot.width = 2;
        slot.height = 1;
        slot.stride = 6;
        slot.layout = PixelLayout::Rgb;
        slot.data.clear();
        slot.data.extend_from_slice(&[first, 0, 0, 0, 0, 0]);
        producer.push(CaptureEvent::Frame(slot));
    }

    /// The stage's output until its end: per frame (seq, mask pixels,
    /// failed), per drop marker (first seq, count, true); work records go
    /// back as they come.
    fn results_until_the_end(
        out_rx: &Receiver<StageMessage>,
        free_tx: &Sender<Box<FrameWork>>,
    ) -> Vec<(u64, u64, bool)> {
        let mut seen = Vec::new();
        loop {
            match out_rx.recv_timeout(Duration::from_secs(10)).unwrap() {
                StageMessage::Inspect(work) => {
                    seen.push((work.meta.seq, work.mask_pixels, work.error.is_some()));
                    // The stage may already have ended after the last frame.
                    let _ = free_tx.send(work);
                }
                StageMessage::NotInspected { first, count } => seen.push((first.seq, count, true)),
                StageMessage::End => return seen,
                StageMessage::CaptureFailed { .. } => panic!("no capture failure was sent"),
                StageMessage::PartMissed { .. } => panic!("no trigger was sent"),
            }
        }
    }

    /// Runs a stream queued up in full (three frames, a run of two drops,
    /// three frames, one failing) through a path that can hold two frames,
    /// allowed `frames_in_flight`; returns what came out and the most frames
    /// the path held at once.
    fn run_queued(frames_in_flight: usize) -> (Vec<(u64, u64, bool)>, usize) {
        let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(8, 3);
        // Everything is in the ring before the stage starts: it can always
        // stage the next frame while one is on the "GPU".
        for (seq, first) in [(0u64, 10u8), (1, 11), (2, 12)] {
            tiny_frame(&mut producer, seq, first);
        }
        let meta = crate::frame::FrameMeta::now(3);
        producer.push(CaptureEvent::Dropped { meta, count: 2 });
        for (seq, first) in [(5u64, 15u8), (6, 0xEE), (7, 17)] {
            tiny_frame(&mut producer, seq, first);
        }
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        let handle = std::thread::spawn(move || {
            let mut path = FakeDevicePath::new(2);
            let end = stage.run(&mut path, frames_in_flight, ONE_AT_A_TIME);
            (end, path.most_in_flight)
        });
        let seen = results_until_the_end(&out_rx, &free_tx);
        let (end, most_in_flight) = handle.join().unwrap();
        assert_eq!(end, EndOfStream::Finished);
        (seen, most_in_flight)
    }

    #[test]
    fn two_frames_in_flight_keep_capture_order_and_markers_in_place() {
        let expected = vec![
            (0, 10, false),
            (1, 11, false),
            (2, 12, false),
            (3, 2, true),
            (5, 15, false),
            (6, 0, true),
            (7, 17, false),
        ];
        let (seen, most_in_flight) = run_queued(2);
        assert_eq!(
            most_in_flight, 2,
            "the next frame was staged while one was on the GPU"
        );
        assert_eq!(seen, expected);
        let (seen, most_in_flight) = run_queued(1);
        assert_eq!(most_in_flight, 1, "frames_in_flight = 1 is obeyed");
        assert_eq!(seen, expected);
    }

    #[test]
    fn frames_waiting_together_are_judged_in_batches_with_markers_after_their_batch() {
        let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(16, 10);
        let counts = Arc::clone(&stage.batch_counts);
        // All queued before the stage starts: 0..=4 fill a batch of 3 and
        // start the next; a drop marker stops that one at two frames (one of
        // them refused at staging); then 7 and 8 come together, then the end.
        for (seq, first) in [(0u64, 10u8), (1, 11), (2, 12), (3, 13), (4, 0xDD)] {
            tiny_frame(&mut producer, seq, first);
        }
        let meta = crate::frame::FrameMeta::now(5);
        producer.push(CaptureEvent::Dropped { meta, count: 2 });
        for (seq, first) in [(7u64, 17u8), (8, 18)] {
            tiny_frame(&mut producer, seq, first);
        }
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        let handle = std::thread::spawn(move || {
            let mut path = FakeDevicePath::batching(2, 3);
            let policy = BatchPolicy {
                max_batch: 8,
                wait: Duration::ZERO,
            };
            let end = stage.run(&mut path, 2, policy);
            (end, path.batch_sizes)
        });
        let seen = results_until_the_end(&out_rx, &free_tx);
        let (end, batch_sizes) = handle.join().unwrap();
        assert_eq!(end, EndOfStream::Finished);
        assert_eq!(
            batch_sizes,
            vec![3, 1, 2],
            "the path's max_batch (3) bounds a batch; a marker ends one; a refused frame is left out"
        );
        assert_eq!(
            seen,
            vec![
                (0, 10, false),
                (1, 11, false),
                (2, 12, false),
                (3, 13, false),
                (4, 0, true),
                (5, 2, true),
                (7, 17, false),
                (8, 18, false),
            ],
            "one result per frame in capture order, the marker behind the frames before it"
        );
        assert_eq!(counts.snapshot(), (3, 6), "3 engine runs judged 6 frames");
    }

    #[test]
    fn frames_go_through_in_order_with_gpu_timings_and_errors_marked() {
        let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 2);
        // Two may be in flight, but each frame comes alone: its result must
        // not wait for the next frame.
        let handle =
            std::thread::spawn(move || stage.run(&mut FakeDevicePath::new(2), 2, ONE_AT_A_TIME));
        let mut results = Vec::new();
        for (seq, first) in [(0u64, 7u8), (1, 0xEE), (2, 9)] {
            tiny_frame(&mut producer, seq, first);
            match out_rx.recv_timeout(Duration::from_secs(10)).unwrap() {
                StageMessage::Inspect(work) => {
                    results.push((
                        work.meta.seq,
                        work.mask_pixels,
                        work.timings.segment_ms,
                        work.error.is_some(),
                    ));
                    free_tx.send(work).unwrap();
                }
                _ => panic!("expected an inspected frame"),
            }
        }
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        assert!(matches!(out_rx.recv().unwrap(), StageMessage::End));
        assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
        assert_eq!(
            results,
            vec![(0, 7, 2.0, false), (1, 0, 0.0, true), (2, 9, 2.0, false)]
        );
    }

    #[test]
    fn pixels_and_the_mask_come_back_only_while_someone_wants_them() {
        let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 2);
        let demand = Arc::clone(&stage.pixel_demand);
        let handle =
            std::thread::spawn(move || stage.run(&mut FakeDevicePath::new(2), 2, ONE_AT_A_TIME));
        let mut seen = Vec::new();
        for (seq, first, wanted) in [(0u64, 7u8, false), (1, 8, true), (2, 9, false)] {
            demand.set_archive(wanted);
            tiny_frame(&mut producer, seq, first);
            let StageMessage::Inspect(mut work) =
                out_rx.recv_timeout(Duration::from_secs(10)).unwrap()
            else {
                panic!("expected an inspected frame");
            };
            seen.push((
                work.meta.seq,
                work.pixels.valid,
                work.pixels.valid.then(|| work.pixels.data[0]),
                work.mask[0],
            ));
            work.mask.fill(0.0);
            free_tx.send(work).unwrap();
        }
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        assert!(matches!(out_rx.recv().unwrap(), StageMessage::End));
        assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
        assert_eq!(
            seen,
            vec![
                (0, false, None, 0.0),
                (1, true, Some(8), 8.0),
                (2, false, None, 0.0),
            ]
        );
    }

    #[test]
    fn a_swap_waits_for_the_frames_on_the_gpu_and_names_the_new_models_from_the_next_frame() {
        let (mut producer, stage, free_tx, out_rx, swap_tx) = stage_over_ring(8, 4);
        // All frames wait in the ring, so two are on the "GPU" when the swap
        // arrives (sent as frame 3 is submitted, behind frame 2).
        for seq in 0..7u64 {
            tiny_frame(&mut producer, seq, 10 + seq as u8);
        }
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        let swapped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let on_swapped = {
            let swapped = Arc::clone(&swapped);
            move || {
                swapped.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        };
        let (mut path, generation) = {
            let path = FakeDevicePath::new(2);
            let generation = Arc::clone(&path.generation);
            (path, generation)
        };
        let swap = DeviceSwap {
            engine: Box::new(FakeCandidate {
                generation: 1,
                bound: generation,
            }),
            models: ids("new-seg", "new-cls"),
            on_swapped: Some(Box::new(on_swapped)),
        };
        let handle = std::thread::spawn(move || {
            path.swap_on = Some((13, swap_tx, swap));
            let end = stage.run(&mut path, 2, ONE_AT_A_TIME);
            (end, path.most_in_flight)
        });
        let mut seen = Vec::new();
        loop {
            match out_rx.recv_timeout(Duration::from_secs(10)).unwrap() {
                StageMessage::Inspect(work) => {
                    let models = work
                        .models
                        .as_deref()
                        .expect("every frame names its models");
                    seen.push((
                        work.meta.seq,
                        work.mask_pixels,
                        models.segmentation.clone(),
                        models.classifier.clone(),
                    ));
                    let _ = free_tx.send(work);
                }
                StageMessage::End => break,
                _ => panic!("only frames were sent"),
            }
        }
        let (end, most_in_flight) = handle.join().unwrap();
        assert_eq!(end, EndOfStream::Finished);
        assert_eq!(most_in_flight, 2, "the swap arrived with frames in flight");
        let old = |seq: u64| (seq, 10 + seq, "old-seg".to_string(), "old-cls".to_string());
        let new = |seq: u64| {
            (
                seq,
                1010 + seq,
                "new-seg".to_string(),
                "new-cls".to_string(),
            )
        };
        // Frames 0..=3 were on the GPU by the time the swap was seen: the old
        // engine completes them; frame 4 on is the new engine's, with its ids.
        let expected: Vec<_> = (0..4).map(old).chain((4..7).map(new)).collect();
        assert_eq!(seen, expected);
        assert_eq!(swapped.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn the_start_up_warm_up_fills_every_in_flight_slot_and_leaves_nothing_on_the_gpu() {
        let geometry = TINY;
        let mut path = FakeDevicePath::new(2);
        let mut work = FrameWork::new(&geometry);
        let frame = WarmUpFrame::new(
            WarmUpSize::Source {
                width: 3,
                height: 2,
            },
            &geometry,
        );
        let frames = warm_up_path(&mut path, frame.view(), (2, 1), false, &mut work).unwrap();
        assert_eq!(frames, WARM_UP_ROUNDS * 2);
        assert_eq!(path.most_in_flight, 2, "both tickets were used");
        assert!(path.queued.is_empty(), "a camera frame finds the GPU idle");
        assert_eq!(work.mask_pixels, 128, "the frame was mid-grey");

        // The same path then judges camera frames as before.
        let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 2);
        let handle = std::thread::spawn(move || stage.run(&mut path, 2, ONE_AT_A_TIME));
        tiny_frame(&mut producer, 0, 7);
        let Ok(StageMessage::Inspect(first)) = out_rx.recv_timeout(Duration::from_secs(10)) else {
            panic!("the first camera frame was not judged");
        };
        assert_eq!((first.meta.seq, first.mask_pixels), (0, 7));
        free_tx.send(first).unwrap();
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        assert!(matches!(
            out_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            StageMessage::End
        ));
        assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
    }

    #[test]
    fn a_device_warm_up_that_fails_names_the_engine_and_the_step() {
        let geometry = TINY;
        let mut work = FrameWork::new(&geometry);
        // The fake fails a frame whose first byte is 0xEE when it completes.
        let failing = [0xEE, 0, 0];
        let frame = ImageView {
            width: 1,
            height: 1,
            stride: 3,
            layout: PixelLayout::Rgb,
            data: &failing,
        };
        let error =
            warm_up_path(&mut FakeDevicePath::new(2), frame, (2, 1), false, &mut work).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(
                error,
                DeviceFrameError::WarmUp {
                    engine: "onnxruntime-cuda",
                    step: "complete a frame",
                    ..
                }
            ),
            "{message}"
        );
        assert!(!error.is_engine_unavailable(), "auto must not hide it");
        assert!(message.contains("a failing frame"), "{message}");
    }

    /// Takes a free slot without waiting: `None` while every slot is out.
    fn free_slot(producer: &mut crate::capture::RingProducer) -> Option<Box<FrameSlot>> {
        producer.acquire_slot(OverflowPolicy::Drop)
    }

    /// Waits up to 5 s for a slot to come back to capture.
    fn slot_back_within_5s(producer: &mut crate::capture::RingProducer) -> Box<FrameSlot> {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(slot) = free_slot(producer) {
                return slot;
            }
            assert!(Instant::now() < until, "the slot never came back");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_slot_is_never_handed_back_to_capture_while_the_gpu_still_reads_it() {
        // Two slots, both frames staged and judged, but the GPU's reads of
        // their bytes (the stand-in for the slots' upload events) end late.
        let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 4);
        let released = Arc::new(AtomicU64::new(0));
        let mut path = FakeDevicePath::new(2);
        path.released = Some(Arc::clone(&released));
        let handle = std::thread::spawn(move || stage.run(&mut path, 2, ONE_AT_A_TIME));
        tiny_frame(&mut producer, 0, 10);
        tiny_frame(&mut producer, 1, 11);
        for seq in 0..2u64 {
            let StageMessage::Inspect(work) = out_rx.recv_timeout(Duration::from_secs(10)).unwrap()
            else {
                panic!("expected an inspected frame");
            };
            assert_eq!(work.meta.seq, seq);
            free_tx.send(work).unwrap();
        }
        // Both results are out, and the stage has idled since (it hands
        // slots back after each idle wait): still no slot is free.
        std::thread::sleep(IDLE_WAIT + Duration::from_millis(100));
        assert!(
            free_slot(&mut producer).is_none(),
            "a slot went back to capture while the GPU still read it"
        );
        // The first frame's read ends: its slot, and only it, comes back.
        released.store(1, Ordering::SeqCst);
        let first = slot_back_within_5s(&mut producer);
        assert_eq!(first.data[0], 10, "the slot of the frame read first");
        assert!(
            free_slot(&mut producer).is_none(),
            "the second is still read"
        );
        released.store(2, Ordering::SeqCst);
        let second = slot_back_within_5s(&mut producer);
        assert_eq!(second.data[0], 11);
        drop((first, second));
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        assert!(matches!(
            out_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            StageMessage::End
        ));
        assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
    }

    #[test]
    fn at_the_end_every_read_is_waited_for_and_every_slot_handed_back() {
        let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(3, 4);
        let released = Arc::new(AtomicU64::new(0));
        let mut path = FakeDevicePath::new(2);
        path.released = Some(Arc::clone(&released));
        for seq in 0..3u64 {
            tiny_frame(&mut producer, seq, 20 + seq as u8);
        }
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        let handle = std::thread::spawn(move || {
            let end = stage.run(&mut path, 2, ONE_AT_A_TIME);
            (end, path.staged)
        });
        let seen = results_until_the_end(&out_rx, &free_tx);
        let (end, staged) = handle.join().unwrap();
        assert_eq!(end, EndOfStream::Finished);
        assert_eq!(seen.len(), 3);
        assert_eq!(
            released.load(Ordering::SeqCst),
            staged,
            "the stage waited for every read before handing the slots back"
        );
    }

    /// Test double for page-locked memory: heap blocks that count how many
    /// are alive and how many were made.
    struct CountingHostMemory {
        live: Arc<AtomicU64>,
        made: Arc<AtomicU64>,
    }

    struct CountedBlock {
        bytes: Box<[u8]>,
        live: Arc<AtomicU64>,
    }

    impl crate::frame_bytes::HostBlock for CountedBlock {
        fn as_ptr(&self) -> *mut u8 {
            self.bytes.as_ptr().cast_mut()
        }
        fn capacity(&self) -> usize {
            self.bytes.len()
        }
        fn placement(&self) -> HostPlacement {
            HostPlacement::Pinned
        }
    }

    impl Drop for CountedBlock {
        fn drop(&mut self) {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl crate::frame_bytes::HostAllocator for CountingHostMemory {
        fn allocate(&self, bytes: usize) -> Result<Box<dyn crate::frame_bytes::HostBlock>, String> {
            self.live.fetch_add(1, Ordering::SeqCst);
            self.made.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(CountedBlock {
                bytes: vec![0; bytes].into_boxed_slice(),
                live: Arc::clone(&self.live),
            }))
        }
    }

    #[test]
    fn slot_memory_is_kept_across_a_model_swap_and_freed_when_the_device_path_is_torn_down() {
        let (live, made) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let memory = SlotMemory::new();
        let (producer, consumer) = crate::ring::frame_ring_in(3, &memory);
        let (mut producer, stage, free_tx, out_rx, swap_tx) = {
            let (_, mut stage, free_tx, out_rx, swap_tx) = stage_over_ring(3, 8);
            stage.input = PartRings::free(crate::capture::CameraRings::new(vec![consumer]));
            stage.slot_memory = memory.clone();
            (producer, stage, free_tx, out_rx, swap_tx)
        };
        // What the device thread does once its path is open: the allocator,
        // then a block for each slot, as the source's 2x1 frames need.
        assert!(memory.install(Arc::new(CountingHostMemory {
            live: Arc::clone(&live),
            made: Arc::clone(&made),
        })));
        prepare_slots(
            &memory,
            WarmUpSize::Source {
                width: 2,
                height: 1,
            },
        );
        assert_eq!(made.load(Ordering::SeqCst), 3, "prepared before the start");
        let released = Arc::new(AtomicU64::new(u64::MAX));
        let mut path = FakeDevicePath::new(2);
        path.released = Some(released);
        let generation = Arc::clone(&path.generation);
        path.swap_on = Some((
            13,
            swap_tx,
            DeviceSwap {
                engine: Box::new(FakeCandidate {
                    generation: 1,
                    bound: generation,
                }),
                models: ids("new-seg", "new-cls"),
                on_swapped: None,
            },
        ));
        let handle = std::thread::spawn(move || stage.run(&mut path, 2, ONE_AT_A_TIME));
        let feeder = std::thread::spawn(move || {
            for seq in 0..8u64 {
                tiny_frame(&mut producer, seq, 10 + seq as u8);
            }
            producer.push(CaptureEvent::End(EndOfStream::Finished));
            producer
        });
        let seen = results_until_the_end(&out_rx, &free_tx);
        assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
        let producer = feeder.join().unwrap();
        assert_eq!(seen.len(), 8);
        assert_eq!(
            seen[7].1, 1017,
            "the new engine judged the last frame: {seen:?}"
        );
        assert_eq!(
            made.load(Ordering::SeqCst),
            3,
            "each of the 3 slots took its prepared block, the frames and the swap made none"
        );
        assert_eq!(live.load(Ordering::SeqCst), 3);
        // The device path and the ring are torn down: every block is freed.
        drop(producer);
        drop(out_rx);
        assert_eq!(
            live.load(Ordering::SeqCst),
            0,
            "a slot's block outlived the ring"
        );
    }
}
