//! The `tensorrt` inference backend (feature `tensorrt`): both models as
//! TensorRT engines, built from the ONNX files on first start and cached.
//!
//! ```text
//! open: load libnvinfer (dlopen) -> open GPU -> per model: ONNX input read
//!       (a dynamic batch: one profile, 1 .. max_batch frames) -> engine cache
//!       (load, or build with progress + INT8 calibration, save atomically)
//!       -> check the engine's IO against the config -> device buffers
//!
//! per batch, device mode (infer::device_runner: GPU preprocessing, one stream,
//! up to two batches in flight, no host sync between):
//!   frame kernels -> enqueue(Segmentation, n) -> mask kernels -> enqueue(Classifier, n)
//!   -> logits copy -> one wait at the end
//! per frame or batch, host mode (InferenceBackend::segment / classify and
//! their _batch forms, CPU mask):
//!   host input -> pinned -> device -> engine -> device -> pinned -> host output
//! ```
//!
//! A batch of n on an engine with a dynamic batch sets its input shape to n
//! frames first, only when n changed; models with a batch of one take one
//! frame a run, exactly as before batches.
//!
//! This file is the face; the parts, bottom up:
//! - `bridge`: the `#[cxx::bridge]` over `trt_bridge/` (the only FFI);
//! - `engine`: safe owners `Builder`, `Runtime`, `Engine`, `LoadedEngine`;
//! - `progress`: TensorRT's logger and build progress;
//! - `engine_cache`: engines cached by model, GPU, version and settings;
//! - `profile`: the optimization profile of a model with a dynamic batch;
//! - `settings`: `[inference.tensorrt]` resolved (`TensorRtSettings`);
//! - `calibration`: INT8 calibration images, feed and plan;
//! - `backend`: `TensorRtBackend`, both engines, host mode (`InferenceBackend`);
//! - `device`: `TrtDeviceEngine`, device mode on the shared device runner.
//!
//! Without the `tensorrt` feature, `stub.rs` takes this file's place: the same
//! functions, answering "not built in".

mod backend;
mod bridge;
mod calibration;
mod calibration_feed;
mod device;
mod engine;
pub mod engine_cache;
mod error;
mod model_engine;
mod profile;
mod progress;
mod settings;

use std::fmt::Display;
use std::path::PathBuf;

pub use backend::TensorRtBackend;
pub use bridge::{LibraryInfo, Precision, TensorInfo};
pub use device::{TrtDeviceEngine, device_runner};
pub use engine::{
    Builder, Engine, LoadedEngine, Runtime, compiled_against, int8_calibration_supported,
    load_library, version_string,
};
pub use engine_cache::{BuildReason, CacheOutcome, EngineCache};
pub use error::{TENSORRT_FIX, TrtError};
pub use progress::{BuildProgress, LOG_TARGET};
pub use settings::{TensorRtSettings, precision_name};

use super::backend::InferenceBackend;
use super::device_error::DeviceFrameError;
use super::device_path::DeviceFramePath;
use super::model_io::ModelRole;
use crate::config::Config;

/// Whether this build has the TensorRT backend (for `sealcheck --version`).
pub const BUILT_IN: bool = true;

/// Why `backend = "auto"` did not use TensorRT, for its reason line.
pub fn auto_skipped(error: &dyn Display) -> String {
    format!("TensorRT unavailable ({error})")
}

/// For `infer::open_backend`: the TensorRT backend as a trait object.
pub fn open_backend(cfg: &Config) -> Result<Box<dyn InferenceBackend>, TrtError> {
    Ok(Box::new(TensorRtBackend::open(cfg)?))
}

/// For `infer::engine_choice`: device mode on TensorRT, both engines opened
/// once on a device runner.
pub fn open_device(cfg: &Config) -> Result<Box<dyn DeviceFramePath>, DeviceFrameError> {
    device::open(cfg)
}

/// `sealcheck build-engine --config FILE`: builds (or finds) both engines and
/// says where they are.
pub fn build_engines(cfg: &Config) -> Result<Vec<(ModelRole, PathBuf, CacheOutcome)>, TrtError> {
    let backend = TensorRtBackend::open(cfg)?;
    Ok(backend
        .engines()
        .into_iter()
        .map(|(role, path, outcome)| (role, path.to_path_buf(), outcome.clone()))
        .collect())
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
