//! ONNX Runtime on CUDA in device mode: both sessions compute on the GPU
//! preprocessor's stream, with their inputs and outputs bound (IO binding) to
//! the device buffers the kernels write and read. Per frame only the frame
//! goes in and the classifier logits and mask pixel count come out.
//!
//! ```text
//! stream: [H2D + frame kernel] -> seg session -> [mask kernel + count D2H]
//!         -> cls session -> logits D2H -> event      (host waits here, once)
//! ```
//!
//! Two frames may be on the stream at once (`IN_FLIGHT`): each has its own
//! pinned results (count, logits) and events, a "ticket". The device tensors
//! are shared: on one stream, frame N+1's kernels start only after frame N's
//! last copy out of them.
//!
//! Runs use `disable_synchronize_execution_providers`, so `RunWithBinding`
//! returns once the work is queued instead of waiting for the stream.

use std::collections::VecDeque;
use std::ffi::{CStr, CString};
use std::sync::Arc;

use ort::AsPointer;
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, NoSelectedOutputs, RunOptions, Session};
use ort::value::{Shape, TensorRefMut};

use super::device_stage::{DeviceFrameError, DeviceFramePath, FrameTraffic, GpuTimings};
use super::model_io::{ModelIo, ModelRole, ModelSpec};
use super::onnxruntime::{ComputeStream, open_cuda_session};
use super::{BackendKind, InferError};
use crate::config::Config;
use crate::frame::{FrameWork, ImageView, TensorGeometry};
use crate::gpu::{
    DeviceBuffer, DeviceTensor, Event, FrameTransfer, GpuContext, GpuOptions, GpuPreprocessor,
    PinnedBuffer, TensorElement,
};

/// One session with its binding to device buffers.
struct BoundSession {
    role: ModelRole,
    // Drop order: binding before the values it names, values before the
    // session; all before the buffers they point at (owned by `OrtDevicePath`).
    binding: IoBinding,
    _input: TensorRefMut<'static, f32>,
    _output: TensorRefMut<'static, f32>,
    session: Session,
    run_options: RunOptions<NoSelectedOutputs>,
}

impl BoundSession {
    /// # Safety
    /// `input` and `output` must stay allocated for as long as the returned
    /// value exists, and be at least as large as the model's IO.
    unsafe fn bind(
        session: Session,
        io: &ModelIo,
        role: ModelRole,
        gpu: &GpuContext,
        input: DeviceTensor,
        output: DeviceTensor,
    ) -> Result<Self, DeviceFrameError> {
        let fail = |action: &'static str, message: String| DeviceFrameError::Ort {
            role,
            action,
            message,
        };
        let input_len: usize = io.input_shape.iter().product();
        let output_len: usize = io.output_shape.iter().product();
        if input.len != input_len
            || output.len != output_len
            || input.element != TensorElement::F32
            || output.element != TensorElement::F32
        {
            return Err(fail(
                "bind device buffers",
                format!(
                    "model IO is {input_len} -> {output_len} f32, buffers are {} {:?} -> {} {:?}",
                    input.len, input.element, output.len, output.element
                ),
            ));
        }
        let device_id = i32::try_from(gpu.ordinal()).unwrap_or(0);
        let memory = || {
            MemoryInfo::new(
                AllocationDevice::CUDA,
                device_id,
                AllocatorType::Device,
                MemoryType::Default,
            )
            .map_err(|e| fail("describe CUDA memory", e.to_string()))
        };
        let shape = |dims: &[usize]| Shape::new(dims.iter().map(|&d| d as i64));
        // SAFETY: the caller keeps both buffers alive and large enough (checked
        // above against the model's shapes); they are CUDA device memory of
        // device `device_id`, as the memory info says.
        let input_value = unsafe {
            TensorRefMut::<f32>::from_raw(memory()?, input.ptr as *mut _, shape(&io.input_shape))
        }
        .map_err(|e| fail("wrap the input buffer", e.to_string()))?;
        // SAFETY: as above.
        let output_value = unsafe {
            TensorRefMut::<f32>::from_raw(memory()?, output.ptr as *mut _, shape(&io.output_shape))
        }
        .map_err(|e| fail("wrap the output buffer", e.to_string()))?;
        let mut binding = session
            .create_binding()
            .map_err(|e| fail("create the IO binding", e.to_string()))?;
        // ort's `bind_input` copies borrowed tensors and its `bind_output`
        // accepts only tensors it allocated: bind through the C API, so ONNX
        // Runtime reads and writes our buffers in place.
        bind_raw(&mut binding, true, &io.input_name, &input_value)
            .map_err(|m| fail("bind the input", m))?;
        bind_raw(&mut binding, false, &io.output_name, &output_value)
            .map_err(|m| fail("bind the output", m))?;
        let mut run_options =
            RunOptions::new().map_err(|e| fail("create run options", e.to_string()))?;
        run_options
            .disable_device_sync()
            .map_err(|e| fail("turn off the end-of-run stream sync", e.to_string()))?;
        Ok(BoundSession {
            role,
            binding,
            _input: input_value,
            _output: output_value,
            session,
            run_options,
        })
    }

    /// Queues one run on the session's compute stream.
    fn enqueue(&mut self) -> Result<(), DeviceFrameError> {
        let role = self.role;
        self.session
            .run_binding_with_options(&self.binding, &self.run_options)
            .map(drop)
            .map_err(|e| DeviceFrameError::Ort {
                role,
                action: "run",
                message: e.to_string(),
            })
    }
}

