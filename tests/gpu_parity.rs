//! The CUDA kernels against the CPU reference (`sealcheck::preprocess`), on
//! random frames of odd sizes, every pixel layout, padded strides, both
//! output element types, random logits with ties and NaNs, and real
//! photographs (PPM files in `$SEALCHECK_PARITY_IMAGES`, when set).
//!
//! Tolerances: f32 outputs within 1e-5 of the CPU (they are computed with the
//! same taps and the same rounding, so 0 is expected), f16 within 2e-3, masks
//! and pixel counts identical. Device outputs are poisoned (NaN) and host
//! outputs filled with NaN before every run, so an unwritten element fails.
//!
//! A cavity layout's crops (issue 38): the demo machine's frames
//! (`samples/demo_cavities`, `config/demo-cavities.toml`), each cavity cut
//! on the GPU from the frame uploaded once (`enqueue_frame_crop_at`, then
//! `enqueue_staged_crop_at`), against the CPU preprocessing of the same
//! crops (`ImageView::crop`) within the f32 tolerance; and the whole device
//! path (ONNX Runtime CUDA, each cycle one batch, `run_crops`) against the
//! CPU host path (CPU preprocessing of each crop + ONNX Runtime CPU):
//! the same verdict and reason for every cavity, classifier logits within
//! 1e-3 relative and the mask's pixel count within 1e-3 of the mask, as
//! `tests/parity.rs` holds the device path. Where ONNX Runtime or its CUDA
//! provider is missing, that case says `skipped`.
//!
//! Own harness (`harness = false`): with no CUDA driver or device it prints
//! `SKIPPED: no CUDA device` and counts every case as skipped, not passed.
//! Run on a GPU machine: `target/release/deps/gpu_parity-<hash>` (built by
//! `cargo test --release --features cuda --no-run`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;

use sealcheck::config::{
    BackendChoice, CavityLayout, CavityRect, ComputeDevice, Config, Normalization,
};
use sealcheck::decision::decide;
use sealcheck::frame::{FrameSlot, FrameWork, ImageView, PixelLayout, TensorGeometry};
use sealcheck::frame_bytes::HostPlacement;
use sealcheck::gpu::{GpuContext, GpuError, TensorElement};
use sealcheck::infer::device_stage::{DevicePlan, open_path, run_crops};
use sealcheck::infer::infer_frame;
use sealcheck::infer::onnxruntime::OrtBackend;
use sealcheck::preprocess::gpu::{FrameTransfer, GpuOptions, GpuPreprocessor};
use sealcheck::preprocess::{FramePreprocessError, Preprocessor, logits_to_mask};

const F32_TOLERANCE: f32 = 1e-5;
const F16_TOLERANCE: f32 = 2e-3;

const SEG_NORM: Normalization = Normalization {
    mean: [0.485, 0.456, 0.406],
    std: [0.229, 0.224, 0.225],
};
const CLS_NORM: Normalization = Normalization {
    mean: [0.5, 0.45, 0.4],
    std: [0.25, 0.2, 0.3],
};
const MASK_MEAN: f32 = 0.5;
const MASK_STD: f32 = 0.5;

const LAYOUTS: [PixelLayout; 4] = [
    PixelLayout::Rgb,
    PixelLayout::Bgr,
    PixelLayout::Rgba,
    PixelLayout::Bgrx,
];

/// The demo models' geometry, and an odd one (sides not multiples of 4,
/// 3 classes) that exercises the kernels' edge paths.
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
            seg_classes: 3,
            cls_hw: (45, 77),
            cls_classes: 2,
        },
    ]
}

type CaseResult = Result<String, String>;

struct Case {
    name: &'static str,
    run: fn(&Arc<GpuContext>) -> CaseResult,
}

