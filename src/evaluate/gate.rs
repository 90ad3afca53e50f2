//! The rules a candidate must keep to go on the line (`--gate`), each with
//! its name, so a refusal says which one broke. Limits come from `[evaluate]`.
//!
//! Most rules compare the candidate with the reference, which proves nothing
//! when the reference runs the same wrong models (new models named in the
//! config run in both). So every engine, the reference included, is also held
//! to floors against the labels; a reference below one fails the gate too,
//! saying that it is the reference's models that are wrong.

use crate::config::EvaluateConfig;

use super::tally::EngineTally;
use super::tally::LabelScores;

#[derive(Debug, Clone, PartialEq)]
pub struct RuleOutcome {
    /// Stable name, for scripts and the log: `candidate_ran`, the floors
    /// `min_accuracy`, `min_defect_recall`, `max_false_reject_rate`,
    /// `recall_not_below_reference`, `label_errors_not_above_reference`,
    /// `mean_mask_iou`.
    pub rule: &'static str,
    pub passed: bool,
    /// Without labels the label rules cannot be judged, and a floor set to
    /// its off value is not; they are listed as skipped (and pass) rather
    /// than left out.
    pub skipped: bool,
    pub detail: String,
}

/// The gate's verdict on one candidate (`None`: it could not run): the
/// floors, then the rules against the reference.
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
    let mut out = floors(limits, candidate, labelled, Role::Candidate);
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

/// The gate's verdict on the reference: the floors alone.
pub fn reference_rules(
    limits: &EvaluateConfig,
    reference: &EngineTally,
    labelled: bool,
) -> Vec<RuleOutcome> {
    floors(limits, reference, labelled, Role::Reference)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Reference,
    Candidate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    AtLeast,
    AtMost,
}

/// One floor against the labels.
struct Floor {
    rule: &'static str,
    what: &'static str,
    bound: Bound,
    limit: f64,
    score: fn(&LabelScores) -> f64,
}

impl Floor {
    /// At `0` (`min_`) or `1` (`max_`) no engine can be outside the floor,
    /// so it is reported as off rather than as a pass that means nothing.
    fn off(&self) -> bool {
        match self.bound {
            Bound::AtLeast => self.limit <= 0.0,
            Bound::AtMost => self.limit >= 1.0,
        }
    }

    fn holds(&self, value: f64) -> bool {
        // The scores are ratios of counts: a value equal to the limit may
        // come out a rounding step off it.
        match self.bound {
            Bound::AtLeast => value + 1e-12 >= self.limit,
            Bound::AtMost => value <= self.limit + 1e-12,
        }
    }
}

