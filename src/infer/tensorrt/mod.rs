//! The `tensorrt` inference backend (feature `tensorrt`): both models as
//! TensorRT engines, built from the ONNX files on first start and cached.
//!
//! ```text
//! open: load libnvinfer (dlopen) -> open GPU -> per model: engine cache
//!       (load, or build with progress + INT8 calibration, save atomically)
//!       -> check the engine's IO against the config -> device buffers
//!
//! per frame, device mode (GPU preprocessing, one stream, no host sync between):
//!   GpuPreprocessor::enqueue_frame -> enqueue(Segmentation) -> GpuPreprocessor::enqueue_mask
//!   -> enqueue(Classifier) -> one wait at the end
//! per frame, host mode (InferenceBackend::segment / classify, CPU mask):
//!   host input -> pinned -> device -> engine -> device -> pinned -> host output
//! ```
//!
//! Layers: `bridge` (the `#[cxx::bridge]`), `engine` (safe owners:
//! `Builder`, `Runtime`, `Engine`, `LoadedEngine`), `engine_cache`,
//! `calibration`, `progress` (TensorRT's logger and build progress), `device`
//! (`TrtDeviceEngine`: device mode on the shared device runner), and this file, the
//! backend (host mode through `InferenceBackend`).
//!
//! Settings the config file has no keys for yet come from the environment
//! (`TensorRtSettings`): precision, workspace, engine folder, INT8 images.

mod bridge;
mod calibration;
mod device;
mod engine;
pub mod engine_cache;
mod error;
mod progress;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use bridge::{LibraryInfo, Precision, TensorInfo};
pub use device::{TrtDeviceEngine, device_runner};
pub(crate) use device::open as open_device;
pub use engine::{
    Builder, Engine, LoadedEngine, Runtime, compiled_against, int8_calibration_supported,
    load_library, version_string,
};
pub use engine_cache::{BuildReason, CacheOutcome, EngineCache};
pub use error::{TENSORRT_FIX, TrtError};
pub use progress::{BuildProgress, LOG_TARGET};

use self::bridge::{BuildOptions, DataType, TensorMode};
use self::calibration::{CalibrationFeed, SampleMaker, calibration_digest, calibration_images};
use self::engine_cache::EngineSpec;
use super::model_io::{
    DeclaredTensor, Dim, ModelIo, ModelRole, ModelSpec, check_buffers, record_opened,
    resolve_model_io,
};
use super::{BackendKind, InferError, InferenceBackend};
use crate::config::{Config, EnginePrecision};
use crate::gpu::{DeviceBuffer, DeviceTensor, GpuContext, PinnedBuffer, Stream, TensorElement};

const ENGINE: &str = "TensorRT";

/// Engine-build settings, from `[inference.tensorrt]`; engines are cached in
/// `engine_dir`, or `$STATE_DIRECTORY/engines` under systemd, or `engines/`
/// next to the segmentation model.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRtSettings {
    pub precision: Precision,
    pub workspace_mib: u64,
    pub engine_dir: PathBuf,
    pub calibration_images: Option<PathBuf>,
    pub device: usize,
}

impl TensorRtSettings {
    pub fn from_config(cfg: &Config) -> Result<Self, TrtError> {
        Self::resolve(
            cfg,
            std::env::var("STATE_DIRECTORY")
                .ok()
                .filter(|v| !v.is_empty()),
        )
    }

    /// As `from_config`, with systemd's `STATE_DIRECTORY` given (tests pass their own).
    pub fn resolve(cfg: &Config, state_directory: Option<String>) -> Result<Self, TrtError> {
        let trt = &cfg.inference.tensorrt;
        let precision = match trt.precision {
            EnginePrecision::Fp32 => Precision::Fp32,
            EnginePrecision::Fp16 => Precision::Fp16,
            EnginePrecision::Int8 => Precision::Int8,
        };
        let engine_dir = match (&trt.engine_dir, state_directory) {
            (Some(dir), _) => dir.clone(),
            // systemd's StateDirectory= (may list several, colon-separated).
            (None, Some(state)) => {
                PathBuf::from(state.split(':').next().unwrap_or(&state)).join("engines")
            }
            (None, None) => cfg
                .segmentation
                .path
                .parent()
                .unwrap_or(Path::new("."))
                .join("engines"),
        };
        if precision == Precision::Int8 && !int8_calibration_supported() {
            return Err(TrtError::Setting {
                variable: "inference.tensorrt.precision",
                value: "int8".to_string(),
                expected: "fp32 or fp16: this build's TensorRT has no implicit-quantization INT8 calibration",
            });
        }
        Ok(TensorRtSettings {
            precision,
            workspace_mib: trt.workspace_mib,
            engine_dir,
            calibration_images: trt.calibration_images.clone(),
            device: trt.device,
        })
    }
}

