//! The TensorRT backend: both engines (from the cache, or built), their
//! device buffers, and host mode (`InferenceBackend::run`: host input ->
//! pinned -> device -> engine -> device -> pinned -> host output). Device
//! mode binds the same engines to the device runner's tensors
//! (`device.rs`). The two engines are a `ModelPair<ModelEngine>`: every
//! method that takes a `ModelRole` picks its engine with
//! `ModelPair::by_role`.
//!
//! Batches: a model whose ONNX input has a symbolic first dimension is built
//! with one optimization profile, 1 .. `[inference] max_batch` frames
//! (`profile.rs`; the profile is part of the engine's cache key). Its engine
//! reports -1 for the batch, so `model_io` gives it `BatchDim::Dynamic` and
//! one frame's shapes. Its own buffers hold `max_batch` frames, and a run
//! sets the input shape (`setInputShape`) only when its batch differs from
//! the last run's (`ModelEngine::set_frames`, the one place every enqueue
//! passes). A model with a batch of one runs as before: no profile, the same
//! cache key, one frame a run.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::bridge::{BuildOptions, DataType, LibraryInfo, TensorInfo, TensorMode};
use super::calibration::{CalibrationPlan, ModelCalibration};
use super::engine::{Builder, LoadedEngine, Runtime, load_library, version_string};
use super::engine_cache::{CacheOutcome, EngineCache, EngineSpec};
use super::error::TrtError;
use super::model_engine::{ModelEngine, check_batch_buffers};
use super::profile::{batch_profile, dynamic_batch_input, profile_key, profile_max_batch};
use super::progress::BuildProgress;
use super::settings::{TensorRtSettings, precision_name};
use crate::config::Config;
use crate::gpu::{DeviceBuffer, DeviceTensor, GpuContext, PinnedBuffer, Stream, TensorElement};
use crate::infer::backend::{BackendKind, InferenceBackend, one_by_one};
use crate::infer::error::InferError;
use crate::infer::model_io::{
    BatchDim, DeclaredTensor, Dim, ModelIo, ModelRole, ModelSpec, check_buffers, record_opened,
    resolve_model_io,
};
use crate::infer::model_pair::ModelPair;
use crate::infer::warm_up::warm_up_sizes;

pub(super) const ENGINE: &str = "TensorRT";