fn floors(
    limits: &EvaluateConfig,
    tally: &EngineTally,
    labelled: bool,
    role: Role,
) -> Vec<RuleOutcome> {
    let floors = [
        Floor {
            rule: "min_accuracy",
            what: "accuracy",
            bound: Bound::AtLeast,
            limit: limits.min_accuracy,
            score: |s| s.accuracy,
        },
        Floor {
            rule: "min_defect_recall",
            what: "defect recall",
            bound: Bound::AtLeast,
            limit: limits.min_defect_recall,
            score: |s| s.defect_recall,
        },
        Floor {
            rule: "max_false_reject_rate",
            what: "false reject rate",
            bound: Bound::AtMost,
            limit: limits.max_false_reject_rate,
            score: |s| s.false_reject_rate,
        },
    ];
    let scores = if labelled { tally.label_scores() } else { None };
    floors
        .iter()
        .map(|floor| {
            let skip = |detail: String| RuleOutcome {
                rule: floor.rule,
                passed: true,
                skipped: true,
                detail,
            };
            if floor.off() {
                return skip(format!("off ([evaluate] {} = {})", floor.rule, floor.limit));
            }
            let Some(scores) = scores else {
                return skip(
                    "skipped: the frames have no labels (--labels or labels.jsonl)".into(),
                );
            };
            let value = (floor.score)(&scores);
            let passed = floor.holds(value);
            let (limit_is, outside) = match floor.bound {
                Bound::AtLeast => ("at least", "below this floor"),
                Bound::AtMost => ("at most", "above this limit"),
            };
            let measured = format!(
                "{} {value:.4} against the labels ({limit_is} {})",
                floor.what, floor.limit
            );
            let detail = match role {
                Role::Reference if !passed => format!(
                    "the reference itself is {outside}: {measured}; the models it runs \
                     (those the config names, unless --reference names others) are wrong, \
                     not only the candidate's"
                ),
                _ => measured,
            };
            RuleOutcome {
                rule: floor.rule,
                passed,
                skipped: false,
                detail,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Reason, Verdict};
    use crate::evaluate::FrameRecord;
    use crate::evaluate::tally::ReferenceComparison;

    /// `[evaluate]`'s defaults.
    const LIMITS: EvaluateConfig = EvaluateConfig {
        min_mean_mask_iou: 0.98,
        recall_tolerance: 0.0,
        extra_label_errors: 0,
        min_accuracy: 0.95,
        min_defect_recall: 0.95,
        max_false_reject_rate: 0.05,
    };

    /// Twenty labelled frames, every fifth a defect, judged right or, with
    /// `swapped`, each verdict inverted (a classifier with its classes
    /// swapped); `vs_reference` adds a perfect agreement with the reference.
    fn tally(swapped: bool, labelled: bool, vs_reference: bool) -> EngineTally {
        let mut t = EngineTally::new();
        for frame in 0..20u64 {
            let defect = frame % 5 == 0;
            let fail = defect != swapped;
            let verdict = if fail { Verdict::Fail } else { Verdict::Pass };
            t.records.push(FrameRecord {
                frame,
                image: format!("frame_{frame:05}.jpg"),
                defect: labelled.then_some(defect),
                kind: None,
                cavity: None,
                verdict,
                reason: if fail { Reason::Defect } else { Reason::Ok },
                defect_prob: Some(if fail { 0.9 } else { 0.1 }),
                seal_area: Some(0.05),
                error: None,
                latency_ms: [1.0; 3],
                reference: vs_reference.then_some(ReferenceComparison {
                    verdict,
                    defect_prob: Some(if fail { 0.9 } else { 0.1 }),
                    mask_iou: 1.0,
                    max_abs_logit_diff: 0.0,
                }),
                truth_iou: None,
            });
        }
        t
    }

    fn rule<'a>(rules: &'a [RuleOutcome], name: &str) -> &'a RuleOutcome {
        rules
            .iter()
            .find(|r| r.rule == name)
            .unwrap_or_else(|| panic!("no rule {name} in {rules:#?}"))
    }

    #[test]
    fn a_reference_below_a_floor_fails_saying_the_reference_itself_is_the_problem() {
        let rules = reference_rules(&LIMITS, &tally(true, true, false), true);
        for (name, says) in [
            ("min_accuracy", "the reference itself is below this floor"),
            (
                "min_defect_recall",
                "the reference itself is below this floor",
            ),
            (
                "max_false_reject_rate",
                "the reference itself is above this limit",
            ),
        ] {
            let r = rule(&rules, name);
            assert!(!r.passed && !r.skipped, "{r:?}");
            assert!(r.detail.contains(says), "{r:?}");
        }
        assert!(
            rule(&rules, "min_accuracy")
                .detail
                .contains("accuracy 0.0000 against the labels (at least 0.95)"),
            "{rules:#?}"
        );
        let good = reference_rules(&LIMITS, &tally(false, true, false), true);
        assert!(good.iter().all(|r| r.passed && !r.skipped), "{good:#?}");
    }

    /// The blind spot this floor closes: the candidate agrees with the
    /// reference on every frame, and both are wrong on most.
    #[test]
    fn a_candidate_below_a_floor_fails_even_when_it_matches_the_reference() {
        let reference = tally(true, true, false);
        let candidate = tally(true, true, true);
        let rules = rules(&LIMITS, &reference, Some(&candidate), true);
        for name in [
            "recall_not_below_reference",
            "label_errors_not_above_reference",
            "mean_mask_iou",
        ] {
            assert!(rule(&rules, name).passed, "{rules:#?}");
        }
        for name in ["min_accuracy", "min_defect_recall", "max_false_reject_rate"] {
            let r = rule(&rules, name);
            assert!(!r.passed && !r.skipped, "{r:?}");
            assert!(!r.detail.contains("reference itself"), "{r:?}");
        }
        let good = tally(false, true, true);
        let rules = super::rules(&LIMITS, &tally(false, true, false), Some(&good), true);
        assert!(rules.iter().all(|r| r.passed), "{rules:#?}");
    }

    #[test]
    fn floors_at_their_off_values_and_without_labels_are_skipped() {
        let off = EvaluateConfig {
            min_accuracy: 0.0,
            min_defect_recall: 0.0,
            max_false_reject_rate: 1.0,
            ..LIMITS
        };
        let swapped = tally(true, true, false);
        for r in reference_rules(&off, &swapped, true) {
            assert!(r.passed && r.skipped, "{r:?}");
            assert!(r.detail.starts_with("off ([evaluate]"), "{r:?}");
        }
        // One floor off leaves the others on.
        let accuracy_off = EvaluateConfig {
            min_accuracy: 0.0,
            ..LIMITS
        };
        let rules = reference_rules(&accuracy_off, &swapped, true);
        assert!(rule(&rules, "min_accuracy").skipped);
        assert!(!rule(&rules, "min_defect_recall").passed);

        let unlabelled = tally(true, false, false);
        for r in reference_rules(&LIMITS, &unlabelled, false) {
            assert!(r.passed && r.skipped, "{r:?}");
            assert!(r.detail.contains("no labels"), "{r:?}");
        }
    }

    #[test]
    fn a_score_exactly_at_the_floor_passes() {
        // 19 of 20 right: accuracy 0.95, the default floor.
        let mut t = tally(false, true, false);
        t.records[1].verdict = Verdict::Fail;
        let rules = reference_rules(&LIMITS, &t, true);
        let accuracy = rule(&rules, "min_accuracy");
        assert!(accuracy.passed, "{accuracy:?}");
        // 1 of 16 good seals rejected: 0.0625, above 0.05.
        assert!(!rule(&rules, "max_false_reject_rate").passed);
    }
}
