//! One parity suite for every inference path this build and machine have,
//! against tract with the CPU preprocessing (the reference), on the sample
//! clip, each path with its own tolerance (tract's `test-rt` pattern: the
//! same checks re-run per runtime):
//!
//! | path | how a frame runs | classifier logits, relative |
//! | --- | --- | --- |
//! | onnxruntime-cpu | CPU preprocessing, `infer_frame` | 1e-3 |
//! | onnxruntime-cuda (host) | CPU preprocessing, `infer_frame` on CUDA sessions | 1e-3 (TF32 off) |
//! | onnxruntime-cuda (device) | the device runner: kernels + sessions on one stream | 1e-3 |
//! | tensorrt (host) | CPU preprocessing, `infer_frame` on fp16 engines | 2e-2 (fp16) |
//! | tensorrt (device) | the device runner: kernels + engines on one stream | 2e-2 (fp16) |
//! | onnxruntime-cuda (device, batches of 4) | the runner judging 4 frames per batch (`models/*_batch.onnx`) | 1e-3 |
//! | tensorrt (device, batches of 4) | the same on TensorRT, a profile up to 4 | 2e-2 (fp16) |
//! | onnxruntime-cuda (device, page-locked slots, batches of 1/4/8) | frames in page-locked ring-slot memory from the path's allocator, uploaded straight from it on the upload stream | 1e-3 |
//! | onnxruntime-cuda (device, mapped slots, batches of 1/4/8) | `zero_copy = true`: mapped slots the frame kernel reads in place (over PCIe on a discrete GPU) | 1e-3 |
//!
//! The batch cases hold each frame of a batch against the same reference
//! as one frame alone: a batch of N gives every frame its batch-1 verdict.
//!
//! Every path must give the reference's verdict and reason on every frame
//! checked, and a mask within 1e-3 of the mask's pixels.
//!
//! Own harness (Cargo.toml `harness = false`): a path this build or machine
//! lacks (no `cuda` feature, no GPU, no CUDA provider, no TensorRT) prints
//! `SKIPPED: <path>: <reason>` and counts as skipped, not passed; ONNX
//! Runtime CPU is required where `SEALCHECK_REQUIRE_ORT` is set (`make
//! test`). `SEALCHECK_PARITY_STRIDE=n` checks every n-th frame (default 10:
//! tract is slow; the GPU verification runs every frame with 1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sealcheck::config::{self, ComputeDevice, Config};
use sealcheck::decision::decide;
use sealcheck::frame::{FrameSlot, FrameWork, ImageView, TensorGeometry};
use sealcheck::frame_bytes::{FrameBytes, HostPlacement, SlotMemory};
use sealcheck::infer::device_stage::{
    DeviceFramePath, DevicePlan, FramePart, ReadWait, open_path, run_frame,
};
use sealcheck::infer::onnxruntime::OrtBackend;
use sealcheck::infer::{InferenceBackend, geometry, infer_frame, tract::TractBackend};
use sealcheck::preprocess::{Preprocessor, cpu_preprocessor};

mod common;
use common::relative_error;

const MASK_TOLERANCE: f64 = 1e-3;

