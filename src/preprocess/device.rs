//! Where preprocessing runs: the CPU reference, or the CUDA kernels.
//!
//! With `preprocess = "cuda"` and a CPU inference backend, the kernels' tensors
//! come back to host memory for inference. That mode exists to check the
//! kernels inside the whole pipeline on machines without TensorRT; GPU
//! backends keep the tensors on the device instead.

use super::{PreprocessError, Preprocessor};
use crate::config::{ComputeDevice, Config};
use crate::frame::{ImageView, TensorGeometry};

#[derive(Debug, thiserror::Error)]
pub enum FramePreprocessError {
    #[error(transparent)]
    Cpu(#[from] PreprocessError),
    #[cfg(feature = "cuda")]
    #[error(transparent)]
    Gpu(#[from] crate::gpu::GpuError),
    #[error(
        "`preprocess = \"cuda\"` in [inference], but this build has no CUDA support \
         (built without the `cuda` feature) — set preprocess = \"cpu\", or rebuild with \
         `cargo build --release --features cuda`"
    )]
    NotBuilt,
}

/// The frame-to-tensors step of the preprocess stage.
pub enum FramePreprocessor {
    Cpu(Preprocessor),
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::gpu::GpuPreprocessor>),
}

impl FramePreprocessor {
    /// The preprocessor the config asks for. A GPU that cannot be opened is an
    /// error at start, never a silent fall back to the CPU.
    pub fn open(config: &Config, geometry: TensorGeometry) -> Result<Self, FramePreprocessError> {
        match config.inference.preprocess {
            ComputeDevice::Cpu => Ok(FramePreprocessor::Cpu(cpu_preprocessor(config, geometry))),
            #[cfg(feature = "cuda")]
            ComputeDevice::Cuda => {
                use crate::gpu::{GpuContext, Stream, TensorElement};
                let gpu = GpuContext::open(0)?;
                let stream = Stream::new(&gpu)?;
                let f32s = (TensorElement::F32, TensorElement::F32);
                let pre = gpu_preprocessor(config, stream, geometry, f32s)?;
                log::info!(target: "sealcheck::preprocess", gpu = gpu.name(), mapped = gpu.integrated(); "preprocessing on CUDA");
                Ok(FramePreprocessor::Cuda(Box::new(pre)))
            }
            #[cfg(not(feature = "cuda"))]
            ComputeDevice::Cuda => Err(FramePreprocessError::NotBuilt),
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
            #[cfg(feature = "cuda")]
            FramePreprocessor::Cuda(p) => Ok(p.frame_to_tensors(frame, seg_input, cls_input)?),
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

/// The GPU preprocessor for `config`'s normalization and mask class, queuing
/// on `stream`: the one place it is built from the config (host mode above,
/// and the device path). `elements`: the engines' input and segmentation
/// logits element types; frames are mapped on a GPU sharing host memory.
#[cfg(feature = "cuda")]
pub fn gpu_preprocessor(
    config: &Config,
    stream: crate::gpu::Stream,
    geometry: TensorGeometry,
    (input_element, logits_element): (crate::gpu::TensorElement, crate::gpu::TensorElement),
) -> Result<crate::gpu::GpuPreprocessor, crate::gpu::GpuError> {
    use crate::gpu::{FrameTransfer, GpuOptions, GpuPreprocessor};
    let options = GpuOptions {
        input_element,
        logits_element,
        mask_class: config.segmentation.mask_class,
        frame_transfer: FrameTransfer::for_gpu(stream.gpu()),
        ..GpuOptions::default()
    };
    GpuPreprocessor::on_stream(
        stream,
        config.segmentation.normalization,
        config.classifier.normalization,
        config.classifier.mask_mean,
        config.classifier.mask_std,
        geometry,
        options,
    )
}
