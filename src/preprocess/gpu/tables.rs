//! The small tables the kernels read: resize taps, the folded normalization,
//! and the order of the frame kernel's blocks. Taps and normalization come
//! from the CPU reference itself (`src/preprocess/taps.rs`,
//! `src/preprocess/normalize.rs`), so both paths use bit-identical weights.

pub use crate::gpu::kernels::DeviceTap;

/// PyTorch's `F.interpolate(mode="bilinear", align_corners=False)` taps along
/// one axis: the CPU reference's own `linear_taps`, in the kernels' layout, so
/// both paths use bit-identical weights. Built once per frame size.
pub fn linear_taps(input: usize, output: usize, taps: &mut Vec<DeviceTap>) {
    let mut cpu = Vec::with_capacity(output);
    super::super::taps::linear_taps(input, output, &mut cpu);
    taps.clear();
    // Sides are below 2^24 (frames) or MAX_TENSOR_SIDE (tensors): they fit u32.
    taps.extend(cpu.iter().map(|t| DeviceTap {
        first: t.first as u32,
        second: t.second as u32,
        w_first: t.w_first,
        w_second: t.w_second,
    }));
}

/// `(x / 255 - mean) / std` as `x * scale + bias`, folded exactly as the CPU folds it.
pub use super::super::normalize::{ChannelAffine, MaskAffine};

