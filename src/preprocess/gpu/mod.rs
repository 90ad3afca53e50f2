//! `GpuPreprocessor`: the CPU `Preprocessor`'s work done by the CUDA kernels
//! (`crate::gpu`) on one stream, with every buffer allocated at start; the
//! tables (`tables`) are built exactly as the CPU builds them, so the
//! results agree to the bit in f32. Built with the `cuda` feature;
//! `gpu_stub.rs` stands in without it.
//!
//! Two ways to use it:
//! - Device mode (GPU inference backends): `enqueue_frame` queues the frame's
//!   upload and the frame kernel and returns; the engine reads `seg_input()`
//!   and writes `seg_logits()` on the same `stream()`; `enqueue_mask` queues
//!   the mask kernels and the copy of the pixel count; `wait_mask_pixels`
//!   is the one wait of the frame. Nothing else synchronizes.
//! - Host mode (CPU inference backends, to check the kernels inside the whole
//!   pipeline): `frame_to_tensors` and `logits_to_mask` take and fill host
//!   slices exactly like the CPU `Preprocessor::frame_to_tensors` and
//!   `logits_to_mask` + `Preprocessor::mask_to_classifier_channel`.
//!
//! Frames are staged through a small pool of page-locked slots so the
//! host-to-device copy is asynchronous; each slot has an event, recorded after
//! the GPU's last use of the slot, that the host waits on before reusing it.
//! With `FrameTransfer::Mapped` (for a Jetson, whose GPU shares DRAM with the
//! CPU) the kernel reads the slot in place and no copy is made at all.

use std::sync::Arc;

pub mod tables;

use self::tables::{ChannelAffine, MaskAffine};
use super::{FramePreprocessError, PreprocessError};
use crate::config::{Config, Normalization};
use crate::frame::{ImageView, TensorGeometry};
use crate::gpu::kernels::{
    self, DeviceTap, FrameParams, Kernel, KernelSet, MaskParams, ResizeTarget, TensorElement,
};
use crate::gpu::{
    DeviceBuffer, DeviceTensor, DeviceValue, Event, GpuContext, GpuError, PinnedBuffer, Stream,
};

/// Largest tensor side the kernels' grids allow (a grid's y extent).
pub const MAX_TENSOR_SIDE: usize = 65_535;

/// How a frame reaches the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameTransfer {
    /// Staged in page-locked memory, then copied to device memory
    /// asynchronously (discrete GPUs).
    Copy,
    /// Staged in mapped page-locked memory that the kernel reads in place
    /// (zero-copy; for a Jetson, where it saves a pass over the frame).
    Mapped,
}

impl FrameTransfer {
    /// Mapped on a GPU that shares the host's memory (a Jetson: one pass over
    /// the frame saved), copied on a discrete one.
    pub fn for_gpu(gpu: &GpuContext) -> Self {
        if gpu.integrated() {
            FrameTransfer::Mapped
        } else {
            FrameTransfer::Copy
        }
    }
}

/// What the engines want and how frames travel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuOptions {
    /// Element type of the segmentation and classifier inputs on the device.
    pub input_element: TensorElement,
    /// Element type of the segmentation logits the engine writes.
    pub logits_element: TensorElement,
    /// Class index of the seal in the segmentation logits.
    pub mask_class: usize,
    pub frame_transfer: FrameTransfer,
    /// Page-locked frame slots: 2 lets the host stage frame N+1 while the GPU
    /// still reads frame N.
    pub frame_slots: usize,
    /// Bytes reserved per frame slot at start (stride x height); a larger
    /// frame (a caps change) grows the slots once.
    pub max_frame_bytes: usize,
    /// Frames the device tensors hold back to back (the largest batch an
    /// engine judges at once); 1 without batching.
    pub batch_frames: usize,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            input_element: TensorElement::F32,
            logits_element: TensorElement::F32,
            mask_class: 1,
            frame_transfer: FrameTransfer::Copy,
            frame_slots: 2,
            max_frame_bytes: 1920 * 1080 * 4,
            batch_frames: 1,
        }
    }
}

/// The seal mask brought back to the host on the device path, as the mask
/// kernel wrote it (one 0/1 byte a pixel), widened into the work record's
/// `f32` mask; returns the pixels set.
pub fn widen_mask(bytes: &[u8], mask: &mut [f32]) -> u64 {
    let mut set = 0;
    for (m, &byte) in mask.iter_mut().zip(bytes) {
        *m = f32::from(byte);
        set += u64::from(byte);
    }
    set
}

