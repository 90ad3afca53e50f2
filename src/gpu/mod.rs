//! GPU preprocessing: the CUDA kernels of `kernels/*.cu` (compiled by
//! build.rs with nvcc, embedded as fatbins) and the Rust that drives them on
//! one CUDA stream. Built only with the `cuda` feature.
//!
//! Layers, bottom up (as cudarc's own `sys` -> `result` -> safe types):
//! - `driver`: every raw driver call, one function each, status to `Result`;
//! - safe owners: `GpuContext` (a device's primary context), `Stream`,
//!   `Event`, `DeviceBuffer`, `PinnedBuffer`, `KernelSet`; each releases its
//!   resource on drop and records a failed release in the context;
//! - `GpuPreprocessor`: the CPU `Preprocessor`'s work on the GPU, with the
//!   tables (`tables`) built exactly as the CPU builds them, so the results
//!   agree to the bit in f32.
//!
//! The driver library is loaded at run time, so a binary built with `cuda`
//! still starts on a machine without one: `GpuContext::open` then returns
//! `GpuError::NoDriver` or `GpuError::NoDevice`.

mod context;
mod driver;
mod error;
pub mod kernels;
pub mod memory;
mod preprocess;
pub mod stream;
pub mod tables;

pub use context::GpuContext;
pub use error::GpuError;
pub use kernels::{Kernel, KernelSet, TensorElement};
pub use memory::{DeviceBuffer, DeviceValue, PinnedBuffer};
pub use preprocess::{
    DeviceTensor, FrameTransfer, GpuOptions, GpuPreprocessor, MAX_TENSOR_SIDE, TensorValue,
};
pub use stream::{Event, Stream};