/// Both engines, their device buffers, and the stream host-mode calls use.
pub struct TensorRtBackend {
    // Drop order: the models (contexts, engines, buffers; segmentation
    // first) after `Drop` synchronized the stream, then the stream, then
    // the context.
    models: ModelPair<ModelEngine>,
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
    /// shutdown request during a minutes-long first build). Models with a
    /// dynamic batch are built for up to `cfg.inference.max_batch` frames.
    pub fn open_with(
        cfg: &Config,
        settings: &TensorRtSettings,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<Self, TrtError> {
        let specs = ModelPair {
            segmentation: ModelSpec::segmentation(&cfg.segmentation),
            classifier: ModelSpec::classifier(&cfg.classifier),
        };
        for role in ModelRole::BOTH {
            specs.by_role(role).require_file()?;
        }
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
            max_batch: cfg.inference.max_batch,
        };
        // Segmentation first, then the classifier, each with its role's
        // calibration feed.
        let models = specs.try_map(|role, spec| {
            session.open_model(&spec, calibration.feed_for(role, &gpu, settings)?)
        })?;
        Ok(TensorRtBackend {
            models,
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
        ModelRole::BOTH.map(|role| {
            let model = self.models.by_role(role);
            (role, model.engine_path.as_path(), &model.outcome)
        })
    }

    /// The engine file of `role`'s model, for messages.
    pub fn engine_path(&self, role: ModelRole) -> &Path {
        &self.models.by_role(role).engine_path
    }

    /// Element type each engine wants at its input and output, for sizing
    /// the GPU preprocessor's tensors (f32 for engines built from f32 ONNX).
    pub fn io_elements(&self, role: ModelRole) -> (TensorElement, TensorElement) {
        let model = self.models.by_role(role);
        (model.input_element, model.output_element)
    }

    /// Whether both engines take several frames a run (both models have a
    /// dynamic batch): then a device runner sizes its tensors for
    /// `max_batch` frames.
    pub fn batches(&self) -> bool {
        self.models.segmentation.io.batch == BatchDim::Dynamic
            && self.models.classifier.io.batch == BatchDim::Dynamic
    }

    /// Device mode: points `role`'s engine at tensors another owner (the GPU
    /// preprocessor) holds, instead of this backend's own buffers. Each
    /// tensor holds `frames` frames back to back: an engine with a dynamic
    /// batch then runs up to that many (at most its profile's), one with a
    /// batch of one uses the first frame only.
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
        frames: usize,
    ) -> Result<(), TrtError> {
        let model = self.models.by_role_mut(role);
        let frames = frames.max(1);
        let (input_len, output_len) = (model.io.input_len(), model.io.output_len());
        model.check_device_tensor("input", &input, model.input_element, input_len, frames)?;
        model.check_device_tensor("output", &output, model.output_element, output_len, frames)?;
        let capacity = match model.io.batch {
            BatchDim::Dynamic => frames.min(model.max_frames),
            BatchDim::One => 1,
        };
        // SAFETY: lengths and element types match `capacity` frames of the
        // engine's IO (checked); the caller keeps the memory alive as this
        // function requires.
        unsafe { model.bind(input.ptr, output.ptr, capacity) }
    }

    /// Device mode: queues `role`'s engine on `stream` (a raw `CUstream` /
    /// `cudaStream_t`, e.g. `GpuPreprocessor::stream().raw() as usize`) for
    /// the first `frames` frames of the bound tensors; an error when they
    /// hold fewer or the engine takes fewer (1 for a batch of one). Returns
    /// at once; the caller waits on the stream (an event) later.
    ///
    /// # Safety
    /// `stream` must be a live stream of this backend's device, and the bound
    /// tensors must stay valid until the stream has run this work.
    pub unsafe fn enqueue(
        &mut self,
        role: ModelRole,
        stream: usize,
        frames: usize,
    ) -> Result<(), TrtError> {
        let model = self.models.by_role_mut(role);
        // SAFETY: forwarded from this function's contract.
        unsafe { model.enqueue(stream, frames) }
    }

    /// Runs each batch size of both engines once (`warm_up_sizes` of the
    /// engine's profile maximum, segmentation first) on this backend's own
    /// buffers, so that no batch of a new size pays its shape setup (and
    /// lazily loaded kernels) on the line; nothing for engines with a batch
    /// of one. Leaves both engines bound to the own buffers: call it before
    /// `bind_device`, never on an engine a runner holds.
    pub fn warm_up_batches(&mut self) -> Result<(), TrtError> {
        if !self.batches() {
            return Ok(());
        }
        let stream = &self.stream;
        for role in ModelRole::BOTH {
            let model = self.models.by_role_mut(role);
            model.bind_own()?;
            // SAFETY: our own buffers, alive as long as `self`; the stream is
            // synchronized below before anything else touches them.
            unsafe {
                stream
                    .fill_bytes(&model.input, 0)
                    .map_err(TrtError::gpu("clear the warm-up input"))?;
                for frames in warm_up_sizes(model.max_frames) {
                    model.enqueue(stream.raw() as usize, frames)?;
                }
            }
        }
        stream
            .synchronize()
            .map_err(TrtError::gpu("wait for the warm-up batches"))
    }

    /// Points both engines back at this backend's own buffers (host mode).
    pub fn bind_own_buffers(&mut self) -> Result<(), TrtError> {
        self.models.segmentation.bind_own()?;
        self.models.classifier.bind_own()
    }

    /// Host mode: `frames` frames (1 ..= the engine's batch) in one run.
    fn run_host(
        &mut self,
        role: ModelRole,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        let stream = &self.stream;
        let model = self.models.by_role_mut(role);
        if frames == 1 {
            check_buffers(role, &model.io, input, logits_out)?;
        } else {
            check_batch_buffers(role, &model.io, frames, input, logits_out)?;
        }
        model
            .run_host(stream, frames, input, logits_out)
            .map_err(|e| InferError::Run {
                role,
                engine: ENGINE,
                message: e.to_string(),
            })
    }

    /// Host mode, a batch: one run where the model has a dynamic batch,
    /// else one run a frame.
    fn run_batch(
        &mut self,
        role: ModelRole,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        if frames > 1 && self.models.by_role(role).io.batch == BatchDim::Dynamic {
            self.run_host(role, frames, input, logits_out)
        } else {
            one_by_one(frames, input, logits_out, |i, o| {
                self.run_host(role, 1, i, o)
            })
        }
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

    /// `role` picks its engine with `ModelPair::by_role`.
    fn io(&self, role: ModelRole) -> &ModelIo {
        &self.models.by_role(role).io
    }

    /// The engines' profile maximum (`[inference] max_batch` when they were
    /// opened) when both models have a dynamic batch, else 1.
    fn max_batch(&self) -> usize {
        if self.batches() {
            self.models
                .segmentation
                .max_frames
                .min(self.models.classifier.max_frames)
        } else {
            1
        }
    }

    /// Host mode: `role` picks its engine (`run_batch`, through
    /// `ModelPair::by_role`).
    fn run(
        &mut self,
        role: ModelRole,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        self.run_batch(role, frames, input, logits_out)
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
    /// `[inference] max_batch`: the profile's maximum for a dynamic batch.
    max_batch: usize,
}

impl OpenSession<'_> {
    fn open_model(
        &mut self,
        spec: &ModelSpec<'_>,
        mut calibration: ModelCalibration,
    ) -> Result<ModelEngine, TrtError> {
        let cache = EngineCache::new(&self.settings.engine_dir);
        // A dynamic batch: one profile, 1 .. max_batch frames, in the key
        // too (a changed max_batch builds a new engine). A static model:
        // none, and the key it always had.
        let batch_input = dynamic_batch_input(spec)?;
        let profile = batch_profile(batch_input.as_ref(), self.max_batch);
        let engine_spec = EngineSpec {
            tensorrt_version: version_string(self.library.library_version),
            gpu_name: self.gpu.name().to_string(),
            compute_capability: self.gpu.compute_capability(),
            precision: precision_name(self.settings.precision).to_string(),
            profile: profile_key(&profile),
            workspace_mib: self.settings.workspace_mib,
            calibration: calibration.digest.clone(),
        };
        let max_frames = profile_max_batch(&profile);
        let options = BuildOptions {
            precision: self.settings.precision,
            workspace_mib: self.settings.workspace_mib,
            profile,
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
        let max_frames = match io.batch {
            BatchDim::Dynamic => max_frames,
            BatchDim::One => 1,
        };
        record_opened(spec, ENGINE);
        let memory = cached.engine.device_memory_size()?;
        log::info!(target: "sealcheck::tensorrt", model = role.as_str(), engine:% = cached.path.display(),
            activations_mib = memory / (1 << 20), input:? = io.input_shape, output:? = io.output_shape,
            max_batch = max_frames; "TensorRT engine ready");
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
            max_frames,
            capacity: 0,
            batch_shape: io
                .input_shape
                .iter()
                .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
                .collect(),
            shape_frames: 0,
            input: alloc("allocate the engine input", max_frames * io.input_len())?,
            output: alloc("allocate the engine output", max_frames * io.output_len())?,
            host_input: pinned("allocate the pinned input", max_frames * io.input_len())?,
            host_output: pinned("allocate the pinned output", max_frames * io.output_len())?,
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
