//! The CUDA layer: driver, context, streams, events, memory and the kernels
//! of `kernels/*.cu` (compiled by build.rs with nvcc, embedded as fatbins).
//! Built only with the `cuda` feature. It imports no pipeline stage: GPU
//! preprocessing lives with preprocessing (`preprocess::gpu`), the engines
//! with inference (`infer::device_runner`).
//!
//! Layers, bottom up (cudarc's own `sys` -> `result` -> safe types):
//! - `cudarc::driver::result`: the driver calls, status codes to `Result`;
//!   `driver` holds the only raw calls that layer lacks, each with its reason;
//! - safe owners: `GpuContext` (a device's primary context), `Stream`,
//!   `Event`, `DeviceBuffer`, `PinnedBuffer`, `KernelSet`; each releases its
//!   resource on drop and records a failed release in the context;
//!   `error` says what failed (`GpuError`), `element` names the element
//!   types and tensor descriptions every build shares.
//!
//! Without the `cuda` feature, `stub.rs` stands in (as candle's
//! `dummy_cuda_backend`): the same names, uninhabited, and
//! `GpuContext::open` answers `GpuError::NotBuilt`; so the rest of the
//! crate needs no `cfg` to build and test everywhere.
//!
//! The driver library is loaded at run time, so a binary built with `cuda`
//! still starts on a machine without one: `GpuContext::open` then returns
//! `GpuError::NoDriver` or `GpuError::NoDevice`.

mod element;
pub use element::{DeviceTap, DeviceTensor, TensorElement};

#[cfg(feature = "cuda")]
mod context;
#[cfg(feature = "cuda")]
mod driver;
#[cfg(feature = "cuda")]
mod error;
#[cfg(feature = "cuda")]
mod host_slots;
#[cfg(feature = "cuda")]
pub mod kernels;
#[cfg(feature = "cuda")]
pub mod memory;
#[cfg(feature = "cuda")]
pub mod stream;

#[cfg(feature = "cuda")]
pub use context::{BUILT_IN, GpuContext};
#[cfg(feature = "cuda")]
pub use error::GpuError;
#[cfg(feature = "cuda")]
pub use host_slots::PinnedSlots;
#[cfg(feature = "cuda")]
pub use kernels::{Kernel, KernelSet};
#[cfg(feature = "cuda")]
pub use memory::{DeviceBuffer, DeviceValue, PinnedBuffer};
#[cfg(feature = "cuda")]
pub use stream::{Event, Stream};

#[cfg(not(feature = "cuda"))]
mod stub;
#[cfg(not(feature = "cuda"))]
pub use stub::{BUILT_IN, GpuContext, GpuError, Stream};
