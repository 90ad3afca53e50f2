//! What the device path does with a batch (`DeviceBatches`, the one frame
//! loop's `BatchPath` over the cameras' rings): each frame is staged
//! (upload and frame kernel) as the batcher adds it, the batch launched
//! (both models, mask, copies back) once gathered, and completed later,
//! oldest first. A ring slot the GPU reads goes back to capture at the
//! batcher's hand-back once the GPU is past it.
//!
//! A camera with a cavity layout (`[source.layout]`): its frame is one
//! entry of the batch per judged cavity, each with a work record of its own
//! tagged with its cavity (`frame::CavityTag`), staged one after another
//! (`FramePart::Crop`: the frame goes to the GPU at the first crop, each
//! crop is the frame kernel over its rectangle of the frame already there,
//! never a host copy), so the output stage gathers them back into the
//! cycle. Batch sizes count entries (cavities): a frame of N cavities takes
//! N of the batch, and the batcher is told how many frames fit
//! (`begin`: the path's batch over the most cavities a frame has), so a
//! cycle is judged in one batch. A frame the layout does not fit
//! (`CycleCrops::fit`) fails every cavity with `error`, and nothing of it
//! goes to the GPU. Only models whose batch became smaller than a cycle
//! (a model swap) have a cycle split over batches, launched as it fills.
//!
//! ```text
//! Batcher ─begin─▶ take a waiting swap; finish the oldest batch when `depth` are on the GPU
//!         ─add──▶ work record + DeviceFramePath::stage(slot) ─▶ slot kept (read in place) or given back
//!                 (a layout: a record + stage(Crop) per judged cavity; the slot kept until all are read)
//!         ─run──▶ DeviceFramePath::launch ─▶ OnGpu
//!         ─idle / pass_on─▶ finish_oldest / finish_all: complete ─▶ StageMessage::Inspect ─▶ output
//!         ─hand_back─▶ slots the GPU is past (reads_done) ─▶ PartRings::recycle
//! ```

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::{DeviceStage, DeviceSwap};
use crate::capture::EndOfStream;
use crate::config::CavityRect;
use crate::frame::{CavityTag, FailedStage, FrameSlot, FrameWork, PixelDemand, StageMessage};
use crate::infer::batch::{BatchCounts, BatchPolicy, BatchRuns};
use crate::infer::batcher::{BatchPath, Batcher, IDLE_WAIT};
use crate::infer::device_path::{DeviceFramePath, FramePart, PathInfo, ReadWait};
use crate::infer::gpu_spans::GpuSpans;
use crate::infer::on_gpu::OnGpu;
use crate::model_id::ModelIds;
use crate::preprocess::{CycleCrops, CycleFit};
use crate::trigger::{NotAFrame, PartRings};

