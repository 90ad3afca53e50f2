//! What goes wrong on the GPU device path, from opening an engine to one
//! frame's work. A leaf: the runner, every engine's device part, the engine
//! choice and the device stage all name it, and it names none of them (an
//! engine's own error arrives boxed, `DeviceFrameError::Engine`, converted by
//! that engine: `tensorrt::TrtError` has its `From`).

use super::error::InferError;
use super::model_role::ModelRole;
use crate::frame::FailedStage;

#[derive(Debug, thiserror::Error)]
pub enum DeviceFrameError {
    #[error("GPU device path: cannot {action}: {source}")]
    Gpu {
        action: &'static str,
        #[source]
        source: crate::gpu::GpuError,
    },
    /// The GPU preprocessor refused the frame or could not queue it.
    #[error("GPU device path: cannot {action}: {source}")]
    Preprocess {
        action: &'static str,
        #[source]
        source: crate::preprocess::FramePreprocessError,
    },
    #[error(
        "ONNX Runtime on CUDA: cannot {action} for the {role} model: {message} \
         (check the CUDA provider libraries on LD_LIBRARY_PATH and GPU memory)"
    )]
    Ort {
        role: ModelRole,
        action: &'static str,
        message: String,
    },
    #[error(transparent)]
    Open(#[from] InferError),
    /// An engine's own error, whole (its message names file, cause and fix).
    /// `unavailable`: the engine cannot run on this machine at all, so
    /// `backend = "auto"` goes on to the next one.
    #[error("{source}")]
    Engine {
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
        unavailable: bool,
    },
    #[error(
        "the device stage needs a `cuda` build and backend = \"onnxruntime\" with \
         device = \"cuda\" (or TensorRT); this one has {0}"
    )]
    Unsupported(&'static str),
    /// The device path was driven out of order (a bug in its caller).
    #[error("GPU device path: {0} (a sealcheck bug: please report it with the log)")]
    Sequence(&'static str),
    /// A batch's one wait failed: every frame of the batch fails with it.
    #[error("GPU device path: this frame's batch failed: {0}")]
    BatchFailed(String),
    /// A model swap the device path could not take.
    #[error("GPU device path: cannot swap models: {0}")]
    Swap(String),
    /// A camera's cavity layout has more judged cavities than one batch of
    /// the device path holds: a cycle is judged in one batch.
    #[error(
        "a camera's cavity layout judges {cavities} cavities per frame, all in one batch, but the \
         {engine} models on the GPU device path take at most {max_batch} frames per batch \
         (max_batch {max_batch} < {cavities} cavities): use models with a dynamic batch \
         dimension (models/*_batch.onnx), or preprocess = \"cpu\" to judge the cavities on the \
         host path"
    )]
    CycleTooLarge {
        engine: &'static str,
        max_batch: usize,
        cavities: usize,
    },
    #[error("the device thread ended before reporting whether it started")]
    StartLost,
    /// The path opened but could not run the start-up warm-up's frames.
    #[error(
        "{engine} on the GPU device path failed its warm-up before the start, at step `{step}`: {source}; \
         the models opened but do not run here: check GPU memory and the engine's libraries, \
         or choose another backend in [inference]"
    )]
    WarmUp {
        engine: &'static str,
        step: &'static str,
        #[source]
        source: Box<DeviceFrameError>,
    },
}

impl DeviceFrameError {
    /// Where a per-frame failure belongs in the result's `error` reason.
    pub fn failed_stage(&self) -> FailedStage {
        match self {
            DeviceFrameError::Ort {
                role: ModelRole::Classifier,
                ..
            } => FailedStage::Classify,
            _ => FailedStage::Segment,
        }
    }

    /// At start: whether this means "no GPU engine can run here" (so
    /// `backend = "auto"` goes on to the host engines), as opposed to a
    /// problem with the models or the config, which stops the start.
    pub fn is_engine_unavailable(&self) -> bool {
        match self {
            DeviceFrameError::Gpu { .. } | DeviceFrameError::Preprocess { .. } => true,
            DeviceFrameError::Open(e) => e.is_engine_unavailable(),
            DeviceFrameError::Engine { unavailable, .. } => *unavailable,
            DeviceFrameError::Unsupported(_) => true,
            _ => false,
        }
    }
}
