//! The process's one ONNX Runtime: finding `libonnxruntime.so` (config,
//! `ORT_DYLIB_PATH`, `.ort/lib`, system), pre-checking it ourselves (ort
//! panics on some bad libraries), and the one ort environment with its
//! shared thread pool.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::environment::{Environment, GlobalThreadPoolOptions};

use super::sys;
use crate::infer::error::InferError;

/// The library file name `scripts/fetch_onnxruntime.sh` installs into `.ort/lib/`.
pub const PINNED_LIBRARY: &str = "libonnxruntime.so.1.31.1";

/// Name looked up on the system's library search path as the last resort.
const SYSTEM_LIBRARY: &str = "libonnxruntime.so";

/// The process's one ONNX Runtime: ort allows a single library and a single
/// environment per process, so both are made once and shared by every session.
///
/// The environment owns the intra-op thread pool both sessions run on. With a
/// pool per session the pools compete for the same cores (demo models on two
/// cores: segment + classify 60 ms per frame with a pool each, 13 ms shared).
#[derive(Clone)]
pub(super) struct OrtRuntime {
    pub(super) library: PathBuf,
    pub(super) version: String,
    /// Intra-op threads of the shared pool; 0 is ONNX Runtime's default.
    pub(super) threads: usize,
    pub(super) env: Environment,
}

static LOADED: Mutex<Option<OrtRuntime>> = Mutex::new(None);

impl OrtRuntime {
    pub(super) fn get(configured: Option<&Path>, threads: usize) -> Result<OrtRuntime, InferError> {
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
