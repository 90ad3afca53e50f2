//! One machine cycle's cavities as judged (`CycleVerdicts`): what a result
//! line, the line's outputs (MQTT, the PLC's registers), the taps and the
//! archive get beside the cycle's overall decision when a camera has a
//! cavity layout (`config::CavityLayout`).
//!
//! The cycle's own decision (`CycleVerdicts::overall`) is its decisive
//! cavity's: the first cavity that failed (lowest number), else the one
//! the classifier found most likely defective. So the cycle fails when any
//! judged cavity fails, with that cavity's reason, probability and area.
//! A cycle no model judged (`not_inspected`, `error`, `late`, `no_frame`,
//! `overrun`) fails every judged cavity with its reason: what was not
//! inspected is never passed.

use serde::ser::{Serialize, SerializeSeq, SerializeStruct, Serializer};

use crate::config::CavityLayout;
use crate::decision::{Decision, Reason, Verdict};
use crate::json_line;

/// One judged cavity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CavityVerdict {
    /// Its number in the layout, from 1.
    pub cavity: u16,
    pub decision: Decision,
}

/// A cycle's judged cavities, in number order; disabled ones are absent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CycleVerdicts {
    cavities: Vec<CavityVerdict>,
    /// Cavities of the layout, disabled ones included (Modbus register 16).
    count: u16,
}

impl CycleVerdicts {
    /// Empty, with room for `cavities` verdicts (no allocation while a
    /// cycle of up to that many is filled).
    pub fn with_capacity(cavities: usize) -> CycleVerdicts {
        CycleVerdicts {
            cavities: Vec::with_capacity(cavities),
            count: 0,
        }
    }

    /// Starts a cycle of `layout` (clears the last one, keeps the room).
    pub fn start(&mut self, layout: &CavityLayout) {
        self.cavities.clear();
        self.count = layout.count();
    }

    pub fn push(&mut self, cavity: u16, decision: Decision) {
        self.cavities.push(CavityVerdict { cavity, decision });
    }

    /// Every judged cavity of `layout` failed with `reason` (a cycle no
    /// model judged).
    pub fn fill_failed(&mut self, layout: &CavityLayout, reason: Reason) {
        self.start(layout);
        for cavity in layout.enabled() {
            self.push(cavity, Decision::failed(reason));
        }
    }

    /// The same cavities, each failed with `reason` (what the line gets
    /// instead of this cycle when it missed its deadline).
    pub fn all_failed(&self, reason: Reason) -> CycleVerdicts {
        CycleVerdicts {
            cavities: self
                .cavities
                .iter()
                .map(|c| CavityVerdict {
                    cavity: c.cavity,
                    decision: Decision::failed(reason),
                })
                .collect(),
            count: self.count,
        }
    }

    pub fn cavities(&self) -> &[CavityVerdict] {
        &self.cavities
    }

    /// Cavities of the layout, disabled ones included.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Bit `n - 1` set for each failed cavity `n`.
    pub fn reject_mask(&self) -> u64 {
        self.rejects().fold(0, |mask, n| mask | 1u64 << (n - 1))
    }

    /// The failed cavities' numbers, in order.
    pub fn rejects(&self) -> impl Iterator<Item = u16> + '_ {
        self.cavities
            .iter()
            .filter(|c| c.decision.verdict == Verdict::Fail)
            .map(|c| c.cavity)
    }

    /// The cycle's decision: its decisive cavity's (the module doc says
    /// which); `error` for a cycle without a judged cavity, which a layout
    /// never makes.
    pub fn overall(&self) -> Decision {
        let decisive = self
            .cavities
            .iter()
            .find(|c| c.decision.verdict == Verdict::Fail)
            .or_else(|| {
                self.cavities.iter().max_by(|a, b| {
                    let p = |c: &CavityVerdict| c.decision.defect_prob.unwrap_or(f64::NEG_INFINITY);
                    p(a).total_cmp(&p(b))
                })
            });
        decisive.map_or_else(Decision::error, |c| c.decision)
    }

    /// The keys a result line and an MQTT message add for a cycle,
    /// flattened into either (`#[serde(flatten)]`).
    pub fn json(&self) -> JsonCycle<'_> {
        JsonCycle {
            cavities: JsonCavities(self),
            reject: JsonRejects(self),
            reject_mask: self.reject_mask(),
        }
    }
}

/// `"cavities": [...], "reject": [...], "reject_mask": n`, in that order.
#[derive(serde::Serialize)]
pub struct JsonCycle<'a> {
    /// Each judged cavity, in number order.
    cavities: JsonCavities<'a>,
    /// The failed cavities' numbers.
    reject: JsonRejects<'a>,
    /// Bit `n - 1` set for each failed cavity `n`.
    reject_mask: u64,
}

