//! Both models of one host-path engine, as the `InferenceBackend` the infer
//! thread calls. Every host engine (tract, ONNX Runtime) holds its two models
//! the same way and differs only in how one model runs (`HostModel`), so the
//! pairing is written once, here: a `ModelPair` of `HostModel`s, in which a
//! role picks its model with `ModelPair::by_role`.

use super::backend::{BackendKind, InferenceBackend};
use super::error::InferError;
use super::model_io::ModelIo;
use super::model_pair::ModelPair;
use super::model_role::ModelRole;

/// One model, opened by a host engine: its checked IO and one run.
pub trait HostModel: Send {
    /// The model's checked IO; called by `HostEngine::io` for the role
    /// this model plays (sizing buffers, the geometry at opening).
    fn io(&self) -> &ModelIo;

    /// Runs the model on `input` into `output`, both sized as `io` says.
    /// Called by `HostEngine::run` for a single frame.
    fn run(&mut self, input: &[f32], output: &mut [f32]) -> Result<(), InferError>;

    /// Runs `frames` frames at once (inputs and outputs back to back); a
    /// model or engine that cannot runs them one by one. Called by
    /// `HostEngine::run` for 2 or more frames.
    fn run_batch(
        &mut self,
        frames: usize,
        input: &[f32],
        output: &mut [f32],
    ) -> Result<(), InferError> {
        super::backend::one_by_one(frames, input, output, |i, o| self.run(i, o))
    }

    /// Whether `run_batch` runs a batch as one run (else frame by frame).
    /// Called when the engine reports its `max_batch`.
    fn batches(&self) -> bool {
        false
    }
}

/// The segmentation and classifier models of one host engine.
pub struct HostEngine<M> {
    kind: BackendKind,
    models: ModelPair<M>,
}

impl<M: HostModel> HostEngine<M> {
    pub fn new(kind: BackendKind, models: ModelPair<M>) -> Self {
        HostEngine { kind, models }
    }
}

impl<M: HostModel> InferenceBackend for HostEngine<M> {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    /// `role` picks its model with `ModelPair::by_role`.
    fn io(&self, role: ModelRole) -> &ModelIo {
        self.models.by_role(role).io()
    }

    fn max_batch(&self) -> usize {
        if self.models.segmentation.batches() && self.models.classifier.batches() {
            crate::config::MAX_BATCH
        } else {
            1
        }
    }

    /// `role` picks its model with `ModelPair::by_role_mut`; one frame runs
    /// through `HostModel::run`, more through `HostModel::run_batch`.
    fn run(
        &mut self,
        role: ModelRole,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        let model = self.models.by_role_mut(role);
        if frames == 1 {
            model.run(input, logits_out)
        } else {
            model.run_batch(frames, input, logits_out)
        }
    }
}
