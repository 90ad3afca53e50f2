//! The device stage: for GPU backends with `preprocess = "cuda"`, one thread
//! owns the CUDA stream and every device buffer and takes each frame from the
//! capture ring to the decision's inputs, replacing the preprocess and infer
//! threads.
//!
//! A device frame's way:
//!
//! ```text
//! pipeline::stages: spawn("device", ..) ── start.rs: open the path (engine_choice::open_path)
//!     -> slots.rs: every ring slot's page-locked memory, before capture starts
//!     -> start.rs: warm-up (each batch size, each in-flight batch) -> start report
//!     -> batches.rs: the one frame loop (batcher::Batcher) over the cameras' rings:
//!
//! ring slot (page-locked; mapped with zero_copy) --held until the GPU read it--> back to capture
//!   upload stream:  H2D straight from the slot (none when mapped)         DeviceFramePath::stage
//!   compute stream: frame kernel (reads the upload, or the mapped slot in place)
//!           -> segmentation -> mask kernel -> classifier                   DeviceFramePath::launch
//!           -> D2H: classifier logits + mask pixel count (<= 64 bytes)
//!   host: one wait per batch -> StageMessage::Inspect(work) to the output  DeviceFramePath::complete
//! ```
//!
//! The files, one job each: `start` (the thread's body: open, warm up,
//! report, then run; `warm_up_path`), `slots` (the ring slots' page-locked
//! memory, allocated before the start), `batches` (what the device path
//! does with a batch: `DeviceBatches`, the loop's `BatchPath`).
//!
//! The ring slots get their page-locked memory from the path
//! (`PathInfo::slot_allocator`), installed in the run's `SlotMemory` once
//! the path is open and before capture starts. A slot the GPU reads in
//! place is kept (`DeviceBatches::reading`) until the path says the GPU is
//! past it (`reads_done`: the slot's upload, or its in-place kernel,
//! completed), then handed back to capture at the batcher's one hand-back
//! point (`BatchPath::hand_back`); at the end every read is waited for and
//! every slot handed back before the path is dropped.
//!
//! Which engine, and whether this stage runs at all, is decided from the
//! config (`device_plan`) before any engine is opened; the thread opens the
//! engine once (`open_path`) and reports the models' geometry back on its
//! start channel (`StartWait`), which sizes the pipeline's work records.
//!
//! The loop is the one batcher's (`batcher::Batcher`, over the cameras'
//! rings): frames already waiting (from any camera) are judged as one
//! batch, up to the path's `max_batch` (models with a dynamic batch) and
//! `[inference] max_batch`, waiting at most `batch_wait_us` for more; a
//! marker or the end goes out after the batch.
//!
//! A path may keep more than one batch on the stream (`max_in_flight`): when
//! the next frame is already waiting in the ring, the host stages it while the
//! GPU still works on the batch before. When none is waiting, the batch on the
//! GPU is finished at once (`BatchPath::idle`), so a camera's frame never
//! waits for the next one.
//!
//! The host mask, tensors and segmentation logits of `FrameWork` are not
//! filled: the decision reads only `mask_pixels` and `cls_logits`.
//!
//! New models on reload (`crate::model_swap`): the reload thread opens them
//! on the running engine through the path's `DeviceModelsOpener` while this
//! thread goes on inspecting; the prepared engine arrives as a `DeviceSwap`
//! and is taken before the next frame is staged, once every frame on the GPU
//! was completed by the old engine:
//!
//! ```text
//! frame N-1, N on the GPU (old engine) | swap waiting -> complete N-1, N -> bind new engine -> frame N+1
//! ```

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use crate::frame::{FrameWork, PixelDemand, StageMessage};
use crate::frame_bytes::SlotMemory;
use crate::infer::batch::BatchCounts;
use crate::model_id::ModelIds;
use crate::trigger::PartRings;

mod batches;
#[cfg(test)]
mod fake_path;
mod slots;
mod start;
#[cfg(test)]
mod tests;

// The device path's vocabulary and its opening, for the pipeline and the
// model swap, which see the device path only through this stage.
pub use super::device_error::DeviceFrameError;
pub use super::device_path::{
    DeviceCandidate, DeviceFramePath, DeviceModelsOpener, FramePart, FrameTraffic, GpuTimings,
    OpenedPath, PathInfo, ReadWait, run_crops, run_frame,
};
pub use super::engine_choice::{DevicePlan, device_plan, open_path};
pub use start::{DeviceStartFailed, DeviceStarted, StartWait, WARM_UP_ROUNDS, warm_up_path};

/// New models for the device thread, opened, checked and warmed up beside
/// the running ones (`crate::model_swap::prepare_device`); taken between two
/// frames with nothing in flight.
pub struct DeviceSwap {
    /// Opened by the running path's `PathInfo::swap_opener`, and warmed up;
    /// `None`: the running engine goes on (a recipe switch that changes
    /// only thresholds: `models` names the new recipe).
    pub engine: Option<Box<dyn DeviceCandidate>>,
    pub models: Arc<ModelIds>,
    /// Called on the device thread once the new engine judges (the status
    /// server's `model_info`); not called when binding it fails.
    pub on_swapped: Option<Box<dyn FnOnce() + Send>>,
}

/// The device thread's channels.
pub struct DeviceStage {
    pub input: PartRings,
    pub output: Sender<StageMessage>,
    /// Work records back from the output stage (backpressure, as in preprocess).
    pub free_work: Receiver<Box<FrameWork>>,
    pub liveness: crate::service::Liveness,
    /// The ids of the running engine's model files, stamped on every frame it judges.
    pub models: Arc<ModelIds>,
    /// Model swaps accepted on reload.
    pub swaps: Receiver<DeviceSwap>,
    /// Whether the archive or the live view wants frames' pixels and masks
    /// on the host, read once per frame.
    pub pixel_demand: Arc<PixelDemand>,
    /// Batches made and the frames in them, for the run summary and `bench`.
    pub batch_counts: Arc<BatchCounts>,
    /// Where the cameras' ring slots grow their memory: the path's
    /// page-locked allocator is installed here once it is open.
    pub slot_memory: SlotMemory,
}
