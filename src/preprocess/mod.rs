//! CPU preprocessing: a captured frame to the two models' input tensors, and
//! the segmentation logits to the mask and the classifier's fourth channel.
//!
//! This is the reference implementation: GPU kernels are tested against it.
//! The contract, exactly:
//!
//! - Segmentation input, 1x3xHsxWs: the frame resized bilinearly as PyTorch
//!   `F.interpolate(mode="bilinear", align_corners=False)` without antialias
//!   (see `taps`), in `f32` on the 0..255 values, then `(x / 255 - mean) / std`
//!   per channel. Channels are R, G, B whatever the frame's byte layout.
//! - Mask: argmax over the classes of the 1xCxHsxWs logits (ties to the lowest
//!   class), 1.0 where it is the seal class, else 0.0.
//! - Classifier input, 1x4xHcxWc: channels 0..2 the frame resized the same way
//!   and normalized with the classifier's mean/std; channel 3 the mask resized
//!   bilinearly to HcxWc, then `(m - mask_mean) / mask_std`.
//!
//! Resize tables are built once per frame size; the steady state allocates
//! nothing. Both frame resizes share one top-to-bottom pass over the frame.
//!
//! Its files: `preprocessor.rs` (the CPU `Preprocessor`), `resize.rs`,
//! `taps.rs`, `normalize.rs`, `frame_rows.rs` and `mask.rs` (its parts),
//! `device.rs` (CPU or CUDA, as the config asks), `stage.rs` (the preprocess
//! thread), `error.rs`, and `gpu/` (the same work on the GPU; `gpu_stub.rs`
//! without the `cuda` feature).

mod cavities;
mod device;
mod error;
pub(crate) mod frame_rows;
// The CPU preprocessing's work on the GPU (feature `cuda`; a stub without).
#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(not(feature = "cuda"))]
#[path = "gpu_stub.rs"]
pub mod gpu;
mod mask;
pub(crate) mod normalize;
mod preprocessor;
mod resize;
mod stage;
pub(crate) mod taps;

pub use cavities::{CycleCrops, CycleFit};
pub use device::{FramePreprocessor, cpu_preprocessor};
pub use error::{FramePreprocessError, PreprocessError};
pub use frame_rows::MAX_FRAME_SIDE;
pub(crate) use mask::MaskResampler;
pub use mask::logits_to_mask;
pub use preprocessor::Preprocessor;
pub use stage::{PreprocessStage, preprocess_frame, preprocess_image};
