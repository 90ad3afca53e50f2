//! The device runner: one frame's GPU work on one stream, the same for every
//! GPU engine (ONNX Runtime CUDA, TensorRT). The runner owns the stream (in
//! the GPU preprocessor), the tensors between the stages, the per-frame
//! tickets and the timing events; an engine supplies only how it queues a
//! model on the stream (`DeviceEngine`).
//!
//! ```text
//! submit:  [begin] H2D + frame kernel [preprocessed] -> engine: segmentation
//!          -> mask kernel + count D2H [masked] -> engine: classifier
//!          -> logits D2H [done]                        (returns at once)
//! complete: wait on the oldest ticket's [done] -> mask count, logits, GPU ms
//! ```
//!
//! Up to `IN_FLIGHT` frames may be on the stream: each has its own ticket
//! (pinned results and events). The device tensors are shared: on one
//! stream, frame N+1's kernels start only after frame N's last copy out of
//! them.

use std::collections::VecDeque;
use std::sync::Arc;

use super::device_stage::{
    DeviceFrameError, DeviceFramePath, DevicePlan, FrameTraffic, GpuTimings, OpenedPath,
};
use super::{BackendKind, ModelRole, tensorrt};
use crate::config::Config;
use crate::frame::{FrameWork, ImageView, TensorGeometry};
use crate::gpu::{
    DeviceBuffer, DeviceTensor, Event, GpuContext, GpuError, PinnedBuffer, Stream, TensorElement,
};
use crate::preprocess::gpu::GpuPreprocessor;

/// Frames on the stream at once: the host stages one while the GPU runs the other.
pub const IN_FLIGHT: usize = 2;

/// How one GPU engine runs a model on the runner's stream.
pub trait DeviceEngine: Send {
    fn kind(&self) -> BackendKind;

    /// Queues `role`'s model on `stream`, reading and writing the tensors it
    /// was bound to when the runner was opened. Returns once queued.
    fn enqueue(&mut self, role: ModelRole, stream: &Stream) -> Result<(), DeviceFrameError>;
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
    preprocessor: GpuPreprocessor,
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
                events: [event()?, event()?, event()?, event()?],
            })
        };
        let tickets = [ticket()?, ticket()?];
        let engine = bind(BoundTensors {
            seg_input: preprocessor.seg_input(),
            seg_logits: preprocessor.seg_logits(),
            cls_input: preprocessor.cls_input(),
            cls_logits: DeviceTensor {
                ptr: cls_logits_device.device_ptr(),
                len: cls_logits_device.len(),
                element: TensorElement::F32,
            },
        })?;
        Ok(DeviceRunner {
            engine,
            cls_logits_device,
            tickets,
            in_flight: VecDeque::with_capacity(IN_FLIGHT),
            preprocessor,
            gpu,
        })
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

    fn submit(&mut self, frame: ImageView<'_>) -> Result<(), DeviceFrameError> {
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
        FrameTraffic::device_path(frame, self.cls_logits_device.len())
    }
}

impl<E: DeviceEngine> Drop for DeviceRunner<E> {
    fn drop(&mut self) {
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
