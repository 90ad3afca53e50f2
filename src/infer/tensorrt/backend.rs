//! The TensorRT backend: both engines (from the cache, or built), their
//! device buffers, and host mode (`InferenceBackend::segment` / `classify`:
//! host input -> pinned -> device -> engine -> device -> pinned -> host
//! output). Device mode binds the same engines to the device runner's
//! tensors (`device.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::bridge::{BuildOptions, DataType, LibraryInfo, TensorInfo, TensorMode};
use super::calibration::{CalibrationPlan, ModelCalibration};
use super::engine::{Builder, LoadedEngine, Runtime, load_library, version_string};
use super::engine_cache::{CacheOutcome, EngineCache, EngineSpec};
use super::error::TrtError;
use super::progress::BuildProgress;
use super::settings::{TensorRtSettings, precision_name};
use crate::config::Config;
use crate::gpu::{DeviceBuffer, DeviceTensor, GpuContext, PinnedBuffer, Stream, TensorElement};
use crate::infer::model_io::{
    DeclaredTensor, Dim, ModelIo, ModelRole, ModelSpec, check_buffers, record_opened,
    resolve_model_io,
};
use crate::infer::{BackendKind, InferError, InferenceBackend};

const ENGINE: &str = "TensorRT";

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