/// One frame through one path, filling `mask_pixels` and `cls_logits`.
trait FramePath {
    fn run(&mut self, frame: ImageView<'_>, work: &mut FrameWork) -> Result<(), String>;

    /// Several frames, each with its own result; one after another unless
    /// the path judges them as one batch.
    fn run_batch(
        &mut self,
        frames: &[ImageView<'_>],
        works: &mut [FrameWork],
    ) -> Vec<Result<(), String>> {
        frames
            .iter()
            .zip(works)
            .map(|(frame, work)| self.run(*frame, work))
            .collect()
    }
}

/// A host-mode engine: the CPU preprocessing, then the pipeline's `infer_frame`.
struct Host {
    backend: Box<dyn InferenceBackend>,
    preprocessor: Preprocessor,
    mask_class: usize,
}

impl FramePath for Host {
    fn run(&mut self, frame: ImageView<'_>, work: &mut FrameWork) -> Result<(), String> {
        self.preprocessor
            .frame_to_tensors(frame, &mut work.seg_input, &mut work.cls_input)
            .map_err(|e| e.to_string())?;
        infer_frame(
            self.backend.as_mut(),
            &self.preprocessor,
            self.mask_class,
            work,
        );
        match work.error.take() {
            Some((stage, message)) => Err(format!("{}: {message}", stage.as_str())),
            None => Ok(()),
        }
    }
}

/// The device path: frame in, decision inputs out, one stream.
struct Device(Box<dyn DeviceFramePath>);

impl FramePath for Device {
    fn run(&mut self, frame: ImageView<'_>, work: &mut FrameWork) -> Result<(), String> {
        run_frame(self.0.as_mut(), frame, work)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// The device path judging the frames it is given as one batch.
struct DeviceBatch(Box<dyn DeviceFramePath>);

impl FramePath for DeviceBatch {
    fn run(&mut self, frame: ImageView<'_>, work: &mut FrameWork) -> Result<(), String> {
        self.run_batch(&[frame], std::slice::from_mut(work))
            .remove(0)
    }

    fn run_batch(
        &mut self,
        frames: &[ImageView<'_>],
        works: &mut [FrameWork],
    ) -> Vec<Result<(), String>> {
        let path = self.0.as_mut();
        let staged: Vec<Result<(), String>> = frames
            .iter()
            .map(|frame| {
                path.stage(*frame, HostPlacement::Pageable, true, FramePart::Whole)
                    .map(drop)
                    .map_err(|e| e.to_string())
            })
            .collect();
        if let Err(e) = path.launch() {
            return vec![Err(e.to_string()); frames.len()];
        }
        staged
            .into_iter()
            .zip(works)
            .map(|(staged, work)| {
                staged?;
                path.complete(work).map(drop).map_err(|e| e.to_string())
            })
            .collect()
    }
}

/// The device path reading its frames where a camera's ring slot holds
/// them: page-locked memory from the path's own slot allocator (mapped with
/// `zero_copy = true`), uploaded from in place or read by the kernel in
/// place; the frames of a batch in slots of their own, as in the ring.
struct DeviceSlots {
    path: Box<dyn DeviceFramePath>,
    slots: Vec<FrameBytes>,
}

impl FramePath for DeviceSlots {
    fn run(&mut self, frame: ImageView<'_>, work: &mut FrameWork) -> Result<(), String> {
        self.run_batch(&[frame], std::slice::from_mut(work))
            .remove(0)
    }

    fn run_batch(
        &mut self,
        frames: &[ImageView<'_>],
        works: &mut [FrameWork],
    ) -> Vec<Result<(), String>> {
        let path = self.path.as_mut();
        let mut staged = Vec::with_capacity(frames.len());
        let mut numbers = Vec::new();
        for (frame, slot) in frames.iter().zip(&mut self.slots) {
            slot.clear();
            slot.extend_from_slice(frame.data);
            let view = ImageView {
                data: &slot[..],
                ..*frame
            };
            staged.push(
                match path.stage(view, slot.placement(), true, FramePart::Whole) {
                    Ok(Some(number)) => {
                        numbers.push(number);
                        Ok(())
                    }
                    Ok(None) => Err(format!(
                        "a {:?} slot was copied, not read in place",
                        slot.placement()
                    )),
                    Err(e) => Err(e.to_string()),
                },
            );
        }
        if let Err(e) = path.launch() {
            return vec![Err(e.to_string()); frames.len()];
        }
        let mut results: Vec<Result<(), String>> = staged
            .into_iter()
            .zip(works)
            .map(|(staged, work)| {
                staged?;
                path.complete(work).map(drop).map_err(|e| e.to_string())
            })
            .collect();
        // The batch is complete: the GPU must be past every read of its
        // slots (the hand-back to capture relies on it).
        match path.reads_done(ReadWait::Poll) {
            Ok(done) if numbers.iter().all(|n| *n < done) => {}
            Ok(done) => {
                results[0] = Err(format!(
                    "reads_done {done} after the batch, staged {numbers:?}"
                ))
            }
            Err(e) => results[0] = Err(e.to_string()),
        }
        results
    }
}

/// A path to check, or why it cannot run here (`Err(Skip)`), or a failure
/// to open it where it should have opened.
enum Opened {
    Ready(Box<dyn FramePath>),
    Skip(String),
    Fail(String),
}

struct Case {
    name: &'static str,
    tolerance: f64,
    open: fn(&Config, TensorGeometry) -> Opened,
    /// Frames handed to the path at once.
    batch: usize,
}

/// Frames per batch in the batch cases.
const BATCH: usize = 4;

const CASES: [Case; 13] = [
    Case {
        name: "onnxruntime-cpu",
        tolerance: 1e-3,
        open: |cfg, geometry| host_ort(cfg, geometry, ComputeDevice::Cpu),
        batch: 1,
    },
    Case {
        name: "onnxruntime-cuda (host)",
        tolerance: 1e-3,
        open: |cfg, geometry| host_ort(cfg, geometry, ComputeDevice::Cuda),
        batch: 1,
    },
    Case {
        name: "onnxruntime-cuda (device)",
        tolerance: 1e-3,
        open: |cfg, _| device(cfg, DevicePlan::OnnxRuntimeCuda),
        batch: 1,
    },
    Case {
        name: "tensorrt (host)",
        tolerance: 2e-2,
        open: host_tensorrt,
        batch: 1,
    },
    Case {
        name: "tensorrt (device)",
        tolerance: 2e-2,
        open: |cfg, _| device(cfg, DevicePlan::TensorRt),
        batch: 1,
    },
    Case {
        name: "onnxruntime-cuda (device, batches of 4)",
        tolerance: 1e-3,
        open: |cfg, _| device_batches(cfg, DevicePlan::OnnxRuntimeCuda),
        batch: BATCH,
    },
    Case {
        name: "tensorrt (device, batches of 4)",
        tolerance: 2e-2,
        open: |cfg, _| device_batches(cfg, DevicePlan::TensorRt),
        batch: BATCH,
    },
    Case {
        name: "onnxruntime-cuda (device, page-locked slots, batches of 1)",
        tolerance: 1e-3,
        open: |cfg, _| device_slots(cfg, 1, false),
        batch: 1,
    },
    Case {
        name: "onnxruntime-cuda (device, page-locked slots, batches of 4)",
        tolerance: 1e-3,
        open: |cfg, _| device_slots(cfg, 4, false),
        batch: 4,
    },
    Case {
        name: "onnxruntime-cuda (device, page-locked slots, batches of 8)",
        tolerance: 1e-3,
        open: |cfg, _| device_slots(cfg, 8, false),
        batch: 8,
    },
    Case {
        name: "onnxruntime-cuda (device, mapped slots, batches of 1)",
        tolerance: 1e-3,
        open: |cfg, _| device_slots(cfg, 1, true),
        batch: 1,
    },
    Case {
        name: "onnxruntime-cuda (device, mapped slots, batches of 4)",
        tolerance: 1e-3,
        open: |cfg, _| device_slots(cfg, 4, true),
        batch: 4,
    },
    Case {
        name: "onnxruntime-cuda (device, mapped slots, batches of 8)",
        tolerance: 1e-3,
        open: |cfg, _| device_slots(cfg, 8, true),
        batch: 8,
    },
];

fn host_ort(cfg: &Config, geometry: TensorGeometry, device: ComputeDevice) -> Opened {
    match OrtBackend::open(cfg, device) {
        Ok(backend) => host(cfg, geometry, Box::new(backend)),
        Err(e) if e.is_engine_unavailable() => {
            if device == ComputeDevice::Cpu && std::env::var_os("SEALCHECK_REQUIRE_ORT").is_some() {
                Opened::Fail(format!(
                    "ONNX Runtime is required here (SEALCHECK_REQUIRE_ORT): {e}"
                ))
            } else {
                Opened::Skip(e.to_string())
            }
        }
        Err(e) => Opened::Fail(e.to_string()),
    }
}

#[cfg(feature = "tensorrt")]
fn host_tensorrt(cfg: &Config, geometry: TensorGeometry) -> Opened {
    match sealcheck::infer::tensorrt::TensorRtBackend::open(cfg) {
        Ok(backend) => host(cfg, geometry, Box::new(backend)),
        Err(e) if e.is_unavailable() => Opened::Skip(e.to_string()),
        Err(e) => Opened::Fail(e.to_string()),
    }
}

#[cfg(not(feature = "tensorrt"))]
fn host_tensorrt(_cfg: &Config, _geometry: TensorGeometry) -> Opened {
    Opened::Skip("built without the `tensorrt` feature".to_string())
}

fn host(cfg: &Config, geometry: TensorGeometry, backend: Box<dyn InferenceBackend>) -> Opened {
    Opened::Ready(Box::new(Host {
        backend,
        preprocessor: cpu_preprocessor(cfg, geometry),
        mask_class: cfg.segmentation.mask_class,
    }))
}

fn device(cfg: &Config, plan: DevicePlan) -> Opened {
    match open_path(cfg, plan) {
        Ok(opened) => Opened::Ready(Box::new(Device(opened.path))),
        Err(e) if e.is_engine_unavailable() => Opened::Skip(e.to_string()),
        Err(e) => Opened::Fail(e.to_string()),
    }
}

/// The device path on the demo models exported with a dynamic batch,
/// sized for batches of `BATCH`; it must really batch.
fn device_batches(cfg: &Config, plan: DevicePlan) -> Opened {
    let mut cfg = cfg.clone();
    for (path, batched) in [
        (&mut cfg.segmentation.path, "seg_batch.onnx"),
        (&mut cfg.classifier.path, "cls_batch.onnx"),
    ] {
        *path = path.with_file_name(batched);
    }
    cfg.inference.max_batch = BATCH;
    match open_path(&cfg, plan) {
        Ok(opened) if opened.info.max_batch == BATCH => {
            Opened::Ready(Box::new(DeviceBatch(opened.path)))
        }
        Ok(opened) => Opened::Fail(format!(
            "the path judges at most {} frame(s) at once with dynamic-batch models and max_batch = {BATCH}",
            opened.info.max_batch
        )),
        Err(e) if e.is_engine_unavailable() => Opened::Skip(e.to_string()),
        Err(e) => Opened::Fail(e.to_string()),
    }
}

/// The ONNX Runtime device path on the dynamic-batch models, sized for
/// batches of `batch`, its frames in page-locked slots from its own
/// allocator (mapped with `zero_copy`).
fn device_slots(cfg: &Config, batch: usize, zero_copy: bool) -> Opened {
    let mut cfg = cfg.clone();
    for (path, batched) in [
        (&mut cfg.segmentation.path, "seg_batch.onnx"),
        (&mut cfg.classifier.path, "cls_batch.onnx"),
    ] {
        *path = path.with_file_name(batched);
    }
    cfg.inference.max_batch = batch;
    cfg.inference.zero_copy = Some(zero_copy);
    let opened = match open_path(&cfg, DevicePlan::OnnxRuntimeCuda) {
        Ok(opened) if opened.info.max_batch == batch => opened,
        Ok(opened) => {
            return Opened::Fail(format!(
                "the path judges at most {} frame(s) at once with max_batch = {batch}",
                opened.info.max_batch
            ));
        }
        Err(e) if e.is_engine_unavailable() => return Opened::Skip(e.to_string()),
        Err(e) => return Opened::Fail(e.to_string()),
    };
    let Some(allocator) = opened.info.slot_allocator else {
        return Opened::Fail("the device path gives no page-locked slot memory".to_string());
    };
    let memory = SlotMemory::new();
    memory.install(allocator);
    let slots: Vec<FrameBytes> = (0..batch)
        .map(|_| FrameBytes::in_memory(memory.clone()))
        .collect();
    Opened::Ready(Box::new(DeviceSlots {
        path: opened.path,
        slots,
    }))
}

/// The source tree: the current folder when it is one (a binary carried to
/// another machine runs from a copy there), else where this was built.
fn repo() -> PathBuf {
    if Path::new("config/demo.toml").is_file() && Path::new("samples/demo_clip").is_dir() {
        return PathBuf::from(".");
    }
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

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The reference's decision inputs for one frame: CPU preprocessing + tract.
struct Reference {
    frame: PathBuf,
    slot: FrameSlot,
    work: FrameWork,
}

fn main() -> ExitCode {
    let config = config::load(&repo().join("config/demo.toml")).expect("config/demo.toml");
    let stride: usize = std::env::var("SEALCHECK_PARITY_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .max(1);
    let mut tract = TractBackend::open(&config).expect("tract opens the demo models");
    let geometry = geometry(&tract).expect("geometry");
    let mut preprocessor = cpu_preprocessor(&config, geometry);
    let mask_class = config.segmentation.mask_class;
    // The reference once, for every path to be held against.
    let references: Vec<Reference> = clip_frames()
        .into_iter()
        .step_by(stride)
        .map(|frame| {
            let mut slot = FrameSlot::with_capacity(0);
            sealcheck::capture::decode_image_file(&frame, &mut slot).expect("decode frame");
            let mut work = FrameWork::new(&geometry);
            preprocessor
                .frame_to_tensors(slot.image(), &mut work.seg_input, &mut work.cls_input)
                .expect("cpu preprocess");
            infer_frame(&mut tract, &preprocessor, mask_class, &mut work);
            assert!(work.error.is_none(), "tract: {:?}", work.error);
            Reference { frame, slot, work }
        })
        .collect();
    println!(
        "reference: tract + CPU preprocessing, {} frames (every {stride}. of the clip)",
        references.len()
    );

    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for case in &CASES {
        let mut path = match (case.open)(&config, geometry) {
            Opened::Ready(path) => path,
            Opened::Skip(reason) => {
                println!("SKIPPED: {}: {reason}", case.name);
                skipped += 1;
                continue;
            }
            Opened::Fail(reason) => {
                println!("FAIL {}: cannot open: {reason}", case.name);
                failed += 1;
                continue;
            }
        };
        let mut works: Vec<FrameWork> =
            (0..case.batch).map(|_| FrameWork::new(&geometry)).collect();
        let (mut mismatches, mut worst, mut worst_mask) = (0usize, 0.0f64, 0.0f64);
        for chunk in references.chunks(case.batch) {
            let works = &mut works[..chunk.len()];
            for (work, reference) in works.iter_mut().zip(chunk) {
                work.reset(reference.work.meta);
                work.cls_logits.fill(f32::NAN);
                work.mask.fill(f32::NAN);
                work.mask_pixels = u64::MAX;
            }
            let frames: Vec<ImageView<'_>> = chunk.iter().map(|r| r.slot.image()).collect();
            let ran = path.run_batch(&frames, works);
            for ((reference, work), ran) in chunk.iter().zip(works.iter()).zip(ran) {
                if let Err(e) = ran {
                    println!("FAIL {} {}: {e}", case.name, name(&reference.frame));
                    mismatches += 1;
                    continue;
                }
                let want = &reference.work;
                let error = relative_error(&work.cls_logits, &want.cls_logits);
                // The mask itself (every path brings it to the host here; the
                // device path only when asked, as the archive asks): pixels
                // that differ from the reference's, and its count against the
                // count the path reported.
                let differing = work
                    .mask
                    .iter()
                    .zip(&want.mask)
                    .filter(|(a, b)| a != b)
                    .count();
                let counted = work.mask.iter().filter(|v| **v == 1.0).count() as u64;
                let mask = ((work.mask_pixels as f64 - want.mask_pixels as f64).abs()
                    / geometry.mask_len() as f64)
                    .max(differing as f64 / geometry.mask_len() as f64);
                worst = worst.max(error);
                worst_mask = worst_mask.max(mask);
                let decided = decide(work, config.classifier.defect_class, &config.decision);
                let expected = decide(want, config.classifier.defect_class, &config.decision);
                // `!(x <= limit)` on purpose: a NaN difference is a mismatch.
                #[allow(clippy::neg_cmp_op_on_partial_ord)]
                if decided.verdict != expected.verdict
                    || decided.reason != expected.reason
                    || !(error <= case.tolerance)
                    || !(mask <= MASK_TOLERANCE)
                    || counted != work.mask_pixels
                {
                    mismatches += 1;
                    println!(
                        "FAIL {} {}: verdict {}/{} reason {}/{} logits {:?} vs {:?} (rel {error:.2e}) mask {} vs {} ({differing} pixels differ; {counted} set in the host mask)",
                        case.name,
                        name(&reference.frame),
                        decided.verdict.as_str(),
                        expected.verdict.as_str(),
                        decided.reason.as_str(),
                        expected.reason.as_str(),
                        work.cls_logits,
                        want.cls_logits,
                        work.mask_pixels,
                        want.mask_pixels
                    );
                }
            }
        }
        let verdict = if mismatches == 0 { "ok" } else { "FAILED" };
        println!(
            "{verdict} {}: {} frames, {mismatches} mismatches, worst classifier logits relative \
             error {worst:.2e} (limit {:.0e}), worst mask difference {worst_mask:.2e} of the mask (area or pixels)",
            case.name,
            references.len(),
            case.tolerance
        );
        if mismatches == 0 {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    println!("parity: {passed} paths passed, {failed} failed, {skipped} skipped");
    if failed == 0 && passed > 0 && !references.is_empty() {
        println!("PASSED");
        ExitCode::SUCCESS
    } else {
        println!("FAILED");
        ExitCode::FAILURE
    }
}
