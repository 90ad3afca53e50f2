//! Counts of the line's verdicts (`LineStats`, shared atomics) and a copy
//! of them at one moment (`LineCounts`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of the line's verdicts; shareable (atomics), read at any time.
#[derive(Debug, Default)]
pub struct LineStats {
    /// Verdicts handed to the line outputs (one per part).
    pub sent: AtomicU64,
    /// Of those, `late` fails.
    pub late: AtomicU64,
    /// Parts that reached no deadline timer because its queue was full
    /// (they still get exactly one verdict, from the decision stage).
    pub untimed: AtomicU64,
}

/// A copy of `LineStats` at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineCounts {
    pub sent: u64,
    pub late: u64,
    pub untimed: u64,
}

impl LineStats {
    pub fn snapshot(&self) -> LineCounts {
        LineCounts {
            sent: self.sent.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
            untimed: self.untimed.load(Ordering::Relaxed),
        }
    }
}
