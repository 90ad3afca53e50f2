//! Everything that can go wrong opening or running an inference engine, with
//! the file, config key and remedy a technician needs to fix it.

use std::path::PathBuf;

use super::model_role::ModelRole;

/// The fix printed when no usable ONNX Runtime library was found.
pub const ORT_LIBRARY_FIX: &str = "run `make onnxruntime` (scripts/fetch_onnxruntime.sh) or set ORT_DYLIB_PATH or `onnxruntime_library` in [inference]";

#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error(
        "{role} model file {} does not exist (config key [{}] path); \
         copy the .onnx file there or point `path` at it",
        path.display(),
        role.config_section()
    )]
    ModelMissing { role: ModelRole, path: PathBuf },

    #[error(
        "cannot load {role} model {} with {engine}: {message}; the file is not a valid ONNX model \
         (corrupt or truncated copy?): re-copy or re-export it, or fix [{}] path",
        path.display(),
        role.config_section()
    )]
    ModelLoad {
        role: ModelRole,
        path: PathBuf,
        engine: &'static str,
        message: String,
    },

    /// The file parsed, but the engine cannot run it (unsupported operator, opset, ...).
    #[error(
        "{engine} cannot prepare {role} model {}: {message}; check that the model's operators and opset \
         are supported by {engine}, or choose another backend in [inference]",
        path.display()
    )]
    EnginePrepare {
        role: ModelRole,
        path: PathBuf,
        engine: &'static str,
        message: String,
    },

    /// A tensor name in the config is not the model's.
    #[error(
        "{role} model {}: config key [{}] {key} = \"{configured}\", but the model's {key} is named \"{actual}\"; \
         set {key} = \"{actual}\" in [{}] or use the model the config was written for",
        path.display(),
        role.config_section(),
        role.config_section()
    )]
    NameMismatch {
        role: ModelRole,
        path: PathBuf,
        key: &'static str,
        configured: String,
        actual: String,
    },

    /// The model's inputs/outputs do not fit the contract the pipeline relies on.
    #[error(
        "{role} model {} does not fit the pipeline ({}): {problem}; \
         re-export it with {expected}",
        path.display(),
        role.config_section(),
        expected = role.contract()
    )]
    Contract {
        role: ModelRole,
        path: PathBuf,
        problem: String,
    },

    /// Two models that must agree do not (e.g. a class index out of range).
    #[error("{0}")]
    Mismatch(String),

    #[error(
        "ONNX Runtime library not found; tried {}; {ORT_LIBRARY_FIX}",
        render_tried(tried)
    )]
    OrtLibraryNotFound { tried: Vec<(String, String)> },

    #[error("{} (set by {origin}) is not a usable ONNX Runtime library: {reason}; {ORT_LIBRARY_FIX}", path.display())]
    OrtLibraryInvalid {
        path: PathBuf,
        origin: String,
        reason: String,
    },

    #[error(
        "ONNX Runtime is already loaded from {} in this process; cannot switch to {} (set by {origin}) \
         without a restart",
        loaded.display(),
        requested.display()
    )]
    OrtLibraryConflict {
        loaded: PathBuf,
        requested: PathBuf,
        origin: String,
    },

    #[error("ONNX Runtime ({}) could not {action}: {message}", library.display())]
    OrtEngine {
        library: PathBuf,
        action: String,
        message: String,
    },

    #[error(
        "ONNX Runtime's CUDA execution provider is not usable ({}): {message}; \
         install a GPU build of ONNX Runtime 1.31 with CUDA and cuDNN, or set device = \"cpu\" in [inference]",
        library.display()
    )]
    CudaUnavailable { library: PathBuf, message: String },

    #[error(
        "this build has no TensorRT support (built without the `tensorrt` feature); \
         rebuild with `cargo build --release --features tensorrt` on a machine with TensorRT 10, \
         or set backend = \"onnxruntime\" or \"auto\" in [inference]"
    )]
    TensorRtNotBuilt,

    /// A caller handed a buffer of the wrong length (a bug in the caller, not the model).
    #[error("{role} {buffer} buffer holds {actual} floats, the model needs {expected}")]
    BufferLength {
        role: ModelRole,
        buffer: &'static str,
        expected: usize,
        actual: usize,
    },

    /// A model's output for a frame holds NaN or infinity: the engine
    /// overflowed (FP16 or INT8 out of range) or computed on memory it should
    /// not have; without this check the part would fail with no cause named.
    #[error(
        "the {role} model's output is not finite ({values}): the engine overflowed or misread memory; \
         check the model and its precision with `sealcheck evaluate` before it judges parts again"
    )]
    NonFiniteOutput { role: ModelRole, values: String },

    /// The engines opened but could not run the synthetic frames of the
    /// start-up warm-up (`infer::warm_up_host`): every part would fail.
    #[error(
        "{engine} failed its warm-up before the start, at step `{step}`: {message}; \
         the models opened but do not run here: check free memory and the engine's libraries, \
         or choose another backend in [inference]"
    )]
    WarmUp {
        engine: &'static str,
        step: &'static str,
        message: String,
    },

    /// One inference call failed.
    #[error("{engine} {role} inference failed: {message}")]
    Run {
        role: ModelRole,
        engine: &'static str,
        message: String,
    },
}

impl InferError {
    /// Whether this error means "this engine cannot run here" (so `auto` may try
    /// the next one), as opposed to a problem with the models or the config,
    /// which every engine would hit and which must stop the start.
    pub fn is_engine_unavailable(&self) -> bool {
        matches!(
            self,
            InferError::OrtLibraryNotFound { .. }
                | InferError::OrtLibraryInvalid { .. }
                | InferError::OrtLibraryConflict { .. }
                | InferError::OrtEngine { .. }
                | InferError::CudaUnavailable { .. }
                | InferError::TensorRtNotBuilt
        )
    }
}

fn render_tried(tried: &[(String, String)]) -> String {
    let lines: Vec<String> = tried
        .iter()
        .map(|(what, why)| format!("{what}: {why}"))
        .collect();
    lines.join("; ")
}
