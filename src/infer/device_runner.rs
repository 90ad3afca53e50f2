//! The device runner: one frame's GPU work on one stream, the same for every
//! GPU engine (ONNX Runtime CUDA, TensorRT). The runner owns the stream (in
//! the GPU preprocessor), the tensors between the stages, the per-frame
//! tickets and the timing events; an engine supplies only how it queues a
//! model on the stream (`device_path::DeviceEngine`, held boxed: the runner
//! names no engine, and which one runs is chosen above it, in
//! `engine_choice`).
//!
//! ```text
//! stage (each frame of a batch, k = 0, 1, ..):
//!          upload stream: [upload begin, first frame] H2D straight from the
//!            frame's page-locked ring slot (none when mapped)
//!          compute stream: [begin, first frame] wait for the upload, frame
//!            kernel into frame k's tensors
//!          (a cavity layout's frame: one entry k per judged cavity, the
//!           frame uploaded at its first crop only; each crop is the frame
//!           kernel over its rectangle of the frame already on the GPU)
//! launch:  upload stream: [uploaded]
//!          compute stream: [preprocessed] -> engine: segmentation of frames 0..n
//!          -> a mask kernel per frame + counts D2H [masked]
//!          -> engine: classifier of frames 0..n
//!          -> logits D2H (+ masks D2H, for frames the host wants) [done]
//!                                                      (returns at once)
//! complete: at a batch's first frame, wait on its ticket's [done]; then
//!           each frame in turn -> mask count, logits, the batch's GPU ms
//! ```
//!
//! A batch is the frames staged between two launches, up to `max_batch`
//! (the tensors' capacity, or 1 where the engine's models have a batch of
//! one). Up to `IN_FLIGHT` batches may be on the stream: each has its own
//! ticket (pinned results and events), so the host stages batch N+1 while
//! the GPU runs batch N, and batch N+1's uploads (on their own stream) run
//! while batch N computes. The device tensors are shared: on the compute
//! stream, batch N+1's frame kernels start only after batch N's last copy
//! out of them.
//!
//! A frame read from its ring slot in place is the caller's to keep until
//! the GPU is past it: `stage` returns its number, `reads_done` tells
//! (`device_stage` hands the slot back to capture then; at the end of a run
//! `reads_done(ReadWait::All)` waits for every read first).
//!
//! A model swap on reload changes only the engine: the stream, tensors,
//! tickets, events and GPU preprocessor stay. The new engine is opened and
//! warmed up on the reload thread (`DeviceEngine::swap_opener`) and bound to
//! the runner's tensors on the device thread with the stream idle
//! (`DeviceCandidate::bind`, in `swap_engine`). Why not prepare it all
//! on the device thread between frames: opening sessions or engines takes
//! seconds, and inspection would stop that long (frames dropped at the ring).
//! Why not bind it at open: the tensors are in use by the running engine's
//! frames; a warm-up there would overwrite a frame's tensors. So each engine
//! warms up on buffers of its own and is rebound (a pointer update) at swap.

use std::collections::VecDeque;
use std::sync::Arc;

use super::device_error::DeviceFrameError;
use super::device_path::{
    BoundTensors, DeviceCandidate, DeviceEngine, DeviceFramePath, FramePart, GpuTimings, PathInfo,
    ReadWait, StreamLease, SwapSite,
};
use super::model_role::ModelRole;
use crate::config::Config;
use crate::frame::{FrameWork, ImageView, TensorGeometry};
use crate::frame_bytes::HostPlacement;
use crate::gpu::{
    DeviceBuffer, DeviceTensor, Event, GpuContext, GpuError, PinnedBuffer, PinnedSlots, Stream,
    TensorElement,
};
use crate::preprocess::gpu::{FrameTransfer, GpuPreprocessor, widen_mask};

/// Batches on the stream at once: the host stages one while the GPU runs the other.
pub const IN_FLIGHT: usize = 2;

