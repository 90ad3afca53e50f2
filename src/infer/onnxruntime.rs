//! Inference with ONNX Runtime (crate `ort`, library loaded at run time), on the
//! CPU or through the CUDA execution provider.
//!
//! Loading has three steps, each with its own error:
//!
//! ```text
//! find libonnxruntime.so (config, ORT_DYLIB_PATH, .ort/lib, system)
//!   -> pre-check it ourselves (ort panics on some bad libraries)
//!   -> one ort Environment for the process -> one Session per model
//! ```
//!
//! Per frame, the input slice is lent to ONNX Runtime without a copy and the
//! output lands in a tensor allocated once per model, then is copied out.
//! Device buffers with IO binding (and a CUDA stream shared with preprocessing)
//! would replace `OrtModel::run` and the preallocated output; nothing else here
//! depends on where the tensors live.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::environment::{Environment, GlobalThreadPoolOptions};
use ort::ep::cuda::ConvAlgorithmSearch;
use ort::ep::{ArenaExtendStrategy, ExecutionProvider};
use ort::memory::Allocator;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::{HasSelectedOutputs, OutputSelector, RunOptions, Session};
use ort::value::{Outlet, Tensor, TensorElementType, TensorRef, ValueType};

use super::backend::BackendKind;
use super::error::InferError;
use super::model_io::BatchDim;
use super::model_io::{
    DeclaredTensor, Dim, ModelIo, ModelRole, ModelSpec, check_buffers, record_opened,
    resolve_model_io,
};
use super::model_pair::{HostModel, ModelPair};
use crate::config::{
    ArenaExtend, ComputeDevice, Config, ConvAlgoSearch, GraphOptimization, OnnxRuntimeConfig,
};

// Raw C API calls `ort` does not wrap.
pub(crate) mod sys;
// Device mode: both sessions on the device runner's stream, bound to its
// tensors; a stub that says "no CUDA" without the `cuda` feature.
#[cfg(feature = "cuda")]
pub mod device;
#[cfg(not(feature = "cuda"))]
#[path = "onnxruntime/device_stub.rs"]
pub mod device;

const ENGINE: &str = "ONNX Runtime";

/// The library file name `scripts/fetch_onnxruntime.sh` installs into `.ort/lib/`.
pub const PINNED_LIBRARY: &str = "libonnxruntime.so.1.31.1";

/// Name looked up on the system's library search path as the last resort.
const SYSTEM_LIBRARY: &str = "libonnxruntime.so";

/// A CUDA stream for the sessions' compute (`CUstream`), shared with the
/// CUDA preprocessing kernels so a frame runs on one stream.
#[derive(Debug, Clone, Copy)]
pub struct ComputeStream(pub *mut std::ffi::c_void);

/// Both models as ONNX Runtime sessions, on the CPU or the CUDA provider.
pub type OrtBackend = ModelPair<OrtModel>;

impl OrtBackend {
    /// Opens both models on `device`; CUDA must register or this fails
    /// (`InferError::CudaUnavailable`), never silently running on the CPU.
    pub fn open(cfg: &Config, device: ComputeDevice) -> Result<Self, InferError> {
        let seg_spec = ModelSpec::segmentation(&cfg.segmentation);
        let cls_spec = ModelSpec::classifier(&cfg.classifier);
        seg_spec.require_file()?;
        cls_spec.require_file()?;
        let runtime = OrtRuntime::get(
            cfg.inference.onnxruntime_library.as_deref(),
            cfg.inference.threads,
        )?;
        let settings = &cfg.inference.onnxruntime;
        let segmentation = OrtModel::load(&runtime, settings, &seg_spec, device)?;
        let classifier = OrtModel::load(&runtime, settings, &cls_spec, device)?;
        let kind = match device {
            ComputeDevice::Cpu => BackendKind::OnnxRuntimeCpu,
            ComputeDevice::Cuda => BackendKind::OnnxRuntimeCuda,
        };
        log::info!(library:% = runtime.library.display(), version = runtime.version.as_str(), backend = kind.as_str(),
            settings:? = settings; "ONNX Runtime sessions ready");
        Ok(ModelPair::new(kind, segmentation, classifier))
    }
}

