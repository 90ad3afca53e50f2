//! Segmentation logits to a binary seal mask, and the mask resized into the
//! classifier's fourth input channel.

use super::normalize::MaskAffine;
use super::taps::{Tap, linear_taps};

/// Pixels handled per block in `logits_to_mask`: the running maxima live on
/// the stack, so the pass allocates nothing and reads each class plane in
/// contiguous runs.
const ARGMAX_BLOCK: usize = 256;

/// Writes `mask[i] = 1.0` where `mask_class` wins the argmax over the `classes`
/// planes of `logits` (1xCxHxW) at pixel `i`, else `0.0`, and returns the number
/// of pixels set. Ties go to the lowest class index and a NaN beats every number
/// (the first NaN wins), as `torch.argmax` decides.
///
/// # Panics
/// If `logits.len() != classes * mask.len()`, or `mask_class >= classes`: both
/// are fixed when the models are loaded, so a mismatch is a wiring bug.
pub fn logits_to_mask(logits: &[f32], classes: usize, mask_class: usize, mask: &mut [f32]) -> u64 {
    let pixels = mask.len();
    assert!(
        classes > 0 && logits.len() == classes * pixels,
        "segmentation logits have {} floats, expected {classes} classes x {pixels} mask pixels",
        logits.len()
    );
    assert!(
        mask_class < classes,
        "mask class {mask_class} is not below the model's {classes} classes"
    );
    if pixels == 0 {
        return 0;
    }
    if classes == 2 {
        return two_class_mask(logits.split_at(pixels), mask_class == 1, mask);
    }
    let winner = mask_class as u32;
    let mut best = [0.0f32; ARGMAX_BLOCK];
    let mut arg = [0u32; ARGMAX_BLOCK];
    let mut set = 0u64;
    for (block, mask) in mask.chunks_mut(ARGMAX_BLOCK).enumerate() {
        let start = block * ARGMAX_BLOCK;
        let len = mask.len();
        let (best, arg) = (&mut best[..len], &mut arg[..len]);
        let mut planes = logits
            .chunks_exact(pixels)
            .map(|plane| &plane[start..start + len]);
        // `classes > 0` was checked, so the first plane exists.
        if let Some(first) = planes.next() {
            best.copy_from_slice(first);
            arg.fill(0);
        }
        for (class, plane) in (1u32..).zip(planes) {
            for ((best, arg), &value) in best.iter_mut().zip(arg.iter_mut()).zip(plane) {
                // Strictly greater keeps ties on the lower index; a NaN wins
                // over a number and, once best, is never replaced. Written
                // without branches (`|`, `&`, selects): logits are noise to a
                // branch predictor, and this way the loop vectorizes.
                let take = (value > *best) | (value.is_nan() & !best.is_nan());
                let keep = u32::from(take).wrapping_sub(1); // all ones when not taken
                *best = f32::from_bits((best.to_bits() & keep) | (value.to_bits() & !keep));
                *arg = (*arg & keep) | (class & !keep);
            }
        }
        for (m, &a) in mask.iter_mut().zip(arg.iter()) {
            let hit = a == winner;
            *m = if hit { 1.0 } else { 0.0 };
            set += u64::from(hit);
        }
    }
    set
}

/// `logits_to_mask` for the common two-class model, in one pass over both
/// planes: class 1 wins where it is strictly larger, or NaN over a number.
fn two_class_mask(
    (class0, class1): (&[f32], &[f32]),
    seal_is_class1: bool,
    mask: &mut [f32],
) -> u64 {
    let mut set = 0u64;
    for ((m, &p0), &p1) in mask.iter_mut().zip(class0).zip(class1) {
        let class1_wins = (p1 > p0) | (p1.is_nan() & !p0.is_nan());
        let hit = class1_wins == seal_is_class1;
        *m = f32::from(u8::from(hit));
        set += u64::from(hit);
    }
    set
}

/// Resizes the segmentation-sized mask to the classifier size (bilinear, same
/// contract as the frame) and normalizes it. Tables are fixed by the model
/// geometry and built once.
#[derive(Debug)]
pub(crate) struct MaskResampler {
    in_w: usize,
    out_w: usize,
    rows: Vec<Tap>,
    cols: Vec<Tap>,
}

impl MaskResampler {
    pub fn new(in_hw: (usize, usize), out_hw: (usize, usize)) -> Self {
        let (mut rows, mut cols) = (Vec::new(), Vec::new());
        linear_taps(in_hw.0, out_hw.0, &mut rows);
        linear_taps(in_hw.1, out_hw.1, &mut cols);
        MaskResampler {
            in_w: in_hw.1,
            out_w: out_hw.1,
            rows,
            cols,
        }
    }

