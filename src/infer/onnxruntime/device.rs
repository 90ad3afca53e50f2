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
//! The stream, tensors, tickets and events are the device runner's
//! (`infer::device_runner`); this file opens the sessions on its stream,
//! binds them to its tensors and queues them, as `tensorrt/device.rs` does
//! for TensorRT. Without the `cuda` feature, `device_stub.rs` stands in.
//!
//! Runs use `disable_synchronize_execution_providers`, so `RunWithBinding`
//! returns once the work is queued instead of waiting for the stream.
//!
//! Model swap (`OrtOpener`, on the reload thread): a session computes on the
//! stream it was created with, for its whole life, so new sessions are
//! created with the runner's stream (lent through `StreamLease`). They warm
//! up bound to scratch buffers of their own (a run that waits for the
//! stream; it queues between the running frames' work, which it only
//! delays) and are bound to the runner's tensors on the device thread at
//! the swap: creating an IO binding queues nothing.

use std::sync::Arc;

use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, NoSelectedOutputs, RunOptions, Session};
use ort::value::{Shape, TensorRefMut};

use super::session::{ComputeStream, open_cuda_session};
use super::sys::{BindSide, bind_in_place};
use crate::config::Config;
use crate::frame::TensorGeometry;
use crate::gpu::{DeviceBuffer, DeviceTensor, GpuContext, Stream, TensorElement};
use crate::infer::backend::BackendKind;
use crate::infer::device_error::DeviceFrameError;
use crate::infer::device_path::{
    BoundTensors, DeviceCandidate, DeviceEngine, DeviceFramePath, DeviceModelsOpener, SwapSite,
};
use crate::infer::device_runner::DeviceRunner;
use crate::infer::model_io::{BatchDim, ModelIo, ModelRole, ModelSpec};
use crate::infer::model_pair::ModelPair;
use crate::infer::warm_up::warm_up_sizes;

/// One batch size's binding: the tensors' first `frames` frames.
struct BatchBinding {
    // Drop order: the binding before the values it names.
    binding: IoBinding,
    _input: TensorRefMut<'static, f32>,
    _output: TensorRefMut<'static, f32>,
    run_options: RunOptions<NoSelectedOutputs>,
}

/// One session with a binding to the device buffers per batch size.
struct BoundSession {
    role: ModelRole,
    // Drop order: the bindings (and the values they name) before the
    // session; all before the buffers they point at (owned by the device runner).
    /// Index `b - 1`: the binding for a batch of `b` frames. One entry for a
    /// model whose batch is fixed at one.
    batches: Vec<BatchBinding>,
    session: Session,
}

