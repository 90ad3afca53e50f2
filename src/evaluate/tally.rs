//! One engine's per-frame records and the figures made from them. Every
//! figure is computed from the records, so the JSON report's per-frame lines
//! recount to its summary.

use std::path::Path;

use crate::decision::{Decision, Reason, Verdict};
use crate::frame::{FrameSlot, FrameWork};
use crate::preprocess::MaskResampler;
use crate::preprocess::normalize::MaskAffine;
use crate::stats::{LatencyHistogram, percentile_of_sorted};

use super::image_set::EvalFrame;

/// One frame as one engine judged it, and how that compares.
#[derive(Debug, Clone)]
pub struct FrameRecord {
    pub frame: u64,
    pub image: String,
    /// The label: defective or not.
    pub defect: Option<bool>,
    pub kind: Option<String>,
    /// With labels per cavity: the cavity this record judged.
    pub cavity: Option<u16>,
    pub verdict: Verdict,
    pub reason: Reason,
    pub defect_prob: Option<f64>,
    pub seal_area: Option<f64>,
    /// Why the frame failed with reason `error`.
    pub error: Option<String>,
    /// preprocess, segment, classify (ms).
    pub latency_ms: [f64; 3],
    /// Against the reference engine (candidates only).
    pub reference: Option<ReferenceComparison>,
    /// Seal IoU with the ground-truth mask, when the set has one for this frame.
    pub truth_iou: Option<f64>,
}

#[derive(Debug, Clone, Copy)]
pub struct ReferenceComparison {
    pub verdict: Verdict,
    pub defect_prob: Option<f64>,
    pub mask_iou: f64,
    /// Worst |candidate - reference| over both models' logits.
    pub max_abs_logit_diff: f64,
}

impl FrameRecord {
    /// The verdict contradicts the label (a defect passed, or a good seal failed).
    pub fn wrong(&self) -> Option<bool> {
        self.defect.map(|d| d != (self.verdict == Verdict::Fail))
    }

    pub fn flipped(&self) -> bool {
        self.reference.is_some_and(|r| r.verdict != self.verdict)
    }

    /// Worth a person's look: the reference or the label says otherwise.
    pub fn disagrees(&self) -> bool {
        self.flipped() || self.wrong() == Some(true)
    }

    pub fn prob_diff(&self) -> Option<f64> {
        let r = self.reference?;
        Some((self.defect_prob? - r.defect_prob?).abs())
    }
}

/// Everything recorded for one engine.
pub struct EngineTally {
    pub records: Vec<FrameRecord>,
    latency: [LatencyHistogram; 3],
    truth_intersection: u64,
    truth_union: u64,
    mask_threshold: f32,
}

/// Figures against the labels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelScores {
    pub accuracy: f64,
    pub defect_recall: f64,
    pub false_reject_rate: f64,
    pub wrong: u64,
}

/// One cavity's figures against the labels (`EngineTally::cavity_scores`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CavityScores {
    pub cavity: u16,
    pub scores: LabelScores,
    /// Labelled defective, and good.
    pub defects: u64,
    pub goods: u64,
}

/// The figures of `records` against their labels; `None` unless each is labelled.
fn scores<'a>(records: impl Iterator<Item = &'a FrameRecord> + Clone) -> Option<LabelScores> {
    let wrong: Vec<bool> = records
        .clone()
        .map(FrameRecord::wrong)
        .collect::<Option<_>>()?;
    let defects: Vec<&FrameRecord> = records.clone().filter(|r| r.defect == Some(true)).collect();
    let goods: Vec<&FrameRecord> = records.filter(|r| r.defect == Some(false)).collect();
    let fails =
        |rs: &[&FrameRecord]| rs.iter().filter(|r| r.verdict == Verdict::Fail).count() as u64;
    let wrong_count = wrong.iter().filter(|w| **w).count() as u64;
    Some(LabelScores {
        accuracy: 1.0 - ratio(wrong_count, wrong.len() as u64).min(1.0),
        defect_recall: if defects.is_empty() {
            1.0
        } else {
            ratio(fails(&defects), defects.len() as u64)
        },
        false_reject_rate: if goods.is_empty() {
            0.0
        } else {
            ratio(fails(&goods), goods.len() as u64)
        },
        wrong: wrong_count,
    })
}

