//! The inference thread: segmentation, mask, mask channel, classification,
//! for every frame in order.
//!
//! Also the start-up warm-up (`warm_up_host`, and `WarmUpFrame` for the
//! device path too): an engine's first runs allocate and tune, and a
//! preprocessor sizes its tables on the first frame of a size, so before
//! READY=1 a mid-grey frame of the size the source will deliver goes once
//! through every work record, so the first camera frame is judged as fast
//! as the hundredth. Warm-up frames take no `seq` and never reach the
//! output stage.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::batch::{BatchPolicy, infer_frame};
use super::{InferError, InferenceBackend};
use crate::config::SourceKind;
use crate::frame::{FailedStage, FrameWork, ImageView, PixelLayout, StageMessage, TensorGeometry};
use crate::model_id::ModelIds;
use crate::preprocess::{FramePreprocessor, Preprocessor};

/// Runs both models once on zeros, then each batch size 2..=`max_batch`
/// the engine takes: the first run of an engine (and of each input shape)
/// allocates and tunes, and a model swap does that before the new models
/// judge a frame.
pub fn warm_up(
    backend: &mut dyn InferenceBackend,
    geometry: crate::frame::TensorGeometry,
    max_batch: usize,
) -> Result<(), super::InferError> {
    let mut seg_logits = vec![0.0; geometry.seg_logits_len()];
    let mut cls_logits = vec![0.0; geometry.cls_classes];
    backend.segment(&vec![0.0; geometry.seg_input_len()], &mut seg_logits)?;
    backend.classify(&vec![0.0; geometry.cls_input_len()], &mut cls_logits)?;
    let most = max_batch.min(backend.max_batch());
    if most > 1 {
        let mut seg_logits = vec![0.0; most * geometry.seg_logits_len()];
        let mut cls_logits = vec![0.0; most * geometry.cls_classes];
        let seg_input = vec![0.0; most * geometry.seg_input_len()];
        let cls_input = vec![0.0; most * geometry.cls_input_len()];
        for frames in 2..=most {
            backend.segment_batch(
                frames,
                &seg_input[..frames * geometry.seg_input_len()],
                &mut seg_logits[..frames * geometry.seg_logits_len()],
            )?;
            backend.classify_batch(
                frames,
                &cls_input[..frames * geometry.cls_input_len()],
                &mut cls_logits[..frames * geometry.cls_classes],
            )?;
        }
    }
    Ok(())
}

/// The frame size the start-up warm-up uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmUpSize {
    /// The size the source will deliver: `[source]` width and height
    /// (test, CSI), the width and height in a V4L2 `caps`, a replay's frames.
    Source { width: usize, height: usize },
    /// The config does not say (a file, RTSP, an image sequence, a launch
    /// line, V4L2 without a size in `caps`): the segmentation model's input
    /// size. The engines' warm-up does not depend on the frame size; only the
    /// preprocessor's tables are then made again at the first camera frame.
    ModelInput,
}

impl WarmUpSize {
    /// What `[source]` says its frames will be.
    pub fn of_source(kind: &SourceKind) -> Self {
        let sized = |width: u32, height: u32| WarmUpSize::Source {
            width: width as usize,
            height: height as usize,
        };
        match kind {
            SourceKind::Test { width, height, .. } | SourceKind::Csi { width, height, .. } => {
                sized(*width, *height)
            }
            SourceKind::V4l2 {
                caps: Some(caps), ..
            } => match (caps_field(caps, "width"), caps_field(caps, "height")) {
                (Some(width), Some(height)) => WarmUpSize::Source { width, height },
                _ => WarmUpSize::ModelInput,
            },
            _ => WarmUpSize::ModelInput,
        }
    }

    /// The largest of several cameras' sizes (by pixels): the warm-up then
    /// grows the device path's frame buffers once, before the start, for
    /// the largest camera; `ModelInput` when no camera says its size.
    pub fn largest(sizes: impl IntoIterator<Item = WarmUpSize>) -> Self {
        sizes
            .into_iter()
            .filter_map(|size| match size {
                WarmUpSize::Source { width, height } => Some((width * height, size)),
                WarmUpSize::ModelInput => None,
            })
            .max_by_key(|(pixels, _)| *pixels)
            .map_or(WarmUpSize::ModelInput, |(_, size)| size)
    }

    /// Where the size came from, for the log line.
    pub fn origin(&self) -> &'static str {
        match self {
            WarmUpSize::Source { .. } => "source",
            WarmUpSize::ModelInput => "model input",
        }
    }
}

