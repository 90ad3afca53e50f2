//! `sealcheck check-config`: everything `run` would refuse at start, checked
//! without a camera, so that a config that passes runs and judges parts.
//!
//! ```text
//! the file (every problem at once, file:line:col) -> the MQTT files
//!   -> both models opened with the configured backend's loader (or tract, the
//!      reference, where that engine cannot run here), their IO against the
//!      contract and [models.*], one warm-up run -> each recipe's other model
//!      files the same way, with [models.*]'s tensor shapes -> the shadow, as
//!      `run` opens it
//! ```
//!
//! Each step that fails ends in a typed error whose chain `main` maps to exit 78.
//! A `[trigger]` that can never fire is a problem of the file itself
//! (`config::validate`), so `run` refuses it too.

use std::path::{Path, PathBuf};

use crate::config::{self, BackendChoice, ComputeDevice, Config, ConfigError, TriggerMode};
use crate::frame::TensorGeometry;
use crate::infer::{self, InferError, InferenceBackend, ModelIo, ModelRole};
use crate::line::mqtt::MqttFilesError;
use crate::shadow::ShadowRefused;

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("config file {}: [mqtt]", path.display())]
    Mqtt {
        path: PathBuf,
        #[source]
        error: MqttFilesError,
    },
    #[error("config file {}: the models do not open with {engine}; `run` would exit 78 at start", path.display())]
    Models {
        path: PathBuf,
        engine: String,
        #[source]
        error: Box<InferError>,
    },
    #[error("config file {}", path.display())]
    Shadow {
        path: PathBuf,
        #[source]
        error: ShadowRefused,
    },
    #[error("config file {}: [recipes.{recipe}]: {message}", path.display())]
    Recipe {
        path: PathBuf,
        recipe: String,
        message: String,
    },
    #[error("config file {}", path.display())]
    OpcUaUsers {
        path: PathBuf,
        #[source]
        error: crate::opcua::UsersError,
    },
    #[error("config file {}: [{table}]: {message}", path.display())]
    Layout {
        path: PathBuf,
        /// `source.layout` or `cameras.NAME.layout`.
        table: String,
        message: String,
    },
}

/// What was checked, one line each, for the operator.
pub struct Checked {
    pub lines: Vec<String>,
}

/// Checks the config file at `path` as `run` would take it.
pub fn check(path: &Path) -> Result<Checked, CheckError> {
    let cfg = config::load(path)?;
    let shown = path.display();
    let mut lines = Vec::new();
    if let Some(mqtt) = &cfg.mqtt {
        crate::line::mqtt::check_files(mqtt).map_err(|error| CheckError::Mqtt {
            path: path.to_path_buf(),
            error,
        })?;
    }
    for camera in &cfg.cameras {
        if let Some(line) = check_layout(path, camera)? {
            lines.push(format!("{shown}: {line}"));
        }
    }
    // `run` reads the OPC UA users at start: a bad line stops it there.
    if let Some(users_file) = cfg.opcua.as_ref().and_then(|o| o.users_file.as_ref()) {
        let users =
            crate::opcua::Users::read(users_file).map_err(|error| CheckError::OpcUaUsers {
                path: path.to_path_buf(),
                error,
            })?;
        lines.push(format!(
            "{shown}: [opcua] users_file: {} user(s)",
            users.len()
        ));
    }
    let (models, geometry) = check_models(&cfg)?;
    lines.push(format!("{shown}: {models}"));
    for line in check_recipes(&cfg, geometry)? {
        lines.push(format!("{shown}: {line}"));
    }
    lines.push(format!("{shown}: {}", triggers(&cfg)));
    // The shadow is opened as `run` opens it: a model that cannot open,
    // breaks the contract or fails its warm-up is named here.
    let shadow = crate::shadow::check(&cfg).map_err(|error| CheckError::Shadow {
        path: path.to_path_buf(),
        error,
    })?;
    if let Some(engine) = shadow {
        lines.push(format!("{shown}: shadow ok (runs on {engine})"));
    }
    let sources = cfg
        .cameras
        .iter()
        .map(|c| match &c.name {
            Some(name) => format!("camera {name}: {}", c.source.kind.name()),
            None => format!("{} source", c.source.kind.name()),
        })
        .collect::<Vec<_>>()
        .join(", ");
    lines.push(format!(
        "{shown}: ok ({sources}, backend {})",
        cfg.inference.backend.as_str()
    ));
    Ok(Checked { lines })
}

