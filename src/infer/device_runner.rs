//! The device runner: one frame's GPU work on one stream, the same for every
//! GPU engine (ONNX Runtime CUDA, TensorRT). The runner owns the stream (in
//! the GPU preprocessor), the tensors between the stages, the per-frame
//! tickets and the timing events; an engine supplies only how it queues a
//! model on the stream (`device_path::DeviceEngine`, held boxed: the runner
//! names no engine, and which one runs is chosen above it, in
//! `engine_choice`).
//!
//! ```text
//! submit:  [begin] H2D + frame kernel [preprocessed] -> engine: segmentation
//!          (-> logits D2H, when the host wants the mask)
//!          -> mask kernel + count D2H [masked] -> engine: classifier
//!          -> logits D2H [done]                        (returns at once)
//! complete: wait on the oldest ticket's [done] -> mask count, logits, GPU ms
//! ```
//!
//! Up to `IN_FLIGHT` frames may be on the stream: each has its own ticket
//! (pinned results and events). The device tensors are shared: on one
//! stream, frame N+1's kernels start only after frame N's last copy out of
//! them.
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

use super::BackendKind;
use super::device_error::DeviceFrameError;
use super::device_path::{
    BoundTensors, DeviceCandidate, DeviceEngine, DeviceFramePath, DeviceModelsOpener, FrameTraffic,
    GpuTimings, StreamLease, SwapSite,
};
use super::model_role::ModelRole;
use crate::config::Config;
use crate::frame::{FrameWork, ImageView, TensorGeometry};
use crate::gpu::{
    DeviceBuffer, DeviceTensor, Event, GpuContext, GpuError, PinnedBuffer, Stream, TensorElement,
};
use crate::preprocess::gpu::{GpuPreprocessor, widen_mask};

/// Frames on the stream at once: the host stages one while the GPU runs the other.
pub const IN_FLIGHT: usize = 2;

/// What one frame on the stream owns: where its results land and its events.
struct Ticket {
    cls_logits: PinnedBuffer<f32>,
    mask_pixels: PinnedBuffer<u64>,
    /// The segmentation logits, copied back for frames whose mask the host
    /// wants (archive, live view); allocated at the first such frame.
    /// The seal mask's bytes, allocated on the first frame that wants them.
    mask_bytes: Option<PinnedBuffer<u8>>,
    /// Whether this ticket's frame copies its logits back.
    host_mask: bool,
    /// Before the frame, after preprocessing, after the mask, at the end.
    events: [Event; 4],
}

