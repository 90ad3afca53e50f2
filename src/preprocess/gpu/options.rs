//! What the GPU preprocessor is built for: the engines' element types, the
//! mask class, how frames reach the GPU (`FrameTransfer`) and how many, and
//! the largest tensor side the kernels' grids allow.

use crate::gpu::{GpuContext, TensorElement};

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
    /// `[inference] zero_copy` as given, else as `for_gpu` decides.
    pub fn for_config(zero_copy: Option<bool>, gpu: &GpuContext) -> Self {
        match zero_copy {
            Some(true) => FrameTransfer::Mapped,
            Some(false) => FrameTransfer::Copy,
            None => Self::for_gpu(gpu),
        }
    }

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
    /// Staging slots frames go through in turn (each with its events, and a
    /// device copy of the frame in copy mode): 2 lets the host stage frame
    /// N+1 while the GPU still reads frame N.
    pub frame_slots: usize,
    /// Bytes a frame may take (stride x height) before a staging slot's
    /// buffers are allocated larger; they are allocated at their first use,
    /// for the frame at hand, and grown for a larger one (a caps change).
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
