//! The one place an engine is chosen, for both paths: the host path's
//! `InferenceBackend` (`open_backend`) and the GPU device path's
//! `DeviceFramePath` (`open_path`). An explicit backend opens exactly that
//! engine or fails, never falls back; `backend = "auto"` climbs one ladder,
//! fastest first, and says why it passed each rung:
//!
//! ```text
//! AUTO_LADDER: TensorRT -> ONNX Runtime CUDA -> ONNX Runtime CPU -> tract
//!   host path:   every rung, each as an InferenceBackend
//!   device path: the GPU rungs, each as a device runner; when none can run
//!                here, the pipeline goes on in host mode (and climbs again)
//! ```
//!
//! Problems with the models themselves stop the start whatever the backend.
//! Above the engines and the runner; nothing below imports it.

use super::backend::{BackendKind, InferenceBackend};
use super::device_error::DeviceFrameError;
use super::device_path::OpenedPath;
use super::error::InferError;
use super::{onnxruntime, tensorrt, tract};
use crate::config::{BackendChoice, ComputeDevice, Config};

/// The engines `backend = "auto"` tries, in order.
pub const AUTO_LADDER: [BackendKind; 4] = [
    BackendKind::TensorRt,
    BackendKind::OnnxRuntimeCuda,
    BackendKind::OnnxRuntimeCpu,
    BackendKind::Tract,
];

/// What trying one rung of the ladder came to.
enum Rung<T, E> {
    Opened(T),
    /// The engine cannot run on this machine: the next rung is tried, and
    /// `why` goes into the reason line.
    Unusable {
        error: E,
        why: String,
    },
    /// Not tried: a rung before showed it cannot run here (a missing ONNX
    /// Runtime library, for its CPU rung after its CUDA rung).
    Passed,
    /// A problem with the models or the config: the start stops.
    Failed(E),
}

/// Tries `rungs` in order with `open`: the first engine that opens, and the
/// reason line naming every rung passed; else the first failure, or the
/// last unusable rung's error when none can run here (`none_tried` when no
/// rung was tried at all, which no ladder here allows: each ends in a rung
/// that is always tried).
fn climb<T, E>(
    rungs: impl IntoIterator<Item = BackendKind>,
    mut open: impl FnMut(BackendKind) -> Rung<T, E>,
    none_tried: impl FnOnce() -> E,
) -> Result<(T, String), E> {
    let mut skipped: Vec<String> = Vec::new();
    let mut last = None;
    for kind in rungs {
        match open(kind) {
            Rung::Opened(engine) => {
                let reason = if skipped.is_empty() {
                    format!("auto: {}", kind.label())
                } else {
                    format!("auto: {}; using {}", skipped.join("; "), kind.label())
                };
                return Ok((engine, reason));
            }
            Rung::Unusable { error, why } => {
                skipped.push(why);
                last = Some(error);
            }
            Rung::Passed => {}
            Rung::Failed(error) => return Err(error),
        }
    }
    Err(last.unwrap_or_else(none_tried))
}

/// The engine chosen at start and why, for the start-up log line.
pub struct BackendSelection {
    pub backend: Box<dyn InferenceBackend>,
    /// e.g. "auto: TensorRT not built in; ONNX Runtime CUDA provider unavailable (...); using ONNX Runtime CPU"
    pub reason: String,
}

/// Opens the host-path engine the config asks for. `[inference] device`
/// applies to `backend = "onnxruntime"`; `auto` always tries CUDA first and
/// says in `reason` why it did not use it.
pub fn open_backend(cfg: &Config) -> Result<BackendSelection, InferError> {
    let selection = match cfg.inference.backend {
        BackendChoice::Tract => BackendSelection {
            backend: Box::new(tract::TractBackend::open(cfg)?),
            reason: "backend = \"tract\" in [inference]".to_string(),
        },
        BackendChoice::OnnxRuntime => {
            let device = cfg.inference.device;
            BackendSelection {
                backend: Box::new(onnxruntime::OrtBackend::open(cfg, device)?),
                reason: format!(
                    "backend = \"onnxruntime\", device = \"{}\" in [inference]",
                    device_name(device)
                ),
            }
        }
        BackendChoice::TensorRt => BackendSelection {
            backend: tensorrt::open_backend(cfg)?,
            reason: "backend = \"tensorrt\" in [inference]".to_string(),
        },
        BackendChoice::Auto => {
            let (backend, reason) = open_auto(cfg)?;
            BackendSelection { backend, reason }
        }
    };
    super::backend::checked_geometry(cfg, selection.backend.as_ref())?;
    Ok(selection)
}

