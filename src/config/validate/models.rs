//! `[models]`: the segmentation and classifier sections (file, tensor
//! names, normalisation), `acceptance_images`, and the FP16 files
//! `[inference] precision` runs.

use std::path::PathBuf;

use super::files::{Files, looked_for};
use crate::config::model_files::fp16_sibling;
use crate::config::raw::Section;
use crate::config::types::{
    ClassifierModel, EnginePrecision, InferenceConfig, Normalization, SegmentationModel,
};

/// `[models] acceptance_images`: `Some(None)` when absent (or not a string,
/// recorded), `Some(Some(dir))` for a folder that exists, else a problem and `None`.
pub(super) fn read_acceptance_images(models: &Section, files: &Files) -> Option<Option<PathBuf>> {
    let Some(dir) = models.opt_str("acceptance_images") else {
        return Some(None);
    };
    let resolved = files.resolve(&dir);
    if resolved.is_dir() {
        return Some(Some(resolved));
    }
    models.problem(
        "acceptance_images",
        format!(
            "folder {} does not exist{}; it holds labelled frames new models must pass on reload",
            looked_for(&resolved).display(),
            files.how_resolved(&dir)
        ),
    );
    None
}

/// With `[inference] precision = "fp16"` the models judged are the FP16 files
/// beside the named ones (each must exist); otherwise the named files.
pub(super) fn precision_files(
    models: &Section,
    inference: Option<&InferenceConfig>,
    segmentation: Option<SegmentationModel>,
    classifier: Option<ClassifierModel>,
) -> (Option<SegmentationModel>, Option<ClassifierModel>) {
    match inference {
        Some(i) if i.precision == EnginePrecision::Fp16 => (
            segmentation.and_then(|m| {
                fp16_model(models, "segmentation", m.path.clone())
                    .map(|path| SegmentationModel { path, ..m })
            }),
            classifier.and_then(|m| {
                fp16_model(models, "classifier", m.path.clone())
                    .map(|path| ClassifierModel { path, ..m })
            }),
        ),
        _ => (segmentation, classifier),
    }
}

/// The FP16 file of a named model (`precision = "fp16"`), which must exist.
fn fp16_model(models: &Section, key: &str, fp32: PathBuf) -> Option<PathBuf> {
    let fp16 = fp16_sibling(&fp32);
    if fp16.is_file() {
        return Some(fp16);
    }
    models.problem(
        key,
        format!(
            "[inference] precision = \"fp16\" runs {} beside {}, which does not exist: make it with scripts/demo/export_batch_fp16.py, or leave precision out",
            fp16.display(),
            fp32.display()
        ),
    );
    None
}

const IMAGENET: Normalization = Normalization {
    mean: [0.485, 0.456, 0.406],
    std: [0.229, 0.224, 0.225],
};

fn read_normalization(s: &Section) -> Option<Normalization> {
    let mean = s.triple_in("mean", 0.0..=1.0, IMAGENET.mean);
    let std = s.triple_in("std", 1e-6..=10.0, IMAGENET.std);
    Some(Normalization {
        mean: mean?,
        std: std?,
    })
}

pub(super) fn read_segmentation(s: &Section, files: &Files) -> Option<SegmentationModel> {
    let path = files.existing(s, "path", "the segmentation model (.onnx)");
    let input = s.str_or("input", "images");
    let output = s.str_or("output", "logits");
    let normalization = read_normalization(s);
    let mask_class = s.int_in("mask_class", 0..=255, Some(1));
    s.finish();
    Some(SegmentationModel {
        path: path?,
        input,
        output,
        normalization: normalization?,
        mask_class: mask_class? as usize,
    })
}

pub(super) fn read_classifier(s: &Section, files: &Files) -> Option<ClassifierModel> {
    let path = files.existing(s, "path", "the classifier model (.onnx)");
    let input = s.str_or("input", "input");
    let output = s.str_or("output", "logits");
    let normalization = read_normalization(s);
    let mask_mean = s.float_in("mask_mean", -10.0..=10.0, Some(0.0));
    let mask_std = s.float_in("mask_std", 1e-6..=10.0, Some(1.0));
    let defect_class = s.int_in("defect_class", 0..=255, Some(1));
    s.finish();
    Some(ClassifierModel {
        path: path?,
        input,
        output,
        normalization: normalization?,
        mask_mean: mask_mean? as f32,
        mask_std: mask_std? as f32,
        defect_class: defect_class? as usize,
    })
}
