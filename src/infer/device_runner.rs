//! The device runner: one frame's GPU work on one stream, the same for every
//! GPU engine (ONNX Runtime CUDA, TensorRT). The runner owns the stream (in
//! the GPU preprocessor), the tensors between the stages, the per-frame
//! tickets and the timing events; an engine supplies only how it queues a
//! model on the stream (`DeviceEngine`).
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
//! (`DeviceEngine::bind_swapped`, in `swap_engine`). Why not prepare it all
//! on the device thread between frames: opening sessions or engines takes
//! seconds, and inspection would stop that long (frames dropped at the ring).
//! Why not bind it at open: the tensors are in use by the running engine's
//! frames; a warm-up there would overwrite a frame's tensors. So each engine
//! warms up on buffers of its own and is rebound (a pointer update) at swap.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock};

use super::device_stage::{
    DeviceFrameError, DeviceFramePath, DeviceModelsOpener, DevicePlan, FrameTraffic, GpuTimings,
    OpenedPath, PreparedEngine,
};
use super::{BackendKind, ModelRole, tensorrt};
use crate::config::Config;
use crate::frame::{FrameWork, ImageView, TensorGeometry};
use crate::gpu::{
    DeviceBuffer, DeviceTensor, Event, GpuContext, GpuError, PinnedBuffer, Stream, TensorElement,
};
use crate::preprocess::gpu::{GpuPreprocessor, HostLogits};

/// Frames on the stream at once: the host stages one while the GPU runs the other.
pub const IN_FLIGHT: usize = 2;

/// How one GPU engine runs a model on the runner's stream, and how new
/// models of the same engine are opened for a swap.
pub trait DeviceEngine: Send + Sized + 'static {
    /// The engine as the swap opener makes it: opened and warmed up on
    /// another thread, not yet bound to the runner's tensors.
    type Unbound: Send + 'static;

    fn kind(&self) -> BackendKind;

    /// Queues `role`'s model on `stream`, reading and writing the tensors it
    /// was bound to when the runner was opened. Returns once queued.
    fn enqueue(&mut self, role: ModelRole, stream: &Stream) -> Result<(), DeviceFrameError>;

    /// Opens new models of this engine for the runner `site` describes.
    fn swap_opener(site: SwapSite) -> Arc<dyn DeviceModelsOpener>;

    /// Binds an engine from `swap_opener` to the runner's tensors. Called
    /// on the device thread with nothing queued on the stream.
    fn bind_swapped(
        unbound: Self::Unbound,
        site: &SwapSite,
        tensors: BoundTensors,
    ) -> Result<Self, DeviceFrameError>;
}

/// What opening new models for a running device runner needs to know.
#[derive(Clone)]
pub struct SwapSite {
    pub gpu: Arc<GpuContext>,
    pub stream: StreamLease,
    /// The runner's tensor shapes and element types (inputs, segmentation
    /// logits), which new models must match.
    pub geometry: TensorGeometry,
    pub elements: (TensorElement, TensorElement),
}

/// The runner's stream for another thread: valid only while the runner
/// lives, whose drop waits for every `with` in progress and ends the lease.
#[derive(Clone)]
pub struct StreamLease {
    /// The raw `CUstream`, as an integer (TensorRT's convention).
    raw: usize,
    alive: Arc<RwLock<bool>>,
}

impl StreamLease {
    /// Runs `f` with the raw stream, the runner kept from dropping it
    /// meanwhile; an error once the runner is gone.
    pub fn with<T>(
        &self,
        f: impl FnOnce(usize) -> Result<T, DeviceFrameError>,
    ) -> Result<T, DeviceFrameError> {
        // A poisoned lock only means a `with` panicked; the flag is still right.
        let alive = self.alive.read().unwrap_or_else(|p| p.into_inner());
        if !*alive {
            return Err(DeviceFrameError::Swap(
                "the device path has ended".to_string(),
            ));
        }
        f(self.raw)
    }

    fn end(&self) {
        *self.alive.write().unwrap_or_else(|p| p.into_inner()) = false;
    }
}

/// The device tensors an engine is bound to, all owned by the runner.
#[derive(Debug, Clone, Copy)]
pub struct BoundTensors {
    pub seg_input: DeviceTensor,
    pub seg_logits: DeviceTensor,
    pub cls_input: DeviceTensor,
    pub cls_logits: DeviceTensor,
}

/// What one frame on the stream owns: where its results land and its events.
struct Ticket {
    cls_logits: PinnedBuffer<f32>,
    mask_pixels: PinnedBuffer<u64>,
    /// The segmentation logits, copied back for frames whose mask the host
    /// wants (archive, live view); allocated at the first such frame.
    seg_logits: Option<HostLogits>,
    /// Whether this ticket's frame copies its logits back.
    host_mask: bool,
    /// Before the frame, after preprocessing, after the mask, at the end.
    events: [Event; 4],
}

