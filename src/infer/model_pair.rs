//! Both models of one host-path engine, as the `InferenceBackend` the infer
//! thread calls. Every host engine (tract, ONNX Runtime) holds its two models
//! the same way and differs only in how one model runs (`HostModel`), so the
//! pairing is written once, here.

use super::backend::{BackendKind, InferenceBackend};
use super::error::InferError;
use super::model_io::ModelIo;
use super::model_role::ModelRole;

/// One model, opened by a host engine: its checked IO and one run.
pub trait HostModel: Send {
    fn io(&self) -> &ModelIo;

    /// Runs the model on `input` into `output`, both sized as `io` says.
    fn run(&mut self, input: &[f32], output: &mut [f32]) -> Result<(), InferError>;

    /// Runs `frames` frames at once (inputs and outputs back to back); a
    /// model or engine that cannot runs them one by one.
    fn run_batch(
        &mut self,
        frames: usize,
        input: &[f32],
        output: &mut [f32],
    ) -> Result<(), InferError> {
        super::backend::one_by_one(frames, input, output, |i, o| self.run(i, o))
    }

    /// Whether `run_batch` runs a batch as one run (else frame by frame).
    fn batches(&self) -> bool {
        false
    }
}

/// The segmentation and classifier models of one engine.
pub struct ModelPair<M> {
    kind: BackendKind,
    segmentation: M,
    classifier: M,
}

impl<M: HostModel> ModelPair<M> {
    pub fn new(kind: BackendKind, segmentation: M, classifier: M) -> Self {
        ModelPair {
            kind,
            segmentation,
            classifier,
        }
    }
}

impl<M: HostModel> InferenceBackend for ModelPair<M> {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn io(&self, role: ModelRole) -> &ModelIo {
        match role {
            ModelRole::Segmentation => self.segmentation.io(),
            ModelRole::Classifier => self.classifier.io(),
        }
    }

    fn max_batch(&self) -> usize {
        if self.segmentation.batches() && self.classifier.batches() {
            crate::config::MAX_BATCH
        } else {
            1
        }
    }

    fn run(
        &mut self,
        role: ModelRole,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        let model = match role {
            ModelRole::Segmentation => &mut self.segmentation,
            ModelRole::Classifier => &mut self.classifier,
        };
        if frames == 1 {
            model.run(input, logits_out)
        } else {
            model.run_batch(frames, input, logits_out)
        }
    }
}
