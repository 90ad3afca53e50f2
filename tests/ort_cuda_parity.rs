//! ONNX Runtime on CUDA in device mode (frame in, logits and mask count out,
//! one stream) against tract with the CPU preprocessing on the sample clip:
//! the same verdict on every frame and classifier logits within 1e-3
//! relative (cuDNN picks other algorithms than tract's CPU kernels).
//!
//! Own harness (Cargo.toml `harness = false`): without a CUDA device or
//! without ONNX Runtime's CUDA provider it prints `SKIPPED: ...` and does not
//! count as passed. `SEALCHECK_PARITY_STRIDE=n` checks every n-th frame
//! (tract is slow; default 1 = every frame).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sealcheck::config::{BackendChoice, ComputeDevice, Config};
use sealcheck::decision::decide;
use sealcheck::frame::{FrameSlot, FrameWork};
use sealcheck::infer::device_stage::{DeviceFramePath, DevicePlan, open_path};
use sealcheck::infer::{InferenceBackend, geometry, tract::TractBackend};
use sealcheck::preprocess::{cpu_preprocessor, logits_to_mask};

const LOGITS_TOLERANCE: f64 = 1e-3;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn clip_frames() -> Vec<PathBuf> {
    let mut frames: Vec<PathBuf> = std::fs::read_dir(repo().join("samples/demo_clip"))
        .expect("samples/demo_clip")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
        .collect();
    frames.sort();
    frames
}

fn relative_error(a: &[f32], reference: &[f32]) -> f64 {
    let scale = reference
        .iter()
        .map(|v| f64::from(v.abs()))
        .fold(0.0, f64::max)
        .max(1e-6);
    a.iter()
        .zip(reference)
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max)
        / scale
}

fn main() -> ExitCode {
    if let Err(e) = sealcheck::gpu::GpuContext::open(0) {
        println!("SKIPPED: no CUDA device ({e})");
        return ExitCode::SUCCESS;
    }
    let mut config: Config =
        sealcheck::config::load(&repo().join("config/demo.toml")).expect("config/demo.toml");
    config.inference.backend = BackendChoice::OnnxRuntime;
    config.inference.device = ComputeDevice::Cuda;
    config.inference.preprocess = ComputeDevice::Cuda;
    let stride: usize = std::env::var("SEALCHECK_PARITY_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);

    let mut tract = TractBackend::open(&config).expect("tract opens the demo models");
    let geometry = geometry(tract.segmentation_io(), tract.classifier_io()).expect("geometry");
    let mut cpu = cpu_preprocessor(&config, geometry);
    let mut path = match open_path(&config, DevicePlan::OnnxRuntimeCuda) {
        Ok(opened) if opened.geometry == geometry => opened.path,
        Ok(opened) => {
            println!(
                "FAIL: the device path read {:?}, tract {geometry:?}",
                opened.geometry
            );
            return ExitCode::FAILURE;
        }
        Err(e) => {
            println!("SKIPPED: ONNX Runtime CUDA device path unavailable ({e})");
            return ExitCode::SUCCESS;
        }
    };

    let mut reference = FrameWork::new(&geometry);
    let mut device = FrameWork::new(&geometry);
    let mut slot = FrameSlot::with_capacity(0);
    let (mut checked, mut failures, mut worst, mut worst_mask) = (0usize, 0usize, 0.0f64, 0.0f64);
    for (index, file) in clip_frames().iter().enumerate().step_by(stride) {
        sealcheck::capture::decode_image_file(file, &mut slot).expect("decode frame");
        let frame = slot.image();
        cpu.frame_to_tensors(frame, &mut reference.seg_input, &mut reference.cls_input)
            .expect("cpu preprocess");
        tract
            .segment(&reference.seg_input, &mut reference.seg_logits)
            .expect("tract segment");
        reference.mask_pixels = logits_to_mask(
            &reference.seg_logits,
            geometry.seg_classes,
            config.segmentation.mask_class,
            &mut reference.mask,
        );
        cpu.mask_to_classifier_channel(&reference.mask, &mut reference.cls_input);
        tract
            .classify(&reference.cls_input, &mut reference.cls_logits)
            .expect("tract classify");

        device.cls_logits.fill(f32::NAN);
        device.mask_pixels = u64::MAX;
        path.run_frame(frame, &mut device)
            .expect("device path frame");

        let error = relative_error(&device.cls_logits, &reference.cls_logits);
        let mask_diff = (device.mask_pixels as f64 - reference.mask_pixels as f64).abs()
            / geometry.mask_len() as f64;
        worst = worst.max(error);
        worst_mask = worst_mask.max(mask_diff);
        let want = decide(&reference, config.classifier.defect_class, &config.decision);
        let got = decide(&device, config.classifier.defect_class, &config.decision);
        if got.verdict != want.verdict || got.reason != want.reason || !(error <= LOGITS_TOLERANCE)
        {
            failures += 1;
            println!(
                "FAIL {}: verdict {}/{} reason {}/{} logits {:?} vs {:?} (rel {error:.2e}) mask {} vs {}",
                name(file),
                got.verdict.as_str(),
                want.verdict.as_str(),
                got.reason.as_str(),
                want.reason.as_str(),
                device.cls_logits,
                reference.cls_logits,
                device.mask_pixels,
                reference.mask_pixels
            );
        }
        checked += 1;
        let _ = index;
    }
    println!(
        "ort-cuda device path vs tract: {checked} frames, {failures} mismatches, \
         worst classifier logits relative error {worst:.2e} (limit {LOGITS_TOLERANCE:.0e}), \
         worst mask area difference {worst_mask:.2e} of the mask"
    );
    if failures == 0 && checked > 0 {
        println!("PASSED");
        ExitCode::SUCCESS
    } else {
        println!("FAILED");
        ExitCode::FAILURE
    }
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
