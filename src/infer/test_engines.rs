//! Test doubles of `InferenceBackend` shared by the infer and shadow unit
//! tests (test builds only): an engine answering fixed logits, one that
//! counts its runs, one whose every run fails.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::backend::{BackendKind, InferenceBackend};
use super::error::InferError;
use super::model_io::{BatchDim, ModelIo, ModelRole};
use super::model_pair::ModelPair;
use crate::config::Normalization;
use crate::frame::TensorGeometry;
use crate::preprocess::Preprocessor;

/// The tiny tensors every double here answers for.
pub const GEOMETRY: TensorGeometry = TensorGeometry {
    seg_hw: (4, 4),
    seg_classes: 2,
    cls_hw: (4, 8),
    cls_classes: 2,
};

fn io(input: Vec<usize>, output: Vec<usize>) -> ModelIo {
    ModelIo {
        input_name: "in".into(),
        input_shape: input,
        output_name: "out".into(),
        output_shape: output,
        batch: BatchDim::One,
    }
}

/// A preprocessor that leaves values as they are (mean 0, std 1).
pub fn plain_preprocessor() -> Preprocessor {
    let plain = Normalization {
        mean: [0.0; 3],
        std: [1.0; 3],
    };
    Preprocessor::new(plain, plain, 0.0, 1.0, GEOMETRY)
}

/// Test double: an engine whose segmentation answers 0.5 everywhere and
/// whose classifier answers `cls_logits` for every frame.
pub struct FixedOutputEngine {
    /// Each role's IO, picked by `ModelPair::by_role` as in every engine.
    ios: ModelPair<ModelIo>,
    cls_logits: [f32; 2],
}

impl FixedOutputEngine {
    pub fn answering(cls_logits: [f32; 2]) -> Self {
        FixedOutputEngine {
            ios: ModelPair {
                segmentation: io(vec![1, 3, 4, 4], vec![1, 2, 4, 4]),
                classifier: io(vec![1, 4, 4, 8], vec![1, 2]),
            },
            cls_logits,
        }
    }
}

impl InferenceBackend for FixedOutputEngine {
    fn kind(&self) -> BackendKind {
        BackendKind::Tract
    }
    fn io(&self, role: ModelRole) -> &ModelIo {
        self.ios.by_role(role)
    }
    /// What each role answers: the segmentation's logits everywhere 0.5,
    /// the classifier's `cls_logits` for every frame.
    fn run(
        &mut self,
        role: ModelRole,
        _frames: usize,
        _input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        match role {
            ModelRole::Segmentation => logits_out.fill(0.5),
            ModelRole::Classifier => {
                for frame in logits_out.chunks_exact_mut(2) {
                    frame.copy_from_slice(&self.cls_logits);
                }
            }
        }
        Ok(())
    }
}

/// Test double: an engine that counts its model runs, failing the
/// segmentation run when `fail_segment` is set.
pub struct CountingEngine {
    inner: FixedOutputEngine,
    pub runs: Arc<AtomicUsize>,
    /// The count of runs before each segmentation run, in order.
    pub runs_before_segment: Arc<Mutex<Vec<usize>>>,
    pub fail_segment: bool,
}

impl CountingEngine {
    pub fn new() -> Self {
        CountingEngine {
            inner: FixedOutputEngine::answering([0.3, -1.2]),
            runs: Arc::default(),
            runs_before_segment: Arc::default(),
            fail_segment: false,
        }
    }
}

impl InferenceBackend for CountingEngine {
    fn kind(&self) -> BackendKind {
        BackendKind::OnnxRuntimeCpu
    }
    fn io(&self, role: ModelRole) -> &ModelIo {
        self.inner.io(role)
    }
    fn run(
        &mut self,
        role: ModelRole,
        frames: usize,
        input: &[f32],
        logits_out: &mut [f32],
    ) -> Result<(), InferError> {
        if role == ModelRole::Segmentation {
            self.runs_before_segment
                .lock()
                .unwrap()
                .push(self.runs.load(Ordering::SeqCst));
        }
        self.runs.fetch_add(1, Ordering::SeqCst);
        if role == ModelRole::Segmentation && self.fail_segment {
            return Err(InferError::Run {
                role,
                engine: "ONNX Runtime CPU",
                message: "out of memory".to_string(),
            });
        }
        self.inner.run(role, frames, input, logits_out)
    }
}

/// Test double: an engine whose every run fails, as one whose GPU went away.
pub struct FailingEngine {
    inner: FixedOutputEngine,
}

impl FailingEngine {
    pub fn new() -> Self {
        FailingEngine {
            inner: FixedOutputEngine::answering([0.0, 0.0]),
        }
    }
}

impl InferenceBackend for FailingEngine {
    fn kind(&self) -> BackendKind {
        BackendKind::OnnxRuntimeCuda
    }
    fn io(&self, role: ModelRole) -> &ModelIo {
        self.inner.io(role)
    }
    fn run(
        &mut self,
        role: ModelRole,
        _: usize,
        _: &[f32],
        _: &mut [f32],
    ) -> Result<(), InferError> {
        Err(InferError::Run {
            role,
            engine: "ONNX Runtime CUDA",
            message: "device lost".to_string(),
        })
    }
}
