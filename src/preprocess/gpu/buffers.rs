//! The GPU preprocessor's buffers: device tensors of either element type
//! (`TensorBuffer`, `TensorValue`), the page-locked frame slots, the mask's
//! resize tables on the device, host mode's staging, and the length check
//! every copy makes.

use std::sync::Arc;

use crate::frame::{PixelLayout, TensorGeometry};
use crate::gpu::{
    DeviceBuffer, DeviceTap, DeviceTensor, DeviceValue, Event, GpuContext, GpuError, PinnedBuffer,
    Stream, TensorElement,
};

/// A device tensor of either element type. (`pub` only so `TensorValue` can
/// name it; the module is private and does not export it.)
#[derive(Debug)]
pub enum TensorBuffer {
    F32(DeviceBuffer<f32>),
    F16(DeviceBuffer<u16>),
}

impl TensorBuffer {
    pub(super) fn new(
        gpu: &Arc<GpuContext>,
        element: TensorElement,
        len: usize,
    ) -> Result<Self, GpuError> {
        Ok(match element {
            TensorElement::F32 => TensorBuffer::F32(DeviceBuffer::new(gpu, len)?),
            TensorElement::F16 => TensorBuffer::F16(DeviceBuffer::new(gpu, len)?),
        })
    }

    pub(super) fn tensor(&self) -> DeviceTensor {
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

    pub(super) fn element(&self) -> TensorElement {
        self.tensor().element
    }

    /// Device address of element `index`.
    pub(super) fn ptr_at(&self, index: usize) -> u64 {
        match self {
            TensorBuffer::F32(b) => b.device_ptr_at(index),
            TensorBuffer::F16(b) => b.device_ptr_at(index),
        }
    }

    /// # Safety
    /// As `Stream::fill_bytes`: the buffer must outlive the queued fill.
    pub(super) unsafe fn fill_bytes(&self, stream: &Stream, value: u8) -> Result<(), GpuError> {
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

/// One place a staged frame goes through on its way to the frame kernel.
/// A batch's frames take places in turn (`frame_slots` of them, two
/// batches' worth), so the next batch is staged while the GPU still works
/// on the one before.
#[derive(Debug)]
pub(super) struct StagingSlot {
    /// Page-locked copy of a frame that came from heap memory (the
    /// warm-up's, or a ring slot without page-locked memory); mapped in
    /// mapped mode. Allocated at its first use.
    pub(super) staging: Option<PinnedBuffer<u8>>,
    /// Where an uploaded frame lands (copy mode). Allocated at its first
    /// use, grown for a larger frame.
    pub(super) device: Option<DeviceBuffer<u8>>,
    /// Upload stream, after the frame's copy: the frame kernel waits for
    /// it; in copy mode, the end of the GPU's reads of the host bytes.
    pub(super) uploaded: Event,
    /// Compute stream, after the frame kernel: the next upload into
    /// `device` waits for it; in mapped mode, the end of the GPU's reads of
    /// the host bytes.
    pub(super) consumed: Event,
}

impl StagingSlot {
    pub(super) fn new(gpu: &Arc<GpuContext>) -> Result<Self, GpuError> {
        Ok(StagingSlot {
            staging: None,
            device: None,
            uploaded: Event::new(gpu, false)?,
            consumed: Event::new(gpu, false)?,
        })
    }
}

/// A staged frame whose host bytes the GPU may still read: its staging
/// number, its `StagingSlot`, and which of its events ends the reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingRead {
    pub(super) number: u64,
    pub(super) slot: usize,
    /// `true`: `consumed` (mapped: the kernel reads in place); else `uploaded`.
    pub(super) by_kernel: bool,
}

/// Resize tables of one output, on the device.
#[derive(Debug)]
pub(super) struct ResizeTables {
    pub(super) rows: DeviceBuffer<DeviceTap>,
    pub(super) cols: DeviceBuffer<DeviceTap>,
}

impl ResizeTables {
    pub(super) fn new(gpu: &Arc<GpuContext>, (h, w): (usize, usize)) -> Result<Self, GpuError> {
        Ok(ResizeTables {
            rows: DeviceBuffer::new(gpu, h)?,
            cols: DeviceBuffer::new(gpu, w)?,
        })
    }
}

/// Host-side staging for host mode, allocated on the first host-mode call.
#[derive(Debug)]
pub(super) struct HostStaging {
    pub(super) seg: PinnedBuffer<f32>,
    pub(super) cls: PinnedBuffer<f32>,
    pub(super) logits: PinnedBuffer<f32>,
    pub(super) mask: PinnedBuffer<u8>,
}

/// Host mode's page-locked staging, allocated on first use and kept.
pub(super) fn host_staging<'a>(
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

pub(super) fn check_len(buffer: &'static str, len: usize, expected: usize) -> Result<(), GpuError> {
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

/// The frame staged last, which further crops read where it is on the GPU
/// (`enqueue_staged_crop_at`).
#[derive(Debug, Clone, Copy)]
pub(super) struct StagedFrame {
    /// Its staging slot (events, device copy).
    pub(super) slot: usize,
    /// The device address the frame kernel reads its first pixel at.
    pub(super) frame_ptr: u64,
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) stride: usize,
    pub(super) layout: PixelLayout,
    /// Its staging number.
    pub(super) number: u64,
    /// The GPU reads the caller's own bytes (`Some(number)` was returned).
    pub(super) in_place: bool,
}