/// A device tensor of either element type. (`pub` only so `TensorValue` can
/// name it; the module is private and does not export it.)
#[derive(Debug)]
pub enum TensorBuffer {
    F32(DeviceBuffer<f32>),
    F16(DeviceBuffer<u16>),
}

impl TensorBuffer {
    fn new(gpu: &Arc<GpuContext>, element: TensorElement, len: usize) -> Result<Self, GpuError> {
        Ok(match element {
            TensorElement::F32 => TensorBuffer::F32(DeviceBuffer::new(gpu, len)?),
            TensorElement::F16 => TensorBuffer::F16(DeviceBuffer::new(gpu, len)?),
        })
    }

    fn tensor(&self) -> DeviceTensor {
        match self {
            TensorBuffer::F32(b) => DeviceTensor {
                ptr: b.device_ptr(),
                len: b.len(),
                element: TensorElement::F32,
            },
            TensorBuffer::F16(b) => DeviceTensor {
                ptr: b.device_ptr(),
                len: b.len(),
                element: TensorElement::F16,
            },
        }
    }

    fn element(&self) -> TensorElement {
        self.tensor().element
    }

    /// Device address of element `index`.
    fn ptr_at(&self, index: usize) -> u64 {
        match self {
            TensorBuffer::F32(b) => b.device_ptr_at(index),
            TensorBuffer::F16(b) => b.device_ptr_at(index),
        }
    }

    /// # Safety
    /// As `Stream::fill_bytes`: the buffer must outlive the queued fill.
    unsafe fn fill_bytes(&self, stream: &Stream, value: u8) -> Result<(), GpuError> {
        // SAFETY: forwarded to the caller.
        unsafe {
            match self {
                TensorBuffer::F32(b) => stream.fill_bytes(b, value),
                TensorBuffer::F16(b) => stream.fill_bytes(b, value),
            }
        }
    }
}

/// Host element types of device tensors: `f32` for `TensorElement::F32`,
/// `u16` (IEEE half bits) for `TensorElement::F16`.
pub trait TensorValue: DeviceValue {
    const ELEMENT: TensorElement;
    #[doc(hidden)]
    fn buffer(tensor: &TensorBuffer) -> Option<&DeviceBuffer<Self>>;
}

impl TensorValue for f32 {
    const ELEMENT: TensorElement = TensorElement::F32;
    fn buffer(tensor: &TensorBuffer) -> Option<&DeviceBuffer<f32>> {
        match tensor {
            TensorBuffer::F32(b) => Some(b),
            TensorBuffer::F16(_) => None,
        }
    }
}

impl TensorValue for u16 {
    const ELEMENT: TensorElement = TensorElement::F16;
    fn buffer(tensor: &TensorBuffer) -> Option<&DeviceBuffer<u16>> {
        match tensor {
            TensorBuffer::F16(b) => Some(b),
            TensorBuffer::F32(_) => None,
        }
    }
}

/// One page-locked frame staging slot.
#[derive(Debug)]
struct FrameSlot {
    pinned: PinnedBuffer<u8>,
    /// Recorded after the GPU's last use of `pinned` (the copy, or in mapped
    /// mode the kernel); waited on before the host writes the slot again.
    released: Event,
}

/// Resize tables of one output, on the device.
#[derive(Debug)]
struct ResizeTables {
    rows: DeviceBuffer<DeviceTap>,
    cols: DeviceBuffer<DeviceTap>,
}

impl ResizeTables {
    fn new(gpu: &Arc<GpuContext>, (h, w): (usize, usize)) -> Result<Self, GpuError> {
        Ok(ResizeTables {
            rows: DeviceBuffer::new(gpu, h)?,
            cols: DeviceBuffer::new(gpu, w)?,
        })
    }
}

/// Host-side staging for host mode, allocated on the first host-mode call.
#[derive(Debug)]
struct HostStaging {
    seg: PinnedBuffer<f32>,
    cls: PinnedBuffer<f32>,
    logits: PinnedBuffer<f32>,
    mask: PinnedBuffer<u8>,
}