pub fn precision_name(precision: Precision) -> &'static str {
    match precision {
        Precision::Fp32 => "fp32",
        Precision::Fp16 => "fp16",
        Precision::Int8 => "int8",
        _ => "unknown",
    }
}

/// Both engines, their device buffers, and the stream host-mode calls use.
pub struct TensorRtBackend {
    // Drop order: the models (contexts, engines, buffers) after `Drop`
    // synchronized the stream, then the stream, then the context.
    segmentation: ModelEngine,
    classifier: ModelEngine,
    stream: Stream,
    gpu: Arc<GpuContext>,
    library: LibraryInfo,
    settings: TensorRtSettings,
}

impl TensorRtBackend {
    /// Loads or builds both engines with the settings from `cfg` and the environment.
    pub fn open(cfg: &Config) -> Result<Self, TrtError> {
        let settings = TensorRtSettings::from_config(cfg)?;
        Self::open_with(cfg, &settings, None)
    }

    /// As `open`; `cancel` stops an engine build at its next step (a
    /// shutdown request during a minutes-long first build).
    pub fn open_with(
        cfg: &Config,
        settings: &TensorRtSettings,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<Self, TrtError> {
        let seg_spec = ModelSpec::segmentation(&cfg.segmentation);
        let cls_spec = ModelSpec::classifier(&cfg.classifier);
        seg_spec.require_file()?;
        cls_spec.require_file()?;
        let library = load_library()?;
        log::info!(target: "sealcheck::tensorrt", library = library.nvinfer_path.as_str(),
            version = version_string(library.library_version).as_str(),
            headers = version_string(library.header_version).as_str(); "TensorRT loaded");
        let gpu = GpuContext::open(settings.device).map_err(TrtError::NoGpu)?;
        let stream = Stream::new(&gpu).map_err(TrtError::gpu("create a CUDA stream"))?;
        let runtime = Runtime::new(&library)?;
        let builder = LazyBuilder {
            library: &library,
            builder: None,
        };
        let mut calibration = CalibrationPlan::new(cfg, settings)?;
        let mut session = OpenSession {
            library: &library,
            gpu: &gpu,
            runtime: &runtime,
            builder,
            settings,
            cancel,
        };
        let segmentation = session.open_model(
            &seg_spec,
            calibration.feed_for(ModelRole::Segmentation, &gpu, settings)?,
        )?;
        let classifier = session.open_model(
            &cls_spec,
            calibration.feed_for(ModelRole::Classifier, &gpu, settings)?,
        )?;
        Ok(TensorRtBackend {
            segmentation,
            classifier,
            stream,
            gpu,
            library,
            settings: settings.clone(),
        })
    }

    pub fn library(&self) -> &LibraryInfo {
        &self.library
    }

    pub fn settings(&self) -> &TensorRtSettings {
        &self.settings
    }

    pub fn gpu(&self) -> &Arc<GpuContext> {
        &self.gpu
    }

    /// The stream host-mode inference runs on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The engine file of each model and whether it came from the cache.
    pub fn engines(&self) -> [(ModelRole, &Path, &CacheOutcome); 2] {
        [
            (
                ModelRole::Segmentation,
                self.segmentation.engine_path.as_path(),
                &self.segmentation.outcome,
            ),
            (
                ModelRole::Classifier,
                self.classifier.engine_path.as_path(),
                &self.classifier.outcome,
            ),
        ]
    }

    /// Element type each engine wants at its input and output, for sizing
    /// the GPU preprocessor's tensors (f32 for engines built from f32 ONNX).
    pub fn io_elements(&self, role: ModelRole) -> (TensorElement, TensorElement) {
        let model = self.model(role);
        (model.input_element, model.output_element)
    }

    /// Device mode: points `role`'s engine at tensors another owner (the GPU
    /// preprocessor) holds, instead of this backend's own buffers.
    ///
    /// # Safety
    /// Both tensors must stay allocated until `bind_own_buffers`, a later
    /// `bind_device`, or the drop of this backend, and must not be freed while
    /// work queued with `enqueue` on them is pending.
    pub unsafe fn bind_device(
        &mut self,
        role: ModelRole,
        input: DeviceTensor,
        output: DeviceTensor,
    ) -> Result<(), TrtError> {
        let model = self.model_mut(role);
        model.check_device_tensor("input", &input, model.input_element, model.io.input_len())?;
        model.check_device_tensor(
            "output",
            &output,
            model.output_element,
            model.io.output_len(),
        )?;
        // SAFETY: lengths and element types match the engine's IO (checked);
        // the caller keeps the memory alive as this function requires.
        unsafe { model.bind(input.ptr, output.ptr) }
    }

    /// Device mode: queues `role`'s engine on `stream` (a raw `CUstream` /
    /// `cudaStream_t`, e.g. `GpuPreprocessor::stream().raw() as usize`).
    /// Returns at once; the caller waits on the stream (an event) later.
    ///
    /// # Safety
    /// `stream` must be a live stream of this backend's device, and the bound
    /// tensors must stay valid until the stream has run this work.
    pub unsafe fn enqueue(&mut self, role: ModelRole, stream: usize) -> Result<(), TrtError> {
        let model = self.model_mut(role);
        // SAFETY: forwarded from this function's contract.
        unsafe { model.loaded.enqueue(stream) }
    }

    /// Points both engines back at this backend's own buffers (host mode).
    pub fn bind_own_buffers(&mut self) -> Result<(), TrtError> {
        self.segmentation.bind_own()?;
        self.classifier.bind_own()
    }

    fn model(&self, role: ModelRole) -> &ModelEngine {
        match role {
            ModelRole::Segmentation => &self.segmentation,
            ModelRole::Classifier => &self.classifier,
        }
    }

    fn model_mut(&mut self, role: ModelRole) -> &mut ModelEngine {
        match role {
            ModelRole::Segmentation => &mut self.segmentation,
            ModelRole::Classifier => &mut self.classifier,
        }
    }

    fn run_host(
        &mut self,
        role: ModelRole,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        let stream = &self.stream;
        let model = match role {
            ModelRole::Segmentation => &mut self.segmentation,
            ModelRole::Classifier => &mut self.classifier,
        };
        check_buffers(role, &model.io, input, logits_out)?;
        model
            .run_host(stream, input, logits_out)
            .map_err(|e| InferError::Run {
                role,
                engine: ENGINE,
                message: e.to_string(),
            })
    }
}

impl Drop for TensorRtBackend {
    fn drop(&mut self) {
        // Work queued on our stream may still use the buffers the fields
        // below free; wait for it. Drop cannot fail, so a failure is recorded.
        if let Err(e) = self.stream.synchronize() {
            self.gpu.record_drop_error(
                "synchronizing the TensorRT stream before freeing its buffers",
                e,
            );
        }
    }
}

impl InferenceBackend for TensorRtBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::TensorRt
    }

    fn segmentation_io(&self) -> &ModelIo {
        &self.segmentation.io
    }

    fn classifier_io(&self) -> &ModelIo {
        &self.classifier.io
    }

    fn segment(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
        self.run_host(ModelRole::Segmentation, input, logits_out)
    }

    fn classify(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
        self.run_host(ModelRole::Classifier, input, logits_out)
    }
}

