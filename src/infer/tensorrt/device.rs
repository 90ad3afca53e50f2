//! Device mode: both engines queued on the device runner's stream
//! (`infer::device_runner`), reading and writing its tensors. The runner
//! does the rest of a batch (preprocessing, masks, copies, events, tickets),
//! as for ONNX Runtime CUDA.
//!
//! ```text
//! stream: [frame uploads + frame kernels, frames 0..n] -> segmentation engine (n frames)
//!         -> [mask kernels + count copies] -> classifier engine (n frames)
//!         -> logits copy -> event                       (host waits here, once)
//! ```
//!
//! Batches: when both models have a dynamic batch, the runner's tensors hold
//! `max_batch` frames (`[inference] max_batch`, the engines' profile
//! maximum) and `enqueue` runs the first `frames` of them, setting the
//! engines' input shape only when the batch size changed since the last
//! run (`TensorRtBackend::enqueue`). Engines with a batch of one make a
//! runner of one frame, as before. Before binding, each batch size runs
//! once on the backend's own buffers (`warm_up_batches`), so no first batch
//! of a size pays TensorRT's shape setup on the line.
//!
//! Model swap (`TrtOpener`, on the reload thread): the new backend is opened
//! as in host mode (its own stream and buffers: an execution context takes
//! the stream at each enqueue, not at creation), warmed up there (every
//! batch size), and bound to the runner's tensors on the device thread at
//! the swap (`setTensorAddress`, which queues nothing). A candidate with a
//! batch of one fits a batching runner: it runs one frame a batch.

use std::sync::Arc;

use super::backend::TensorRtBackend;
use super::error::TrtError;
use crate::config::Config;
use crate::frame::TensorGeometry;
use crate::gpu::Stream;
use crate::infer::backend::BackendKind;
use crate::infer::backend::InferenceBackend;
use crate::infer::device_error::DeviceFrameError;
use crate::infer::device_path::{
    BoundTensors, DeviceCandidate, DeviceEngine, DeviceFramePath, DeviceModelsOpener, SwapSite,
};
use crate::infer::device_runner::DeviceRunner;
use crate::infer::model_io::ModelRole;

/// The TensorRT backend with both engines bound to a runner's tensors.
pub struct TrtDeviceEngine {
    backend: TensorRtBackend,
    /// Most frames one `enqueue` runs: the bound tensors' frames, at most
    /// the engines' profile maximum; 1 unless both models batch.
    max_batch: usize,
}

impl TrtDeviceEngine {
    pub fn backend(&self) -> &TensorRtBackend {
        &self.backend
    }
}

impl DeviceEngine for TrtDeviceEngine {
    fn kind(&self) -> BackendKind {
        BackendKind::TensorRt
    }

