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
//! - `device`: `TrtDeviceEngine`, device mode on the shared device runner;
//! - `open`: what `infer` and `main` call (open either path, `build-engine`,
//!   the `auto` reason line).
//!
//! Without the `tensorrt` feature, `stub.rs` takes this file's place: the same
//! functions as `open` (and `TrtError`), answering "not built in".

mod backend;
mod bridge;
mod calibration;
mod calibration_feed;
mod device;
mod engine;
pub mod engine_cache;
mod error;
mod model_engine;
mod open;
mod profile;
mod progress;
mod settings;

pub use backend::TensorRtBackend;
pub use bridge::{LibraryInfo, Precision, TensorInfo};
pub use device::{TrtDeviceEngine, device_runner};
pub use engine::{
    Builder, Engine, LoadedEngine, Runtime, compiled_against, int8_calibration_supported,
    load_library, version_string,
};
pub use engine_cache::{BuildReason, CacheOutcome, EngineCache};
pub use error::{TENSORRT_FIX, TrtError};
pub use open::{BUILT_IN, auto_skipped, build_engines, open_backend, open_device};
pub use progress::{BuildProgress, LOG_TARGET};
pub use settings::{TensorRtSettings, precision_name};
