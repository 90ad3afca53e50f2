//! What `--candidate` and `--reference` name: an engine, where it runs, at
//! which precision, and optionally other model files.
//!
//! ```text
//! SPEC  = BACKEND [":" DEVICE] [":" PRECISION] ["," ROLE "=" PATH]...
//! BACKEND   tract | onnxruntime | tensorrt
//! DEVICE    cpu | cuda                 (tract: cpu; tensorrt: cuda)
//! PRECISION fp32 | fp16 | int8         (onnxruntime: fp32 | int8; tract: fp32)
//! ROLE      seg | cls                  (model files instead of the config's)
//! ```
//! `onnxruntime:cpu:int8` runs the QDQ models `scripts/demo/quantize_int8.py` writes
//! beside the FP32 ones (`seg_int8.onnx`, `cls_int8.onnx`); TensorRT builds (or
//! takes from its cache) engines of the asked precision from the FP32 models.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::config::{BackendChoice, ComputeDevice, Config, EnginePrecision};

/// One engine to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSpec {
    /// As written, for tables and reports.
    pub text: String,
    pub backend: BackendChoice,
    pub device: ComputeDevice,
    pub precision: EnginePrecision,
    pub segmentation: Option<PathBuf>,
    pub classifier: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error(
    "engine spec `{spec}`: {problem} (examples: tract, onnxruntime:cpu, onnxruntime:cpu:int8, onnxruntime:cuda, tensorrt:fp16, onnxruntime:cpu,cls=new_cls.onnx)"
)]
pub struct SpecError {
    pub spec: String,
    pub problem: String,
}

impl FromStr for EngineSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let fail = |problem: String| SpecError {
            spec: text.to_string(),
            problem,
        };
        let mut parts = text.split(',');
        let engine = parts.next().unwrap_or_default().trim();
        let mut fields = engine.split(':');
        let backend = match fields.next().unwrap_or_default() {
            "tract" => BackendChoice::Tract,
            "onnxruntime" | "ort" => BackendChoice::OnnxRuntime,
            "tensorrt" | "trt" => BackendChoice::TensorRt,
            other => {
                return Err(fail(format!(
                    "unknown backend `{other}`; use tract, onnxruntime or tensorrt"
                )));
            }
        };
        let mut device = None;
        let mut precision = None;
        for field in fields {
            match field {
                "cpu" if device.is_none() => device = Some(ComputeDevice::Cpu),
                "cuda" if device.is_none() => device = Some(ComputeDevice::Cuda),
                "fp32" if precision.is_none() => precision = Some(EnginePrecision::Fp32),
                "fp16" if precision.is_none() => precision = Some(EnginePrecision::Fp16),
                "int8" if precision.is_none() => precision = Some(EnginePrecision::Int8),
                other => {
                    return Err(fail(format!(
                        "`{other}` is not a device (cpu, cuda) or precision (fp32, fp16, int8), or is given twice"
                    )));
                }
            }
        }
        let (device, precision) = match backend {
            BackendChoice::Tract => {
                if device == Some(ComputeDevice::Cuda) {
                    return Err(fail("tract runs on the CPU only".into()));
                }
                if precision.is_some_and(|p| p != EnginePrecision::Fp32) {
                    return Err(fail("tract runs FP32 only".into()));
                }
                (ComputeDevice::Cpu, EnginePrecision::Fp32)
            }
            BackendChoice::OnnxRuntime => {
                if precision == Some(EnginePrecision::Fp16) && device != Some(ComputeDevice::Cuda) {
                    return Err(fail(
                        "ONNX Runtime runs FP16 models on the GPU: write onnxruntime:cuda:fp16 (the _fp16 files beside the models)".into(),
                    ));
                }
                (
                    device.unwrap_or(ComputeDevice::Cpu),
                    precision.unwrap_or(EnginePrecision::Fp32),
                )
            }
            _ => {
                if device == Some(ComputeDevice::Cpu) {
                    return Err(fail("TensorRT runs on an NVIDIA GPU (cuda) only".into()));
                }
                (
                    ComputeDevice::Cuda,
                    precision.unwrap_or(EnginePrecision::Fp32),
                )
            }
        };
        let mut spec = EngineSpec {
            text: text.to_string(),
            backend,
            device,
            precision,
            segmentation: None,
            classifier: None,
        };
        for part in parts {
            match part.trim().split_once('=') {
                Some(("seg", path)) if !path.is_empty() => spec.segmentation = Some(path.into()),
                Some(("cls", path)) if !path.is_empty() => spec.classifier = Some(path.into()),
                _ => {
                    return Err(fail(format!("`{part}` should be seg=PATH or cls=PATH")));
                }
            }
        }
        Ok(spec)
    }
}

impl fmt::Display for EngineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl EngineSpec {
    /// tract FP32 on the config's models: the reference when none is named.
    pub fn reference_default() -> Self {
        "tract".parse().expect("the default reference spec parses")
    }

