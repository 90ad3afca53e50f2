//! Making one model's session: session options, the CUDA execution
//! provider (on a given stream for the device path), and the model's
//! inputs and outputs as the session declares them.

use std::path::Path;

use ort::ep::cuda::ConvAlgorithmSearch;
use ort::ep::{ArenaExtendStrategy, ExecutionProvider};
use ort::session::Session;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::value::{Outlet, TensorElementType, ValueType};

use super::runtime::OrtRuntime;
#[cfg(feature = "cuda")]
use crate::config::Config;
use crate::config::{
    ArenaExtend, ComputeDevice, ConvAlgoSearch, GraphOptimization, OnnxRuntimeConfig,
};
use crate::infer::error::InferError;
use crate::infer::model_io::{DeclaredTensor, Dim, ModelSpec};
#[cfg(feature = "cuda")]
use crate::infer::model_io::{ModelIo, record_opened, resolve_model_io};

pub(super) const ENGINE: &str = "ONNX Runtime";

/// A CUDA stream for the sessions' compute (`CUstream`), shared with the
/// CUDA preprocessing kernels so a frame runs on one stream.
#[derive(Debug, Clone, Copy)]
pub struct ComputeStream(pub *mut std::ffi::c_void);

pub(super) fn create_session(
    runtime: &OrtRuntime,
    settings: &OnnxRuntimeConfig,
    spec: &ModelSpec<'_>,
    device: ComputeDevice,
    stream: Option<ComputeStream>,
) -> Result<Session, InferError> {
    let library = &runtime.library;
    let engine_error = |action: &str, message: String| InferError::OrtEngine {
        library: library.clone(),
        action: format!("{action} for {} model {}", spec.role, spec.path.display()),
        message,
    };
    let mut builder = Session::builder(&runtime.env)
        .map_err(|e| engine_error("create session options", e.to_string()))?
        .with_optimization_level(graph_optimization_level(settings.graph_optimization))
        .map_err(|e| engine_error("set the graph optimization level", e.to_string()))?
        .with_memory_pattern(settings.memory_pattern)
        .map_err(|e| engine_error("set the memory pattern", e.to_string()))?;
    // Intra-op threads come from the environment's pool, shared by both sessions.
    // A graph needs inputs and outputs at fixed addresses: only the device path
    // (IO binding on the preprocessor's buffers, a stream given) has them.
    let uses_cuda_graph = device == ComputeDevice::Cuda && settings.cuda_graph && stream.is_some();
    if device == ComputeDevice::Cuda {
        builder = register_cuda(builder, settings, uses_cuda_graph, library, stream)?;
    }
    builder.commit_from_file(spec.path).map_err(|e| {
        let message = e.to_string();
        match e.code() {
            ort::ErrorCode::InvalidProtobuf
            | ort::ErrorCode::NoSuchFile
            | ort::ErrorCode::NoModel => InferError::ModelLoad {
                role: spec.role,
                path: spec.path.to_path_buf(),
                engine: ENGINE,
                message,
            },
            ort::ErrorCode::ExecutionProviderFailure if device == ComputeDevice::Cuda => {
                InferError::CudaUnavailable {
                    library: library.clone(),
                    message,
                }
            }
            _ => InferError::EnginePrepare {
                role: spec.role,
                path: spec.path.to_path_buf(),
                engine: ENGINE,
                message: if uses_cuda_graph && message.to_ascii_lowercase().contains("graph") {
                    format!(
                        "{message} (a CUDA graph needs every node of the model on CUDA: \
                         set cuda_graph = false in [inference.onnxruntime])"
                    )
                } else {
                    message
                },
            },
        }
    })
}