/// One model's session, with the run options that carry its preallocated output.
pub struct OrtModel {
    role: ModelRole,
    io: ModelIo,
    session: Session,
    run_options: RunOptions<HasSelectedOutputs>,
    /// Run options with an output preallocated for a batch of `index + 2`
    /// frames, and that batch's input shape, made at the first batch of that
    /// size (a dynamic-batch model): a batch run allocates nothing.
    batch_runs: Vec<Option<(RunOptions<HasSelectedOutputs>, Vec<usize>)>>,
    library: PathBuf,
}

impl OrtModel {
    fn load(
        runtime: &OrtRuntime,
        settings: &OnnxRuntimeConfig,
        spec: &ModelSpec<'_>,
        device: ComputeDevice,
    ) -> Result<Self, InferError> {
        let session = create_session(runtime, settings, spec, device, None)?;
        let inputs = declared(session.inputs());
        let outputs = declared(session.outputs());
        let io = resolve_model_io(spec, &inputs, &outputs)?;
        record_opened(spec, device_engine_name(device));

        let engine_error = |action: &str, e: ort::Error| InferError::OrtEngine {
            library: runtime.library.clone(),
            action: format!("{action} for {} model {}", spec.role, spec.path.display()),
            message: e.to_string(),
        };
        let run_options =
            preallocated_run(&io, 1).map_err(|e| engine_error("allocate the output tensor", e))?;
        Ok(OrtModel {
            role: spec.role,
            io,
            session,
            run_options,
            batch_runs: Vec::new(),
            library: runtime.library.clone(),
        })
    }

    /// Runs `input` (of `shape`) with `options`, into `logits_out`.
    fn run_with(
        session: &mut Session,
        role: ModelRole,
        options: &RunOptions<HasSelectedOutputs>,
        shape: &[usize],
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        let run_error = |e: ort::Error| InferError::Run {
            role,
            engine: ENGINE,
            message: e.to_string(),
        };
        let tensor = TensorRef::from_array_view((shape, input)).map_err(run_error)?;
        let outputs = session
            .run_with_options(ort::inputs![tensor], options)
            .map_err(run_error)?;
        let (_, logits) = outputs[0].try_extract_tensor::<f32>().map_err(run_error)?;
        if logits.len() != logits_out.len() {
            return Err(InferError::Run {
                role,
                engine: ENGINE,
                message: format!(
                    "output has {} values, expected {}",
                    logits.len(),
                    logits_out.len()
                ),
            });
        }
        logits_out.copy_from_slice(logits);
        Ok(())
    }
}

/// Run options whose output ONNX Runtime writes into, for `frames` frames:
/// no output is allocated per run.
fn preallocated_run(
    io: &ModelIo,
    frames: usize,
) -> Result<RunOptions<HasSelectedOutputs>, ort::Error> {
    let mut shape = io.output_shape.clone();
    shape[0] = frames;
    let output = Tensor::<f32>::new(&Allocator::default(), shape)?;
    Ok(RunOptions::new()?.with_outputs(
        OutputSelector::no_default()
            .with(io.output_name.clone())
            .preallocate(io.output_name.clone(), output),
    ))
}

impl HostModel for OrtModel {
    fn io(&self) -> &ModelIo {
        &self.io
    }

    fn run(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
        check_buffers(self.role, &self.io, input, logits_out)?;
        OrtModel::run_with(
            &mut self.session,
            self.role,
            &self.run_options,
            &self.io.input_shape,
            input,
            logits_out,
        )
    }

    fn batches(&self) -> bool {
        self.io.batch == BatchDim::Dynamic
    }