/// One model's engine, context and buffers.
struct ModelEngine {
    role: ModelRole,
    io: ModelIo,
    engine_path: PathBuf,
    outcome: CacheOutcome,
    input_element: TensorElement,
    output_element: TensorElement,
    loaded: LoadedEngine,
    /// This backend's own device tensors (host mode), f32.
    input: DeviceBuffer<f32>,
    output: DeviceBuffer<f32>,
    /// Page-locked staging, so copies are asynchronous and need no allocation.
    host_input: PinnedBuffer<f32>,
    host_output: PinnedBuffer<f32>,
    /// Whether the engine currently points at `input`/`output`.
    bound_to_own: bool,
}

impl ModelEngine {
    /// # Safety
    /// `input` and `output` must hold the engine's input and output tensors
    /// and stay valid while work that uses them is queued.
    unsafe fn bind(&mut self, input: u64, output: u64) -> Result<(), TrtError> {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            self.loaded.set_tensor_address(&self.io.input_name, input)?;
            self.loaded
                .set_tensor_address(&self.io.output_name, output)?;
        }
        self.bound_to_own = false;
        Ok(())
    }

    fn bind_own(&mut self) -> Result<(), TrtError> {
        if !self.bound_to_own {
            let (input, output) = (self.input.device_ptr(), self.output.device_ptr());
            // SAFETY: our own buffers, sized for the engine's IO at open, live
            // as long as the context (same owner; the backend's Drop waits for
            // the stream first).
            unsafe { self.bind(input, output)? };
            self.bound_to_own = true;
        }
        Ok(())
    }

    fn check_device_tensor(
        &self,
        which: &str,
        tensor: &DeviceTensor,
        element: TensorElement,
        len: usize,
    ) -> Result<(), TrtError> {
        if tensor.element != element || tensor.len != len {
            return Err(TrtError::EngineIo {
                role: self.role,
                engine: self.engine_path.clone(),
                problem: format!(
                    "the engine's {which} is {len} {element:?} values, the device tensor offered is {} {:?}",
                    tensor.len, tensor.element
                ),
            });
        }
        Ok(())
    }

    /// Host mode: one synchronous run. No allocation: all buffers exist.
    fn run_host(
        &mut self,
        stream: &Stream,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), TrtError> {
        self.bind_own()?;
        self.host_input.as_mut_slice().copy_from_slice(input);
        // SAFETY: the pinned and device buffers are owned by `self` and not
        // touched by the host until `synchronize` below returns; the context
        // is bound to `input`/`output` (bind_own), sized for the engine.
        unsafe {
            stream
                .upload(self.host_input.as_slice(), &self.input, 0)
                .map_err(TrtError::gpu("copy the input to the GPU"))?;
            self.loaded.enqueue(stream.raw() as usize)?;
            stream
                .download(&self.output, 0, self.output.len(), &mut self.host_output)
                .map_err(TrtError::gpu("copy the output from the GPU"))?;
        }
        stream
            .synchronize()
            .map_err(TrtError::gpu("wait for the engine"))?;
        logits_out.copy_from_slice(self.host_output.as_slice());
        Ok(())
    }
}