impl DeviceStage {
    /// Runs until capture ends, with up to `frames_in_flight` batches on the
    /// GPU (as far as the path allows, `info.max_in_flight`), each of up to
    /// `batching.max_batch` entries (as far as the path allows: frames, or
    /// a layout's cavities); returns how it ended. `crops`: each camera's
    /// cavity layout (none: every frame is one seal). Called by the device
    /// thread once `path` (which told `info` when it was opened) is warmed
    /// up.
    pub(super) fn run(
        self,
        path: &mut dyn DeviceFramePath,
        info: &PathInfo,
        frames_in_flight: usize,
        batching: BatchPolicy,
        crops: CycleCrops,
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
        let depth = info.max_in_flight.min(frames_in_flight).max(1);
        let per_frame = crops.most_per_frame();
        let mut batches = DeviceBatches {
            on_gpu: OnGpu::with_capacity(depth, batching.max_batch),
            path,
            path_max_batch: info.max_batch,
            info,
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
            unread: Vec::with_capacity(1),
            spans: GpuSpans::default(),
            cuts: Vec::with_capacity(per_frame),
            crops,
            per_frame,
            entries: 0,
            split_logged: false,
            batch_counts: Arc::clone(&batch_counts),
        };
        // The rings never close (their end comes as `NotAFrame::End`): a
        // loop that ended otherwise was stopped.
        let end = Batcher::new(batching, batch_counts)
            .run(&mut input, &mut batches)
            .unwrap_or(EndOfStream::Stopped);
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
/// to capture at the next hand-back once the GPU no longer reads it; the
/// batch is launched (both models, mask, copies back) when gathered, and
/// completed later, oldest first, when the GPU holds `depth` batches, when
/// nothing is waiting in the rings, or before a marker, the end or a model
/// swap.
struct DeviceBatches<'p> {
    path: &'p mut dyn DeviceFramePath,
    /// What the path told of itself when it was opened (the traffic line).
    info: &'p PathInfo,
    /// The most frames the path takes in a batch now (a swap may change it).
    path_max_batch: usize,
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
    /// The slot of the frame just added when the GPU will not read it (its
    /// bytes were copied, or its stage failed): handed back to capture at
    /// the hand-back right after `add`, before any of `reading`.
    #[allow(clippy::vec_box)]
    unread: Vec<Box<FrameSlot>>,
    /// The completed batches' GPU spans, logged at the end.
    spans: GpuSpans,
    /// Each camera's cavity layout and the frame size it fits.
    crops: CycleCrops,
    /// The most judged cavities of one frame (1 without a layout): the
    /// entries a frame may take of a batch.
    per_frame: usize,
    /// The frame at hand's judged cavities and their crops (reused).
    cuts: Vec<(u16, CavityRect)>,
    /// Entries staged on the path in the batch being built.
    entries: usize,
    /// Whether the warning that cycles are split over batches was logged.
    split_logged: bool,
    /// Batches launched inside a frame (a split cycle) are counted here;
    /// the batcher counts the others.
    batch_counts: Arc<BatchCounts>,
}

impl BatchPath<PartRings> for DeviceBatches<'_> {
    type End = EndOfStream;

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

    /// Takes a waiting model swap, and makes room on the GPU for the batch:
    /// it takes what the path takes now.
    fn begin(&mut self, first: &Box<FrameSlot>) -> ControlFlow<EndOfStream, usize> {
        if !self.take_swap(first.meta.seq) {
            return ControlFlow::Break(EndOfStream::Stopped);
        }
        if self.on_gpu.batches() >= self.depth && !self.finish_oldest() {
            return ControlFlow::Break(EndOfStream::Stopped);
        }
        if !self.traffic_logged {
            self.traffic_logged = true;
            let t = self.info.traffic(&first.image());
            log::info!(target: "sealcheck::pipeline", host_to_device = t.host_to_device,
                device_to_host = t.device_to_host, host_mask_extra = t.host_mask,
                width = first.width, height = first.height, frames_in_flight = self.depth,
                max_batch = self.max_batch;
                "device stage: bytes copied per frame (host_mask_extra: more out while the archive or the live view wants masks)");
        }
        // Entries count cavities: as many frames as leave room for their
        // every cavity, so a cycle is judged in one batch.
        ControlFlow::Continue((self.path_max_batch / self.per_frame).max(1))
    }

    /// Stages `slot`'s frame as the next of the batch being built (its work
    /// record joins `on_gpu`), or, for a camera with a layout, each of its
    /// judged cavities (`add_cycle`); the slot is kept while the GPU reads
    /// it (`reading`), else goes back at the hand-back that follows
    /// (`unread`).
    fn add(&mut self, slot: Box<FrameSlot>) -> ControlFlow<EndOfStream> {
        let taken = Instant::now();
        if self.crops.has_layout(slot.meta.camera) {
            return self.add_cycle(slot, taken);
        }
        let Some(mut work) = self.free_record() else {
            return ControlFlow::Break(EndOfStream::Stopped);
        };
        self.fill_record(&mut work, &slot, taken);
        // No host pass over the frame: the GPU reads the page-locked slot
        // (a copy only while the archive or the live view wants it, or for
        // a frame due to the shadow).
        let host_copy = self.pixel_demand.wanted_for(slot.meta.seq);
        let placement = slot.data.placement();
        let staged = self
            .path
            .stage(slot.image(), placement, host_copy, FramePart::Whole);
        // After the stage: the GPU works on the frame while it is copied.
        if host_copy {
            work.pixels.copy_from(&slot);
        }
        match staged {
            Ok(Some(number)) => {
                self.entries += 1;
                self.reading.push_back((number, slot));
            }
            Ok(None) => {
                self.entries += 1;
                self.unread.push(slot);
            }
            // A failed stage leaves the frame out of the batch: its error
            // marks it. Nothing of it is left on the GPU.
            Err(e) => {
                work.error = Some((e.failed_stage(), e.to_string()));
                self.unread.push(slot);
            }
        }
        self.on_gpu.stage(work);
        ControlFlow::Continue(())
    }

