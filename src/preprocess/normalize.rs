//! `(x / 255 - mean) / std` folded into one multiply-add per value.

use crate::config::Normalization;

/// Per-channel `x * scale + bias`, equal to `(x / 255 - mean) / std` for a
/// value `x` on the 0..255 scale (to within float rounding, ~1e-7 relative).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelAffine {
    pub scale: [f32; 3],
    pub bias: [f32; 3],
}

impl ChannelAffine {
    pub fn from_normalization(norm: &Normalization) -> Self {
        // Folded in f64 so the only rounding is the final cast.
        let scale = |c: usize| (1.0 / (255.0 * f64::from(norm.std[c]))) as f32;
        let bias = |c: usize| (-f64::from(norm.mean[c]) / f64::from(norm.std[c])) as f32;
        ChannelAffine {
            scale: [scale(0), scale(1), scale(2)],
            bias: [bias(0), bias(1), bias(2)],
        }
    }
}

/// `(m - mean) / std` for the mask channel, whose values are already 0..1.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_form_matches_the_written_formula() {
        let norm = Normalization {
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
        };
        let affine = ChannelAffine::from_normalization(&norm);
        for c in 0..3 {
            for x in [0.0f32, 1.0, 17.0, 128.0, 254.5, 255.0] {
                let written =
                    (f64::from(x) / 255.0 - f64::from(norm.mean[c])) / f64::from(norm.std[c]);
                let folded = f64::from(x * affine.scale[c] + affine.bias[c]);
                assert!(
                    (written - folded).abs() < 1e-6,
                    "channel {c}, x {x}: {written} vs {folded}"
                );
            }
        }
    }

    #[test]
    fn mask_affine_matches_the_written_formula() {
        let affine = MaskAffine::new(0.5, 0.5);
        assert_eq!(0.0 * affine.scale + affine.bias, -1.0);
        assert_eq!(1.0 * affine.scale + affine.bias, 1.0);
    }
}