/// Creates the builder only when an engine has to be built.
struct LazyBuilder<'a> {
    library: &'a LibraryInfo,
    builder: Option<Builder>,
}

impl LazyBuilder<'_> {
    fn get(&mut self) -> Result<&Builder, TrtError> {
        if self.builder.is_none() {
            self.builder = Some(Builder::new(self.library)?);
        }
        self.builder.as_ref().ok_or_else(|| TrtError::TensorRt {
            action: "create a builder".to_string(),
            message: "no builder".to_string(),
        })
    }
}

struct OpenSession<'a> {
    library: &'a LibraryInfo,
    gpu: &'a Arc<GpuContext>,
    runtime: &'a Runtime,
    builder: LazyBuilder<'a>,
    settings: &'a TensorRtSettings,
    cancel: Option<Arc<AtomicBool>>,
}

impl OpenSession<'_> {
    fn open_model(
        &mut self,
        spec: &ModelSpec<'_>,
        mut calibration: ModelCalibration,
    ) -> Result<ModelEngine, TrtError> {
        let cache = EngineCache::new(&self.settings.engine_dir);
        let engine_spec = EngineSpec {
            tensorrt_version: version_string(self.library.library_version),
            gpu_name: self.gpu.name().to_string(),
            compute_capability: self.gpu.compute_capability(),
            precision: precision_name(self.settings.precision).to_string(),
            // The pipeline's models have static shapes (model_io checks it),
            // so no optimization profile is needed.
            profile: Vec::new(),
            workspace_mib: self.settings.workspace_mib,
            calibration: calibration.digest.clone(),
        };
        let options = BuildOptions {
            precision: self.settings.precision,
            workspace_mib: self.settings.workspace_mib,
            profile: Vec::new(),
        };
        let role = spec.role;
        let model_path = spec.path.to_path_buf();
        let label = format!("{role} ({})", model_path.display());
        let builder = &mut self.builder;
        let cancel = self.cancel.clone();
        let runtime = self.runtime;
        let cached = cache.load_or_build(
            spec.path,
            &engine_spec,
            |onnx| {
                let mut progress = BuildProgress::new(label.clone(), cancel.clone());
                builder
                    .get()?
                    .build_serialized(onnx, &options, &mut progress, &mut calibration.feed)
                    .map_err(|e| TrtError::Build {
                        role,
                        model: model_path.clone(),
                        message: e.to_string(),
                    })
            },
            |plan| runtime.deserialize(plan),
        )?;
        let io_tensors = cached.engine.io_tensors()?;
        let (inputs, outputs) = declared_tensors(&io_tensors);
        let io = resolve_model_io(spec, &inputs, &outputs)?;
        record_opened(spec, ENGINE);
        let memory = cached.engine.device_memory_size()?;
        log::info!(target: "sealcheck::tensorrt", model = role.as_str(), engine:% = cached.path.display(),
            activations_mib = memory / (1 << 20), input:? = io.input_shape, output:? = io.output_shape;
            "TensorRT engine ready");
        let loaded = LoadedEngine::new(cached.engine)?;
        let gpu = self.gpu;
        let alloc = |what: &'static str, len: usize| {
            DeviceBuffer::new(gpu, len).map_err(TrtError::gpu(what))
        };
        let pinned = |what: &'static str, len: usize| {
            PinnedBuffer::new(gpu, len, false).map_err(TrtError::gpu(what))
        };
        let mut model = ModelEngine {
            role,
            engine_path: cached.path,
            outcome: cached.outcome,
            // resolve_model_io accepted only f32 IO.
            input_element: TensorElement::F32,
            output_element: TensorElement::F32,
            loaded,
            input: alloc("allocate the engine input", io.input_len())?,
            output: alloc("allocate the engine output", io.output_len())?,
            host_input: pinned("allocate the pinned input", io.input_len())?,
            host_output: pinned("allocate the pinned output", io.output_len())?,
            bound_to_own: false,
            io,
        };
        model.bind_own()?;
        Ok(model)
    }
}

