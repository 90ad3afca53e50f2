//! Engine-build settings from `[inference.tensorrt]` (precision, workspace,
//! engine folder, INT8 images, device), resolved against systemd's
//! `STATE_DIRECTORY`.

use std::path::{Path, PathBuf};

use super::bridge::Precision;
use super::error::TrtError;
use crate::config::{Config, EnginePrecision};

/// Engine-build settings, from `[inference.tensorrt]`; engines are cached in
/// `engine_dir`, or `$STATE_DIRECTORY/engines` under systemd, or `engines/`
/// next to the segmentation model.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRtSettings {
    pub precision: Precision,
    pub workspace_mib: u64,
    pub engine_dir: PathBuf,
    pub calibration_images: Option<PathBuf>,
    pub device: usize,
}

impl TensorRtSettings {
    pub fn from_config(cfg: &Config) -> Result<Self, TrtError> {
        Self::resolve(
            cfg,
            std::env::var("STATE_DIRECTORY")
                .ok()
                .filter(|v| !v.is_empty()),
        )
    }

    /// As `from_config`, with systemd's `STATE_DIRECTORY` given (tests pass their own).
    pub fn resolve(cfg: &Config, state_directory: Option<String>) -> Result<Self, TrtError> {
        let trt = &cfg.inference.tensorrt;
        let precision = match trt.precision {
            EnginePrecision::Fp32 => Precision::Fp32,
            EnginePrecision::Fp16 => Precision::Fp16,
            EnginePrecision::Int8 => Precision::Int8,
        };
        let engine_dir = match (&trt.engine_dir, state_directory) {
            (Some(dir), _) => dir.clone(),
            // systemd's StateDirectory= (may list several, colon-separated).
            (None, Some(state)) => {
                PathBuf::from(state.split(':').next().unwrap_or(&state)).join("engines")
            }
            (None, None) => cfg
                .segmentation
                .path
                .parent()
                .unwrap_or(Path::new("."))
                .join("engines"),
        };
        if precision == Precision::Int8 && !super::bridge::int8_calibration_supported() {
            return Err(TrtError::Setting {
                variable: "inference.tensorrt.precision",
                value: "int8".to_string(),
                expected: "fp32 or fp16: this build's TensorRT has no implicit-quantization INT8 calibration",
            });
        }
        Ok(TensorRtSettings {
            precision,
            workspace_mib: trt.workspace_mib,
            engine_dir,
            calibration_images: trt.calibration_images.clone(),
            device: trt.device,
        })
    }
}

pub fn precision_name(precision: Precision) -> &'static str {
    match precision {
        Precision::Fp32 => "fp32",
        Precision::Fp16 => "fp16",
        Precision::Int8 => "int8",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config whose model files exist (contents do not matter here), and its folder.
    fn config() -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        let text = "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"seg.onnx\"\n\
                    [models.classifier]\npath = \"cls.onnx\"\n[output]\nresults = \"results.jsonl\"\n";
        for name in ["seg.onnx", "cls.onnx"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let path = dir.path().join("sealcheck.toml");
        std::fs::write(&path, text).unwrap();
        let cfg = crate::config::load(&path).unwrap();
        (dir, cfg)
    }

    #[test]
    fn defaults_are_fp16_1gib_engines_next_to_the_model() {
        let (_dir, cfg) = config();
        let settings = TensorRtSettings::resolve(&cfg, None).unwrap();
        assert_eq!(settings.precision, Precision::Fp16);
        assert_eq!(settings.workspace_mib, 1024);
        assert_eq!(
            settings.engine_dir,
            cfg.segmentation.path.parent().unwrap().join("engines")
        );
        assert_eq!(settings.device, 0);
    }

    #[test]
    fn systemd_state_directory_holds_the_engines_unless_the_config_names_a_folder() {
        let (_dir, mut cfg) = config();
        let settings = TensorRtSettings::resolve(&cfg, Some("/var/lib/sealcheck".into())).unwrap();
        assert_eq!(
            settings.engine_dir,
            PathBuf::from("/var/lib/sealcheck/engines")
        );
        cfg.inference.tensorrt.engine_dir = Some(PathBuf::from("/srv/e"));
        let explicit = TensorRtSettings::resolve(&cfg, Some("/var/lib/sealcheck".into())).unwrap();
        assert_eq!(explicit.engine_dir, PathBuf::from("/srv/e"));
    }
}