/// Turns frames into model inputs on the GPU. One per pipeline.
///
/// With `batch_frames` B above 1 every device tensor (inputs, logits, mask,
/// mask counts) holds B frames back to back: `enqueue_frame_at(frame, k)`
/// writes frame k's inputs, the engine judges frames 0..n in one run, and
/// `enqueue_masks_to(n, ..)` makes their masks. Host mode uses frame 0.
pub struct GpuPreprocessor {
    gpu: Arc<GpuContext>,
    kernels: KernelSet,
    stream: Stream,
    geometry: TensorGeometry,
    options: GpuOptions,
    seg_affine: ChannelAffine,
    cls_affine: ChannelAffine,
    mask_affine: MaskAffine,

    /// Mask-to-classifier resize taps (fixed by the geometry; the frame
    /// kernel computes its taps itself, so a new frame size needs nothing).
    mask_tables: ResizeTables,

    slots: Vec<FrameSlot>,
    next_slot: usize,
    /// Where a copied frame lands (unused with `FrameTransfer::Mapped`).
    frame: DeviceBuffer<u8>,

    seg_input: TensorBuffer,
    cls_input: TensorBuffer,
    seg_logits: TensorBuffer,
    mask: DeviceBuffer<u8>,
    mask_count: DeviceBuffer<u64>,
    host_count: PinnedBuffer<u64>,
    /// Recorded at the end of each frame's queued work.
    frame_done: Event,
    host: Option<HostStaging>,
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
        let mapped = options.frame_transfer == FrameTransfer::Mapped;
        let frame_bytes = options.max_frame_bytes.max(1);
        let batch = options.batch_frames.max(1);
        let slots = (0..options.frame_slots.max(1))
            .map(|_| {
                Ok(FrameSlot {
                    pinned: PinnedBuffer::new(gpu, frame_bytes, mapped)?,
                    released: Event::new(gpu, false)?,
                })
            })
            .collect::<Result<Vec<_>, GpuError>>()?;
        let mut gpu_pre = GpuPreprocessor {
            gpu: Arc::clone(gpu),
            kernels: KernelSet::load(gpu)?,
            stream,
            geometry,
            options,
            seg_affine: ChannelAffine::from_normalization(&seg),
            cls_affine: ChannelAffine::from_normalization(&cls),
            mask_affine: MaskAffine::new(mask_mean, mask_std),
            mask_tables: ResizeTables::new(gpu, geometry.cls_hw)?,
            slots,
            next_slot: 0,
            frame: DeviceBuffer::new(gpu, if mapped { 1 } else { frame_bytes })?,
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
        self::tables::linear_taps(geometry.seg_hw.0, geometry.cls_hw.0, &mut rows);
        self::tables::linear_taps(geometry.seg_hw.1, geometry.cls_hw.1, &mut cols);
        gpu_pre.upload_mask_tables(&rows, &cols)?;
        Ok(gpu_pre)
    }

    /// The GPU preprocessor for `config`'s normalization and mask class,
    /// queuing on `stream`: the one place it is built from the config (host
    /// mode in `FramePreprocessor::open`, and the device path's runner).
    /// `elements`: the engine's input and segmentation-logits element types.
    /// Frames are mapped on a GPU that shares host memory, copied otherwise.
    /// `batch_frames`: the largest batch (1 in host mode); the frame slots
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
            frame_transfer: FrameTransfer::for_gpu(stream.gpu()),
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

    /// Device mode: queues the frame's transfer and the frame kernel, which
    /// fills the segmentation input and channels 0..2 of the classifier input.
    /// Returns once the frame is staged; waits only if the staging slot is
    /// still in use by the GPU (more frames queued than slots).
    pub fn enqueue_frame(&mut self, frame: ImageView<'_>) -> Result<(), FramePreprocessError> {
        self.enqueue_frame_at(frame, 0)
    }

