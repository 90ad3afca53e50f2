//! A camera with a cavity layout: its frame's cavities come as work
//! records of their own (`frame::CavityTag`), one after another; they are
//! gathered here into the cycle, each decided on its own, and the cycle
//! goes out as one result (`crate::cycle`). A cycle cut short (which the
//! stages before never make: a frame's records travel together) fails its
//! missing cavities with `error`, so no cavity is passed unjudged.

use std::sync::Arc;

use crate::config::{CavityLayout, DecisionConfig};
use crate::cycle::CycleVerdicts;
use crate::decision::{self, Decision, Reason};
use crate::frame::FrameWork;

/// The cycle being gathered and the verdicts it is decided into, both
/// reused: a cycle allocates nothing once the first has grown them (the
/// verdicts again only while an output still holds the last cycle's).
#[derive(Default)]
pub struct CycleGather {
    // The records travel boxed through the stage channels and go back so.
    #[allow(clippy::vec_box)]
    records: Vec<Box<FrameWork>>,
    verdicts: Arc<CycleVerdicts>,
}

impl CycleGather {
    /// Room for cycles of up to `cavities` judged cavities.
    pub fn with_capacity(cavities: usize) -> CycleGather {
        CycleGather {
            records: Vec::with_capacity(cavities),
            verdicts: Arc::new(CycleVerdicts::with_capacity(cavities)),
        }
    }

    /// The verdicts to fill for the next cycle: the last ones' when no
    /// output holds them any more.
    fn fresh(&mut self) -> &mut CycleVerdicts {
        if Arc::get_mut(&mut self.verdicts).is_none() {
            let room = self.verdicts.cavities().len();
            self.verdicts = Arc::new(CycleVerdicts::with_capacity(room));
        }
        Arc::get_mut(&mut self.verdicts).expect("a fresh Arc has one owner")
    }

    /// A cycle that no model judged: every judged cavity of `layout` fails
    /// with `reason`. `None` without a layout.
    pub fn failed(
        &mut self,
        layout: Option<&CavityLayout>,
        reason: Reason,
    ) -> Option<Arc<CycleVerdicts>> {
        self.fresh().fill_failed(layout?, reason);
        Some(Arc::clone(&self.verdicts))
    }

    /// The first record of the cycle being gathered, if one is.
    pub fn first(&self) -> Option<&FrameWork> {
        self.records.first().map(|w| &**w)
    }

    /// Adds a cavity's record; `true` when it is its cycle's last.
    pub fn push(&mut self, work: Box<FrameWork>) -> bool {
        let last = work.cavity.is_some_and(|t| t.is_last());
        self.records.push(work);
        last
    }

    /// Decides each gathered cavity of `layout` (one whose record is
    /// missing fails with `error`): the cycle's verdicts, and its
    /// preprocess, segment and classify milliseconds (the crops are
    /// preprocessed one after another, then run in one batch: the sum of
    /// the first, the batch's of the others).
    pub fn decide(
        &mut self,
        layout: &CavityLayout,
        defect_class: usize,
        thresholds: &DecisionConfig,
    ) -> (Arc<CycleVerdicts>, [f64; 3]) {
        let mut timings = [0.0f64; 3];
        let records = std::mem::take(&mut self.records);
        let verdicts = self.fresh();
        verdicts.start(layout);
        for number in layout.enabled() {
            let record = records
                .iter()
                .find(|w| w.cavity.is_some_and(|t| t.number == number));
            let decision = match record {
                Some(w) => {
                    let t = &w.timings;
                    timings[0] += t.preprocess_ms;
                    timings[1] = timings[1].max(t.segment_ms);
                    timings[2] = timings[2].max(t.classify_ms);
                    decision::decide(w, defect_class, thresholds)
                }
                None => Decision::error(),
            };
            verdicts.push(number, decision);
        }
        self.records = records;
        (Arc::clone(&self.verdicts), timings)
    }

    /// The gathered records, to be sent back once the cycle is written;
    /// `give_back` returns the emptied list (its room is kept).
    /// The records gathered of the cycle so far, in cavity order.
    // The records travel boxed between the stages; this only lends them.
    #[allow(clippy::borrowed_box)]
    pub fn records(&self) -> &[Box<FrameWork>] {
        &self.records
    }

    pub fn take_records(&mut self) -> Vec<Box<FrameWork>> {
        std::mem::take(&mut self.records)
    }

    pub fn give_back(&mut self, mut emptied: Vec<Box<FrameWork>>) {
        emptied.clear();
        self.records = emptied;
    }
}
