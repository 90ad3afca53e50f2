//! Running the two models: the engine-neutral interface the pipeline calls,
//! and the one frame loop every path shares.
//!
//! Where a frame goes (either mode reads as the batcher plus one file):
//!
//! ```text
//! host:   preprocess ──chan──▶ Batcher ──▶ host_stage::HostBatches ──▶ output
//!                                            infer_batch: Box<dyn InferenceBackend>
//! device: camera rings ──────▶ Batcher ──▶ device_stage::DeviceBatches ──▶ output
//!                                            Box<dyn DeviceFramePath> = DeviceRunner
//! shadow: hand-over ─────────▶ Batcher ──▶ shadow::judge (infer_batch)
//! ```
//!
//! The device frame's way, in full (`device_stage` says more):
//!
//! ```text
//! pipeline::stages: spawn("device", DeviceStage::thread's body)
//!   device_stage/start.rs: engine_choice::open_path -> OpenedPath { path, info: PathInfo }
//!   device_stage/slots.rs: PathInfo::slot_allocator -> every ring slot page-locked, before capture starts
//!   device_stage/start.rs: warm_up_path (each batch size) -> start report -> DeviceStage::run
//!   device_stage/batches.rs, for each batch the Batcher gathers from trigger::PartRings:
//!     begin: take a waiting DeviceSwap (DeviceFramePath::swap_engine), make room on the GPU
//!     add:   DeviceFramePath::stage (upload + frame kernel; the slot kept while the GPU reads it)
//!     run:   DeviceFramePath::launch (segmentation, mask, classifier, copies back)
//!     idle / pass_on / a full GPU: DeviceFramePath::complete, oldest first -> StageMessage::Inspect
//!     hand_back: DeviceFramePath::reads_done -> ring slots the GPU is past back to capture
//! ```
//!
//! The files, bottom up (each imports only files listed before it):
//! - leaves: `model_role`, `model_pair` (`ModelPair<T>`: a `T` per role;
//!   its `by_role` is the one place a role picks its model, and every engine
//!   keeps its two models in one), `error`, `model_io` (one contract check
//!   for every engine), `backend` (`InferenceBackend`: one `run(role, …)`
//!   for either model), `host_engine` (both models of a host engine, the one
//!   `InferenceBackend` impl of tract and ONNX Runtime), `device_error`,
//!   `device_path` (the GPU device path's traits, and `PathInfo`: what a path
//!   tells once, at open);
//! - engines: `tract`, `onnxruntime` (+ `onnxruntime/device.rs`),
//!   `tensorrt/` (+ `tensorrt/device.rs`);
//! - `device_runner`: one stream, tensors, tickets and events for whichever
//!   engine (`Box<dyn DeviceEngine>`; it names none);
//! - `engine_choice`: the one place an engine is chosen, explicit or by the
//!   `auto` ladder, for the host path (`open_backend`) and the device path
//!   (`open_path`);
//! - `batch` (a host batch through both models, the batch counts),
//!   `batcher` (the one frame loop: gather, batch wait, markers after their
//!   batch, swaps at a batch boundary, frames handed back at one point; its
//!   sources, `frame::FrameSource`, are implemented beside their types),
//!   `warm_up` (the warm-ups, and `warm_up_sizes`: the one list of batch
//!   sizes every warm-up walks, the engines' swap warm-ups included);
//! - the paths: `host_stage` (host infer thread) and `device_stage/` (device
//!   path: one thread, one stream: `start`, `slots`, `batches`); the
//!   shadow's is `shadow::judge`.
//!
//! Every engine reads the models' input/output names and shapes from the files
//! and checks them against the config through `model_io`, so a model swap that
//! breaks the contract stops the start with a message naming file and key.

mod backend;
mod batch;
pub mod batcher;
pub mod device_error;
pub mod device_path;
// The device path's runner (one stream, tickets, events) shared by the GPU
// engines; only a `cuda` build has one (the engines' device parts are stubs
// without it).
#[cfg(feature = "cuda")]
pub mod device_runner;
pub mod device_stage;
pub mod engine_choice;
mod error;
mod gpu_spans;
mod host_engine;
mod host_stage;
mod model_io;
mod model_pair;
mod model_role;
mod on_gpu;
pub mod onnxruntime;
#[cfg(test)]
pub(crate) mod test_engines;
pub mod tract;
mod warm_up;

pub use backend::{BackendKind, InferenceBackend, checked_geometry, checked_io_geometry, geometry};
pub use batch::{BatchBuffers, BatchCounts, BatchPolicy, BatchRuns, infer_batch, infer_frame};
pub use engine_choice::{BackendSelection, available_backends, open_backend};
pub use error::{InferError, ORT_LIBRARY_FIX};
pub use host_engine::{HostEngine, HostModel};
pub use host_stage::{InferStage, ModelSwap};
pub use model_io::{BatchDim, ModelIo, ModelRole, check_classifier_output, models_opened};
pub use model_pair::ModelPair;
pub use warm_up::{WarmUpFrame, WarmUpSize, warm_up, warm_up_host};

// The TensorRT backend (src/infer/tensorrt/ over trt_bridge/); a stub that
// says "not built in" without the `tensorrt` feature.
#[cfg(feature = "tensorrt")]
pub mod tensorrt;
#[cfg(not(feature = "tensorrt"))]
#[path = "tensorrt/stub.rs"]
pub mod tensorrt;
