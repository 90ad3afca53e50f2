//! Device mode: both engines queued on the device runner's stream
//! (`infer::device_runner`), reading and writing its tensors. The runner
//! does the rest of a frame (preprocessing, mask, copies, events, tickets),
//! as for ONNX Runtime CUDA.
//!
//! ```text
//! stream: [frame upload + frame kernel] -> segmentation engine -> [mask kernel + count copy]
//!         -> classifier engine -> logits copy -> event     (host waits here, once)
//! ```
//!
//! Model swap (`TrtOpener`, on the reload thread): the new backend is opened
//! as in host mode (its own stream and buffers: an execution context takes
//! the stream at each enqueue, not at creation), warmed up there, and bound
//! to the runner's tensors on the device thread at the swap
//! (`setTensorAddress`, which queues nothing).

use std::sync::Arc;

use super::error::TrtError;
use super::{ModelRole, TensorRtBackend};
use crate::config::Config;
use crate::frame::TensorGeometry;
use crate::gpu::Stream;
use crate::infer::BackendKind;
use crate::infer::InferenceBackend;
use crate::infer::device_error::DeviceFrameError;
use crate::infer::device_path::{
    BoundTensors, DeviceCandidate, DeviceEngine, DeviceFramePath, DeviceModelsOpener, SwapSite,
};
use crate::infer::device_runner::DeviceRunner;

/// The TensorRT backend with both engines bound to a runner's tensors.
pub struct TrtDeviceEngine {
    backend: TensorRtBackend,
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

    fn enqueue(&mut self, role: ModelRole, stream: &Stream) -> Result<(), DeviceFrameError> {
        // SAFETY: `stream` is the runner's live stream on this backend's GPU
        // (made in `open` from `backend.gpu()`); the engines are bound to the
        // runner's tensors, which it frees only after dropping this engine
        // with the stream synchronized.
        Ok(unsafe { self.backend.enqueue(role, stream.raw() as usize) }?)
    }
}

/// Opens both engines once (loaded from the cache or built) and binds them
/// to a device runner's tensors on a new stream of the engines' GPU.
pub fn open(cfg: &Config) -> Result<Box<dyn DeviceFramePath>, DeviceFrameError> {
    Ok(Box::new(device_runner(cfg, TensorRtBackend::open(cfg)?)?))
}

/// A device runner over `backend`, which was opened with `cfg`'s models.
pub fn device_runner(
    cfg: &Config,
    backend: TensorRtBackend,
) -> Result<DeviceRunner, DeviceFrameError> {
    let geometry =
        crate::infer::checked_geometry(cfg, backend.segmentation_io(), backend.classifier_io())?;
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
    let stream = Stream::new(backend.gpu())
        .map_err(TrtError::gpu("create the device path's CUDA stream"))?;
    DeviceRunner::open(cfg, stream, geometry, (seg_in, seg_out), |tensors| {
        // SAFETY: the runner owns the bound tensors and frees them only after
        // dropping this engine, with its stream synchronized first
        // (`DeviceRunner::open`).
        let engine = unsafe { bind(backend, tensors) }?;
        Ok(Box::new(engine) as Box<dyn DeviceEngine>)
    })
}

/// Points both engines at the runner's tensors; `bind_device` checks
/// lengths and element types against the engines' IO.
///
/// # Safety
/// The tensors must stay allocated for as long as the returned engine
/// exists, and not be freed while work queued on them is pending.
unsafe fn bind(
    mut backend: TensorRtBackend,
    tensors: BoundTensors,
) -> Result<TrtDeviceEngine, DeviceFrameError> {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        backend.bind_device(
            ModelRole::Segmentation,
            tensors.seg_input,
            tensors.seg_logits,
        )?;
        backend.bind_device(ModelRole::Classifier, tensors.cls_input, tensors.cls_logits)?;
    }
    Ok(TrtDeviceEngine { backend })
}

/// Opens new engines (from the cache, or built) for a running device runner.
struct TrtOpener {
    site: SwapSite,
}

impl DeviceModelsOpener for TrtOpener {
    fn open(&self, cfg: &Config) -> Result<Box<dyn DeviceCandidate>, DeviceFrameError> {
        let backend = TensorRtBackend::open(cfg)?;
        let geometry = crate::infer::checked_geometry(
            cfg,
            backend.segmentation_io(),
            backend.classifier_io(),
        )?;
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

    fn warm_up(&mut self) -> Result<(), DeviceFrameError> {
        Ok(crate::infer::warm_up(&mut self.backend, self.geometry)?)
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
