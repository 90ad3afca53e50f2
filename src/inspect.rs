//! `sealcheck inspect`: the same stages as a run, on image files, one after
//! another on the calling thread. With a dump folder it also writes every
//! intermediate tensor as .npy, so a technician can compare with the training
//! pipeline.

use std::path::{Path, PathBuf};

use crate::capture::{self, CaptureError};
use crate::config::Config;
use crate::decision::{self, Decision};
use crate::frame::{FailedStage, FrameMeta, FrameSlot, FrameWork};
use crate::infer::{self, InferError, infer_frame};
use crate::npy::{NpyError, write_npy_f32};
use crate::output::format_result;
use crate::preprocess::{
    FramePreprocessError, FramePreprocessor, cpu_preprocessor, preprocess_frame,
};

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error(transparent)]
    Inference(#[from] InferError),
    #[error("cannot create dump folder {}: {source}", path.display())]
    DumpFolder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Npy(#[from] NpyError),
    #[error(transparent)]
    Preprocess(#[from] FramePreprocessError),
}

/// One inspected image: its result line and whether it could be read at all.
pub struct ImageResult {
    pub line: String,
    pub decision: Decision,
}

/// Inspects each image and calls `emit` with its result, in order. An image that
/// cannot be read still gets a result (verdict `fail`, reason `error`).
pub fn inspect(
    config: &Config,
    images: &[PathBuf],
    dump: Option<&Path>,
    mut emit: impl FnMut(&Path, &ImageResult),
) -> Result<(), InspectError> {
    let mut selection = infer::open_backend(config)?;
    let geometry = infer::geometry(
        selection.backend.segmentation_io(),
        selection.backend.classifier_io(),
    )?;
    log::info!(target: "sealcheck::inspect", backend = selection.backend.kind().as_str(), reason = selection.reason.as_str(); "inference backend chosen");
    let mut frame_preprocessor = FramePreprocessor::open(config, geometry)?;
    let preprocessor = cpu_preprocessor(config, geometry);
    let mut slot = FrameSlot::with_capacity(0);
    let mut work = FrameWork::new(&geometry);
    for (seq, image) in images.iter().enumerate() {
        let meta = FrameMeta::now(seq as u64);
        slot.meta = meta;
        let decoded = capture::decode_image_file(image, &mut slot);
        let decision = match decoded {
            Ok(()) => {
                preprocess_frame(&mut frame_preprocessor, &slot, &mut work);
                infer_frame(
                    selection.backend.as_mut(),
                    &preprocessor,
                    config.segmentation.mask_class,
                    &mut work,
                );
                if let Some((stage, message)) = &work.error {
                    log::error!(target: "sealcheck::inspect", image = image.display().to_string().as_str(), stage = stage.as_str(), error = message.as_str(); "inspection failed");
                }
                if let Some(dir) = dump {
                    dump_tensors(dir, image, &work, &geometry)?;
                }
                decision::decide(&work, config.classifier.defect_class, &config.decision)
            }
            Err(e) => {
                report_unreadable(image, &e);
                work.reset(meta);
                work.error = Some((FailedStage::Capture, e.to_string()));
                Decision::error()
            }
        };
        let t = &work.timings;
        let latencies = [
            t.preprocess_ms,
            t.segment_ms,
            t.classify_ms,
            meta.captured_instant.elapsed().as_secs_f64() * 1e3,
        ];
        let mut line = String::new();
        format_result(
            &mut line,
            &meta,
            &decision,
            decoded_latencies(&work, &latencies),
        );
        // Name the image first so a line can be traced back to its file.
        let name =
            serde_json::to_string(&image.display().to_string()).unwrap_or_else(|_| "\"?\"".into());
        line.insert_str(1, &format!("\"image\":{name},"));
        emit(image, &ImageResult { line, decision });
    }
    Ok(())
}

fn decoded_latencies<'a>(work: &FrameWork, latencies: &'a [f64; 4]) -> Option<&'a [f64; 4]> {
    match work.error {
        Some((FailedStage::Capture, _)) => None,
        _ => Some(latencies),
    }
}

fn report_unreadable(image: &Path, e: &CaptureError) {
    log::error!(target: "sealcheck::inspect", image = image.display().to_string().as_str(), error = e.to_string().as_str(); "image cannot be read; it fails with reason error");
}

fn dump_tensors(
    dir: &Path,
    image: &Path,
    work: &FrameWork,
    g: &crate::frame::TensorGeometry,
) -> Result<(), InspectError> {
    let stem = image
        .file_stem()
        .map_or_else(|| "image".into(), |s| s.to_string_lossy().into_owned());
    let out = dir.join(stem);
    std::fs::create_dir_all(&out).map_err(|source| InspectError::DumpFolder {
        path: out.clone(),
        source,
    })?;
    let (sh, sw) = g.seg_hw;
    let (ch, cw) = g.cls_hw;
    write_npy_f32(&out.join("seg_input.npy"), &[1, 3, sh, sw], &work.seg_input)?;
    write_npy_f32(
        &out.join("seg_logits.npy"),
        &[1, g.seg_classes, sh, sw],
        &work.seg_logits,
    )?;
    write_npy_f32(&out.join("mask.npy"), &[sh, sw], &work.mask)?;
    write_npy_f32(&out.join("cls_input.npy"), &[1, 4, ch, cw], &work.cls_input)?;
    write_npy_f32(
        &out.join("cls_logits.npy"),
        &[1, g.cls_classes],
        &work.cls_logits,
    )?;
    Ok(())
}