/// A GPU engine and the GPU preprocessor on one stream.
pub struct DeviceRunner<E: DeviceEngine> {
    // Drop order: `Drop` syncs the stream; then the engine (which points
    // into the buffers and may compute on the stream), then the buffers,
    // then the preprocessor that owns the stream.
    engine: E,
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
    /// f16 logits widened for the host mask (TensorRT engines with f16 IO).
    widened_logits: Vec<f32>,
    gpu: Arc<GpuContext>,
}

fn gpu_error(action: &'static str) -> impl Fn(GpuError) -> DeviceFrameError {
    move |source| DeviceFrameError::Gpu { action, source }
}

impl<E: DeviceEngine> DeviceRunner<E> {
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
        bind: impl FnOnce(BoundTensors) -> Result<E, DeviceFrameError>,
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
                seg_logits: None,
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
        let lease = StreamLease {
            raw: preprocessor.stream().raw() as usize,
            alive: Arc::new(RwLock::new(true)),
        };
        Ok(DeviceRunner {
            engine,
            cls_logits_device,
            tickets,
            in_flight: VecDeque::with_capacity(IN_FLIGHT),
            tensors,
            elements,
            lease,
            preprocessor,
            widened_logits: Vec::new(),
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

    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The models' tensor shapes the runner was sized for.
    pub fn geometry(&self) -> TensorGeometry {
        *self.preprocessor.geometry()
    }
}

/// Opens the engine `plan` names as a device runner (each model once).
pub fn open(config: &Config, plan: DevicePlan) -> Result<OpenedPath, DeviceFrameError> {
    match plan {
        DevicePlan::TensorRt => {
            tensorrt::open_device(config, "backend = \"tensorrt\" in [inference]".to_string())
        }
        DevicePlan::OnnxRuntimeCuda => opened(
            super::onnxruntime_device::open(config)?,
            "backend = \"onnxruntime\", device = \"cuda\" in [inference]".to_string(),
        ),
        DevicePlan::Auto => {
            let skipped = match tensorrt::open_device(config, "auto: TensorRT".to_string()) {
                Err(e) if e.is_engine_unavailable() => tensorrt::auto_skipped(&e),
                other => return other,
            };
            let path = super::onnxruntime_device::open(config).inspect_err(|e| {
                if e.is_engine_unavailable() {
                    log::info!(error:% = e; "auto: ONNX Runtime CUDA not usable for the device path; going on in host mode");
                }
            })?;
            opened(path, format!("auto: {skipped}; using ONNX Runtime CUDA"))
        }
    }
}

/// A device runner as the device stage takes it, with why this engine.
pub(crate) fn opened<E: DeviceEngine + 'static>(
    runner: DeviceRunner<E>,
    reason: String,
) -> Result<OpenedPath, DeviceFrameError> {
    Ok(OpenedPath {
        geometry: runner.geometry(),
        path: Box::new(runner),
        reason,
    })
}

impl<E: DeviceEngine> DeviceFramePath for DeviceRunner<E> {
    fn kind(&self) -> BackendKind {
        self.engine.kind()
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
        if host_mask {
            if ticket.seg_logits.is_none() {
                ticket.seg_logits = Some(
                    self.preprocessor
                        .host_logits()
                        .map_err(gpu_error("allocate the pinned segmentation logits"))?,
                );
            }
            if let Some(logits) = &mut ticket.seg_logits {
                // SAFETY: as for the mask count below.
                unsafe { self.preprocessor.enqueue_logits_to(logits) }
                    .map_err(gpu_error("queue the segmentation logits copy"))?;
            }
        }
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
        if let (true, Some(logits)) = (ticket.host_mask, &ticket.seg_logits) {
            let geometry = self.preprocessor.geometry();
            logits.to_mask(
                geometry.seg_classes,
                self.preprocessor.options().mask_class,
                &mut work.mask,
                &mut self.widened_logits,
            );
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
        let logits = self.preprocessor.seg_logits();
        FrameTraffic::device_path(
            frame,
            self.cls_logits_device.len(),
            logits.len * logits.element.bytes(),
        )
    }

    fn swap_opener(&self) -> Option<Arc<dyn DeviceModelsOpener>> {
        Some(E::swap_opener(self.swap_site()))
    }

    fn swap_engine(&mut self, engine: PreparedEngine) -> Result<(), DeviceFrameError> {
        if !self.in_flight.is_empty() {
            return Err(DeviceFrameError::Swap(format!(
                "{} frame(s) still on the stream",
                self.in_flight.len()
            )));
        }
        let unbound = engine.0.downcast::<E::Unbound>().map_err(|_| {
            DeviceFrameError::Swap(format!(
                "the new engine was not prepared for {}",
                self.engine.kind().as_str()
            ))
        })?;
        // Nothing of ours is queued; work a warm-up queued may still be.
        self.preprocessor
            .stream()
            .synchronize()
            .map_err(gpu_error("wait for the stream before the swap"))?;
        let engine = E::bind_swapped(*unbound, &self.swap_site(), self.tensors)?;
        // The old engine is dropped here, after its last frame.
        drop(std::mem::replace(&mut self.engine, engine));
        Ok(())
    }
}

impl<E: DeviceEngine> Drop for DeviceRunner<E> {
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