    /// The config this engine runs under: `base` with its backend, device,
    /// precision and model files. A missing model file is a `SpecError`
    /// naming it and what makes it.
    pub fn config(&self, base: &Config) -> Result<Config, SpecError> {
        let mut config = base.clone();
        config.inference.backend = self.backend;
        config.inference.device = self.device;
        // Preprocessing is the same for every engine; the CPU one is the reference.
        config.inference.preprocess = ComputeDevice::Cpu;
        if self.backend == BackendChoice::TensorRt {
            config.inference.tensorrt.precision = self.precision;
        }
        // ONNX Runtime takes the precision of the model file: INT8 and FP16
        // run the files beside the models (as [inference] precision does).
        let sibling = match (self.backend, self.precision) {
            (BackendChoice::OnnxRuntime, EnginePrecision::Int8) => Some(ModelSibling::Int8),
            (BackendChoice::OnnxRuntime, EnginePrecision::Fp16) => Some(ModelSibling::Fp16),
            _ => None,
        };
        config.inference.precision = match sibling {
            Some(ModelSibling::Fp16) => EnginePrecision::Fp16,
            _ => EnginePrecision::Fp32,
        };
        config.segmentation.path = self.model_path(
            &base.segmentation.path,
            self.segmentation.as_deref(),
            sibling,
        )?;
        config.classifier.path =
            self.model_path(&base.classifier.path, self.classifier.as_deref(), sibling)?;
        Ok(config)
    }

    fn model_path(
        &self,
        configured: &Path,
        named: Option<&Path>,
        sibling: Option<ModelSibling>,
    ) -> Result<PathBuf, SpecError> {
        let (path, made_by) = match (named, sibling) {
            (Some(path), _) => (path.to_path_buf(), "check the path in the spec"),
            (None, Some(ModelSibling::Int8)) => (
                int8_sibling(configured),
                "make it with `make demo-assets` or scripts/demo/quantize_int8.py (docs/PERFORMANCE.md), or name it with seg=/cls=",
            ),
            (None, Some(ModelSibling::Fp16)) => (
                crate::config::fp16_sibling(configured),
                "make it with `make demo-assets` or scripts/demo/export_batch_fp16.py, or name it with seg=/cls=",
            ),
            (None, None) => return Ok(configured.to_path_buf()),
        };
        if path.is_file() {
            Ok(path)
        } else {
            Err(SpecError {
                spec: self.text.clone(),
                problem: format!("model file {} does not exist; {made_by}", path.display()),
            })
        }
    }
}

/// Which model files beside the configured ones a candidate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModelSibling {
    Int8,
    Fp16,
}

// Where the INT8 files sit is the config's knowledge (a `[shadow]` runs
// them too); kept nameable here, where `evaluate` users look for it.
pub use crate::config::int8_sibling;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_of_the_issue_parse() {
        let ort_int8: EngineSpec = "onnxruntime:cpu:int8".parse().unwrap();
        assert_eq!(
            (ort_int8.backend, ort_int8.device, ort_int8.precision),
            (
                BackendChoice::OnnxRuntime,
                ComputeDevice::Cpu,
                EnginePrecision::Int8
            )
        );
        let trt: EngineSpec = "tensorrt:fp16".parse().unwrap();
        assert_eq!(
            (trt.device, trt.precision),
            (ComputeDevice::Cuda, EnginePrecision::Fp16)
        );
        let cuda: EngineSpec = "onnxruntime:cuda".parse().unwrap();
        assert_eq!(cuda.precision, EnginePrecision::Fp32);
        let swapped: EngineSpec = "onnxruntime:cpu,cls=/tmp/new.onnx".parse().unwrap();
        assert_eq!(
            swapped.classifier.as_deref(),
            Some(Path::new("/tmp/new.onnx"))
        );
        assert_eq!(
            EngineSpec::reference_default().backend,
            BackendChoice::Tract
        );
    }

    #[test]
    fn impossible_specs_say_why() {
        for (spec, says) in [
            ("pytorch", "unknown backend"),
            ("tract:int8", "FP32 only"),
            ("tract:cuda", "CPU only"),
            ("onnxruntime:fp16", "FP16 models on the GPU"),
            ("tensorrt:cpu", "GPU"),
            ("onnxruntime:cpu:cpu", "given twice"),
            ("onnxruntime,model=x", "seg=PATH"),
        ] {
            let e = spec.parse::<EngineSpec>().unwrap_err();
            assert!(e.to_string().contains(says), "{spec}: {e}");
        }
    }

    #[test]
    fn an_fp16_candidate_runs_the_fp16_files_beside_the_models() {
        let mut base = crate::config::parse(
            &format!(
                "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"{m}/seg.onnx\"\n[models.classifier]\npath = \"{m}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n",
                m = concat!(env!("CARGO_MANIFEST_DIR"), "/models")
            ),
            Path::new("/tmp/sealcheck.toml"),
        )
        .unwrap();
        base.inference.precision = EnginePrecision::Fp32;
        let spec: EngineSpec = "onnxruntime:cuda:fp16".parse().unwrap();
        let config = spec.config(&base).unwrap();
        assert!(config.segmentation.path.ends_with("models/seg_fp16.onnx"));
        assert!(config.classifier.path.ends_with("models/cls_fp16.onnx"));
        assert_eq!(config.inference.precision, EnginePrecision::Fp16);
        assert_eq!(config.inference.device, ComputeDevice::Cuda);
    }

    #[test]
    fn int8_models_sit_beside_the_fp32_ones() {
        assert_eq!(
            int8_sibling(Path::new("/m/seg.onnx")),
            PathBuf::from("/m/seg_int8.onnx")
        );
    }
}
