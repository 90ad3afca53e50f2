//! What the rest of `infer` and `main` call on TensorRT: whether it is built
//! in, opening the host or the device path, `build-engine`, and the reason
//! line when `backend = "auto"` skips it (as `stub.rs` answers without the
//! feature).

use std::fmt::Display;
use std::path::PathBuf;

use super::backend::TensorRtBackend;
use super::device;
use super::engine_cache::CacheOutcome;
use super::error::TrtError;
use crate::config::Config;
use crate::infer::backend::InferenceBackend;
use crate::infer::device_error::DeviceFrameError;
use crate::infer::device_path::DeviceFramePath;
use crate::infer::model_io::ModelRole;

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