    /// As `enqueue_frame`, writing frame `k` of the batch (`k` below
    /// `batch_frames`).
    pub fn enqueue_frame_at(
        &mut self,
        frame: ImageView<'_>,
        k: usize,
    ) -> Result<(), FramePreprocessError> {
        self.gpu.bind()?;
        let batch = self.options.batch_frames.max(1);
        if k >= batch {
            return Err(GpuError::BufferLength {
                buffer: "batch frame index",
                len: k,
                expected: batch,
            }
            .into());
        }
        let bytes = checked_frame_bytes(&frame)?;
        let slot_index = self.next_slot;
        self.next_slot = (self.next_slot + 1) % self.slots.len();
        self.slots[slot_index].released.synchronize()?;
        if self.slots[slot_index].pinned.len() < bytes {
            self.grow_frame_buffers(bytes)?;
        }
        let slot = &mut self.slots[slot_index];
        slot.pinned.as_mut_slice()[..bytes].copy_from_slice(&frame.data[..bytes]);
        let frame_ptr = match self.options.frame_transfer {
            FrameTransfer::Copy => {
                // SAFETY: the slot is not written again before its `released`
                // event (recorded below, after this copy) completes; `frame`
                // lives as long as `self`, whose Drop synchronizes the stream.
                unsafe {
                    self.stream
                        .upload(&slot.pinned.as_slice()[..bytes], &self.frame, 0)?
                };
                self.frame.device_ptr()
            }
            FrameTransfer::Mapped => slot.pinned.mapped_device_ptr().ok_or(GpuError::Unmapped)?,
        };
        let params = FrameParams {
            frame: frame_ptr,
            stride: frame.stride as u64,
            // Both sides are below MAX_FRAME_SIDE = 2^24 (checked).
            in_w: frame.width as u32,
            in_h: frame.height as u32,
            seg: resize_target(
                &self.seg_input,
                k * self.geometry.seg_input_len(),
                self.geometry.seg_hw,
                &self.seg_affine,
            ),
            cls: resize_target(
                &self.cls_input,
                k * self.geometry.cls_input_len(),
                self.geometry.cls_hw,
                &self.cls_affine,
            ),
            aligned4: u32::from(frame_ptr.is_multiple_of(4) && frame.stride.is_multiple_of(4)),
            reserved: 0,
        };
        let kernel = Kernel::FrameToTensors(frame.layout, self.options.input_element);
        let grid = kernels::frame_grid(self.geometry.seg_hw, self.geometry.cls_hw);
        // SAFETY: the frame holds `bytes` = stride*(h-1) + row bytes, all the
        // kernel reads for a frame of in_w x in_h; the outputs start at frame
        // k < batch_frames (checked) of tensors holding batch_frames frames of
        // the geometry the grid is made of; all are owned by `self`, whose
        // Drop synchronizes the stream, and the slot is released only after
        // this launch.
        unsafe {
            self.kernels
                .launch(kernel, grid, kernels::FRAME_BLOCK, &self.stream, &params)?
        };
        Ok(self.slots[slot_index].released.record(&self.stream)?)
    }

    /// Device mode: queues the mask kernels on the segmentation logits (the
    /// engine's output, on this stream) and the copy of the mask's pixel
    /// count to the host, then marks the end of the frame.
    pub fn enqueue_mask(&mut self) -> Result<(), GpuError> {
        self.gpu.bind()?;
        self.queue_mask_kernels(1)?;
        // SAFETY: `host_count` is read only after `frame_done` (recorded just
        // below) completes; both buffers live as long as `self`.
        unsafe {
            self.stream
                .download(&self.mask_count, 0, 1, &mut self.host_count)?
        };
        self.frame_done.record(&self.stream)
    }

    /// Device mode, a batch in flight: the mask kernel for each of frames
    /// 0..`frames` of the segmentation logits, their pixel counts copied into
    /// `counts[0..frames]`, the caller's buffer for this batch; no event is
    /// recorded (the caller records its own).
    ///
    /// # Safety
    /// `counts` must not be read or written by the host, and must stay alive,
    /// until the stream has passed this batch's copy.
    pub unsafe fn enqueue_masks_to(
        &mut self,
        frames: usize,
        counts: &mut PinnedBuffer<u64>,
    ) -> Result<(), GpuError> {
        self.gpu.bind()?;
        self.queue_mask_kernels(frames)?;
        // SAFETY: the caller keeps `counts` alive and untouched until the
        // stream passes the copy (its length is checked by `download`);
        // `mask_count` lives as long as `self`.
        unsafe { self.stream.download(&self.mask_count, 0, frames, counts) }
    }