/// What one batch on the stream owns: where its frames' results land and
/// its events. Sized for the runner's largest batch at open; nothing is
/// allocated per frame (a frame's pinned mask only at its slot's first use).
struct Ticket {
    /// Frames staged into this batch.
    frames: usize,
    /// Frame k's classifier logits at `k * classes`.
    cls_logits: PinnedBuffer<f32>,
    /// Frame k's mask pixel count at `k`.
    mask_pixels: PinnedBuffer<u64>,
    /// Frame k's seal mask bytes, for frames whose mask the host wants
    /// (archive, live view, shadow); allocated on the first such frame.
    mask_bytes: Vec<Option<PinnedBuffer<u8>>>,
    /// Whether frame k copies its mask back.
    host_mask: Vec<bool>,
    /// Before the first frame, after preprocessing, after the masks, at the
    /// end (compute stream).
    events: [Event; 4],
    /// Before the first frame's upload and after the last one's (upload stream).
    upload_events: [Event; 2],
}

/// A GPU engine and the GPU preprocessor on one stream.
pub struct DeviceRunner {
    // Drop order: `Drop` syncs the stream; then the engine (which points
    // into the buffers and may compute on the stream), then the buffers,
    // then the preprocessor that owns the stream.
    engine: Box<dyn DeviceEngine>,
    cls_logits_device: DeviceBuffer<f32>,
    tickets: [Ticket; IN_FLIGHT],
    /// Which ticket the batch being staged and each batch on the stream use.
    order: TicketOrder,
    /// Frames of the oldest launched batch already completed.
    completed: usize,
    /// Why the oldest batch's wait failed (its later frames fail with it).
    batch_failure: Option<String>,
    /// Frames the tensors hold: the largest batch the runner was sized for.
    capacity: usize,
    /// The tensors the engine is bound to (a swapped-in engine too).
    tensors: BoundTensors,
    /// The engine's input and segmentation-logits element types.
    elements: (TensorElement, TensorElement),
    /// The stream as lent to swap openers; ended first on drop.
    lease: StreamLease,
    preprocessor: GpuPreprocessor,
    gpu: Arc<GpuContext>,
}

fn gpu_error(action: &'static str) -> impl Fn(GpuError) -> DeviceFrameError {
    move |source| DeviceFrameError::Gpu { action, source }
}

impl DeviceRunner {
    /// Builds the GPU preprocessor for `geometry` on `stream` (from the
    /// config, `GpuPreprocessor::from_config`), the classifier logits
    /// buffer and the tickets, then has `bind` make the engine over those
    /// tensors. `elements`: the engine's input and segmentation-logits
    /// element types. `frames`: the largest batch (the tensors hold that
    /// many frames; 1 for models with a batch of one).
    ///
    /// The tensors handed to `bind` are owned by the returned runner and
    /// freed only after the engine is dropped and the stream synchronized,
    /// so an engine may keep pointing at them for its whole life.
    pub fn open(
        config: &Config,
        stream: Stream,
        geometry: TensorGeometry,
        elements: (TensorElement, TensorElement),
        frames: usize,
        bind: impl FnOnce(BoundTensors) -> Result<Box<dyn DeviceEngine>, DeviceFrameError>,
    ) -> Result<Self, DeviceFrameError> {
        let capacity = frames.max(1);
        let gpu = Arc::clone(stream.gpu());
        let preprocessor =
            GpuPreprocessor::from_config(config, stream, geometry, elements, capacity)
                .map_err(gpu_error("set up GPU preprocessing"))?;
        let cls_logits_device = DeviceBuffer::<f32>::new(&gpu, capacity * geometry.cls_classes)
            .map_err(gpu_error("allocate the classifier logits"))?;
        let ticket = || -> Result<Ticket, DeviceFrameError> {
            let event = || Event::new(&gpu, true).map_err(gpu_error("create a timing event"));
            Ok(Ticket {
                frames: 0,
                cls_logits: PinnedBuffer::new(&gpu, capacity * geometry.cls_classes, false)
                    .map_err(gpu_error("allocate the pinned classifier logits"))?,
                mask_pixels: PinnedBuffer::new(&gpu, capacity, false)
                    .map_err(gpu_error("allocate the pinned mask counts"))?,
                mask_bytes: (0..capacity).map(|_| None).collect(),
                host_mask: vec![false; capacity],
                events: [event()?, event()?, event()?, event()?],
                upload_events: [event()?, event()?],
            })
        };
        let tickets = [ticket()?, ticket()?];
        let tensors = BoundTensors {
            seg_input: preprocessor.seg_input(),
            seg_logits: preprocessor.seg_logits(),
            cls_input: preprocessor.cls_input(),
            cls_logits: DeviceTensor {
                ptr: cls_logits_device.device_ptr(),
                len: cls_logits_device.len(),
                element: TensorElement::F32,
            },
            frames: capacity,
        };
        let engine = bind(tensors)?;
        let lease = StreamLease::new(preprocessor.stream().raw() as usize);
        Ok(DeviceRunner {
            engine,
            cls_logits_device,
            tickets,
            order: TicketOrder::default(),
            completed: 0,
            batch_failure: None,
            capacity,
            tensors,
            elements,
            lease,
            preprocessor,
            gpu,
        })
    }

