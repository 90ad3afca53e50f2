//! The inference thread: segmentation, mask, mask channel, classification,
//! for every frame in order.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::InferenceBackend;
use crate::frame::{FailedStage, FrameWork, StageMessage};
use crate::model_id::ModelIds;
use crate::preprocess::{Preprocessor, logits_to_mask};

/// Runs both models on a preprocessed frame. Skips frames that already failed;
/// a failure here marks the frame so it fails with reason `error`.
pub fn infer_frame(
    backend: &mut dyn InferenceBackend,
    preprocessor: &Preprocessor,
    mask_class: usize,
    work: &mut FrameWork,
) {
    if work.error.is_some() {
        return;
    }
    let started = Instant::now();
    if let Err(e) = backend.segment(&work.seg_input, &mut work.seg_logits) {
        work.error = Some((FailedStage::Segment, e.to_string()));
        return;
    }
    let classes = work.seg_logits.len() / work.mask.len().max(1);
    work.mask_pixels = logits_to_mask(&work.seg_logits, classes, mask_class, &mut work.mask);
    preprocessor.mask_to_classifier_channel(&work.mask, &mut work.cls_input);
    let segmented = Instant::now();
    work.timings.segment_ms = (segmented - started).as_secs_f64() * 1e3;
    if let Err(e) = backend
        .classify(&work.cls_input, &mut work.cls_logits)
        .and_then(|()| super::check_classifier_output(&work.cls_logits))
    {
        work.error = Some((FailedStage::Classify, e.to_string()));
    }
    work.timings.classify_ms = segmented.elapsed().as_secs_f64() * 1e3;
}

/// Runs both models once on zeros: the first run of an engine allocates and
/// tunes, and a model swap does that before the new models judge a frame.
pub fn warm_up(
    backend: &mut dyn InferenceBackend,
    geometry: crate::frame::TensorGeometry,
) -> Result<(), super::InferError> {
    let mut seg_logits = vec![0.0; geometry.seg_logits_len()];
    let mut cls_logits = vec![0.0; geometry.cls_classes];
    backend.segment(&vec![0.0; geometry.seg_input_len()], &mut seg_logits)?;
    backend.classify(&vec![0.0; geometry.cls_input_len()], &mut cls_logits)
}

/// New models for the infer thread, opened, checked and warmed up beside the
/// running ones (`crate::model_swap`); taken between two frames.
pub struct ModelSwap {
    pub backend: Box<dyn InferenceBackend>,
    pub models: Arc<ModelIds>,
}

pub struct InferStage {
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
}

impl InferStage {
    pub fn run(mut self) {
        #[cfg(feature = "fault-injection")]
        let stall_after = crate::fault::stall_infer_after();
        #[cfg(feature = "fault-injection")]
        let delay = crate::fault::infer_delay();
        #[cfg(feature = "fault-injection")]
        let fail_after = crate::fault::fail_infer_after();
        // A handle of our own, so the loop can swap models through `&mut self`.
        let input = self.input.clone();
        for message in input.iter() {
            let end = matches!(message, StageMessage::End);
            let message = match message {
                StageMessage::Inspect(mut work) => {
                    #[cfg(feature = "fault-injection")]
                    crate::fault::maybe_stall(stall_after, work.meta.seq);
                    #[cfg(feature = "fault-injection")]
                    crate::fault::maybe_delay(delay);
                    self.take_swap(work.meta.seq);
                    work.models = Some(Arc::clone(&self.models));
                    #[cfg(feature = "fault-injection")]
                    let failed = crate::fault::maybe_fail(fail_after, &mut work);
                    #[cfg(not(feature = "fault-injection"))]
                    let failed = false;
                    if !failed {
                        infer_frame(
                            self.backend.as_mut(),
                            &self.preprocessor,
                            self.mask_class,
                            &mut work,
                        );
                    }
                    self.liveness.frame_inferred();
                    StageMessage::Inspect(work)
                }
                other => other,
            };
            if self.output.send(message).is_err() || end {
                return;
            }
        }
    }

    /// Swaps in new models before frame `seq` when a swap is waiting; the old
    /// engine is dropped here, after its last frame.
    fn take_swap(&mut self, seq: u64) {
        let Some(swap) = self.swaps.try_iter().last() else {
            return;
        };
        log::info!(target: "sealcheck::infer", first_seq = seq,
            segmentation = swap.models.segmentation.as_str(), classifier = swap.models.classifier.as_str(),
            previous_segmentation = self.models.segmentation.as_str(), previous_classifier = self.models.classifier.as_str();
            "models swapped: frames from first_seq on are judged by the new models");
        self.backend = swap.backend;
        self.models = swap.models;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Normalization;
    use crate::frame::TensorGeometry;
    use crate::infer::{BackendKind, InferError, ModelIo};

    const GEOMETRY: TensorGeometry = TensorGeometry {
        seg_hw: (4, 4),
        seg_classes: 2,
        cls_hw: (4, 8),
        cls_classes: 2,
    };

    /// Test double: an engine whose classifier answers `cls_logits` for every frame.
    struct FixedOutputEngine {
        seg: ModelIo,
        cls: ModelIo,
        cls_logits: [f32; 2],
    }

    impl FixedOutputEngine {
        fn answering(cls_logits: [f32; 2]) -> Self {
            let io = |input: Vec<usize>, output: Vec<usize>| ModelIo {
                input_name: "in".into(),
                input_shape: input,
                output_name: "out".into(),
                output_shape: output,
            };
            FixedOutputEngine {
                seg: io(vec![1, 3, 4, 4], vec![1, 2, 4, 4]),
                cls: io(vec![1, 4, 4, 8], vec![1, 2]),
                cls_logits,
            }
        }
    }

    impl InferenceBackend for FixedOutputEngine {
        fn kind(&self) -> BackendKind {
            BackendKind::Tract
        }
        fn segmentation_io(&self) -> &ModelIo {
            &self.seg
        }
        fn classifier_io(&self) -> &ModelIo {
            &self.cls
        }
        fn segment(&mut self, _: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
            logits_out.fill(0.5);
            Ok(())
        }
        fn classify(&mut self, _: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
            logits_out.copy_from_slice(&self.cls_logits);
            Ok(())
        }
    }

    fn judge(cls_logits: [f32; 2]) -> FrameWork {
        let plain = Normalization {
            mean: [0.0; 3],
            std: [1.0; 3],
        };
        let preprocessor = Preprocessor::new(plain, plain, 0.0, 1.0, GEOMETRY);
        let mut work = FrameWork::new(&GEOMETRY);
        infer_frame(
            &mut FixedOutputEngine::answering(cls_logits),
            &preprocessor,
            1,
            &mut work,
        );
        work
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