/// A GPU engine and the GPU preprocessor on one stream.
pub struct DeviceRunner {
    // Drop order: `Drop` syncs the stream; then the engine (which points
    // into the buffers and may compute on the stream), then the buffers,
    // then the preprocessor that owns the stream.
    engine: Box<dyn DeviceEngine>,
    cls_logits_device: DeviceBuffer<f32>,
    tickets: [Ticket; IN_FLIGHT],
    /// Tickets of the frames submitted and not yet completed, oldest first;
    /// tickets are taken in turn, so the next one follows the newest.
    in_flight: VecDeque<usize>,
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
    /// element types.
    ///
    /// The tensors handed to `bind` are owned by the returned runner and
    /// freed only after the engine is dropped and the stream synchronized,
    /// so an engine may keep pointing at them for its whole life.
    pub fn open(
        config: &Config,
        stream: Stream,
        geometry: TensorGeometry,
        elements: (TensorElement, TensorElement),
        bind: impl FnOnce(BoundTensors) -> Result<Box<dyn DeviceEngine>, DeviceFrameError>,
    ) -> Result<Self, DeviceFrameError> {
        let gpu = Arc::clone(stream.gpu());
        let preprocessor = GpuPreprocessor::from_config(config, stream, geometry, elements)
            .map_err(gpu_error("set up GPU preprocessing"))?;
        let cls_logits_device = DeviceBuffer::<f32>::new(&gpu, geometry.cls_classes)
            .map_err(gpu_error("allocate the classifier logits"))?;
        let ticket = || -> Result<Ticket, DeviceFrameError> {
            let event = || Event::new(&gpu, true).map_err(gpu_error("create a timing event"));
            Ok(Ticket {
                cls_logits: PinnedBuffer::new(&gpu, geometry.cls_classes, false)
                    .map_err(gpu_error("allocate the pinned classifier logits"))?,
                mask_pixels: PinnedBuffer::new(&gpu, 1, false)
                    .map_err(gpu_error("allocate the pinned mask count"))?,
                mask_bytes: None,
                host_mask: false,
                events: [event()?, event()?, event()?, event()?],
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
        };
        let engine = bind(tensors)?;
        let lease = StreamLease::new(preprocessor.stream().raw() as usize);
        Ok(DeviceRunner {
            engine,
            cls_logits_device,
            tickets,
            in_flight: VecDeque::with_capacity(IN_FLIGHT),
            tensors,
            elements,
            lease,
            preprocessor,
            gpu,
        })
    }

    fn swap_site(&self) -> SwapSite {
        SwapSite {
            gpu: Arc::clone(&self.gpu),
            stream: self.lease.clone(),
            geometry: self.geometry(),
            elements: self.elements,
        }
    }
}

impl DeviceFramePath for DeviceRunner {
    fn kind(&self) -> BackendKind {
        self.engine.kind()
    }

    fn geometry(&self) -> TensorGeometry {
        *self.preprocessor.geometry()
    }

    fn submit(&mut self, frame: ImageView<'_>, host_mask: bool) -> Result<(), DeviceFrameError> {
        if self.in_flight.len() >= IN_FLIGHT {
            return Err(DeviceFrameError::Unsupported(
                "a third frame submitted while two are on the stream (complete one first)",
            ));
        }
        let index = self
            .in_flight
            .back()
            .map_or(0, |newest| (newest + 1) % IN_FLIGHT);
        let ticket = &mut self.tickets[index];
        let [begin, preprocessed, masked, done] = &mut ticket.events;
        begin
            .record(self.preprocessor.stream())
            .map_err(gpu_error("record an event"))?;
        self.preprocessor
            .enqueue_frame(frame)
            .map_err(|source| DeviceFrameError::Preprocess {
                action: "queue the frame kernel",
                source,
            })?;
        preprocessed
            .record(self.preprocessor.stream())
            .map_err(gpu_error("record an event"))?;
        self.engine
            .enqueue(ModelRole::Segmentation, self.preprocessor.stream())?;
        ticket.host_mask = host_mask;
        // SAFETY: the ticket's buffers are read only after its `done` event
        // (recorded below, after this copy) completes, and not written by the
        // host; a ticket is reused only after `complete` waited for it. All
        // buffers are owned by `self`, whose Drop syncs the stream.
        unsafe { self.preprocessor.enqueue_mask_to(&mut ticket.mask_pixels) }
            .map_err(gpu_error("queue the mask kernel"))?;
        masked
            .record(self.preprocessor.stream())
            .map_err(gpu_error("record an event"))?;
        self.engine
            .enqueue(ModelRole::Classifier, self.preprocessor.stream())?;
        if host_mask {
            if ticket.mask_bytes.is_none() {
                ticket.mask_bytes = Some(
                    self.preprocessor
                        .host_mask_bytes()
                        .map_err(gpu_error("allocate the pinned mask"))?,
                );
            }
            if let Some(bytes) = &mut ticket.mask_bytes {
                // SAFETY: as for the mask count above. Queued after the
                // classifier, which then need not wait for it; the next
                // frame's mask kernel comes after it on the stream.
                unsafe { self.preprocessor.enqueue_mask_bytes_to(bytes) }
                    .map_err(gpu_error("queue the mask copy"))?;
            }
        }
        // SAFETY: as above.
        unsafe {
            self.preprocessor.stream().download(
                &self.cls_logits_device,
                0,
                self.cls_logits_device.len(),
                &mut ticket.cls_logits,
            )
        }
        .map_err(gpu_error("queue the logits copy"))?;
        done.record(self.preprocessor.stream())
            .map_err(gpu_error("record an event"))?;
        self.in_flight.push_back(index);
        Ok(())
    }

    fn complete(&mut self, work: &mut FrameWork) -> Result<GpuTimings, DeviceFrameError> {
        let index = self
            .in_flight
            .pop_front()
            .ok_or(DeviceFrameError::Unsupported(
                "complete called with no frame on the stream",
            ))?;
        let ticket = &self.tickets[index];
        let [begin, preprocessed, masked, done] = &ticket.events;
        done.synchronize()
            .map_err(gpu_error("wait for the classifier"))?;
        work.mask_pixels = ticket.mask_pixels.as_slice()[0];
        work.cls_logits
            .copy_from_slice(ticket.cls_logits.as_slice());
        if let (true, Some(bytes)) = (ticket.host_mask, &ticket.mask_bytes) {
            widen_mask(bytes.as_slice(), &mut work.mask);
        }
        let ms = |later: &Event, earlier: &Event| -> Result<f64, DeviceFrameError> {
            Ok(f64::from(
                later
                    .elapsed_ms_since(earlier)
                    .map_err(gpu_error("read a timing event"))?,
            ))
        };
        Ok(GpuTimings {
            preprocess_ms: ms(preprocessed, begin)?,
            segment_ms: ms(masked, preprocessed)?,
            classify_ms: ms(done, masked)?,
        })
    }

    fn max_in_flight(&self) -> usize {
        IN_FLIGHT
    }

    fn traffic(&self, frame: &ImageView<'_>) -> FrameTraffic {
        FrameTraffic::device_path(
            frame,
            self.cls_logits_device.len(),
            self.preprocessor.geometry().mask_len(),
        )
    }

    fn swap_opener(&self) -> Option<Arc<dyn DeviceModelsOpener>> {
        Some(self.engine.swap_opener(self.swap_site()))
    }

    fn swap_engine(&mut self, candidate: Box<dyn DeviceCandidate>) -> Result<(), DeviceFrameError> {
        if !self.in_flight.is_empty() {
            return Err(DeviceFrameError::Swap(format!(
                "{} frame(s) still on the stream",
                self.in_flight.len()
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
        Ok(())
    }
}

impl Drop for DeviceRunner {
    fn drop(&mut self) {
        // No swap opener may use the stream from here on (this waits for
        // one in progress).
        self.lease.end();
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