    fn run_batch(
        &mut self,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        if frames <= 1 || !self.batches() {
            return super::backend::one_by_one(frames, input, logits_out, |i, o| self.run(i, o));
        }
        let (in_len, out_len) = (self.io.input_len(), self.io.output_len());
        if input.len() != in_len * frames || logits_out.len() != out_len * frames {
            return Err(InferError::BufferLength {
                role: self.role,
                buffer: "batch",
                expected: in_len * frames,
                actual: input.len(),
            });
        }
        let slot = frames - 2;
        if self.batch_runs.len() <= slot {
            self.batch_runs.resize_with(slot + 1, || None);
        }
        if self.batch_runs[slot].is_none() {
            let options =
                preallocated_run(&self.io, frames).map_err(|e| InferError::OrtEngine {
                    library: self.library.clone(),
                    action: format!(
                        "allocate the output of a batch of {frames} for the {} model",
                        self.role
                    ),
                    message: e.to_string(),
                })?;
            let mut shape = self.io.input_shape.clone();
            shape[0] = frames;
            self.batch_runs[slot] = Some((options, shape));
        }
        let (options, shape) = self.batch_runs[slot].as_ref().expect("made above");
        OrtModel::run_with(
            &mut self.session,
            self.role,
            options,
            shape,
            input,
            logits_out,
        )
    }
}