    /// Device mode: queues a copy of frame `k`'s 0/1 byte mask, as the mask
    /// kernel wrote it (queue it after `enqueue_masks_to`), into `dst`, for a
    /// host-side mask (the archive, the live view and the shadow want one;
    /// the GPU path otherwise keeps only the mask's pixel count). A byte a
    /// pixel: an eighth of the f32 logits over the bus, and no argmax on the
    /// host.
    ///
    /// # Safety
    /// `dst` must not be read or written by the host, and must stay alive,
    /// until the stream has passed this copy.
    pub unsafe fn enqueue_frame_mask_bytes_to(
        &self,
        k: usize,
        dst: &mut PinnedBuffer<u8>,
    ) -> Result<(), GpuError> {
        self.gpu.bind()?;
        let pixels = self.geometry.mask_len();
        check_len("host mask", dst.len(), pixels)?;
        // SAFETY: forwarded from this function's contract; `mask` lives as
        // long as `self`; `download` checks frame k's range lies inside it.
        unsafe { self.stream.download(&self.mask, k * pixels, pixels, dst) }
    }

    /// A host buffer for one frame's `enqueue_frame_mask_bytes_to`.
    pub fn host_mask_bytes(&self) -> Result<PinnedBuffer<u8>, GpuError> {
        PinnedBuffer::new(&self.gpu, self.geometry.mask_len(), false)
    }

    /// Device mode: waits for the frame queued last and returns its mask's
    /// pixel count. The one synchronization of a frame.
    pub fn wait_mask_pixels(&mut self) -> Result<u64, GpuError> {
        self.frame_done.synchronize()?;
        Ok(self.host_count.as_slice()[0])
    }

    /// Host mode: as the CPU `Preprocessor::frame_to_tensors`: fills
    /// `seg_input` and channels 0..2 of `cls_input` (channel 3 is left as it
    /// is). Needs `input_element` F32.
    pub fn frame_to_tensors(
        &mut self,
        frame: ImageView<'_>,
        seg_input: &mut [f32],
        cls_input: &mut [f32],
    ) -> Result<(), FramePreprocessError> {
        const WHAT: &str = "frame_to_tensors (host mode)";
        check_len(
            "segmentation input",
            seg_input.len(),
            self.geometry.seg_input_len(),
        )?;
        check_len(
            "classifier input",
            cls_input.len(),
            self.geometry.cls_input_len(),
        )?;
        f32_tensor(&self.seg_input, WHAT)?;
        let rgb = 3 * self.geometry.cls_hw.0 * self.geometry.cls_hw.1;
        self.enqueue_frame(frame)?;
        let host = host_staging(&mut self.host, &self.gpu, &self.geometry)?;
        let seg = f32_tensor(&self.seg_input, WHAT)?;
        let cls = f32_tensor(&self.cls_input, WHAT)?;
        // SAFETY: the staging buffers are read only after `frame_done`
        // (recorded below) completes, which `synchronize` waits for.
        unsafe {
            let seg_len = self.geometry.seg_input_len();
            self.stream.download(seg, 0, seg_len, &mut host.seg)?;
            self.stream.download(cls, 0, rgb, &mut host.cls)?;
        }
        self.frame_done.record(&self.stream)?;
        self.frame_done.synchronize()?;
        seg_input.copy_from_slice(&host.seg.as_slice()[..seg_input.len()]);
        cls_input[..rgb].copy_from_slice(&host.cls.as_slice()[..rgb]);
        Ok(())
    }

