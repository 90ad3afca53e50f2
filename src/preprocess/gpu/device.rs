//! Device mode (GPU inference backends): a frame uploaded straight from its
//! page-locked ring slot on the upload stream (or read in place when
//! mapped; heap frames through a page-locked staging copy), turned into both
//! models' inputs by the frame kernel on the compute stream; then, after
//! the engine, the mask kernels, the pixel counts and the masks queued back
//! to the host. Nothing here waits but `wait_mask_pixels` and a staging
//! slot still in use.
//!
//! ```text
//! upload stream:  wait consumed[j] -> H2D slot -> device[j] -> record uploaded[j]
//! compute stream: wait uploaded[j] -> frame kernel(device[j]) -> record consumed[j]
//!                 (mapped: frame kernel(slot's device address) -> consumed[j])
//! ```
//!
//! The caller's frame is read until `uploaded[j]` (copy) or `consumed[j]`
//! (mapped) completes: `enqueue_frame_at` returns its staging number and
//! `reads_done` says when the GPU is past it.
//!
//! A multi-cavity frame (`[source.layout]`) goes to the GPU once and is cut
//! there: `enqueue_frame_crop_at` transfers the whole frame as above and runs
//! the frame kernel on the first cavity's crop only (the frame's address
//! moved to the crop's first pixel, the crop's width and height, the frame's
//! stride: exactly what the CPU path's `ImageView::crop` hands its
//! preprocessor); `enqueue_staged_crop_at` runs the kernel on another crop
//! of that same frame where it already is on the device (or, mapped, where
//! it is in host memory), into its own batch index, with no transfer. Each
//! crop kernel records `consumed[j]` again, so the staging slot (and a
//! mapped frame) counts as read only once the last crop kernel is done.
//!
//! ```text
//! upload stream:  H2D whole frame -> device[j] -> uploaded[j]        (once per frame)
//! compute stream: wait uploaded[j] -> kernel(crop 1) -> consumed[j]
//!                                  -> kernel(crop 2) -> consumed[j] -> .. (one per cavity)
//! ```

use super::buffers::{PendingRead, StagedFrame, TensorBuffer, check_len};
use super::options::FrameTransfer;
use super::preprocessor::GpuPreprocessor;
use super::tables::ChannelAffine;
use crate::config::CavityRect;
use crate::frame::{ImageView, PixelLayout};
use crate::frame_bytes::HostPlacement;
use crate::gpu::kernels::{self, FrameParams, Kernel, ResizeTarget};
use crate::gpu::{DeviceBuffer, GpuError, PinnedBuffer};
use crate::preprocess::error::{FramePreprocessError, PreprocessError};

impl GpuPreprocessor {
    /// Device mode: queues the frame's transfer and the frame kernel, which
    /// fills the segmentation input and channels 0..2 of the classifier input.
    /// `frame` is heap memory: it is copied into page-locked staging first
    /// and may be reused as soon as this returns.
    pub fn enqueue_frame(&mut self, frame: ImageView<'_>) -> Result<(), FramePreprocessError> {
        self.enqueue_frame_at(frame, HostPlacement::Pageable, 0)
            .map(drop)
    }

    /// Device mode: frame `k` of the batch (`k` below `batch_frames`), whose
    /// bytes live as `placement` says. Page-locked bytes are read where they
    /// are: uploaded straight from them on the upload stream (copy mode), or
    /// read in place by the kernel (mapped mode, mapped bytes); heap bytes
    /// go through a page-locked staging copy first.
    ///
    /// Returns the frame's staging number when the GPU still reads
    /// `frame`'s bytes after this returns: they must stay valid and
    /// unwritten until `reads_done` passes that number. `None`: `frame` may
    /// be reused at once. Waits only when a staging slot's previous frame
    /// is still being read (more frames staged than slots).
    pub fn enqueue_frame_at(
        &mut self,
        frame: ImageView<'_>,
        placement: HostPlacement,
        k: usize,
    ) -> Result<Option<u64>, FramePreprocessError> {
        self.enqueue_frame_part(frame, placement, None, k)
    }