/// The engine's tensors as `model_io` wants them (the same check every backend runs).
fn declared_tensors(tensors: &[TensorInfo]) -> (Vec<DeclaredTensor>, Vec<DeclaredTensor>) {
    let declare = |t: &TensorInfo| DeclaredTensor {
        name: t.name.clone(),
        dims: Some(
            t.shape
                .iter()
                .map(|&d| {
                    usize::try_from(d)
                        .map(Dim::Fixed)
                        .unwrap_or_else(|_| Dim::Symbolic(d.to_string()))
                })
                .collect(),
        ),
        element: format!("{:?}", t.dtype),
        is_f32: t.dtype == DataType::Float,
    };
    let inputs = tensors
        .iter()
        .filter(|t| t.mode == TensorMode::Input)
        .map(declare)
        .collect();
    let outputs = tensors
        .iter()
        .filter(|t| t.mode == TensorMode::Output)
        .map(declare)
        .collect();
    (inputs, outputs)
}

/// INT8 calibration for both models, or nothing for fp32/fp16.
struct CalibrationPlan {
    images: Vec<PathBuf>,
    digest: Option<String>,
    /// INT8 only: one sample maker per model (taken when its feed is made)
    /// and the length of each model's input.
    segmentation: Option<SampleMaker>,
    classifier: Option<SampleMaker>,
    lengths: (usize, usize),
}

/// A feed and the key field it implies.
struct ModelCalibration {
    feed: CalibrationFeed,
    digest: Option<String>,
}

impl CalibrationPlan {
    fn new(cfg: &Config, settings: &TensorRtSettings) -> Result<Self, TrtError> {
        let (Precision::Int8, Some(folder)) =
            (settings.precision, settings.calibration_images.as_deref())
        else {
            return Ok(CalibrationPlan {
                images: Vec::new(),
                digest: None,
                segmentation: None,
                classifier: None,
                lengths: (0, 0),
            });
        };
        let images = calibration_images(folder)?;
        let digest = Some(calibration_digest(&images)?);
        let (segmentation, classifier, lengths) = sample_makers(cfg)?;
        Ok(CalibrationPlan {
            images,
            digest,
            segmentation: Some(segmentation),
            classifier: Some(classifier),
            lengths,
        })
    }

