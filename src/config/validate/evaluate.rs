//! `[evaluate]`: what `sealcheck evaluate --gate` holds a candidate to.

use crate::config::raw::Section;
use crate::config::types::EvaluateConfig;

/// `[evaluate]`: the rules `sealcheck evaluate --gate` holds a candidate to,
/// and the floors against the labels it holds every engine to.
pub(super) fn read_evaluate(s: &Section) -> Option<EvaluateConfig> {
    let min_mean_mask_iou = s.float_in("min_mean_mask_iou", 0.0..=1.0, Some(0.98));
    let recall_tolerance = s.float_in("recall_tolerance", 0.0..=1.0, Some(0.0));
    let extra_label_errors = s.int_in("extra_label_errors", 0..=1_000_000, Some(0));
    // The demo models score 0.997 / 0.992 / 0 on the demo clip: room enough
    // for a model that is right, none for one with its classes swapped.
    let min_accuracy = s.float_in("min_accuracy", 0.0..=1.0, Some(0.95));
    let min_defect_recall = s.float_in("min_defect_recall", 0.0..=1.0, Some(0.95));
    let max_false_reject_rate = s.float_in("max_false_reject_rate", 0.0..=1.0, Some(0.05));
    s.finish();
    Some(EvaluateConfig {
        min_mean_mask_iou: min_mean_mask_iou?,
        recall_tolerance: recall_tolerance?,
        extra_label_errors: extra_label_errors? as u64,
        min_accuracy: min_accuracy?,
        min_defect_recall: min_defect_recall?,
        max_false_reject_rate: max_false_reject_rate?,
    })
}