    /// Device mode: as `enqueue_frame_at`, with the frame kernel reading
    /// only `crop` of the frame (a cavity's crop, inside the frame) into
    /// batch frame `k`. The whole frame goes to the GPU (once: further crops
    /// of it with `enqueue_staged_crop_at`), and the crop is resized exactly
    /// as the CPU preprocessor resizes `frame.crop(..)` of it. Returns as
    /// `enqueue_frame_at`: the frame's staging number while the GPU reads
    /// its bytes in place.
    pub fn enqueue_frame_crop_at(
        &mut self,
        frame: ImageView<'_>,
        placement: HostPlacement,
        crop: CavityRect,
        k: usize,
    ) -> Result<Option<u64>, FramePreprocessError> {
        self.enqueue_frame_part(frame, placement, Some(crop), k)
    }

    /// Device mode: the frame kernel on `crop` of the frame staged last
    /// (`enqueue_frame_crop_at` or `enqueue_frame_at`), where it already is
    /// on the GPU (its device copy, or its mapped bytes), into batch frame
    /// `k`: nothing is transferred. The staging slot and the frame's bytes
    /// count as read only once this kernel is done too (`reads_done`), so
    /// stage every crop of a frame before handing the frame back. Returns
    /// what staging that frame returned (its number while the GPU reads the
    /// caller's bytes in place). `NoFrameToCrop` when no frame is staged
    /// (its staging failed).
    pub fn enqueue_staged_crop_at(
        &mut self,
        crop: CavityRect,
        k: usize,
    ) -> Result<Option<u64>, FramePreprocessError> {
        self.gpu.bind()?;
        let staged = self.last_frame.ok_or(GpuError::NoFrameToCrop)?;
        self.check_batch_index(k)?;
        let params = self.crop_params(&staged, crop, k)?;
        if let Err(e) = self.queue_frame_kernel(staged.layout, &params, staged.slot) {
            // A frame whose crop failed is not cropped again.
            self.last_frame = None;
            let _ = self.stream.synchronize();
            return Err(e);
        }
        // A read `reads_done` already saw end is pending again until this
        // kernel is done; it is the newest staged, so the queue stays in
        // staging order.
        if self.pending_reads.back().map(|r| r.number) != Some(staged.number) {
            self.pending_reads.push_back(PendingRead {
                number: staged.number,
                slot: staged.slot,
                by_kernel: true,
            });
        }
        Ok(staged.in_place.then_some(staged.number))
    }

    /// The whole frame's transfer, then the frame kernel on `crop` of it
    /// (`None`: all of it) into batch frame `k`.
    fn enqueue_frame_part(
        &mut self,
        frame: ImageView<'_>,
        placement: HostPlacement,
        crop: Option<CavityRect>,
        k: usize,
    ) -> Result<Option<u64>, FramePreprocessError> {
        self.gpu.bind()?;
        // Whatever happens below, an earlier frame is not cropped again.
        self.last_frame = None;
        self.check_batch_index(k)?;
        let bytes = checked_frame_bytes(&frame)?;
        if let Some(crop) = crop {
            check_crop(crop, frame.width, frame.height)?;
        }
        let index = self.next_slot;
        self.next_slot = (self.next_slot + 1) % self.slots.len();
        self.wait_slot_reads(index)?;
        let number = self.staged;
        self.staged += 1;
        let mapped = self.options.frame_transfer == FrameTransfer::Mapped;
        // Mapped: only mapped bytes can be read in place by the kernel;
        // copied: any page-locked bytes can be uploaded from.
        let in_place = matches!(
            (placement, mapped),
            (HostPlacement::Mapped { .. }, _) | (HostPlacement::Pinned, false)
        );
        let queued = self
            .queue_transfer(frame, placement, (index, bytes), in_place)
            .and_then(|frame_ptr| {
                let staged = StagedFrame {
                    slot: index,
                    frame_ptr,
                    width: frame.width,
                    height: frame.height,
                    stride: frame.stride,
                    layout: frame.layout,
                    number,
                    in_place,
                };
                let whole = CavityRect {
                    x: 0,
                    y: 0,
                    // Both below MAX_FRAME_SIDE = 2^24 (checked).
                    width: frame.width as u32,
                    height: frame.height as u32,
                };
                let params = self.crop_params(&staged, crop.unwrap_or(whole), k)?;
                self.queue_frame_kernel(frame.layout, &params, index)?;
                Ok(staged)
            });
        match queued {
            Ok(staged) => self.last_frame = Some(staged),
            Err(e) => {
                // Whatever was queued may still read the frame: let it end,
                // so nothing is pending for a frame that failed.
                let _ = self.upload.synchronize();
                let _ = self.stream.synchronize();
                return Err(e);
            }
        }
        self.pending_reads.push_back(PendingRead {
            number,
            slot: index,
            by_kernel: mapped,
        });
        Ok(in_place.then_some(number))
    }

