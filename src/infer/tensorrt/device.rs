//! Device mode: both engines queued on the device runner's stream
//! (`infer::device_runner`), reading and writing its tensors. The runner
//! does the rest of a frame (preprocessing, mask, copies, events, tickets),
//! as for ONNX Runtime CUDA.
//!
//! ```text
//! stream: [frame upload + frame kernel] -> segmentation engine -> [mask kernel + count copy]
//!         -> classifier engine -> logits copy -> event     (host waits here, once)
//! ```

use super::error::TrtError;
use super::{ModelRole, TensorRtBackend};
use crate::config::Config;
use crate::gpu::Stream;
use crate::infer::BackendKind;
use crate::infer::InferenceBackend;
use crate::infer::device_runner::{DeviceEngine, DeviceRunner};
use crate::infer::device_stage::DeviceFrameError;

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
pub fn open(cfg: &Config) -> Result<DeviceRunner<TrtDeviceEngine>, DeviceFrameError> {
    device_runner(cfg, TensorRtBackend::open(cfg)?)
}

/// A device runner over `backend`, which was opened with `cfg`'s models.
pub fn device_runner(
    cfg: &Config,
    mut backend: TensorRtBackend,
) -> Result<DeviceRunner<TrtDeviceEngine>, DeviceFrameError> {
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
        // (`DeviceRunner::open`); `bind_device` checks lengths and element
        // types against the engines' IO.
        unsafe {
            backend.bind_device(
                ModelRole::Segmentation,
                tensors.seg_input,
                tensors.seg_logits,
            )?;
            backend.bind_device(ModelRole::Classifier, tensors.cls_input, tensors.cls_logits)?;
        }
        Ok(TrtDeviceEngine { backend })
    })
}