/// `auto` on the host path: every rung of the ladder.
fn open_auto(cfg: &Config) -> Result<(Box<dyn InferenceBackend>, String), InferError> {
    // Without a usable library there is no point asking it about the CPU.
    let mut ort_missing = false;
    climb(
        AUTO_LADDER,
        |kind| match kind {
            BackendKind::TensorRt => match tensorrt::open_backend(cfg) {
                Ok(backend) => Rung::Opened(backend),
                Err(e) if e.is_unavailable() => Rung::Unusable {
                    why: tensorrt::auto_skipped(&e),
                    error: e.into(),
                },
                Err(e) => Rung::Failed(e.into()),
            },
            BackendKind::OnnxRuntimeCuda | BackendKind::OnnxRuntimeCpu => {
                let device = if kind == BackendKind::OnnxRuntimeCuda {
                    ComputeDevice::Cuda
                } else {
                    ComputeDevice::Cpu
                };
                if ort_missing {
                    return Rung::Passed;
                }
                match onnxruntime::OrtBackend::open(cfg, device) {
                    Ok(backend) => Rung::Opened(Box::new(backend) as Box<dyn InferenceBackend>),
                    Err(InferError::CudaUnavailable { library, message }) => {
                        log::info!(library:% = library.display(), error = message.as_str();
                        "auto: ONNX Runtime CUDA provider not usable, trying ONNX Runtime CPU");
                        Rung::Unusable {
                            why: format!("ONNX Runtime CUDA provider unavailable ({message})"),
                            error: InferError::CudaUnavailable { library, message },
                        }
                    }
                    Err(e) if e.is_engine_unavailable() => {
                        log::info!(error:% = e; "auto: ONNX Runtime not usable, using tract");
                        ort_missing = true;
                        Rung::Unusable {
                            why: format!("ONNX Runtime unavailable ({e})"),
                            error: e,
                        }
                    }
                    Err(e) => Rung::Failed(e),
                }
            }
            BackendKind::Tract => match tract::TractBackend::open(cfg) {
                Ok(backend) => Rung::Opened(Box::new(backend) as Box<dyn InferenceBackend>),
                Err(e) => Rung::Failed(e),
            },
        },
        || InferError::Mismatch("backend = \"auto\": no inference engine was tried".to_string()),
    )
}

/// Which engine the device path opens, decided from the config alone
/// before any engine is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevicePlan {
    /// `backend = "tensorrt"`.
    TensorRt,
    /// `backend = "onnxruntime"`, `device = "cuda"`.
    OnnxRuntimeCuda,
    /// `backend = "auto"`: the ladder's GPU rungs; when neither can run
    /// here, the pipeline goes on in host mode.
    Auto,
}

/// Whether the config runs each frame wholly on the GPU (device mode): CUDA
/// preprocessing, a GPU engine (or `auto`), and a build with the kernels.
/// `None` is host mode: preprocess and infer threads. A camera with a
/// cavity layout changes nothing here: the device path crops each cavity on
/// the GPU (`device_stage`), as the host path crops on the host.
pub fn device_plan(config: &Config) -> Option<DevicePlan> {
    if !crate::gpu::BUILT_IN || config.inference.preprocess != ComputeDevice::Cuda {
        return None;
    }
    match config.inference.backend {
        BackendChoice::TensorRt => Some(DevicePlan::TensorRt),
        BackendChoice::OnnxRuntime if config.inference.device == ComputeDevice::Cuda => {
            Some(DevicePlan::OnnxRuntimeCuda)
        }
        BackendChoice::Auto => Some(DevicePlan::Auto),
        _ => None,
    }
}

/// Opens the device path `plan` names, on a fresh stream: each model once.
pub fn open_path(config: &Config, plan: DevicePlan) -> Result<OpenedPath, DeviceFrameError> {
    let (path, reason) = match plan {
        DevicePlan::TensorRt => (
            tensorrt::open_device(config)?,
            "backend = \"tensorrt\" in [inference]".to_string(),
        ),
        DevicePlan::OnnxRuntimeCuda => (
            onnxruntime::device::open(config)?,
            "backend = \"onnxruntime\", device = \"cuda\" in [inference]".to_string(),
        ),
        DevicePlan::Auto => {
            let gpu_rungs = AUTO_LADDER.into_iter().filter(|kind| kind.on_gpu());
            climb(
                gpu_rungs,
                |kind| {
                    let opened = match kind {
                        BackendKind::TensorRt => tensorrt::open_device(config),
                        _ => onnxruntime::device::open(config),
                    };
                    match opened {
                        Ok(path) => Rung::Opened(path),
                        Err(e) if e.is_engine_unavailable() => {
                            let why = match kind {
                                BackendKind::TensorRt => tensorrt::auto_skipped(&e),
                                _ => {
                                    log::info!(error:% = e; "auto: ONNX Runtime CUDA not usable for the device path; going on in host mode");
                                    format!("{} unavailable ({e})", kind.label())
                                }
                            };
                            Rung::Unusable { error: e, why }
                        }
                        Err(e) => Rung::Failed(e),
                    }
                },
                || DeviceFrameError::Unsupported("a build with no GPU engine to try"),
            )?
        }
    };
    Ok(OpenedPath::new(path, reason))
}

