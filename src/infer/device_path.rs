//! The device path's contract, below everything that implements or drives
//! it: what a whole-frame GPU path offers the device stage
//! (`DeviceFramePath`, told of once in `PathInfo`), what an engine offers the runner (`DeviceEngine`),
//! and how new models reach a running path on reload (`DeviceModelsOpener`
//! -> `DeviceCandidate`). A leaf of `infer`: it names only the shared
//! vocabulary (`gpu` types, `ModelRole`, `BackendKind`, the error).
//!
//! ```text
//! device_stage ──drives──▶ dyn DeviceFramePath ◀──implements── device_runner::DeviceRunner
//!                                                                 │ holds
//!                                                                 ▼
//!        onnxruntime::device::OrtDeviceEngine ──implements──▶ dyn DeviceEngine ◀── tensorrt::device::TrtDeviceEngine
//! engine_choice: opens one of them (explicit backend or the `auto` ladder)
//! ```
//!
//! The runner owns the stream and the tensors and knows no engine; an engine
//! only queues its models on them. A swap needs no type test: the candidate
//! the running engine's opener made binds itself (`DeviceCandidate::bind`)
//! into the engine the runner holds from then on.

use std::sync::{Arc, RwLock};

use super::backend::BackendKind;
use super::device_error::DeviceFrameError;
use super::model_role::ModelRole;
use crate::config::{CavityRect, Config};
use crate::frame::{FrameWork, ImageView, TensorGeometry};
use crate::frame_bytes::{HostAllocator, HostPlacement};
use crate::gpu::{DeviceTensor, GpuContext, Stream, TensorElement};

/// GPU milliseconds of each part of a frame's batch, from CUDA events.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuTimings {
    /// The batch's uploads on the upload stream, from the first frame's copy
    /// being queued to the last one's end (0 when mapped: no upload).
    pub upload_ms: f64,
    /// On the compute stream, from the batch's turn to its last frame
    /// kernel: waiting for the uploads not yet done, plus the frame kernels.
    pub preprocess_ms: f64,
    /// Segmentation model plus the mask kernel and the count copy.
    pub segment_ms: f64,
    /// Classifier model plus the logits copy.
    pub classify_ms: f64,
    /// The whole batch on the GPU: from its first upload queued to its
    /// results on the host (overlaps the batch before it).
    pub batch_ms: f64,
}

/// Bytes a frame moves between host and device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameTraffic {
    pub host_to_device: usize,
    pub device_to_host: usize,
    /// More out while the archive or the live view wants the mask on the
    /// host (the segmentation logits).
    pub host_mask: usize,
}

impl FrameTraffic {
    /// A device path's traffic: the frame in once (copied, or read in place
    /// when mapped on a Jetson), the classifier logits and the mask's pixel
    /// count out.
    /// `seg_logits_bytes`: what a frame whose mask the host wants adds.
    pub fn device_path(frame: &ImageView<'_>, cls_classes: usize, mask_bytes: usize) -> Self {
        FrameTraffic {
            host_to_device: frame.stride * frame.height.saturating_sub(1)
                + frame.width * frame.layout.bytes_per_pixel(),
            device_to_host: cls_classes * std::mem::size_of::<f32>() + std::mem::size_of::<u64>(),
            host_mask: mask_bytes,
        }
    }
}

/// What a device path is and offers the run around it, told once, when it
/// was opened (`DeviceFramePath::describe`, read by `OpenedPath::new`).
#[derive(Clone)]
pub struct PathInfo {
    pub kind: BackendKind,
    /// The models' tensor shapes the path was sized for.
    pub geometry: TensorGeometry,
    /// Most frames one batch may hold (1: one frame at a time). A model
    /// swap may lower it (`DeviceFramePath::swap_engine` returns the new one).
    pub max_batch: usize,
    /// How many batches may be on the GPU at once (each with its own result
    /// buffers and events).
    pub max_in_flight: usize,
    /// The classifier values and the mask bytes `FrameTraffic::device_path`
    /// counts out of the GPU (`traffic`).
    pub cls_classes: usize,
    pub mask_bytes: usize,
    /// Where the cameras' ring slots should get their memory so that this
    /// path reads frames in place (page-locked, mapped with `zero_copy`);
    /// `None`: heap memory will do. Installed before capture starts.
    pub slot_allocator: Option<Arc<dyn HostAllocator>>,
    /// What opens new models of this path's engine on another thread, for a
    /// swap on reload; `None`: this path cannot swap (a restart is needed).
    pub swap_opener: Option<Arc<dyn DeviceModelsOpener>>,
}