    fn geometry(&self) -> TensorGeometry {
        *self.preprocessor.geometry()
    }

    /// Most frames one batch may hold: what the tensors hold, as far as
    /// the engine's models allow.
    fn max_batch(&self) -> usize {
        self.capacity.min(self.engine.max_batch()).max(1)
    }

    fn swap_site(&self) -> SwapSite {
        SwapSite {
            gpu: Arc::clone(&self.gpu),
            stream: self.lease.clone(),
            geometry: self.geometry(),
            elements: self.elements,
            frames: self.capacity,
        }
    }

    /// Queues the models, masks and copies back of the `frames` frames
    /// staged on ticket `index`, ending with its `done` event.
    fn queue_batch(&mut self, index: usize, frames: usize) -> Result<(), DeviceFrameError> {
        let ticket = &mut self.tickets[index];
        ticket.upload_events[1]
            .record(self.preprocessor.upload_stream())
            .map_err(gpu_error("record an event"))?;
        let stream = self.preprocessor.stream();
        // Already implied by each frame's own wait; said once more so the
        // timing event is complete whenever `done` is (read_frame).
        stream
            .wait_for(&ticket.upload_events[1])
            .map_err(gpu_error("order the batch after its uploads"))?;
        let [_, preprocessed, masked, done] = &mut ticket.events;
        preprocessed
            .record(stream)
            .map_err(gpu_error("record an event"))?;
        self.engine
            .enqueue(ModelRole::Segmentation, stream, frames)?;
        // SAFETY: the ticket's buffers are read only after its `done` event
        // (recorded below, after this copy) completes, and not written by the
        // host; a ticket is reused only after `complete` waited for it. All
        // buffers are owned by `self`, whose Drop syncs the stream.
        unsafe {
            self.preprocessor
                .enqueue_masks_to(frames, &mut ticket.mask_pixels)
        }
        .map_err(gpu_error("queue the mask kernels"))?;
        let stream = self.preprocessor.stream();
        masked
            .record(stream)
            .map_err(gpu_error("record an event"))?;
        self.engine.enqueue(ModelRole::Classifier, stream, frames)?;
        for k in (0..frames).filter(|&k| ticket.host_mask[k]) {
            if ticket.mask_bytes[k].is_none() {
                ticket.mask_bytes[k] = Some(
                    self.preprocessor
                        .host_mask_bytes()
                        .map_err(gpu_error("allocate the pinned mask"))?,
                );
            }
            if let Some(bytes) = &mut ticket.mask_bytes[k] {
                // SAFETY: as for the mask counts above. Queued after the
                // classifier, which then need not wait for it; the next
                // batch's mask kernels come after it on the stream.
                unsafe { self.preprocessor.enqueue_frame_mask_bytes_to(k, bytes) }
                    .map_err(gpu_error("queue the mask copy"))?;
            }
        }
        let classes = self.cls_logits_device.len() / self.capacity;
        // SAFETY: as above.
        unsafe {
            stream.download(
                &self.cls_logits_device,
                0,
                frames * classes,
                &mut ticket.cls_logits,
            )
        }
        .map_err(gpu_error("queue the logits copy"))?;
        done.record(stream).map_err(gpu_error("record an event"))
    }
}

