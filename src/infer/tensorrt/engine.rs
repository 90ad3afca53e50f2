//! Safe owners over the bridge: `Builder`, `Runtime`, `Engine`, and
//! `LoadedEngine`, which keeps one engine and its one execution context
//! together (TensorRT requires the context to be destroyed before its
//! engine; the field order does it).
//!
//! None of these is `Clone`: each owns one TensorRT object and destroys it on
//! drop. All are `Send` (moved to the inference thread), none is `Sync`.
//!
//! A context of an engine with a dynamic batch is on its one optimization
//! profile (0) from creation; `LoadedEngine::set_input_shape` gives it the
//! batch before an enqueue (the backend calls it only when the batch changes).

use std::path::PathBuf;
use std::pin::Pin;

use cxx::UniquePtr;

use super::bridge::{self as ffi, BuildOptions, LibraryInfo, TensorInfo};
use super::calibration_feed::CalibrationFeed;
use super::error::TrtError;
use super::progress::BuildProgress;

/// Where to look for libnvinfer.so.10 and libnvonnxparser.so.10, in order:
/// `SEALCHECK_TENSORRT_LIB_DIR` at run time, the folder the build found
/// (same variable at build time), then the system's library search path.
fn library_candidates(file: &str) -> Vec<String> {
    let mut candidates = Vec::new();
    let runtime_dir = std::env::var_os("SEALCHECK_TENSORRT_LIB_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let build_dir = Some(env!("SEALCHECK_TENSORRT_LIB_DIR"))
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    for dir in runtime_dir.into_iter().chain(build_dir) {
        candidates.push(dir.join(file).display().to_string());
    }
    candidates.push(file.to_string());
    // The same folder from both places would only repeat the same error.
    let mut seen = std::collections::HashSet::new();
    candidates.retain(|c| seen.insert(c.clone()));
    candidates
}

/// Opens TensorRT (once per process; later calls return the same answer).
/// `TrtError::LibraryUnavailable` when it is not installed or is a TensorRT
/// older than the headers this binary was built with.
pub fn load_library() -> Result<LibraryInfo, TrtError> {
    let nvinfer = library_candidates("libnvinfer.so.10");
    let parser = library_candidates("libnvonnxparser.so.10");
    ffi::load_library(&nvinfer, &parser).map_err(|e| TrtError::LibraryUnavailable {
        message: e.what().to_string(),
    })
}

/// The TensorRT version of the headers this binary was compiled against ("10.3.0").
pub fn compiled_against() -> String {
    version_string(ffi::header_version())
}

/// Whether those headers still have INT8 implicit quantization (TensorRT 10).
pub fn int8_calibration_supported() -> bool {
    ffi::int8_calibration_supported()
}

/// "10.3.0" from TensorRT's `major * 10000 + minor * 100 + patch`.
pub fn version_string(version: i32) -> String {
    format!(
        "{}.{}.{}",
        version / 10000,
        (version / 100) % 100,
        version % 100
    )
}

fn non_null<T: cxx::memory::UniquePtrTarget>(
    ptr: UniquePtr<T>,
    what: &str,
) -> Result<UniquePtr<T>, TrtError> {
    if ptr.is_null() {
        Err(TrtError::TensorRt {
            action: what.to_string(),
            message: "the bridge returned no object".to_string(),
        })
    } else {
        Ok(ptr)
    }
}

/// Turns ONNX models into serialized engines.
pub struct Builder {
    inner: UniquePtr<ffi::Builder>,
}

impl Builder {
    /// `_library` is proof that `load_library` succeeded.
    pub fn new(_library: &LibraryInfo) -> Result<Self, TrtError> {
        let inner = ffi::new_builder().map_err(TrtError::tensorrt("create a builder"))?;
        Ok(Builder {
            inner: non_null(inner, "create a builder")?,
        })
    }

    /// Parses and builds; minutes on a Jetson. Progress is logged through
    /// `progress`; INT8 batches come from `calibration`.
    pub fn build_serialized(
        &self,
        onnx: &[u8],
        options: &BuildOptions,
        progress: &mut BuildProgress,
        calibration: &mut CalibrationFeed,
    ) -> Result<Vec<u8>, TrtError> {
        self.inner
            .build_serialized_network(onnx, options, progress, calibration)
            .map_err(TrtError::tensorrt("build the engine"))
    }
}

/// Deserializes engines; must outlive them (the bridge's engines share
/// ownership of their runtime, so dropping this early is harmless).
pub struct Runtime {
    inner: UniquePtr<ffi::Runtime>,
}

impl Runtime {
    pub fn new(_library: &LibraryInfo) -> Result<Self, TrtError> {
        let inner = ffi::new_runtime().map_err(TrtError::tensorrt("create a runtime"))?;
        Ok(Runtime {
            inner: non_null(inner, "create a runtime")?,
        })
    }

    /// Fails (never returns a null engine) on a corrupt plan or one built by
    /// another TensorRT version or for another GPU.
    pub fn deserialize(&self, plan: &[u8]) -> Result<Engine, TrtError> {
        let inner = self
            .inner
            .deserialize(plan)
            .map_err(TrtError::tensorrt("deserialize the engine"))?;
        Ok(Engine {
            inner: non_null(inner, "deserialize the engine")?,
        })
    }
}

/// A deserialized engine: its IO description and the factory of contexts.
pub struct Engine {
    inner: UniquePtr<ffi::Engine>,
}

impl Engine {
    pub fn io_tensors(&self) -> Result<Vec<TensorInfo>, TrtError> {
        self.inner
            .io_tensors()
            .map_err(TrtError::tensorrt("list the engine's tensors"))
    }

    /// Device memory one execution context needs (activations), in bytes.
    pub fn device_memory_size(&self) -> Result<i64, TrtError> {
        self.inner
            .device_memory_size()
            .map_err(TrtError::tensorrt("read the engine's memory size"))
    }

    fn raw_context(&self) -> Result<UniquePtr<ffi::Context>, TrtError> {
        let inner = self
            .inner
            .create_context()
            .map_err(TrtError::tensorrt("create an execution context"))?;
        non_null(inner, "create an execution context")
    }
}

/// An engine and its one execution context, owned together: TensorRT
/// requires the context to be destroyed before its engine, and the field
/// order does it. (The backend lives in a `Box<dyn ...>`, so a context
/// borrowing its engine could not sit next to it.)
pub struct LoadedEngine {
    // Field order is drop order: the context goes before its engine.
    context: UniquePtr<ffi::Context>,
    engine: Engine,
}

impl LoadedEngine {
    pub fn new(engine: Engine) -> Result<Self, TrtError> {
        // The C++ context points at the C++ engine object, which lives on the
        // C++ heap as long as `engine` does (moving the Rust `Engine` moves
        // only its pointer). Declaring `context` first drops it first.
        let context = engine.raw_context()?;
        Ok(LoadedEngine { context, engine })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// # Safety
    /// `device_address` must point to device memory that holds the tensor
    /// (its shape times its dtype's size) and stays valid until every
    /// `enqueue` that uses it has finished on its stream.
    pub unsafe fn set_tensor_address(
        &mut self,
        name: &str,
        device_address: u64,
    ) -> Result<(), TrtError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { set_tensor_address(pinned(&mut self.context)?, name, device_address) }
    }

    /// Sets input `name`'s shape for the enqueues that follow (`dims`: the
    /// whole shape, the batch first). Safe: it queues nothing and touches no
    /// device memory; the tensors bound must then hold that many frames,
    /// which `enqueue`'s contract already asks.
    pub fn set_input_shape(&mut self, name: &str, dims: &[i64]) -> Result<(), TrtError> {
        // The message is made only on failure: this runs on the frame path.
        pinned(&mut self.context)?
            .set_input_shape(name, dims)
            .map_err(|e| TrtError::TensorRt {
                action: format!("set the shape of input \"{name}\" to {dims:?}"),
                message: e.what().to_string(),
            })
    }

    /// Queues the engine on `stream` (a `cudaStream_t`; the driver's `CUstream`
    /// is the same handle). Returns before the GPU runs it.
    ///
    /// # Safety
    /// `stream` must be a live stream of the current device, and every tensor
    /// address set on this context must stay valid until the stream has run
    /// this work and hold the tensor at the input shape last set (a dynamic
    /// batch: that many frames).
    pub unsafe fn enqueue(&mut self, stream: usize) -> Result<(), TrtError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { enqueue(pinned(&mut self.context)?, stream) }
    }
}

