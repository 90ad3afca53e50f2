//! Inference with tract, the pure-Rust ONNX engine: always available, CPU only,
//! and the reference every other backend is checked against (tests/infer.rs).

use std::sync::Arc;

use tract_onnx::prelude::*;

use super::backend::BackendKind;
use super::error::InferError;
use super::host_engine::{HostEngine, HostModel};
use super::model_io::{
    DeclaredTensor, Dim, ModelIo, ModelRole, ModelSpec, check_buffers, record_opened,
    resolve_model_io,
};
use super::model_pair::ModelPair;
use crate::config::Config;

const ENGINE: &str = "tract";

/// Both models, loaded, optimized and ready to run: a `HostEngine`, in which
/// a role picks its model with `ModelPair::by_role`.
pub type TractBackend = HostEngine<TractModel>;

impl TractBackend {
    pub fn open(cfg: &Config) -> Result<Self, InferError> {
        if cfg.inference.threads > 1 {
            log::info!(threads = cfg.inference.threads; "tract runs single-threaded; [inference] threads is ignored");
        }
        let segmentation = TractModel::load(&ModelSpec::segmentation(&cfg.segmentation))?;
        let classifier = TractModel::load(&ModelSpec::classifier(&cfg.classifier))?;
        Ok(HostEngine::new(
            BackendKind::Tract,
            ModelPair {
                segmentation,
                classifier,
            },
        ))
    }
}

/// One model: its plan's running state and the input tensor reused every frame.
pub struct TractModel {
    role: ModelRole,
    io: ModelIo,
    state: TypedSimpleState,
    /// tract takes inputs as owned, shared tensors. We keep one and lend it for
    /// each run; once the run's values are dropped we hold the only reference
    /// again, so refilling it needs no allocation.
    input: Arc<Tensor>,
}

impl TractModel {
    fn load(spec: &ModelSpec<'_>) -> Result<Self, InferError> {
        spec.require_file()?;
        let role = spec.role;
        let path = spec.path;
        let model = tract_onnx::onnx()
            .model_for_path(path)
            .map_err(|e| InferError::ModelLoad {
                role,
                path: path.to_path_buf(),
                engine: ENGINE,
                message: format!("{e:#}"),
            })?;
        let prepare_error = |e: TractError| InferError::EnginePrepare {
            role,
            path: path.to_path_buf(),
            engine: ENGINE,
            message: format!("{e:#}"),
        };

        // Names come from the graph as written (tract labels outputs with their ONNX names).
        let input_names = outlet_names(&model, model.input_outlets().map_err(prepare_error)?);
        let output_names = outlet_names(&model, model.output_outlets().map_err(prepare_error)?);
        let mut typed = model.into_typed().map_err(prepare_error)?;
        let inputs = declared(&typed, &input_names, true).map_err(prepare_error)?;
        let outputs = declared(&typed, &output_names, false).map_err(prepare_error)?;
        let io = resolve_model_io(spec, &inputs, &outputs)?;
        record_opened(spec, ENGINE);

        // Pin the input to the static shape the model declared, so the optimizer
        // can specialize every operator to it.
        typed
            .set_input_fact(0, f32::fact(&io.input_shape))
            .map_err(prepare_error)?;
        let plan = typed
            .into_optimized()
            .and_then(|m| m.into_runnable())
            .map_err(prepare_error)?;
        let state = TypedSimpleState::new(&plan).map_err(prepare_error)?;
        let input = Arc::new(Tensor::zero::<f32>(&io.input_shape).map_err(prepare_error)?);
        log::debug!(model:% = path.display(), input:? = io.input_shape, output:? = io.output_shape; "tract model ready");
        Ok(TractModel {
            role,
            io,
            state,
            input,
        })
    }
}

impl HostModel for TractModel {
    fn io(&self) -> &ModelIo {
        &self.io
    }

    fn run(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
        check_buffers(self.role, &self.io, input, logits_out)?;
        let run_error = |e: TractError| InferError::Run {
            role: self.role,
            engine: ENGINE,
            message: format!("{e:#}"),
        };
        // Only clones when a previous run still holds the tensor, which tract does not do.
        let tensor = Arc::make_mut(&mut self.input);
        tensor
            .try_as_plain_ram_mut()
            .and_then(|mut view| view.as_slice_mut::<f32>().map(|s| s.copy_from_slice(input)))
            .map_err(run_error)?;
        let outputs = self
            .state
            .run(tvec![self.input.clone().into_tvalue()])
            .map_err(run_error)?;
        let view = outputs[0].try_as_plain_ram().map_err(run_error)?;
        let logits = view.as_slice::<f32>().map_err(run_error)?;
        if logits.len() != logits_out.len() {
            return Err(InferError::Run {
                role: self.role,
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

fn outlet_names(model: &InferenceModel, outlets: &[OutletId]) -> Vec<String> {
    outlets
        .iter()
        .map(|outlet| {
            model
                .outlet_label(*outlet)
                .unwrap_or(&model.node(outlet.node).name)
                .to_string()
        })
        .collect()
}

fn declared(
    model: &TypedModel,
    names: &[String],
    inputs: bool,
) -> TractResult<Vec<DeclaredTensor>> {
    let mut tensors = Vec::with_capacity(names.len());
    for (ix, name) in names.iter().enumerate() {
        let fact = if inputs {
            model.input_fact(ix)?
        } else {
            model.output_fact(ix)?
        };
        let dims = fact
            .shape
            .dims()
            .iter()
            .map(|d| match d.as_i64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) => Dim::Fixed(n),
                None => Dim::Symbolic(d.to_string()),
            })
            .collect();
        tensors.push(DeclaredTensor {
            name: name.clone(),
            dims: Some(dims),
            element: format!("{:?}", fact.datum_type),
            is_f32: fact.datum_type == f32::datum_type(),
        });
    }
    Ok(tensors)
}
