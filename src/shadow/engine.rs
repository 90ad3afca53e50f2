//! Opening a shadow: its config, then the steps of a model swap (open,
//! contract, warm-up), each of which can refuse it without touching
//! production.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{
    BackendChoice, ComputeDevice, Config, EnginePrecision, ShadowConfig, int8_sibling,
};
use crate::frame::TensorGeometry;
use crate::infer::{self, InferenceBackend};
use crate::model_id::ModelIds;

/// Why a shadow was not opened; production runs on.
#[derive(Debug, Clone, thiserror::Error)]
#[error("shadow refused at step `{step}` ({key}): {detail}")]
pub struct ShadowRefused {
    /// `models` (a file to run is missing), `open` (file, engine, IO
    /// contract), `contract` (tensor shapes against production's), `warm-up`.
    pub step: &'static str,
    /// The config key to look at, e.g. `[shadow] classifier`.
    pub key: &'static str,
    pub detail: String,
}

/// A shadow ready to judge.
pub struct OpenedShadow {
    pub backend: Box<dyn InferenceBackend>,
    pub models: Arc<ModelIds>,
    /// The config it runs under (production's, with the shadow's keys).
    pub config: Config,
    /// Why `auto` chose this engine, or that it was named.
    pub reason: String,
}

/// Production's config with the shadow's keys applied: the config the
/// shadow's engine opens. Preprocessing is on the CPU (the shadow runs on
/// the host path whatever production does).
pub fn engine_config(production: &Config, shadow: &ShadowConfig) -> Result<Config, ShadowRefused> {
    let mut config = production.clone();
    config.shadow = None;
    config.inference.preprocess = ComputeDevice::Cpu;
    if let Some(backend) = shadow.backend {
        config.inference.backend = backend;
    }
    if let Some(device) = shadow.device {
        config.inference.device = device;
    }
    let backend = config.inference.backend;
    if let Some(precision) = shadow.precision
        && backend == BackendChoice::TensorRt
    {
        config.inference.tensorrt.precision = precision;
    }
    // ONNX Runtime INT8 runs the quantized files beside the FP32 ones, as
    // `sealcheck evaluate --candidate onnxruntime:cpu:int8` does.
    let quantized = shadow.precision == Some(EnginePrecision::Int8)
        && matches!(backend, BackendChoice::OnnxRuntime | BackendChoice::Auto);
    config.segmentation.path = model_path(
        &production.segmentation.path,
        shadow.segmentation.as_deref(),
        quantized,
        "[shadow] segmentation",
    )?;
    config.classifier.path = model_path(
        &production.classifier.path,
        shadow.classifier.as_deref(),
        quantized,
        "[shadow] classifier",
    )?;
    Ok(config)
}

fn model_path(
    production: &Path,
    named: Option<&Path>,
    quantized: bool,
    key: &'static str,
) -> Result<PathBuf, ShadowRefused> {
    match named {
        Some(path) => Ok(path.to_path_buf()),
        None if quantized => {
            let path = int8_sibling(production);
            if path.is_file() {
                Ok(path)
            } else {
                Err(ShadowRefused {
                    step: "models",
                    key,
                    detail: format!(
                        "precision = \"int8\" on ONNX Runtime runs {}, which does not exist; make it with `make demo-assets` or scripts/demo/quantize_int8.py, or name the file in {key}",
                        path.display()
                    ),
                })
            }
        }
        None => Ok(production.to_path_buf()),
    }
}

