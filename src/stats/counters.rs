//! What the output stage counts, once per result line: frames, and results
//! by reason. One registry for everyone who shows these numbers: `/metrics`
//! registers these same handles (`sealcheck_frames_total`,
//! `sealcheck_verdicts_total`, `sealcheck_not_inspected_total`), the status
//! page copies its totals from them, and the run summary and systemd's
//! STATUS= line read them. The output stage counts (`OutputStage::counters`);
//! a leaf below output and status, as `archive/counters.rs` is for the
//! archive's, so neither names the other for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;

use crate::decision::{Reason, Verdict};

const REASONS: usize = Reason::ALL.len();

/// The counters: cheap to clone (each handle shares its atomic).
#[derive(Debug, Clone, Default)]
pub struct ResultCounters {
    pub frames: Counter,
    /// Indexed like `Reason::ALL`.
    by_reason: [Counter; REASONS],
    /// With `[recipes.NAME]`: the same results by the recipe that judged them.
    recipes: Option<Arc<RecipeCounts>>,
}

impl ResultCounters {
    /// Counters over `frames` and `by_reason` (indexed like `Reason::ALL`),
    /// handles a metrics registry made.
    pub fn new(frames: Counter, by_reason: [Counter; REASONS]) -> Self {
        ResultCounters {
            frames,
            by_reason,
            recipes: None,
        }
    }

    /// These counters, also counting by recipe into `recipes`.
    pub fn with_recipes(self, recipes: Arc<RecipeCounts>) -> Self {
        ResultCounters {
            recipes: Some(recipes),
            ..self
        }
    }

    /// One result line written. No allocation, no lock.
    pub fn record(&self, reason: Reason) {
        self.frames.inc();
        self.reason(reason).inc();
    }

    /// One result line written, judged by recipe `recipe` (its name).
    pub fn record_recipe(&self, recipe: Option<&str>, reason: Reason) {
        if let (Some(recipes), Some(recipe)) = (&self.recipes, recipe) {
            recipes.record(recipe, reason);
        }
    }

    /// The counter of `reason`'s results.
    pub fn reason(&self, reason: Reason) -> &Counter {
        &self.by_reason[reason_index(reason)]
    }

    pub fn snapshot(&self) -> ResultCounts {
        ResultCounts {
            frames: self.frames.get(),
            by_reason: std::array::from_fn(|i| self.by_reason[i].get()),
        }
    }
}

fn reason_index(reason: Reason) -> usize {
    Reason::ALL
        .iter()
        .position(|r| *r == reason)
        .expect("Reason::ALL lists every reason")
}

/// Results by recipe: one row of counters per recipe of the config, made
/// at start (no allocation and no lock per result).
#[derive(Debug)]
pub struct RecipeCounts {
    rows: Vec<(Arc<str>, [AtomicU64; REASONS])>,
}

impl RecipeCounts {
    pub fn new(names: impl IntoIterator<Item = Arc<str>>) -> RecipeCounts {
        RecipeCounts {
            rows: names
                .into_iter()
                .map(|name| (name, std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    /// One result of `recipe` (a name not in the config is not counted:
    /// the pipeline never makes one).
    pub fn record(&self, recipe: &str, reason: Reason) {
        if let Some((_, row)) = self.rows.iter().find(|(name, _)| &**name == recipe) {
            row[reason_index(reason)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Each recipe's counts by reason (indexed like `Reason::ALL`), in config order.
    pub fn snapshot(&self) -> Vec<(Arc<str>, [u64; REASONS])> {
        self.rows
            .iter()
            .map(|(name, row)| {
                (
                    Arc::clone(name),
                    std::array::from_fn(|i| row[i].load(Ordering::Relaxed)),
                )
            })
            .collect()
    }
}

/// The counters' values at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultCounts {
    pub frames: u64,
    /// Indexed like `Reason::ALL`.
    pub by_reason: [u64; REASONS],
}

impl ResultCounts {
    pub fn count(&self, reason: Reason) -> u64 {
        self.by_reason[reason_index(reason)]
    }

    pub fn passed(&self) -> u64 {
        self.verdicts(Verdict::Pass)
    }

    pub fn failed(&self) -> u64 {
        self.verdicts(Verdict::Fail)
    }

    fn verdicts(&self, verdict: Verdict) -> u64 {
        Reason::ALL
            .iter()
            .zip(self.by_reason)
            .filter(|(r, _)| r.verdict() == verdict)
            .map(|(_, n)| n)
            .sum()
    }

    /// What was counted after `earlier`.
    pub fn since(&self, earlier: &ResultCounts) -> ResultCounts {
        ResultCounts {
            frames: self.frames - earlier.frames,
            by_reason: std::array::from_fn(|i| self.by_reason[i] - earlier.by_reason[i]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_result_counts_once_and_verdicts_follow_reasons() {
        let counters = ResultCounters::default();
        let before = counters.snapshot();
        for reason in [Reason::Ok, Reason::Ok, Reason::Defect, Reason::NotInspected] {
            counters.record(reason);
        }
        let counts = counters.snapshot().since(&before);
        assert_eq!(counts.frames, 4);
        assert_eq!((counts.passed(), counts.failed()), (2, 2));
        assert_eq!(counts.count(Reason::NotInspected), 1);
        assert_eq!(counters.reason(Reason::Defect).get(), 1);
        // A clone shares the atomics (what /metrics registers).
        counters.clone().record(Reason::Error);
        assert_eq!(counters.snapshot().count(Reason::Error), 1);
    }

    #[test]
    fn results_count_by_the_recipe_that_judged_them() {
        let recipes = Arc::new(RecipeCounts::new(["cup125".into(), "cup200".into()]));
        let counters = ResultCounters::default().with_recipes(Arc::clone(&recipes));
        counters.record_recipe(Some("cup200"), Reason::Defect);
        counters.record_recipe(Some("cup200"), Reason::Ok);
        counters.record_recipe(Some("cup125"), Reason::Ok);
        counters.record_recipe(None, Reason::Ok);
        let rows = recipes.snapshot();
        let count = |row: usize, reason| rows[row].1[reason_index(reason)];
        assert_eq!(&*rows[1].0, "cup200");
        assert_eq!((count(1, Reason::Defect), count(1, Reason::Ok)), (1, 1));
        assert_eq!((count(0, Reason::Ok), count(0, Reason::Defect)), (1, 0));
        // Without recipes nothing is counted by recipe.
        ResultCounters::default().record_recipe(Some("cup125"), Reason::Ok);
        assert_eq!(recipes.snapshot()[0].1[reason_index(Reason::Ok)], 1);
    }
}
