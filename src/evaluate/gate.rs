//! The rules a candidate must keep to go on the line (`--gate`), each with
//! its name, so a refusal says which one broke. Limits come from `[evaluate]`.

use crate::config::EvaluateConfig;

use super::EngineTally;

#[derive(Debug, Clone, PartialEq)]
pub struct RuleOutcome {
    /// Stable name, for scripts and the log: `candidate_ran`,
    /// `recall_not_below_reference`, `label_errors_not_above_reference`,
    /// `mean_mask_iou`.
    pub rule: &'static str,
    pub passed: bool,
    /// Without labels the label rules cannot be judged; they are listed as
    /// skipped (and pass) rather than left out.
    pub skipped: bool,
    pub detail: String,
}

/// The gate's verdict on one candidate (`None`: it could not run).
pub fn rules(
    limits: &EvaluateConfig,
    reference: &EngineTally,
    candidate: Option<&EngineTally>,
    labelled: bool,
) -> Vec<RuleOutcome> {
    let Some(candidate) = candidate else {
        return vec![RuleOutcome {
            rule: "candidate_ran",
            passed: false,
            skipped: false,
            detail: "the candidate could not run, so it cannot go on the line".into(),
        }];
    };
    let mut out = Vec::new();
    match (labelled, reference.label_scores(), candidate.label_scores()) {
        (true, Some(r), Some(c)) => {
            out.push(RuleOutcome {
                rule: "recall_not_below_reference",
                passed: c.defect_recall + 1e-12 >= r.defect_recall - limits.recall_tolerance,
                skipped: false,
                detail: format!(
                    "defect recall {:.4} vs reference {:.4} (tolerance {})",
                    c.defect_recall, r.defect_recall, limits.recall_tolerance
                ),
            });
            out.push(RuleOutcome {
                rule: "label_errors_not_above_reference",
                passed: c.wrong <= r.wrong + limits.extra_label_errors,
                skipped: false,
                detail: format!(
                    "{} verdicts against the labels vs reference {} (extra allowed {})",
                    c.wrong, r.wrong, limits.extra_label_errors
                ),
            });
        }
        _ => {
            for rule in [
                "recall_not_below_reference",
                "label_errors_not_above_reference",
            ] {
                out.push(RuleOutcome {
                    rule,
                    passed: true,
                    skipped: true,
                    detail: "skipped: the frames have no labels (--labels or labels.jsonl)".into(),
                });
            }
        }
    }
    let iou = candidate.reference_scores().map(|s| s.mask_iou_mean);
    out.push(RuleOutcome {
        rule: "mean_mask_iou",
        passed: iou.is_some_and(|m| m >= limits.min_mean_mask_iou),
        skipped: false,
        detail: match iou {
            Some(m) => format!(
                "mean mask IoU with the reference {m:.4} (at least {})",
                limits.min_mean_mask_iou
            ),
            None => "no frame was compared with the reference".into(),
        },
    });
    out
}
