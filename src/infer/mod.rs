//! Running the two models: the engine-neutral interface the pipeline calls,
//! and the choice of engine at start.
//!
//! ```text
//! open_backend(cfg) --backend = auto--> TensorRT (feature `tensorrt`)
//!                                       -> ONNX Runtime + CUDA -> ONNX Runtime CPU -> tract
//!                   --explicit--------> exactly that engine, or an error
//! ```
//!
//! Every engine reads the models' input/output names and shapes from the files
//! and checks them against the config through `model_io`, so a model swap that
//! breaks the contract stops the start with a message naming file and key.
//!
//! Device mode (`preprocess = "cuda"` with a GPU engine, decided from the config
//! by `device_stage::device_plan`) does not go through `open_backend`:
//!
//! ```text
//! device_stage (its thread) -> open_path(plan) -> device_runner::DeviceRunner<E>
//!     E = onnxruntime_device::OrtDeviceEngine | tensorrt::TrtDeviceEngine
//!     (each opens its models once, on the runner's stream, and only queues them)
//! ```

// The device path's runner (one stream, tickets, events) shared by the GPU
// engines; a stub that says "no CUDA" without the `cuda` feature.
#[cfg(feature = "cuda")]
pub mod device_runner;
#[cfg(not(feature = "cuda"))]
#[path = "device_runner_stub.rs"]
pub mod device_runner;
pub mod device_stage;
mod error;
mod model_io;
mod model_role;
pub mod onnxruntime;
// ONNX Runtime on CUDA with IO binding on the GPU preprocessor's stream.
#[cfg(feature = "cuda")]
pub mod onnxruntime_device;
mod stage;
pub mod tract;

pub use error::{InferError, ORT_LIBRARY_FIX};
pub use model_io::{ModelIo, ModelRole, check_classifier_output, models_opened};
pub use stage::{
    InferStage, ModelSwap, WarmUpFrame, WarmUpSize, infer_frame, warm_up, warm_up_host,
};

use crate::config::{BackendChoice, ComputeDevice, Config};
use crate::frame::TensorGeometry;

// The TensorRT backend (src/infer/tensorrt/ over trt_bridge/); a stub that
// says "not built in" without the `tensorrt` feature.
#[cfg(feature = "tensorrt")]
pub mod tensorrt;
#[cfg(not(feature = "tensorrt"))]
#[path = "tensorrt/stub.rs"]
pub mod tensorrt;

/// Which engine runs the models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Tract,
    OnnxRuntimeCpu,
    OnnxRuntimeCuda,
    TensorRt,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Tract => "tract",
            BackendKind::OnnxRuntimeCpu => "onnxruntime-cpu",
            BackendKind::OnnxRuntimeCuda => "onnxruntime-cuda",
            BackendKind::TensorRt => "tensorrt",
        }
    }
}