impl PathInfo {
    /// Host<->device bytes per frame of `frame`'s size.
    pub fn traffic(&self, frame: &ImageView<'_>) -> FrameTraffic {
        FrameTraffic::device_path(frame, self.cls_classes, self.mask_bytes)
    }
}

/// What of a frame `DeviceFramePath::stage` turns into the next entry of the
/// batch: the whole frame (one seal), or one cavity's crop of it (a camera
/// with a `[source.layout]`: each judged cavity is an entry of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramePart {
    /// The whole frame.
    Whole,
    /// The crop `rect` of the frame (inside it: `CavityLayout::crop` of a
    /// frame that fits the layout), resized as the host path resizes the
    /// same crop. `first`: the frame's first crop staged: the frame goes to
    /// the GPU (its upload, or its in-place read) and the kernel reads
    /// `rect` of it. Otherwise `frame` is the one the stage call just before
    /// staged, passed again unchanged, and the kernel reads `rect` of it
    /// where it already is on the GPU: nothing is uploaded again.
    Crop { rect: CavityRect, first: bool },
}

/// How long `DeviceFramePath::reads_done` may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadWait {
    /// Answer at once (the hand-back after each step of the frame loop).
    Poll,
    /// First block until the GPU has read every frame staged so far (the
    /// end of a run, before every ring slot goes back).
    All,
}

/// A whole frame on one CUDA stream, frame in, decision inputs out.
/// Implemented by `device_runner::DeviceRunner` for every GPU engine (and by
/// a test double in `device_stage`). Every hook is called on the device
/// thread. A frame's way through it:
///
/// ```text
/// describe (once, at open)
/// stage, stage, .. (<= max_batch) -> launch -> .. -> complete, complete, .. (oldest first)
///   (up to max_in_flight batches launched and not yet completed)
///   a cavity layout's frame: stage(Crop first), stage(Crop), .. one entry per
///   judged cavity, all before the next frame and before `reads_done`
/// reads_done: after each step, which staged frames' bytes the GPU is past
/// swap_engine: between batches, with nothing staged or in flight
/// ```
pub trait DeviceFramePath {
    /// Called once, right after the path was opened (`OpenedPath::new`):
    /// what it is and what it offers the run (`PathInfo`).
    fn describe(&self) -> PathInfo;

    /// Called for each frame of a batch as the batch is gathered (and by
    /// the warm-up), with `FramePart::Whole`: queues `frame`'s upload (or,
    /// mapped, its in-place read) and preprocessing as the next entry of
    /// the batch being built (at most `max_batch` entries); `placement`
    /// says where its bytes live. A failed stage leaves the entry out of
    /// the batch. `host_mask`: also bring the entry's seal mask back to the
    /// host (for the archive and the live view).
    ///
    /// For a frame with a cavity layout, called once per judged cavity, one
    /// call right after the other, with `FramePart::Crop`: the first crop
    /// puts the frame on the GPU, each later one only runs the frame kernel
    /// on its crop of the frame already there. Each crop is an entry of its
    /// own (its own result at `complete`).
    ///
    /// Returns `Some(n)` when the GPU reads `frame`'s own (page-locked)
    /// bytes after this returns: they must stay valid and unwritten until
    /// `reads_done` is above `n` (every crop of a frame returns the frame's
    /// `n`, and the read ends after its last crop). `None`: `frame` may be
    /// reused at once (heap bytes are copied into staging first) once its
    /// last crop is staged.
    fn stage(
        &mut self,
        frame: ImageView<'_>,
        placement: HostPlacement,
        host_mask: bool,
        part: FramePart,
    ) -> Result<Option<u64>, DeviceFrameError>;

    /// Called once a batch is gathered: queues both models and the copies
    /// back for the frames staged since the last launch, as one batch, and
    /// returns at once (nothing staged: nothing to do). At most
    /// `max_in_flight` batches may be launched and not yet completed. A
    /// failed launch leaves none of the batch's frames to complete.
    fn launch(&mut self) -> Result<(), DeviceFrameError>;