    fn swap_opener(&self, site: SwapSite) -> Arc<dyn DeviceModelsOpener> {
        Arc::new(TrtOpener { site })
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// A batch of 2 or more on engines with a batch of one is an error
    /// (`max_batch` is 1 there); the backend checks `frames` again against
    /// what the bound tensors hold before TensorRT sees it, and picks
    /// `role`'s engine (`TensorRtBackend::enqueue`, through
    /// `ModelPair::by_role_mut`).
    fn enqueue(
        &mut self,
        role: ModelRole,
        stream: &Stream,
        frames: usize,
    ) -> Result<(), DeviceFrameError> {
        if frames == 0 || frames > self.max_batch {
            return Err(TrtError::EngineIo {
                role,
                engine: self.backend.engine_path(role).to_path_buf(),
                problem: format!(
                    "a batch of {frames} frame(s) was queued; this device engine runs 1 to {} \
                     (batches need a dynamic batch in both models)",
                    self.max_batch
                ),
            }
            .into());
        }
        // SAFETY: `stream` is the runner's live stream on this backend's GPU
        // (made in `open` from `backend.gpu()`); the engines are bound to the
        // runner's tensors, which it frees only after dropping this engine
        // with the stream synchronized.
        Ok(unsafe { self.backend.enqueue(role, stream.raw() as usize, frames) }?)
    }
}

/// Opens both engines once (loaded from the cache or built) and binds them
/// to a device runner's tensors on a new stream of the engines' GPU.
pub fn open(cfg: &Config) -> Result<Box<dyn DeviceFramePath>, DeviceFrameError> {
    Ok(Box::new(device_runner(cfg, TensorRtBackend::open(cfg)?)?))
}

/// A device runner over `backend`, which was opened with `cfg`'s models:
/// tensors of `max_batch` frames when both engines batch, else of one.
pub fn device_runner(
    cfg: &Config,
    mut backend: TensorRtBackend,
) -> Result<DeviceRunner, DeviceFrameError> {
    let geometry = crate::infer::backend::checked_geometry(cfg, &backend)?;
    let (seg_in, seg_out) = backend.io_elements(ModelRole::Segmentation);
    let (cls_in, _) = backend.io_elements(ModelRole::Classifier);
    if seg_in != cls_in {
        return Err(TrtError::EngineIo {
            role: ModelRole::Classifier,
            engine: backend.engines()[1].1.to_path_buf(),
            problem: format!(
                "input is {cls_in:?} but the segmentation input is {seg_in:?}; the GPU preprocessor writes both alike"
            ),
        }
        .into());
    }
    // Both models with a dynamic batch: the engines' profile maximum, which
    // is `cfg.inference.max_batch` for engines opened with `cfg`; else 1.
    let frames = InferenceBackend::max_batch(&backend);
    backend.warm_up_batches()?;
    let stream = Stream::new(backend.gpu())
        .map_err(TrtError::gpu("create the device path's CUDA stream"))?;
    DeviceRunner::open(
        cfg,
        stream,
        geometry,
        (seg_in, seg_out),
        frames,
        |tensors| {
            // SAFETY: the runner owns the bound tensors and frees them only after
            // dropping this engine, with its stream synchronized first
            // (`DeviceRunner::open`).
            let engine = unsafe { bind(backend, tensors) }?;
            Ok(Box::new(engine) as Box<dyn DeviceEngine>)
        },
    )
}

/// Points both engines at the runner's tensors, which hold
/// `tensors.frames` frames; `bind_device` checks lengths and element types
/// against the engines' IO.
///
/// # Safety
/// The tensors must stay allocated for as long as the returned engine
/// exists, and not be freed while work queued on them is pending.
unsafe fn bind(
    mut backend: TensorRtBackend,
    tensors: BoundTensors,
) -> Result<TrtDeviceEngine, DeviceFrameError> {
    let frames = tensors.frames.max(1);
    // SAFETY: forwarded from this function's contract.
    unsafe {
        backend.bind_device(
            ModelRole::Segmentation,
            tensors.seg_input,
            tensors.seg_logits,
            frames,
        )?;
        backend.bind_device(
            ModelRole::Classifier,
            tensors.cls_input,
            tensors.cls_logits,
            frames,
        )?;
    }
    let max_batch = if backend.batches() {
        frames.min(InferenceBackend::max_batch(&backend))
    } else {
        1
    };
    Ok(TrtDeviceEngine { backend, max_batch })
}

/// Opens new engines (from the cache, or built) for a running device runner.
struct TrtOpener {
    site: SwapSite,
}

impl DeviceModelsOpener for TrtOpener {
    fn open(&self, cfg: &Config) -> Result<Box<dyn DeviceCandidate>, DeviceFrameError> {
        let backend = TensorRtBackend::open(cfg)?;
        let geometry = crate::infer::backend::checked_geometry(cfg, &backend)?;
        let elements = (
            backend.io_elements(ModelRole::Segmentation).0,
            backend.io_elements(ModelRole::Segmentation).1,
        );
        let classifier_input = backend.io_elements(ModelRole::Classifier).0;
        if elements != self.site.elements || classifier_input != elements.0 {
            return Err(DeviceFrameError::Swap(format!(
                "the new engines' element types (inputs {:?}/{classifier_input:?}, segmentation logits {:?}) \
                 differ from the running ones' ({:?}, {:?}); the GPU preprocessor writes those",
                elements.0, elements.1, self.site.elements.0, self.site.elements.1
            )));
        }
        Ok(Box::new(TrtCandidate { backend, geometry }))
    }
}

/// A new TensorRT backend on its own stream and buffers.
pub struct TrtCandidate {
    backend: TensorRtBackend,
    geometry: TensorGeometry,
}

impl DeviceCandidate for TrtCandidate {
    fn geometry(&self) -> TensorGeometry {
        self.geometry
    }

    /// One frame through both models, then each batch size once (engines
    /// with a dynamic batch), all on the candidate's own buffers.
    fn warm_up(&mut self) -> Result<(), DeviceFrameError> {
        crate::infer::warm_up::warm_up(&mut self.backend, self.geometry, 1)?;
        Ok(self.backend.warm_up_batches()?)
    }

    unsafe fn bind(
        self: Box<Self>,
        tensors: BoundTensors,
    ) -> Result<Box<dyn DeviceEngine>, DeviceFrameError> {
        // SAFETY: forwarded from this function's contract.
        let engine = unsafe { bind(self.backend, tensors) }?;
        Ok(Box::new(engine))
    }
}
