//! `sealcheck inspect`: the same stages as a run, on image files, one after
//! another on the calling thread. With a dump folder it also writes every
//! intermediate tensor as .npy, so a technician can compare with the training
//! pipeline.

use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};

use crate::capture::{self, CaptureError};
use crate::config::{CavityLayout, Config, DecisionConfig};
use crate::cycle::CycleVerdicts;
use crate::decision::{self, Decision};
use crate::frame::{FailedStage, FrameMeta, FrameSlot, FrameWork, TensorGeometry};
use crate::infer::{self, InferError, InferenceBackend, infer_frame};
use crate::json_line::write_json;
use crate::npy::{NpyError, write_npy_f32};
use crate::output::ResultLine;
use crate::preprocess::{
    FramePreprocessError, FramePreprocessor, Preprocessor, cpu_preprocessor, preprocess_frame,
    preprocess_image,
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

/// One engine with its preprocessing and work buffers, judging one image at a
/// time on the calling thread: what `inspect` runs, and each engine of `evaluate`.
pub struct ImageJudge {
    pub backend: Box<dyn InferenceBackend>,
    /// Why this engine (for logs and reports).
    pub reason: String,
    pub geometry: TensorGeometry,
    frame_preprocessor: FramePreprocessor,
    preprocessor: Preprocessor,
    mask_class: usize,
    defect_class: usize,
    slot: FrameSlot,
    /// The image `slot` holds, decoded: a frame's cavities are judged one
    /// after another from one decode.
    decoded: Option<PathBuf>,
    /// The last judged frame's tensors, mask, logits and timings.
    pub work: FrameWork,
}

impl ImageJudge {
    /// Opens the engine and preprocessing the config names.
    pub fn open(config: &Config) -> Result<Self, InspectError> {
        let selection = infer::open_backend(config)?;
        let geometry = infer::geometry(selection.backend.as_ref())?;
        Ok(ImageJudge {
            frame_preprocessor: FramePreprocessor::open(config, geometry)?,
            preprocessor: cpu_preprocessor(config, geometry),
            mask_class: config.segmentation.mask_class,
            defect_class: config.classifier.defect_class,
            slot: FrameSlot::with_capacity(0),
            decoded: None,
            work: FrameWork::new(&geometry),
            backend: selection.backend,
            reason: selection.reason,
            geometry,
        })
    }

    /// Decodes `image` and judges it with `thresholds`. An image that cannot be
    /// read fails with reason `error` (and `work.error` says why), like a frame
    /// capture could not deliver.
    pub fn judge(
        &mut self,
        image: &Path,
        meta: FrameMeta,
        thresholds: &DecisionConfig,
    ) -> Decision {
        self.judge_cavity(image, meta, thresholds, None)
    }

    /// `judge`, of one cavity of the image's cycle when `cavity` names it
    /// and the layout: its crop (region and margin, clipped) is judged as
    /// a frame of its own, as the run judges it. An image the layout does
    /// not fit fails with `error`, naming the cavity and the sizes.
    pub fn judge_cavity(
        &mut self,
        image: &Path,
        meta: FrameMeta,
        thresholds: &DecisionConfig,
        cavity: Option<(u16, &CavityLayout)>,
    ) -> Decision {
        self.slot.meta = meta;
        if self.decoded.as_deref() != Some(image) {
            self.decoded = None;
            if let Err(e) = capture::decode_image_file(image, &mut self.slot) {
                report_unreadable(image, &e);
                self.work.reset(meta);
                self.work.error = Some((FailedStage::Capture, e.to_string()));
                return Decision::error();
            }
            self.decoded = Some(image.to_path_buf());
        }
        match cavity {
            None => preprocess_frame(&mut self.frame_preprocessor, &self.slot, &mut self.work),
            Some((number, layout)) => {
                let frame = self.slot.image();
                let size = (frame.width as u32, frame.height as u32);
                let crop = layout.check_frame(size.0, size.1).map(|()| {
                    let r = layout.crop(number, size);
                    frame.crop(
                        r.x as usize,
                        r.y as usize,
                        r.width as usize,
                        r.height as usize,
                    )
                });
                match crop {
                    Ok(Some(crop)) => {
                        preprocess_image(&mut self.frame_preprocessor, meta, crop, &mut self.work)
                    }
                    Ok(None) => {
                        self.work.reset(meta);
                        self.work.error = Some((
                            FailedStage::Preprocess,
                            format!("cavity {number} is not in the layout"),
                        ));
                    }
                    Err(misfit) => {
                        self.work.reset(meta);
                        self.work.error = Some((FailedStage::Preprocess, misfit.to_string()));
                    }
                }
            }
        }
        infer_frame(
            self.backend.as_mut(),
            &self.preprocessor,
            self.mask_class,
            &mut self.work,
        );
        decision::decide(&self.work, self.defect_class, thresholds)
    }

    /// The decoded frame of the last `judge` (for reports that draw on it).
    pub fn frame(&self) -> &FrameSlot {
        &self.slot
    }
}

/// Inspects each image and calls `emit` with its result, in order. An image that
/// cannot be read still gets a result (verdict `fail`, reason `error`).
pub fn inspect(
    config: &Config,
    images: &[PathBuf],
    dump: Option<&Path>,
    mut emit: impl FnMut(&Path, &ImageResult),
) -> Result<(), InspectError> {
    let mut judge = ImageJudge::open(config)?;
    log::info!(target: "sealcheck::inspect", backend = judge.backend.kind().as_str(), reason = judge.reason.as_str(); "inference backend chosen");
    // One line buffer for all images, as in a run.
    let mut result = ImageResult {
        line: String::with_capacity(512),
        decision: Decision::error(),
    };
    // With a cavity layout each image is a cycle: every judged cavity's
    // crop judged on its own, one line with them all, as `run` writes it.
    let layout = config.first_source().layout.clone();
    let mut cycle = CycleVerdicts::with_capacity(layout.as_ref().map_or(0, |l| l.count().into()));
    for (seq, image) in images.iter().enumerate() {
        let meta = FrameMeta::now(seq as u64);
        let cavities: Vec<Option<u16>> = match &layout {
            Some(layout) => {
                cycle.start(layout);
                layout.enabled().map(Some).collect()
            }
            None => vec![None],
        };
        let mut decision = Decision::error();
        let mut stages = [0.0f64; 3];
        let mut decoded = true;
        for cavity in cavities {
            decision =
                judge.judge_cavity(image, meta, &config.decision, cavity.zip(layout.as_deref()));
            let work = &judge.work;
            decoded = !matches!(work.error, Some((FailedStage::Capture, _)));
            if decoded {
                if let Some((stage, message)) = &work.error {
                    log::error!(target: "sealcheck::inspect", image = image.display().to_string().as_str(), cavity = cavity.unwrap_or(0), stage = stage.as_str(), error = message.as_str(); "inspection failed");
                }
                if let Some(dir) = dump {
                    dump_tensors(dir, image, cavity, work, &judge.geometry)?;
                }
            }
            let t = &work.timings;
            stages[0] += t.preprocess_ms;
            stages[1] += t.segment_ms;
            stages[2] += t.classify_ms;
            if let Some(number) = cavity {
                cycle.push(number, decision);
            }
        }
        if layout.is_some() {
            decision = cycle.overall();
        }
        let latencies = [
            stages[0],
            stages[1],
            stages[2],
            meta.captured_instant.elapsed().as_secs_f64() * 1e3,
        ];
        result.decision = decision;
        format_image_line(
            &mut result.line,
            image,
            &meta,
            &decision,
            decoded.then_some(&latencies),
            layout.is_some().then_some(&cycle),
        );
        emit(image, &result);
    }
    Ok(())
}

fn format_image_line(
    line: &mut String,
    image: &Path,
    meta: &FrameMeta,
    decision: &Decision,
    latencies: Option<&[f64; 4]>,
    cycle: Option<&CycleVerdicts>,
) {
    let image_line = ImageLine {
        image,
        result: ResultLine::new(meta, decision, latencies).with_cavities(cycle),
    };
    write_json(line, &image_line);
}

/// A result line with the image named first, so a line can be traced back to its file.
#[derive(Serialize)]
struct ImageLine<'a> {
    #[serde(serialize_with = "path_text")]
    image: &'a Path,
    #[serde(flatten)]
    result: ResultLine<'a>,
}

