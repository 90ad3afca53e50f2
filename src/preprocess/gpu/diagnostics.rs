//! Synchronous copies between the host and the GPU preprocessor's device
//! tensors, and poisoning them: for tests, diagnostics and host-side
//! engines, never the frame path.

use super::buffers::{TensorBuffer, TensorValue, check_len};
use super::preprocessor::GpuPreprocessor;
use crate::gpu::{GpuError, PinnedBuffer, Stream};

impl GpuPreprocessor {
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
