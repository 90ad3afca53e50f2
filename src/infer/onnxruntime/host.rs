//! Host mode: both models as ONNX Runtime sessions (`OrtBackend`, a
//! `HostEngine` over a `ModelPair` of `OrtModel`s, in which a role picks its
//! model with `ModelPair::by_role`), on the CPU or the CUDA provider. The input
//! slice is lent to ONNX Runtime without a copy and the output lands in a
//! tensor allocated once per model (and batch size), then is copied out.

use std::path::PathBuf;

use ort::memory::Allocator;
use ort::session::{HasSelectedOutputs, OutputSelector, RunOptions, Session};
use ort::value::{Tensor, TensorRef};

use super::runtime::OrtRuntime;
use super::session::{ENGINE, create_session, declared, device_engine_name};
use crate::config::{ComputeDevice, Config, OnnxRuntimeConfig};
use crate::infer::backend::BackendKind;
use crate::infer::error::InferError;
use crate::infer::host_engine::{HostEngine, HostModel};
use crate::infer::model_io::{
    BatchDim, ModelIo, ModelRole, ModelSpec, check_buffers, record_opened, resolve_model_io,
};
use crate::infer::model_pair::ModelPair;

/// Both models as ONNX Runtime sessions, on the CPU or the CUDA provider.
pub type OrtBackend = HostEngine<OrtModel>;

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
        Ok(HostEngine::new(
            kind,
            ModelPair {
                segmentation,
                classifier,
            },
        ))
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
            return crate::infer::backend::one_by_one(frames, input, logits_out, |i, o| {
                self.run(i, o)
            });
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