fn create_session(
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
fn device_engine_name(device: ComputeDevice) -> &'static str {
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
fn declared(outlets: &[Outlet]) -> Vec<DeclaredTensor> {
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

/// The process's one ONNX Runtime: ort allows a single library and a single
/// environment per process, so both are made once and shared by every session.
///
/// The environment owns the intra-op thread pool both sessions run on. With a
/// pool per session the pools compete for the same cores (demo models on two
/// cores: segment + classify 60 ms per frame with a pool each, 13 ms shared).
#[derive(Clone)]
struct OrtRuntime {
    library: PathBuf,
    version: String,
    /// Intra-op threads of the shared pool; 0 is ONNX Runtime's default.
    threads: usize,
    env: Environment,
}

static LOADED: Mutex<Option<OrtRuntime>> = Mutex::new(None);

impl OrtRuntime {
    fn get(configured: Option<&Path>, threads: usize) -> Result<OrtRuntime, InferError> {
        // A poisoned lock only means another thread panicked while loading; the
        // value inside is still either None or a complete runtime.
        let mut loaded = LOADED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let explicit = explicit_library(configured);
        if let Some(runtime) = loaded.as_ref() {
            if let Some(choice) = &explicit {
                let requested = absolute(&choice.path);
                if requested != runtime.library {
                    precheck(&requested).map_err(|reason| choice.invalid(reason))?;
                    return Err(InferError::OrtLibraryConflict {
                        loaded: runtime.library.clone(),
                        requested,
                        origin: choice.origin.to_string(),
                    });
                }
            }
            if runtime.threads != threads {
                log::info!(pool = runtime.threads, requested = threads;
                    "ONNX Runtime's thread pool already exists; [inference] threads applies after a restart");
            }
            return Ok(runtime.clone());
        }
        let (library, version) = match explicit {
            Some(choice) => {
                let path = absolute(&choice.path);
                let version = precheck(&path).map_err(|reason| choice.invalid(reason))?;
                (path, version)
            }
            None => discover()?,
        };
        let env = create_environment(&library, threads)?;
        let runtime = OrtRuntime {
            library,
            version,
            threads,
            env,
        };
        *loaded = Some(runtime.clone());
        Ok(runtime)
    }
}

/// A library the operator named; used as given, never replaced by another.
struct ExplicitLibrary {
    path: PathBuf,
    origin: &'static str,
}

impl ExplicitLibrary {
    fn invalid(&self, reason: String) -> InferError {
        InferError::OrtLibraryInvalid {
            path: self.path.clone(),
            origin: self.origin.to_string(),
            reason,
        }
    }
}

fn explicit_library(configured: Option<&Path>) -> Option<ExplicitLibrary> {
    if let Some(path) = configured {
        return Some(ExplicitLibrary {
            path: path.to_path_buf(),
            origin: "[inference] onnxruntime_library",
        });
    }
    match std::env::var_os("ORT_DYLIB_PATH") {
        Some(value) if !value.is_empty() => Some(ExplicitLibrary {
            path: PathBuf::from(value),
            origin: "environment variable ORT_DYLIB_PATH",
        }),
        _ => None,
    }
}

/// The places a library is looked for when none is named, in order.
pub fn discovery_candidates() -> Vec<(PathBuf, &'static str)> {
    let local = Path::new(".ort").join("lib").join(PINNED_LIBRARY);
    let mut candidates = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        candidates.push((cwd.join(&local), "project-local, current directory"));
    }
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR")).join(&local);
    if !candidates.iter().any(|(p, _)| *p == source_tree) {
        candidates.push((
            source_tree,
            "project-local, source tree this binary was built from",
        ));
    }
    candidates.push((PathBuf::from(SYSTEM_LIBRARY), "system library search path"));
    candidates
}

fn discover() -> Result<(PathBuf, String), InferError> {
    let mut tried = Vec::new();
    for (path, origin) in discovery_candidates() {
        let on_search_path = path.parent().is_none_or(|p| p.as_os_str().is_empty());
        if !on_search_path && !path.is_file() {
            tried.push((
                format!("{} ({origin})", path.display()),
                "does not exist".to_string(),
            ));
            continue;
        }
        match precheck(&path) {
            Ok(version) => return Ok((path, version)),
            Err(reason) => tried.push((format!("{} ({origin})", path.display()), reason)),
        }
    }
    Err(InferError::OrtLibraryNotFound { tried })
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Opens the library and asks it for its version, so a wrong file becomes a
/// message instead of a panic inside ort. Returns the version string.
fn precheck(path: &Path) -> Result<String, String> {
    let named = path.parent().is_none_or(|p| p.as_os_str().is_empty());
    if !named && !path.is_file() {
        return Err("file does not exist".into());
    }
    let probe = sys::probe_library(path)?;
    let version = probe.version.clone();
    let minor = version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if minor < ort::MINOR_VERSION {
        return Err(format!(
            "it is ONNX Runtime {version}; sealcheck needs 1.{} or newer",
            ort::MINOR_VERSION
        ));
    }
    if !probe.has_api {
        return Err(format!(
            "ONNX Runtime {version} does not offer C API version {}",
            ort::sys::ORT_API_VERSION
        ));
    }
    probe.keep_loaded();
    Ok(version)
}

fn create_environment(library: &Path, threads: usize) -> Result<Environment, InferError> {
    let engine_error = |action: &str, message: String| InferError::OrtEngine {
        library: library.to_path_buf(),
        action: action.to_string(),
        message,
    };
    // ort panics (rather than erring) on a few malformed libraries; the pre-check
    // rules out the ones we know of, and this catches the rest.
    let built = catch_unwind(AssertUnwindSafe(|| {
        let builder = ort::init_from(library).map_err(|e| engine_error("load", e.to_string()))?;
        // Threading options exist only once the library is loaded. Pool threads
        // sleep instead of spinning between runs: capture and preprocessing need
        // those cores (demo clip on two busy cores: 29-35 fps against 19-23 fps
        // with spinning; spinning only wins on an otherwise idle machine).
        let mut pool = GlobalThreadPoolOptions::default()
            .with_spin_control(false)
            .map_err(|e| engine_error("turn off thread-pool spinning", e.to_string()))?;
        if threads > 0 {
            pool = pool
                .with_intra_threads(threads)
                .map_err(|e| engine_error("set intra-op threads", e.to_string()))?;
        }
        builder
            .with_name("sealcheck")
            .with_telemetry(false)
            .with_global_thread_pool(pool)
            .build()
            .map_err(|e| engine_error("create its environment", e.to_string()))
    }));
    match built {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("panic without a message");
            Err(engine_error("load", format!("ort panicked: {message}")))
        }
    }
}