fn device_name(device: ComputeDevice) -> &'static str {
    match device {
        ComputeDevice::Cpu => "cpu",
        ComputeDevice::Cuda => "cuda",
    }
}

/// The engines this build can use, for `sealcheck --version`.
pub fn available_backends() -> Vec<String> {
    let mut backends = vec![
        "tract".to_string(),
        format!(
            "onnxruntime (cpu; cuda if provider present; libonnxruntime 1.{}+ loaded at run time)",
            ort::MINOR_VERSION
        ),
    ];
    if tensorrt::BUILT_IN {
        backends.push("tensorrt".to_string());
    }
    backends
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_names_each_rung_passed_and_stops_at_a_model_problem() {
        let ladder = [
            BackendKind::TensorRt,
            BackendKind::OnnxRuntimeCpu,
            BackendKind::Tract,
        ];
        let none_tried = || "none tried";
        let opened = climb(
            ladder,
            |kind| match kind {
                BackendKind::Tract => Rung::Opened(kind),
                _ => Rung::Unusable {
                    error: "no",
                    why: format!("{} missing", kind.label()),
                },
            },
            none_tried,
        );
        assert_eq!(
            opened,
            Ok((
                BackendKind::Tract,
                "auto: TensorRT missing; ONNX Runtime CPU missing; using tract".to_string()
            ))
        );
        let first = climb(ladder, Rung::<_, &str>::Opened, none_tried);
        assert_eq!(
            first,
            Ok((BackendKind::TensorRt, "auto: TensorRT".to_string()))
        );
        let failed = climb(
            ladder,
            |kind| match kind {
                BackendKind::TensorRt => Rung::Failed("bad model"),
                _ => Rung::Opened(kind),
            },
            none_tried,
        );
        assert_eq!(failed, Err("bad model"), "a model problem is never skipped");
        let none = climb(
            ladder,
            |kind| match kind {
                BackendKind::Tract => Rung::<BackendKind, _>::Passed,
                _ => Rung::Unusable {
                    error: kind.as_str(),
                    why: String::new(),
                },
            },
            none_tried,
        );
        assert_eq!(
            none,
            Err("onnxruntime-cpu"),
            "none usable: the last tried rung's error"
        );
        let nothing = climb(ladder, |_| Rung::<BackendKind, &str>::Passed, none_tried);
        assert_eq!(nothing, Err("none tried"), "no rung tried: no panic either");
    }

    #[test]
    fn the_mode_is_decided_from_the_config_alone() {
        let mut config = crate::config::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo.toml"),
        )
        .unwrap();
        let on_gpu = |plan| crate::gpu::BUILT_IN.then_some(plan);
        assert_eq!(device_plan(&config), None, "CPU preprocessing is host mode");
        config.inference.preprocess = ComputeDevice::Cuda;
        assert_eq!(device_plan(&config), on_gpu(DevicePlan::Auto));
        config.inference.backend = BackendChoice::Tract;
        assert_eq!(device_plan(&config), None);
        config.inference.backend = BackendChoice::OnnxRuntime;
        config.inference.device = ComputeDevice::Cpu;
        assert_eq!(device_plan(&config), None);
        config.inference.device = ComputeDevice::Cuda;
        assert_eq!(device_plan(&config), on_gpu(DevicePlan::OnnxRuntimeCuda));
        config.inference.backend = BackendChoice::TensorRt;
        assert_eq!(device_plan(&config), on_gpu(DevicePlan::TensorRt));
        // A cavity layout is cropped on the GPU: no host fallback.
        let mut cavities = crate::config::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo-cavities.toml"),
        )
        .unwrap();
        assert!(cavities.cameras[0].source.layout.is_some());
        cavities.inference.preprocess = ComputeDevice::Cuda;
        cavities.inference.backend = BackendChoice::OnnxRuntime;
        cavities.inference.device = ComputeDevice::Cuda;
        assert_eq!(device_plan(&cavities), on_gpu(DevicePlan::OnnxRuntimeCuda));
    }
}
