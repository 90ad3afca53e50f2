//! ONNX Runtime's device part in a build without the `cuda` feature (as
//! `tensorrt/stub.rs` and `gpu/stub.rs`): the same entry point, answering
//! that the build has no CUDA, so the engine choice builds everywhere.
//! `engine_choice::device_plan` never chooses device mode in such a build.

use crate::config::Config;
use crate::infer::device_error::DeviceFrameError;
use crate::infer::device_path::DeviceFramePath;

pub fn open(_cfg: &Config) -> Result<Box<dyn DeviceFramePath>, DeviceFrameError> {
    Err(DeviceFrameError::Unsupported(
        "a build without the `cuda` feature",
    ))
}