    /// `k` is a frame of the batch the tensors hold.
    fn check_batch_index(&self, k: usize) -> Result<(), GpuError> {
        let batch = self.options.batch_frames.max(1);
        if k >= batch {
            return Err(GpuError::BufferLength {
                buffer: "batch frame index",
                len: k,
                expected: batch,
            });
        }
        Ok(())
    }

    /// How many frames of those staged so far the GPU has finished reading
    /// (every staging number below it). Never blocks.
    pub fn reads_done(&mut self) -> Result<u64, GpuError> {
        while let Some(read) = self.pending_reads.front().copied() {
            let slot = &self.slots[read.slot];
            let event = if read.by_kernel {
                &slot.consumed
            } else {
                &slot.uploaded
            };
            if !event.is_complete()? {
                return Ok(read.number);
            }
            self.pending_reads.pop_front();
        }
        Ok(self.staged)
    }

    /// Blocks until the GPU has read every frame staged so far.
    pub fn wait_reads(&mut self) -> Result<(), GpuError> {
        self.upload.synchronize()?;
        self.stream.synchronize()?;
        self.pending_reads.clear();
        Ok(())
    }

    /// Waits until no pending read uses staging slot `index` (its earlier
    /// frames read, oldest first).
    fn wait_slot_reads(&mut self, index: usize) -> Result<(), GpuError> {
        while self.pending_reads.iter().any(|read| read.slot == index) {
            let Some(read) = self.pending_reads.pop_front() else {
                break;
            };
            let slot = &self.slots[read.slot];
            if read.by_kernel {
                slot.consumed.synchronize()?;
            } else {
                slot.uploaded.synchronize()?;
            }
        }
        Ok(())
    }

    /// Queues staging slot `index`'s transfer of `frame` (`bytes` long):
    /// its upload (copy mode), or nothing but a staging copy where the
    /// kernel reads it in place (mapped). `in_place`: the GPU reads
    /// `frame`'s own (page-locked) bytes, else a staging copy. Returns the
    /// device address the frame kernel reads the frame at.
    fn queue_transfer(
        &mut self,
        frame: ImageView<'_>,
        placement: HostPlacement,
        (index, bytes): (usize, usize),
        in_place: bool,
    ) -> Result<u64, FramePreprocessError> {
        let mapped = self.options.frame_transfer == FrameTransfer::Mapped;
        if !in_place {
            let slot = &mut self.slots[index];
            if slot.staging.as_ref().is_none_or(|s| s.len() < bytes) {
                // No read of it is pending (`wait_slot_reads`).
                slot.staging = Some(PinnedBuffer::new(&self.gpu, bytes, mapped)?);
            }
            if let Some(staging) = &mut slot.staging {
                staging.as_mut_slice()[..bytes].copy_from_slice(&frame.data[..bytes]);
            }
        }
        if mapped {
            match (in_place, placement, &self.slots[index].staging) {
                (true, HostPlacement::Mapped { device_ptr }, _) => Ok(device_ptr),
                (false, _, Some(staging)) => {
                    Ok(staging.mapped_device_ptr().ok_or(GpuError::Unmapped)?)
                }
                _ => Err(GpuError::Unmapped.into()),
            }
        } else {
            Ok(self.queue_upload(frame, index, bytes, in_place)?)
        }
    }

    /// The frame kernel's parameters for `crop` (inside the frame: checked
    /// again here) of the staged frame, written as batch frame `k`
    /// (`check_batch_index`).
    fn crop_params(
        &self,
        staged: &StagedFrame,
        crop: CavityRect,
        k: usize,
    ) -> Result<FrameParams, GpuError> {
        check_crop(crop, staged.width, staged.height)?;
        // Inside the frame: the crop's first byte and every row of it lie
        // within the frame's bytes (`ImageView::crop`'s offset).
        let offset =
            crop.y as usize * staged.stride + crop.x as usize * staged.layout.bytes_per_pixel();
        let frame_ptr = staged.frame_ptr + offset as u64;
        Ok(FrameParams {
            frame: frame_ptr,
            stride: staged.stride as u64,
            // At most the frame's sides, below MAX_FRAME_SIDE = 2^24 (checked).
            in_w: crop.width,
            in_h: crop.height,
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
            aligned4: u32::from(frame_ptr.is_multiple_of(4) && staged.stride.is_multiple_of(4)),
            reserved: 0,
        })
    }

