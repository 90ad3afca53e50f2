//! Preprocessing against the contract: a plain float64 implementation written
//! here (the product has one implementation, this is its judge), hand-checked
//! values, OpenCV through python3, and the .npy writer read back by NumPy.
//!
//! Run with `cargo test --release --test integration preprocess:: -- --nocapture` to see the
//! timing of a 1280x720 frame and which Python checks ran.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use sealcheck::config::Normalization;
use sealcheck::frame::{ImageView, PixelLayout, TensorGeometry};
use sealcheck::npy::write_npy_f32;
use sealcheck::preprocess::{PreprocessError, Preprocessor, logits_to_mask};

// ---------------------------------------------------------------------------
// Test inputs
// ---------------------------------------------------------------------------

/// splitmix64: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

const LAYOUTS: [PixelLayout; 4] = [
    PixelLayout::Rgb,
    PixelLayout::Bgr,
    PixelLayout::Rgba,
    PixelLayout::Bgrx,
];

/// Byte offsets of R, G, B in a pixel: written out here independently of the product.
fn rgb_offsets(layout: PixelLayout) -> [usize; 3] {
    match layout {
        PixelLayout::Rgb | PixelLayout::Rgba => [0, 1, 2],
        PixelLayout::Bgr | PixelLayout::Bgrx => [2, 1, 0],
    }
}

/// An owned frame; padding bytes (row tails and alpha/x) are random too, so
/// reading them by mistake shows up.
struct TestFrame {
    width: usize,
    height: usize,
    stride: usize,
    layout: PixelLayout,
    data: Vec<u8>,
}

impl TestFrame {
    fn random(
        rng: &mut Rng,
        width: usize,
        height: usize,
        layout: PixelLayout,
        row_padding: usize,
    ) -> Self {
        let stride = width * layout.bytes_per_pixel() + row_padding;
        let data = (0..stride * height).map(|_| rng.byte()).collect();
        TestFrame {
            width,
            height,
            stride,
            layout,
            data,
        }
    }

    /// A frame whose R, G, B values are `f(y, x, c)`.
    fn from_fn(
        width: usize,
        height: usize,
        layout: PixelLayout,
        f: impl Fn(usize, usize, usize) -> u8,
    ) -> Self {
        let bpp = layout.bytes_per_pixel();
        let stride = width * bpp;
        let mut data = vec![0xEE; stride * height];
        for y in 0..height {
            for x in 0..width {
                for (c, offset) in rgb_offsets(layout).into_iter().enumerate() {
                    data[y * stride + x * bpp + offset] = f(y, x, c);
                }
            }
        }
        TestFrame {
            width,
            height,
            stride,
            layout,
            data,
        }
    }

    fn view(&self) -> ImageView<'_> {
        ImageView {
            width: self.width,
            height: self.height,
            stride: self.stride,
            layout: self.layout,
            data: &self.data,
        }
    }

    /// Channel `c` (0 = R) at row `y`, column `x`.
    fn value(&self, y: usize, x: usize, c: usize) -> f64 {
        let offset =
            y * self.stride + x * self.layout.bytes_per_pixel() + rgb_offsets(self.layout)[c];
        f64::from(self.data[offset])
    }
}

const IMAGENET: Normalization = Normalization {
    mean: [0.485, 0.456, 0.406],
    std: [0.229, 0.224, 0.225],
};
/// Different numbers for the classifier, so mixing the two up fails.
const CLS_NORM: Normalization = Normalization {
    mean: [0.5, 0.4, 0.3],
    std: [0.25, 0.2, 0.3],
};
/// Leaves values as x / 255, for hand-checked numbers.
const UNIT: Normalization = Normalization {
    mean: [0.0; 3],
    std: [1.0; 3],
};
const MASK_MEAN: f32 = 0.3;
const MASK_STD: f32 = 0.45;

fn geometry(seg_hw: (usize, usize), cls_hw: (usize, usize)) -> TensorGeometry {
    TensorGeometry {
        seg_hw,
        seg_classes: 2,
        cls_hw,
        cls_classes: 2,
    }
}

const DEMO: TensorGeometry = TensorGeometry {
    seg_hw: (640, 640),
    seg_classes: 2,
    cls_hw: (224, 512),
    cls_classes: 2,
};

// ---------------------------------------------------------------------------
// The float64 reference: the contract written as plainly as possible
// ---------------------------------------------------------------------------

/// How a reference computes source coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Coordinates {
    /// As PyTorch: `scale = f32(in) / f32(out)`, `src = scale * (dst + 0.5) - 0.5`,
    /// each operation rounded to f32. Part of the contract ("exactly PyTorch").
    Torch,
    /// The same formula in exact (f64) arithmetic, as OpenCV computes it.
    Exact,
}

