//! GPU preprocessing in a build without the `cuda` feature: the type the
//! preprocess stage names, never made (there is no `Stream` to make it on).

use std::convert::Infallible;

use super::error::FramePreprocessError;
use crate::config::Config;
use crate::frame::{ImageView, TensorGeometry};
use crate::gpu::{GpuError, Stream, TensorElement};

#[derive(Debug)]
pub struct GpuPreprocessor {
    never: Infallible,
}

impl GpuPreprocessor {
    pub fn from_config(
        _config: &Config,
        stream: Stream,
        _geometry: TensorGeometry,
        _elements: (TensorElement, TensorElement),
        _batch_frames: usize,
    ) -> Result<Self, GpuError> {
        // Unreachable in practice: no `Stream` can be made in this build.
        let _ = stream;
        Err(GpuError::NotBuilt)
    }

    pub fn frame_to_tensors(
        &mut self,
        _frame: ImageView<'_>,
        _seg_input: &mut [f32],
        _cls_input: &mut [f32],
    ) -> Result<(), FramePreprocessError> {
        match self.never {}
    }
}
