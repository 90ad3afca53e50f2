//! The host path's infer thread: both models on the tensors the preprocess
//! thread filled, a batch at a time. The loop is the one batcher's
//! (`batcher::Batcher`); this file says only what the host path does with
//! a batch (`HostBatches`).
//!
//! ```text
//! preprocess ──chan: StageMessage──▶ Batcher::run ──▶ HostBatches::run: infer_batch
//!                                                        ──chan──▶ output
//! ```

use std::ops::ControlFlow;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::backend::InferenceBackend;
use super::batch::{BatchBuffers, BatchCounts, BatchPolicy, BatchRuns, infer_batch};
use super::batcher::{BatchPath, Batcher};
use crate::frame::{FrameWork, StageMessage};
use crate::model_id::ModelIds;
use crate::preprocess::Preprocessor;

/// New models for the infer thread, opened, checked and warmed up beside the
/// running ones (`crate::model_swap`); taken between two parts (never
/// between two cavities of one cycle).
pub struct ModelSwap {
    /// The new engine; `None`: the running one goes on (a recipe switch
    /// that changes only thresholds: `models` names the new recipe).
    pub backend: Option<Box<dyn InferenceBackend>>,
    pub models: Arc<ModelIds>,
    /// Called on the infer thread once the swap is taken: the frames after
    /// it are judged by `models` (a recipe switch is done then).
    pub on_swapped: Option<Box<dyn FnOnce() + Send>>,
}

pub struct InferStage {
    /// Frames in capture order per camera; several cameras' frames interleave.
    pub input: Receiver<StageMessage>,
    pub output: Sender<StageMessage>,
    pub backend: Box<dyn InferenceBackend>,
    /// The ids of `backend`'s model files, stamped on every frame it judges.
    pub models: Arc<ModelIds>,
    /// Model swaps accepted on reload.
    pub swaps: Receiver<ModelSwap>,
    /// Only its mask-channel resize is used here; preprocess owns its own.
    pub preprocessor: Preprocessor,
    pub mask_class: usize,
    pub liveness: crate::service::Liveness,
    /// `[inference] max_batch` and `batch_wait_us`: how frames waiting at
    /// once are gathered (`Batcher`).
    pub batching: BatchPolicy,
    /// The batch buffers, already grown by the warm-up's batches.
    pub batch_buffers: BatchBuffers,
    /// Engine runs and frames in them, for the summary.
    pub batch_counts: Arc<BatchCounts>,
}

impl InferStage {
    /// Judges batches until the end (or until the output stage is gone).
    pub fn run(self) {
        let InferStage {
            mut input,
            output,
            backend,
            models,
            swaps,
            preprocessor,
            mask_class,
            liveness,
            batching,
            batch_buffers,
            batch_counts,
        } = self;
        let mut path = HostBatches {
            output,
            backend,
            models,
            swaps,
            preprocessor,
            mask_class,
            liveness,
            // Test-only hooks (feature `fault-injection`); no-ops otherwise.
            faults: crate::fault::InferFaults::from_env(),
            batch: Vec::with_capacity(batching.max_batch),
            buffers: batch_buffers,
        };
        // Ends with the stage channel's `End`, or when either side is gone.
        Batcher::new(batching, batch_counts).run(&mut input, &mut path);
    }
}

/// What the host path does with a batch: both models on the preprocessed
/// tensors (`infer_batch`), then every frame on to the output stage.
struct HostBatches {
    output: Sender<StageMessage>,
    backend: Box<dyn InferenceBackend>,
    models: Arc<ModelIds>,
    swaps: Receiver<ModelSwap>,
    preprocessor: Preprocessor,
    mask_class: usize,
    liveness: crate::service::Liveness,
    faults: crate::fault::InferFaults,
    // The work records travel boxed through the stage channels; the batch
    // holds those boxes, it does not move the records out of them.
    #[allow(clippy::vec_box)]
    batch: Vec<Box<FrameWork>>,
    buffers: BatchBuffers,
}

impl BatchPath<Receiver<StageMessage>> for HostBatches {
    /// The host path's loop ends with nothing to report: capture's end is
    /// the preprocess thread's.
    type End = ();

    /// Swaps in new models before the batch of frame `first` when a swap is
    /// waiting and `first` starts a part (a whole frame, or a cycle's first
    /// cavity: a cycle is judged by one set of models); the old engine is
    /// dropped here, after its last frame. Any batch size: `infer_batch`
    /// splits a larger batch into engine runs itself.
    fn begin(&mut self, first: &Box<FrameWork>) -> ControlFlow<(), usize> {
        let takes = usize::MAX;
        if first.cavity.is_some_and(|c| c.index != 0) {
            return ControlFlow::Continue(takes);
        }
        // One switch waits at a time (`crate::recipe`); of several reloads
        // the last one wins.
        for swap in self.swaps.try_iter() {
            log::info!(target: "sealcheck::infer", first_seq = first.meta.seq,
                segmentation = swap.models.segmentation.as_str(), classifier = swap.models.classifier.as_str(),
                previous_segmentation = self.models.segmentation.as_str(), previous_classifier = self.models.classifier.as_str(),
                recipe = swap.models.recipe_name().unwrap_or_default(), engine_changed = swap.backend.is_some();
                "models swapped: frames from first_seq on are judged by the new models");
            if let Some(backend) = swap.backend {
                self.backend = backend;
            }
            self.models = swap.models;
            if let Some(swapped) = swap.on_swapped {
                swapped();
            }
        }
        ControlFlow::Continue(takes)
    }