fn register_cuda(
    builder: SessionBuilder,
    settings: &OnnxRuntimeConfig,
    cuda_graph: bool,
    library: &Path,
    stream: Option<ComputeStream>,
) -> Result<SessionBuilder, InferError> {
    let unavailable = |message: String| InferError::CudaUnavailable {
        library: library.to_path_buf(),
        message,
    };
    // Ask first: the library says whether it was built with the provider at all,
    // which reads better than the registration error.
    match ort::ep::CUDA::is_available() {
        Ok(true) => {}
        Ok(false) => {
            return Err(unavailable(
                "this ONNX Runtime build has no CUDA execution provider".into(),
            ));
        }
        Err(e) => return Err(unavailable(format!("cannot list execution providers: {e}"))),
    }
    let mut cuda = ort::ep::CUDA::default()
        .with_arena_extend_strategy(match settings.cuda_arena_extend_strategy {
            ArenaExtend::NextPowerOfTwo => ArenaExtendStrategy::NextPowerOfTwo,
            ArenaExtend::SameAsRequested => ArenaExtendStrategy::SameAsRequested,
        })
        .with_conv_algorithm_search(match settings.cudnn_conv_algo_search {
            ConvAlgoSearch::Exhaustive => ConvAlgorithmSearch::Exhaustive,
            ConvAlgoSearch::Heuristic => ConvAlgorithmSearch::Heuristic,
            ConvAlgoSearch::Default => ConvAlgorithmSearch::Default,
        })
        .with_tf32(settings.cuda_tf32)
        .with_prefer_nhwc(settings.cuda_prefer_nhwc)
        .with_cuda_graph(cuda_graph);
    if settings.cuda_mem_limit_mib > 0 {
        let bytes = usize::try_from(settings.cuda_mem_limit_mib << 20).unwrap_or(usize::MAX);
        cuda = cuda.with_memory_limit(bytes);
    }
    if let Some(stream) = stream {
        // SAFETY: the stream belongs to the device path, which drops the
        // sessions before the stream (see `device.rs`).
        cuda = unsafe { cuda.with_compute_stream(stream.0.cast()) };
    }
    builder
        .with_execution_providers([cuda.build().error_on_failure()])
        .map_err(|e| unavailable(e.to_string()))
}

/// One model's session on CUDA, its compute queued on `stream`, and the
/// model's checked IO; for the device path, which binds the inputs and
/// outputs to its own device buffers.
#[cfg(feature = "cuda")]
pub(crate) fn open_cuda_session(
    cfg: &Config,
    spec: &ModelSpec<'_>,
    stream: ComputeStream,
) -> Result<(Session, ModelIo), InferError> {
    spec.require_file()?;
    let runtime = OrtRuntime::get(
        cfg.inference.onnxruntime_library.as_deref(),
        cfg.inference.threads,
    )?;
    let session = create_session(
        &runtime,
        &cfg.inference.onnxruntime,
        spec,
        ComputeDevice::Cuda,
        Some(stream),
    )?;
    let io = resolve_model_io(
        spec,
        &declared(session.inputs()),
        &declared(session.outputs()),
    )?;
    record_opened(spec, device_engine_name(ComputeDevice::Cuda));
    log::info!(library:% = runtime.library.display(), version = runtime.version.as_str(), role:% = spec.role;
        "ONNX Runtime CUDA session on the pipeline's stream");
    Ok((session, io))
}

/// The engine's name in the "model opened" log line.
pub(super) fn device_engine_name(device: ComputeDevice) -> &'static str {
    match device {
        ComputeDevice::Cpu => "ONNX Runtime CPU",
        ComputeDevice::Cuda => "ONNX Runtime CUDA",
    }
}

fn graph_optimization_level(level: GraphOptimization) -> GraphOptimizationLevel {
    match level {
        GraphOptimization::Disable => GraphOptimizationLevel::Disable,
        GraphOptimization::Basic => GraphOptimizationLevel::Level1,
        GraphOptimization::Extended => GraphOptimizationLevel::Level2,
        GraphOptimization::All => GraphOptimizationLevel::All,
    }
}

/// What the session reports about its graph inputs or outputs, for the shared check.
pub(super) fn declared(outlets: &[Outlet]) -> Vec<DeclaredTensor> {
    outlets
        .iter()
        .map(|outlet| match outlet.dtype() {
            ValueType::Tensor {
                ty,
                shape,
                dimension_symbols,
            } => DeclaredTensor {
                name: outlet.name().to_string(),
                dims: Some(
                    shape
                        .iter()
                        .enumerate()
                        .map(|(ix, d)| match usize::try_from(*d) {
                            Ok(n) => Dim::Fixed(n),
                            Err(_) => Dim::Symbolic(match dimension_symbols.get(ix) {
                                Some(name) if !name.is_empty() => name.clone(),
                                _ => "?".to_string(),
                            }),
                        })
                        .collect(),
                ),
                element: ty.to_string(),
                is_f32: *ty == TensorElementType::Float32,
            },
            other => DeclaredTensor {
                name: outlet.name().to_string(),
                dims: None,
                element: other.to_string(),
                is_f32: false,
            },
        })
        .collect()
}