    fn feed_for(
        &mut self,
        role: ModelRole,
        gpu: &Arc<GpuContext>,
        settings: &TensorRtSettings,
    ) -> Result<ModelCalibration, TrtError> {
        let (maker, len) = match role {
            ModelRole::Segmentation => (self.segmentation.take(), self.lengths.0),
            ModelRole::Classifier => (self.classifier.take(), self.lengths.1),
        };
        let Some(maker) = maker else {
            return Ok(ModelCalibration {
                feed: CalibrationFeed::none(),
                digest: None,
            });
        };
        std::fs::create_dir_all(&settings.engine_dir).map_err(|source| TrtError::Io {
            action: "cannot create the engine cache folder",
            path: settings.engine_dir.clone(),
            source,
        })?;
        let cache_path = settings
            .engine_dir
            .join(format!("{}.int8-calibration.cache", role.as_str()));
        let feed = CalibrationFeed::new(gpu, self.images.clone(), len, maker, cache_path)?;
        Ok(ModelCalibration {
            feed,
            digest: self.digest.clone(),
        })
    }
}

/// Sample makers for both models from sealcheck's own CPU preprocessing; the
/// classifier's mask channel comes from the CPU reference segmentation
/// (tract), exactly as `infer_frame` computes it.
fn sample_makers(cfg: &Config) -> Result<(SampleMaker, SampleMaker, (usize, usize)), TrtError> {
    use crate::frame::{FrameSlot, FrameWork};
    use crate::preprocess::{Preprocessor, logits_to_mask};

    let mut reference = super::tract::TractBackend::open(cfg)?;
    let geometry = super::geometry(reference.segmentation_io(), reference.classifier_io())?;
    let new_preprocessor = || {
        Preprocessor::new(
            cfg.segmentation.normalization,
            cfg.classifier.normalization,
            cfg.classifier.mask_mean,
            cfg.classifier.mask_std,
            geometry,
        )
    };
    let prepare = |preprocessor: &mut Preprocessor,
                   slot: &mut FrameSlot,
                   work: &mut FrameWork,
                   image: &Path| {
        crate::capture::decode_image_file(image, slot).map_err(|e| e.to_string())?;
        // The CPU preprocessing the pipeline runs (the GPU kernels match it to the bit).
        preprocessor
            .frame_to_tensors(slot.image(), &mut work.seg_input, &mut work.cls_input)
            .map_err(|e| e.to_string())
    };

    let (mut seg_pre, mut seg_slot, mut seg_work) = (
        new_preprocessor(),
        FrameSlot::with_capacity(0),
        FrameWork::new(&geometry),
    );
    let segmentation: SampleMaker = Box::new(move |image, sample| {
        prepare(&mut seg_pre, &mut seg_slot, &mut seg_work, image)?;
        sample.copy_from_slice(&seg_work.seg_input);
        Ok(())
    });
    let (mut cls_pre, mut cls_slot, mut cls_work) = (
        new_preprocessor(),
        FrameSlot::with_capacity(0),
        FrameWork::new(&geometry),
    );
    let mask_class = cfg.segmentation.mask_class;
    let classifier: SampleMaker = Box::new(move |image, sample| {
        prepare(&mut cls_pre, &mut cls_slot, &mut cls_work, image)?;
        let work = &mut cls_work;
        reference
            .segment(&work.seg_input, &mut work.seg_logits)
            .map_err(|e| e.to_string())?;
        work.mask_pixels = logits_to_mask(
            &work.seg_logits,
            geometry.seg_classes,
            mask_class,
            &mut work.mask,
        );
        cls_pre.mask_to_classifier_channel(&work.mask, &mut work.cls_input);
        sample.copy_from_slice(&work.cls_input);
        Ok(())
    });
    Ok((
        segmentation,
        classifier,
        (geometry.seg_input_len(), geometry.cls_input_len()),
    ))
}

impl From<InferError> for TrtError {
    fn from(e: InferError) -> Self {
        TrtError::Model(Box::new(e))
    }
}