/// A fixed integer field of a caps string (`width=1280` or
/// `width=(int)1280`); `None` when absent or a range or list.
fn caps_field(caps: &str, key: &str) -> Option<usize> {
    caps.split(',').find_map(|field| {
        let (k, v) = field.split_once('=')?;
        if k.trim() != key {
            return None;
        }
        let v = v.trim();
        v.strip_prefix("(int)").unwrap_or(v).trim().parse().ok()
    })
}

/// A mid-grey RGB frame for the warm-up: not a camera frame, never judged.
pub struct WarmUpFrame {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl WarmUpFrame {
    pub fn new(size: WarmUpSize, geometry: &TensorGeometry) -> Self {
        let (width, height) = match size {
            WarmUpSize::Source { width, height } if width > 0 && height > 0 => (width, height),
            _ => (geometry.seg_hw.1, geometry.seg_hw.0),
        };
        WarmUpFrame {
            width,
            height,
            pixels: vec![128; width * height * 3],
        }
    }

    pub fn view(&self) -> ImageView<'_> {
        ImageView {
            width: self.width,
            height: self.height,
            stride: self.width * 3,
            layout: PixelLayout::Rgb,
            data: &self.pixels,
        }
    }
}

/// The host path's warm-up: `frame` once through the preprocessor and both
/// models in each of `records` (the work records the run will use, so their
/// pages are touched too). A step that fails is an error naming the engine
/// and the step: the same engine would fail every part.
pub fn warm_up_host(
    backend: &mut dyn InferenceBackend,
    frame_preprocessor: &mut FramePreprocessor,
    preprocessor: &Preprocessor,
    mask_class: usize,
    frame: ImageView<'_>,
    records: &mut [Box<FrameWork>],
) -> Result<(), InferError> {
    let engine = backend.kind().as_str();
    for work in records {
        work.error = None;
        frame_preprocessor
            .frame_to_tensors(frame, &mut work.seg_input, &mut work.cls_input)
            .map_err(|e| InferError::WarmUp {
                engine,
                step: FailedStage::Preprocess.as_str(),
                message: e.to_string(),
            })?;
        infer_frame(backend, preprocessor, mask_class, work);
        if let Some((stage, message)) = work.error.take() {
            return Err(InferError::WarmUp {
                engine,
                step: stage.as_str(),
                message,
            });
        }
    }
    Ok(())
}

/// New models for the infer thread, opened, checked and warmed up beside the
/// running ones (`crate::model_swap`); taken between two frames.
pub struct ModelSwap {
    pub backend: Box<dyn InferenceBackend>,
    pub models: Arc<ModelIds>,
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
    pub batch_buffers: super::batch::BatchBuffers,
    /// Engine runs and frames in them, for the summary.
    pub batch_counts: Arc<super::batch::BatchCounts>,
}