    /// Writes the resized, normalized mask (`out_h * out_w` floats) into `out`.
    /// Each output value blends its four neighbours directly: no scratch row,
    /// so this works through `&self`.
    pub fn resize_into(&self, mask: &[f32], affine: MaskAffine, out: &mut [f32]) {
        if self.out_w == 0 {
            return;
        }
        for (row_tap, out_row) in self.rows.iter().zip(out.chunks_exact_mut(self.out_w)) {
            let upper = &mask[row_tap.first * self.in_w..][..self.in_w];
            let lower = &mask[row_tap.second * self.in_w..][..self.in_w];
            let (wu, wl) = (row_tap.w_first, row_tap.w_second);
            for (o, col) in out_row.iter_mut().zip(&self.cols) {
                let (w0, w1) = (col.w_first, col.w_second);
                let top = w0 * upper[col.first] + w1 * upper[col.second];
                let bottom = w0 * lower[col.first] + w1 * lower[col.second];
                *o = (wu * top + wl * bottom) * affine.scale + affine.bias;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_classes_pick_the_larger_and_ties_go_to_class_zero() {
        // Pixels: class 1 wins, class 0 wins, tie.
        let logits = [0.0, 2.0, 1.0, /* class 1 */ 1.0, 1.0, 1.0];
        let mut mask = [9.0; 3];
        assert_eq!(logits_to_mask(&logits, 2, 1, &mut mask), 1);
        assert_eq!(mask, [1.0, 0.0, 0.0]);
        assert_eq!(logits_to_mask(&logits, 2, 0, &mut mask), 2);
        assert_eq!(mask, [0.0, 1.0, 1.0]);
    }

    #[test]
    fn three_classes_with_ties_between_later_classes() {
        // Pixel 0: classes 1 and 2 tie above 0 -> 1. Pixel 1: all tie -> 0.
        // Pixel 2: class 2 alone is largest.
        let logits = [
            0.0, 5.0, 0.0, /* 1 */ 3.0, 5.0, 1.0, /* 2 */ 3.0, 5.0, 2.0,
        ];
        let mut mask = [0.0; 3];
        assert_eq!(logits_to_mask(&logits, 3, 1, &mut mask), 1);
        assert_eq!(mask, [1.0, 0.0, 0.0]);
        assert_eq!(logits_to_mask(&logits, 3, 2, &mut mask), 1);
        assert_eq!(mask, [0.0, 0.0, 1.0]);
        assert_eq!(logits_to_mask(&logits, 3, 0, &mut mask), 1);
        assert_eq!(mask, [0.0, 1.0, 0.0]);
    }

    #[test]
    fn nan_wins_like_torch_argmax() {
        let nan = f32::NAN;
        // Pixel 0: NaN in class 1. Pixel 1: NaN in class 0 beats a larger class 1.
        // Pixel 2: NaN in both, the first wins.
        let logits = [0.0, nan, nan, /* 1 */ nan, 9.0, nan];
        let mut mask = [0.0; 3];
        assert_eq!(logits_to_mask(&logits, 2, 1, &mut mask), 1);
        assert_eq!(mask, [1.0, 0.0, 0.0]);
    }

    #[test]
    fn nan_wins_with_three_classes_too() {
        let nan = f32::NAN;
        // Pixel 0: NaN in class 2 beats 9. Pixel 1: NaN in class 1 and 2, class 1 wins.
        // Pixel 2: NaN in class 0 wins over everything.
        let logits = [
            0.0, 0.0, nan, /* 1 */ 9.0, nan, 9.0, /* 2 */ nan, nan, 9.0,
        ];
        let mut mask = [0.0; 3];
        assert_eq!(logits_to_mask(&logits, 3, 2, &mut mask), 1);
        assert_eq!(mask, [1.0, 0.0, 0.0]);
        assert_eq!(logits_to_mask(&logits, 3, 1, &mut mask), 1);
        assert_eq!(mask, [0.0, 1.0, 0.0]);
        assert_eq!(logits_to_mask(&logits, 3, 0, &mut mask), 1);
        assert_eq!(mask, [0.0, 0.0, 1.0]);
    }

    #[test]
    fn blocks_cover_every_pixel() {
        // Longer than several blocks and not a multiple of the block size.
        let pixels = 3 * ARGMAX_BLOCK + 17;
        let mut logits = vec![0.0f32; 3 * pixels];
        for i in (0..pixels).filter(|i| i % 3 == 0) {
            logits[pixels + i] = 1.0;
        }
        let mut mask = vec![0.0; pixels];
        // Three classes: the blocked path (two take the single-pass one).
        let set = logits_to_mask(&logits, 3, 1, &mut mask);
        assert_eq!(set, pixels.div_ceil(3) as u64);
        for (i, &m) in mask.iter().enumerate() {
            assert_eq!(m, if i % 3 == 0 { 1.0 } else { 0.0 }, "pixel {i}");
        }
    }

    #[test]
    #[should_panic(expected = "expected 2 classes x 3 mask pixels")]
    fn wrong_logits_length_is_refused() {
        logits_to_mask(&[0.0; 5], 2, 1, &mut [0.0; 3]);
    }

    #[test]
    fn mask_identity_resize_only_normalizes() {
        let resampler = MaskResampler::new((2, 3), (2, 3));
        let mask = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0];
        let mut out = [9.0; 6];
        resampler.resize_into(&mask, MaskAffine::new(0.5, 0.5), &mut out);
        assert_eq!(out, [-1.0, 1.0, -1.0, 1.0, 1.0, -1.0]);
    }
}