    /// Host mode: as the CPU `logits_to_mask` followed by
    /// `Preprocessor::mask_to_classifier_channel`: fills `mask` (1.0 where the
    /// seal class wins) and channel 3 of `cls_input`, and returns the number
    /// of mask pixels set. Needs `input_element` and `logits_element` F32.
    pub fn logits_to_mask(
        &mut self,
        logits: &[f32],
        mask: &mut [f32],
        cls_input: &mut [f32],
    ) -> Result<u64, GpuError> {
        const WHAT: &str = "logits_to_mask (host mode)";
        check_len(
            "segmentation logits",
            logits.len(),
            self.geometry.seg_logits_len(),
        )?;
        check_len("mask", mask.len(), self.geometry.mask_len())?;
        check_len(
            "classifier input",
            cls_input.len(),
            self.geometry.cls_input_len(),
        )?;
        f32_tensor(&self.seg_logits, WHAT)?;
        f32_tensor(&self.cls_input, WHAT)?;
        self.gpu.bind()?;
        let plane = self.geometry.cls_hw.0 * self.geometry.cls_hw.1;
        {
            let host = host_staging(&mut self.host, &self.gpu, &self.geometry)?;
            // Every earlier use of the staging buffers ended with a synchronize.
            host.logits.as_mut_slice()[..logits.len()].copy_from_slice(logits);
            let device_logits = f32_tensor(&self.seg_logits, WHAT)?;
            // SAFETY: `host.logits` is not written again before the
            // synchronize below; the device buffer lives as long as `self`.
            unsafe {
                self.stream
                    .upload(&host.logits.as_slice()[..logits.len()], device_logits, 0)?
            };
        }
        self.queue_mask_kernels(1)?;
        let host = host_staging(&mut self.host, &self.gpu, &self.geometry)?;
        let cls = f32_tensor(&self.cls_input, WHAT)?;
        // SAFETY: the staging buffers are read only after the synchronize below.
        unsafe {
            self.stream
                .download(&self.mask, 0, mask.len(), &mut host.mask)?;
            self.stream.download(cls, 3 * plane, plane, &mut host.cls)?;
            self.stream
                .download(&self.mask_count, 0, 1, &mut self.host_count)?;
        }
        self.frame_done.record(&self.stream)?;
        self.frame_done.synchronize()?;
        widen_mask(host.mask.as_slice(), mask);
        cls_input[3 * plane..].copy_from_slice(&host.cls.as_slice()[..plane]);
        Ok(self.host_count.as_slice()[0])
    }

    /// Fills the segmentation input, the classifier input and the mask on the
    /// device with 0xFF bytes (NaN for f32 and f16), so a test sees any
    /// element a kernel failed to write. Waits until done.
    pub fn poison_outputs(&mut self) -> Result<(), GpuError> {
        self.gpu.bind()?;
        // SAFETY: the buffers live as long as `self`; synchronized below.
        unsafe {
            self.seg_input.fill_bytes(&self.stream, 0xFF)?;
            self.cls_input.fill_bytes(&self.stream, 0xFF)?;
            self.stream.fill_bytes(&self.mask, 0xFF)?;
        }
        self.stream.synchronize()
    }

    /// Copies the segmentation input to the host (`T` = f32 or u16 for f16
    /// bits). Synchronous; for tests and diagnostics, not the frame path.
    pub fn download_seg_input<T: TensorValue>(&mut self, out: &mut [T]) -> Result<(), GpuError> {
        download_tensor(&self.stream, &self.seg_input, "segmentation input", out)
    }

    /// Copies the classifier input (all 4 channels) to the host. Synchronous.
    pub fn download_cls_input<T: TensorValue>(&mut self, out: &mut [T]) -> Result<(), GpuError> {
        download_tensor(&self.stream, &self.cls_input, "classifier input", out)
    }

    /// Copies the 0/1 byte mask to the host. Synchronous.
    pub fn download_mask(&mut self, out: &mut [u8]) -> Result<(), GpuError> {
        check_len("mask", out.len(), self.mask.len())?;
        let mut staging = PinnedBuffer::new(&self.gpu, out.len(), false)?;
        // SAFETY: `staging` is read after the synchronize below and outlives it.
        unsafe {
            self.stream
                .download(&self.mask, 0, out.len(), &mut staging)?
        };
        self.stream.synchronize()?;
        out.copy_from_slice(staging.as_slice());
        Ok(())
    }

    /// Copies segmentation logits from the host into `seg_logits()` (`T` =
    /// f32 or u16 for f16 bits, matching `logits_element`). Synchronous; for
    /// tests and host-side engines.
    pub fn upload_seg_logits<T: TensorValue>(&mut self, logits: &[T]) -> Result<(), GpuError> {
        let Some(device) = T::buffer(&self.seg_logits) else {
            return Err(GpuError::ElementMismatch {
                what: "upload_seg_logits",
                wanted: T::ELEMENT,
                built: self.seg_logits.element(),
            });
        };
        check_len("segmentation logits", logits.len(), device.len())?;
        let mut staging = PinnedBuffer::new(&self.gpu, logits.len(), false)?;
        staging.as_mut_slice().copy_from_slice(logits);
        // SAFETY: `staging` outlives the synchronize below.
        unsafe { self.stream.upload(staging.as_slice(), device, 0)? };
        self.stream.synchronize()
    }

