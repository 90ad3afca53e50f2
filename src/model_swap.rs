//! New models on reload, without a restart and without losing a frame: when a
//! SIGHUP's config names other model files, they are opened beside the running
//! ones on the same engine, checked against the IO contract, held to the
//! `evaluate --gate` rules on `[models] acceptance_images` when that is set,
//! warmed up, and only then handed to the infer thread, which takes them
//! between two frames (`infer::InferStage`). A step that fails leaves the
//! running models in place and says which step and rule.
//!
//! ```text
//! reload ─▶ open (same engine) ─▶ contract ─▶ acceptance gate ─▶ warm-up ─▶ ModelSwap ─chan─▶ infer thread
//!             └──────── any failure: SwapRefused { step, detail }, running models stay ─────────┘
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{BackendChoice, ComputeDevice, Config, EnginePrecision};
use crate::evaluate::{self, EngineSpec, EvaluateRequest};
use crate::frame::TensorGeometry;
use crate::infer::{self, BackendKind, ModelSwap};
use crate::model_id::ModelIds;

/// Why new models were not swapped in.
#[derive(Debug, thiserror::Error)]
#[error("model swap refused at step `{step}`: {detail}; the running models stay")]
pub struct SwapRefused {
    /// `open` (file, engine or IO contract), `contract` (tensor shapes),
    /// `acceptance` (a gate rule), `warm-up`.
    pub step: &'static str,
    pub detail: String,
}

/// What the running pipeline judges with: the engine and the tensor shapes
/// its buffers were sized for.
#[derive(Debug, Clone, Copy)]
pub struct RunningEngine {
    pub kind: BackendKind,
    pub geometry: TensorGeometry,
}

/// True when the reload changes model files and nothing else about the models
/// (normalization, classes, ...), which a swap can apply.
pub fn only_paths_changed(old: &Config, new: &Config) -> bool {
    let mut new = new.clone();
    new.segmentation.path = old.segmentation.path.clone();
    new.classifier.path = old.classifier.path.clone();
    old.segmentation == new.segmentation && old.classifier == new.classifier
}

/// True when the reload names other model files.
pub fn paths_changed(old: &Config, new: &Config) -> bool {
    old.segmentation.path != new.segmentation.path || old.classifier.path != new.classifier.path
}

/// Opens, checks, gates and warms up `new`'s models on `running`'s engine.
pub fn prepare(
    running_config: &Config,
    new: &Config,
    running: RunningEngine,
) -> Result<ModelSwap, SwapRefused> {
    let refuse = |step, detail: String| SwapRefused { step, detail };
    let mut config = new.clone();
    config.inference = running_config.inference.clone();
    let (backend, device) = engine_choice(running.kind);
    config.inference.backend = backend;
    config.inference.device = device;

    let mut selection = infer::open_backend(&config).map_err(|e| refuse("open", e.to_string()))?;
    let geometry = infer::geometry(
        selection.backend.segmentation_io(),
        selection.backend.classifier_io(),
    )
    .map_err(|e| refuse("contract", e.to_string()))?;
    if geometry != running.geometry {
        return Err(refuse(
            "contract",
            format!(
                "the new models' tensor shapes {geometry:?} differ from the running ones' {:?}; that needs a restart",
                running.geometry
            ),
        ));
    }
    if let Some(images) = &new.acceptance_images {
        acceptance_gate(running_config, &config, images.clone(), running.kind)?;
    }
    let backend = selection.backend.as_mut();
    let mut seg_logits = vec![0.0; geometry.seg_logits_len()];
    let mut cls_logits = vec![0.0; geometry.cls_classes];
    backend
        .segment(&vec![0.0; geometry.seg_input_len()], &mut seg_logits)
        .and_then(|()| backend.classify(&vec![0.0; geometry.cls_input_len()], &mut cls_logits))
        .map_err(|e| refuse("warm-up", e.to_string()))?;
    Ok(ModelSwap {
        backend: selection.backend,
        models: Arc::new(ModelIds::of(&config)),
    })
}

/// The new models (candidate) against the running ones (reference) on the
/// labelled acceptance folder, both on the running engine.
fn acceptance_gate(
    running: &Config,
    candidate: &Config,
    images: PathBuf,
    kind: BackendKind,
) -> Result<(), SwapRefused> {
    let refuse = |detail: String| SwapRefused {
        step: "acceptance",
        detail,
    };
    let spec = |config: &Config, role: &str| {
        let (backend, device) = engine_choice(kind);
        EngineSpec {
            text: format!("{role} models on {}", kind.as_str()),
            backend,
            device,
            precision: if backend == BackendChoice::TensorRt {
                running.inference.tensorrt.precision
            } else {
                EnginePrecision::Fp32
            },
            segmentation: Some(config.segmentation.path.clone()),
            classifier: Some(config.classifier.path.clone()),
        }
    };
    let report = std::env::var_os("STATE_DIRECTORY")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("sealcheck-acceptance-{}", std::process::id()));
    let evaluation = evaluate::evaluate(EvaluateRequest {
        config: running.clone(),
        images,
        labels: None,
        candidates: vec![spec(candidate, "new")],
        reference: spec(running, "running"),
        report: report.clone(),
    })
    .map_err(|e| refuse(e.to_string()))?;
    log::info!(target: "sealcheck::model_swap", report:% = report.join("index.html").display(), frames = evaluation.frames; "acceptance evaluation of the new models done");
    if evaluation.gate_passed() {
        return Ok(());
    }
    let broken: Vec<String> = evaluation
        .candidates
        .iter()
        .flat_map(|c| {
            let not_run = c
                .result
                .as_ref()
                .err()
                .map(|why| format!("could not run: {why}"));
            not_run.into_iter().chain(
                c.rules
                    .iter()
                    .filter(|r| !r.passed)
                    .map(|r| format!("rule {} broken: {}", r.rule, r.detail)),
            )
        })
        .collect();
    Err(refuse(format!(
        "{} (report: {})",
        broken.join("; "),
        report.join("index.html").display()
    )))
}

/// The explicit config that opens exactly the engine already running.
fn engine_choice(kind: BackendKind) -> (BackendChoice, ComputeDevice) {
    match kind {
        BackendKind::Tract => (BackendChoice::Tract, ComputeDevice::Cpu),
        BackendKind::OnnxRuntimeCpu => (BackendChoice::OnnxRuntime, ComputeDevice::Cpu),
        BackendKind::OnnxRuntimeCuda => (BackendChoice::OnnxRuntime, ComputeDevice::Cuda),
        BackendKind::TensorRt => (BackendChoice::TensorRt, ComputeDevice::Cuda),
    }
}