    /// Called once for each frame launched, oldest first, when its batch is
    /// finished (the GPU holds `max_in_flight` batches, nothing waits in
    /// the rings, or before a marker, the end or a model swap): the first
    /// frame of a batch waits, once, for the whole batch. Fills
    /// `work.mask_pixels` and `work.cls_logits` (and `work.mask` when it was
    /// staged with `host_mask`), and returns the GPU time of each part of
    /// its batch.
    fn complete(&mut self, work: &mut FrameWork) -> Result<GpuTimings, DeviceFrameError>;

    /// Called after each step of the frame loop while ring slots are kept
    /// (`ReadWait::Poll`, never blocks), and once at the end of a run
    /// (`ReadWait::All`): every frame staged with a number below the one
    /// returned has been read by the GPU (its upload or its in-place
    /// kernel is done).
    fn reads_done(&mut self, wait: ReadWait) -> Result<u64, DeviceFrameError>;

    /// Called between two batches when a model swap waits, with no frame
    /// staged or in flight: replaces the engine with `candidate` (from this
    /// path's `PathInfo::swap_opener`, warmed up), binding it to the path's
    /// tensors, and returns the most frames a batch may hold from now on.
    /// On an error the running engine stays.
    fn swap_engine(
        &mut self,
        candidate: Box<dyn DeviceCandidate>,
    ) -> Result<usize, DeviceFrameError>;
}

/// One frame from heap memory through `path` as a batch of its own, with
/// its mask brought back: stage, launch, complete. For checks outside the
/// frame loop (`tests/parity.rs`); the device thread batches.
pub fn run_frame(
    path: &mut dyn DeviceFramePath,
    frame: ImageView<'_>,
    work: &mut FrameWork,
) -> Result<GpuTimings, DeviceFrameError> {
    path.stage(frame, HostPlacement::Pageable, true, FramePart::Whole)?;
    path.launch()?;
    path.complete(work)
}

/// One frame from heap memory through `path` as a cavity layout's cycle:
/// crop `crops[i]` into `works[i]` (as many as there are crops), all in
/// one batch (at most the path's `max_batch`), masks brought back: the
/// frame goes to the GPU once, each crop is a kernel over it. For checks
/// outside the frame loop (`tests/gpu_parity.rs`); `device_stage` does
/// the same per ring slot. The first error ends the cycle.
pub fn run_crops(
    path: &mut dyn DeviceFramePath,
    frame: ImageView<'_>,
    crops: &[CavityRect],
    works: &mut [FrameWork],
) -> Result<GpuTimings, DeviceFrameError> {
    for (i, &rect) in crops.iter().enumerate() {
        let part = FramePart::Crop {
            rect,
            first: i == 0,
        };
        path.stage(frame, HostPlacement::Pageable, true, part)?;
    }
    path.launch()?;
    let mut timings = GpuTimings::default();
    for work in works.iter_mut().take(crops.len()) {
        timings = path.complete(work)?;
    }
    Ok(timings)
}

/// How one GPU engine runs its two models on the runner's stream. The
/// runner holds it as `Box<dyn DeviceEngine>` and knows nothing else of it.
pub trait DeviceEngine: Send {
    /// Called when the runner describes itself (at open: `PathInfo::kind`).
    fn kind(&self) -> BackendKind;

    /// Called by the runner at open, at each frame staged and after a
    /// swap: most frames one `enqueue` may judge: 1 for models whose batch
    /// is fixed at one, else the bound tensors' `frames`.
    fn max_batch(&self) -> usize;

    /// Called by the runner at each batch's launch, once a model role
    /// (segmentation, then classifier): queues `role`'s model on `stream`
    /// for the first `frames` frames (1..=`max_batch`) of the tensors it was
    /// bound to, reading and writing them. Returns once queued.
    fn enqueue(
        &mut self,
        role: ModelRole,
        stream: &Stream,
        frames: usize,
    ) -> Result<(), DeviceFrameError>;

    /// Called once, when the runner describes itself at open
    /// (`PathInfo::swap_opener`): opens new models of this engine for the
    /// runner `site` describes.
    fn swap_opener(&self, site: SwapSite) -> Arc<dyn DeviceModelsOpener>;
}