    /// Queues the count reset and, for each of the first `frames` frames,
    /// the mask kernel (mask, count and the classifier's channel 3 in one
    /// launch).
    fn queue_mask_kernels(&self, frames: usize) -> Result<(), GpuError> {
        let batch = self.options.batch_frames.max(1);
        if frames == 0 || frames > batch {
            return Err(GpuError::BufferLength {
                buffer: "frames in the batch",
                len: frames,
                expected: batch,
            });
        }
        // SAFETY: the count buffer lives as long as `self`, whose Drop
        // synchronizes the stream.
        unsafe { self.stream.fill_bytes(&self.mask_count, 0)? };
        for k in 0..frames {
            self.queue_mask_kernel(k)?;
        }
        Ok(())
    }

    /// The mask kernel of frame `k` (below `batch_frames`, checked by the caller).
    fn queue_mask_kernel(&self, k: usize) -> Result<(), GpuError> {
        let (cls_h, cls_w) = self.geometry.cls_hw;
        let pixels = self.geometry.mask_len();
        let (grid, mask_blocks) = kernels::mask_grid(pixels, Some((cls_h, cls_w)));
        let params = MaskParams {
            logits: self.seg_logits.ptr_at(k * self.geometry.seg_logits_len()),
            mask: self.mask.device_ptr_at(k * pixels),
            count: self.mask_count.device_ptr_at(k),
            channel: self
                .cls_input
                .ptr_at(k * self.geometry.cls_input_len() + 3 * cls_h * cls_w),
            rows: self.mask_tables.rows.device_ptr(),
            cols: self.mask_tables.cols.device_ptr(),
            pixels: pixels as u64,
            // All below MAX_TENSOR_SIDE or the class count (checked in `new`).
            classes: self.geometry.seg_classes as u32,
            mask_class: self.options.mask_class as u32,
            mask_w: self.geometry.seg_hw.1 as u32,
            channel_h: cls_h as u32,
            channel_w: cls_w as u32,
            mask_blocks,
            scale: self.mask_affine.scale,
            bias: self.mask_affine.bias,
        };
        let kernel = Kernel::LogitsToMask {
            logits: self.options.logits_element,
            channel: self.options.input_element,
        };
        // SAFETY: from frame k (< batch_frames) on, the logits buffer holds
        // classes x pixels values of the kernel's logits element type, the
        // mask `pixels` bytes, the count one u64 (zeroed first, in stream
        // order); the mask tables map the mask's size to the classifier's,
        // whose channel 3 plane of frame k (of the channel element type) the
        // channel blocks write. All are owned by `self`, whose Drop
        // synchronizes the stream.
        unsafe {
            self.kernels
                .launch(kernel, grid, kernels::MASK_BLOCK, &self.stream, &params)
        }
    }

    /// Uploads the mask tables (and waits).
    fn upload_mask_tables(
        &mut self,
        rows: &[DeviceTap],
        cols: &[DeviceTap],
    ) -> Result<(), GpuError> {
        // SAFETY: the slices live until the synchronize below; sizes match
        // the tables (both from the geometry).
        unsafe {
            self.stream.upload(rows, &self.mask_tables.rows, 0)?;
            self.stream.upload(cols, &self.mask_tables.cols, 0)?;
        }
        self.stream.synchronize()
    }

    /// A frame larger than any before: every slot (and the device frame)
    /// grows to `bytes`. Waits for the GPU first.
    fn grow_frame_buffers(&mut self, bytes: usize) -> Result<(), GpuError> {
        log::info!(
            "GPU frame buffers grow to {bytes} bytes per frame (a larger frame than configured)"
        );
        self.stream.synchronize()?;
        let mapped = self.options.frame_transfer == FrameTransfer::Mapped;
        for slot in &mut self.slots {
            slot.pinned = PinnedBuffer::new(&self.gpu, bytes, mapped)?;
        }
        if !mapped {
            self.frame = DeviceBuffer::new(&self.gpu, bytes)?;
        }
        self.options.max_frame_bytes = bytes;
        Ok(())
    }
}

