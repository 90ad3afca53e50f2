//! The CPU reference `Preprocessor`: a frame to both models' input tensors in
//! one top-to-bottom pass, and the mask to the classifier's fourth channel,
//! to the contract that `mod.rs` states. The GPU kernels are tested against it.

use super::error::PreprocessError;
use super::frame_rows::FrameRows;
use super::mask::MaskResampler;
use super::normalize::{ChannelAffine, MaskAffine};
use super::resize::{Bgr, Bgrx, FrameResampler, PixelFormat, Rgb, Rgba, WidenedRows};
use crate::config::Normalization;
use crate::frame::{ImageView, PixelLayout, TensorGeometry};

/// Turns frames into model inputs. One per preprocessing thread; it keeps the
/// resize tables and row caches of the last frame size it saw.
#[derive(Debug)]
pub struct Preprocessor {
    geometry: TensorGeometry,
    seg_affine: ChannelAffine,
    cls_affine: ChannelAffine,
    mask_affine: MaskAffine,
    seg: FrameResampler,
    cls: FrameResampler,
    /// Frame rows converted to `f32`, shared by `seg` and `cls`.
    source: WidenedRows,
    mask: MaskResampler,
    /// Frame (height, width) the frame resamplers' tables were built for.
    prepared_for: Option<(usize, usize)>,
}

impl Preprocessor {
    pub fn new(
        seg: Normalization,
        cls: Normalization,
        mask_mean: f32,
        mask_std: f32,
        geometry: TensorGeometry,
    ) -> Self {
        Preprocessor {
            geometry,
            seg_affine: ChannelAffine::from_normalization(&seg),
            cls_affine: ChannelAffine::from_normalization(&cls),
            mask_affine: MaskAffine::new(mask_mean, mask_std),
            seg: FrameResampler::new(geometry.seg_hw.0, geometry.seg_hw.1),
            cls: FrameResampler::new(geometry.cls_hw.0, geometry.cls_hw.1),
            source: WidenedRows::default(),
            mask: MaskResampler::new(geometry.seg_hw, geometry.cls_hw),
            prepared_for: None,
        }
    }

    pub fn geometry(&self) -> &TensorGeometry {
        &self.geometry
    }

    /// Fills `seg_input` (`geometry.seg_input_len()` floats) and channels 0..2
    /// of `cls_input` (`geometry.cls_input_len()` floats; channel 3 is left as
    /// it is for `mask_to_classifier_channel`).
    pub fn frame_to_tensors(
        &mut self,
        frame: ImageView<'_>,
        seg_input: &mut [f32],
        cls_input: &mut [f32],
    ) -> Result<(), PreprocessError> {
        let rows = FrameRows::new(&frame)?;
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
        if self.prepared_for != Some((rows.height, rows.width)) {
            // A new frame size (first frame or a caps change): the only time
            // tables are rebuilt; capacity is reused when sizes repeat.
            self.seg.prepare(rows.height, rows.width);
            self.cls.prepare(rows.height, rows.width);
            self.source.prepare(rows.width);
            self.prepared_for = Some((rows.height, rows.width));
        }
        let cls_rgb = &mut cls_input[..3 * self.geometry.cls_hw.0 * self.geometry.cls_hw.1];
        match frame.layout {
            PixelLayout::Rgb => self.resize_frame::<Rgb>(&rows, seg_input, cls_rgb),
            PixelLayout::Bgr => self.resize_frame::<Bgr>(&rows, seg_input, cls_rgb),
            PixelLayout::Rgba => self.resize_frame::<Rgba>(&rows, seg_input, cls_rgb),
            PixelLayout::Bgrx => self.resize_frame::<Bgrx>(&rows, seg_input, cls_rgb),
        }
        Ok(())
    }

    /// Fills channel 3 of `cls_input` from `mask` (the segmentation-sized mask
    /// from `logits_to_mask`).
    ///
    /// # Panics
    /// If `mask` is not `geometry.mask_len()` floats or `cls_input` not
    /// `geometry.cls_input_len()`: both are sized once from the same geometry,
    /// so a mismatch is a wiring bug.
    pub fn mask_to_classifier_channel(&self, mask: &[f32], cls_input: &mut [f32]) {
        let geometry = &self.geometry;
        assert_eq!(
            mask.len(),
            geometry.mask_len(),
            "mask length does not match the segmentation geometry"
        );
        assert_eq!(
            cls_input.len(),
            geometry.cls_input_len(),
            "classifier input length does not match the classifier geometry"
        );
        let plane = geometry.cls_hw.0 * geometry.cls_hw.1;
        self.mask
            .resize_into(mask, self.mask_affine, &mut cls_input[3 * plane..]);
    }

    /// Resizes the frame to both outputs in one top-to-bottom pass: output
    /// rows of the two resamplers are interleaved in the order of the source
    /// rows they read, so each frame row is fetched from memory once and
    /// used by both while it is in cache.
    fn resize_frame<P: PixelFormat>(
        &mut self,
        rows: &FrameRows<'_>,
        seg_out: &mut [f32],
        cls_out: &mut [f32],
    ) {
        self.seg.start_frame();
        self.cls.start_frame();
        self.source.start_frame();
        let (seg_h, cls_h) = (self.seg.out_h(), self.cls.out_h());
        let (mut seg_y, mut cls_y) = (0, 0);
        while seg_y < seg_h || cls_y < cls_h {
            let seg_first = cls_y == cls_h
                || (seg_y < seg_h
                    && self.seg.last_source_row(seg_y) <= self.cls.last_source_row(cls_y));
            if seg_first {
                self.seg
                    .emit_row::<P>(seg_y, &mut self.source, rows, &self.seg_affine, seg_out);
                seg_y += 1;
            } else {
                self.cls
                    .emit_row::<P>(cls_y, &mut self.source, rows, &self.cls_affine, cls_out);
                cls_y += 1;
            }
        }
    }
}

fn check_len(buffer: &'static str, len: usize, expected: usize) -> Result<(), PreprocessError> {
    if len == expected {
        Ok(())
    } else {
        Err(PreprocessError::BufferLength {
            buffer,
            len,
            expected,
        })
    }
}