fn pinned(context: &mut UniquePtr<ffi::Context>) -> Result<Pin<&mut ffi::Context>, TrtError> {
    context.as_mut().ok_or_else(|| TrtError::TensorRt {
        action: "use an execution context".to_string(),
        message: "the context is null".to_string(),
    })
}

/// # Safety
/// As `LoadedEngine::set_tensor_address`.
unsafe fn set_tensor_address(
    context: Pin<&mut ffi::Context>,
    name: &str,
    address: u64,
) -> Result<(), TrtError> {
    let address = usize::try_from(address).map_err(|_| TrtError::TensorRt {
        action: format!("set the address of \"{name}\""),
        message: format!("device address {address:#x} does not fit a pointer"),
    })?;
    // SAFETY: the caller guarantees the memory behind `address`.
    unsafe { context.set_tensor_address(name, address) }
        .map_err(TrtError::tensorrt(format!("set the address of \"{name}\"")))
}

/// # Safety
/// As `LoadedEngine::enqueue`.
unsafe fn enqueue(context: Pin<&mut ffi::Context>, stream: usize) -> Result<(), TrtError> {
    // SAFETY: the caller guarantees the stream and the bound tensors.
    unsafe { context.enqueue(stream) }.map_err(TrtError::tensorrt("enqueue the engine (enqueueV3)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_string_reads_tensorrt_numbering() {
        assert_eq!(version_string(100300), "10.3.0");
        assert_eq!(version_string(101600), "10.16.0");
    }

    #[test]
    fn library_candidates_end_with_the_bare_soname() {
        let candidates = library_candidates("libnvinfer.so.10");
        assert_eq!(
            candidates.last().map(String::as_str),
            Some("libnvinfer.so.10")
        );
    }

    #[test]
    fn library_loads_or_says_what_it_tried() {
        match load_library() {
            // A machine with TensorRT: it must not be older than the headers.
            Ok(info) => {
                assert!(info.library_version >= info.header_version, "{info:?}");
                assert_eq!(info.library_version / 10000, 10);
            }
            Err(e) => {
                assert!(e.is_unavailable(), "{e}");
                let text = e.to_string();
                assert!(
                    text.contains("libnvinfer.so.10") && text.contains("tried"),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn header_version_is_tensorrt_10() {
        assert_eq!(ffi::header_version() / 10000, 10);
    }
}
