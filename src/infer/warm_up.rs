//! The start-up warm-up: an engine's first runs allocate and tune, and a
//! preprocessor sizes its tables on the first frame of a size, so before
//! READY=1 a mid-grey frame of the size the source will deliver goes once
//! through every work record and every batch size (`warm_up_sizes`), so
//! the first camera frame is judged as fast as the hundredth. Warm-up
//! frames take no `seq` and never reach the output stage. `warm_up` is a
//! model swap's (zeros, every batch size), `WarmUpFrame` the device path's
//! too (`device_stage::warm_up_path`).
//!
//! `warm_up_sizes` is the one list of batch sizes: the host path's and the
//! device path's start-up warm-ups, the host swap (`warm_up`) and the
//! device swaps (`TensorRtBackend::warm_up_batches`, ONNX Runtime's
//! `OrtCandidate::warm_up`) all walk it.

use super::backend::InferenceBackend;
use super::batch::{BatchBuffers, infer_batch, infer_frame};
use super::error::InferError;
use super::model_role::ModelRole;
use crate::config::SourceKind;
use crate::frame::{FailedStage, FrameWork, ImageView, PixelLayout, TensorGeometry};
use crate::preprocess::{FramePreprocessor, Preprocessor};

/// The batch sizes a path warms up before its first camera frame, and a
/// swap before its new models' first (an engine sets up each input shape at
/// its first run): 1 ..= `max_batch`.
pub fn warm_up_sizes(max_batch: usize) -> std::ops::RangeInclusive<usize> {
    1..=max_batch.max(1)
}

/// Runs both models on zeros at each batch size 1..=`max_batch` the engine
/// takes (`warm_up_sizes`): the first run of an engine (and of each input
/// shape) allocates and tunes, and a model swap does that before the new
/// models judge a frame.
pub fn warm_up(
    backend: &mut dyn InferenceBackend,
    geometry: TensorGeometry,
    max_batch: usize,
) -> Result<(), InferError> {
    let most = max_batch.min(backend.max_batch()).max(1);
    let (seg_in, seg_out) = (geometry.seg_input_len(), geometry.seg_logits_len());
    let (cls_in, cls_out) = (geometry.cls_input_len(), geometry.cls_classes);
    let (seg_input, cls_input) = (vec![0.0; most * seg_in], vec![0.0; most * cls_in]);
    let (mut seg_logits, mut cls_logits) = (vec![0.0; most * seg_out], vec![0.0; most * cls_out]);
    for frames in warm_up_sizes(most) {
        backend.run(
            ModelRole::Segmentation,
            frames,
            &seg_input[..frames * seg_in],
            &mut seg_logits[..frames * seg_out],
        )?;
        backend.run(
            ModelRole::Classifier,
            frames,
            &cls_input[..frames * cls_in],
            &mut cls_logits[..frames * cls_out],
        )?;
    }
    Ok(())
}

/// The frame size the start-up warm-up uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmUpSize {
    /// The size the source will deliver: `[source]` width and height
    /// (test, CSI), the width and height in a V4L2 `caps`, an image
    /// sequence's first file, a replay's frames.
    Source { width: usize, height: usize },
    /// The config does not say (a file, RTSP, a launch line, V4L2 without a
    /// size in `caps`, an unreadable first image): the segmentation model's input
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
            // The first file's header (an unreadable one fails at capture's start).
            SourceKind::Images { location, .. } => {
                match imagesize::size(crate::config::image_file(location, 0)) {
                    Ok(size) => sized(size.width as u32, size.height as u32),
                    Err(_) => WarmUpSize::ModelInput,
                }
            }
            _ => WarmUpSize::ModelInput,
        }
    }

    /// The bytes of one RGB frame of the source's size as capture stores
    /// it in a ring slot (rows packed, `RgbPlane::copy_into`); `None` where
    /// the size is not known before the start.
    pub fn rgb_frame_bytes(&self) -> Option<usize> {
        match *self {
            WarmUpSize::Source { width, height } if width > 0 && height > 0 => {
                Some(width * 3 * height)
            }
            _ => None,
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
/// pages are touched too), then each batch size 2..=`max_batch` through
/// `infer_batch` on those records and `buffers` (an engine sizes its
/// output, and may tune, at the first run of a new size). A step that
/// fails is an error naming the engine and the step: the same engine would
/// fail every part.
#[allow(clippy::too_many_arguments)]
pub fn warm_up_host(
    backend: &mut dyn InferenceBackend,
    frame_preprocessor: &mut FramePreprocessor,
    preprocessor: &Preprocessor,
    mask_class: usize,
    frame: ImageView<'_>,
    records: &mut [Box<FrameWork>],
    max_batch: usize,
    buffers: &mut BatchBuffers,
) -> Result<(), InferError> {
    let engine = backend.kind().as_str();
    for work in records.iter_mut() {
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
    for frames in warm_up_sizes(max_batch.min(records.len())).skip(1) {
        infer_batch(
            backend,
            preprocessor,
            mask_class,
            &mut records[..frames],
            buffers,
        );
        if let Some((stage, message)) = records.iter_mut().find_map(|w| w.error.take()) {
            return Err(InferError::WarmUp {
                engine,
                step: stage.as_str(),
                message: format!("a batch of {frames} frames: {message}"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::test_engines::{CountingEngine, GEOMETRY, plain_preprocessor};

    #[test]
    fn every_batch_size_up_to_the_largest_is_warmed_up() {
        assert_eq!(warm_up_sizes(4).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(warm_up_sizes(0).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn an_image_sequence_is_sized_by_its_first_file_and_frames_by_packed_rgb_rows() {
        let clip = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/demo_clip");
        let images = |location: std::path::PathBuf| SourceKind::Images {
            location,
            framerate: 30,
        };
        let size = WarmUpSize::of_source(&images(clip.join("frame_%05d.jpg")));
        assert_eq!(
            size,
            WarmUpSize::Source {
                width: 1280,
                height: 720
            }
        );
        assert_eq!(size.rgb_frame_bytes(), Some(1280 * 3 * 720));
        let missing = WarmUpSize::of_source(&images(clip.join("none_%05d.jpg")));
        assert_eq!(missing, WarmUpSize::ModelInput);
        assert_eq!(missing.rgb_frame_bytes(), None);
        // A slot's rows are packed: 3 * 641 = 1923 bytes, no padding.
        let odd = WarmUpSize::Source {
            width: 641,
            height: 2,
        };
        assert_eq!(odd.rgb_frame_bytes(), Some(1923 * 2));
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
            1,
            &mut Default::default(),
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
}