impl Drop for GpuPreprocessor {
    fn drop(&mut self) {
        // Queued copies and kernels use the buffers about to be freed: let
        // them finish first.
        if let Err(e) = self.stream.synchronize() {
            self.gpu.record_drop_error(
                "synchronizing the preprocessing stream before freeing its buffers",
                e,
            );
        }
    }
}

/// The kernel's target: `out` from element `at` (a frame of a batch).
fn resize_target(
    out: &TensorBuffer,
    at: usize,
    (out_h, out_w): (usize, usize),
    affine: &ChannelAffine,
) -> ResizeTarget {
    ResizeTarget {
        out: out.ptr_at(at),
        // Both at most MAX_TENSOR_SIDE (checked in `new`).
        out_h: out_h as u32,
        out_w: out_w as u32,
        scale: affine.scale,
        bias: affine.bias,
    }
}

/// The f32 buffer of `tensor`, or why host mode cannot use it.
fn f32_tensor<'a>(
    tensor: &'a TensorBuffer,
    what: &'static str,
) -> Result<&'a DeviceBuffer<f32>, GpuError> {
    f32::buffer(tensor).ok_or(GpuError::ElementMismatch {
        what,
        wanted: TensorElement::F32,
        built: tensor.element(),
    })
}

/// Host mode's page-locked staging, allocated on first use and kept.
fn host_staging<'a>(
    host: &'a mut Option<HostStaging>,
    gpu: &Arc<GpuContext>,
    g: &TensorGeometry,
) -> Result<&'a mut HostStaging, GpuError> {
    let staging = match host.take() {
        Some(staging) => staging,
        None => HostStaging {
            seg: PinnedBuffer::new(gpu, g.seg_input_len(), false)?,
            cls: PinnedBuffer::new(gpu, g.cls_input_len(), false)?,
            logits: PinnedBuffer::new(gpu, g.seg_logits_len(), false)?,
            mask: PinnedBuffer::new(gpu, g.mask_len(), false)?,
        },
    };
    Ok(host.insert(staging))
}

fn download_tensor<T: TensorValue>(
    stream: &Stream,
    tensor: &TensorBuffer,
    what: &'static str,
    out: &mut [T],
) -> Result<(), GpuError> {
    let Some(device) = T::buffer(tensor) else {
        return Err(GpuError::ElementMismatch {
            what,
            wanted: T::ELEMENT,
            built: tensor.element(),
        });
    };
    check_len(what, out.len(), device.len())?;
    let mut staging = PinnedBuffer::new(stream.gpu(), out.len(), false)?;
    // SAFETY: `staging` is read after the synchronize below and outlives it.
    unsafe { stream.download(device, 0, out.len(), &mut staging)? };
    stream.synchronize()?;
    out.copy_from_slice(staging.as_slice());
    Ok(())
}

/// The bytes the kernel reads of `frame`, checked as the CPU path checks it.
fn checked_frame_bytes(frame: &ImageView<'_>) -> Result<usize, PreprocessError> {
    crate::preprocess::frame_rows::checked_frame_bytes(frame).map(|(_, needed)| needed)
}

fn check_len(buffer: &'static str, len: usize, expected: usize) -> Result<(), GpuError> {
    if len == expected {
        Ok(())
    } else {
        Err(GpuError::BufferLength {
            buffer,
            len,
            expected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::PixelLayout;

    fn view(width: usize, height: usize, stride: usize, data: &[u8]) -> ImageView<'_> {
        ImageView {
            width,
            height,
            stride,
            layout: PixelLayout::Rgb,
            data,
        }
    }

    #[test]
    fn frame_bytes_omit_the_last_rows_padding() {
        let data = vec![0u8; 8 + 6];
        assert_eq!(checked_frame_bytes(&view(2, 2, 8, &data)), Ok(14));
    }

    #[test]
    fn frame_refusals_match_the_cpu_path() {
        let data = vec![0u8; 13];
        assert!(matches!(
            checked_frame_bytes(&view(2, 2, 5, &data)),
            Err(PreprocessError::StrideTooSmall { .. })
        ));
        assert!(matches!(
            checked_frame_bytes(&view(2, 2, 8, &data)),
            Err(PreprocessError::DataTooShort { .. })
        ));
        assert!(matches!(
            checked_frame_bytes(&view(0, 2, 8, &data)),
            Err(PreprocessError::EmptyFrame { .. })
        ));
    }
}
