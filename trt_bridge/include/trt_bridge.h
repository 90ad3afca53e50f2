// trt_bridge: the small C++ side of sealcheck's TensorRT backend.
//
// Rust (src/infer/tensorrt/bridge.rs, a #[cxx::bridge]) calls the functions
// below; they wrap the TensorRT 10 C++ API:
//
//   load_library(paths)           dlopen libnvinfer + libnvonnxparser, check versions
//   new_builder() -> Builder      build_serialized_network(onnx bytes, options) -> plan bytes
//   new_runtime() -> Runtime      deserialize(plan bytes) -> Engine
//   Engine                        io_tensors(), device_memory_size(), create_context()
//   Context                       set_tensor_address(), set_input_shape(), enqueue(stream)
//
// A model whose input has a dynamic first (batch) dimension is built with one
// optimization profile (BuildOptions::profile: 1 frame .. max_batch frames);
// its context takes the batch of each run through set_input_shape before
// enqueue. Static models are built without a profile, as before.
//
// libnvinfer is loaded at run time (dlopen), never linked: the TensorRT C++
// API is inline methods over virtual calls, so only the few extern "C" entry
// points (createInferBuilder_INTERNAL, createInferRuntime_INTERNAL,
// createNvOnnxParser_INTERNAL, getInferLibVersion) are looked up. A binary
// built with the `tensorrt` feature therefore starts on a machine without
// TensorRT and reports a clear error when the backend is asked for.
//
// Every class hides its TensorRT objects behind a private pointer; factories
// return std::unique_ptr; every failure throws std::runtime_error carrying
// TensorRT's own message, which cxx turns into a Rust Err.

#pragma once

#include <cstdint>
#include <memory>

#include "rust/cxx.h"

namespace sealcheck {
namespace trt {

// Shared with Rust: defined by the bridge's generated header.
struct BuildOptions;
struct TensorInfo;
struct LibraryInfo;
// Rust types C++ calls back into.
struct BuildProgress;
struct CalibrationFeed;

// Loads libnvinfer and libnvonnxparser (first path of each list that opens)
// once per process; later calls return the same info. Throws with every
// dlopen error when none opens, or when the library's major version differs
// from the headers this was compiled against (or is older than them).
LibraryInfo load_library(rust::Slice<const rust::String> nvinfer_candidates,
                         rust::Slice<const rust::String> onnxparser_candidates);

// NV_TENSORRT_VERSION of the headers this bridge was compiled against
// (major * 10000 + minor * 100 + patch).
int32_t header_version() noexcept;

// Whether these headers still have implicit-quantization INT8 calibration.
bool int8_calibration_supported() noexcept;

class Builder {
public:
    Builder();
    ~Builder();
    Builder(const Builder&) = delete;
    Builder& operator=(const Builder&) = delete;

    // Parses `onnx`, applies `options` (precision, workspace, one optimization
    // profile with an entry per listed input) and builds a serialized engine
    // ("plan"). Progress goes to `progress`; with INT8, batches come from
    // `calibration` (one frame each: with a profile, the calibration profile
    // is every input's `min` shape).
    rust::Vec<uint8_t> build_serialized_network(rust::Slice<const uint8_t> onnx,
                                                const BuildOptions& options,
                                                BuildProgress& progress,
                                                CalibrationFeed& calibration) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

class Engine;

class Runtime {
public:
    Runtime();
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    // Throws (never returns null) when the plan is corrupt, truncated, or was
    // built by another TensorRT version or for another GPU.
    std::unique_ptr<Engine> deserialize(rust::Slice<const uint8_t> plan) const;

    // Public so an Engine can share ownership of its runtime.
    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

class Context;

class Engine {
public:
    struct Impl;
    explicit Engine(std::unique_ptr<Impl> impl);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Shapes as the engine was built: -1 for a dimension set per run (the
    // batch of a model with a dynamic batch).
    rust::Vec<TensorInfo> io_tensors() const;
    // Device memory an execution context needs beyond the weights, in bytes.
    int64_t device_memory_size() const;
    // A context on optimization profile 0 (TensorRT 10 gives every new
    // context profile 0; throws if this one was given another).
    std::unique_ptr<Context> create_context() const;

private:
    std::unique_ptr<Impl> impl_;
};

// Borrows its engine: Rust's Context<'engine> keeps the engine alive.
class Context {
public:
    struct Impl;
    explicit Context(std::unique_ptr<Impl> impl);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    void set_tensor_address(rust::Str name, std::size_t device_address);
    // setInputShape: the shape of input `name` for the next enqueues (a
    // dynamic batch: frames x C x H x W). Throws when TensorRT refuses it (a
    // shape outside the engine's optimization profile, an unknown input).
    void set_input_shape(rust::Str name, rust::Slice<const int64_t> dims);
    // enqueueV3 on `stream` (a cudaStream_t, 0 = the legacy default stream).
    void enqueue(std::size_t stream);

private:
    std::unique_ptr<Impl> impl_;
};

std::unique_ptr<Builder> new_builder();
std::unique_ptr<Runtime> new_runtime();

}  // namespace trt
}  // namespace sealcheck