/// `[{"cavity": 1, "verdict": "pass", "reason": "ok", "defect_prob": 0.02,
/// "seal_area": 0.21}, ...]`, numbers with the line's fixed decimals.
pub struct JsonCavities<'a>(&'a CycleVerdicts);

impl Serialize for JsonCavities<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.cavities.len()))?;
        for c in &self.0.cavities {
            seq.serialize_element(&JsonCavity(c))?;
        }
        seq.end()
    }
}

struct JsonCavity<'a>(&'a CavityVerdict);

struct SixDecimals(Option<f64>);

impl Serialize for SixDecimals {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        json_line::six_decimals(&self.0, serializer)
    }
}

impl Serialize for JsonCavity<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let d = &self.0.decision;
        let mut s = serializer.serialize_struct("Cavity", 5)?;
        s.serialize_field("cavity", &self.0.cavity)?;
        s.serialize_field("verdict", d.verdict.as_str())?;
        s.serialize_field("reason", d.reason.as_str())?;
        s.serialize_field("defect_prob", &SixDecimals(d.defect_prob))?;
        s.serialize_field("seal_area", &SixDecimals(d.seal_area))?;
        s.end()
    }
}

/// `[2, 5]`: the failed cavities.
pub struct JsonRejects<'a>(&'a CycleVerdicts);

impl Serialize for JsonRejects<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.rejects())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(cavities: u32, disabled: &[u16]) -> CavityLayout {
        CavityLayout::in_a_row(cavities, disabled)
    }

    fn judged(reason: Reason, defect_prob: f64) -> Decision {
        Decision {
            verdict: reason.verdict(),
            reason,
            defect_prob: Some(defect_prob),
            seal_area: Some(0.1),
        }
    }

    #[test]
    fn the_cycle_fails_with_its_first_failed_cavity_and_maps_every_reject() {
        let mut cycle = CycleVerdicts::with_capacity(6);
        cycle.start(&layout(6, &[4]));
        for (n, reason, p) in [
            (1, Reason::Ok, 0.1),
            (2, Reason::Defect, 0.7),
            (3, Reason::Ok, 0.2),
            (5, Reason::Defect, 0.9),
            (6, Reason::Ok, 0.3),
        ] {
            cycle.push(n, judged(reason, p));
        }
        assert_eq!(cycle.count(), 6);
        assert_eq!(cycle.rejects().collect::<Vec<_>>(), [2, 5]);
        assert_eq!(cycle.reject_mask(), 0b1_0010);
        let overall = cycle.overall();
        assert_eq!(
            (overall.verdict, overall.reason),
            (Verdict::Fail, Reason::Defect)
        );
        assert_eq!(
            overall.defect_prob,
            Some(0.7),
            "cavity 2 decides: the first to fail"
        );
        let json = serde_json::to_value(cycle.json()).unwrap();
        let cavities = &json["cavities"];
        assert_eq!(cavities.as_array().unwrap().len(), 5);
        assert_eq!(cavities[1]["cavity"], 2);
        assert_eq!(cavities[1]["verdict"], "fail");
        assert_eq!(cavities[1]["reason"], "defect");
        assert_eq!(json["reject"], serde_json::json!([2, 5]));
        assert_eq!(json["reject_mask"], 18);
    }

    #[test]
    fn a_cycle_that_passes_names_its_most_likely_defective_cavity() {
        let mut cycle = CycleVerdicts::with_capacity(3);
        cycle.start(&layout(3, &[]));
        cycle.push(1, judged(Reason::Ok, 0.1));
        cycle.push(2, judged(Reason::Ok, 0.4));
        cycle.push(3, judged(Reason::Ok, 0.2));
        let overall = cycle.overall();
        assert_eq!(
            (overall.verdict, overall.defect_prob),
            (Verdict::Pass, Some(0.4))
        );
        assert_eq!(cycle.reject_mask(), 0);
        assert_eq!(
            serde_json::to_value(cycle.json()).unwrap()["reject"],
            serde_json::json!([])
        );
    }

    #[test]
    fn a_cycle_no_model_judged_fails_every_judged_cavity_and_never_passes() {
        let mut cycle = CycleVerdicts::default();
        cycle.fill_failed(&layout(64, &[3]), Reason::NotInspected);
        assert_eq!(cycle.cavities().len(), 63);
        assert_eq!(cycle.reject_mask(), !0b100);
        assert_eq!(cycle.overall().reason, Reason::NotInspected);
        let late = cycle.all_failed(Reason::Late);
        assert!(
            late.cavities()
                .iter()
                .all(|c| c.decision.reason == Reason::Late)
        );
        assert_eq!(late.reject_mask(), cycle.reject_mask());
        assert_eq!(CycleVerdicts::default().overall().reason, Reason::Error);
    }
}