/// A camera's cavity layout against the frames it will get, where they can
/// be known without a camera: the size the config fixes (checked by the
/// config itself) or an image sequence's first image. `Some(line)` saying
/// what is judged per frame when there is a layout.
fn check_layout(path: &Path, camera: &config::CameraConfig) -> Result<Option<String>, CheckError> {
    let Some(layout) = &camera.source.layout else {
        return Ok(None);
    };
    let table = match &camera.name {
        Some(name) => format!("cameras.{name}.layout"),
        None => "source.layout".to_string(),
    };
    let failed = |message: String| CheckError::Layout {
        path: path.to_path_buf(),
        table: table.clone(),
        message,
    };
    // The size the config fixes (`test`, `csi`) was checked against the
    // layout when the file was read; an image sequence's is its first image's.
    let size = match &camera.source.kind {
        config::SourceKind::Images { location, .. } => {
            let first = config::image_file(location, 0);
            let size = imagesize::size(&first).map_err(|e| {
                failed(format!(
                    "the first image {} cannot be read for its size ({e}); every cavity of its frame would fail",
                    first.display()
                ))
            })?;
            let (width, height) = (size.width as u32, size.height as u32);
            layout
                .check_frame(width, height)
                .map_err(|m| failed(m.to_string()))?;
            Some((width, height))
        }
        kind => kind.frame_size(),
    };
    let frame = size.map_or_else(
        || "frames the camera sets (checked on its first frame)".to_string(),
        |(width, height)| format!("{width}x{height} frames"),
    );
    let disabled = layout.count() - layout.enabled_count();
    let seam = layout.margin_reaches_a_neighbour().map_or(String::new(), |(a, b)| {
        format!(
            "; warning: with margin {} px the crops of cavities {a} and {b} overlap, so each model sees the edge of the neighbour's cell (lower `margin` to at most half the gap between cavities)",
            layout.margin
        )
    });
    let grid = layout
        .grid
        .map_or(String::new(), |(rows, cols)| format!("{rows}x{cols} "));
    Ok(Some(format!(
        "[{table}]: {grid}{} cavities, {} judged per cycle ({disabled} disabled), margin {} px, on {frame}{seam}",
        layout.count(),
        layout.enabled_count(),
        layout.margin
    )))
}

/// The engine whose loader checks the model files, and why that one: the
/// configured one where it is a host engine that runs here; TensorRT builds
/// its engines from the same ONNX files at start (`build-engine` checks
/// that), so they are read by the reference.
fn loader(cfg: &Config) -> (Config, String) {
    let mut checked = cfg.clone();
    checked.shadow = None;
    let note = match cfg.inference.backend {
        BackendChoice::Tract | BackendChoice::OnnxRuntime => "the configured backend",
        BackendChoice::Auto => {
            checked.inference.backend = BackendChoice::OnnxRuntime;
            checked.inference.device = ComputeDevice::Cpu;
            "the CPU rung of backend = \"auto\""
        }
        BackendChoice::TensorRt => {
            checked.inference.backend = BackendChoice::Tract;
            "tract, the reference (TensorRT builds its engines from these files at start: `sealcheck build-engine --config FILE` builds them now)"
        }
    };
    (checked, note.to_string())
}

/// Each recipe's models as a switch to it opens them: other model files
/// opened, checked and run once like `[models.*]`'s, with the same tensor
/// shapes (a switch keeps the running buffers). One line per recipe.
fn check_recipes(cfg: &Config, geometry: TensorGeometry) -> Result<Vec<String>, CheckError> {
    let Some(recipes) = &cfg.recipes else {
        return Ok(Vec::new());
    };
    let base = (
        cfg.segmentation.path.as_path(),
        cfg.classifier.path.as_path(),
    );
    let mut lines = Vec::new();
    for recipe in &recipes.list {
        let start = if recipe.id == recipes.start().id {
            ", the start recipe"
        } else {
            ""
        };
        let what = format!("recipe {} (id {}{start})", recipe.name, recipe.id);
        if recipe.models(cfg) == base {
            lines.push(format!("{what}: the models of [models.*]"));
            continue;
        }
        let (models, theirs) = check_models(&recipe.config(cfg)).map_err(|e| match e {
            CheckError::Models { engine, error, .. } => CheckError::Recipe {
                path: cfg.path.clone(),
                recipe: recipe.name.to_string(),
                message: format!(
                    "its models do not open with {engine}: {error}; a switch to it would be refused (run keeps running the active recipe)"
                ),
            },
            other => other,
        })?;
        if theirs != geometry {
            return Err(CheckError::Recipe {
                path: cfg.path.clone(),
                recipe: recipe.name.to_string(),
                message: format!(
                    "its models' tensor shapes {theirs:?} differ from [models.*]'s {geometry:?}: a switch keeps the running buffers, so recipes need models of the same input size and classes"
                ),
            });
        }
        lines.push(format!("{what}: {models}"));
    }
    Ok(lines)
}

