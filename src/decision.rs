//! The verdict for one seal. Fail-safe: anything not inspected, or inspected
//! with a failure anywhere in its path, fails.

use crate::config::DecisionConfig;
use crate::frame::FrameWork;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
        }
    }
}

/// Why a verdict was reached; the codes operators see in results and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Ok,
    Defect,
    NoSeal,
    SealArea,
    NotInspected,
    Error,
    /// No verdict by the part's deadline (`[decision] deadline_ms`): the line got a fail.
    Late,
    /// A trigger (`[trigger] mode = "plc"`) got no frame within `frame_wait_ms`.
    NoFrame,
    /// A trigger came when the frame it would claim was claimed already.
    Overrun,
}

/// The OPC UA machinery result terms (OPC 40001-101, `ResultEvaluation`), for the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evaluation {
    /// The part was judged and is good.
    Ok,
    /// The part was judged and is bad.
    NotOk,
    /// The part could not be judged (not inspected, an error, late): fails safe.
    NotDecidable,
}

impl Evaluation {
    pub fn as_str(self) -> &'static str {
        match self {
            Evaluation::Ok => "OK",
            Evaluation::NotOk => "NotOK",
            Evaluation::NotDecidable => "NotDecidable",
        }
    }
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Ok => "ok",
            Reason::Defect => "defect",
            Reason::NoSeal => "no_seal",
            Reason::SealArea => "seal_area",
            Reason::NotInspected => "not_inspected",
            Reason::Error => "error",
            Reason::Late => "late",
            Reason::NoFrame => "no_frame",
            Reason::Overrun => "overrun",
        }
    }

    /// The reason's number where a PLC reads it (Modbus `ReasonCode`,
    /// docs/INTEGRATION.md): a contract, never renumbered.
    pub fn code(self) -> u16 {
        match self {
            Reason::Ok => 0,
            Reason::Defect => 1,
            Reason::NoSeal => 2,
            Reason::SealArea => 3,
            Reason::NotInspected => 4,
            Reason::Error => 5,
            Reason::Late => 6,
            Reason::NoFrame => 7,
            Reason::Overrun => 8,
        }
    }

    /// The verdict a result of this reason carries: only `Ok` passes.
    pub fn verdict(self) -> Verdict {
        match self {
            Reason::Ok => Verdict::Pass,
            _ => Verdict::Fail,
        }
    }

    /// What the reason means to a machine that only knows OPC UA's result terms.
    pub fn evaluation(self) -> Evaluation {
        match self {
            Reason::Ok => Evaluation::Ok,
            Reason::Defect | Reason::NoSeal | Reason::SealArea => Evaluation::NotOk,
            Reason::NotInspected
            | Reason::Error
            | Reason::Late
            | Reason::NoFrame
            | Reason::Overrun => Evaluation::NotDecidable,
        }
    }

    pub const ALL: [Reason; 9] = [
        Reason::Ok,
        Reason::Defect,
        Reason::NoSeal,
        Reason::SealArea,
        Reason::NotInspected,
        Reason::Error,
        Reason::Late,
        Reason::NoFrame,
        Reason::Overrun,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    pub reason: Reason,
    /// Softmax probability of the defect class; `None` when the classifier did not run.
    pub defect_prob: Option<f64>,
    /// Fraction of the segmentation mask covered by the seal; `None` when not segmented.
    pub seal_area: Option<f64>,
}

impl Decision {
    pub fn not_inspected() -> Self {
        Decision {
            verdict: Verdict::Fail,
            reason: Reason::NotInspected,
            defect_prob: None,
            seal_area: None,
        }
    }

    pub fn error() -> Self {
        Decision {
            verdict: Verdict::Fail,
            reason: Reason::Error,
            defect_prob: None,
            seal_area: None,
        }
    }

    /// What the line gets for a part whose verdict missed its deadline.
    pub fn late() -> Self {
        Decision::failed(Reason::Late)
    }

    /// A fail of `reason` for a part no model judged (`not_inspected`,
    /// `error`, `late`, `no_frame`, `overrun`).
    pub fn failed(reason: Reason) -> Self {
        Decision {
            verdict: Verdict::Fail,
            reason,
            defect_prob: None,
            seal_area: None,
        }
    }
}

