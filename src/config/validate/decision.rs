//! `[decision]` and a camera's `decision` sub-table: the thresholds an
//! operator tunes and the per-part deadline.

use std::time::Duration;

use crate::config::raw::Section;
use crate::config::types::DecisionConfig;

/// `[decision]`, or a camera's `decision` sub-table over `base` (the
/// station's `[decision]`): a key left out takes `base`'s value.
pub(super) fn read_decision(s: &Section, base: Option<&DecisionConfig>) -> Option<DecisionConfig> {
    let base = base.copied().unwrap_or(DecisionConfig::DEFAULT);
    let defect_threshold = s.float_in("defect_threshold", 0.0..=1.0, Some(base.defect_threshold));
    let no_seal_below = s.float_in("no_seal_below", 0.0..=1.0, Some(base.no_seal_below));
    let min_seal_area = s.float_in("min_seal_area", 0.0..=1.0, Some(base.min_seal_area));
    let max_seal_area = s.float_in("max_seal_area", 0.0..=1.0, Some(base.max_seal_area));
    let base_deadline = base.deadline.map_or(0, |d| d.as_millis() as i64);
    let deadline_ms = s.int_in("deadline_ms", 0..=60_000, Some(base_deadline));
    s.finish();
    let d = DecisionConfig {
        defect_threshold: defect_threshold?,
        no_seal_below: no_seal_below?,
        min_seal_area: min_seal_area?,
        max_seal_area: max_seal_area?,
        deadline: match deadline_ms? {
            0 => None,
            ms => Some(Duration::from_millis(ms as u64)),
        },
    };
    if let Some((key, problem)) = bounds_problem(&d) {
        s.problem(key, problem);
        return None;
    }
    Some(d)
}

/// The rule between a decision's area bounds, broken: the key to name and
/// what is wrong (`[decision]`, a camera's, a recipe's over a camera's).
pub(super) fn bounds_problem(d: &DecisionConfig) -> Option<(&'static str, String)> {
    if d.no_seal_below > d.min_seal_area {
        return Some((
            "no_seal_below",
            format!(
                "({}) must not exceed min_seal_area ({})",
                d.no_seal_below, d.min_seal_area
            ),
        ));
    }
    if d.min_seal_area >= d.max_seal_area {
        return Some((
            "min_seal_area",
            format!(
                "({}) must be below max_seal_area ({})",
                d.min_seal_area, d.max_seal_area
            ),
        ));
    }
    None
}
