//! The resize contract along one axis: for each output coordinate, which two
//! input coordinates it blends and with what weights.
//!
//! This is PyTorch's `F.interpolate(mode="bilinear", align_corners=False)`
//! without antialias (`area_pixel_compute_source_index`,
//! `compute_indices_weights_linear`):
//!
//! ```text
//! scale = in / out
//! src   = max((dst + 0.5) * scale - 0.5, 0)        (half-pixel centres)
//! i0    = floor(src),  i1 = min(i0 + 1, in - 1)
//! value = (1 - lambda) * p[i0] + lambda * p[i1],   lambda = src - i0
//! ```
//!
//! The coordinate arithmetic is PyTorch's, in `f32` with each operation
//! rounded on its own (no fused multiply-add): `scale = f32(in) / f32(out)`,
//! `src = scale * (f32(dst) + 0.5) - 0.5`. Measured against torch 2.x on CPU,
//! this reproduces its sample positions exactly; exact arithmetic would differ
//! by up to ~5e-5 of a pixel at inexact ratios near coordinate 700 (720->224).
//! (Whole tensors from torch's channels-last kernel, which `contract.py`'s
//! permuted frames take, still differ from this formula by up to ~1e-5 after
//! normalization: rounding inside that kernel. Ours stays within ~1e-6.)
//! A GPU kernel must do the same (nvcc contracts `a * b - c` into an FMA by
//! default: use `__fmul_rn`, or take these tables).

/// One output coordinate's two input neighbours and their weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Tap {
    /// Input coordinate at or left of/above the sample point (`i0`).
    pub first: usize,
    /// The next input coordinate, clamped to the last one (`i1`).
    pub second: usize,
    /// Weight of `first`: `1 - lambda`.
    pub w_first: f32,
    /// Weight of `second`: `lambda`.
    pub w_second: f32,
}

/// Fills `taps` with one `Tap` per output coordinate for resizing `input`
/// coordinates to `output`. Reuses the vector's capacity; empty when either
/// size is 0 (there is nothing to sample).
pub(crate) fn linear_taps(input: usize, output: usize, taps: &mut Vec<Tap>) {
    taps.clear();
    if input == 0 || output == 0 {
        return;
    }
    let last = input - 1;
    // `as f32` of a size is exact below 2^24 (frames are refused above that).
    let scale = input as f32 / output as f32;
    taps.extend((0..output).map(|dst| {
        let src = (scale * (dst as f32 + 0.5) - 0.5).max(0.0);
        // `src` is finite and non-negative, so the cast truncates to floor(src).
        // The `min` only guards against rounding pushing `src` past the last pixel.
        let first = (src as usize).min(last);
        // Exact in f32: `first` is within one of `src`.
        let lambda = (src - first as f32).clamp(0.0, 1.0);
        Tap {
            first,
            second: if first < last { first + 1 } else { first },
            w_first: 1.0 - lambda,
            w_second: lambda,
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taps(input: usize, output: usize) -> Vec<Tap> {
        let mut taps = Vec::new();
        linear_taps(input, output, &mut taps);
        taps
    }

    #[test]
    fn identity_picks_each_pixel_with_full_weight() {
        for (i, tap) in taps(7, 7).iter().enumerate() {
            assert_eq!(tap.first, i);
            assert_eq!(tap.w_first, 1.0);
            assert_eq!(tap.w_second, 0.0);
        }
    }

    #[test]
    fn exact_halving_blends_each_pair_equally() {
        for (i, tap) in taps(8, 4).iter().enumerate() {
            assert_eq!((tap.first, tap.second), (2 * i, 2 * i + 1));
            assert_eq!((tap.w_first, tap.w_second), (0.5, 0.5));
        }
    }

    #[test]
    fn doubling_clamps_both_edges() {
        // Known PyTorch values: src = -0.25 (clamped to 0), 0.25, 0.75, 1.25.
        let t = taps(2, 4);
        assert_eq!((t[0].first, t[0].second, t[0].w_second), (0, 1, 0.0));
        assert_eq!((t[1].first, t[1].second, t[1].w_second), (0, 1, 0.25));
        assert_eq!((t[2].first, t[2].second, t[2].w_second), (0, 1, 0.75));
        // Past the last pixel centre: i1 clamps to i0, so the weights do not matter.
        assert_eq!((t[3].first, t[3].second), (1, 1));
    }

    #[test]
    fn single_input_pixel_is_sampled_everywhere() {
        for tap in taps(1, 5) {
            assert_eq!((tap.first, tap.second), (0, 0));
        }
    }

    #[test]
    fn sample_positions_are_pytorch_f32_ones() {
        // Resizing the signal i % 2 from 720 to 224 rows with torch 2.15 on CPU
        // yields lambda itself; it equals this f32 formula on every row, and
        // differs from exact arithmetic on rows such as this one.
        let t = taps(720, 224);
        // Row 214: exact src = 214.5 * 720 / 224 - 0.5 = 688.9464285714...
        assert_eq!(t[214].first, 688);
        let exact = 214.5f64 * 720.0 / 224.0 - 0.5 - 688.0;
        let f32_scale = 720.0f32 / 224.0;
        let f32_src = f32_scale * 214.5 - 0.5;
        assert_eq!(t[214].w_second, f32_src - 688.0);
        assert!(
            (f64::from(t[214].w_second) - exact).abs() > 1e-6,
            "this row should show the f32 rounding"
        );
    }

    #[test]
    fn empty_sizes_give_no_taps() {
        assert!(taps(0, 5).is_empty());
        assert!(taps(5, 0).is_empty());
    }

    #[test]
    fn indices_stay_inside_the_input_for_awkward_ratios() {
        for input in 1..40 {
            for output in 1..40 {
                for tap in taps(input, output) {
                    assert!(
                        tap.first <= tap.second && tap.second < input,
                        "{input}->{output}: {tap:?}"
                    );
                    assert!((0.0..=1.0).contains(&tap.w_second));
                }
            }
        }
    }
}