fn main() {
    let cases = [
        Case {
            name: "frame_f32_matches_cpu_on_random_frames",
            run: frame_f32_matches_cpu,
        },
        Case {
            name: "frame_f16_matches_cpu_on_random_frames",
            run: frame_f16_matches_cpu,
        },
        Case {
            name: "frame_mapped_transfer_matches_cpu",
            run: frame_mapped_matches_cpu,
        },
        Case {
            name: "frame_queue_of_frames_and_size_change",
            run: frame_queue_and_size_change,
        },
        Case {
            name: "frame_photographs_match_cpu",
            run: photographs_match_cpu,
        },
        Case {
            name: "mask_f32_matches_cpu_with_ties_and_nans",
            run: mask_f32_matches_cpu,
        },
        Case {
            name: "mask_f16_matches_cpu",
            run: mask_f16_matches_cpu,
        },
        Case {
            name: "cavity_crops_match_cpu_on_the_demo_machine",
            run: cavity_crops_match_cpu,
        },
        Case {
            name: "cavity_verdicts_device_path_match_cpu_host_path",
            run: cavity_verdicts_match_host_path,
        },
        Case {
            name: "wrong_inputs_are_refused",
            run: wrong_inputs_are_refused,
        },
        Case {
            name: "no_release_failed",
            run: no_release_failed,
        },
    ];
    let gpu = match GpuContext::open(0) {
        Ok(gpu) => gpu,
        Err(e @ (GpuError::NoDriver | GpuError::NoDevice { .. })) => {
            println!("SKIPPED: no CUDA device ({e})");
            for case in &cases {
                println!("test {} ... skipped", case.name);
            }
            println!("\ngpu_parity: 0 passed, 0 failed, {} skipped", cases.len());
            return;
        }
        Err(e) => {
            println!("gpu_parity: opening CUDA device 0 failed: {e}");
            println!("\ngpu_parity: 0 passed, {} failed", cases.len());
            std::process::exit(1);
        }
    };
    println!(
        "device 0: {} (compute capability {:?})",
        gpu.name(),
        gpu.compute_capability()
    );
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for case in &cases {
        if !filter.is_empty() && !filter.iter().any(|f| case.name.contains(f.as_str())) {
            continue;
        }
        match catch_unwind(AssertUnwindSafe(|| (case.run)(&gpu))) {
            Ok(Ok(detail)) if detail.starts_with("skipped") => {
                skipped += 1;
                println!("test {} ... {detail}", case.name);
            }
            Ok(Ok(detail)) => {
                passed += 1;
                println!("test {} ... ok ({detail})", case.name);
            }
            Ok(Err(why)) => {
                failed += 1;
                println!("test {} ... FAILED: {why}", case.name);
            }
            Err(_) => {
                failed += 1;
                println!("test {} ... FAILED (panicked)", case.name);
            }
        }
    }
    println!("\ngpu_parity: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------- cases

fn frame_f32_matches_cpu(gpu: &Arc<GpuContext>) -> CaseResult {
    let sizes = [
        (1280, 720),
        (1920, 1080),
        (641, 479),
        (333, 1001),
        (37, 23),
        (3, 2),
        (1, 1),
    ];
    let mut rng = Rng(0x5eed_0001);
    let mut worst = 0.0f32;
    let mut runs = 0;
    for geometry in geometries() {
        let mut cpu = cpu_preprocessor(geometry);
        let mut gpu_pre = gpu_preprocessor(gpu, geometry, GpuOptions::default())?;
        for &(w, h) in &sizes {
            for layout in LAYOUTS {
                let frame = random_frame(&mut rng, w, h, layout);
                let view = frame.view();
                let diff = compare_frame_f32(&mut cpu, &mut gpu_pre, view).map_err(|e| {
                    format!(
                        "{w}x{h} {layout:?} stride {} {:?}: {e}",
                        frame.stride, geometry.seg_hw
                    )
                })?;
                worst = worst.max(diff);
                runs += 1;
            }
        }
    }
    Ok(format!("{runs} frames, max |gpu - cpu| = {worst:e}"))
}

fn frame_f16_matches_cpu(gpu: &Arc<GpuContext>) -> CaseResult {
    let sizes = [(1280, 720), (1920, 1080), (641, 479), (37, 23)];
    let mut rng = Rng(0x5eed_0002);
    let mut worst = 0.0f32;
    let mut runs = 0;
    for geometry in geometries() {
        let mut cpu = cpu_preprocessor(geometry);
        let options = GpuOptions {
            input_element: TensorElement::F16,
            ..GpuOptions::default()
        };
        let mut gpu_pre = gpu_preprocessor(gpu, geometry, options)?;
        let (mut seg, mut cls) = cpu_buffers(&geometry);
        let mut seg_h = vec![0u16; geometry.seg_input_len()];
        let mut cls_h = vec![0u16; geometry.cls_input_len()];
        let rgb = 3 * geometry.cls_hw.0 * geometry.cls_hw.1;
        for &(w, h) in &sizes {
            for layout in LAYOUTS {
                let frame = random_frame(&mut rng, w, h, layout);
                let context = format!("{w}x{h} {layout:?} {:?}", geometry.seg_hw);
                cpu.frame_to_tensors(frame.view(), &mut seg, &mut cls)
                    .map_err(|e| format!("{context}: cpu: {e}"))?;
                gpu_pre.poison_outputs().map_err(|e| e.to_string())?;
                gpu_pre
                    .enqueue_frame(frame.view())
                    .map_err(|e| format!("{context}: {e}"))?;
                gpu_pre
                    .download_seg_input(&mut seg_h)
                    .map_err(|e| e.to_string())?;
                gpu_pre
                    .download_cls_input(&mut cls_h)
                    .map_err(|e| e.to_string())?;
                let seg_gpu: Vec<f32> = seg_h.iter().map(|&b| f16_to_f32(b)).collect();
                let cls_gpu: Vec<f32> = cls_h[..rgb].iter().map(|&b| f16_to_f32(b)).collect();
                worst = worst.max(
                    max_abs_diff(&seg_gpu, &seg, F16_TOLERANCE)
                        .map_err(|e| format!("{context} seg: {e}"))?,
                );
                worst = worst.max(
                    max_abs_diff(&cls_gpu, &cls[..rgb], F16_TOLERANCE)
                        .map_err(|e| format!("{context} cls: {e}"))?,
                );
                runs += 1;
            }
        }
    }
    Ok(format!(
        "{runs} frames, max |gpu f16 - cpu f32| = {worst:e}"
    ))
}

fn frame_mapped_matches_cpu(gpu: &Arc<GpuContext>) -> CaseResult {
    let geometry = geometries()[0];
    let mut rng = Rng(0x5eed_0003);
    let mut cpu = cpu_preprocessor(geometry);
    let options = GpuOptions {
        frame_transfer: FrameTransfer::Mapped,
        ..GpuOptions::default()
    };
    let mut gpu_pre = gpu_preprocessor(gpu, geometry, options)?;
    let mut worst = 0.0f32;
    for (w, h) in [(1280, 720), (641, 479)] {
        for layout in LAYOUTS {
            let frame = random_frame(&mut rng, w, h, layout);
            worst = worst.max(
                compare_frame_f32(&mut cpu, &mut gpu_pre, frame.view())
                    .map_err(|e| format!("{w}x{h} {layout:?}: {e}"))?,
            );
        }
    }
    Ok(format!(
        "8 frames read in place from mapped host memory, max diff {worst:e}"
    ))
}

/// Several frames queued before any is read back (the slot pool must not
/// overwrite a frame the GPU has not read yet), then a caps change.
fn frame_queue_and_size_change(gpu: &Arc<GpuContext>) -> CaseResult {
    let geometry = geometries()[0];
    let mut rng = Rng(0x5eed_0004);
    let mut cpu = cpu_preprocessor(geometry);
    let options = GpuOptions {
        frame_slots: 2,
        max_frame_bytes: 64,
        ..GpuOptions::default()
    };
    let mut gpu_pre = gpu_preprocessor(gpu, geometry, options)?;
    let frames: Vec<TestFrame> = (0..5)
        .map(|_| random_frame(&mut rng, 1280, 720, PixelLayout::Bgrx))
        .collect();
    gpu_pre.poison_outputs().map_err(|e| e.to_string())?;
    for frame in &frames {
        gpu_pre
            .enqueue_frame(frame.view())
            .map_err(|e| e.to_string())?;
    }
    let (mut seg, mut cls) = cpu_buffers(&geometry);
    let (mut seg_gpu, mut cls_gpu) = cpu_buffers(&geometry);
    let last = frames.last().ok_or("no frames")?;
    cpu.frame_to_tensors(last.view(), &mut seg, &mut cls)
        .map_err(|e| e.to_string())?;
    gpu_pre
        .download_seg_input(&mut seg_gpu)
        .map_err(|e| e.to_string())?;
    gpu_pre
        .download_cls_input(&mut cls_gpu)
        .map_err(|e| e.to_string())?;
    let rgb = 3 * geometry.cls_hw.0 * geometry.cls_hw.1;
    let mut worst = max_abs_diff(&seg_gpu, &seg, F32_TOLERANCE)
        .map_err(|e| format!("queued frames, seg: {e}"))?;
    worst = worst.max(
        max_abs_diff(&cls_gpu[..rgb], &cls[..rgb], F32_TOLERANCE)
            .map_err(|e| format!("queued, cls: {e}"))?,
    );
    // A caps change: a different size, then the first size again.
    for (w, h) in [(1920, 1080), (1280, 720)] {
        let frame = random_frame(&mut rng, w, h, PixelLayout::Rgb);
        worst = worst.max(
            compare_frame_f32(&mut cpu, &mut gpu_pre, frame.view())
                .map_err(|e| format!("{w}x{h}: {e}"))?,
        );
    }
    Ok(format!(
        "5 queued frames + 2 size changes, max diff {worst:e}"
    ))
}

fn photographs_match_cpu(gpu: &Arc<GpuContext>) -> CaseResult {
    let Some(dir) = std::env::var_os("SEALCHECK_PARITY_IMAGES").map(PathBuf::from) else {
        return Ok(
            "skipped (set SEALCHECK_PARITY_IMAGES to a folder of .ppm photographs)".to_string(),
        );
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ppm"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(format!("no .ppm files in {}", dir.display()));
    }
    let mut worst = 0.0f32;
    let mut runs = 0;
    for geometry in geometries() {
        let mut cpu = cpu_preprocessor(geometry);
        let mut gpu_pre = gpu_preprocessor(gpu, geometry, GpuOptions::default())?;
        for path in &paths {
            let (w, h, rgb) = read_ppm(path)?;
            for layout in LAYOUTS {
                let frame = TestFrame::from_rgb(&rgb, w, h, layout, 0);
                worst = worst.max(
                    compare_frame_f32(&mut cpu, &mut gpu_pre, frame.view())
                        .map_err(|e| format!("{} {layout:?}: {e}", path.display()))?,
                );
                runs += 1;
            }
        }
    }
    Ok(format!(
        "{} photographs x 4 layouts x 2 geometries = {runs} runs, max diff {worst:e}",
        paths.len()
    ))
}

fn mask_f32_matches_cpu(gpu: &Arc<GpuContext>) -> CaseResult {
    let mut rng = Rng(0x5eed_0005);
    let mut runs = 0;
    let mut worst = 0.0f32;
    let mut total_set = 0u64;
    for geometry in geometries() {
        for mask_class in 0..geometry.seg_classes {
            let options = GpuOptions {
                mask_class,
                ..GpuOptions::default()
            };
            let cpu = cpu_preprocessor(geometry);
            let mut gpu_pre = gpu_preprocessor(gpu, geometry, options)?;
            for trial in 0..3 {
                let logits = random_logits(&mut rng, geometry.seg_logits_len(), trial);
                let (mut mask_cpu, mut mask_gpu) = (
                    vec![f32::NAN; geometry.mask_len()],
                    vec![7.0f32; geometry.mask_len()],
                );
                let (_, mut cls_cpu) = cpu_buffers(&geometry);
                let (_, mut cls_gpu) = cpu_buffers(&geometry);
                let set_cpu =
                    logits_to_mask(&logits, geometry.seg_classes, mask_class, &mut mask_cpu);
                cpu.mask_to_classifier_channel(&mask_cpu, &mut cls_cpu);
                gpu_pre.poison_outputs().map_err(|e| e.to_string())?;
                let set_gpu = gpu_pre
                    .logits_to_mask(&logits, &mut mask_gpu, &mut cls_gpu)
                    .map_err(|e| e.to_string())?;
                let context = format!("{:?} class {mask_class} trial {trial}", geometry.seg_hw);
                if set_cpu != set_gpu {
                    return Err(format!(
                        "{context}: pixel count gpu {set_gpu} vs cpu {set_cpu}"
                    ));
                }
                if let Some(i) = (0..mask_cpu.len()).find(|&i| mask_cpu[i] != mask_gpu[i]) {
                    return Err(format!(
                        "{context}: mask differs at pixel {i}: gpu {} cpu {}",
                        mask_gpu[i], mask_cpu[i]
                    ));
                }
                let plane = geometry.cls_hw.0 * geometry.cls_hw.1;
                worst = worst.max(
                    max_abs_diff(&cls_gpu[3 * plane..], &cls_cpu[3 * plane..], F32_TOLERANCE)
                        .map_err(|e| format!("{context}: mask channel: {e}"))?,
                );
                total_set += set_gpu;
                runs += 1;
            }
        }
    }
    Ok(format!(
        "{runs} logit sets, masks and counts identical ({total_set} pixels set), channel max diff {worst:e}"
    ))
}

fn mask_f16_matches_cpu(gpu: &Arc<GpuContext>) -> CaseResult {
    let mut rng = Rng(0x5eed_0006);
    let mut worst = 0.0f32;
    let mut runs = 0;
    for geometry in geometries() {
        let options = GpuOptions {
            input_element: TensorElement::F16,
            logits_element: TensorElement::F16,
            mask_class: 1,
            ..GpuOptions::default()
        };
        let cpu = cpu_preprocessor(geometry);
        let mut gpu_pre = gpu_preprocessor(gpu, geometry, options)?;
        for trial in 0..3 {
            // Values exactly representable in f16, so both sides see the same logits.
            let logits = random_logits(&mut rng, geometry.seg_logits_len(), trial);
            let bits: Vec<u16> = logits
                .iter()
                .map(|&v| f32_to_f16_exact(v))
                .collect::<Result<_, _>>()?;
            let mut mask_cpu = vec![f32::NAN; geometry.mask_len()];
            let (_, mut cls_cpu) = cpu_buffers(&geometry);
            let set_cpu = logits_to_mask(&logits, geometry.seg_classes, 1, &mut mask_cpu);
            cpu.mask_to_classifier_channel(&mask_cpu, &mut cls_cpu);
            gpu_pre.poison_outputs().map_err(|e| e.to_string())?;
            gpu_pre
                .upload_seg_logits(&bits)
                .map_err(|e| e.to_string())?;
            gpu_pre.enqueue_mask().map_err(|e| e.to_string())?;
            let set_gpu = gpu_pre.wait_mask_pixels().map_err(|e| e.to_string())?;
            let mut mask_gpu = vec![0u8; geometry.mask_len()];
            gpu_pre
                .download_mask(&mut mask_gpu)
                .map_err(|e| e.to_string())?;
            let mut cls_bits = vec![0u16; geometry.cls_input_len()];
            gpu_pre
                .download_cls_input(&mut cls_bits)
                .map_err(|e| e.to_string())?;
            let context = format!("{:?} trial {trial}", geometry.seg_hw);
            if set_cpu != set_gpu {
                return Err(format!(
                    "{context}: pixel count gpu {set_gpu} vs cpu {set_cpu}"
                ));
            }
            if let Some(i) = (0..mask_cpu.len()).find(|&i| mask_cpu[i] != f32::from(mask_gpu[i])) {
                return Err(format!("{context}: mask differs at pixel {i}"));
            }
            let plane = geometry.cls_hw.0 * geometry.cls_hw.1;
            let channel: Vec<f32> = cls_bits[3 * plane..]
                .iter()
                .map(|&b| f16_to_f32(b))
                .collect();
            worst = worst.max(
                max_abs_diff(&channel, &cls_cpu[3 * plane..], F16_TOLERANCE)
                    .map_err(|e| format!("{context}: {e}"))?,
            );
            runs += 1;
        }
    }
    Ok(format!(
        "{runs} f16 logit sets in device mode, masks identical, channel max diff {worst:e}"
    ))
}

fn wrong_inputs_are_refused(gpu: &Arc<GpuContext>) -> CaseResult {
    let geometry = geometries()[1];
    let mut gpu_pre = gpu_preprocessor(gpu, geometry, GpuOptions::default())?;
    let (mut seg, mut cls) = cpu_buffers(&geometry);
    let data = vec![0u8; 100];
    let short = ImageView {
        width: 10,
        height: 10,
        stride: 30,
        layout: PixelLayout::Rgb,
        data: &data,
    };
    match gpu_pre.frame_to_tensors(short, &mut seg, &mut cls) {
        Err(FramePreprocessError::Frame(_)) => {}
        other => {
            return Err(format!(
                "a frame with too few bytes was not refused: {other:?}"
            ));
        }
    }
    let frame = vec![0u8; 300];
    let ok = ImageView {
        width: 10,
        height: 10,
        stride: 30,
        layout: PixelLayout::Rgb,
        data: &frame,
    };
    match gpu_pre.frame_to_tensors(ok, &mut seg[1..], &mut cls) {
        Err(FramePreprocessError::Gpu(GpuError::BufferLength { .. })) => {}
        other => return Err(format!("a short output buffer was not refused: {other:?}")),
    }
    let mut halves = vec![0u16; geometry.seg_input_len()];
    match gpu_pre.download_seg_input(&mut halves) {
        Err(GpuError::ElementMismatch { .. }) => {}
        other => {
            return Err(format!(
                "an f16 download of an f32 tensor was not refused: {other:?}"
            ));
        }
    }
    let bad_class = GpuOptions {
        mask_class: 3,
        ..GpuOptions::default()
    };
    match GpuPreprocessor::new(
        gpu, SEG_NORM, CLS_NORM, MASK_MEAN, MASK_STD, geometry, bad_class,
    ) {
        Err(GpuError::MaskClass { .. }) => {}
        other => {
            return Err(format!(
                "mask class 3 of 3 classes was not refused: {:?}",
                other.err()
            ));
        }
    }
    // And the preprocessor still works after the refusals.
    let mut cpu = cpu_preprocessor(geometry);
    let diff = compare_frame_f32(&mut cpu, &mut gpu_pre, ok)?;
    Ok(format!(
        "frame, buffer, element and class refusals; still exact afterwards ({diff:e})"
    ))
}

fn no_release_failed(gpu: &Arc<GpuContext>) -> CaseResult {
    // Everything the earlier cases made has been dropped by now.
    match gpu.drop_errors() {
        (0, _) => Ok("no failed release in any Drop".to_string()),
        (n, first) => Err(format!("{n} releases failed; first: {first:?}")),
    }
}

/// Every `CAVITY_STRIDE`-th frame of the demo machine's clip.
const CAVITY_STRIDE: usize = 10;

/// The demo machine's cavity crops cut on the GPU (the frame uploaded or
/// mapped once, one kernel per cavity into its own batch index) against
/// the CPU preprocessing of the same crops, both geometries, both
/// transfers; and a crop outside the frame, or of no frame, is refused.
fn cavity_crops_match_cpu(gpu: &Arc<GpuContext>) -> CaseResult {
    let CavityDemo { layout, frames, .. } = cavity_demo()?;
    let numbers: Vec<u16> = layout.enabled().collect();
    let batch = numbers.len();
    let (mut worst, mut crops) = (0.0f32, 0);
    for geometry in geometries() {
        let mut cpu = cpu_preprocessor(geometry);
        for frame_transfer in [FrameTransfer::Copy, FrameTransfer::Mapped] {
            let options = GpuOptions {
                batch_frames: batch,
                frame_slots: 2 * batch,
                frame_transfer,
                ..GpuOptions::default()
            };
            let mut gpu_pre = gpu_preprocessor(gpu, geometry, options)?;
            let mut seg_gpu = vec![f32::NAN; batch * geometry.seg_input_len()];
            let mut cls_gpu = vec![f32::NAN; batch * geometry.cls_input_len()];
            for (name, slot) in &frames {
                let image = slot.image();
                let size = (image.width as u32, image.height as u32);
                let rects: Vec<CavityRect> =
                    numbers.iter().map(|&n| layout.crop(n, size)).collect();
                let context = |k: usize| {
                    format!(
                        "{name} cavity {} {:?} {frame_transfer:?}",
                        numbers[k], geometry.seg_hw
                    )
                };
                gpu_pre.poison_outputs().map_err(|e| e.to_string())?;
                for (k, &rect) in rects.iter().enumerate() {
                    let queued = if k == 0 {
                        gpu_pre.enqueue_frame_crop_at(image, HostPlacement::Pageable, rect, k)
                    } else {
                        gpu_pre.enqueue_staged_crop_at(rect, k)
                    };
                    queued.map_err(|e| format!("{}: {e}", context(k)))?;
                }
                gpu_pre
                    .download_seg_input(&mut seg_gpu)
                    .map_err(|e| e.to_string())?;
                gpu_pre
                    .download_cls_input(&mut cls_gpu)
                    .map_err(|e| e.to_string())?;
                let rgb = 3 * geometry.cls_hw.0 * geometry.cls_hw.1;
                for (k, rect) in rects.iter().enumerate() {
                    let crop = image
                        .crop(
                            rect.x as usize,
                            rect.y as usize,
                            rect.width as usize,
                            rect.height as usize,
                        )
                        .ok_or_else(|| format!("{}: the crop leaves the frame", context(k)))?;
                    let (mut seg, mut cls) = cpu_buffers(&geometry);
                    cpu.frame_to_tensors(crop, &mut seg, &mut cls)
                        .map_err(|e| format!("{}: cpu: {e}", context(k)))?;
                    let seg_k = &seg_gpu[k * seg.len()..(k + 1) * seg.len()];
                    let cls_k = &cls_gpu[k * cls.len()..][..rgb];
                    worst = worst.max(
                        max_abs_diff(seg_k, &seg, F32_TOLERANCE)
                            .map_err(|e| format!("{} seg input: {e}", context(k)))?,
                    );
                    worst = worst.max(
                        max_abs_diff(cls_k, &cls[..rgb], F32_TOLERANCE)
                            .map_err(|e| format!("{} cls input: {e}", context(k)))?,
                    );
                    crops += 1;
                }
            }
            // Refusals: a crop leaving the frame, a crop with no frame staged.
            let (_, slot) = &frames[0];
            let image = slot.image();
            let outside = CavityRect {
                x: image.width as u32 - 10,
                y: 0,
                width: 20,
                height: 10,
            };
            match gpu_pre.enqueue_frame_crop_at(image, HostPlacement::Pageable, outside, 0) {
                Err(FramePreprocessError::Gpu(GpuError::CropOutside { .. })) => {}
                other => return Err(format!("a crop leaving the frame gave {other:?}")),
            }
            match gpu_pre.enqueue_staged_crop_at(outside, 1) {
                Err(FramePreprocessError::Gpu(GpuError::NoFrameToCrop)) => {}
                other => return Err(format!("a crop after a refused frame gave {other:?}")),
            }
        }
    }
    Ok(format!(
        "{} frames x {batch} cavities, {crops} crops (2 geometries, copy and mapped), max |gpu - cpu| = {worst:e}",
        frames.len()
    ))
}

/// The device path (ONNX Runtime CUDA, the GPU kernels, each cycle one
/// batch, the frame uploaded once) against the CPU host path (CPU
/// preprocessing of each crop, ONNX Runtime CPU) on the demo machine.
fn cavity_verdicts_match_host_path(_gpu: &Arc<GpuContext>) -> CaseResult {
    let CavityDemo {
        mut config,
        layout,
        frames,
    } = cavity_demo()?;
    config.inference.backend = BackendChoice::OnnxRuntime;
    config.inference.device = ComputeDevice::Cuda;
    config.inference.preprocess = ComputeDevice::Cuda;
    let numbers: Vec<u16> = layout.enabled().collect();
    config.inference.max_batch = config.inference.max_batch.max(numbers.len());
    let mut opened = match open_path(&config, DevicePlan::OnnxRuntimeCuda) {
        Ok(opened) => opened,
        Err(e) if e.is_engine_unavailable() => {
            return Ok(format!("skipped (SKIPPED: ONNX Runtime CUDA: {e})"));
        }
        Err(e) => return Err(format!("the device path did not open: {e}")),
    };
    if opened.info.max_batch < numbers.len() {
        return Err(format!(
            "the device path takes {} per batch, a cycle has {} cavities",
            opened.info.max_batch,
            numbers.len()
        ));
    }
    let mut host = match OrtBackend::open(&config, ComputeDevice::Cpu) {
        Ok(host) => host,
        Err(e) if e.is_engine_unavailable() => {
            return Ok(format!("skipped (SKIPPED: ONNX Runtime CPU: {e})"));
        }
        Err(e) => return Err(format!("ONNX Runtime CPU did not open: {e}")),
    };
    let geometry = opened.info.geometry;
    let mut preprocessor = sealcheck::preprocess::cpu_preprocessor(&config, geometry);
    let mask_class = config.segmentation.mask_class;
    let mut device_works: Vec<FrameWork> =
        numbers.iter().map(|_| FrameWork::new(&geometry)).collect();
    let mut want = FrameWork::new(&geometry);
    let (mut worst, mut worst_mask, mut fails) = (0.0f64, 0.0f64, 0usize);
    let mut mismatches = Vec::new();
    for (name, slot) in &frames {
        let image = slot.image();
        let size = (image.width as u32, image.height as u32);
        let rects: Vec<CavityRect> = numbers.iter().map(|&n| layout.crop(n, size)).collect();
        for work in device_works.iter_mut() {
            work.reset(slot.meta);
            work.cls_logits.fill(f32::NAN);
            work.mask_pixels = u64::MAX;
        }
        run_crops(opened.path.as_mut(), image, &rects, &mut device_works)
            .map_err(|e| format!("{name}: device path: {e}"))?;
        for (k, rect) in rects.iter().enumerate() {
            let crop = image
                .crop(
                    rect.x as usize,
                    rect.y as usize,
                    rect.width as usize,
                    rect.height as usize,
                )
                .ok_or_else(|| format!("{name}: cavity {}'s crop leaves the frame", numbers[k]))?;
            want.reset(slot.meta);
            preprocessor
                .frame_to_tensors(crop, &mut want.seg_input, &mut want.cls_input)
                .map_err(|e| format!("{name}: cpu: {e}"))?;
            infer_frame(&mut host, &preprocessor, mask_class, &mut want);
            if let Some((_, e)) = &want.error {
                return Err(format!("{name}: host path: {e}"));
            }
            let work = &device_works[k];
            let error = relative_error(&work.cls_logits, &want.cls_logits);
            let mask = (work.mask_pixels as f64 - want.mask_pixels as f64).abs()
                / geometry.mask_len() as f64;
            worst = worst.max(error);
            worst_mask = worst_mask.max(mask);
            let decided = decide(work, config.classifier.defect_class, &config.decision);
            let expected = decide(&want, config.classifier.defect_class, &config.decision);
            if expected.verdict.as_str() == "fail" {
                fails += 1;
            }
            // `!(x <= limit)` on purpose: a NaN difference is a mismatch.
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            if decided.verdict != expected.verdict
                || decided.reason != expected.reason
                || !(error <= 1e-3)
                || !(mask <= 1e-3)
            {
                mismatches.push(format!(
                    "{name} cavity {}: {}/{} vs host {}/{}, logits rel {error:.2e}, mask {} vs {}",
                    numbers[k],
                    decided.verdict.as_str(),
                    decided.reason.as_str(),
                    expected.verdict.as_str(),
                    expected.reason.as_str(),
                    work.mask_pixels,
                    want.mask_pixels
                ));
            }
        }
    }
    let judged = frames.len() * numbers.len();
    if !mismatches.is_empty() {
        return Err(format!(
            "{} of {judged} cavities differ: {}",
            mismatches.len(),
            mismatches.join("; ")
        ));
    }
    Ok(format!(
        "{} cycles, {judged} cavities ({fails} fail on the host path), every verdict and reason equal; worst logits relative error {worst:.2e}, worst mask count {worst_mask:.2e} of the mask",
        frames.len()
    ))
}

/// The demo machine: its config, camera 0's layout and every
/// `CAVITY_STRIDE`-th frame of its clip, decoded (name, frame).
struct CavityDemo {
    config: Config,
    layout: Arc<CavityLayout>,
    frames: Vec<(String, FrameSlot)>,
}

fn cavity_demo() -> Result<CavityDemo, String> {
    let repo = repo();
    let config = sealcheck::config::load(&repo.join("config/demo-cavities.toml"))
        .map_err(|e| format!("config/demo-cavities.toml: {e}"))?;
    let layout = config.cameras[0]
        .source
        .layout
        .clone()
        .ok_or("config/demo-cavities.toml has no [source.layout]")?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(repo.join("samples/demo_cavities"))
        .map_err(|e| format!("samples/demo_cavities: {e}"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
        .collect();
    paths.sort();
    let frames = paths
        .iter()
        .step_by(CAVITY_STRIDE)
        .map(|path| {
            let mut slot = FrameSlot::with_capacity(0);
            sealcheck::capture::decode_image_file(path, &mut slot)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok((name, slot))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if frames.is_empty() {
        return Err("no frames in samples/demo_cavities".to_string());
    }
    Ok(CavityDemo {
        config,
        layout,
        frames,
    })
}

/// The source tree: the current folder when it is one (a binary carried to
/// another machine runs from a copy there), else where this was built.
fn repo() -> PathBuf {
    if std::path::Path::new("config/demo-cavities.toml").is_file() {
        return PathBuf::from(".");
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Largest |a - reference| over the reference's largest magnitude, as
/// `tests/parity.rs` measures it; NaN when either side holds one (an
/// unwritten element).
fn relative_error(a: &[f32], reference: &[f32]) -> f64 {
    let scale = reference
        .iter()
        .map(|v| f64::from(v.abs()))
        .fold(0.0, f64::max)
        .max(1e-6);
    let worst = a
        .iter()
        .zip(reference)
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(
            0.0,
            |worst: f64, d| if d.is_nan() { f64::NAN } else { worst.max(d) },
        );
    worst / scale
}

// ---------------------------------------------------------------- helpers

fn cpu_preprocessor(geometry: TensorGeometry) -> Preprocessor {
    Preprocessor::new(SEG_NORM, CLS_NORM, MASK_MEAN, MASK_STD, geometry)
}

fn gpu_preprocessor(
    gpu: &Arc<GpuContext>,
    geometry: TensorGeometry,
    options: GpuOptions,
) -> Result<GpuPreprocessor, String> {
    GpuPreprocessor::new(
        gpu, SEG_NORM, CLS_NORM, MASK_MEAN, MASK_STD, geometry, options,
    )
    .map_err(|e| e.to_string())
}

/// NaN-filled host buffers (an unwritten element can never pass).
fn cpu_buffers(geometry: &TensorGeometry) -> (Vec<f32>, Vec<f32>) {
    (
        vec![f32::NAN; geometry.seg_input_len()],
        vec![f32::NAN; geometry.cls_input_len()],
    )
}

/// Runs one frame through both paths (host mode on the GPU) and returns the
/// largest difference over the segmentation input and the classifier's RGB.
fn compare_frame_f32(
    cpu: &mut Preprocessor,
    gpu_pre: &mut GpuPreprocessor,
    frame: ImageView<'_>,
) -> Result<f32, String> {
    let geometry = *cpu.geometry();
    let (mut seg, mut cls) = cpu_buffers(&geometry);
    let (mut seg_gpu, mut cls_gpu) = cpu_buffers(&geometry);
    cpu.frame_to_tensors(frame, &mut seg, &mut cls)
        .map_err(|e| format!("cpu: {e}"))?;
    gpu_pre.poison_outputs().map_err(|e| e.to_string())?;
    gpu_pre
        .frame_to_tensors(frame, &mut seg_gpu, &mut cls_gpu)
        .map_err(|e| e.to_string())?;
    let rgb = 3 * geometry.cls_hw.0 * geometry.cls_hw.1;
    let seg_diff =
        max_abs_diff(&seg_gpu, &seg, F32_TOLERANCE).map_err(|e| format!("seg input: {e}"))?;
    let cls_diff = max_abs_diff(&cls_gpu[..rgb], &cls[..rgb], F32_TOLERANCE)
        .map_err(|e| format!("cls input: {e}"))?;
    // Channel 3 is the mask's: host mode must leave it as it was.
    if cls_gpu[rgb..].iter().any(|v| !v.is_nan()) {
        return Err("frame_to_tensors wrote the classifier's mask channel".to_string());
    }
    Ok(seg_diff.max(cls_diff))
}

/// Largest |a - b|; an error if it exceeds `tolerance` or if either side
/// holds a NaN (a poisoned, unwritten element) or the lengths differ.
fn max_abs_diff(gpu: &[f32], cpu: &[f32], tolerance: f32) -> Result<f32, String> {
    if gpu.len() != cpu.len() {
        return Err(format!(
            "lengths differ: gpu {} cpu {}",
            gpu.len(),
            cpu.len()
        ));
    }
    let mut worst = 0.0f32;
    for (i, (&g, &c)) in gpu.iter().zip(cpu).enumerate() {
        let diff = (g - c).abs();
        // A NaN on either side (a poisoned, unwritten element) fails too.
        if diff.is_nan() || diff > tolerance {
            return Err(format!(
                "element {i}: gpu {g} cpu {c} (|diff| {diff:e} > {tolerance:e})"
            ));
        }
        worst = worst.max(diff);
    }
    Ok(worst)
}

/// A frame with padded rows whose padding holds noise (so a kernel reading
/// padding would show).
struct TestFrame {
    data: Vec<u8>,
    width: usize,
    height: usize,
    stride: usize,
    layout: PixelLayout,
}

impl TestFrame {
    fn from_rgb(
        rgb: &[u8],
        width: usize,
        height: usize,
        layout: PixelLayout,
        pad: usize,
    ) -> TestFrame {
        let bpp = layout.bytes_per_pixel();
        let stride = width * bpp + pad;
        let mut data = vec![0xA5u8; stride * height];
        for y in 0..height {
            for x in 0..width {
                let [r, g, b] = [
                    rgb[3 * (y * width + x)],
                    rgb[3 * (y * width + x) + 1],
                    rgb[3 * (y * width + x) + 2],
                ];
                let px = &mut data[y * stride + x * bpp..][..bpp];
                match layout {
                    PixelLayout::Rgb => px.copy_from_slice(&[r, g, b]),
                    PixelLayout::Bgr => px.copy_from_slice(&[b, g, r]),
                    PixelLayout::Rgba => px.copy_from_slice(&[r, g, b, 0x5A]),
                    PixelLayout::Bgrx => px.copy_from_slice(&[b, g, r, 0xC3]),
                }
            }
        }
        TestFrame {
            data,
            width,
            height,
            stride,
            layout,
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
}

/// Random pixels; the stride is padded by 0..=13 bytes (sometimes keeping
/// 4-byte alignment, sometimes not).
fn random_frame(rng: &mut Rng, width: usize, height: usize, layout: PixelLayout) -> TestFrame {
    let rgb: Vec<u8> = (0..width * height * 3).map(|_| rng.next() as u8).collect();
    let pad = match rng.next() % 3 {
        0 => 0,
        1 => 4 * (1 + (rng.next() % 3) as usize),
        _ => 1 + (rng.next() % 13) as usize,
    };
    let mut frame = TestFrame::from_rgb(&rgb, width, height, layout, pad);
    // Padding bytes random too.
    for y in 0..height {
        for byte in &mut frame.data
            [y * frame.stride + width * layout.bytes_per_pixel()..(y + 1) * frame.stride]
        {
            *byte = rng.next() as u8;
        }
    }
    frame
}

/// Logits in steps of 0.25 in [-3, 3] (many exact ties between classes), with
/// NaNs sprinkled in trial 2.
fn random_logits(rng: &mut Rng, len: usize, trial: usize) -> Vec<f32> {
    (0..len)
        .map(|_| {
            if trial == 2 && rng.next().is_multiple_of(97) {
                f32::NAN
            } else {
                ((rng.next() % 25) as f32 - 12.0) * 0.25
            }
        })
        .collect()
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 16
    }
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let mant = u32::from(h & 0x3ff);
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalize.
            let (mut e, mut m) = (127 - 15 + 1, mant);
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
        (31, _) => sign | 0x7f80_0000 | (mant << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (mant << 13),
    };
    f32::from_bits(bits)
}

/// f16 bits of a value that f16 represents exactly (NaN allowed).
fn f32_to_f16_exact(v: f32) -> Result<u16, String> {
    if v.is_nan() {
        return Ok(0x7e00);
    }
    if v == 0.0 {
        return Ok(if v.is_sign_negative() { 0x8000 } else { 0 });
    }
    let bits = v.to_bits();
    let sign = ((bits >> 31) as u16) << 15;
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mant = bits & 0x7f_ffff;
    if !(1..31).contains(&exp) || mant & 0x1fff != 0 {
        return Err(format!("{v} is not exactly representable as a normal f16"));
    }
    Ok(sign | ((exp as u16) << 10) | (mant >> 13) as u16)
}

/// A binary PPM (P6, maxval 255): width, height, RGB bytes.
fn read_ppm(path: &std::path::Path) -> Result<(usize, usize, Vec<u8>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if start == i {
            return Err(format!("{}: truncated PPM header", path.display()));
        }
        fields.push(String::from_utf8_lossy(&bytes[start..i]).into_owned());
    }
    let parse = |s: &str| {
        s.parse::<usize>()
            .map_err(|e| format!("{}: bad PPM header field {s}: {e}", path.display()))
    };
    if fields[0] != "P6" || parse(&fields[3])? != 255 {
        return Err(format!(
            "{}: only binary 8-bit PPM (P6, 255) is read",
            path.display()
        ));
    }
    let (w, h) = (parse(&fields[1])?, parse(&fields[2])?);
    let pixels = bytes
        .get(i + 1..i + 1 + w * h * 3)
        .ok_or(format!("{}: PPM data too short", path.display()))?;
    Ok((w, h, pixels.to_vec()))
}