/// Opens both models, checks their IO against the contract and `[models.*]`
/// and runs them once; the line says what was checked, and their shapes.
fn check_models(cfg: &Config) -> Result<(String, TensorGeometry), CheckError> {
    let (checked, mut note) = loader(cfg);
    let failed = |engine: String, error| CheckError::Models {
        path: cfg.path.clone(),
        engine,
        error: Box::new(error),
    };
    let opened = match infer::open_backend(&checked) {
        Ok(opened) => opened,
        // ONNX Runtime is not usable on this machine: the file is still read
        // by a loader, the reference's.
        // Said in the line printed, not logged: a problem's lines are the
        // only ones on stderr.
        Err(e) if e.is_engine_unavailable() => {
            let mut reference = checked.clone();
            reference.inference.backend = BackendChoice::Tract;
            note = format!(
                "tract, the reference: {} cannot run on this machine ({e})",
                engine_name(&checked)
            );
            infer::open_backend(&reference).map_err(|e| failed("tract".into(), e))?
        }
        Err(e) => return Err(failed(engine_name(&checked), e)),
    };
    let mut backend = opened.backend;
    let engine = backend.kind().label();
    let geometry = infer::checked_geometry(&checked, backend.as_ref())
        .map_err(|e| failed(engine.to_string(), e))?;
    infer::warm_up(backend.as_mut(), geometry, 1).map_err(|e| failed(engine.to_string(), e))?;
    let line = format!(
        "models opened with {engine} ({note}): {}; {}; names, shapes and classes match the contract and [models.*], one run on zeros",
        model_line(
            backend.as_ref(),
            ModelRole::Segmentation,
            &cfg.segmentation.path,
            format!(
                "mask_class {} of {}",
                cfg.segmentation.mask_class, geometry.seg_classes
            )
        ),
        model_line(
            backend.as_ref(),
            ModelRole::Classifier,
            &cfg.classifier.path,
            format!(
                "defect_class {} of {}",
                cfg.classifier.defect_class, geometry.cls_classes
            )
        ),
    );
    Ok((line, geometry))
}

fn engine_name(cfg: &Config) -> String {
    match cfg.inference.backend {
        BackendChoice::OnnxRuntime => format!(
            "ONNX Runtime ({})",
            match cfg.inference.device {
                ComputeDevice::Cpu => "cpu",
                ComputeDevice::Cuda => "cuda",
            }
        ),
        other => other.as_str().to_string(),
    }
}

fn model_line(
    backend: &dyn InferenceBackend,
    role: ModelRole,
    path: &Path,
    classes: String,
) -> String {
    let io: &ModelIo = backend.io(role);
    format!(
        "{role} {} (input \"{}\" {:?}, output \"{}\" {:?}, {classes})",
        path.display(),
        io.input_name,
        io.input_shape,
        io.output_name,
        io.output_shape
    )
}

/// How parts are triggered, for the operator to read back.
fn triggers(cfg: &Config) -> String {
    match cfg.trigger.mode {
        TriggerMode::Free => "trigger: free (every frame is a part)".to_string(),
        TriggerMode::Camera => {
            "trigger: camera (the camera's input line; each frame is a part)".to_string()
        }
        TriggerMode::Plc => {
            let mut ways = Vec::new();
            if let Some(modbus) = &cfg.modbus {
                ways.push(format!("Modbus TCP on {}", modbus.listen));
            }
            if let Some(opcua) = &cfg.opcua {
                ways.push(format!(
                    "OPC UA StartSingleJob on opc.tcp://{}/",
                    opcua.listen
                ));
            }
            if cfg.trigger.http
                && let Some(status) = &cfg.status
            {
                ways.push(format!("POST /api/trigger on {}", status.listen));
            }
            let mut line = format!("trigger: plc, parts triggered by {}", ways.join(" and "));
            // Not a problem (a test pattern may stand in for a camera), but
            // the likeliest reason a first plc run judges nothing.
            if let Some(stored) = cfg.cameras.iter().find(|c| !c.source.kind.is_live()) {
                line.push_str(&format!(
                    "; note: the source (kind = \"{}\") is not live: it is read as fast as it decodes and may end before a trigger comes (config/demo-plc.toml has a live one)",
                    stored.source.kind.name()
                ));
            }
            line
        }
    }
}