    /// Launches the batch gathered: both models and the copies back.
    fn run(&mut self) -> Result<BatchRuns, EndOfStream> {
        Ok(self.launch())
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

    /// The slot of the frame just added when the GPU does not read it, then
    /// the slots the GPU has finished reading go back to capture, oldest
    /// first (reads end in staging order).
    fn hand_back(&mut self, rings: &mut PartRings) {
        for slot in self.unread.drain(..) {
            rings.recycle(slot);
        }
        if self.reading.is_empty() {
            return;
        }
        let done = match self.path.reads_done(ReadWait::Poll) {
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
        for slot in self.unread.drain(..) {
            rings.recycle(slot);
        }
        if self.reading.is_empty() {
            return;
        }
        if let Err(e) = self.path.reads_done(ReadWait::All) {
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
        for swap in self.swaps.try_iter().collect::<Vec<_>>() {
            if !self.take_one_swap(seq, swap) {
                return false;
            }
        }
        true
    }

    /// `take_swap` for one swap (one waits at a time but for reloads in a
    /// row, which are taken in order).
    fn take_one_swap(&mut self, seq: u64, swap: DeviceSwap) -> bool {
        let Some(engine) = swap.engine else {
            // The same engine: the frames from `seq` on name the new recipe.
            log::info!(target: "sealcheck::infer", first_seq = seq,
                recipe = swap.models.recipe_name().unwrap_or_default();
                "recipe switched on the device path (same models): frames from first_seq on are judged by it");
            self.models = swap.models;
            if let Some(swapped) = swap.on_swapped {
                swapped();
            }
            return true;
        };
        let paused = Instant::now();
        if !self.finish_all() {
            return false;
        }
        match self.path.swap_engine(engine) {
            Ok(max_batch) => {
                self.path_max_batch = max_batch;
                log::info!(target: "sealcheck::infer", first_seq = seq,
                    segmentation = swap.models.segmentation.as_str(), classifier = swap.models.classifier.as_str(),
                    previous_segmentation = self.models.segmentation.as_str(), previous_classifier = self.models.classifier.as_str(),
                    recipe = swap.models.recipe_name().unwrap_or_default(),
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

    /// A free work record: finishing the oldest batch on the GPU when every
    /// record is out (that may be what gives one back). `None`: the output
    /// stage is gone.
    fn free_record(&mut self) -> Option<Box<FrameWork>> {
        if let Ok(work) = self.free_work.try_recv() {
            return Some(work);
        }
        if !self.finish_oldest() {
            return None;
        }
        self.free_work.recv().ok()
    }

    /// `work` made ready for a frame of `slot` taken at `taken`.
    fn fill_record(&self, work: &mut FrameWork, slot: &FrameSlot, taken: Instant) {
        work.reset(slot.meta);
        work.timings.stamps.in_slot = slot.in_slot;
        work.timings.stamps.taken = Some(taken);
        work.models = Some(Arc::clone(&self.models));
    }

    /// Launches the batch being built; returns the engine runs made.
    fn launch(&mut self) -> BatchRuns {
        self.entries = 0;
        let launched = self.path.launch();
        self.on_gpu
            .launched(launched.err().as_ref(), Instant::now())
    }

    /// Stages every judged cavity of `slot`'s frame (its camera has a
    /// layout), each as an entry of the batch with a work record of its
    /// own, tagged, in number order: the first crop puts the frame on the
    /// GPU, the others read it there. A frame the layout does not fit fails
    /// every cavity with the misfit's message, and one the GPU could not
    /// take (its first crop's stage failed) every cavity with that error;
    /// nothing is judged of either. The slot is kept until the GPU has read
    /// it for its last crop.
    fn add_cycle(&mut self, slot: Box<FrameSlot>, taken: Instant) -> ControlFlow<EndOfStream> {
        let image = slot.image();
        let misfit = {
            let fit = self.crops.fit(slot.meta.camera, image.width, image.height);
            let layout = fit.layout();
            // Both below 2^24: the frame was checked at capture.
            let frame = (image.width as u32, image.height as u32);
            self.cuts.clear();
            self.cuts
                .extend(layout.enabled().map(|n| (n, layout.crop(n, frame))));
            match fit {
                CycleFit::Fits(_) => None,
                CycleFit::Misfit { message, .. } => Some(message),
            }
        };
        let of = self.cuts.len() as u16;
        let host_copy = self.pixel_demand.wanted_for(slot.meta.seq);
        let placement = slot.data.placement();
        // Why every cavity (left) fails without going to the GPU.
        let mut failed = misfit.map(|message| (FailedStage::Preprocess, message));
        // Whether the frame is on the GPU (its first crop staged), and its
        // read number while the GPU reads the slot in place.
        let (mut on_gpu, mut read) = (false, None);
        for index in 0..self.cuts.len() {
            let (number, rect) = self.cuts[index];
            let Some(mut work) = self.free_record() else {
                self.keep(slot, read);
                return ControlFlow::Break(EndOfStream::Stopped);
            };
            self.fill_record(&mut work, &slot, taken);
            work.cavity = Some(CavityTag {
                number,
                index: index as u16,
                of,
            });
            if let Some(error) = &failed {
                work.error = Some(error.clone());
            } else if self.entries >= self.path_max_batch && !self.split_cycle() {
                // The run ends: the record is not judged, the slot is
                // handed back once the GPU has read it (`hand_back_all`).
                drop(work);
                self.keep(slot, read);
                return ControlFlow::Break(EndOfStream::Stopped);
            } else {
                let part = FramePart::Crop {
                    rect,
                    first: !on_gpu,
                };
                match self.path.stage(image, placement, host_copy, part) {
                    Ok(number) => {
                        if !on_gpu {
                            (on_gpu, read) = (true, number);
                        }
                        self.entries += 1;
                    }
                    Err(e) => {
                        let error = (e.failed_stage(), e.to_string());
                        if !on_gpu {
                            // The frame never reached the GPU.
                            failed = Some(error.clone());
                        }
                        work.error = Some(error);
                    }
                }
            }
            // The archive and the live view see the cycle's frame once,
            // copied while the GPU works on the first crop.
            if index == 0 && host_copy {
                work.pixels.copy_from(&slot);
            }
            self.on_gpu.stage(work);
        }
        self.keep(slot, read);
        ControlFlow::Continue(())
    }

    /// Keeps `slot` while the GPU reads it (`read`: its number), else it
    /// goes back at the next hand-back.
    fn keep(&mut self, slot: Box<FrameSlot>, read: Option<u64>) {
        match read {
            Some(number) => self.reading.push_back((number, slot)),
            None => self.unread.push(slot),
        }
    }

    /// The batch is full inside a frame (models whose batch is smaller
    /// than a cycle, after a model swap): launches it, making room on the
    /// GPU for the rest of the cycle. `false` when the output stage is gone.
    fn split_cycle(&mut self) -> bool {
        if !self.split_logged {
            self.split_logged = true;
            log::warn!(target: "sealcheck::pipeline", max_batch = self.path_max_batch, cavities = self.per_frame;
                "the device path's models take fewer entries per batch than a cycle has cavities (models swapped for ones with a smaller batch): each cycle is judged over several batches; export the models with a dynamic batch to judge a cycle in one");
        }
        let made = self.launch();
        self.batch_counts.record(made);
        self.on_gpu.batches() < self.depth || self.finish_oldest()
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
                        if let Err(e) =
                            crate::infer::model_io::check_classifier_output(&work.cls_logits)
                        {
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
