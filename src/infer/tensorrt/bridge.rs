//! The raw `cxx` bridge to `trt_bridge/` (C++17 over the TensorRT 10 API).
//! Nothing here is used directly outside `engine.rs`, which wraps it in safe
//! owners; the callbacks C++ makes into Rust (`extern "Rust"`) live in
//! `progress.rs` (logger, build progress) and `calibration.rs` (INT8 batches).

pub use self::ffi::*;

// The Rust types and function the bridge's `extern "Rust"` section names.
use super::calibration_feed::CalibrationFeed;
use super::progress::{BuildProgress, log_from_tensorrt};

// SAFETY (for the `Send` impls below): TensorRT documents its builder, runtime
// and engine as usable from any thread as long as calls on one object do not
// overlap, and an execution context as usable from one thread at a time.
// Moving the owning `UniquePtr` to another thread (what `Send` allows) never
// makes two threads call one object at once: none of these types is `Sync`,
// so no `&` reference to them is shared between threads.
unsafe impl Send for ffi::Builder {}
unsafe impl Send for ffi::Runtime {}
unsafe impl Send for ffi::Engine {}
unsafe impl Send for ffi::Context {}

#[cxx::bridge(namespace = "sealcheck::trt")]
mod ffi {
    // ---- Shared structs: plain data, same layout on both sides ----

    /// Numeric precision the builder may use for layers.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    enum Precision {
        Fp32,
        Fp16,
        /// Implicit quantization with a calibrator (TensorRT 10 only; removed later).
        Int8,
    }

    /// One optimization profile entry: the shapes an input may take (a
    /// dynamic batch: 1 frame, max_batch frames, max_batch frames).
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct ProfileShape {
        input: String,
        min: Vec<i64>,
        opt: Vec<i64>,
        max: Vec<i64>,
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct BuildOptions {
        precision: Precision,
        /// Builder workspace memory pool limit.
        workspace_mib: u64,
        /// One profile with one entry per input (empty for static shapes;
        /// `profile::batch_profile` makes it for a dynamic batch).
        profile: Vec<ProfileShape>,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum TensorMode {
        Input,
        Output,
        None,
    }

    /// TensorRT's `DataType`, with the ones sealcheck never sees folded into `Other`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum DataType {
        Float,
        Half,
        Int8,
        Int32,
        Bool,
        Uint8,
        Fp8,
        Bf16,
        Int64,
        Other,
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct TensorInfo {
        name: String,
        mode: TensorMode,
        dtype: DataType,
        /// -1 for a dimension fixed only at run time (a dynamic batch).
        shape: Vec<i64>,
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct LibraryInfo {
        /// `getInferLibVersion()`: major * 10000 + minor * 100 + patch.
        library_version: i32,
        /// NV_TENSORRT_VERSION of the headers the bridge was compiled against.
        header_version: i32,
        onnx_parser_version: i32,
        /// The files that were opened.
        nvinfer_path: String,
        onnxparser_path: String,
    }

    // ---- Rust called from C++ ----
    extern "Rust" {
        /// Progress of one engine build (TensorRT's IProgressMonitor).
        type BuildProgress;
        fn phase_start(self: &mut BuildProgress, phase: &str, parent: &str, steps: i32);
        /// false cancels the build.
        fn step_complete(self: &mut BuildProgress, phase: &str, step: i32) -> bool;
        fn phase_finish(self: &mut BuildProgress, phase: &str);

        /// INT8 calibration batches, made by sealcheck's own preprocessing.
        type CalibrationFeed;
        fn batch_size(self: &CalibrationFeed) -> i32;
        /// Device address of the next batch for `input`, 0 when there are no more.
        fn next_batch(self: &mut CalibrationFeed, input: &str) -> Result<usize>;
        /// The calibration cache from an earlier build (empty when none).
        fn read_cache(self: &mut CalibrationFeed) -> Vec<u8>;
        fn write_cache(self: &mut CalibrationFeed, cache: &[u8]) -> Result<()>;

        /// TensorRT's ILogger: severity 0 internal error .. 4 verbose.
        fn log_from_tensorrt(severity: i32, message: &str);
    }

    // ---- C++ called from Rust ----
    unsafe extern "C++" {
        include!("sealcheck/trt_bridge/include/trt_bridge.h");

        type Builder;
        type Runtime;
        type Engine;
        type Context;

        fn load_library(
            nvinfer_candidates: &[String],
            onnxparser_candidates: &[String],
        ) -> Result<LibraryInfo>;
        fn header_version() -> i32;
        fn int8_calibration_supported() -> bool;

        fn new_builder() -> Result<UniquePtr<Builder>>;
        fn build_serialized_network(
            self: &Builder,
            onnx: &[u8],
            options: &BuildOptions,
            progress: &mut BuildProgress,
            calibration: &mut CalibrationFeed,
        ) -> Result<Vec<u8>>;

        fn new_runtime() -> Result<UniquePtr<Runtime>>;
        fn deserialize(self: &Runtime, plan: &[u8]) -> Result<UniquePtr<Engine>>;

        fn io_tensors(self: &Engine) -> Result<Vec<TensorInfo>>;
        fn device_memory_size(self: &Engine) -> Result<i64>;
        fn create_context(self: &Engine) -> Result<UniquePtr<Context>>;

        /// # Safety
        /// `device_address` must point to device memory large enough for the
        /// tensor's shape and dtype, valid until every enqueue that uses it has
        /// finished on its stream.
        unsafe fn set_tensor_address(
            self: Pin<&mut Context>,
            name: &str,
            device_address: usize,
        ) -> Result<()>;
        /// `setInputShape`: the shape of input `name` for the enqueues that
        /// follow (an engine with a dynamic batch needs it before its first
        /// enqueue, and again when the batch changes). Only host state: work
        /// already queued keeps the shape it was queued with.
        fn set_input_shape(self: Pin<&mut Context>, name: &str, dims: &[i64]) -> Result<()>;
        /// # Safety
        /// `stream` must be a live `cudaStream_t` of the current device (or 0),
        /// and every tensor address set on this context must stay valid until
        /// the work enqueued here has finished on that stream.
        unsafe fn enqueue(self: Pin<&mut Context>, stream: usize) -> Result<()>;
    }
}
