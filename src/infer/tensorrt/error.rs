//! What can go wrong with TensorRT, with the file and the fix a technician needs.

use std::path::PathBuf;

use crate::gpu::GpuError;
use crate::infer::device_error::DeviceFrameError;
use crate::infer::error::InferError;
use crate::infer::model_io::ModelRole;

/// The fix printed whenever TensorRT cannot be used on this machine.
pub const TENSORRT_FIX: &str = "install TensorRT 10 (JetPack 6: `sudo apt install nvidia-tensorrt`; x86: \
     `libnvinfer10 libnvonnxparsers10`), or point SEALCHECK_TENSORRT_LIB_DIR at the folder holding \
     libnvinfer.so.10, or set backend = \"onnxruntime\" or \"auto\" in [inference]";

#[derive(Debug, thiserror::Error)]
pub enum TrtError {
    /// libnvinfer / libnvonnxparser could not be opened or are the wrong version.
    #[error("TensorRT is not usable on this machine: {message}\n{TENSORRT_FIX}")]
    LibraryUnavailable { message: String },

    /// No CUDA driver or device for TensorRT to run on.
    #[error(
        "TensorRT needs a CUDA GPU, and none is usable: {0}\n\
         (TensorRT runs only on an NVIDIA GPU; set backend = \"onnxruntime\" or \"auto\" in [inference] to run without one)"
    )]
    NoGpu(#[source] GpuError),

    #[error("CUDA operation for TensorRT ({what}) failed: {source}")]
    Gpu {
        what: &'static str,
        #[source]
        source: GpuError,
    },

    /// TensorRT itself refused something; `message` is TensorRT's own words.
    #[error("TensorRT could not {action}: {message}")]
    TensorRt { action: String, message: String },

    #[error(
        "building the TensorRT engine for the {role} model {} failed: {message}; \
         check that TensorRT supports the model's operators (`trtexec --onnx=...` shows the same error)",
        model.display()
    )]
    Build {
        role: ModelRole,
        model: PathBuf,
        message: String,
    },

    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The engine's inputs and outputs are not what the pipeline feeds and reads.
    #[error("TensorRT engine {} for the {role} model: {problem}", engine.display())]
    EngineIo {
        role: ModelRole,
        engine: PathBuf,
        problem: String,
    },

    #[error("INT8 calibration: {0}")]
    Calibration(String),

    /// A problem with a model file or the config, worded by `infer` (every backend says it the same way).
    #[error(transparent)]
    Model(Box<crate::infer::InferError>),

    /// A TensorRT setting from the environment has a value sealcheck does not know.
    #[error("{variable} = \"{value}\" is not valid: {expected}")]
    Setting {
        variable: &'static str,
        value: String,
        expected: &'static str,
    },
}

impl TrtError {
    /// "TensorRT cannot run here" (so `backend = "auto"` may try the next
    /// engine), as opposed to a problem with a model, file or setting.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            TrtError::LibraryUnavailable { .. } | TrtError::NoGpu(_)
        )
    }

    pub(crate) fn tensorrt(action: impl Into<String>) -> impl FnOnce(cxx::Exception) -> TrtError {
        let action = action.into();
        move |e| TrtError::TensorRt {
            action,
            message: e.what().to_string(),
        }
    }

    pub(crate) fn gpu(what: &'static str) -> impl FnOnce(GpuError) -> TrtError {
        move |source| TrtError::Gpu { what, source }
    }
}

impl From<InferError> for TrtError {
    fn from(e: InferError) -> Self {
        TrtError::Model(Box::new(e))
    }
}

impl From<TrtError> for InferError {
    /// Model and contract problems keep their own variant; everything else
    /// becomes a message shown as is (it names file, cause and fix).
    fn from(e: TrtError) -> Self {
        match e {
            TrtError::Model(inner) => *inner,
            other => InferError::Mismatch(other.to_string()),
        }
    }
}

impl From<TrtError> for DeviceFrameError {
    /// Kept whole for its message; whether TensorRT can run here at all
    /// decides whether `backend = "auto"` goes on to the next engine.
    fn from(e: TrtError) -> Self {
        DeviceFrameError::Engine {
            unavailable: e.is_unavailable(),
            source: Box::new(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuError;
    use crate::infer::error::InferError;

    #[test]
    fn unavailable_errors_are_told_apart_from_model_errors() {
        assert!(
            TrtError::LibraryUnavailable {
                message: "x".into()
            }
            .is_unavailable()
        );
        assert!(TrtError::NoGpu(GpuError::NoDriver).is_unavailable());
        assert!(!TrtError::Calibration("x".into()).is_unavailable());
    }

    #[test]
    fn missing_library_message_names_the_fix() {
        let message = InferError::from(TrtError::LibraryUnavailable {
            message: "cannot load libnvinfer".into(),
        })
        .to_string();
        assert!(
            message.contains("libnvinfer") && message.contains("backend = \"onnxruntime\""),
            "{message}"
        );
    }
}
