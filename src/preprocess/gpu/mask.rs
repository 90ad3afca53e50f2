//! The mask kernels: the segmentation logits of each frame of a batch to
//! its 0/1 mask, its pixel count and the classifier's mask channel in one
//! launch; the mask's resize tables they read; and the host's widening of a
//! downloaded byte mask.

use super::preprocessor::GpuPreprocessor;
use crate::gpu::kernels::{self, Kernel, MaskParams};
use crate::gpu::{DeviceTap, GpuError};

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

impl GpuPreprocessor {
    /// Queues the count reset and, for each of the first `frames` frames,
    /// the mask kernel (mask, count and the classifier's channel 3 in one
    /// launch).
    pub(super) fn queue_mask_kernels(&self, frames: usize) -> Result<(), GpuError> {
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
    pub(super) fn upload_mask_tables(
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
}