fn bind_raw(
    binding: &mut IoBinding,
    input: bool,
    name: &str,
    value: &TensorRefMut<'static, f32>,
) -> Result<(), String> {
    let name = CString::new(name).map_err(|_| format!("tensor name {name:?} contains NUL"))?;
    let api = ort::api();
    // SAFETY: the binding and value pointers come from live ort objects; the
    // value outlives the binding (`BoundSession` field order) and ONNX Runtime
    // keeps its own reference to the OrtValue.
    let status = unsafe {
        if input {
            (api.BindInput)(binding.ptr_mut(), name.as_ptr(), value.ptr())
        } else {
            (api.BindOutput)(binding.ptr_mut(), name.as_ptr(), value.ptr())
        }
    };
    if status.0.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null status is an OrtStatus we own; its message is a
    // NUL-terminated string valid until the status is released.
    let message = unsafe {
        let text = CStr::from_ptr((api.GetErrorMessage)(status.0))
            .to_string_lossy()
            .into_owned();
        (api.ReleaseStatus)(status.0);
        text
    };
    Err(message)
}

/// Frames on the stream at once: the host stages one while the GPU runs the other.
const IN_FLIGHT: usize = 2;

/// What one frame on the stream owns: where its results land and its events.
struct Ticket {
    cls_logits: PinnedBuffer<f32>,
    mask_pixels: PinnedBuffer<u64>,
    /// Before the frame, after preprocessing, after the mask, at the end.
    events: [Event; 4],
}

/// ONNX Runtime CUDA + the GPU preprocessor on one stream.
pub struct OrtDevicePath {
    // Drop order: `Drop` syncs the stream; then the sessions (which point at
    // the buffers and compute on the stream), then the buffers, then the
    // preprocessor that owns the stream.
    segmentation: BoundSession,
    classifier: BoundSession,
    cls_logits_device: DeviceBuffer<f32>,
    tickets: [Ticket; IN_FLIGHT],
    /// Tickets of the frames submitted and not yet completed, oldest first;
    /// tickets are taken in turn, so the next one follows the newest.
    in_flight: VecDeque<usize>,
    preprocessor: GpuPreprocessor,
    gpu: Arc<GpuContext>,
}

// SAFETY: every member is used only from the thread that owns the path; the
// raw pointers inside (CUDA stream, device memory, ort values) are not tied
// to the creating thread (the context is bound before each use).
unsafe impl Send for OrtDevicePath {}

