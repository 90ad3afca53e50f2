//! The device stage's book of the frames handed to the GPU path: the work
//! records in staging order, grouped into the batches launched and the one
//! being staged (`device_stage::DeviceBatches` keeps one).

use std::collections::VecDeque;
use std::time::Instant;

use super::batch::BatchRuns;
use super::device_error::DeviceFrameError;
use crate::frame::FrameWork;

/// The frames handed to the path, in the order they were staged: the
/// batches launched (oldest first), then the batch being staged.
///
/// Invariant: `works` holds exactly `sum(launched) + staging` records, and
/// the frames of launched batches without an error are exactly those the
/// path has to complete, in the same order.
pub(super) struct OnGpu {
    // The work records travel boxed through the stage channels.
    #[allow(clippy::vec_box)]
    works: VecDeque<Box<FrameWork>>,
    /// Work records of each launched batch (failed frames included).
    launched: VecDeque<usize>,
    /// Work records of the batch being staged.
    staging: usize,
}

impl OnGpu {
    pub(super) fn with_capacity(depth: usize, max_batch: usize) -> Self {
        OnGpu {
            works: VecDeque::with_capacity((depth + 1) * max_batch.max(1)),
            launched: VecDeque::with_capacity(depth + 1),
            staging: 0,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.works.is_empty()
    }

    /// Batches launched and not yet finished.
    pub(super) fn batches(&self) -> usize {
        self.launched.len()
    }

    pub(super) fn stage(&mut self, work: Box<FrameWork>) {
        self.works.push_back(work);
        self.staging += 1;
    }

    /// The batch being staged was launched at `at`, or its launch failed
    /// with `failed` (its frames are marked with it: none reaches the GPU's
    /// models). Returns the engine runs made.
    pub(super) fn launched(&mut self, failed: Option<&DeviceFrameError>, at: Instant) -> BatchRuns {
        let frames = std::mem::take(&mut self.staging);
        let batch = self.works.len() - frames..self.works.len();
        for work in self.works.range_mut(batch.clone()) {
            work.timings.stamps.launched = Some(at);
        }
        let judged = self
            .works
            .range(batch.clone())
            .filter(|w| w.error.is_none())
            .count();
        if let Some(e) = failed {
            for work in self.works.range_mut(batch).filter(|w| w.error.is_none()) {
                work.error = Some((e.failed_stage(), e.to_string()));
            }
        }
        if frames > 0 {
            self.launched.push_back(frames);
        }
        match (failed, judged) {
            (None, judged) if judged > 0 => BatchRuns {
                runs: 1,
                frames: judged,
            },
            _ => BatchRuns::default(),
        }
    }

    /// The oldest work record handed over (of the oldest batch).
    pub(super) fn pop_oldest(&mut self) -> Option<Box<FrameWork>> {
        self.works.pop_front()
    }

    /// Takes the oldest launched batch: how many work records it has.
    pub(super) fn oldest_batch(&mut self) -> usize {
        self.launched.pop_front().unwrap_or(0)
    }
}
