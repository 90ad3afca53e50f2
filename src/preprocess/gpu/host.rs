//! Host mode (CPU inference backends, to check the kernels inside the whole
//! pipeline): the same calls as the CPU `Preprocessor`, on host slices,
//! through page-locked staging; each call waits for its own work.

use super::buffers::{TensorBuffer, TensorValue, check_len, host_staging};
use super::mask::widen_mask;
use super::preprocessor::GpuPreprocessor;
use crate::frame::ImageView;
use crate::gpu::{DeviceBuffer, GpuError, TensorElement};
use crate::preprocess::error::FramePreprocessError;

impl GpuPreprocessor {
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