impl BoundSession {
    /// Binds the session to `input` and `output`, which hold `frames` frames
    /// back to back: one binding per batch size 1..=`frames` for a model with
    /// a dynamic batch, else one for a single frame.
    ///
    /// # Safety
    /// `input` and `output` must stay allocated for as long as the returned
    /// value exists, and be at least as large as `frames` frames of the
    /// model's IO.
    unsafe fn bind(
        session: Session,
        io: &ModelIo,
        role: ModelRole,
        gpu: &GpuContext,
        (input, output): (DeviceTensor, DeviceTensor),
        frames: usize,
    ) -> Result<Self, DeviceFrameError> {
        let fail = |action: &'static str, message: String| DeviceFrameError::Ort {
            role,
            action,
            message,
        };
        let input_len: usize = io.input_shape.iter().product();
        let output_len: usize = io.output_shape.iter().product();
        let batches = match io.batch {
            BatchDim::Dynamic => frames.max(1),
            BatchDim::One => 1,
        };
        if input.len < batches * input_len
            || output.len < batches * output_len
            || input.element != TensorElement::F32
            || output.element != TensorElement::F32
        {
            return Err(fail(
                "bind device buffers",
                format!(
                    "model IO is {input_len} -> {output_len} f32 a frame for {batches} frame(s), \
                     buffers are {} {:?} -> {} {:?}",
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
        let shape = |frames: usize, dims: &[usize]| {
            Shape::new(
                dims.iter()
                    .enumerate()
                    .map(|(i, &d)| if i == 0 { frames as i64 } else { d as i64 }),
            )
        };
        let mut bound = Vec::with_capacity(batches);
        for frames in 1..=batches {
            // SAFETY: the caller keeps both buffers alive and large enough
            // for `batches` frames (checked above against the model's
            // shapes); they are CUDA device memory of device `device_id`, as
            // the memory info says.
            let input_value = unsafe {
                TensorRefMut::<f32>::from_raw(
                    memory()?,
                    input.ptr as *mut _,
                    shape(frames, &io.input_shape),
                )
            }
            .map_err(|e| fail("wrap the input buffer", e.to_string()))?;
            // SAFETY: as above.
            let output_value = unsafe {
                TensorRefMut::<f32>::from_raw(
                    memory()?,
                    output.ptr as *mut _,
                    shape(frames, &io.output_shape),
                )
            }
            .map_err(|e| fail("wrap the output buffer", e.to_string()))?;
            let mut binding = session
                .create_binding()
                .map_err(|e| fail("create the IO binding", e.to_string()))?;
            // SAFETY: both values are stored next to the binding and dropped
            // after it (`BatchBinding` field order); the buffers they wrap
            // are the caller's, kept alive as this function requires.
            unsafe {
                bind_in_place(&mut binding, BindSide::Input, &io.input_name, &input_value)
                    .map_err(|m| fail("bind the input", m))?;
                bind_in_place(
                    &mut binding,
                    BindSide::Output,
                    &io.output_name,
                    &output_value,
                )
                .map_err(|m| fail("bind the output", m))?;
            }
            let mut run_options =
                RunOptions::new().map_err(|e| fail("create run options", e.to_string()))?;
            run_options
                .disable_device_sync()
                .map_err(|e| fail("turn off the end-of-run stream sync", e.to_string()))?;
            if io.batch == BatchDim::Dynamic {
                // A CUDA graph is captured for fixed shapes: each batch size
                // gets its own (ONNX Runtime keeps one per annotation id; 0 is
                // its own default, so ids start at 1).
                run_options
                    .set(CUDA_GRAPH_ID, frames.to_string())
                    .map_err(|e| fail("name the batch size's CUDA graph", e.to_string()))?;
            }
            bound.push(BatchBinding {
                binding,
                _input: input_value,
                _output: output_value,
                run_options,
            });
        }
        Ok(BoundSession {
            role,
            batches: bound,
            session,
        })
    }

    /// Most frames one run may judge.
    fn max_batch(&self) -> usize {
        self.batches.len()
    }

    /// Runs each batch size once (`warm_up_sizes` of the bound batches) and
    /// waits for the session's stream (a warm-up on scratch buffers). No
    /// CUDA graph is recorded here: a graph would keep the scratch buffers'
    /// addresses.
    fn run_each_batch_and_wait(&mut self) -> Result<(), DeviceFrameError> {
        let role = self.role;
        let fail = |e: ort::Error| DeviceFrameError::Ort {
            role,
            action: "warm up",
            message: e.to_string(),
        };
        let mut options = RunOptions::new().map_err(fail)?;
        options.set(CUDA_GRAPH_ID, "-1").map_err(fail)?;
        // `batches[b - 1]` is the binding for a batch of `b` frames.
        let sizes = warm_up_sizes(self.max_batch());
        for batch in sizes.filter_map(|frames| self.batches.get(frames - 1)) {
            self.session
                .run_binding_with_options(&batch.binding, &options)
                .map(drop)
                .map_err(fail)?;
        }
        Ok(())
    }

    /// The session, its bindings dropped (each before the values it names).
    fn into_session(self) -> Session {
        let BoundSession {
            batches, session, ..
        } = self;
        drop(batches);
        session
    }

    /// Queues one run for the first `frames` frames on the session's
    /// compute stream.
    fn enqueue(&mut self, frames: usize) -> Result<(), DeviceFrameError> {
        let role = self.role;
        let Some(batch) = frames.checked_sub(1).and_then(|i| self.batches.get(i)) else {
            return Err(DeviceFrameError::Ort {
                role,
                action: "run",
                message: format!(
                    "a batch of {frames} frame(s), but this model judges 1 to {} at once",
                    self.batches.len()
                ),
            });
        };
        self.session
            .run_binding_with_options(&batch.binding, &batch.run_options)
            .map(drop)
            .map_err(|e| DeviceFrameError::Ort {
                role,
                action: "run",
                message: e.to_string(),
            })
    }
}

/// ONNX Runtime's run option naming the CUDA graph a run records or replays
/// (`kOrtRunOptionsConfigCudaGraphAnnotation`; -1: no graph).
const CUDA_GRAPH_ID: &str = "gpu_graph_id";

/// Both sessions, bound to the device runner's tensors; a role picks its
/// session with `ModelPair::by_role`.
pub struct OrtDeviceEngine {
    sessions: ModelPair<BoundSession>,
}

// SAFETY: the sessions and bindings are used only from the thread that owns
// the runner; the raw pointers inside (ort values over device memory) are
// not tied to the creating thread.
unsafe impl Send for OrtDeviceEngine {}

impl DeviceEngine for OrtDeviceEngine {
    fn kind(&self) -> BackendKind {
        BackendKind::OnnxRuntimeCuda
    }

    fn swap_opener(&self, site: SwapSite) -> Arc<dyn DeviceModelsOpener> {
        Arc::new(OrtOpener { site })
    }

    fn max_batch(&self) -> usize {
        self.sessions
            .segmentation
            .max_batch()
            .min(self.sessions.classifier.max_batch())
    }

    /// `role` picks its session (`ModelPair::by_role_mut`). The sessions
    /// compute on the stream they were created with (the runner's), so
    /// `stream` is not needed here.
    fn enqueue(
        &mut self,
        role: ModelRole,
        _stream: &Stream,
        frames: usize,
    ) -> Result<(), DeviceFrameError> {
        self.sessions.by_role_mut(role).enqueue(frames)
    }
}

/// Both models' sessions and IO, not bound to any buffers.
type OrtSessions = ModelPair<(Session, ModelIo)>;

/// Both models' IO, for `checked_io_geometry`.
fn ios(sessions: &OrtSessions) -> ModelPair<&ModelIo> {
    sessions.as_ref().map(|_, (_, io)| io)
}

/// Binds both sessions to the runner's tensors.
///
/// # Safety
/// The tensors must stay allocated for as long as the returned engine exists.
unsafe fn bind_engine(
    gpu: &GpuContext,
    sessions: OrtSessions,
    tensors: BoundTensors,
) -> Result<OrtDeviceEngine, DeviceFrameError> {
    let role_tensors = ModelPair {
        segmentation: (tensors.seg_input, tensors.seg_logits),
        classifier: (tensors.cls_input, tensors.cls_logits),
    };
    // Segmentation first, each session to its role's tensors.
    let sessions = sessions
        .zip(role_tensors)
        .try_map(|role, ((session, io), role_tensors)| {
            // SAFETY: forwarded from this function's contract.
            unsafe { BoundSession::bind(session, &io, role, gpu, role_tensors, tensors.frames) }
        })?;
    Ok(OrtDeviceEngine { sessions })
}

/// Opens both models' CUDA sessions on `compute`, segmentation first.
fn open_sessions(cfg: &Config, compute: ComputeStream) -> Result<OrtSessions, DeviceFrameError> {
    Ok(ModelPair {
        segmentation: open_cuda_session(cfg, &ModelSpec::segmentation(&cfg.segmentation), compute)?,
        classifier: open_cuda_session(cfg, &ModelSpec::classifier(&cfg.classifier), compute)?,
    })
}

/// Opens new models as CUDA sessions on a running runner's stream.
struct OrtOpener {
    site: SwapSite,
}

impl DeviceModelsOpener for OrtOpener {
    fn open(&self, cfg: &Config) -> Result<Box<dyn DeviceCandidate>, DeviceFrameError> {
        self.site.stream.with(|raw| {
            let compute = ComputeStream(raw as *mut std::ffi::c_void);
            let sessions = open_sessions(cfg, compute)?;
            let geometry = crate::infer::backend::checked_io_geometry(cfg, ios(&sessions))?;
            Ok(Box::new(OrtCandidate {
                sessions: Some(sessions),
                geometry,
                site: self.site.clone(),
            }) as Box<dyn DeviceCandidate>)
        })
    }
}

/// New sessions on the runner's stream, not bound to its tensors.
pub struct OrtCandidate {
    sessions: Option<OrtSessions>,
    geometry: TensorGeometry,
    site: SwapSite,
}

// SAFETY: as for `OrtDeviceEngine`: the sessions are used by one thread at a
// time (the reload thread, then the device thread they are sent to).
unsafe impl Send for OrtCandidate {}

impl DeviceCandidate for OrtCandidate {
    fn geometry(&self) -> TensorGeometry {
        self.geometry
    }

    fn warm_up(&mut self) -> Result<(), DeviceFrameError> {
        let (site, sessions) = (&self.site, &mut self.sessions);
        site.stream.with(|_| {
            let taken = sessions
                .take()
                .ok_or_else(|| DeviceFrameError::Swap("the new sessions were lost".to_string()))?;
            let (g, frames) = (self.geometry, site.frames.max(1));
            let scratch = |len: usize| -> Result<DeviceBuffer<f32>, DeviceFrameError> {
                DeviceBuffer::<f32>::new(&site.gpu, len).map_err(|source| DeviceFrameError::Gpu {
                    action: "allocate warm-up buffers",
                    source,
                })
            };
            let tensor = |buffer: &DeviceBuffer<f32>| DeviceTensor {
                ptr: buffer.device_ptr(),
                len: buffer.len(),
                element: TensorElement::F32,
            };
            let buffers = ModelPair {
                segmentation: (
                    scratch(frames * g.seg_input_len())?,
                    scratch(frames * g.seg_logits_len())?,
                ),
                classifier: (
                    scratch(frames * g.cls_input_len())?,
                    scratch(frames * g.cls_classes)?,
                ),
            };
            // Segmentation first, each session on its role's scratch buffers.
            let warmed =
                taken
                    .zip(buffers.as_ref())
                    .try_map(|role, ((session, io), (input, output))| {
                        // SAFETY: the scratch buffers outlive the bound session,
                        // which is taken apart (`into_session`) after its run,
                        // which waits for the stream.
                        let mut bound = unsafe {
                            BoundSession::bind(
                                session,
                                &io,
                                role,
                                &site.gpu,
                                (tensor(input), tensor(output)),
                                frames,
                            )?
                        };
                        bound.run_each_batch_and_wait()?;
                        Ok::<_, DeviceFrameError>((bound.into_session(), io))
                    })?;
            *sessions = Some(warmed);
            Ok(())
        })
    }

    unsafe fn bind(
        mut self: Box<Self>,
        tensors: BoundTensors,
    ) -> Result<Box<dyn DeviceEngine>, DeviceFrameError> {
        let sessions = self.sessions.take().ok_or_else(|| {
            DeviceFrameError::Swap("the new sessions were lost in their warm-up".to_string())
        })?;
        // SAFETY: forwarded from this function's contract (the runner keeps
        // `tensors` for the engine's whole life).
        let engine = unsafe { bind_engine(&self.site.gpu, sessions, tensors) }?;
        Ok(Box::new(engine))
    }
}

impl Drop for OrtCandidate {
    /// Sessions not swapped in are dropped while the runner's stream, which
    /// they were created with, is known to exist; after the runner is gone
    /// they are leaked rather than torn down against a freed stream.
    fn drop(&mut self) {
        let Some(sessions) = self.sessions.take() else {
            return;
        };
        let mut sessions = Some(sessions);
        let dropped = self.site.stream.with(|_| {
            drop(sessions.take());
            Ok(())
        });
        if dropped.is_err() {
            log::warn!(target: "sealcheck::model_swap", "new ONNX Runtime sessions outlived the device path; leaking them at shutdown");
            std::mem::forget(sessions);
        }
    }
}

/// Opens both models once, as CUDA sessions on a new stream of GPU 0, reads
/// their geometry, and binds them to a device runner's tensors on that
/// stream, sized for `[inference] max_batch` frames when both models have a
/// dynamic batch (else one).
pub fn open(cfg: &Config) -> Result<Box<dyn DeviceFramePath>, DeviceFrameError> {
    let gpu = GpuContext::open(0).map_err(|source| DeviceFrameError::Gpu {
        action: "open GPU 0",
        source,
    })?;
    let stream = Stream::new(&gpu).map_err(|source| DeviceFrameError::Gpu {
        action: "create a CUDA stream",
        source,
    })?;
    let compute = ComputeStream(stream.raw() as *mut std::ffi::c_void);
    let sessions = open_sessions(cfg, compute)?;
    let geometry = crate::infer::backend::checked_io_geometry(cfg, ios(&sessions))?;
    let f32s = (TensorElement::F32, TensorElement::F32);
    let frames = match (sessions.segmentation.1.batch, sessions.classifier.1.batch) {
        (BatchDim::Dynamic, BatchDim::Dynamic) => cfg.inference.max_batch.max(1),
        _ => 1,
    };
    let runner = DeviceRunner::open(cfg, stream, geometry, f32s, frames, |tensors| {
        // SAFETY: the runner owns the bound tensors and frees them only after
        // dropping this engine, with its stream synchronized first
        // (`DeviceRunner::open`).
        let engine = unsafe { bind_engine(&gpu, sessions, tensors) }?;
        Ok(Box::new(engine) as Box<dyn DeviceEngine>)
    })?;
    Ok(Box::new(runner))
}