/// Source coordinate of output coordinate `dst`, clamped at 0.
fn source_coordinate(input: usize, output: usize, dst: usize, coords: Coordinates) -> f64 {
    let src = match coords {
        Coordinates::Torch => {
            let scale = input as f32 / output as f32;
            f64::from(scale * (dst as f32 + 0.5) - 0.5)
        }
        Coordinates::Exact => (dst as f64 + 0.5) * (input as f64 / output as f64) - 0.5,
    };
    src.max(0.0)
}

/// Per output coordinate: i0, i1, lambda.
fn reference_axis(input: usize, output: usize, coords: Coordinates) -> Vec<(usize, usize, f64)> {
    (0..output)
        .map(|dst| {
            let src = source_coordinate(input, output, dst, coords);
            let i0 = (src.floor() as usize).min(input - 1);
            let i1 = (i0 + 1).min(input - 1);
            (i0, i1, src - i0 as f64)
        })
        .collect()
}

/// Bilinear resize of one channel given by `value(y, x)`, row-major output.
fn reference_resize(
    value: impl Fn(usize, usize) -> f64,
    in_hw: (usize, usize),
    out_hw: (usize, usize),
    coords: Coordinates,
) -> Vec<f64> {
    let rows = reference_axis(in_hw.0, out_hw.0, coords);
    let cols = reference_axis(in_hw.1, out_hw.1, coords);
    let mut out = Vec::with_capacity(out_hw.0 * out_hw.1);
    for &(y0, y1, ly) in &rows {
        for &(x0, x1, lx) in &cols {
            let top = (1.0 - lx) * value(y0, x0) + lx * value(y0, x1);
            let bottom = (1.0 - lx) * value(y1, x0) + lx * value(y1, x1);
            out.push((1.0 - ly) * top + ly * bottom);
        }
    }
    out
}

/// 1x3xHxW: the frame resized, /255, normalized.
fn reference_rgb(
    frame: &TestFrame,
    out_hw: (usize, usize),
    norm: &Normalization,
    coords: Coordinates,
) -> Vec<f64> {
    let mut out = Vec::new();
    for c in 0..3 {
        let plane = reference_resize(
            |y, x| frame.value(y, x, c),
            (frame.height, frame.width),
            out_hw,
            coords,
        );
        let (mean, std) = (f64::from(norm.mean[c]), f64::from(norm.std[c]));
        out.extend(plane.into_iter().map(|v| (v / 255.0 - mean) / std));
    }
    out
}

fn reference_mask_channel(mask: &[f32], in_hw: (usize, usize), out_hw: (usize, usize)) -> Vec<f64> {
    let (mean, std) = (f64::from(MASK_MEAN), f64::from(MASK_STD));
    reference_resize(
        |y, x| f64::from(mask[y * in_hw.1 + x]),
        in_hw,
        out_hw,
        Coordinates::Torch,
    )
    .into_iter()
    .map(|m| (m - mean) / std)
    .collect()
}

/// Largest |a - b| and where it is; panics with context above `tolerance`.
fn assert_close(what: &str, actual: &[f32], expected: &[f64], tolerance: f64) -> f64 {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    let (mut worst, mut at) = (0.0f64, 0);
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let diff = (f64::from(a) - e).abs();
        // A NaN anywhere must fail: it becomes the worst.
        if diff.is_nan() || diff > worst {
            worst = diff;
            at = i;
        }
    }
    assert!(
        worst < tolerance,
        "{what}: max abs diff {worst:e} at index {at} (got {}, expected {}) exceeds {tolerance:e}",
        actual[at],
        expected[at]
    );
    worst
}

/// Runs the preprocessor on `frame` with fresh buffers; channel 3 of the
/// classifier input is pre-filled with a sentinel that must survive.
fn run_frame(pre: &mut Preprocessor, frame: &TestFrame) -> (Vec<f32>, Vec<f32>) {
    let g = *pre.geometry();
    let mut seg = vec![f32::NAN; g.seg_input_len()];
    let mut cls = vec![f32::NAN; g.cls_input_len()];
    let plane = g.cls_hw.0 * g.cls_hw.1;
    cls[3 * plane..].fill(-7.0);
    pre.frame_to_tensors(frame.view(), &mut seg, &mut cls)
        .unwrap();
    assert!(
        cls[3 * plane..].iter().all(|&v| v == -7.0),
        "frame_to_tensors wrote into the mask channel"
    );
    (seg, cls)
}

/// Checks both tensors of one frame against the reference; returns the worst diff.
fn check_against_reference(pre: &mut Preprocessor, frame: &TestFrame, what: &str) -> f64 {
    let g = *pre.geometry();
    let (seg, cls) = run_frame(pre, frame);
    let plane = g.cls_hw.0 * g.cls_hw.1;
    let seg_diff = assert_close(
        &format!("{what} seg"),
        &seg,
        &reference_rgb(frame, g.seg_hw, &IMAGENET, Coordinates::Torch),
        1e-4,
    );
    let cls_diff = assert_close(
        &format!("{what} cls rgb"),
        &cls[..3 * plane],
        &reference_rgb(frame, g.cls_hw, &CLS_NORM, Coordinates::Torch),
        1e-4,
    );
    seg_diff.max(cls_diff)
}

