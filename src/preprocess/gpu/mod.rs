//! `GpuPreprocessor`: the CPU `Preprocessor`'s work done by the CUDA kernels
//! (`crate::gpu`) on one stream, with every buffer allocated at start; the
//! tables (`tables`) are built exactly as the CPU builds them, so the
//! results agree to the bit in f32. Built with the `cuda` feature;
//! `gpu_stub.rs` stands in without it.
//!
//! Two ways to use it:
//! - Device mode (GPU inference backends): `enqueue_frame_at` queues the
//!   frame's upload (or in-place read) and the frame kernel and returns; the engine reads `seg_input()`
//!   and writes `seg_logits()` on the same `stream()`; `enqueue_mask` queues
//!   the mask kernels and the copy of the pixel count; `wait_mask_pixels`
//!   is the one wait of the frame. Nothing else synchronizes.
//! - Host mode (CPU inference backends, to check the kernels inside the whole
//!   pipeline): `frame_to_tensors` and `logits_to_mask` take and fill host
//!   slices exactly like the CPU `Preprocessor::frame_to_tensors` and
//!   `logits_to_mask` + `Preprocessor::mask_to_classifier_channel`.
//!
//! A frame in page-locked memory (a camera's ring slot once the device path
//! runs, `crate::frame_bytes`) is uploaded straight from where capture wrote
//! it, on an upload stream of its own, so a batch uploads while the one
//! before it computes; with `FrameTransfer::Mapped` (`[inference]
//! zero_copy`, by default on a GPU that shares DRAM with the CPU: a Jetson)
//! the kernel reads it in place and nothing is copied at all. Heap frames go
//! through a page-locked staging copy first. Each staging slot has events
//! that order the two streams and tell when the GPU has finished reading a
//! frame (`reads_done`), before which the caller must not reuse its memory.
//!
//! Its files: `preprocessor.rs` (the type, its construction and what it
//! tells the engines), `device.rs` (device mode), `host.rs` (host mode),
//! `mask.rs` (the mask kernels), `buffers.rs` (device tensors, frame slots,
//! staging), `options.rs` (what it is built for), `diagnostics.rs`
//! (synchronous copies for tests) and `tables.rs` (the tables the kernels
//! read, shared with the benchmark).

mod buffers;
mod device;
mod diagnostics;
mod host;
mod mask;
mod options;
mod preprocessor;
pub mod tables;

pub use buffers::TensorValue;
pub use mask::widen_mask;
pub use options::{FrameTransfer, GpuOptions, MAX_TENSOR_SIDE};
pub use preprocessor::GpuPreprocessor;