/// Figures against the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReferenceScores {
    pub verdict_flips: u64,
    pub mask_iou_mean: f64,
    pub mask_iou_worst: f64,
    pub max_abs_logit_diff: f64,
    pub defect_prob_diff_p99: Option<f64>,
}

impl Default for EngineTally {
    fn default() -> Self {
        EngineTally::new()
    }
}

impl EngineTally {
    pub fn new() -> Self {
        EngineTally {
            records: Vec::new(),
            latency: Default::default(),
            truth_intersection: 0,
            truth_union: 0,
            mask_threshold: 0.5,
        }
    }

    /// Records one judged frame; `reference` is the reference engine's
    /// decision and work on the same frame (none for the reference itself).
    pub fn record(
        &mut self,
        frame: &EvalFrame,
        decision: &Decision,
        work: &FrameWork,
        reference: Option<(&Decision, &FrameWork)>,
        truth: Option<&[f32]>,
    ) -> &FrameRecord {
        let judged = work.error.is_none();
        let t = &work.timings;
        if judged {
            for (h, ms) in
                self.latency
                    .iter_mut()
                    .zip([t.preprocess_ms, t.segment_ms, t.classify_ms])
            {
                h.record(ms);
            }
        }
        let truth_iou = match truth {
            Some(truth) if judged => {
                let (i, u) = overlap(&work.mask, truth, self.mask_threshold);
                self.truth_intersection += i;
                self.truth_union += u;
                Some(ratio(i, u))
            }
            _ => None,
        };
        let reference = reference.map(|(d, w)| {
            let (i, u) = overlap(&work.mask, &w.mask, self.mask_threshold);
            ReferenceComparison {
                verdict: d.verdict,
                defect_prob: d.defect_prob,
                mask_iou: ratio(i, u),
                max_abs_logit_diff: max_abs_diff(&work.seg_logits, &w.seg_logits)
                    .max(max_abs_diff(&work.cls_logits, &w.cls_logits)),
            }
        });
        self.records.push(FrameRecord {
            frame: frame.frame,
            image: frame.image.display().to_string(),
            defect: frame.defect,
            kind: frame.kind.clone(),
            cavity: frame.cavity,
            verdict: decision.verdict,
            reason: decision.reason,
            defect_prob: decision.defect_prob,
            seal_area: decision.seal_area,
            error: work
                .error
                .as_ref()
                .map(|(stage, m)| format!("{}: {m}", stage.as_str())),
            latency_ms: [t.preprocess_ms, t.segment_ms, t.classify_ms],
            reference,
            truth_iou,
        });
        self.records.last().expect("just pushed")
    }

    pub fn frames(&self) -> usize {
        self.records.len()
    }

