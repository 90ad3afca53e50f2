//! The `GpuPreprocessor` itself: its fields, its construction (kernels
//! loaded, every buffer allocated, the geometry checked against the kernels'
//! limits), what it tells the engines (stream, device tensors), and its
//! `Drop`, which lets queued work finish before the buffers go. What it does
//! with a frame is in `device.rs` (device mode), `host.rs` (host mode) and
//! `mask.rs` (the mask kernels).

use std::sync::Arc;

use std::collections::VecDeque;

use super::buffers::{
    HostStaging, PendingRead, ResizeTables, StagedFrame, StagingSlot, TensorBuffer,
};
use super::options::{FrameTransfer, GpuOptions, MAX_TENSOR_SIDE};
use super::tables::{self, ChannelAffine, MaskAffine};
use crate::config::{Config, Normalization};
use crate::frame::TensorGeometry;
use crate::gpu::kernels::{self, KernelSet};
use crate::gpu::{
    DeviceBuffer, DeviceTensor, Event, GpuContext, GpuError, PinnedBuffer, Stream, TensorElement,
};

/// Turns frames into model inputs on the GPU. One per pipeline.
///
/// With `batch_frames` B above 1 every device tensor (inputs, logits, mask,
/// mask counts) holds B frames back to back: `enqueue_frame_at(frame, k)`
/// writes frame k's inputs, the engine judges frames 0..n in one run, and
/// `enqueue_masks_to(n, ..)` makes their masks. Host mode uses frame 0.
/// With a cavity layout each frame k of a batch is one cavity's crop
/// (`enqueue_frame_crop_at`, then `enqueue_staged_crop_at` for the frame's
/// other cavities, which reads it where it already is on the GPU).
pub struct GpuPreprocessor {
    pub(super) gpu: Arc<GpuContext>,
    pub(super) kernels: KernelSet,
    pub(super) stream: Stream,
    /// Frames' host-to-device copies (copy mode), apart from `stream` so a
    /// batch uploads while the batch before it computes; ordered against
    /// `stream` by each staging slot's events.
    pub(super) upload: Stream,
    pub(super) geometry: TensorGeometry,
    pub(super) options: GpuOptions,
    pub(super) seg_affine: ChannelAffine,
    pub(super) cls_affine: ChannelAffine,
    pub(super) mask_affine: MaskAffine,

    /// Mask-to-classifier resize taps (fixed by the geometry; the frame
    /// kernel computes its taps itself, so a new frame size needs nothing).
    pub(super) mask_tables: ResizeTables,

    pub(super) slots: Vec<StagingSlot>,
    pub(super) next_slot: usize,
    /// Frames staged so far (`enqueue_frame_at`), each one's number.
    pub(super) staged: u64,
    /// Staged frames whose host bytes the GPU may still read, oldest first.
    pub(super) pending_reads: VecDeque<PendingRead>,
    /// The frame staged last, while its crops may still be queued
    /// (`enqueue_staged_crop_at`); `None` after a failed staging.
    pub(super) last_frame: Option<StagedFrame>,

    pub(super) seg_input: TensorBuffer,
    pub(super) cls_input: TensorBuffer,
    pub(super) seg_logits: TensorBuffer,
    pub(super) mask: DeviceBuffer<u8>,
    pub(super) mask_count: DeviceBuffer<u64>,
    pub(super) host_count: PinnedBuffer<u64>,
    /// Recorded at the end of each frame's queued work.
    pub(super) frame_done: Event,
    pub(super) host: Option<HostStaging>,
}

impl GpuPreprocessor {
    /// Loads the kernels and allocates every buffer. Arguments as the CPU
    /// `Preprocessor::new`, plus the device and `options`.
    pub fn new(
        gpu: &Arc<GpuContext>,
        seg: Normalization,
        cls: Normalization,
        mask_mean: f32,
        mask_std: f32,
        geometry: TensorGeometry,
        options: GpuOptions,
    ) -> Result<Self, GpuError> {
        let stream = Stream::new(gpu)?;
        Self::on_stream(stream, seg, cls, mask_mean, mask_std, geometry, options)
    }

