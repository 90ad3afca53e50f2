//! INT8 calibration batches for TensorRT's (implicit-quantization) calibrator,
//! made by sealcheck's own preprocessing from a folder of images, so that
//! calibration sees exactly the tensors inference will see. The calibration
//! cache TensorRT writes is kept next to the engines and reused.
//!
//! ```text
//! image file -> capture::decode_image_file -> Preprocessor (segmentation input)
//!                                           -> + CPU reference segmentation -> mask channel (classifier input)
//!            -> host batch -> device buffer -> TensorRT's getBatch
//! ```

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::bridge::Precision;
use super::calibration_feed::{CalibrationFeed, SampleMaker};
use super::error::TrtError;
use super::settings::TensorRtSettings;
use crate::config::Config;
use crate::gpu::GpuContext;
use crate::infer::backend::InferenceBackend;
use crate::infer::model_io::ModelRole;
use crate::infer::model_pair::ModelPair;

/// Image files a calibration set may contain.
const IMAGE_EXTENSIONS: [&str; 4] = ["jpg", "jpeg", "png", "bmp"];

/// The image files of a calibration folder, sorted by name (so every build
/// sees them in the same order).
pub fn calibration_images(folder: &Path) -> Result<Vec<PathBuf>, TrtError> {
    let entries = fs::read_dir(folder).map_err(|source| TrtError::Io {
        action: "cannot list the INT8 calibration images in",
        path: folder.to_path_buf(),
        source,
    })?;
    let mut images: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        })
        .collect();
    images.sort();
    if images.is_empty() {
        return Err(TrtError::Calibration(format!(
            "no images ({}) in {}; put a few hundred typical frames there",
            IMAGE_EXTENSIONS.join(", "),
            folder.display()
        )));
    }
    Ok(images)
}

