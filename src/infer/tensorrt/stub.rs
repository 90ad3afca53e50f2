//! The TensorRT backend in a build without the `tensorrt` feature (as candle's
//! dummy CUDA backend): the face the rest of `infer` and `main` call, answering
//! that TensorRT is not built in, so they need no `cfg` of their own.
//! `backend = "auto"` skips it (`is_unavailable`); `backend = "tensorrt"`
//! gets `InferError::TensorRtNotBuilt`.

use std::fmt::Display;
use std::path::PathBuf;

use super::backend::InferenceBackend;
use super::device_error::DeviceFrameError;
use super::device_path::DeviceFramePath;
use super::model_io::ModelRole;
use crate::config::Config;
use crate::infer::error::InferError;

/// Whether this build has the TensorRT backend (for `sealcheck --version`).
pub const BUILT_IN: bool = false;

/// The only thing that goes wrong with TensorRT in this build.
#[derive(Debug, thiserror::Error)]
pub enum TrtError {
    /// Worded as `InferError::TensorRtNotBuilt`, which it becomes.
    #[error("{}", InferError::TensorRtNotBuilt)]
    NotBuilt,
}

impl TrtError {
    /// TensorRT cannot run here: `backend = "auto"` goes on to the next engine.
    pub fn is_unavailable(&self) -> bool {
        true
    }
}

impl From<TrtError> for InferError {
    fn from(e: TrtError) -> Self {
        match e {
            TrtError::NotBuilt => InferError::TensorRtNotBuilt,
        }
    }
}

/// What an engine build found in the cache; never made in this build.
#[derive(Debug, Clone)]
pub enum CacheOutcome {}

/// Why `backend = "auto"` did not use TensorRT, for its reason line.
pub fn auto_skipped(_error: &dyn Display) -> String {
    "TensorRT not built in (no `tensorrt` feature)".to_string()
}

pub fn open_backend(_cfg: &Config) -> Result<Box<dyn InferenceBackend>, TrtError> {
    Err(TrtError::NotBuilt)
}

pub fn build_engines(_cfg: &Config) -> Result<Vec<(ModelRole, PathBuf, CacheOutcome)>, TrtError> {
    Err(TrtError::NotBuilt)
}

/// Device mode on TensorRT (`infer::engine_choice`).
pub fn open_device(_cfg: &Config) -> Result<Box<dyn DeviceFramePath>, DeviceFrameError> {
    Err(InferError::from(TrtError::NotBuilt).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_built_is_skipped_by_auto_and_worded_as_infer_error() {
        assert!(TrtError::NotBuilt.is_unavailable());
        assert_eq!(
            TrtError::NotBuilt.to_string(),
            InferError::TensorRtNotBuilt.to_string()
        );
        assert!(matches!(
            InferError::from(TrtError::NotBuilt),
            InferError::TensorRtNotBuilt
        ));
        assert_eq!(
            auto_skipped(&TrtError::NotBuilt),
            "TensorRT not built in (no `tensorrt` feature)"
        );
    }
}