/// Softmax of `logits` at `class`, computed stably in f64. `None` if the class
/// is out of range or any logit is not finite.
pub fn class_probability(logits: &[f32], class: usize) -> Option<f64> {
    if class >= logits.len() || logits.iter().any(|l| !l.is_finite()) {
        return None;
    }
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &l| m.max(l as f64));
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    Some((logits[class] as f64 - max).exp() / sum)
}

/// Decides one inspected frame. Area is checked before the classifier: a seal
/// that is missing or the wrong size fails for that reason whatever the
/// classifier says.
pub fn decide(work: &FrameWork, defect_class: usize, thresholds: &DecisionConfig) -> Decision {
    if work.error.is_some() {
        return Decision::error();
    }
    let area = work.seal_area();
    let Some(prob) = class_probability(&work.cls_logits, defect_class) else {
        return Decision {
            seal_area: Some(area),
            ..Decision::error()
        };
    };
    let (verdict, reason) = if area < thresholds.no_seal_below {
        (Verdict::Fail, Reason::NoSeal)
    } else if area < thresholds.min_seal_area || area > thresholds.max_seal_area {
        (Verdict::Fail, Reason::SealArea)
    } else if prob >= thresholds.defect_threshold {
        (Verdict::Fail, Reason::Defect)
    } else {
        (Verdict::Pass, Reason::Ok)
    };
    Decision {
        verdict,
        reason,
        defect_prob: Some(prob),
        seal_area: Some(area),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FailedStage, TensorGeometry};

    fn thresholds() -> DecisionConfig {
        DecisionConfig {
            defect_threshold: 0.5,
            no_seal_below: 0.005,
            min_seal_area: 0.02,
            max_seal_area: 0.5,
            deadline: None,
        }
    }

    fn work(area_pixels: u64, logits: [f32; 2]) -> FrameWork {
        let g = TensorGeometry {
            seg_hw: (10, 10),
            seg_classes: 2,
            cls_hw: (2, 2),
            cls_classes: 2,
        };
        let mut w = FrameWork::new(&g);
        w.mask_pixels = area_pixels;
        w.cls_logits.copy_from_slice(&logits);
        w
    }

    #[test]
    fn good_seal_passes() {
        let d = decide(&work(20, [3.0, -3.0]), 1, &thresholds());
        assert_eq!((d.verdict, d.reason), (Verdict::Pass, Reason::Ok));
        assert!(d.defect_prob.unwrap() < 0.01);
    }

    #[test]
    fn defect_probability_at_threshold_fails() {
        let d = decide(&work(20, [0.0, 0.0]), 1, &thresholds());
        assert_eq!((d.verdict, d.reason), (Verdict::Fail, Reason::Defect));
    }

    #[test]
    fn empty_mask_is_no_seal_even_if_classifier_says_good() {
        let d = decide(&work(0, [5.0, -5.0]), 1, &thresholds());
        assert_eq!(d.reason, Reason::NoSeal);
    }

    #[test]
    fn area_out_of_bounds_is_seal_area() {
        assert_eq!(
            decide(&work(1, [5.0, -5.0]), 1, &thresholds()).reason,
            Reason::SealArea
        );
        assert_eq!(
            decide(&work(60, [5.0, -5.0]), 1, &thresholds()).reason,
            Reason::SealArea
        );
    }

    #[test]
    fn any_stage_error_fails_safe() {
        let mut w = work(20, [5.0, -5.0]);
        w.error = Some((FailedStage::Segment, "engine failed".into()));
        assert_eq!(decide(&w, 1, &thresholds()), Decision::error());
    }

    #[test]
    fn non_finite_logits_fail_safe() {
        let d = decide(&work(20, [f32::NAN, 0.0]), 1, &thresholds());
        assert_eq!((d.verdict, d.reason), (Verdict::Fail, Reason::Error));
    }

    #[test]
    fn every_fail_reason_maps_to_a_failing_evaluation() {
        for reason in Reason::ALL {
            let e = reason.evaluation();
            assert_eq!(e == Evaluation::Ok, reason == Reason::Ok, "{reason:?}");
        }
        assert_eq!(Reason::Late.evaluation().as_str(), "NotDecidable");
        assert_eq!(Reason::Defect.evaluation().as_str(), "NotOK");
    }

    #[test]
    fn softmax_is_stable_for_large_logits() {
        let p = class_probability(&[1000.0, 1001.0], 1).unwrap();
        assert!((p - 0.7310585786).abs() < 1e-9);
    }
}