    pub fn by_reason(&self) -> Vec<(Reason, u64)> {
        Reason::ALL
            .iter()
            .map(|&r| {
                (
                    r,
                    self.records.iter().filter(|x| x.reason == r).count() as u64,
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// `None` unless every frame is labelled.
    pub fn label_scores(&self) -> Option<LabelScores> {
        scores(self.records.iter())
    }

    /// With labels per cavity: each cavity's scores, in number order.
    pub fn cavity_scores(&self) -> Vec<CavityScores> {
        let mut numbers: Vec<u16> = self.records.iter().filter_map(|r| r.cavity).collect();
        numbers.sort_unstable();
        numbers.dedup();
        numbers
            .into_iter()
            .filter_map(|n| {
                let of = || self.records.iter().filter(move |r| r.cavity == Some(n));
                let count = |defect: bool| of().filter(|r| r.defect == Some(defect)).count() as u64;
                Some(CavityScores {
                    cavity: n,
                    scores: scores(of())?,
                    defects: count(true),
                    goods: count(false),
                })
            })
            .collect()
    }
    /// `None` for the reference itself.
    pub fn reference_scores(&self) -> Option<ReferenceScores> {
        let comparisons: Vec<ReferenceComparison> = self
            .records
            .iter()
            .map(|r| r.reference)
            .collect::<Option<_>>()?;
        if comparisons.is_empty() {
            return None;
        }
        let mut diffs: Vec<f64> = self
            .records
            .iter()
            .filter_map(FrameRecord::prob_diff)
            .collect();
        diffs.sort_by(f64::total_cmp);
        Some(ReferenceScores {
            verdict_flips: self.records.iter().filter(|r| r.flipped()).count() as u64,
            mask_iou_mean: comparisons.iter().map(|c| c.mask_iou).sum::<f64>()
                / comparisons.len() as f64,
            mask_iou_worst: comparisons
                .iter()
                .map(|c| c.mask_iou)
                .fold(f64::INFINITY, f64::min),
            max_abs_logit_diff: comparisons
                .iter()
                .map(|c| c.max_abs_logit_diff)
                .fold(0.0, f64::max),
            defect_prob_diff_p99: percentile_of_sorted(&diffs, 0.99),
        })
    }

    /// Seal IoU with the ground truth over all masked frames (sum of
    /// intersections over sum of unions, as the model card reports it).
    pub fn truth_iou(&self) -> Option<f64> {
        (self.truth_union > 0).then(|| ratio(self.truth_intersection, self.truth_union))
    }

    /// p50, p95, p99 of one stage (0 preprocess, 1 segment, 2 classify), ms.
    pub fn latency(&self, stage: usize) -> [Option<f64>; 3] {
        [0.5, 0.95, 0.99].map(|q| self.latency[stage].quantile(q))
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

/// (intersection, union) of two 0/1 masks.
fn overlap(a: &[f32], b: &[f32], threshold: f32) -> (u64, u64) {
    a.iter().zip(b).fold((0, 0), |(i, u), (&x, &y)| {
        let (x, y) = (x >= threshold, y >= threshold);
        (i + u64::from(x && y), u + u64::from(x || y))
    })
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(
            0.0,
            |m, d| if d.is_nan() { f64::INFINITY } else { m.max(d) },
        )
}

/// Ground-truth masks at the segmentation size: the file (any size, white =
/// seal) resized bilinearly with half-pixel centres and thresholded at 0.5,
/// as `scripts/demo/contract.py` (`gt_mask_640`) does for the model card.
pub struct GroundTruth {
    seg_hw: (usize, usize),
    slot: FrameSlot,
    plane: Vec<f32>,
    mask: Vec<f32>,
}

impl GroundTruth {
    pub fn new(seg_hw: (usize, usize)) -> Self {
        GroundTruth {
            seg_hw,
            slot: FrameSlot::with_capacity(0),
            plane: Vec::new(),
            mask: vec![0.0; seg_hw.0 * seg_hw.1],
        }
    }

    /// The mask of `path`, or `None` (logged) when it cannot be read.
    pub fn load(&mut self, path: &Path) -> Option<&[f32]> {
        if let Err(e) = crate::capture::decode_image_file(path, &mut self.slot) {
            log::warn!(target: "sealcheck::evaluate", mask:% = path.display(), error:% = e; "ground-truth mask cannot be read; that frame has no IoU");
            return None;
        }
        let image = self.slot.image();
        let bpp = image.layout.bytes_per_pixel();
        self.plane.clear();
        for y in 0..image.height {
            let row = &image.data[y * image.stride..][..image.width * bpp];
            self.plane
                .extend(row.chunks_exact(bpp).map(|px| f32::from(px[0]) / 255.0));
        }
        MaskResampler::new((image.height, image.width), self.seg_hw).resize_into(
            &self.plane,
            MaskAffine::new(0.0, 1.0),
            &mut self.mask,
        );
        for m in &mut self.mask {
            *m = f32::from(u8::from(*m >= 0.5));
        }
        Some(&self.mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_and_empty_masks_agree() {
        assert_eq!(
            overlap(&[1.0, 1.0, 0.0, 0.0], &[1.0, 0.0, 1.0, 0.0], 0.5),
            (1, 3)
        );
        assert_eq!(ratio(0, 0), 1.0);
    }

    #[test]
    fn a_nan_logit_is_an_infinite_difference() {
        assert_eq!(max_abs_diff(&[f32::NAN], &[0.0]), f64::INFINITY);
        assert_eq!(max_abs_diff(&[1.0, -2.0], &[1.5, 1.0]), 3.0);
    }
}