    fn add(&mut self, mut work: Box<FrameWork>) -> ControlFlow<()> {
        self.faults.hold(work.meta.seq);
        work.models = Some(Arc::clone(&self.models));
        // A frame failed here is marked, and the batch skips it.
        self.faults.fail(&mut work);
        self.batch.push(work);
        ControlFlow::Continue(())
    }

    /// Both models on the batch, then every frame on to the output stage.
    fn run(&mut self) -> Result<BatchRuns, ()> {
        let made = infer_batch(
            self.backend.as_mut(),
            &self.preprocessor,
            self.mask_class,
            &mut self.batch,
            &mut self.buffers,
        );
        for work in self.batch.drain(..) {
            self.liveness.frame_inferred();
            if self.output.send(StageMessage::Inspect(work)).is_err() {
                return Err(());
            }
        }
        Ok(made)
    }

    fn pass_on(&mut self, message: StageMessage) -> ControlFlow<()> {
        let end = matches!(message, StageMessage::End);
        match self.output.send(message) {
            Ok(()) if !end => ControlFlow::Continue(()),
            _ => ControlFlow::Break(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FailedStage;
    use crate::infer::batch::infer_frame;
    use crate::infer::test_engines::{
        CountingEngine, FixedOutputEngine, GEOMETRY, plain_preprocessor,
    };
    use crate::infer::warm_up::{WarmUpFrame, WarmUpSize, warm_up_host};
    use crate::preprocess::FramePreprocessor;

    fn judge(cls_logits: [f32; 2]) -> FrameWork {
        let mut work = FrameWork::new(&GEOMETRY);
        infer_frame(
            &mut FixedOutputEngine::answering(cls_logits),
            &plain_preprocessor(),
            1,
            &mut work,
        );
        work
    }

    #[test]
    fn the_first_frame_after_the_start_up_warm_up_is_not_the_engines_first_run() {
        let engine = CountingEngine::new();
        let runs_before_segment = Arc::clone(&engine.runs_before_segment);
        let mut backend: Box<dyn InferenceBackend> = Box::new(engine);
        let mut records: Vec<Box<FrameWork>> = (0..3)
            .map(|_| Box::new(FrameWork::new(&GEOMETRY)))
            .collect();
        let frame = WarmUpFrame::new(
            WarmUpSize::Source {
                width: 6,
                height: 5,
            },
            &GEOMETRY,
        );
        assert_eq!((frame.view().width, frame.view().height), (6, 5));
        let mut frame_preprocessor = FramePreprocessor::Cpu(plain_preprocessor());
        warm_up_host(
            backend.as_mut(),
            &mut frame_preprocessor,
            &plain_preprocessor(),
            1,
            frame.view(),
            &mut records,
            1,
            &mut Default::default(),
        )
        .unwrap();
        assert!(
            records.iter().all(|w| w.error.is_none()),
            "a warm-up leaves no error behind for the first frame"
        );

        // The infer thread then takes the first camera frame.
        let (to_infer, input) = crossbeam_channel::bounded(2);
        let (output, results) = crossbeam_channel::bounded(2);
        let (_swaps, swap_rx) = crossbeam_channel::bounded(1);
        let mut first = records.pop().unwrap();
        first.reset(crate::frame::FrameMeta::now(0));
        to_infer.send(StageMessage::Inspect(first)).unwrap();
        to_infer.send(StageMessage::End).unwrap();
        InferStage {
            input,
            output,
            backend,
            models: Arc::new(ModelIds {
                segmentation: "seg".to_string(),
                classifier: "cls".to_string(),
                recipe: None,
            }),
            swaps: swap_rx,
            preprocessor: plain_preprocessor(),
            mask_class: 1,
            liveness: crate::service::Liveness::new(),
            batching: BatchPolicy {
                max_batch: 1,
                wait: std::time::Duration::ZERO,
            },
            batch_buffers: Default::default(),
            batch_counts: Default::default(),
        }
        .run();
        let Ok(StageMessage::Inspect(judged)) = results.try_recv() else {
            panic!("the first frame was not judged");
        };
        assert!(judged.error.is_none());
        assert_eq!(judged.meta.seq, 0, "warm-up frames take no seq");
        let runs = runs_before_segment.lock().unwrap().clone();
        // Three warm-up frames ran both models; the camera's first frame is
        // the engine's seventh run, not its first.
        assert_eq!(runs, vec![0, 2, 4, 6]);
    }

    #[test]
    fn a_classifier_answering_nan_or_infinity_fails_the_frame_naming_why() {
        assert!(judge([0.3, -1.2]).error.is_none());
        for bad in [[f32::NAN, 0.0], [0.0, f32::INFINITY]] {
            let work = judge(bad);
            let Some((stage, message)) = &work.error else {
                panic!("{bad:?} judged as if it were a verdict");
            };
            assert_eq!(*stage, FailedStage::Classify);
            assert!(
                message.contains("output is not finite") && message.contains("sealcheck evaluate"),
                "{message}"
            );
        }
    }
}
