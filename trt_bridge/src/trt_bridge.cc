// trt_bridge implementation: see ../include/trt_bridge.h for the shape of it.
//
// Written against the TensorRT 10.3 API (JetPack 6). Anything newer is behind
// an NV_TENSORRT_MAJOR/MINOR check, and so is implicit-quantization INT8
// calibration, which TensorRT 10 deprecates and later versions remove.
//
// Dynamic batch: the builder adds the one optimization profile Rust asks for
// (and, for INT8, a calibration profile of one frame); a context stays on
// profile 0, the default for every new context in TensorRT 10, so
// setOptimizationProfileAsync is never called; set_input_shape gives each
// run its batch.

#include "sealcheck/trt_bridge/include/trt_bridge.h"
#include "sealcheck/src/infer/tensorrt/bridge.rs.h"

#include <NvInfer.h>
#include <NvOnnxParser.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#if NV_TENSORRT_MAJOR < 10
#error "trt_bridge needs TensorRT 10 headers (JetPack 6 ships TensorRT 10.3)"
#endif

// Implicit quantization (IInt8Calibrator, BuilderFlag::kINT8) exists in
// TensorRT 10 (deprecated there) and is gone after it.
#if NV_TENSORRT_MAJOR == 10
#define SEALCHECK_TRT_HAS_IMPLICIT_INT8 1
#else
#define SEALCHECK_TRT_HAS_IMPLICIT_INT8 0
#endif

// Weak typing (BuilderFlag::kFP16: the builder may pick half for any layer) is
// how TensorRT 10.3 builds FP16 engines from an FP32 ONNX model. Later 10.x
// deprecate it in favour of strongly typed networks; guard for its removal.
#if NV_TENSORRT_MAJOR == 10
#define SEALCHECK_TRT_HAS_WEAK_TYPING 1
#else
#define SEALCHECK_TRT_HAS_WEAK_TYPING 0
#endif

// getDeviceMemorySizeV2 arrived in 10.1; getDeviceMemorySize is deprecated since.
#if NV_TENSORRT_MAJOR > 10 || (NV_TENSORRT_MAJOR == 10 && NV_TENSORRT_MINOR >= 1)
#define SEALCHECK_TRT_HAS_DEVICE_MEMORY_V2 1
#else
#define SEALCHECK_TRT_HAS_DEVICE_MEMORY_V2 0
#endif