fn preprocessor(g: TensorGeometry) -> Preprocessor {
    Preprocessor::new(IMAGENET, CLS_NORM, MASK_MEAN, MASK_STD, g)
}

// ---------------------------------------------------------------------------
// Against the float64 reference
// ---------------------------------------------------------------------------

#[test]
fn odd_frame_sizes_match_the_f64_reference_in_every_layout() {
    let mut rng = Rng(1);
    // Up- and downscaling on each axis, degenerate sizes, the demo size.
    let sizes = [
        (1, 1),
        (3, 2),
        (2, 3),
        (333, 201),
        (1281, 719),
        (1280, 720),
        (7, 900),
        (640, 640),
    ];
    let geometries = [
        geometry((640, 640), (224, 512)),
        geometry((5, 3), (2, 7)),
        geometry((1, 1), (3, 1)),
    ];
    let mut worst = 0.0f64;
    for &(width, height) in &sizes {
        for (li, &layout) in LAYOUTS.iter().enumerate() {
            // Tight and padded strides in turn.
            let padding = [0, 1, 13, 64][(li + width) % 4];
            let frame = TestFrame::random(&mut rng, width, height, layout, padding);
            for g in geometries {
                let mut pre = preprocessor(g);
                let what = format!(
                    "{width}x{height} {layout:?} stride {} -> {g:?}",
                    frame.stride
                );
                worst = worst.max(check_against_reference(&mut pre, &frame, &what));
            }
        }
    }
    println!("odd sizes: worst abs diff vs f64 reference {worst:e}");
}

#[test]
fn random_sizes_and_geometries_match_the_f64_reference() {
    let mut rng = Rng(2);
    let mut worst = 0.0f64;
    for round in 0..300 {
        let (width, height) = (1 + rng.below(90), 1 + rng.below(90));
        let layout = LAYOUTS[rng.below(4)];
        let padding = rng.below(9);
        let frame = TestFrame::random(&mut rng, width, height, layout, padding);
        let g = geometry(
            (1 + rng.below(70), 1 + rng.below(70)),
            (1 + rng.below(70), 1 + rng.below(70)),
        );
        let mut pre = preprocessor(g);
        let what = format!("round {round}: {width}x{height} {layout:?} -> {g:?}");
        worst = worst.max(check_against_reference(&mut pre, &frame, &what));
    }
    println!("random sizes: worst abs diff vs f64 reference {worst:e}");
}

#[test]
fn changing_frame_size_and_layout_rebuilds_the_tables() {
    let mut rng = Rng(3);
    let mut pre = preprocessor(geometry((48, 64), (20, 40)));
    let frames = [
        TestFrame::random(&mut rng, 100, 80, PixelLayout::Rgb, 0),
        TestFrame::random(&mut rng, 31, 17, PixelLayout::Bgrx, 4),
        TestFrame::random(&mut rng, 31, 17, PixelLayout::Bgr, 0),
        TestFrame::random(&mut rng, 100, 80, PixelLayout::Rgba, 2),
        TestFrame::random(&mut rng, 100, 80, PixelLayout::Rgba, 2),
    ];
    for (i, frame) in frames.iter().enumerate() {
        check_against_reference(&mut pre, frame, &format!("frame {i}"));
    }
}

#[test]
fn mask_channel_matches_the_f64_reference() {
    let mut rng = Rng(4);
    for g in [
        DEMO,
        geometry((7, 5), (3, 11)),
        geometry((1, 1), (4, 4)),
        geometry((9, 9), (9, 9)),
    ] {
        let pre = preprocessor(g);
        // A blob plus scattered pixels: sharp edges in both directions.
        let (h, w) = g.seg_hw;
        let mask: Vec<f32> = (0..h * w)
            .map(|i| {
                let (y, x) = (i / w, i % w);
                let blob = y > h / 4 && y < 3 * h / 4 && x > w / 3 && x < 2 * w / 3;
                if blob || rng.below(7) == 0 { 1.0 } else { 0.0 }
            })
            .collect();
        let mut cls = vec![f32::NAN; g.cls_input_len()];
        let plane = g.cls_hw.0 * g.cls_hw.1;
        cls[..3 * plane].fill(5.0);
        pre.mask_to_classifier_channel(&mask, &mut cls);
        assert!(
            cls[..3 * plane].iter().all(|&v| v == 5.0),
            "mask channel spilled into RGB"
        );
        assert_close(
            &format!("mask {g:?}"),
            &cls[3 * plane..],
            &reference_mask_channel(&mask, g.seg_hw, g.cls_hw),
            1e-5,
        );
    }
}

