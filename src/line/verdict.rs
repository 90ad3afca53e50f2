//! What the line gets for one part (`LineVerdict`) and what takes it
//! (`LineOutput`: the MQTT publisher, later a GPIO reject pulse).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::part_deadline::PartDeadline;
use crate::cycle::CycleVerdicts;
use crate::decision::Decision;
use crate::frame::Part;
use crate::model_id::ModelIds;

/// One part's verdict as the line gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct LineVerdict {
    /// The judged frame's `seq` (see `part.framed`).
    pub seq: u64,
    /// The part: its place on the line, its id, its trigger.
    pub part: Part,
    pub captured_at: SystemTime,
    pub captured_instant: Instant,
    pub decision: Decision,
    /// Capture (in `plc` mode: trigger) to verdict.
    pub latency_ms: f64,
    pub deadline: Option<PartDeadline>,
    /// The models that judged the part (a `late` fail, which no model
    /// judged: those judging then); `None`: the models the line output
    /// started with (a `late` fail before any verdict).
    pub models: Option<Arc<ModelIds>>,
    /// The camera's name with `[cameras.NAME]` (MQTT publishes to
    /// `<topic>/<camera>/verdict`); `None` with one `[source]`.
    pub camera: Option<Arc<str>>,
    /// With a cavity layout: each judged cavity's verdict (the cycle's
    /// `decision` is its decisive cavity's, `crate::cycle`); `None`: the
    /// frame is one seal.
    pub cavities: Option<Arc<CycleVerdicts>>,
}

impl LineVerdict {
    /// This part as a `late` fail: what an output sends instead when the
    /// verdict could not leave before its deadline (e.g. the broker was away).
    pub fn into_late_fail(self) -> LineVerdict {
        LineVerdict {
            decision: Decision::late(),
            deadline: self.deadline.map(PartDeadline::for_late_fail),
            // Every cavity of a late cycle fails: none is passed unjudged.
            cavities: self
                .cavities
                .as_ref()
                .map(|c| Arc::new(c.all_failed(crate::decision::Reason::Late))),
            ..self
        }
    }

    pub fn is_late_fail(&self) -> bool {
        self.decision.reason == crate::decision::Reason::Late
    }
}

/// Something at the line that takes verdicts: the MQTT publisher, later a
/// GPIO reject pulse. Called for every part in order, from the decision
/// thread or the deadline thread (never both at once).
pub trait LineOutput: Send + Sync {
    /// Takes one verdict without blocking: queue it, and when the queue is
    /// full drop one verdict and count it. Which one (the oldest for MQTT,
    /// the newest for a PLC's result buffer) is the output's choice, said
    /// in its docs; the `line` module doc says why they differ. Called once
    /// per part, in part order, by `Line` (`deliver` or `expire`).
    fn send(&self, verdict: &LineVerdict);
}