/// Opens the shadow, checks it takes and gives what production does
/// (`geometry`: same tensor shapes, so one preprocessing serves both) and
/// warms it up. Runs on the shadow's own thread.
pub fn open(
    production: &Config,
    shadow: &ShadowConfig,
    geometry: TensorGeometry,
) -> Result<OpenedShadow, ShadowRefused> {
    let config = engine_config(production, shadow)?;
    // The key to look at: the shadow's own file when it names one, else
    // the engine keys, else the table.
    let engine_key = if shadow.backend.is_some() || shadow.device.is_some() {
        "[shadow] backend"
    } else {
        "[shadow]"
    };
    let model_key = |named: &Option<PathBuf>, key: &'static str| {
        if named.is_some() { key } else { engine_key }
    };
    let key_of = |message: &str| {
        let names = |path: &Option<PathBuf>| {
            path.as_ref()
                .is_some_and(|p| message.contains(&p.display().to_string()))
        };
        if names(&shadow.classifier) {
            "[shadow] classifier"
        } else if names(&shadow.segmentation) {
            "[shadow] segmentation"
        } else {
            engine_key
        }
    };
    // Model IO names and classes come from production's [models.*]: a fix
    // there would change production too.
    let shared = "(a shadow reads its input and output names and classes from production's [models.*] keys: its models must use the same ones)";
    let refuse = |step, detail: String| ShadowRefused {
        step,
        key: key_of(&detail),
        detail: if detail.contains("[models.") {
            format!("{detail} {shared}")
        } else {
            detail
        },
    };
    let mut selection = infer::open_backend(&config).map_err(|e| refuse("open", e.to_string()))?;
    let shadow_geometry = infer::checked_geometry(&config, selection.backend.as_ref())
        .map_err(|e| refuse("contract", e.to_string()))?;
    if shadow_geometry != geometry {
        let segmentation_differs = (shadow_geometry.seg_hw, shadow_geometry.seg_classes)
            != (geometry.seg_hw, geometry.seg_classes);
        let key = if segmentation_differs {
            model_key(&shadow.segmentation, "[shadow] segmentation")
        } else {
            model_key(&shadow.classifier, "[shadow] classifier")
        };
        return Err(ShadowRefused {
            step: "contract",
            key,
            detail: format!(
                "the shadow's tensor shapes {shadow_geometry:?} differ from production's {geometry:?}: a shadow judges the same preprocessed frames, so it must take and give the same shapes"
            ),
        });
    }
    // The shadow judges one frame at a time.
    infer::warm_up(selection.backend.as_mut(), geometry, 1)
        .map_err(|e| refuse("warm-up", e.to_string()))?;
    Ok(OpenedShadow {
        backend: selection.backend,
        models: Arc::new(ModelIds::of(&config)),
        config,
        reason: selection.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn production() -> Config {
        let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
        let text = format!(
            "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"{models}/seg.onnx\"\n\
             [models.classifier]\npath = \"{models}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n\
             [shadow]\nbackend = \"onnxruntime\"\nprecision = \"int8\"\nevery = 3\n"
        );
        crate::config::parse(&text, Path::new("/tmp/sealcheck.toml")).unwrap()
    }

    #[test]
    fn an_int8_shadow_on_onnx_runtime_runs_the_quantized_files_on_the_cpu() {
        let production = production();
        let shadow = production.shadow.clone().unwrap();
        assert_eq!(shadow.every, 3);
        let config = engine_config(&production, &shadow).unwrap();
        assert!(config.segmentation.path.ends_with("models/seg_int8.onnx"));
        assert!(config.classifier.path.ends_with("models/cls_int8.onnx"));
        assert_eq!(config.inference.backend, BackendChoice::OnnxRuntime);
        assert_eq!(config.inference.preprocess, ComputeDevice::Cpu);
        assert!(config.shadow.is_none());
    }

    #[test]
    fn a_missing_quantized_file_is_refused_naming_the_key() {
        let mut production = production();
        production.segmentation.path = "/nowhere/seg.onnx".into();
        let shadow = production.shadow.clone().unwrap();
        let refused = engine_config(&production, &shadow).err().unwrap();
        assert_eq!(
            (refused.step, refused.key),
            ("models", "[shadow] segmentation")
        );
        assert!(
            refused.detail.contains("/nowhere/seg_int8.onnx"),
            "{refused}"
        );
    }
}