    /// Queues the frame kernel with `params` (from `crop_params`, over the
    /// frame staged in staging slot `index`) on the compute stream, then
    /// records that slot's `consumed`.
    fn queue_frame_kernel(
        &mut self,
        layout: PixelLayout,
        params: &FrameParams,
        index: usize,
    ) -> Result<(), FramePreprocessError> {
        let kernel = Kernel::FrameToTensors(layout, self.options.input_element);
        let grid = kernels::frame_grid(self.geometry.seg_hw, self.geometry.cls_hw);
        // SAFETY: `params` comes from `crop_params` over the frame staged in
        // slot `index`: its crop lies inside that frame (checked), so the
        // kernel reads (in_h - 1) rows of `stride` plus one row of in_w
        // pixels from the crop's first byte, all within the frame's bytes
        // (`checked_frame_bytes`): the device copy, the staging copy, or the
        // caller's mapped bytes, which the caller keeps until `reads_done`
        // passes this frame, recorded by `consumed` below (re-recorded by
        // each later crop kernel of the same frame; the slot's device buffer
        // is reallocated or rewritten only after `consumed` completes). The
        // outputs start at frame k < batch_frames (checked) of tensors
        // holding batch_frames frames of the geometry the grid is made of;
        // all are owned by `self`, whose Drop synchronizes both streams.
        unsafe {
            self.kernels
                .launch(kernel, grid, kernels::FRAME_BLOCK, &self.stream, params)?
        };
        Ok(self.slots[index].consumed.record(&self.stream)?)
    }

    /// Copy mode: queues the upload of `frame` (its own page-locked bytes
    /// with `in_place`, else the staging slot's copy) into the staging
    /// slot's device buffer on the upload stream, after the previous kernel
    /// that read that buffer, and makes the compute stream wait for it.
    /// Returns the device address of the uploaded frame.
    fn queue_upload(
        &mut self,
        frame: ImageView<'_>,
        index: usize,
        bytes: usize,
        in_place: bool,
    ) -> Result<u64, GpuError> {
        let slot = &mut self.slots[index];
        if slot.device.as_ref().is_none_or(|d| d.len() < bytes) {
            // The previous kernel reading it must be done before it is freed.
            slot.consumed.synchronize()?;
            slot.device = Some(DeviceBuffer::new(&self.gpu, bytes)?);
        }
        let (Some(device), src) = (
            &slot.device,
            if in_place {
                &frame.data[..bytes]
            } else {
                match &slot.staging {
                    Some(staging) => &staging.as_slice()[..bytes],
                    None => return Err(GpuError::Unmapped),
                }
            },
        ) else {
            return Err(GpuError::Unmapped);
        };
        self.upload.wait_for(&slot.consumed)?;
        // SAFETY: `src` is page-locked (the caller's slot, which it keeps
        // unwritten until `reads_done` passes this frame, i.e. until
        // `uploaded` below completes; or this staging slot, not written again
        // before then, `wait_slot_reads`); `device` is owned by `self`, whose
        // Drop synchronizes the upload stream, and is not freed before the
        // kernel reading it completes (`consumed`).
        unsafe { self.upload.upload(src, device, 0)? };
        slot.uploaded.record(&self.upload)?;
        self.stream.wait_for(&slot.uploaded)?;
        Ok(device.device_ptr())
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
}

/// `crop` lies inside a `width` x `height` frame and is not empty.
fn check_crop(crop: CavityRect, width: usize, height: usize) -> Result<(), GpuError> {
    let (x, y) = (crop.x as usize, crop.y as usize);
    let (w, h) = (crop.width as usize, crop.height as usize);
    if w == 0 || h == 0 || x + w > width || y + h > height {
        return Err(GpuError::CropOutside {
            x: crop.x,
            y: crop.y,
            width: crop.width,
            height: crop.height,
            frame_width: width,
            frame_height: height,
        });
    }
    Ok(())
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