impl DeviceFramePath for DeviceRunner {
    fn describe(&self) -> PathInfo {
        let mapped = self.preprocessor.options().frame_transfer == FrameTransfer::Mapped;
        PathInfo {
            kind: self.engine.kind(),
            geometry: self.geometry(),
            max_batch: self.max_batch(),
            max_in_flight: IN_FLIGHT,
            // The logits buffer's whole length, as the traffic line has
            // always counted it.
            cls_classes: self.cls_logits_device.len(),
            mask_bytes: self.preprocessor.geometry().mask_len(),
            slot_allocator: Some(Arc::new(PinnedSlots::new(&self.gpu, mapped))),
            swap_opener: Some(self.engine.swap_opener(self.swap_site())),
        }
    }

    fn stage(
        &mut self,
        frame: ImageView<'_>,
        placement: HostPlacement,
        host_mask: bool,
        part: FramePart,
    ) -> Result<Option<u64>, DeviceFrameError> {
        let index = self.order.staging()?;
        let max_batch = self.max_batch();
        let ticket = &mut self.tickets[index];
        let k = ticket.frames;
        if k >= max_batch {
            return Err(DeviceFrameError::Sequence(
                "more frames staged than a batch holds (launch the batch first)",
            ));
        }
        if k == 0 {
            ticket.events[0]
                .record(self.preprocessor.stream())
                .map_err(gpu_error("record an event"))?;
            ticket.upload_events[0]
                .record(self.preprocessor.upload_stream())
                .map_err(gpu_error("record an event"))?;
        }
        let read = match part {
            FramePart::Whole => self.preprocessor.enqueue_frame_at(frame, placement, k),
            FramePart::Crop { rect, first: true } => self
                .preprocessor
                .enqueue_frame_crop_at(frame, placement, rect, k),
            // The frame staged just before, already on the GPU.
            FramePart::Crop { rect, first: false } => {
                self.preprocessor.enqueue_staged_crop_at(rect, k)
            }
        }
        .map_err(|source| DeviceFrameError::Preprocess {
            action: "queue the frame kernel",
            source,
        })?;
        ticket.host_mask[k] = host_mask;
        ticket.frames = k + 1;
        Ok(read)
    }

    fn reads_done(&mut self, wait: ReadWait) -> Result<u64, DeviceFrameError> {
        if wait == ReadWait::All {
            self.preprocessor
                .wait_reads()
                .map_err(gpu_error("wait for the frames' uploads"))?;
        }
        self.preprocessor
            .reads_done()
            .map_err(gpu_error("ask whether a frame's upload is done"))
    }

    fn launch(&mut self) -> Result<(), DeviceFrameError> {
        let Some(index) = self.order.take_staging() else {
            return Ok(());
        };
        let frames = self.tickets[index].frames;
        if frames == 0 {
            return Ok(());
        }
        // Whatever happens below, the staged frames leave the ticket: on an
        // error the batch is not launched and nothing of it is completed.
        self.tickets[index].frames = 0;
        let queued = self.queue_batch(index, frames);
        if queued.is_ok() {
            self.tickets[index].frames = frames;
            self.order.launched(index);
        }
        queued
    }

