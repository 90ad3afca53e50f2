//! The device runner in a build without the `cuda` feature (as candle's
//! `dummy_cuda_backend`): the same entry point, answering that the build has
//! no CUDA, so the device stage and its callers build and test everywhere.
//! `device_stage::device_plan` never chooses device mode in such a build.

use super::device_stage::{DeviceFrameError, DevicePlan, OpenedPath};
use crate::config::Config;

pub fn open(_config: &Config, _plan: DevicePlan) -> Result<OpenedPath, DeviceFrameError> {
    Err(DeviceFrameError::Unsupported(
        "a build without the `cuda` feature",
    ))
}
