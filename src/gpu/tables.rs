//! The small tables the kernels read: resize taps, the folded normalization,
//! and the order of the frame kernel's blocks. Built on the host exactly as
//! the CPU reference builds them (`src/preprocess/taps.rs`,
//! `src/preprocess/normalize.rs`, which keep theirs private to that module),
//! so both paths use bit-identical weights.

use crate::config::Normalization;

/// One output coordinate's two input neighbours and their weights; the
/// layout of `Tap` in `kernels/tensors.cuh`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceTap {
    pub first: u32,
    pub second: u32,
    pub w_first: f32,
    pub w_second: f32,
}
const _: () = assert!(size_of::<DeviceTap>() == 16);

/// PyTorch's `F.interpolate(mode="bilinear", align_corners=False)` taps along
/// one axis, with PyTorch's f32 coordinate arithmetic (each operation rounded
/// on its own): the same formula, in the same order, as the CPU's
/// `linear_taps` in `src/preprocess/taps.rs`. Any change there must be made
/// here too; the GPU parity tests compare the two paths bit for bit.
pub fn linear_taps(input: usize, output: usize, taps: &mut Vec<DeviceTap>) {
    taps.clear();
    if input == 0 || output == 0 {
        return;
    }
    let last = input - 1;
    // `as f32` of a size is exact below 2^24 (frames are refused above that).
    let scale = input as f32 / output as f32;
    taps.extend((0..output).map(|dst| {
        let src = (scale * (dst as f32 + 0.5) - 0.5).max(0.0);
        // Finite and non-negative: the cast truncates to floor(src); the
        // `min` guards against rounding past the last pixel.
        let first = (src as usize).min(last);
        let lambda = (src - first as f32).clamp(0.0, 1.0);
        // Sides are below 2^24 (frames) or MAX_TENSOR_SIDE (tensors): fit u32.
        DeviceTap {
            first: first as u32,
            second: if first < last {
                first as u32 + 1
            } else {
                first as u32
            },
            w_first: 1.0 - lambda,
            w_second: lambda,
        }
    }));
}

/// `(x / 255 - mean) / std` as `x * scale + bias` per channel, folded in f64
/// as the CPU folds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelAffine {
    pub scale: [f32; 3],
    pub bias: [f32; 3],
}

impl ChannelAffine {
    pub fn from_normalization(norm: &Normalization) -> Self {
        let scale = |c: usize| (1.0 / (255.0 * f64::from(norm.std[c]))) as f32;
        let bias = |c: usize| (-f64::from(norm.mean[c]) / f64::from(norm.std[c])) as f32;
        ChannelAffine {
            scale: [scale(0), scale(1), scale(2)],
            bias: [bias(0), bias(1), bias(2)],
        }
    }
}

/// `(m - mean) / std` for the mask channel as `m * scale + bias`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaskAffine {
    pub scale: f32,
    pub bias: f32,
}

impl MaskAffine {
    pub fn new(mean: f32, std: f32) -> Self {
        MaskAffine {
            scale: (1.0 / f64::from(std)) as f32,
            bias: (-f64::from(mean) / f64::from(std)) as f32,
        }
    }
}

/// Schedule entries with this bit set are classifier rows; the rest are
/// segmentation rows (`FrameParams::schedule` in `kernels/tensors.cuh`).
pub const CLASSIFIER_ROW: u32 = 1 << 31;

/// The order in which the frame kernel's blocks take output rows: the rows of
/// both outputs merged by the last frame row each reads (the CPU's row loop
/// order), so both outputs are cut from a frame row while it is in cache.
pub fn row_schedule(seg_rows: &[DeviceTap], cls_rows: &[DeviceTap], schedule: &mut Vec<u32>) {
    schedule.clear();
    let (mut s, mut c) = (0, 0);
    while s < seg_rows.len() || c < cls_rows.len() {
        let seg_first =
            c == cls_rows.len() || (s < seg_rows.len() && seg_rows[s].second <= cls_rows[c].second);
        if seg_first {
            schedule.push(s as u32);
            s += 1;
        } else {
            schedule.push(CLASSIFIER_ROW | c as u32);
            c += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taps(input: usize, output: usize) -> Vec<DeviceTap> {
        let mut taps = Vec::new();
        linear_taps(input, output, &mut taps);
        taps
    }

    #[test]
    fn doubling_clamps_both_edges_like_pytorch() {
        // src = -0.25 (clamped to 0), 0.25, 0.75, 1.25 (past the last centre).
        let t = taps(2, 4);
        assert_eq!((t[0].first, t[0].second, t[0].w_second), (0, 1, 0.0));
        assert_eq!((t[1].first, t[1].second, t[1].w_second), (0, 1, 0.25));
        assert_eq!((t[2].first, t[2].second, t[2].w_second), (0, 1, 0.75));
        assert_eq!((t[3].first, t[3].second), (1, 1));
    }

    #[test]
    fn exact_halving_blends_pairs_equally() {
        for (i, tap) in taps(8, 4).iter().enumerate() {
            assert_eq!((tap.first, tap.second), (2 * i as u32, 2 * i as u32 + 1));
            assert_eq!((tap.w_first, tap.w_second), (0.5, 0.5));
        }
    }

    #[test]
    fn schedule_covers_every_row_once_in_source_order() {
        let (seg, cls) = (taps(720, 640), taps(720, 224));
        let mut schedule = Vec::new();
        row_schedule(&seg, &cls, &mut schedule);
        assert_eq!(schedule.len(), 640 + 224);
        let mut seen_seg = vec![false; 640];
        let mut seen_cls = vec![false; 224];
        let mut last_source = 0;
        for &entry in &schedule {
            let row = (entry & !CLASSIFIER_ROW) as usize;
            let source = if entry & CLASSIFIER_ROW != 0 {
                assert!(!std::mem::replace(&mut seen_cls[row], true));
                cls[row].second
            } else {
                assert!(!std::mem::replace(&mut seen_seg[row], true));
                seg[row].second
            };
            assert!(source >= last_source, "rows out of source order");
            last_source = source;
        }
        assert!(seen_seg.iter().all(|&s| s) && seen_cls.iter().all(|&s| s));
    }

    #[test]
    fn mask_affine_maps_zero_and_one() {
        let affine = MaskAffine::new(0.5, 0.5);
        assert_eq!(
            (
                0.0 * affine.scale + affine.bias,
                1.0 * affine.scale + affine.bias
            ),
            (-1.0, 1.0)
        );
    }
}