impl InferStage {
    pub fn run(mut self) {
        // Test-only hooks (feature `fault-injection`); no-ops otherwise.
        let faults = crate::fault::InferFaults::from_env();
        // A handle of our own, so the loop can swap models through `&mut self`.
        let input = self.input.clone();
        let mut batch: Vec<Box<FrameWork>> = Vec::with_capacity(self.batching.max_batch);
        let mut buffers = std::mem::take(&mut self.batch_buffers);
        for message in input.iter() {
            let StageMessage::Inspect(first) = message else {
                let end = matches!(message, StageMessage::End);
                if self.output.send(message).is_err() || end {
                    return;
                }
                continue;
            };
            batch.push(first);
            // What stopped the gathering (a marker or the end) goes out
            // after the batch, keeping its place behind those frames.
            let after = super::batch::gather(&input, &mut batch, self.batching);
            self.take_swap(batch[0].meta.seq);
            let mut judged = Vec::with_capacity(0);
            std::mem::swap(&mut judged, &mut batch);
            for work in &mut judged {
                faults.hold(work.meta.seq);
                work.models = Some(Arc::clone(&self.models));
                // A frame failed here is marked, and the batch skips it.
                faults.fail(work);
            }
            let made = super::batch::infer_batch(
                self.backend.as_mut(),
                &self.preprocessor,
                self.mask_class,
                &mut judged,
                &mut buffers,
            );
            self.batch_counts.record(made);
            for work in judged.drain(..) {
                self.liveness.frame_inferred();
                if self.output.send(StageMessage::Inspect(work)).is_err() {
                    return;
                }
            }
            batch = judged;
            if let Some(message) = after {
                let end = matches!(message, StageMessage::End);
                if self.output.send(message).is_err() || end {
                    return;
                }
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
                batch: crate::infer::BatchDim::One,
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

    /// Test double: an engine that counts its runs of each model, failing
    /// the segmentation run when `fail_segment` is set.
    struct CountingEngine {
        inner: FixedOutputEngine,
        runs: Arc<std::sync::atomic::AtomicUsize>,
        /// The count of runs before each frame's segmentation, in order.
        runs_before_segment: Arc<std::sync::Mutex<Vec<usize>>>,
        fail_segment: bool,
    }

    impl CountingEngine {
        fn new() -> Self {
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
        fn segmentation_io(&self) -> &ModelIo {
            self.inner.segmentation_io()
        }
        fn classifier_io(&self) -> &ModelIo {
            self.inner.classifier_io()
        }
        fn segment(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
            use std::sync::atomic::Ordering;
            self.runs_before_segment
                .lock()
                .unwrap()
                .push(self.runs.load(Ordering::SeqCst));
            self.runs.fetch_add(1, Ordering::SeqCst);
            if self.fail_segment {
                return Err(InferError::Run {
                    role: crate::infer::ModelRole::Segmentation,
                    engine: "ONNX Runtime CPU",
                    message: "out of memory".to_string(),
                });
            }
            self.inner.segment(input, logits_out)
        }
        fn classify(&mut self, input: &[f32], logits_out: &mut [f32]) -> Result<(), InferError> {
            self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.inner.classify(input, logits_out)
        }
    }

    fn plain_preprocessor() -> Preprocessor {
        let plain = Normalization {
            mean: [0.0; 3],
            std: [1.0; 3],
        };
        Preprocessor::new(plain, plain, 0.0, 1.0, GEOMETRY)
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
    fn a_warm_up_that_fails_names_the_engine_and_the_step() {
        let mut engine = CountingEngine::new();
        engine.fail_segment = true;
        let mut records = vec![Box::new(FrameWork::new(&GEOMETRY))];
        let frame = WarmUpFrame::new(WarmUpSize::ModelInput, &GEOMETRY);
        assert_eq!(
            (frame.view().height, frame.view().width),
            GEOMETRY.seg_hw,
            "without a size from the source, the model's input size"
        );
        let error = warm_up_host(
            &mut engine,
            &mut FramePreprocessor::Cpu(plain_preprocessor()),
            &plain_preprocessor(),
            1,
            frame.view(),
            &mut records,
        )
        .unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(
                error,
                InferError::WarmUp {
                    engine: "onnxruntime-cpu",
                    step: "segment",
                    ..
                }
            ),
            "{message}"
        );
        assert!(
            message.contains("out of memory") && message.contains("[inference]"),
            "{message}"
        );
    }

    #[test]
    fn the_warm_up_size_is_what_the_source_config_says_or_the_model_input() {
        let v4l2 = |caps: &str| SourceKind::V4l2 {
            device: "/dev/video0".into(),
            caps: Some(caps.to_string()),
        };
        let sized = |width, height| WarmUpSize::Source { width, height };
        assert_eq!(
            WarmUpSize::of_source(&v4l2("image/jpeg,width=1280,height=720,framerate=30/1")),
            sized(1280, 720)
        );
        assert_eq!(
            WarmUpSize::of_source(&v4l2("video/x-raw, width=(int)1920, height=(int)1080")),
            sized(1920, 1080)
        );
        assert_eq!(
            WarmUpSize::of_source(&v4l2("video/x-raw,width=[ 1, 1920 ],height=1080")),
            WarmUpSize::ModelInput
        );
        assert_eq!(
            WarmUpSize::of_source(&SourceKind::Test {
                pattern: "smpte".to_string(),
                width: 320,
                height: 240,
                framerate: 30,
                num_buffers: 0,
            }),
            sized(320, 240)
        );
        assert_eq!(
            WarmUpSize::of_source(&SourceKind::Rtsp {
                url: "rtsp://camera/stream".to_string(),
                latency_ms: 100,
            }),
            WarmUpSize::ModelInput
        );
    }

    #[test]
    fn several_cameras_warm_up_on_the_largest_size_any_of_them_states() {
        let sized = |width, height| WarmUpSize::Source { width, height };
        assert_eq!(
            WarmUpSize::largest([
                sized(640, 480),
                WarmUpSize::ModelInput,
                sized(1920, 1080),
                sized(1280, 720),
            ]),
            sized(1920, 1080)
        );
        assert_eq!(
            WarmUpSize::largest([WarmUpSize::ModelInput, WarmUpSize::ModelInput]),
            WarmUpSize::ModelInput
        );
        assert_eq!(WarmUpSize::largest([sized(320, 240)]), sized(320, 240));
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