impl From<TrtError> for InferError {
    /// Model and contract problems keep their own variant; everything else
    /// becomes a message shown as is (it names file, cause and fix).
    fn from(e: TrtError) -> Self {
        match e {
            TrtError::Model(inner) => *inner,
            other => InferError::Mismatch(other.to_string()),
        }
    }
}

/// For `infer::open_backend`: the TensorRT backend as a trait object.
pub fn open_backend(cfg: &Config) -> Result<Box<dyn InferenceBackend>, TrtError> {
    Ok(Box::new(TensorRtBackend::open(cfg)?))
}

/// `sealcheck build-engine --config FILE`: builds (or finds) both engines and
/// says where they are.
pub fn build_engines(cfg: &Config) -> Result<Vec<(ModelRole, PathBuf, CacheOutcome)>, TrtError> {
    let backend = TensorRtBackend::open(cfg)?;
    Ok(backend
        .engines()
        .into_iter()
        .map(|(role, path, outcome)| (role, path.to_path_buf(), outcome.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuError;
    /// A config whose model files exist (contents do not matter here), and its folder.
    fn config() -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        let text = "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"seg.onnx\"\n\
                    [models.classifier]\npath = \"cls.onnx\"\n[output]\nresults = \"results.jsonl\"\n";
        for name in ["seg.onnx", "cls.onnx"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let path = dir.path().join("sealcheck.toml");
        std::fs::write(&path, text).unwrap();
        let cfg = crate::config::load(&path).unwrap();
        (dir, cfg)
    }

    #[test]
    fn defaults_are_fp16_1gib_engines_next_to_the_model() {
        let (_dir, cfg) = config();
        let settings = TensorRtSettings::resolve(&cfg, None).unwrap();
        assert_eq!(settings.precision, Precision::Fp16);
        assert_eq!(settings.workspace_mib, 1024);
        assert_eq!(
            settings.engine_dir,
            cfg.segmentation.path.parent().unwrap().join("engines")
        );
        assert_eq!(settings.device, 0);
    }

    #[test]
    fn systemd_state_directory_holds_the_engines_unless_the_config_names_a_folder() {
        let (_dir, mut cfg) = config();
        let settings = TensorRtSettings::resolve(&cfg, Some("/var/lib/sealcheck".into())).unwrap();
        assert_eq!(
            settings.engine_dir,
            PathBuf::from("/var/lib/sealcheck/engines")
        );
        cfg.inference.tensorrt.engine_dir = Some(PathBuf::from("/srv/e"));
        let explicit = TensorRtSettings::resolve(&cfg, Some("/var/lib/sealcheck".into())).unwrap();
        assert_eq!(explicit.engine_dir, PathBuf::from("/srv/e"));
    }

    #[test]
    fn engine_io_maps_to_declared_tensors() {
        let tensors = vec![
            TensorInfo {
                name: "images".into(),
                mode: TensorMode::Input,
                dtype: DataType::Float,
                shape: vec![1, 3, 640, 640],
            },
            TensorInfo {
                name: "logits".into(),
                mode: TensorMode::Output,
                dtype: DataType::Half,
                shape: vec![-1, 2, 640, 640],
            },
        ];
        let (inputs, outputs) = declared_tensors(&tensors);
        assert_eq!(inputs.len(), 1);
        assert!(inputs[0].is_f32);
        assert!(!outputs[0].is_f32);
        assert_eq!(
            outputs[0].dims.as_ref().unwrap()[0],
            Dim::Symbolic("-1".into())
        );
    }

    #[test]
    fn unavailable_errors_are_told_apart_from_model_errors() {
        assert!(
            TrtError::LibraryUnavailable {
                message: "x".into()
            }
            .is_unavailable()
        );
        assert!(TrtError::NoGpu(GpuError::NoDriver).is_unavailable());
        assert!(!TrtError::Calibration("x".into()).is_unavailable());
    }

    #[test]
    fn missing_library_message_names_the_fix() {
        let message = InferError::from(TrtError::LibraryUnavailable {
            message: "cannot load libnvinfer".into(),
        })
        .to_string();
        assert!(
            message.contains("libnvinfer") && message.contains("backend = \"onnxruntime\""),
            "{message}"
        );
    }
}
