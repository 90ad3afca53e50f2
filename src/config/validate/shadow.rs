//! `[shadow]`: the candidate model pair judging beside production, and the
//! engine combinations refused because they cannot run.

use super::files::Files;
use crate::config::raw::Section;
use crate::config::types::{
    BackendChoice, ComputeDevice, EnginePrecision, InferenceConfig, ShadowConfig,
};

/// `[shadow]` (read only when the file has it: absent = off). Engine
/// combinations that cannot run are refused here, naming the key, as
/// `sealcheck evaluate` refuses the same specs.
pub(super) fn read_shadow(
    s: &Section,
    files: &Files,
    inference: Option<&InferenceConfig>,
) -> Option<ShadowConfig> {
    let model = |key: &str, what: &str| {
        if s.has(key) {
            Some(files.existing(s, key, what))
        } else {
            s.opt_str(key);
            None
        }
    };
    let segmentation = model("segmentation", "the shadow's segmentation model (.onnx)");
    let classifier = model("classifier", "the shadow's classifier model (.onnx)");
    let backend = s.given("backend").then(|| {
        s.choice(
            "backend",
            &["auto", "tensorrt", "onnxruntime", "tract"],
            None,
        )
        .map(|i| {
            [
                BackendChoice::Auto,
                BackendChoice::TensorRt,
                BackendChoice::OnnxRuntime,
                BackendChoice::Tract,
            ][i]
        })
    });
    let device = s.given("device").then(|| {
        s.choice("device", &["cpu", "cuda"], None)
            .map(|i| [ComputeDevice::Cpu, ComputeDevice::Cuda][i])
    });
    let precision = s.given("precision").then(|| {
        s.choice("precision", &["fp32", "fp16", "int8"], None)
            .map(|i| {
                [
                    EnginePrecision::Fp32,
                    EnginePrecision::Fp16,
                    EnginePrecision::Int8,
                ][i]
            })
    });
    let every = s.int_in("every", 1..=1_000_000, Some(1));
    s.finish();
    let shadow = ShadowConfig {
        segmentation: given(segmentation)?,
        classifier: given(classifier)?,
        backend: given(backend)?,
        device: given(device)?,
        precision: given(precision)?,
        every: every? as u64,
    };
    let inference = inference?;
    let runs = shadow.backend.unwrap_or(inference.backend);
    let on = shadow.device.unwrap_or(inference.device);
    let refuse = |key: &str, why: &str| {
        s.problem(key, why.to_string());
        None
    };
    match (runs, shadow.precision) {
        (BackendChoice::Tract, _) if on == ComputeDevice::Cuda && shadow.device.is_some() => {
            refuse(
                "device",
                "tract runs on the CPU only; use backend = \"onnxruntime\" for cuda",
            )
        }
        (BackendChoice::Tract, Some(p)) if p != EnginePrecision::Fp32 => refuse(
            "precision",
            "tract runs FP32 only; use backend = \"onnxruntime\" for int8 (the _int8 models) or \"tensorrt\"",
        ),
        (BackendChoice::OnnxRuntime | BackendChoice::Auto, Some(EnginePrecision::Fp16)) => refuse(
            "precision",
            "ONNX Runtime takes the precision of the model file: name FP16 model files in segmentation and classifier and leave precision out",
        ),
        (BackendChoice::TensorRt, _) if shadow.device == Some(ComputeDevice::Cpu) => {
            refuse("device", "TensorRT runs on an NVIDIA GPU (cuda) only")
        }
        (BackendChoice::TensorRt, Some(EnginePrecision::Int8))
            if inference.tensorrt.calibration_images.is_none() =>
        {
            refuse(
                "precision",
                "a TensorRT \"int8\" shadow needs [inference.tensorrt] calibration_images, a folder of typical frames from the line",
            )
        }
        _ => Some(shadow),
    }
}

/// An optional key: absent `Some(None)`, valid `Some(Some(v))`, a problem `None`.
fn given<T>(key: Option<Option<T>>) -> Option<Option<T>> {
    key.map_or(Some(None), |value| value.map(Some))
}
