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
//! The coordinates are computed in `f64` and only the weights rounded to
//! `f32`, so the weights are the formula's to within 6e-8. PyTorch does this
//! arithmetic in `f32`, which near coordinate 1000 rounds `src` by up to
//! ~6e-5 of a pixel (inexact ratios only; the demo's 1280->640, 720->640 and
//! 1280->512 are exact in both). A GPU kernel should take these tables, or
//! compute `src` in `f64`, to agree with this reference to ~1e-6.

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
    let scale = input as f64 / output as f64;
    taps.extend((0..output).map(|dst| {
        let src = ((dst as f64 + 0.5) * scale - 0.5).max(0.0);
        // `src` is finite and non-negative, so the cast truncates to floor(src).
        // The `min` only guards against rounding pushing `src` past the last pixel.
        let first = (src as usize).min(last);
        let lambda = (src - first as f64).clamp(0.0, 1.0);
        Tap {
            first,
            second: if first < last { first + 1 } else { first },
            w_first: (1.0 - lambda) as f32,
            w_second: lambda as f32,
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
    fn empty_sizes_give_no_taps() {
        assert!(taps(0, 5).is_empty());
        assert!(taps(5, 0).is_empty());
    }

    #[test]
    fn indices_stay_inside_the_input_for_awkward_ratios() {
        for input in 1..40 {
            for output in 1..40 {
                for tap in taps(input, output) {
                    assert!(tap.first <= tap.second && tap.second < input, "{input}->{output}: {tap:?}");
                    assert!((0.0..=1.0).contains(&tap.w_second));
                }
            }
        }
    }
}