namespace sealcheck {
namespace trt {

namespace {

// ---------------------------------------------------------------------------
// The library, opened at run time.

using CreateInferBuilderFn = void* (*)(void* logger, int32_t version);
using CreateInferRuntimeFn = void* (*)(void* logger, int32_t version);
using CreateOnnxParserFn = void* (*)(void* network, void* logger, int version);
using VersionFn = int32_t (*)();

struct Library {
    void* nvinfer = nullptr;
    void* onnxparser = nullptr;
    CreateInferBuilderFn create_builder = nullptr;
    CreateInferRuntimeFn create_runtime = nullptr;
    CreateOnnxParserFn create_parser = nullptr;
    LibraryInfo info;
};

std::mutex g_library_mutex;
// Set once, never unloaded: TensorRT objects may live until process exit.
Library* g_library = nullptr;

const Library& library() {
    std::lock_guard<std::mutex> lock(g_library_mutex);
    if (g_library == nullptr) {
        throw std::runtime_error(
            "TensorRT library not loaded (load_library was not called first; a bug in sealcheck)");
    }
    return *g_library;
}

std::string version_string(int32_t v) {
    return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

void* open_first(rust::Slice<const rust::String> candidates, const char* what, std::string& opened) {
    std::string errors;
    for (const rust::String& candidate : candidates) {
        std::string path(candidate.data(), candidate.size());
        // RTLD_GLOBAL so libnvonnxparser binds to the libnvinfer we opened.
        void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (handle != nullptr) {
            opened = path;
            return handle;
        }
        const char* error = dlerror();
        std::string reason = error != nullptr ? error : "unknown dlopen error";
        // dlerror usually starts with the path already.
        errors += "\n  " + (reason.rfind(path, 0) == 0 ? reason : path + ": " + reason);
    }
    throw std::runtime_error(std::string("cannot load ") + what + "; tried:" + errors);
}

void* symbol(void* handle, const char* name, const std::string& file) {
    dlerror();
    void* address = dlsym(handle, name);
    if (address == nullptr) {
        const char* error = dlerror();
        throw std::runtime_error("symbol " + std::string(name) + " missing from " + file + ": " +
                                 (error != nullptr ? error : "null") +
                                 " (not a TensorRT 10 library?)");
    }
    return address;
}

// ---------------------------------------------------------------------------
// Logging: TensorRT's one logger for the process, into Rust `log`.

// The last error TensorRT logged on this thread, to put in exceptions: most
// TensorRT calls report failure as false/nullptr and explain only in the log.
thread_local std::string t_last_error;

class RustLogger final : public nvinfer1::ILogger {
public:
    void log(Severity severity, const char* message) noexcept override {
        const char* text = message != nullptr ? message : "";
        if (severity == Severity::kERROR || severity == Severity::kINTERNAL_ERROR) {
            t_last_error = text;
        }
        try {
            log_from_tensorrt(static_cast<int32_t>(severity), rust::Str(text, std::strlen(text)));
        } catch (...) {
            // A logger must not throw into TensorRT; the message is lost, nothing else.
        }
    }
};

RustLogger& logger() {
    static RustLogger instance;
    return instance;
}

// What to say about a failed call: TensorRT's own words if it logged any.
std::string failure(const std::string& what) {
    std::string message = what + " failed";
    if (!t_last_error.empty()) {
        message += ": " + t_last_error;
        t_last_error.clear();
    } else {
        message += " (TensorRT logged no error)";
    }
    return message;
}

void clear_last_error() { t_last_error.clear(); }

template <typename T>
struct TrtDelete {
    void operator()(T* object) const noexcept { delete object; }
};
template <typename T>
using TrtPtr = std::unique_ptr<T, TrtDelete<T>>;

nvinfer1::Dims to_dims(const int64_t* values, std::size_t size, const std::string& what) {
    nvinfer1::Dims dims{};
    if (size > static_cast<std::size_t>(nvinfer1::Dims::MAX_DIMS)) {
        throw std::runtime_error(what + " has " + std::to_string(size) + " dimensions, TensorRT allows " +
                                 std::to_string(nvinfer1::Dims::MAX_DIMS));
    }
    dims.nbDims = static_cast<int32_t>(size);
    for (std::size_t i = 0; i < size; ++i) {
        dims.d[i] = values[i];
    }
    return dims;
}

nvinfer1::Dims to_dims(const rust::Vec<int64_t>& values, const std::string& what) {
    return to_dims(values.data(), values.size(), what);
}

// "4x3x640x640", for messages.
std::string dims_string(const nvinfer1::Dims& dims) {
    std::string text;
    for (int32_t i = 0; i < dims.nbDims; ++i) {
        text += (i == 0 ? "" : "x") + std::to_string(dims.d[i]);
    }
    return text;
}

// Sets min, opt and max of `name` in `profile`; throws naming the input.
void set_profile_dims(nvinfer1::IOptimizationProfile& profile, const std::string& name, const nvinfer1::Dims& min,
                      const nvinfer1::Dims& opt, const nvinfer1::Dims& max, const std::string& what) {
    if (!profile.setDimensions(name.c_str(), nvinfer1::OptProfileSelector::kMIN, min) ||
        !profile.setDimensions(name.c_str(), nvinfer1::OptProfileSelector::kOPT, opt) ||
        !profile.setDimensions(name.c_str(), nvinfer1::OptProfileSelector::kMAX, max)) {
        throw std::runtime_error(failure("setting the " + what + " (" + dims_string(min) + " / " + dims_string(opt) +
                                         " / " + dims_string(max) + ")"));
    }
}

DataType from_trt(nvinfer1::DataType type) {
    switch (type) {
        case nvinfer1::DataType::kFLOAT: return DataType::Float;
        case nvinfer1::DataType::kHALF: return DataType::Half;
        case nvinfer1::DataType::kINT8: return DataType::Int8;
        case nvinfer1::DataType::kINT32: return DataType::Int32;
        case nvinfer1::DataType::kBOOL: return DataType::Bool;
        case nvinfer1::DataType::kUINT8: return DataType::Uint8;
        case nvinfer1::DataType::kFP8: return DataType::Fp8;
        case nvinfer1::DataType::kBF16: return DataType::Bf16;
        case nvinfer1::DataType::kINT64: return DataType::Int64;
        default: return DataType::Other;
    }
}

TensorMode from_trt(nvinfer1::TensorIOMode mode) {
    switch (mode) {
        case nvinfer1::TensorIOMode::kINPUT: return TensorMode::Input;
        case nvinfer1::TensorIOMode::kOUTPUT: return TensorMode::Output;
        default: return TensorMode::None;
    }
}

// ---------------------------------------------------------------------------
// Builder callbacks into Rust.

class ProgressMonitor final : public nvinfer1::IProgressMonitor {
public:
    explicit ProgressMonitor(BuildProgress& progress) : progress_(progress) {}

    void phaseStart(const char* phase, const char* parent, int32_t steps) noexcept override {
        try {
            progress_.phase_start(str(phase), str(parent), steps);
        } catch (...) {
        }
    }
    bool stepComplete(const char* phase, int32_t step) noexcept override {
        try {
            return progress_.step_complete(str(phase), step);
        } catch (...) {
            return true;
        }
    }
    void phaseFinish(const char* phase) noexcept override {
        try {
            progress_.phase_finish(str(phase));
        } catch (...) {
        }
    }

private:
    static rust::Str str(const char* text) {
        return text != nullptr ? rust::Str(text, std::strlen(text)) : rust::Str();
    }
    BuildProgress& progress_;
};

#if SEALCHECK_TRT_HAS_IMPLICIT_INT8
// Silence the deprecation of the calibrator API: it is what TensorRT 10.3
// offers for post-training INT8 without a Q/DQ model, and is guarded above.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
class Calibrator final : public nvinfer1::IInt8EntropyCalibrator2 {
public:
    explicit Calibrator(CalibrationFeed& feed) : feed_(feed) {}

    int32_t getBatchSize() const noexcept override {
        try {
            return feed_.batch_size();
        } catch (...) {
            return 1;
        }
    }

    bool getBatch(void* bindings[], const char* names[], int32_t count) noexcept override {
        try {
            for (int32_t i = 0; i < count; ++i) {
                std::size_t address = feed_.next_batch(rust::Str(names[i], std::strlen(names[i])));
                if (address == 0) {
                    return false;
                }
                bindings[i] = reinterpret_cast<void*>(address);
            }
            return count > 0;
        } catch (const std::exception& e) {
            std::string message = std::string("INT8 calibration batch failed: ") + e.what();
            logger().log(nvinfer1::ILogger::Severity::kERROR, message.c_str());
            return false;
        }
    }

    const void* readCalibrationCache(std::size_t& length) noexcept override {
        try {
            cache_ = feed_.read_cache();
        } catch (...) {
            cache_.clear();
        }
        length = cache_.size();
        return cache_.empty() ? nullptr : cache_.data();
    }

    void writeCalibrationCache(const void* data, std::size_t length) noexcept override {
        try {
            feed_.write_cache(rust::Slice<const uint8_t>(static_cast<const uint8_t*>(data), length));
        } catch (const std::exception& e) {
            std::string message = std::string("cannot write the INT8 calibration cache: ") + e.what();
            logger().log(nvinfer1::ILogger::Severity::kWARNING, message.c_str());
        }
    }

private:
    CalibrationFeed& feed_;
    rust::Vec<uint8_t> cache_;
};
#pragma GCC diagnostic pop
#endif

}  // namespace

// ---------------------------------------------------------------------------
// Library loading.

LibraryInfo load_library(rust::Slice<const rust::String> nvinfer_candidates,
                         rust::Slice<const rust::String> onnxparser_candidates) {
    std::lock_guard<std::mutex> lock(g_library_mutex);
    if (g_library != nullptr) {
        return g_library->info;
    }
    auto loaded = std::make_unique<Library>();
    std::string nvinfer_path;
    std::string parser_path;
    loaded->nvinfer = open_first(nvinfer_candidates, "libnvinfer (TensorRT)", nvinfer_path);
    auto lib_version = reinterpret_cast<VersionFn>(symbol(loaded->nvinfer, "getInferLibVersion", nvinfer_path));
    int32_t version = lib_version();
    // The C++ API is only compatible within a major version, and only from
    // older headers to a newer library (vtables grow at their end).
    if (version / 10000 != NV_TENSORRT_MAJOR || version < NV_TENSORRT_VERSION) {
        dlclose(loaded->nvinfer);
        throw std::runtime_error("TensorRT library " + nvinfer_path + " is version " + version_string(version) +
                                 " but sealcheck was built against TensorRT headers " +
                                 version_string(NV_TENSORRT_VERSION) +
                                 "; rebuild sealcheck on this machine against its own TensorRT "
                                 "(TENSORRT_ROOT or TENSORRT_INCLUDE_DIR)");
    }
    loaded->create_builder =
        reinterpret_cast<CreateInferBuilderFn>(symbol(loaded->nvinfer, "createInferBuilder_INTERNAL", nvinfer_path));
    loaded->create_runtime =
        reinterpret_cast<CreateInferRuntimeFn>(symbol(loaded->nvinfer, "createInferRuntime_INTERNAL", nvinfer_path));
    loaded->onnxparser = open_first(onnxparser_candidates, "libnvonnxparser (TensorRT ONNX parser)", parser_path);
    loaded->create_parser =
        reinterpret_cast<CreateOnnxParserFn>(symbol(loaded->onnxparser, "createNvOnnxParser_INTERNAL", parser_path));
    auto parser_version = reinterpret_cast<VersionFn>(symbol(loaded->onnxparser, "getNvOnnxParserVersion", parser_path));

    loaded->info.library_version = version;
    loaded->info.header_version = NV_TENSORRT_VERSION;
    loaded->info.onnx_parser_version = parser_version();
    loaded->info.nvinfer_path = rust::String(nvinfer_path);
    loaded->info.onnxparser_path = rust::String(parser_path);
    g_library = loaded.release();
    return g_library->info;
}

int32_t header_version() noexcept { return NV_TENSORRT_VERSION; }

bool int8_calibration_supported() noexcept { return SEALCHECK_TRT_HAS_IMPLICIT_INT8 != 0; }

// ---------------------------------------------------------------------------
// Builder.

struct Builder::Impl {
    TrtPtr<nvinfer1::IBuilder> builder;
};

Builder::Builder() : impl_(std::make_unique<Impl>()) {
    const Library& lib = library();
    clear_last_error();
    impl_->builder.reset(static_cast<nvinfer1::IBuilder*>(lib.create_builder(&logger(), NV_TENSORRT_VERSION)));
    if (!impl_->builder) {
        throw std::runtime_error(failure("createInferBuilder (is a CUDA GPU and driver present?)"));
    }
}

Builder::~Builder() = default;

rust::Vec<uint8_t> Builder::build_serialized_network(rust::Slice<const uint8_t> onnx, const BuildOptions& options,
                                                     BuildProgress& progress,
                                                     CalibrationFeed& calibration) const {
    const Library& lib = library();
    nvinfer1::IBuilder& builder = *impl_->builder;
    clear_last_error();

    // Explicit batch is the only mode in TensorRT 10; the flag is gone.
    TrtPtr<nvinfer1::INetworkDefinition> network(builder.createNetworkV2(0));
    if (!network) {
        throw std::runtime_error(failure("createNetworkV2"));
    }
    TrtPtr<nvonnxparser::IParser> parser(
        static_cast<nvonnxparser::IParser*>(lib.create_parser(network.get(), &logger(), NV_ONNX_PARSER_VERSION)));
    if (!parser) {
        throw std::runtime_error(failure("createParser"));
    }
    if (!parser->parse(onnx.data(), onnx.size())) {
        std::string message = "the ONNX parser rejected the model:";
        for (int32_t i = 0; i < parser->getNbErrors(); ++i) {
            const nvonnxparser::IParserError* error = parser->getError(i);
            // node() and desc() only: they are in every TensorRT 10 parser.
            message += std::string("\n  node ") + std::to_string(error->node()) + ": " + error->desc();
        }
        throw std::runtime_error(message);
    }

    // The monitor and the calibrator are declared before the config that
    // points at them, so they outlive it.
    ProgressMonitor monitor(progress);
#if SEALCHECK_TRT_HAS_IMPLICIT_INT8
    std::unique_ptr<Calibrator> calibrator;
#endif
    TrtPtr<nvinfer1::IBuilderConfig> config(builder.createBuilderConfig());
    if (!config) {
        throw std::runtime_error(failure("createBuilderConfig"));
    }
    config->setMemoryPoolLimit(nvinfer1::MemoryPoolType::kWORKSPACE, options.workspace_mib << 20);
    config->setProgressMonitor(&monitor);

    switch (options.precision) {
        case Precision::Fp32:
            break;
        case Precision::Fp16:
#if SEALCHECK_TRT_HAS_WEAK_TYPING
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
            config->setFlag(nvinfer1::BuilderFlag::kFP16);
#pragma GCC diagnostic pop
            break;
#else
            throw std::runtime_error("precision fp16 uses BuilderFlag::kFP16, which TensorRT " +
                                     std::to_string(NV_TENSORRT_MAJOR) +
                                     " no longer has; export the model in fp16 instead");
#endif
        case Precision::Int8:
#if SEALCHECK_TRT_HAS_IMPLICIT_INT8
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
            // FP16 too, so layers INT8 cannot take fall back to half, not float.
            config->setFlag(nvinfer1::BuilderFlag::kFP16);
            config->setFlag(nvinfer1::BuilderFlag::kINT8);
            calibrator = std::make_unique<Calibrator>(calibration);
            config->setInt8Calibrator(calibrator.get());
#pragma GCC diagnostic pop
            break;
#else
            (void)calibration;
            throw std::runtime_error("precision int8 needs implicit-quantization calibration, which TensorRT " +
                                     std::to_string(NV_TENSORRT_MAJOR) +
                                     " no longer has; use fp16 or a model with Q/DQ nodes");
#endif
        default:
            throw std::runtime_error("unknown precision");
    }

    // Models with a dynamic batch: one profile (profile 0), 1 .. max_batch
    // frames. The profiles are owned by the builder, not by us.
    if (!options.profile.empty()) {
        nvinfer1::IOptimizationProfile* profile = builder.createOptimizationProfile();
        if (profile == nullptr) {
            throw std::runtime_error(failure("createOptimizationProfile"));
        }
        for (const ProfileShape& shape : options.profile) {
            std::string name(shape.input.data(), shape.input.size());
            const std::string what = "optimization profile for input \"" + name + "\"";
            set_profile_dims(*profile, name, to_dims(shape.min, what), to_dims(shape.opt, what),
                             to_dims(shape.max, what), what);
        }
        if (config->addOptimizationProfile(profile) < 0) {
            throw std::runtime_error(failure("addOptimizationProfile"));
        }
#if SEALCHECK_TRT_HAS_IMPLICIT_INT8
        if (options.precision == Precision::Int8) {
            // A network with runtime dimensions needs a calibration profile;
            // the calibrator feeds one frame per batch (CalibrationFeed), so
            // it is every input's `min` shape (one frame).
            nvinfer1::IOptimizationProfile* calibration_profile = builder.createOptimizationProfile();
            if (calibration_profile == nullptr) {
                throw std::runtime_error(failure("createOptimizationProfile (INT8 calibration)"));
            }
            for (const ProfileShape& shape : options.profile) {
                std::string name(shape.input.data(), shape.input.size());
                const std::string what = "INT8 calibration profile for input \"" + name + "\"";
                const nvinfer1::Dims one_frame = to_dims(shape.min, what);
                set_profile_dims(*calibration_profile, name, one_frame, one_frame, one_frame, what);
            }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
            if (!config->setCalibrationProfile(calibration_profile)) {
                throw std::runtime_error(failure("setCalibrationProfile"));
            }
#pragma GCC diagnostic pop
        }
#endif
    }

    TrtPtr<nvinfer1::IHostMemory> plan(builder.buildSerializedNetwork(*network, *config));
    if (!plan || plan->size() == 0) {
        throw std::runtime_error(failure("buildSerializedNetwork"));
    }
    rust::Vec<uint8_t> bytes;
    bytes.reserve(plan->size());
    const auto* data = static_cast<const uint8_t*>(plan->data());
    for (std::size_t i = 0; i < plan->size(); ++i) {
        bytes.push_back(data[i]);
    }
    return bytes;
}

// ---------------------------------------------------------------------------
// Runtime, Engine, Context.

struct Runtime::Impl {
    TrtPtr<nvinfer1::IRuntime> runtime;
};

struct Engine::Impl {
    // The runtime must outlive every engine it deserialized.
    std::shared_ptr<Runtime::Impl> runtime;
    TrtPtr<nvinfer1::ICudaEngine> engine;
};

// The engine is not referenced here: Rust's Context<'engine> borrows the
// Engine that owns it, so the engine outlives the context.
struct Context::Impl {
    TrtPtr<nvinfer1::IExecutionContext> context;
};

Runtime::Runtime() : impl_(std::make_shared<Impl>()) {
    const Library& lib = library();
    clear_last_error();
    impl_->runtime.reset(static_cast<nvinfer1::IRuntime*>(lib.create_runtime(&logger(), NV_TENSORRT_VERSION)));
    if (!impl_->runtime) {
        throw std::runtime_error(failure("createInferRuntime (is a CUDA GPU and driver present?)"));
    }
}

Runtime::~Runtime() = default;

std::unique_ptr<Engine> Runtime::deserialize(rust::Slice<const uint8_t> plan) const {
    clear_last_error();
    if (plan.size() == 0) {
        throw std::runtime_error("the engine file is empty");
    }
    auto impl = std::make_unique<Engine::Impl>();
    impl->runtime = impl_;
    impl->engine.reset(impl_->runtime->deserializeCudaEngine(plan.data(), plan.size()));
    if (!impl->engine) {
        throw std::runtime_error(failure("deserializeCudaEngine"));
    }
    return std::make_unique<Engine>(std::move(impl));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() {
    // Engine before runtime: reset explicitly rather than rely on member order.
    impl_->engine.reset();
}

rust::Vec<TensorInfo> Engine::io_tensors() const {
    const nvinfer1::ICudaEngine& engine = *impl_->engine;
    rust::Vec<TensorInfo> tensors;
    for (int32_t i = 0; i < engine.getNbIOTensors(); ++i) {
        const char* name = engine.getIOTensorName(i);
        if (name == nullptr) {
            throw std::runtime_error(failure("getIOTensorName(" + std::to_string(i) + ")"));
        }
        TensorInfo info;
        info.name = rust::String(name);
        info.mode = from_trt(engine.getTensorIOMode(name));
        info.dtype = from_trt(engine.getTensorDataType(name));
        nvinfer1::Dims dims = engine.getTensorShape(name);
        if (dims.nbDims < 0) {
            throw std::runtime_error(failure(std::string("getTensorShape(") + name + ")"));
        }
        for (int32_t d = 0; d < dims.nbDims; ++d) {
            info.shape.push_back(dims.d[d]);
        }
        tensors.push_back(std::move(info));
    }
    return tensors;
}

int64_t Engine::device_memory_size() const {
#if SEALCHECK_TRT_HAS_DEVICE_MEMORY_V2
    return impl_->engine->getDeviceMemorySizeV2();
#else
    return static_cast<int64_t>(impl_->engine->getDeviceMemorySize());
#endif
}

std::unique_ptr<Context> Engine::create_context() const {
    clear_last_error();
    auto impl = std::make_unique<Context::Impl>();
    impl->context.reset(impl_->engine->createExecutionContext());
    if (!impl->context) {
        throw std::runtime_error(failure("createExecutionContext (out of GPU memory?)"));
    }
    // An engine with a profile (a dynamic batch) runs on profile 0. TensorRT
    // 10 assigns it to every new context ("-1 until selected" was deprecated
    // in 8.6), so no setOptimizationProfileAsync, which would need a stream
    // and a wait on it. Anything else is refused here rather than failing
    // every enqueue later.
    if (impl_->engine->getNbOptimizationProfiles() > 0) {
        const int32_t selected = impl->context->getOptimizationProfile();
        if (selected != 0) {
            throw std::runtime_error("the new execution context is on optimization profile " +
                                     std::to_string(selected) +
                                     ", not 0 (the engine's only profile); this TensorRT does not select profile 0 "
                                     "for new contexts as TensorRT 10 documents");
        }
    }
    return std::make_unique<Context>(std::move(impl));
}

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;

void Context::set_tensor_address(rust::Str name, std::size_t device_address) {
    clear_last_error();
    std::string tensor(name.data(), name.size());
    if (!impl_->context->setTensorAddress(tensor.c_str(), reinterpret_cast<void*>(device_address))) {
        throw std::runtime_error(failure("setTensorAddress(\"" + tensor + "\")"));
    }
}

void Context::set_input_shape(rust::Str name, rust::Slice<const int64_t> dims) {
    clear_last_error();
    std::string tensor(name.data(), name.size());
    const nvinfer1::Dims shape = to_dims(dims.data(), dims.size(), "the shape of input \"" + tensor + "\"");
    if (!impl_->context->setInputShape(tensor.c_str(), shape)) {
        throw std::runtime_error(failure("setInputShape(\"" + tensor + "\", " + dims_string(shape) +
                                         ") (outside the engine's optimization profile?)"));
    }
}

void Context::enqueue(std::size_t stream) {
    clear_last_error();
    if (!impl_->context->enqueueV3(reinterpret_cast<cudaStream_t>(stream))) {
        throw std::runtime_error(failure("enqueueV3"));
    }
}

std::unique_ptr<Builder> new_builder() { return std::make_unique<Builder>(); }
std::unique_ptr<Runtime> new_runtime() { return std::make_unique<Runtime>(); }

}  // namespace trt
}  // namespace sealcheck
