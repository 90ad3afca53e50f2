//! Device mode (GPU inference backends): a frame staged in a page-locked
//! slot, copied (or mapped) to the device and turned into both models'
//! inputs by the frame kernel; then, after the engine, the mask kernels, the
//! pixel counts and the masks queued back to the host. Nothing here waits
//! but `wait_mask_pixels` and a slot still in use.

use super::buffers::{TensorBuffer, check_len};
use super::options::FrameTransfer;
use super::preprocessor::GpuPreprocessor;
use super::tables::ChannelAffine;
use crate::frame::ImageView;
use crate::gpu::kernels::{self, FrameParams, Kernel, ResizeTarget};
use crate::gpu::{DeviceBuffer, GpuError, PinnedBuffer};
use crate::preprocess::error::{FramePreprocessError, PreprocessError};

impl GpuPreprocessor {
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

/// The bytes the kernel reads of `frame`, checked as the CPU path checks it.
fn checked_frame_bytes(frame: &ImageView<'_>) -> Result<usize, PreprocessError> {
    crate::preprocess::frame_rows::checked_frame_bytes(frame).map(|(_, needed)| needed)
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