// ---------------------------------------------------------------------------
// Hand-checked values
// ---------------------------------------------------------------------------

/// Runs a `UNIT`-normalized preprocessor (outputs x / 255) and returns the
/// segmentation tensor scaled back to 0..255.
fn unit_seg(frame: &TestFrame, seg_hw: (usize, usize)) -> Vec<f64> {
    let g = geometry(seg_hw, (1, 1));
    let mut pre = Preprocessor::new(UNIT, UNIT, 0.0, 1.0, g);
    let (seg, _) = run_frame(&mut pre, frame);
    seg.into_iter().map(|v| f64::from(v) * 255.0).collect()
}

#[test]
fn identity_resize_reproduces_the_pixels() {
    let mut rng = Rng(5);
    for layout in LAYOUTS {
        let frame = TestFrame::random(&mut rng, 37, 23, layout, 5);
        let seg = unit_seg(&frame, (23, 37));
        // Exactly: each output depends on its own pixel value alone, to the
        // bit (no neighbour leaks in at all), and that value is x / 255.
        let mut output_of_value = [None::<f64>; 256];
        for c in 0..3 {
            for y in 0..23 {
                for x in 0..37 {
                    let got = seg[(c * 23 + y) * 37 + x];
                    let want = frame.value(y, x, c);
                    let seen = output_of_value[want as usize].get_or_insert(got);
                    assert_eq!(
                        got.to_bits(),
                        seen.to_bits(),
                        "{layout:?} c{c} y{y} x{x}: value {want}"
                    );
                    // x / 255 * 255 may differ from x by float rounding only.
                    assert!(
                        (got - want).abs() < 1e-4,
                        "{layout:?} c{c} y{y} x{x}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn preprocessor_can_move_to_its_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<Preprocessor>();
}

#[test]
fn exact_halving_is_the_mean_of_each_2x2_block() {
    let mut rng = Rng(6);
    let frame = TestFrame::random(&mut rng, 16, 10, PixelLayout::Bgrx, 3);
    let seg = unit_seg(&frame, (5, 8));
    for c in 0..3 {
        for y in 0..5 {
            for x in 0..8 {
                let block = frame.value(2 * y, 2 * x, c)
                    + frame.value(2 * y, 2 * x + 1, c)
                    + frame.value(2 * y + 1, 2 * x, c)
                    + frame.value(2 * y + 1, 2 * x + 1, c);
                let got = seg[(c * 5 + y) * 8 + x];
                assert!(
                    (got - block / 4.0).abs() < 1e-4,
                    "c{c} y{y} x{x}: {got} vs {}",
                    block / 4.0
                );
            }
        }
    }
}

#[test]
fn doubling_gives_the_known_pytorch_values() {
    // torch.nn.functional.interpolate(torch.tensor([[[[0., 100.], [200., 40.]]]]),
    //     size=(4, 4), mode="bilinear", align_corners=False)
    let known = [
        [0.0, 25.0, 75.0, 100.0],
        [50.0, 58.75, 76.25, 85.0],
        [150.0, 126.25, 78.75, 55.0],
        [200.0, 160.0, 80.0, 40.0],
    ];
    let pixels = [[0u8, 100], [200, 40]];
    let frame = TestFrame::from_fn(2, 2, PixelLayout::Rgb, |y, x, c| {
        pixels[y][x] / (c as u8 + 1)
    });
    let seg = unit_seg(&frame, (4, 4));
    for y in 0..4 {
        for x in 0..4 {
            let got = seg[y * 4 + x];
            assert!(
                (got - known[y][x]).abs() < 1e-4,
                "y{y} x{x}: {got} vs {}",
                known[y][x]
            );
        }
    }
    // G is the frame halved: the same weights on other values.
    assert!(
        (seg[16 + 5] - 29.375).abs() < 1e-4,
        "G at (1,1): {}",
        seg[16 + 5]
    );
}

#[test]
fn channels_come_out_as_rgb_for_every_layout() {
    for layout in LAYOUTS {
        let frame = TestFrame::from_fn(3, 2, layout, |_, _, c| [10, 20, 30][c]);
        let seg = unit_seg(&frame, (2, 3));
        for c in 0..3 {
            for v in &seg[c * 6..(c + 1) * 6] {
                assert!(
                    (v - [10.0, 20.0, 30.0][c]).abs() < 1e-4,
                    "{layout:?} channel {c}: {v}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Mask from logits
// ---------------------------------------------------------------------------

#[test]
fn logits_to_mask_two_three_and_four_classes_with_ties() {
    let mut rng = Rng(7);
    for classes in [2usize, 3, 4] {
        for mask_class in 0..classes {
            let pixels = 1000;
            // Small integers so ties are frequent.
            let logits: Vec<f32> = (0..classes * pixels).map(|_| rng.below(3) as f32).collect();
            let mut mask = vec![f32::NAN; pixels];
            let set = logits_to_mask(&logits, classes, mask_class, &mut mask);
            let mut expected_set = 0;
            for i in 0..pixels {
                // torch.argmax: first index of the maximum.
                let values: Vec<f32> = (0..classes).map(|c| logits[c * pixels + i]).collect();
                let max = values.iter().cloned().fold(f32::MIN, f32::max);
                let winner = values.iter().position(|&v| v == max).unwrap();
                let want = if winner == mask_class { 1.0 } else { 0.0 };
                expected_set += (winner == mask_class) as u64;
                assert_eq!(
                    mask[i], want,
                    "C={classes} class {mask_class} pixel {i}: logits {values:?}"
                );
            }
            assert_eq!(set, expected_set, "C={classes} class {mask_class}");
        }
    }
}

#[test]
fn logits_to_mask_on_demo_geometry_counts_the_seal() {
    let pixels = DEMO.mask_len();
    let mut logits = vec![0.0f32; DEMO.seg_logits_len()];
    // Seal (class 1) in a 100x200 rectangle; one tie inside it goes to class 0.
    for y in 100..200 {
        for x in 50..250 {
            logits[pixels + y * 640 + x] = 3.0;
        }
    }
    logits[150 * 640 + 60] = 3.0;
    let mut mask = vec![0.0; pixels];
    assert_eq!(logits_to_mask(&logits, 2, 1, &mut mask), 100 * 200 - 1);
    assert_eq!(mask[150 * 640 + 60], 0.0);
    assert_eq!(mask[150 * 640 + 61], 1.0);
}

// ---------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------

#[test]
fn bad_frames_and_buffers_are_refused_with_their_numbers() {
    let g = geometry((4, 4), (2, 2));
    let mut pre = preprocessor(g);
    let data = [0u8; 100];
    let (mut seg, mut cls) = (vec![0.0; g.seg_input_len()], vec![0.0; g.cls_input_len()]);
    let view = |width, height, stride, len| ImageView {
        width,
        height,
        stride,
        layout: PixelLayout::Rgba,
        data: &data[..len],
    };

    let err = pre
        .frame_to_tensors(view(0, 3, 12, 100), &mut seg, &mut cls)
        .unwrap_err();
    assert_eq!(
        err,
        PreprocessError::EmptyFrame {
            width: 0,
            height: 3
        }
    );

    let err = pre
        .frame_to_tensors(view(3, 3, 11, 100), &mut seg, &mut cls)
        .unwrap_err();
    assert_eq!(
        err,
        PreprocessError::StrideTooSmall {
            stride: 11,
            width: 3,
            layout: PixelLayout::Rgba,
            row_bytes: 12
        }
    );
    assert!(
        err.to_string().contains("stride 11") && err.to_string().contains("12 bytes"),
        "{err}"
    );

    let err = pre
        .frame_to_tensors(view(3, 3, 16, 43), &mut seg, &mut cls)
        .unwrap_err();
    assert_eq!(
        err,
        PreprocessError::DataTooShort {
            len: 43,
            width: 3,
            height: 3,
            stride: 16,
            needed: 44
        }
    );
    assert!(
        err.to_string().contains("43 bytes") && err.to_string().contains("44"),
        "{err}"
    );
    // Exactly enough (no padding after the last row) is accepted.
    pre.frame_to_tensors(view(3, 3, 16, 44), &mut seg, &mut cls)
        .unwrap();

    let err = pre
        .frame_to_tensors(view(3, 3, 16, 44), &mut seg[..47], &mut cls)
        .unwrap_err();
    assert_eq!(
        err,
        PreprocessError::BufferLength {
            buffer: "segmentation input",
            len: 47,
            expected: 48
        }
    );
    let mut long_cls = vec![0.0; 17];
    let err = pre
        .frame_to_tensors(view(3, 3, 16, 44), &mut seg, &mut long_cls)
        .unwrap_err();
    assert_eq!(
        err,
        PreprocessError::BufferLength {
            buffer: "classifier input",
            len: 17,
            expected: 16
        }
    );
    assert!(
        err.to_string().contains("17 floats") && err.to_string().contains("needs 16"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// Timing (printed; asserts nothing about speed)
// ---------------------------------------------------------------------------

#[test]
fn timing_of_a_1280x720_frame() {
    if cfg!(debug_assertions) {
        common::skipped(format_args!(
            "timing is only meaningful in a release build (--release)"
        ));
        return;
    }
    let mut rng = Rng(8);
    let frame = TestFrame::random(&mut rng, 1280, 720, PixelLayout::Rgb, 0);
    let mut pre = preprocessor(DEMO);
    let mut seg = vec![0.0; DEMO.seg_input_len()];
    let mut cls = vec![0.0; DEMO.cls_input_len()];
    let logits: Vec<f32> = (0..DEMO.seg_logits_len())
        .map(|_| rng.below(100) as f32)
        .collect();
    let mut mask = vec![0.0; DEMO.mask_len()];
    pre.frame_to_tensors(frame.view(), &mut seg, &mut cls)
        .unwrap();

    let runs = 30;
    let mut best = [f64::MAX; 3];
    let mut total = [0.0; 3];
    for _ in 0..runs {
        let t0 = Instant::now();
        pre.frame_to_tensors(frame.view(), &mut seg, &mut cls)
            .unwrap();
        let t1 = Instant::now();
        std::hint::black_box(logits_to_mask(&logits, 2, 1, &mut mask));
        let t2 = Instant::now();
        pre.mask_to_classifier_channel(&mask, &mut cls);
        let t3 = Instant::now();
        for (i, d) in [t1 - t0, t2 - t1, t3 - t2].into_iter().enumerate() {
            let ms = d.as_secs_f64() * 1e3;
            best[i] = best[i].min(ms);
            total[i] += ms;
        }
    }
    std::hint::black_box((&seg, &cls));
    let names = [
        "frame_to_tensors 1280x720 RGB -> 640x640 + 224x512",
        "logits_to_mask 2x640x640",
        "mask_to_classifier_channel",
    ];
    for i in 0..3 {
        println!(
            "timing: {}: best {:.3} ms, mean {:.3} ms over {runs} runs",
            names[i],
            best[i],
            total[i] / runs as f64
        );
    }
}

// ---------------------------------------------------------------------------
// Python: OpenCV as an independent reference, NumPy reading our .npy files
// ---------------------------------------------------------------------------

/// Ok when `python3` can import `modules`; else the reason to print.
fn python_with(modules: &str) -> Result<(), String> {
    match Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "python3 cannot import {modules}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("python3 not found ({e})")),
    }
}

fn run_python(script: &str, args: &[&Path]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python3 failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Reads a `<f4` C-order .npy file: (shape, data). Enough for files NumPy writes.
fn read_npy_f32(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}", path.display());
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).unwrap();
    assert!(
        header.contains("'descr': '<f4'") && header.contains("'fortran_order': False"),
        "{header}"
    );
    let dims = &header[header.find("'shape': (").unwrap() + 10..];
    let dims = &dims[..dims.find(')').unwrap()];
    let shape: Vec<usize> = dims
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().unwrap())
        .collect();
    let data: Vec<f32> = bytes[start + header_len..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(data.len(), shape.iter().product::<usize>());
    (shape, data)
}

const CV2_RESIZE: &str = r#"
import sys, numpy as np, cv2
frame = np.load(sys.argv[1])                      # H x W x 3, float32, R G B
out_h, out_w = int(sys.argv[3]), int(sys.argv[4])
mean = np.array([0.485, 0.456, 0.406], np.float64)
std = np.array([0.229, 0.224, 0.225], np.float64)
resized = cv2.resize(frame, (out_w, out_h), interpolation=cv2.INTER_LINEAR)
resized = resized.reshape(out_h, out_w, 3).astype(np.float64)
chw = ((resized / 255.0 - mean) / std).transpose(2, 0, 1)
np.save(sys.argv[2], np.ascontiguousarray(chw, dtype="<f4"))
"#;

#[test]
fn opencv_float_resize_agrees_for_down_and_upscaling() {
    if let Err(reason) = python_with("numpy, cv2") {
        common::skipped(format_args!("{reason}"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(9);
    // (frame w, h) -> (out h, w): exact halving (OpenCV switches to INTER_AREA,
    // the same numbers), odd ratios down and up, mixed, the demo sizes.
    let cases = [
        ((64, 48), (24, 32)),
        ((333, 201), (100, 150)),
        ((51, 37), (100, 160)),
        ((200, 30), (90, 50)),
        ((3, 2), (7, 5)),
        ((1280, 720), (640, 640)),
        ((1280, 720), (224, 512)),
        ((1281, 719), (224, 512)),
    ];
    for ((width, height), out_hw) in cases {
        let frame = TestFrame::random(&mut rng, width, height, PixelLayout::Bgr, 7);
        let hwc: Vec<f32> = (0..height * width * 3)
            .map(|i| frame.value(i / 3 / width, i / 3 % width, i % 3) as f32)
            .collect();
        let (input, output) = (dir.path().join("frame.npy"), dir.path().join("cv2.npy"));
        write_npy_f32(&input, &[height, width, 3], &hwc).unwrap();
        let (h, w) = (out_hw.0.to_string(), out_hw.1.to_string());
        run_python(CV2_RESIZE, &[&input, &output, Path::new(&h), Path::new(&w)]);
        let (shape, cv2) = read_npy_f32(&output);
        assert_eq!(shape, [3, out_hw.0, out_hw.1]);

        let g = geometry(out_hw, (1, 1));
        let mut pre = preprocessor(g);
        let (seg, _) = run_frame(&mut pre, &frame);
        let what = format!("{width}x{height} -> {out_hw:?}");
        // OpenCV against the contract's formula in exact arithmetic: this is
        // what shows that INTER_LINEAR on floats is F.interpolate without
        // antialias, downscaling included.
        let exact = reference_rgb(&frame, out_hw, &IMAGENET, Coordinates::Exact);
        let theirs = assert_close(
            &format!("{what}: OpenCV vs exact-coordinate contract"),
            &cv2,
            &exact,
            1e-4,
        );
        // Ours against OpenCV: the two differ only by PyTorch's f32 sample
        // positions. The interpolant moves at most 255 per pixel of shift, so
        // the bound is the largest shift on each axis, over 255 * min(std).
        let shift = |input, output| {
            (0..output)
                .map(|dst| {
                    let torch = source_coordinate(input, output, dst, Coordinates::Torch);
                    (torch - source_coordinate(input, output, dst, Coordinates::Exact)).abs()
                })
                .fold(0.0, f64::max)
        };
        let bound = (shift(height, out_hw.0) + shift(width, out_hw.1)) / 0.224 + 1e-5;
        let cv2_f64: Vec<f64> = cv2.iter().map(|&v| f64::from(v)).collect();
        let ours = assert_close(
            &format!("{what}: ours vs OpenCV"),
            &seg,
            &cv2_f64,
            bound.max(1e-4),
        );
        println!(
            "opencv {what}: cv2 vs exact contract {theirs:e}; ours vs cv2 {ours:e} (f32-coordinate bound {bound:e})"
        );
    }
}

#[test]
fn numpy_reads_what_write_npy_f32_writes() {
    if let Err(reason) = python_with("numpy") {
        common::skipped(format_args!("python3 with numpy not found ({reason})"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let shapes: [&[usize]; 5] = [
        &[1, 3, 5, 7],
        &[11],
        &[],
        &[2, 0, 3],
        &[4, 1, 1, 1, 1, 1, 1, 2],
    ];
    for shape in shapes {
        let len: usize = shape.iter().product();
        let data: Vec<f32> = (0..len).map(|i| i as f32 * 0.37 - 3.0).collect();
        let path = dir.path().join("t.npy");
        write_npy_f32(&path, shape, &data).unwrap();
        // NumPy checks shape, dtype and values, and that its own header is byte-identical.
        let script = r#"
import sys, io, numpy as np
a = np.load(sys.argv[1])
shape = tuple(int(d) for d in sys.argv[2].split(",") if d)
assert a.shape == shape, (a.shape, shape)
assert a.dtype == np.dtype("<f4") and a.flags["C_CONTIGUOUS"]
expect = (np.arange(a.size, dtype=np.float32) * np.float32(0.37) - np.float32(3.0)).reshape(shape)
assert np.array_equal(a, expect), (a, expect)
ours = open(sys.argv[1], "rb").read()
buf = io.BytesIO(); np.save(buf, expect)
assert ours == buf.getvalue(), "file differs from np.save"
print("ok", a.shape)
"#;
        let dims = shape
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let printed = run_python(script, &[&path, Path::new(&dims)]);
        assert!(printed.starts_with("ok"), "{printed}");
    }
}

const TORCH_CONTRACT: &str = r#"
import sys, os, numpy as np, torch
import torch.nn.functional as F
torch.set_num_threads(1)
folder, cases = sys.argv[1], int(sys.argv[2])
seg_mean, seg_std = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1), torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
cls_mean, cls_std = torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1), torch.tensor([0.25, 0.2, 0.3]).view(1, 3, 1, 1)
mask_mean, mask_std, mask_class = float(sys.argv[3]), float(sys.argv[4]), 1
def resize(x, hw):
    return F.interpolate(x, size=hw, mode="bilinear", align_corners=False)
for i in range(cases):
    p = lambda name: os.path.join(folder, f"{i}_{name}.npy")
    frame = torch.from_numpy(np.load(p("frame"))).permute(2, 0, 1)[None]      # 1x3xHxW, 0..255
    logits = torch.from_numpy(np.load(p("logits")))                          # 1xCxHsxWs
    hs, ws, hc, wc = (int(v) for v in open(os.path.join(folder, f"{i}_hw.txt")).read().split())
    seg = (resize(frame, (hs, ws)) / 255.0 - seg_mean) / seg_std
    mask = (logits.argmax(dim=1) == mask_class).to(torch.float32)            # 1xHsxWs
    rgb = (resize(frame, (hc, wc)) / 255.0 - cls_mean) / cls_std
    m = (resize(mask[:, None], (hc, wc)) - mask_mean) / mask_std
    cls = torch.cat([rgb, m], dim=1)
    for name, t in (("seg", seg), ("mask", mask), ("cls", cls)):
        np.save(p("torch_" + name), np.ascontiguousarray(t.numpy(), dtype="<f4"))
print("torch", torch.__version__)
"#;

#[test]
fn pytorch_contract_agrees_end_to_end() {
    if let Err(reason) = python_with("numpy, torch") {
        common::skipped(format_args!("{reason}"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(10);
    // Demo sizes, an inexact-ratio frame, upscaling, three classes.
    let cases = [
        ((1280, 720), DEMO, 2),
        ((1281, 719), DEMO, 2),
        ((97, 61), geometry((128, 160), (50, 120)), 3),
        ((333, 201), geometry((201, 333), (77, 31)), 2),
    ];
    let mut prepared = Vec::new();
    for (i, &((width, height), g, classes)) in cases.iter().enumerate() {
        let frame = TestFrame::random(&mut rng, width, height, LAYOUTS[i % 4], 3);
        let hwc: Vec<f32> = (0..height * width * 3)
            .map(|k| frame.value(k / 3 / width, k / 3 % width, k % 3) as f32)
            .collect();
        write_npy_f32(
            &dir.path().join(format!("{i}_frame.npy")),
            &[height, width, 3],
            &hwc,
        )
        .unwrap();
        // Small integers: many ties for argmax to settle.
        let logits: Vec<f32> = (0..classes * g.mask_len())
            .map(|_| rng.below(3) as f32)
            .collect();
        write_npy_f32(
            &dir.path().join(format!("{i}_logits.npy")),
            &[1, classes, g.seg_hw.0, g.seg_hw.1],
            &logits,
        )
        .unwrap();
        let hw = format!(
            "{} {} {} {}",
            g.seg_hw.0, g.seg_hw.1, g.cls_hw.0, g.cls_hw.1
        );
        std::fs::write(dir.path().join(format!("{i}_hw.txt")), hw).unwrap();
        prepared.push((frame, logits));
    }
    let count = cases.len().to_string();
    let (mean, std) = (MASK_MEAN.to_string(), MASK_STD.to_string());
    let printed = run_python(
        TORCH_CONTRACT,
        &[
            dir.path(),
            Path::new(&count),
            Path::new(&mean),
            Path::new(&std),
        ],
    );

    for (i, (&(_, g, classes), (frame, logits))) in cases.iter().zip(&prepared).enumerate() {
        let mut pre = preprocessor(g);
        let (seg, mut cls) = run_frame(&mut pre, frame);
        let mut mask = vec![f32::NAN; g.mask_len()];
        let set = logits_to_mask(logits, classes, 1, &mut mask);
        pre.mask_to_classifier_channel(&mask, &mut cls);

        let load = |name: &str| read_npy_f32(&dir.path().join(format!("{i}_torch_{name}.npy")));
        let what = format!(
            "case {i} ({}x{} {:?} -> {g:?})",
            frame.width, frame.height, frame.layout
        );
        let (torch_mask_shape, torch_mask) = load("mask");
        assert_eq!(torch_mask_shape, [1, g.seg_hw.0, g.seg_hw.1]);
        assert_eq!(mask, torch_mask, "{what}: mask differs from torch.argmax");
        assert_eq!(
            set,
            torch_mask.iter().filter(|&&m| m == 1.0).count() as u64,
            "{what}: mask count"
        );
        let to_f64 = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<_>>();
        let (seg_shape, torch_seg) = load("seg");
        assert_eq!(seg_shape, [1, 3, g.seg_hw.0, g.seg_hw.1]);
        // Torch itself against the float64 contract (with its own f32 sample positions).
        let reference = reference_rgb(frame, g.seg_hw, &IMAGENET, Coordinates::Torch);
        let torch_diff = assert_close(
            &format!("{what}: torch seg vs f64 contract"),
            &torch_seg,
            &reference,
            1e-4,
        );
        let seg_diff = assert_close(
            &format!("{what}: seg vs torch"),
            &seg,
            &to_f64(torch_seg),
            1e-4,
        );
        let (cls_shape, torch_cls) = load("cls");
        assert_eq!(cls_shape, [1, 4, g.cls_hw.0, g.cls_hw.1]);
        let cls_diff = assert_close(
            &format!("{what}: cls vs torch"),
            &cls,
            &to_f64(torch_cls),
            1e-4,
        );
        println!(
            "{} {what}: ours vs torch: seg {seg_diff:e}, cls {cls_diff:e}, mask exact ({set} set); torch seg vs f64 contract {torch_diff:e}",
            printed.trim()
        );
    }
}