/// A path as the text `Path::display` gives, escaped as any JSON string.
fn path_text<S: Serializer>(path: &&Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&path.display())
}

fn report_unreadable(image: &Path, e: &CaptureError) {
    log::error!(target: "sealcheck::inspect", image = image.display().to_string().as_str(), error = e.to_string().as_str(); "image cannot be read; it fails with reason error");
}

/// Each tensor of `work` under `dir/<image stem>/` (`<image stem>_c<N>/`
/// for cavity N of a cycle).
fn dump_tensors(
    dir: &Path,
    image: &Path,
    cavity: Option<u16>,
    work: &FrameWork,
    g: &crate::frame::TensorGeometry,
) -> Result<(), InspectError> {
    let mut stem = image
        .file_stem()
        .map_or_else(|| "image".into(), |s| s.to_string_lossy().into_owned());
    if let Some(n) = cavity {
        stem = format!("{stem}_c{n}");
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Reason, Verdict};
    use std::time::{Duration, Instant, UNIX_EPOCH};

    /// `sealcheck inspect` prints these lines for scripts: the bytes are pinned
    /// as they were when the line was still spliced by hand (the image name
    /// first, escaped; then the result line's fields).
    #[test]
    fn image_line_bytes_are_pinned() {
        let meta = FrameMeta {
            seq: 2,
            camera: 0,
            captured_at: UNIX_EPOCH + Duration::from_millis(1_709_210_096_789),
            captured_instant: Instant::now(),
            part: crate::frame::Part::free(2),
        };
        let d = Decision {
            verdict: Verdict::Fail,
            reason: Reason::SealArea,
            defect_prob: Some(0.25),
            seal_area: Some(0.031_25),
        };
        let mut line = String::new();
        format_image_line(
            &mut line,
            Path::new("samples/a \"quoted\" \\ näme\t.png"),
            &meta,
            &d,
            Some(&[1.25, 10.0, 3.5, 15.125]),
            None,
        );
        assert_eq!(
            line,
            "{\"image\":\"samples/a \\\"quoted\\\" \\\\ näme\\t.png\",\"seq\":2,\"ts\":\"2024-02-29T12:34:56.789Z\",\"verdict\":\"fail\",\"reason\":\"seal_area\",\"defect_prob\":0.250000,\"seal_area\":0.031250,\"latency_ms\":{\"preprocess\":1.250,\"segment\":10.000,\"classify\":3.500,\"total\":15.125}}"
        );
        format_image_line(
            &mut line,
            Path::new("missing.png"),
            &meta,
            &Decision::error(),
            None,
            None,
        );
        assert_eq!(
            line,
            "{\"image\":\"missing.png\",\"seq\":2,\"ts\":\"2024-02-29T12:34:56.789Z\",\"verdict\":\"fail\",\"reason\":\"error\",\"defect_prob\":null,\"seal_area\":null,\"latency_ms\":null}"
        );
    }
}