    fn complete(&mut self, work: &mut FrameWork) -> Result<GpuTimings, DeviceFrameError> {
        let index = self.order.oldest().ok_or(DeviceFrameError::Sequence(
            "complete called with no batch on the stream",
        ))?;
        let k = self.completed;
        if k == 0 {
            let waited = self.tickets[index].events[3]
                .synchronize()
                .map_err(gpu_error("wait for the classifier"));
            self.batch_failure = waited.err().map(|e| e.to_string());
        }
        let result = match &self.batch_failure {
            // Every frame of a batch whose wait failed fails with it, one
            // result each.
            Some(failure) => Err(DeviceFrameError::BatchFailed(failure.clone())),
            None => read_frame(&self.tickets[index], k, work),
        };
        self.completed += 1;
        if self.completed >= self.tickets[index].frames {
            // The ticket is free for the next batch staged.
            self.tickets[index].frames = 0;
            self.completed = 0;
            self.order.completed_oldest();
        }
        result
    }

    fn swap_engine(
        &mut self,
        candidate: Box<dyn DeviceCandidate>,
    ) -> Result<usize, DeviceFrameError> {
        let staged: usize = self.tickets.iter().map(|t| t.frames).sum();
        if self.order.on_stream() > 0 || staged > 0 {
            return Err(DeviceFrameError::Swap(format!(
                "{} batch(es) still on the stream, {staged} frame(s) staged",
                self.order.on_stream()
            )));
        }
        // Nothing of ours is queued; work a warm-up queued may still be.
        self.preprocessor
            .stream()
            .synchronize()
            .map_err(gpu_error("wait for the stream before the swap"))?;
        // SAFETY: `self.tensors` are owned by this runner and freed only
        // after the engine is dropped with the stream synchronized (field
        // order and `Drop`), so the engine may point at them for its life.
        let engine = unsafe { candidate.bind(self.tensors) }?;
        // The old engine is dropped here, after its last frame.
        drop(std::mem::replace(&mut self.engine, engine));
        Ok(self.max_batch())
    }
}

/// Which ticket each batch uses: the batches launched and not yet completed
/// (oldest first), and the one being staged, which keeps the ticket it took
/// at its first frame until it is launched, whatever is completed meanwhile
/// (the device stage completes the oldest batch while it stages the next
/// when it waits for a work record: a cavity layout's cycle, or a batch of
/// several cameras' frames). A new batch takes the ticket after the newest
/// on the stream (any with none there), never one on the stream.
#[derive(Debug, Default)]
struct TicketOrder {
    in_flight: VecDeque<usize>,
    staging: Option<usize>,
}

impl TicketOrder {
    /// The ticket of the batch being staged: the one it took, or for a new
    /// batch the one after the newest on the stream; none while `IN_FLIGHT`
    /// batches are on the stream.
    fn staging(&mut self) -> Result<usize, DeviceFrameError> {
        if let Some(index) = self.staging {
            return Ok(index);
        }
        if self.in_flight.len() >= IN_FLIGHT {
            return Err(DeviceFrameError::Sequence(
                "a third batch staged while two are on the stream (complete one first)",
            ));
        }
        let index = self
            .in_flight
            .back()
            .map_or(0, |newest| (newest + 1) % IN_FLIGHT);
        self.staging = Some(index);
        Ok(index)
    }

    /// The batch being staged ends (launched, or dropped on an error): its
    /// ticket, if any was taken.
    fn take_staging(&mut self) -> Option<usize> {
        self.staging.take()
    }

    /// Ticket `index`'s batch is on the stream.
    fn launched(&mut self, index: usize) {
        self.in_flight.push_back(index);
    }

    /// The oldest batch on the stream's ticket.
    fn oldest(&self) -> Option<usize> {
        self.in_flight.front().copied()
    }

    /// The oldest batch on the stream is completed: its ticket is free.
    fn completed_oldest(&mut self) {
        self.in_flight.pop_front();
    }

    /// Batches on the stream.
    fn on_stream(&self) -> usize {
        self.in_flight.len()
    }
}

