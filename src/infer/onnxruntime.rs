//! Inference with ONNX Runtime (crate `ort`, library loaded at run time), on the
//! CPU or through the CUDA execution provider.
//!
//! Loading has three steps, each with its own error:
//!
//! ```text
//! find libonnxruntime.so (config, ORT_DYLIB_PATH, .ort/lib, system)
//!   -> pre-check it ourselves (ort panics on some bad libraries)
//!   -> one ort Environment for the process -> one Session per model
//! ```
//!
//! Per frame, the input slice is lent to ONNX Runtime without a copy and the
//! output lands in a tensor allocated once per model, then is copied out.
//! Device buffers with IO binding (and a CUDA stream shared with preprocessing)
//! would replace `OrtModel::run` and the preallocated output; nothing else here
//! depends on where the tensors live.
//!
//! The files: `host` (`OrtBackend`, `OrtModel`: host mode), `session` (one
//! model's session, the CUDA provider), `runtime` (the library and the
//! process's one environment), `sys` (raw C API calls `ort` does not wrap),
//! `device` (device mode; `device_stub.rs` without the `cuda` feature).

// Device mode: both sessions on the device runner's stream, bound to its
// tensors; a stub that says "no CUDA" without the `cuda` feature.
#[cfg(feature = "cuda")]
pub mod device;
#[cfg(not(feature = "cuda"))]
#[path = "onnxruntime/device_stub.rs"]
pub mod device;
mod host;
mod runtime;
mod session;
// Raw C API calls `ort` does not wrap.
pub(crate) mod sys;

pub use host::{OrtBackend, OrtModel};
pub use runtime::{PINNED_LIBRARY, discovery_candidates};
pub use session::ComputeStream;