/// SHA-256 over the calibration images' names and contents: part of the
/// engine key, so a changed calibration set rebuilds the INT8 engine.
pub fn calibration_digest(images: &[PathBuf]) -> Result<String, TrtError> {
    let mut hasher = Sha256::new();
    for image in images {
        let name = image
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        hasher.update(name.as_bytes());
        hasher.update([0u8]);
        let bytes = fs::read(image).map_err(|source| TrtError::Io {
            action: "cannot read the calibration image",
            path: image.clone(),
            source,
        })?;
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// INT8 calibration for both models, or nothing for fp32/fp16.
pub(super) struct CalibrationPlan {
    images: Vec<PathBuf>,
    digest: Option<String>,
    /// INT8 only: each model's sample maker (taken when its feed is made)
    /// and the length of its input; `feed_for`'s role picks it with
    /// `ModelPair::by_role_mut`.
    makers: ModelPair<Option<(SampleMaker, usize)>>,
}

/// A feed and the key field it implies.
pub(super) struct ModelCalibration {
    pub(super) feed: CalibrationFeed,
    pub(super) digest: Option<String>,
}

impl CalibrationPlan {
    pub(super) fn new(cfg: &Config, settings: &TensorRtSettings) -> Result<Self, TrtError> {
        let (Precision::Int8, Some(folder)) =
            (settings.precision, settings.calibration_images.as_deref())
        else {
            return Ok(CalibrationPlan {
                images: Vec::new(),
                digest: None,
                makers: ModelPair::default(),
            });
        };
        let images = calibration_images(folder)?;
        let digest = Some(calibration_digest(&images)?);
        let makers = sample_makers(cfg)?.map(|_, maker| Some(maker));
        Ok(CalibrationPlan {
            images,
            digest,
            makers,
        })
    }

    pub(super) fn feed_for(
        &mut self,
        role: ModelRole,
        gpu: &Arc<GpuContext>,
        settings: &TensorRtSettings,
    ) -> Result<ModelCalibration, TrtError> {
        let Some((maker, len)) = self.makers.by_role_mut(role).take() else {
            return Ok(ModelCalibration {
                feed: CalibrationFeed::none(),
                digest: None,
            });
        };
        std::fs::create_dir_all(&settings.engine_dir).map_err(|source| TrtError::Io {
            action: "cannot create the engine cache folder",
            path: settings.engine_dir.clone(),
            source,
        })?;
        let cache_path = settings
            .engine_dir
            .join(format!("{}.int8-calibration.cache", role.as_str()));
        let feed = CalibrationFeed::new(gpu, self.images.clone(), len, maker, cache_path)?;
        Ok(ModelCalibration {
            feed,
            digest: self.digest.clone(),
        })
    }
}

/// Sample makers for both models from sealcheck's own CPU preprocessing,
/// each with the length of its model's input; the classifier's mask channel
/// comes from the CPU reference segmentation (tract), exactly as
/// `infer_frame` computes it.
fn sample_makers(cfg: &Config) -> Result<ModelPair<(SampleMaker, usize)>, TrtError> {
    use crate::frame::{FrameSlot, FrameWork};
    use crate::preprocess::{Preprocessor, logits_to_mask};

    let mut reference = crate::infer::tract::TractBackend::open(cfg)?;
    let geometry = crate::infer::backend::geometry(&reference)?;
    let new_preprocessor = || {
        Preprocessor::new(
            cfg.segmentation.normalization,
            cfg.classifier.normalization,
            cfg.classifier.mask_mean,
            cfg.classifier.mask_std,
            geometry,
        )
    };
    let prepare = |preprocessor: &mut Preprocessor,
                   slot: &mut FrameSlot,
                   work: &mut FrameWork,
                   image: &Path| {
        crate::capture::decode_image_file(image, slot).map_err(|e| e.to_string())?;
        // The CPU preprocessing the pipeline runs (the GPU kernels match it to the bit).
        preprocessor
            .frame_to_tensors(slot.image(), &mut work.seg_input, &mut work.cls_input)
            .map_err(|e| e.to_string())
    };

    let (mut seg_pre, mut seg_slot, mut seg_work) = (
        new_preprocessor(),
        FrameSlot::with_capacity(0),
        FrameWork::new(&geometry),
    );
    let segmentation: SampleMaker = Box::new(move |image, sample| {
        prepare(&mut seg_pre, &mut seg_slot, &mut seg_work, image)?;
        sample.copy_from_slice(&seg_work.seg_input);
        Ok(())
    });
    let (mut cls_pre, mut cls_slot, mut cls_work) = (
        new_preprocessor(),
        FrameSlot::with_capacity(0),
        FrameWork::new(&geometry),
    );
    let mask_class = cfg.segmentation.mask_class;
    let classifier: SampleMaker = Box::new(move |image, sample| {
        prepare(&mut cls_pre, &mut cls_slot, &mut cls_work, image)?;
        let work = &mut cls_work;
        reference
            .run(
                ModelRole::Segmentation,
                1,
                &work.seg_input,
                &mut work.seg_logits,
            )
            .map_err(|e| e.to_string())?;
        work.mask_pixels = logits_to_mask(
            &work.seg_logits,
            geometry.seg_classes,
            mask_class,
            &mut work.mask,
        );
        cls_pre.mask_to_classifier_channel(&work.mask, &mut work.cls_input);
        sample.copy_from_slice(&work.cls_input);
        Ok(())
    });
    Ok(ModelPair {
        segmentation: (segmentation, geometry.seg_input_len()),
        classifier: (classifier, geometry.cls_input_len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_listed_sorted_and_filtered() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.jpg", "a.PNG", "notes.txt", "c.jpeg"] {
            fs::write(dir.path().join(name), name).unwrap();
        }
        let images = calibration_images(dir.path()).unwrap();
        let names: Vec<String> = images
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.PNG", "b.jpg", "c.jpeg"]);
    }

    #[test]
    fn empty_folder_says_what_to_put_there() {
        let dir = tempfile::tempdir().unwrap();
        let err = calibration_images(dir.path()).unwrap_err().to_string();
        assert!(err.contains("no images"), "{err}");
    }

    #[test]
    fn digest_follows_contents_and_names() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.jpg");
        fs::write(&a, b"one").unwrap();
        let first = calibration_digest(std::slice::from_ref(&a)).unwrap();
        assert_eq!(first, calibration_digest(std::slice::from_ref(&a)).unwrap());
        fs::write(&a, b"two").unwrap();
        assert_ne!(first, calibration_digest(std::slice::from_ref(&a)).unwrap());
        let b = dir.path().join("b.jpg");
        fs::write(&b, b"two").unwrap();
        assert_ne!(
            calibration_digest(std::slice::from_ref(&a)).unwrap(),
            calibration_digest(&[b]).unwrap()
        );
    }

    #[test]
    fn feed_without_int8_has_no_batches() {
        let mut feed = CalibrationFeed::none();
        assert_eq!(feed.next_batch("images"), Ok(0));
        assert!(feed.read_cache().is_empty());
        assert_eq!(feed.write_cache(b"x"), Ok(()));
    }
}