/// An engine with both models loaded. One per inference thread.
pub trait InferenceBackend: Send {
    fn kind(&self) -> BackendKind;
    fn segmentation_io(&self) -> &ModelIo;
    fn classifier_io(&self) -> &ModelIo;
    /// input: 1x3xHxW normalized; logits_out: 1xCxHxW. No allocation in our code beyond what the engine does.
    fn segment(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError>;
    /// input: 1x4xHxW (RGB normalized + mask); logits_out: 1xC.
    fn classify(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError>;
}

/// The engine chosen at start and why, for the start-up log line.
pub struct BackendSelection {
    pub backend: Box<dyn InferenceBackend>,
    /// e.g. "auto: TensorRT not built in; ONNX Runtime CUDA provider unavailable (...); using ONNX Runtime CPU"
    pub reason: String,
}

/// Opens the engine the config asks for. `backend = "auto"` walks the list in
/// the module comment and records why each earlier engine was skipped; an
/// explicit backend that cannot run is an error, never a fallback. Problems
/// with the models themselves stop the start whatever the backend.
///
/// `[inference] device` applies to `backend = "onnxruntime"`; `auto` always
/// tries CUDA first and says in `reason` why it did not use it.
pub fn open_backend(cfg: &Config) -> Result<BackendSelection, InferError> {
    let selection = match cfg.inference.backend {
        BackendChoice::Tract => BackendSelection {
            backend: Box::new(tract::TractBackend::open(cfg)?),
            reason: "backend = \"tract\" in [inference]".to_string(),
        },
        BackendChoice::OnnxRuntime => {
            let device = cfg.inference.device;
            BackendSelection {
                backend: Box::new(onnxruntime::OrtBackend::open(cfg, device)?),
                reason: format!(
                    "backend = \"onnxruntime\", device = \"{}\" in [inference]",
                    device_name(device)
                ),
            }
        }
        BackendChoice::TensorRt => open_tensorrt(cfg)?,
        BackendChoice::Auto => open_auto(cfg)?,
    };
    check_class_indices(cfg, selection.backend.as_ref())?;
    Ok(selection)
}

fn open_auto(cfg: &Config) -> Result<BackendSelection, InferError> {
    let mut skipped = Vec::new();
    match tensorrt::open_backend(cfg) {
        Ok(backend) => {
            return Ok(BackendSelection {
                backend,
                reason: "auto: TensorRT".to_string(),
            });
        }
        Err(e) if e.is_unavailable() => skipped.push(tensorrt::auto_skipped(&e)),
        Err(e) => return Err(e.into()),
    }
    for device in [ComputeDevice::Cuda, ComputeDevice::Cpu] {
        match onnxruntime::OrtBackend::open(cfg, device) {
            Ok(backend) => {
                let reason = format!(
                    "auto: {}; using ONNX Runtime {}",
                    skipped.join("; "),
                    device_label(device)
                );
                return Ok(BackendSelection {
                    backend: Box::new(backend),
                    reason,
                });
            }
            Err(InferError::CudaUnavailable { library, message }) => {
                log::info!(library:% = library.display(), error = message.as_str();
                    "auto: ONNX Runtime CUDA provider not usable, trying ONNX Runtime CPU");
                skipped.push(format!(
                    "ONNX Runtime CUDA provider unavailable ({message})"
                ));
            }
            // Without a usable library there is no point asking it about the CPU.
            Err(e) if e.is_engine_unavailable() => {
                log::info!(error:% = e; "auto: ONNX Runtime not usable, using tract");
                skipped.push(format!("ONNX Runtime unavailable ({e})"));
                break;
            }
            Err(e) => return Err(e),
        }
    }
    let backend = tract::TractBackend::open(cfg)?;
    Ok(BackendSelection {
        backend: Box::new(backend),
        reason: format!("auto: {}; using tract", skipped.join("; ")),
    })
}

/// `backend = "tensorrt"`: exactly TensorRT, or an error saying why not
/// (not built in, library or GPU missing, model problem), never a fallback.
fn open_tensorrt(cfg: &Config) -> Result<BackendSelection, InferError> {
    let backend = tensorrt::open_backend(cfg)?;
    Ok(BackendSelection {
        backend,
        reason: "backend = \"tensorrt\" in [inference]".to_string(),
    })
}

/// The class indices the decision reads must exist in the models' logits.
fn check_class_indices(cfg: &Config, backend: &dyn InferenceBackend) -> Result<(), InferError> {
    checked_geometry(cfg, backend.segmentation_io(), backend.classifier_io()).map(drop)
}

/// The two models' geometry, once the class indices the decision reads are
/// known to exist in their logits; every engine's opening ends here.
pub fn checked_geometry(
    cfg: &Config,
    seg: &ModelIo,
    cls: &ModelIo,
) -> Result<TensorGeometry, InferError> {
    let geometry = geometry(seg, cls)?;
    if cfg.segmentation.mask_class >= geometry.seg_classes {
        return Err(InferError::Mismatch(format!(
            "[models.segmentation] mask_class = {} but model {} has only {} classes (0..{}); fix mask_class",
            cfg.segmentation.mask_class,
            cfg.segmentation.path.display(),
            geometry.seg_classes,
            geometry.seg_classes - 1
        )));
    }
    if cfg.classifier.defect_class >= geometry.cls_classes {
        return Err(InferError::Mismatch(format!(
            "[models.classifier] defect_class = {} but model {} has only {} classes (0..{}); fix defect_class",
            cfg.classifier.defect_class,
            cfg.classifier.path.display(),
            geometry.cls_classes,
            geometry.cls_classes - 1
        )));
    }
    Ok(geometry)
}

/// Tensor shapes of the two models, for sizing the per-frame buffers.
pub fn geometry(seg: &ModelIo, cls: &ModelIo) -> Result<TensorGeometry, InferError> {
    model_io::geometry(seg, cls)
}

/// The engines this build can use, for `sealcheck --version`.
pub fn available_backends() -> Vec<String> {
    let mut backends = vec![
        "tract".to_string(),
        format!(
            "onnxruntime (cpu; cuda if provider present; libonnxruntime 1.{}+ loaded at run time)",
            ort::MINOR_VERSION
        ),
    ];
    if tensorrt::BUILT_IN {
        backends.push("tensorrt".to_string());
    }
    backends
}

fn device_name(device: ComputeDevice) -> &'static str {
    match device {
        ComputeDevice::Cpu => "cpu",
        ComputeDevice::Cuda => "cuda",
    }
}

fn device_label(device: ComputeDevice) -> &'static str {
    match device {
        ComputeDevice::Cpu => "CPU",
        ComputeDevice::Cuda => "CUDA",
    }
}