/// Which output row block row `y` of the frame kernel makes: `(true, row)`
/// for a classifier row, `(false, row)` for a segmentation row. The rows of
/// both outputs are interleaved evenly (of block rows `0..y`,
/// `floor(y * cls_h / (seg_h + cls_h))` are classifier rows), so both
/// advance down the frame together. Mirrors `frame_to_tensors` in
/// `kernels/frame_to_tensors.cu`.
pub fn frame_row(y: usize, seg_h: usize, cls_h: usize) -> (bool, usize) {
    let total = (seg_h + cls_h) as u64;
    let cls_before = (y as u64 * cls_h as u64 / total) as usize;
    let cls_through = ((y as u64 + 1) * cls_h as u64 / total) as usize;
    if cls_through > cls_before {
        (true, cls_before)
    } else {
        (false, y - cls_before)
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
    fn frame_rows_cover_every_output_row_once_and_advance_together() {
        for (seg_h, cls_h) in [(640, 224), (97, 45), (1, 1), (3, 700), (640, 0)] {
            let mut seen_seg = vec![false; seg_h];
            let mut seen_cls = vec![false; cls_h];
            for y in 0..seg_h + cls_h {
                let (is_cls, row) = frame_row(y, seg_h, cls_h);
                let seen = if is_cls {
                    &mut seen_cls[row]
                } else {
                    &mut seen_seg[row]
                };
                assert!(
                    !std::mem::replace(seen, true),
                    "{seg_h}+{cls_h}: row {row} twice"
                );
                // Both outputs are at about the same fraction of the frame.
                let fraction = |row: usize, h: usize| (row as f64 + 0.5) / h as f64;
                let here = if is_cls {
                    fraction(row, cls_h)
                } else {
                    fraction(row, seg_h)
                };
                let overall = (y as f64 + 0.5) / (seg_h + cls_h) as f64;
                let tolerance = 0.02 + 1.0 / seg_h.min(cls_h).max(1) as f64;
                assert!((here - overall).abs() < tolerance, "{seg_h}+{cls_h} y {y}");
            }
            assert!(
                seen_seg.iter().chain(&seen_cls).all(|&s| s),
                "{seg_h}+{cls_h}: a row was missed"
            );
        }
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

    /// The frame and mask kernels' arithmetic, step for step as in
    /// `kernels/frame_to_tensors.cu` and `kernels/mask.cu` (Rust, like the
    /// kernels' `__fmul_rn`/`__fadd_rn`, never fuses a multiply-add), run on
    /// the CPU with these tables against the CPU reference. Catches a drift of
    /// the tables or the formula without a GPU; the GPU parity test then
    /// checks the kernels themselves.
    mod kernel_arithmetic {
        use super::*;
        use crate::config::Normalization;
        use crate::frame::{ImageView, PixelLayout, TensorGeometry};
        use crate::preprocess::{Preprocessor, logits_to_mask};

        const SEG: Normalization = Normalization {
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
        };
        const CLS: Normalization = Normalization {
            mean: [0.5, 0.45, 0.4],
            std: [0.25, 0.2, 0.3],
        };

        fn blend(w0: f32, a: f32, w1: f32, b: f32) -> f32 {
            w0 * a + w1 * b
        }

        fn geometries() -> [TensorGeometry; 2] {
            [
                TensorGeometry {
                    seg_hw: (640, 640),
                    seg_classes: 2,
                    cls_hw: (224, 512),
                    cls_classes: 2,
                },
                TensorGeometry {
                    seg_hw: (97, 131),
                    seg_classes: 2,
                    cls_hw: (45, 77),
                    cls_classes: 2,
                },
            ]
        }

        fn noise(len: usize, seed: u64) -> Vec<u8> {
            let mut state = seed;
            (0..len)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (state >> 56) as u8
                })
                .collect()
        }

        /// `resize_pixel` of frame_to_tensors.cu over a whole 3-plane output.
        fn emulate_frame(
            rgb: &[u8],
            (w, h): (usize, usize),
            (oh, ow): (usize, usize),
            norm: &Normalization,
        ) -> Vec<f32> {
            let affine = ChannelAffine::from_normalization(norm);
            let (mut rows, mut cols) = (Vec::new(), Vec::new());
            linear_taps(h, oh, &mut rows);
            linear_taps(w, ow, &mut cols);
            let px =
                |y: u32, x: u32, c: usize| f32::from(rgb[3 * (y as usize * w + x as usize) + c]);
            let mut out = vec![0.0; 3 * oh * ow];
            for (oy, ty) in rows.iter().enumerate() {
                for (ox, tx) in cols.iter().enumerate() {
                    for c in 0..3 {
                        let u = blend(
                            tx.w_first,
                            px(ty.first, tx.first, c),
                            tx.w_second,
                            px(ty.first, tx.second, c),
                        );
                        let l = blend(
                            tx.w_first,
                            px(ty.second, tx.first, c),
                            tx.w_second,
                            px(ty.second, tx.second, c),
                        );
                        let v =
                            blend(ty.w_first, u, ty.w_second, l) * affine.scale[c] + affine.bias[c];
                        out[c * oh * ow + oy * ow + ox] = v;
                    }
                }
            }
            out
        }

        #[test]
        fn frame_kernel_arithmetic_is_the_cpu_reference_bit_for_bit() {
            for geometry in geometries() {
                let mut cpu = Preprocessor::new(SEG, CLS, 0.5, 0.5, geometry);
                for (w, h) in [(1280, 720), (333, 101), (7, 5), (1, 1)] {
                    let rgb = noise(3 * w * h, (w * h) as u64);
                    let frame = ImageView {
                        width: w,
                        height: h,
                        stride: 3 * w,
                        layout: PixelLayout::Rgb,
                        data: &rgb,
                    };
                    let mut seg = vec![f32::NAN; geometry.seg_input_len()];
                    let mut cls = vec![f32::NAN; geometry.cls_input_len()];
                    cpu.frame_to_tensors(frame, &mut seg, &mut cls).unwrap();
                    let seg_k = emulate_frame(&rgb, (w, h), geometry.seg_hw, &SEG);
                    let cls_k = emulate_frame(&rgb, (w, h), geometry.cls_hw, &CLS);
                    for (i, (k, c)) in seg_k.iter().zip(&seg).enumerate() {
                        assert_eq!(
                            k.to_bits(),
                            c.to_bits(),
                            "{w}x{h} seg element {i}: kernel {k} cpu {c}"
                        );
                    }
                    for (i, (k, c)) in cls_k.iter().zip(&cls[..cls_k.len()]).enumerate() {
                        assert_eq!(
                            k.to_bits(),
                            c.to_bits(),
                            "{w}x{h} cls element {i}: kernel {k} cpu {c}"
                        );
                    }
                }
            }
        }

        #[test]
        fn mask_channel_arithmetic_is_the_cpu_reference_bit_for_bit() {
            for geometry in geometries() {
                let cpu = Preprocessor::new(SEG, CLS, 0.5, 0.5, geometry);
                // Logits with many ties: the argmax convention matters too.
                let logits: Vec<f32> = noise(geometry.seg_logits_len(), 7)
                    .iter()
                    .map(|&b| f32::from(b % 5))
                    .collect();
                let mut mask = vec![f32::NAN; geometry.mask_len()];
                logits_to_mask(&logits, 2, 1, &mut mask);
                let mut cls = vec![f32::NAN; geometry.cls_input_len()];
                cpu.mask_to_classifier_channel(&mask, &mut cls);
                // The kernel's channel blocks: argmax at the 4 neighbours
                // (strictly greater wins, so ties go to class 0), then blend.
                let pixels = geometry.mask_len();
                let mask_at = |i: usize| {
                    if logits[pixels + i] > logits[i] {
                        1.0f32
                    } else {
                        0.0
                    }
                };
                let affine = MaskAffine::new(0.5, 0.5);
                let (mut rows, mut cols) = (Vec::new(), Vec::new());
                linear_taps(geometry.seg_hw.0, geometry.cls_hw.0, &mut rows);
                linear_taps(geometry.seg_hw.1, geometry.cls_hw.1, &mut cols);
                let (in_w, plane) = (geometry.seg_hw.1, geometry.cls_hw.0 * geometry.cls_hw.1);
                for (oy, ty) in rows.iter().enumerate() {
                    for (ox, tx) in cols.iter().enumerate() {
                        let (upper, lower) = (ty.first as usize * in_w, ty.second as usize * in_w);
                        let (c0, c1) = (tx.first as usize, tx.second as usize);
                        let top = blend(
                            tx.w_first,
                            mask_at(upper + c0),
                            tx.w_second,
                            mask_at(upper + c1),
                        );
                        let bottom = blend(
                            tx.w_first,
                            mask_at(lower + c0),
                            tx.w_second,
                            mask_at(lower + c1),
                        );
                        let v = blend(ty.w_first, top, ty.w_second, bottom) * affine.scale
                            + affine.bias;
                        let c = cls[3 * plane + oy * geometry.cls_hw.1 + ox];
                        assert_eq!(
                            v.to_bits(),
                            c.to_bits(),
                            "channel pixel ({oy}, {ox}): kernel {v} cpu {c}"
                        );
                    }
                }
            }
        }
    }
}
