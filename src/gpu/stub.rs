//! The CUDA layer in a build without the `cuda` feature: the names the rest
//! of the crate uses, none of which can exist (`Infallible` inside), and a
//! `GpuContext::open` that says the build has no CUDA. Nothing here runs.

use std::convert::Infallible;
use std::sync::Arc;

/// Whether this build has the CUDA layer (the kernels, the device path).
pub const BUILT_IN: bool = false;

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error(
        "`preprocess = \"cuda\"` in [inference], but this build has no CUDA support \
         (built without the `cuda` feature) — set preprocess = \"cpu\", or rebuild with \
         `cargo build --release --features cuda`"
    )]
    NotBuilt,
}

/// Never made: `open` always fails in this build.
#[derive(Debug)]
pub struct GpuContext {
    never: Infallible,
}

impl GpuContext {
    pub fn open(_ordinal: usize) -> Result<Arc<GpuContext>, GpuError> {
        Err(GpuError::NotBuilt)
    }

    pub fn name(&self) -> &str {
        match self.never {}
    }

    pub fn integrated(&self) -> bool {
        match self.never {}
    }

    pub fn memory_in_use(&self) -> Result<u64, GpuError> {
        match self.never {}
    }
}

/// Never made: there is no context to make one in.
#[derive(Debug)]
pub struct Stream {
    never: Infallible,
}

impl Stream {
    pub fn new(gpu: &Arc<GpuContext>) -> Result<Self, GpuError> {
        match gpu.never {}
    }

    pub fn gpu(&self) -> &Arc<GpuContext> {
        match self.never {}
    }
}