/// Opens new models on a running device path's engine, from a thread other
/// than the device thread (the reload thread), so inspection goes on.
pub trait DeviceModelsOpener: Send + Sync {
    /// Called on the reload thread when a reload brings new model files
    /// (`model_swap::prepare_device`): opens `config`'s models on the
    /// running engine and checks them against the engine's IO contract (the
    /// geometry is read here).
    fn open(&self, config: &Config) -> Result<Box<dyn DeviceCandidate>, DeviceFrameError>;
}

/// New models opened by a `DeviceModelsOpener`, not yet bound to the
/// running path's tensors.
pub trait DeviceCandidate: Send {
    /// Called on the reload thread right after the candidate was opened:
    /// its tensor shapes, which must be the running path's.
    fn geometry(&self) -> TensorGeometry;

    /// Called on the reload thread once the geometry (and the acceptance
    /// gate) passed: runs both models once on buffers of their own (never
    /// the running path's), and waits for them.
    fn warm_up(&mut self) -> Result<(), DeviceFrameError>;

    /// Called by the runner's `swap_engine`, on the device thread between
    /// two batches, nothing queued on the stream: binds the models to
    /// `tensors`, the engine the runner holds from then on.
    ///
    /// # Safety
    /// The tensors must stay allocated for as long as the returned engine
    /// exists, and not be freed while work it queued on them is pending.
    unsafe fn bind(
        self: Box<Self>,
        tensors: BoundTensors,
    ) -> Result<Box<dyn DeviceEngine>, DeviceFrameError>;
}

/// The device tensors an engine is bound to, all owned by the runner. Each
/// holds `frames` frames back to back (frame `k` of a batch at `k` times
/// one frame's length), so a batch of up to `frames` is judged in place.
#[derive(Debug, Clone, Copy)]
pub struct BoundTensors {
    pub seg_input: DeviceTensor,
    pub seg_logits: DeviceTensor,
    pub cls_input: DeviceTensor,
    pub cls_logits: DeviceTensor,
    /// Frames each tensor holds: the runner's largest batch.
    pub frames: usize,
}

/// What opening new models for a running device runner needs to know.
#[derive(Clone)]
pub struct SwapSite {
    pub gpu: Arc<GpuContext>,
    pub stream: StreamLease,
    /// The runner's tensor shapes and element types (inputs, segmentation
    /// logits), which new models must match.
    pub geometry: TensorGeometry,
    pub elements: (TensorElement, TensorElement),
    /// Frames the runner's tensors hold (its largest batch); new models
    /// with a batch of one still fit, judged one frame a batch.
    pub frames: usize,
}

/// The runner's stream for another thread: valid only while the runner
/// lives, whose drop waits for every `with` in progress and ends the lease.
#[derive(Clone)]
pub struct StreamLease {
    /// The raw `CUstream`, as an integer (TensorRT's convention).
    raw: usize,
    alive: Arc<RwLock<bool>>,
}

impl StreamLease {
    /// A lease on the raw stream `raw`, alive until `end`.
    pub fn new(raw: usize) -> Self {
        StreamLease {
            raw,
            alive: Arc::new(RwLock::new(true)),
        }
    }

    /// Runs `f` with the raw stream, the runner kept from dropping it
    /// meanwhile; an error once the runner is gone.
    pub fn with<T>(
        &self,
        f: impl FnOnce(usize) -> Result<T, DeviceFrameError>,
    ) -> Result<T, DeviceFrameError> {
        // A poisoned lock only means a `with` panicked; the flag is still right.
        let alive = self.alive.read().unwrap_or_else(|p| p.into_inner());
        if !*alive {
            return Err(DeviceFrameError::Swap(
                "the device path has ended".to_string(),
            ));
        }
        f(self.raw)
    }

    /// Ends the lease for every clone, waiting for a `with` in progress.
    pub fn end(&self) {
        *self.alive.write().unwrap_or_else(|p| p.into_inner()) = false;
    }
}

/// A device path opened, and what the pipeline needs to know about it.
pub struct OpenedPath {
    pub path: Box<dyn DeviceFramePath>,
    /// What the path told of itself when it was opened (the models'
    /// geometry, read once from the engines just opened, among it).
    pub info: PathInfo,
    /// Why this engine, for the start-up log line and the run summary.
    pub reason: String,
}

impl OpenedPath {
    pub fn new(path: Box<dyn DeviceFramePath>, reason: String) -> Self {
        OpenedPath {
            info: path.describe(),
            path,
            reason,
        }
    }
}
