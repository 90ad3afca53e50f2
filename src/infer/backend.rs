//! What an engine is to the rest of the crate: its kind, its two models'
//! inputs and outputs, one run method for either model (`InferenceBackend`:
//! the `ModelRole` argument picks the model, through the engine's
//! `ModelPair::by_role`), and the checks every engine's opening ends with
//! (the models' geometry and the class indices the decision reads).

use super::error::InferError;
use super::model_io::{self, ModelIo, ModelRole};
use super::model_pair::ModelPair;
use crate::config::Config;
use crate::frame::TensorGeometry;

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
///
/// An engine implements `io` and `run` once for both models: the
/// `ModelRole` argument picks the model, through the engine's
/// `ModelPair::by_role` (the one place a role selects a model). Callers
/// name the role: `run(ModelRole::Segmentation, …)`, then
/// `run(ModelRole::Classifier, …)`.
pub trait InferenceBackend: Send {
    /// Which engine this is; read for log lines, error messages and the
    /// run summary.
    fn kind(&self) -> BackendKind;

    /// The checked inputs and outputs of the model that plays `role`.
    /// Called when buffers are sized and the geometry is read (`geometry`,
    /// `checked_geometry`: at opening and at a model swap).
    fn io(&self, role: ModelRole) -> &ModelIo;

    /// Most frames one `run` takes at once: 1 unless both models have a
    /// dynamic batch. Called when a path sizes its batches (start, swap).
    fn max_batch(&self) -> usize {
        1
    }

    /// Runs the model that plays `role` on `frames` frames: their inputs
    /// back to back in (segmentation: 3xHxW normalized each; classifier:
    /// 4xHxW, RGB normalized + mask), their logits back to back out. An
    /// engine that cannot batch runs them one after another. No allocation
    /// in our code beyond what the engine does. Called for every frame or
    /// batch the host path judges (`batch::infer_frame`,
    /// `batch::infer_batch`: segmentation, then the classifier) and by the
    /// warm-ups.
    fn run(
        &mut self,
        role: ModelRole,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError>;
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

/// Both models' IO, as `backend.io(role)` gives it for each role.
fn ios(backend: &dyn InferenceBackend) -> ModelPair<&ModelIo> {
    ModelPair::from_fn(|role| backend.io(role))
}

/// The engine's geometry, once the class indices the decision reads are
/// known to exist in its models' logits; every engine's opening ends here.
pub fn checked_geometry(
    cfg: &Config,
    backend: &dyn InferenceBackend,
) -> Result<TensorGeometry, InferError> {
    checked_io_geometry(cfg, ios(backend))
}

/// As `checked_geometry`, from the two models' IO (an engine that is not an
/// `InferenceBackend`: ONNX Runtime's device sessions).
pub fn checked_io_geometry(
    cfg: &Config,
    ios: ModelPair<&ModelIo>,
) -> Result<TensorGeometry, InferError> {
    let geometry = model_io::geometry(ios.segmentation, ios.classifier)?;
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

/// Tensor shapes of the engine's two models, for sizing the per-frame buffers.
pub fn geometry(backend: &dyn InferenceBackend) -> Result<TensorGeometry, InferError> {
    let ios = ios(backend);
    model_io::geometry(ios.segmentation, ios.classifier)
}
