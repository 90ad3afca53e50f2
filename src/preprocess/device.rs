//! Where preprocessing runs: the CPU reference, or the CUDA kernels.
//!
//! With `preprocess = "cuda"` and a CPU inference backend, the kernels' tensors
//! come back to host memory for inference. That mode exists to check the
//! kernels inside the whole pipeline on machines without TensorRT; GPU
//! backends keep the tensors on the device instead.

use super::error::FramePreprocessError;
use super::gpu::GpuPreprocessor;
use super::preprocessor::Preprocessor;
use crate::config::{ComputeDevice, Config};
use crate::frame::{ImageView, TensorGeometry};
use crate::gpu::{GpuContext, Stream, TensorElement};

/// The frame-to-tensors step of the preprocess stage.
#[allow(
    clippy::large_enum_variant,
    reason = "one per preprocess thread, made once; boxing the CPU reference would add a pointer hop to every frame"
)]
pub enum FramePreprocessor {
    Cpu(Preprocessor),
    Cuda(Box<GpuPreprocessor>),
}

impl FramePreprocessor {
    /// The preprocessor the config asks for. A GPU that cannot be opened is an
    /// error at start, never a silent fall back to the CPU.
    pub fn open(config: &Config, geometry: TensorGeometry) -> Result<Self, FramePreprocessError> {
        match config.inference.preprocess {
            ComputeDevice::Cpu => Ok(FramePreprocessor::Cpu(cpu_preprocessor(config, geometry))),
            ComputeDevice::Cuda => {
                let gpu = GpuContext::open(0)?;
                let f32s = (TensorElement::F32, TensorElement::F32);
                // Host mode judges one frame at a time: tensors of one frame.
                let pre =
                    GpuPreprocessor::from_config(config, Stream::new(&gpu)?, geometry, f32s, 1)?;
                log::info!(target: "sealcheck::preprocess", gpu = gpu.name(), mapped = gpu.integrated(); "preprocessing on CUDA");
                Ok(FramePreprocessor::Cuda(Box::new(pre)))
            }
        }
    }

    pub fn frame_to_tensors(
        &mut self,
        frame: ImageView<'_>,
        seg_input: &mut [f32],
        cls_input: &mut [f32],
    ) -> Result<(), FramePreprocessError> {
        match self {
            FramePreprocessor::Cpu(p) => Ok(p.frame_to_tensors(frame, seg_input, cls_input)?),
            FramePreprocessor::Cuda(p) => p.frame_to_tensors(frame, seg_input, cls_input),
        }
    }
}

/// The CPU reference preprocessor for `config`'s normalization.
pub fn cpu_preprocessor(config: &Config, geometry: TensorGeometry) -> Preprocessor {
    Preprocessor::new(
        config.segmentation.normalization,
        config.classifier.normalization,
        config.classifier.mask_mean,
        config.classifier.mask_std,
        geometry,
    )
}
