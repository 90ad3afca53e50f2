//! Both models of one host-path engine, as the `InferenceBackend` the infer
//! thread calls. Every host engine (tract, ONNX Runtime) holds its two models
//! the same way and differs only in how one model runs (`HostModel`), so the
//! pairing is written once, here.

use super::error::InferError;
use super::model_io::ModelIo;
use super::{BackendKind, InferenceBackend};

/// One model, opened by a host engine: its checked IO and one run.
pub trait HostModel: Send {
    fn io(&self) -> &ModelIo;

    /// Runs the model on `input` into `output`, both sized as `io` says.
    fn run(&mut self, input: &[f32], output: &mut [f32]) -> Result<(), InferError>;
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

    fn segmentation_io(&self) -> &ModelIo {
        self.segmentation.io()
    }

    fn classifier_io(&self) -> &ModelIo {
        self.classifier.io()
    }

    fn segment(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
        self.segmentation.run(input, logits_out)
    }

    fn classify(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
        self.classifier.run(input, logits_out)
    }
}
