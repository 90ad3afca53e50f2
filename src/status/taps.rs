//! The output thread's hand-off to everything operators see: one call per
//! result, after its line is written. Atomics, a `try_lock` now and then,
//! buffer swaps: nothing here waits or allocates per frame.

use std::sync::Arc;
use std::time::Duration;

use super::{LineMetrics, LiveView, StatusBoard, Telemetry};
use crate::archive::ArchiveQueue;
use crate::config::ArchiveConfig;
use crate::decision::{Decision, Reason};
use crate::frame::{FrameMeta, FrameWork, PixelDemand};
use crate::output::{Latencies, ResultTaps};

pub struct OperatorTaps {
    metrics: Option<Arc<LineMetrics>>,
    board: Option<StatusBoard>,
    live: Option<Arc<LiveView>>,
    archive: Option<ArchiveQueue>,
    telemetry: Option<Arc<Telemetry>>,
    demand: Arc<PixelDemand>,
    /// The segmentation output's (height, width): the mask's size.
    mask_hw: (usize, usize),
}

impl OperatorTaps {
    /// Taps for what is configured: the status server (`telemetry`) and the
    /// archive, either or both or neither.
    pub fn new(
        telemetry: Option<Arc<Telemetry>>,
        archive: Option<&ArchiveConfig>,
        demand: Arc<PixelDemand>,
        mask_hw: (usize, usize),
    ) -> std::io::Result<Self> {
        let metrics = telemetry.as_ref().map(|t| Arc::clone(&t.metrics));
        let archive = match archive {
            Some(config) => Some(ArchiveQueue::start(
                config,
                mask_hw,
                Arc::clone(&demand),
                metrics.as_ref().map(|m| m.archive.clone()),
            )?),
            None => None,
        };
        Ok(OperatorTaps {
            board: telemetry
                .as_ref()
                .map(|t| StatusBoard::new(Arc::clone(&t.board))),
            live: telemetry.as_ref().map(|t| Arc::clone(&t.live)),
            metrics,
            archive,
            telemetry,
            demand,
            mask_hw,
        })
    }
}

impl ResultTaps for OperatorTaps {
    /// One result, after its line was written. `work` is the frame's record
    /// when it was inspected (its pixels may be taken by the archive).
    fn record(
        &mut self,
        meta: &FrameMeta,
        d: &Decision,
        latencies: Option<&Latencies>,
        line: &str,
        mut work: Option<&mut FrameWork>,
    ) {
        if let Some(m) = &self.metrics {
            m.frames.inc();
            if let Some(c) = m.verdict(d.reason) {
                c.inc();
            }
            if d.reason == Reason::NotInspected {
                m.not_inspected.inc();
            }
            if let Some(l) = latencies {
                m.verdict_latency.observe(ms(l[3]));
                for (i, v) in l[..3].iter().enumerate() {
                    m.stage_latency.observe(i, ms(*v));
                }
            }
        }
        if let (Some(live), Some(work)) = (&self.live, work.as_deref())
            && live.offer(work, d, self.mask_hw)
            && let Some(m) = &self.metrics
        {
            m.live_frames.inc();
        }
        let archived = match (&mut self.archive, work.as_deref_mut()) {
            (Some(archive), Some(work)) => archive.offer(work, d, line),
            _ => false,
        };
        if let Some(board) = &mut self.board {
            board.record(meta, d, latencies.map(|l| l[3]), archived);
        }
    }

    /// No frame for a while: publish what changed.
    fn idle(&mut self) {
        if let Some(board) = &mut self.board {
            board.idle_tick();
        }
    }

    /// `[archive]` after a reload: new settings, turned on or turned off.
    fn reload_archive(&mut self, config: Option<&ArchiveConfig>) {
        match (config, &mut self.archive) {
            (Some(c), Some(archive)) => archive.reconfigure(c),
            (Some(c), None) => {
                match ArchiveQueue::start(
                    c,
                    self.mask_hw,
                    Arc::clone(&self.demand),
                    self.metrics.as_ref().map(|m| m.archive.clone()),
                ) {
                    Ok(archive) => self.archive = Some(archive),
                    Err(e) => {
                        log::error!(target: "sealcheck::archive", error = e.to_string().as_str();
                        "cannot start the archive thread after reload; the archive stays off")
                    }
                }
            }
            (None, Some(archive)) => archive.pause(),
            (None, None) => {}
        }
        if let Some(t) = &self.telemetry {
            t.set_archive(config.cloned());
        }
    }

    /// Publishes the last numbers and lets the archive write what is queued.
    fn finish(mut self: Box<Self>) {
        if let Some(board) = &mut self.board {
            board.publish();
        }
        if let Some(archive) = self.archive.take() {
            archive.finish();
        }
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64((v.max(0.0)) * 1e-3)
}