    /// As `new`, queuing on `stream` (made before the preprocessor, so that
    /// an engine can be opened on it first and tell the geometry).
    pub fn on_stream(
        stream: Stream,
        seg: Normalization,
        cls: Normalization,
        mask_mean: f32,
        mask_std: f32,
        geometry: TensorGeometry,
        options: GpuOptions,
    ) -> Result<Self, GpuError> {
        let gpu = &Arc::clone(stream.gpu());
        for (what, side) in [
            ("segmentation input height", geometry.seg_hw.0),
            ("segmentation input width", geometry.seg_hw.1),
            ("classifier input height", geometry.cls_hw.0),
            ("classifier input width", geometry.cls_hw.1),
        ] {
            if side == 0 || side > MAX_TENSOR_SIDE {
                return Err(GpuError::TooLarge {
                    what,
                    value: side,
                    max: MAX_TENSOR_SIDE,
                });
            }
        }
        let rows = geometry.seg_hw.0 + geometry.cls_hw.0;
        if rows > kernels::MAX_FRAME_ROWS {
            return Err(GpuError::TooLarge {
                what: "segmentation plus classifier input height",
                value: rows,
                max: kernels::MAX_FRAME_ROWS,
            });
        }
        if geometry.seg_classes > MAX_TENSOR_SIDE {
            return Err(GpuError::TooLarge {
                what: "segmentation classes",
                value: geometry.seg_classes,
                max: MAX_TENSOR_SIDE,
            });
        }
        if geometry.seg_classes == 0 || options.mask_class >= geometry.seg_classes {
            return Err(GpuError::MaskClass {
                mask_class: options.mask_class,
                classes: geometry.seg_classes,
            });
        }
        let batch = options.batch_frames.max(1);
        let slots = (0..options.frame_slots.max(1))
            .map(|_| StagingSlot::new(gpu))
            .collect::<Result<Vec<_>, GpuError>>()?;
        let mut gpu_pre = GpuPreprocessor {
            gpu: Arc::clone(gpu),
            kernels: KernelSet::load(gpu)?,
            upload: Stream::new(gpu)?,
            stream,
            geometry,
            options,
            seg_affine: ChannelAffine::from_normalization(&seg),
            cls_affine: ChannelAffine::from_normalization(&cls),
            mask_affine: MaskAffine::new(mask_mean, mask_std),
            mask_tables: ResizeTables::new(gpu, geometry.cls_hw)?,
            pending_reads: VecDeque::with_capacity(slots.len()),
            last_frame: None,
            slots,
            next_slot: 0,
            staged: 0,
            seg_input: TensorBuffer::new(
                gpu,
                options.input_element,
                batch * geometry.seg_input_len(),
            )?,
            cls_input: TensorBuffer::new(
                gpu,
                options.input_element,
                batch * geometry.cls_input_len(),
            )?,
            seg_logits: TensorBuffer::new(
                gpu,
                options.logits_element,
                batch * geometry.seg_logits_len(),
            )?,
            mask: DeviceBuffer::new(gpu, batch * geometry.mask_len())?,
            mask_count: DeviceBuffer::new(gpu, batch)?,
            host_count: PinnedBuffer::new(gpu, 1, false)?,
            frame_done: Event::new(gpu, false)?,
            host: None,
        };
        // The mask tables depend only on the model geometry: built once.
        let (mut rows, mut cols) = (Vec::new(), Vec::new());
        tables::linear_taps(geometry.seg_hw.0, geometry.cls_hw.0, &mut rows);
        tables::linear_taps(geometry.seg_hw.1, geometry.cls_hw.1, &mut cols);
        gpu_pre.upload_mask_tables(&rows, &cols)?;
        Ok(gpu_pre)
    }

    /// The GPU preprocessor for `config`'s normalization and mask class,
    /// queuing on `stream`: the one place it is built from the config (host
    /// mode in `FramePreprocessor::open`, and the device path's runner).
    /// `elements`: the engine's input and segmentation-logits element types.
    /// Frames are mapped with `[inference] zero_copy` (by default on a GPU
    /// that shares host memory), copied otherwise (`FrameTransfer::for_config`).
    /// `batch_frames`: the largest batch (1 in host mode); the staging slots
    /// are two batches' worth, so staging a batch never waits for the GPU
    /// to finish reading the one before.
    pub fn from_config(
        config: &Config,
        stream: Stream,
        geometry: TensorGeometry,
        (input_element, logits_element): (TensorElement, TensorElement),
        batch_frames: usize,
    ) -> Result<Self, GpuError> {
        let batch_frames = batch_frames.max(1);
        let options = GpuOptions {
            input_element,
            logits_element,
            mask_class: config.segmentation.mask_class,
            frame_transfer: FrameTransfer::for_config(config.inference.zero_copy, stream.gpu()),
            frame_slots: 2 * batch_frames,
            batch_frames,
            ..GpuOptions::default()
        };
        Self::on_stream(
            stream,
            config.segmentation.normalization,
            config.classifier.normalization,
            config.classifier.mask_mean,
            config.classifier.mask_std,
            geometry,
            options,
        )
    }

    pub fn geometry(&self) -> &TensorGeometry {
        &self.geometry
    }

    pub fn options(&self) -> &GpuOptions {
        &self.options
    }

    pub fn gpu(&self) -> &Arc<GpuContext> {
        &self.gpu
    }

    /// The stream all of this preprocessor's work is queued on; a GPU engine
    /// queues its inference on the same one.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The stream frames are uploaded on (copy mode); the frame kernels on
    /// `stream` wait for their upload.
    pub fn upload_stream(&self) -> &Stream {
        &self.upload
    }

    /// The Bx3xHsxWs segmentation input (written by `enqueue_frame_at`),
    /// B = `batch_frames`.
    pub fn seg_input(&self) -> DeviceTensor {
        self.seg_input.tensor()
    }

    /// The Bx4xHcxWc classifier input (RGB by `enqueue_frame_at`, mask
    /// channel by `enqueue_masks_to`).
    pub fn cls_input(&self) -> DeviceTensor {
        self.cls_input.tensor()
    }

    /// The BxCxHsxWs segmentation logits, which the segmentation engine
    /// writes and `enqueue_masks_to` reads.
    pub fn seg_logits(&self) -> DeviceTensor {
        self.seg_logits.tensor()
    }
}

impl Drop for GpuPreprocessor {
    fn drop(&mut self) {
        // Queued copies and kernels use the buffers about to be freed: let
        // them finish first.
        if let Err(e) = self.upload.synchronize() {
            self.gpu.record_drop_error(
                "synchronizing the upload stream before freeing its buffers",
                e,
            );
        }
        if let Err(e) = self.stream.synchronize() {
            self.gpu.record_drop_error(
                "synchronizing the preprocessing stream before freeing its buffers",
                e,
            );
        }
    }
}