/// Frame `k`'s results from its batch's ticket (whose `done` event has
/// completed) into `work`, and the batch's GPU times: what the frame waited for.
fn read_frame(
    ticket: &Ticket,
    k: usize,
    work: &mut FrameWork,
) -> Result<GpuTimings, DeviceFrameError> {
    let classes = work.cls_logits.len();
    work.mask_pixels = ticket.mask_pixels.as_slice()[k];
    work.cls_logits
        .copy_from_slice(&ticket.cls_logits.as_slice()[k * classes..(k + 1) * classes]);
    if let (true, Some(bytes)) = (ticket.host_mask[k], &ticket.mask_bytes[k]) {
        widen_mask(bytes.as_slice(), &mut work.mask);
    }
    let [begin, preprocessed, masked, done] = &ticket.events;
    let [upload_begin, uploaded] = &ticket.upload_events;
    let ms = |later: &Event, earlier: &Event| -> Result<f64, DeviceFrameError> {
        Ok(f64::from(
            later
                .elapsed_ms_since(earlier)
                .map_err(gpu_error("read a timing event"))?,
        ))
    };
    // `uploaded` is recorded at launch, before `done`, on a stream the
    // compute stream waited for: complete once `done` is.
    Ok(GpuTimings {
        upload_ms: ms(uploaded, upload_begin)?,
        preprocess_ms: ms(preprocessed, begin)?,
        segment_ms: ms(masked, preprocessed)?,
        classify_ms: ms(done, masked)?,
        batch_ms: ms(done, upload_begin)?,
    })
}

impl Drop for DeviceRunner {
    fn drop(&mut self) {
        // No swap opener may use the stream from here on (this waits for
        // one in progress).
        self.lease.end();
        if let Err(e) = self.preprocessor.upload_stream().synchronize() {
            self.gpu
                .record_drop_error("synchronizing the device runner's upload stream", e);
        }
        // The engine points into buffers freed after it: nothing may be
        // freed while queued work can still touch them.
        if let Err(e) = self.preprocessor.stream().synchronize() {
            self.gpu.record_drop_error(
                "synchronizing the device runner's stream before freeing it",
                e,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_keeps_its_ticket_while_the_oldest_is_completed_during_its_staging() {
        let mut order = TicketOrder::default();
        // Batch A on ticket 0, launched.
        let a = order.staging().unwrap();
        assert_eq!(order.take_staging(), Some(a));
        order.launched(a);
        // Batch B stages its first frames on the other ticket ...
        let b = order.staging().unwrap();
        assert_ne!(a, b);
        // ... the device stage completes A meanwhile (it waited for a work
        // record), and B's later frames still go to B's ticket.
        assert_eq!(order.oldest(), Some(a));
        order.completed_oldest();
        assert_eq!(order.staging().unwrap(), b, "B's ticket did not change");
        assert_eq!(order.take_staging(), Some(b));
        order.launched(b);
        // C takes the free ticket, A's; a fourth waits for two on the stream.
        let c = order.staging().unwrap();
        assert_eq!(c, a);
        order.take_staging();
        order.launched(c);
        assert!(order.staging().is_err(), "two are on the stream");
        assert_eq!(order.oldest(), Some(b));
        order.completed_oldest();
        assert_eq!(order.staging().unwrap(), b);
        assert_eq!(order.on_stream(), 1);
    }

    #[test]
    fn a_dropped_batch_takes_no_ticket_on_the_stream() {
        let mut order = TicketOrder::default();
        assert_eq!(order.take_staging(), None, "nothing staged");
        let a = order.staging().unwrap();
        order.take_staging();
        order.launched(a);
        // B's launch failed: it never went on the stream.
        let b = order.staging().unwrap();
        assert_eq!(order.take_staging(), Some(b));
        assert_eq!(order.on_stream(), 1);
        // C must not take A's ticket, which is still on the stream.
        assert_ne!(order.staging().unwrap(), a);
    }
}
