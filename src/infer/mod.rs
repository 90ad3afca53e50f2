//! Running the two models: the engine-neutral interface the pipeline calls.
//!
//! The files, bottom up (each imports only files listed before it):
//! - leaves: `model_role`, `error`, `model_io` (one contract check for every
//!   engine), `model_pair` (both models of a host engine, the one
//!   `InferenceBackend` impl of tract and ONNX Runtime), `device_error`,
//!   `device_path` (the GPU device path's traits);
//! - engines: `tract`, `onnxruntime` (+ `onnxruntime/device.rs`),
//!   `tensorrt/` (+ `tensorrt/device.rs`);
//! - `device_runner`: one stream, tensors, tickets and events for whichever
//!   engine (`Box<dyn DeviceEngine>`; it names none);
//! - `engine_choice`: the one place an engine is chosen, explicit or by the
//!   `auto` ladder, for the host path (`open_backend`) and the device path
//!   (`open_path`);
//! - the threads: `stage` (host path: preprocess and infer threads) and
//!   `device_stage` (device path: one thread, one stream).
//!
//! ```text
//! host:   InferStage ── Box<dyn InferenceBackend> ◀── engine_choice::open_backend
//! device: DeviceStage ── Box<dyn DeviceFramePath> = DeviceRunner ◀── engine_choice::open_path
//!             DeviceRunner ── Box<dyn DeviceEngine> = OrtDeviceEngine | TrtDeviceEngine
//! ```
//!
//! Every engine reads the models' input/output names and shapes from the files
//! and checks them against the config through `model_io`, so a model swap that
//! breaks the contract stops the start with a message naming file and key.

pub mod device_error;
pub mod device_path;
// The device path's runner (one stream, tickets, events) shared by the GPU
// engines; only a `cuda` build has one (the engines' device parts are stubs
// without it).
mod batch;
#[cfg(feature = "cuda")]
pub mod device_runner;
pub mod device_stage;
pub mod engine_choice;
mod error;
mod model_io;
mod model_pair;
mod model_role;
pub mod onnxruntime;
mod stage;
pub mod tract;

pub use batch::{BatchBuffers, BatchCounts, BatchPolicy, BatchRuns, infer_batch, infer_frame};
pub use engine_choice::{BackendSelection, open_backend};
pub use error::{InferError, ORT_LIBRARY_FIX};
pub use model_io::{BatchDim, ModelIo, ModelRole, check_classifier_output, models_opened};
pub use model_pair::{HostModel, ModelPair};
pub use stage::{InferStage, ModelSwap, WarmUpFrame, WarmUpSize, warm_up, warm_up_host};

use crate::config::Config;
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

    /// As the `auto` reason line names it.
    pub fn label(self) -> &'static str {
        match self {
            BackendKind::Tract => "tract",
            BackendKind::OnnxRuntimeCpu => "ONNX Runtime CPU",
            BackendKind::OnnxRuntimeCuda => "ONNX Runtime CUDA",
            BackendKind::TensorRt => "TensorRT",
        }
    }

    /// Whether the engine computes on the GPU (so it can run the device path).
    pub fn on_gpu(self) -> bool {
        matches!(self, BackendKind::OnnxRuntimeCuda | BackendKind::TensorRt)
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

    /// Most frames one `segment_batch`/`classify_batch` call runs at once:
    /// 1 unless both models have a dynamic batch dimension.
    fn max_batch(&self) -> usize {
        1
    }

    /// `frames` frames' inputs back to back in, their logits back to back
    /// out. An engine that cannot batch runs them one after another.
    fn segment_batch(
        &mut self,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        one_by_one(frames, input, logits_out, |i, o| self.segment(i, o))
    }

    /// As `segment_batch`, for the classifier.
    fn classify_batch(
        &mut self,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        one_by_one(frames, input, logits_out, |i, o| self.classify(i, o))
    }
}

/// Runs a batch frame by frame: `frames` equal chunks of `input` and of `output`.
pub(crate) fn one_by_one(
    frames: usize,
    input: &[f32],
    output: &mut [f32],
    mut run: impl FnMut(&[f32], &mut [f32]) -> Result<(), InferError>,
) -> Result<(), InferError> {
    let frames = frames.max(1);
    let (in_len, out_len) = (input.len() / frames, output.len() / frames);
    for (i, o) in input
        .chunks_exact(in_len.max(1))
        .zip(output.chunks_exact_mut(out_len.max(1)))
        .take(frames)
    {
        run(i, o)?;
    }
    Ok(())
}

/// The class indices the decision reads must exist in the models' logits.
pub(crate) fn check_class_indices(
    cfg: &Config,
    backend: &dyn InferenceBackend,
) -> Result<(), InferError> {
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
