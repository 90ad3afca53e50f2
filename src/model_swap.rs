//! New models on reload, without a restart and without losing a frame: when a
//! SIGHUP's config names other model files, they are opened beside the running
//! ones on the same engine, checked against the IO contract, held to the
//! `evaluate --gate` rules on `[models] acceptance_images` when that is set,
//! warmed up, and only then handed to the thread that judges frames, which
//! takes them between two frames. A step that fails leaves the running models
//! in place and says which step and rule.
//!
//! ```text
//! reload ─▶ open (same engine) ─▶ contract ─▶ acceptance gate ─▶ warm-up ─▶ swap ─chan─▶ judging thread
//!             └──────── any failure: SwapRefused { step, detail }, running models stay ─────────┘
//! ```
//!
//! The steps are the same on both paths (`prepare_with`); only what is opened
//! differs (`Swappable`):
//! - host path: a whole `InferenceBackend`, to `infer::InferStage` (`prepare`);
//! - GPU device path: only the engine, opened by the running path's
//!   `DeviceModelsOpener` on the reload thread and bound to the device
//!   runner's tensors by the device thread, which completes the frames on
//!   the GPU with the old engine first (`prepare_device`,
//!   `infer::device_stage`). The stream, buffers and GPU preprocessor stay.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{BackendChoice, ComputeDevice, Config, EnginePrecision};
use crate::evaluate::{self, EngineSpec, EvaluateRequest};
use crate::frame::TensorGeometry;
use crate::infer::device_stage::{DeviceCandidate, DeviceModelsOpener, DeviceSwap};
use crate::infer::{self, BackendKind, InferenceBackend, ModelSwap};
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

/// Models opened for a swap: what the steps after `open` need of them.
pub trait Swappable {
    /// The models' tensor shapes (a model that has none breaks the contract).
    fn geometry(&self) -> Result<TensorGeometry, String>;
    /// Runs both models once (and each batch size up to `max_batch`), off
    /// the frame path.
    fn warm_up(&mut self, geometry: TensorGeometry, max_batch: usize) -> Result<(), String>;
}

/// Host path: a whole engine for the infer thread.
impl Swappable for Box<dyn InferenceBackend> {
    fn geometry(&self) -> Result<TensorGeometry, String> {
        infer::geometry(self.as_ref()).map_err(|e| e.to_string())
    }

    fn warm_up(&mut self, geometry: TensorGeometry, max_batch: usize) -> Result<(), String> {
        infer::warm_up(self.as_mut(), geometry, max_batch).map_err(|e| e.to_string())
    }
}

/// Device path: an engine for the device runner, on buffers of its own.
impl Swappable for Box<dyn DeviceCandidate> {
    fn geometry(&self) -> Result<TensorGeometry, String> {
        Ok(self.as_ref().geometry())
    }

    /// The candidate warms every batch size its runner takes itself.
    fn warm_up(&mut self, _geometry: TensorGeometry, _max_batch: usize) -> Result<(), String> {
        self.as_mut().warm_up().map_err(|e| e.to_string())
    }
}

/// Opens, checks, gates and warms up `new`'s models on `running`'s engine,
/// for the host path's infer thread.
pub fn prepare(
    running_config: &Config,
    new: &Config,
    running: RunningEngine,
) -> Result<ModelSwap, SwapRefused> {
    let (backend, models) = prepare_with(running_config, new, running, |config| {
        infer::open_backend(config)
            .map(|selection| selection.backend)
            .map_err(|e| e.to_string())
    })?;
    Ok(ModelSwap {
        backend: Some(backend),
        models,
        on_swapped: None,
    })
}

/// As `prepare`, for the GPU device path: `opener` is the running path's,
/// which opens the new engine on the same device (and stream) from this
/// thread while the device thread goes on inspecting.
pub fn prepare_device(
    running_config: &Config,
    new: &Config,
    running: RunningEngine,
    opener: &dyn DeviceModelsOpener,
) -> Result<DeviceSwap, SwapRefused> {
    let (candidate, models) = prepare_with(running_config, new, running, |config| {
        opener.open(config).map_err(|e| e.to_string())
    })?;
    Ok(DeviceSwap {
        engine: Some(candidate),
        models,
        on_swapped: None,
    })
}

/// The steps both paths share; `open` opens the models of the config it is
/// given (the new model files on the running engine).
pub fn prepare_with<M: Swappable>(
    running_config: &Config,
    new: &Config,
    running: RunningEngine,
    open: impl FnOnce(&Config) -> Result<M, String>,
) -> Result<(M, Arc<ModelIds>), SwapRefused> {
    let refuse = |step, detail: String| SwapRefused { step, detail };
    let mut config = new.clone();
    config.inference = running_config.inference.clone();
    let (backend, device) = engine_choice(running.kind);
    config.inference.backend = backend;
    config.inference.device = device;

    let mut models = open(&config).map_err(|e| refuse("open", e))?;
    let geometry = models.geometry().map_err(|e| refuse("contract", e))?;
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
    models
        .warm_up(geometry, running_config.inference.max_batch)
        .map_err(|e| refuse("warm-up", e))?;
    Ok((models, Arc::new(ModelIds::of(&config))))
}

/// The new models (candidate) against the running ones (reference) on the
/// labelled acceptance folder, both on the running engine. The new models
/// must also keep `[evaluate]`'s floors against the labels, so new models as
/// wrong as the running ones are still refused. Running models below a floor
/// do not block the swap (refusing would keep them on the line); they are
/// logged.
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
    // The limits of the reloaded file, like its acceptance_images: an
    // operator who turns a floor off turns it off for this reload.
    let mut base = running.clone();
    base.evaluate = candidate.evaluate;
    let evaluation = evaluate::evaluate(EvaluateRequest {
        config: base,
        images,
        labels: None,
        candidates: vec![spec(candidate, "new")],
        reference: spec(running, "running"),
        report: report.clone(),
    })
    .map_err(|e| refuse(e.to_string()))?;
    log::info!(target: "sealcheck::model_swap", report:% = report.join("index.html").display(), frames = evaluation.frames; "acceptance evaluation of the new models done");
    for r in evaluation.reference.rules.iter().filter(|r| !r.passed) {
        log::warn!(target: "sealcheck::model_swap", rule = r.rule, detail = r.detail.as_str(); "the running models are outside a floor against the labels of the acceptance images");
    }
    if evaluation.candidates_passed() {
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
