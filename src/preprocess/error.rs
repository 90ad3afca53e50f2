//! Why a frame could not be turned into tensors. Each refusal names the
//! numbers involved, so a technician can tell a mis-stated frame from a
//! mis-sized buffer; `FramePreprocessError` adds the GPU's failures for the
//! preprocessor that may run on either.

use crate::frame::PixelLayout;
use crate::gpu::GpuError;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreprocessError {
    #[error(
        "frame is empty ({width}x{height} pixels); the source delivered no image — check the capture caps"
    )]
    EmptyFrame { width: usize, height: usize },
    #[error(
        "frame of {width}x{height} pixels exceeds {max} pixels per side; check the capture caps"
    )]
    FrameTooLarge {
        width: usize,
        height: usize,
        max: usize,
    },
    #[error(
        "frame row stride {stride} bytes is smaller than one row of {width} {layout:?} pixels ({row_bytes} bytes); \
         capture mis-stated the frame layout"
    )]
    StrideTooSmall {
        stride: usize,
        width: usize,
        layout: PixelLayout,
        row_bytes: usize,
    },
    #[error(
        "frame data has {len} bytes but {width}x{height} pixels with row stride {stride} need at least {needed}; \
         capture mis-stated the frame size"
    )]
    DataTooShort {
        len: usize,
        width: usize,
        height: usize,
        stride: usize,
        needed: usize,
    },
    #[error(
        "{buffer} buffer holds {len} floats but the model geometry needs {expected}; it was sized for other models"
    )]
    BufferLength {
        buffer: &'static str,
        len: usize,
        expected: usize,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum FramePreprocessError {
    /// The frame was refused (either preprocessor checks it the same way).
    #[error(transparent)]
    Frame(#[from] PreprocessError),
    /// The GPU could not be used (in a build without `cuda`: there is none).
    #[error(transparent)]
    Gpu(#[from] GpuError),
}