impl OrtDevicePath {
    /// `geometry`: the models' tensor shapes as the pipeline read them at
    /// start; the sessions opened here must agree.
    pub fn open(cfg: &Config, geometry: TensorGeometry) -> Result<Self, DeviceFrameError> {
        let gpu_error = |action: &'static str| {
            move |source: crate::gpu::GpuError| DeviceFrameError::Gpu { action, source }
        };
        let gpu = GpuContext::open(0).map_err(gpu_error("open GPU 0"))?;
        let seg_spec = ModelSpec::segmentation(&cfg.segmentation);
        let cls_spec = ModelSpec::classifier(&cfg.classifier);
        let options = GpuOptions {
            mask_class: cfg.segmentation.mask_class,
            frame_transfer: FrameTransfer::for_gpu(&gpu),
            ..GpuOptions::default()
        };
        let preprocessor = GpuPreprocessor::new(
            &gpu,
            cfg.segmentation.normalization,
            cfg.classifier.normalization,
            cfg.classifier.mask_mean,
            cfg.classifier.mask_std,
            geometry,
            options,
        )
        .map_err(gpu_error("set up GPU preprocessing"))?;
        let stream = ComputeStream(preprocessor.stream().raw() as *mut std::ffi::c_void);
        let (seg_session, seg_io) = open_cuda_session(cfg, &seg_spec, stream)?;
        let (cls_session, cls_io) = open_cuda_session(cfg, &cls_spec, stream)?;
        let opened = super::geometry(&seg_io, &cls_io)?;
        if opened != geometry {
            return Err(InferError::Mismatch(format!(
                "the CUDA sessions read {opened:?} from {} and {}, but the pipeline was sized for {geometry:?}; \
                 were the model files replaced while starting?",
                cfg.segmentation.path.display(),
                cfg.classifier.path.display()
            ))
            .into());
        }
        let cls_logits_device = DeviceBuffer::<f32>::new(&gpu, geometry.cls_classes)
            .map_err(gpu_error("allocate the classifier logits"))?;
        let cls_out = DeviceTensor {
            ptr: cls_logits_device.device_ptr(),
            len: cls_logits_device.len(),
            element: TensorElement::F32,
        };
        // SAFETY: the bound buffers are the preprocessor's tensors and
        // `cls_logits_device`, all owned by the returned path and dropped
        // after the sessions (field order; `Drop` syncs the stream first).
        let segmentation = unsafe {
            BoundSession::bind(
                seg_session,
                &seg_io,
                ModelRole::Segmentation,
                &gpu,
                preprocessor.seg_input(),
                preprocessor.seg_logits(),
            )?
        };
        // SAFETY: as above.
        let classifier = unsafe {
            BoundSession::bind(
                cls_session,
                &cls_io,
                ModelRole::Classifier,
                &gpu,
                preprocessor.cls_input(),
                cls_out,
            )?
        };
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
        Ok(OrtDevicePath {
            segmentation,
            classifier,
            cls_logits_device,
            tickets,
            in_flight: VecDeque::with_capacity(IN_FLIGHT),
            preprocessor,
            gpu,
        })
    }
}

impl DeviceFramePath for OrtDevicePath {
    fn kind(&self) -> BackendKind {
        BackendKind::OnnxRuntimeCuda
    }

    fn submit(&mut self, frame: ImageView<'_>) -> Result<(), DeviceFrameError> {
        let gpu_error = |action: &'static str| {
            move |source: crate::gpu::GpuError| DeviceFrameError::Gpu { action, source }
        };
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
            .map_err(gpu_error("queue the frame kernel"))?;
        preprocessed
            .record(self.preprocessor.stream())
            .map_err(gpu_error("record an event"))?;
        self.segmentation.enqueue()?;
        // SAFETY: the ticket's buffers are read only after its `done` event
        // (recorded below, after this copy) completes, and not written by the
        // host; a ticket is reused only after `complete` waited for it. All
        // buffers are owned by `self`, whose Drop syncs the stream.
        unsafe { self.preprocessor.enqueue_mask_to(&mut ticket.mask_pixels) }
            .map_err(gpu_error("queue the mask kernel"))?;
        masked
            .record(self.preprocessor.stream())
            .map_err(gpu_error("record an event"))?;
        self.classifier.enqueue()?;
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
        let gpu_error = |action: &'static str| {
            move |source: crate::gpu::GpuError| DeviceFrameError::Gpu { action, source }
        };
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

impl Drop for OrtDevicePath {
    fn drop(&mut self) {
        // Sessions and bindings point into buffers freed after them: nothing
        // may be freed while queued work can still touch them.
        if let Err(e) = self.preprocessor.stream().synchronize() {
            self.gpu.record_drop_error(
                "synchronizing the ONNX Runtime device path's stream before freeing it",
                e,
            );
        }
    }
}
