//! The output thread's hand-off to everything operators see: one call per
//! result, after its line is written. Atomics, a `try_lock` now and then,
//! buffer swaps: nothing here waits or allocates per frame.
//!
//! Two parts: what the status server shows (`StatusFeed`: metrics, the
//! page's board, the live view) and the archive. With `[status]` off the
//! status part is `NoStatus`, which takes every call and does nothing (as
//! `gpu/stub.rs` answers for CUDA), so no call here asks whether the page
//! is on. The archive may be turned on and off by a reload, so it is a
//! queue or none.

use std::sync::Arc;
use std::time::Duration;

use super::board::StatusBoard;
use super::telemetry::Telemetry;
use crate::archive::{ArchiveCounters, ArchiveQueue};
use crate::config::ArchiveConfig;
use crate::cycle::CycleVerdicts;
use crate::decision::Decision;
use crate::frame::{FrameMeta, FrameWork, PixelDemand};
use crate::output::{Latencies, ResultTaps};
use crate::shadow::ShadowCounters;
use crate::stats::ResultCounters;

/// What the status server takes from each result.
pub trait StatusFeed: Send {
    /// Before the archive sees the frame: the counters and the live view.
    /// `cycle`: with a cavity layout, the cycle's cavities (`work` is then
    /// its first record, with the whole frame's pixels).
    fn counted(
        &mut self,
        d: &Decision,
        latencies: Option<&Latencies>,
        work: Option<&FrameWork>,
        mask_hw: (usize, usize),
        cycle: Option<&CycleVerdicts>,
    );

    /// After it: the page's board, which links the archived frame and
    /// tallies the cycle's cavities.
    fn boarded(
        &mut self,
        meta: &FrameMeta,
        d: &Decision,
        total_ms: Option<f64>,
        archived: bool,
        cycle: Option<&CycleVerdicts>,
    );

    /// No frame for a while: publish what changed.
    fn idle(&mut self);

    /// The archive settings in force, for the page's links.
    fn archive_settings(&self, config: Option<&ArchiveConfig>);

    /// Where the archive counts (registered in `/metrics`).
    fn archive_counters(&self) -> ArchiveCounters;

    /// Where the output stage counts every result (registered in
    /// `/metrics`; the page's totals are read from them).
    fn result_counters(&self) -> ResultCounters;

    /// Where the shadow counts (registered in `/metrics`).
    fn shadow_counters(&self) -> ShadowCounters;

    /// The run is over: publish the last numbers.
    fn finish(&mut self);
}

/// `[status]` off: nobody reads, nothing is fed.
pub struct NoStatus;

impl StatusFeed for NoStatus {
    fn counted(
        &mut self,
        _: &Decision,
        _: Option<&Latencies>,
        _: Option<&FrameWork>,
        _: (usize, usize),
        _: Option<&CycleVerdicts>,
    ) {
    }
    fn boarded(
        &mut self,
        _: &FrameMeta,
        _: &Decision,
        _: Option<f64>,
        _: bool,
        _: Option<&CycleVerdicts>,
    ) {
    }
    fn idle(&mut self) {}
    fn archive_settings(&self, _: Option<&ArchiveConfig>) {}
    fn archive_counters(&self) -> ArchiveCounters {
        // Counts into handles nobody registered.
        ArchiveCounters::default()
    }
    fn result_counters(&self) -> ResultCounters {
        // Read by the run summary only.
        ResultCounters::default()
    }
    fn shadow_counters(&self) -> ShadowCounters {
        // The summary reads the shadow's own tally, not these.
        ShadowCounters::default()
    }
    fn finish(&mut self) {}
}

/// `[status]` on: the status server's metrics, board and live view (all
/// reached through `telemetry`; the board is the output thread's side).
pub struct ServerFeed {
    telemetry: Arc<Telemetry>,
    board: StatusBoard,
}

impl ServerFeed {
    /// The feed of `telemetry`; the cameras' cavity tallies are made now
    /// when it knows the layouts (`Telemetry::set_cameras`).
    pub fn new(telemetry: Arc<Telemetry>) -> Self {
        let mut board = StatusBoard::new(
            Arc::clone(&telemetry.board),
            telemetry.metrics.results.clone(),
        );
        board.prepare_cavities(&telemetry.cavity_layouts());
        ServerFeed { board, telemetry }
    }
}

impl StatusFeed for ServerFeed {
    fn counted(
        &mut self,
        d: &Decision,
        latencies: Option<&Latencies>,
        work: Option<&FrameWork>,
        mask_hw: (usize, usize),
        cycle: Option<&CycleVerdicts>,
    ) {
        // Frames and verdicts are counted by the output stage, in the
        // counters `/metrics` registers (`result_counters`).
        let m = &self.telemetry.metrics;
        if let Some(l) = latencies {
            m.verdict_latency.observe(ms(l[3]));
            for (i, v) in l[..3].iter().enumerate() {
                m.stage_latency.observe(i, ms(*v));
            }
        }
        if let Some(work) = work
            && self.telemetry.live.offer(work, d, mask_hw, cycle)
        {
            m.live_frames.inc();
        }
    }

    fn boarded(
        &mut self,
        meta: &FrameMeta,
        d: &Decision,
        total_ms: Option<f64>,
        archived: bool,
        cycle: Option<&CycleVerdicts>,
    ) {
        self.board.record(meta, d, total_ms, archived, cycle);
    }

    fn idle(&mut self) {
        self.board.idle_tick();
    }

    fn archive_settings(&self, config: Option<&ArchiveConfig>) {
        self.telemetry.set_archive(config.cloned());
    }

    fn archive_counters(&self) -> ArchiveCounters {
        self.telemetry.metrics.archive.clone()
    }

    fn result_counters(&self) -> ResultCounters {
        self.telemetry.metrics.results.clone()
    }

    fn shadow_counters(&self) -> ShadowCounters {
        self.telemetry.metrics.shadow.clone()
    }

    fn finish(&mut self) {
        self.board.publish();
    }
}

pub struct OperatorTaps {
    status: Box<dyn StatusFeed>,
    archive: Option<ArchiveQueue>,
    demand: Arc<PixelDemand>,
    /// The segmentation output's (height, width): the mask's size.
    mask_hw: (usize, usize),
    /// Where the archive counts, the same handles for the whole run (a
    /// reload's new queue included): `/metrics` and the run's summary read them.
    archive_counters: ArchiveCounters,
}

impl OperatorTaps {
    /// Taps for what is configured: the status server's feed (`NoStatus`
    /// when `[status]` is off) and the archive, when `[archive]` is on.
    pub fn new(
        status: Box<dyn StatusFeed>,
        archive: Option<&ArchiveConfig>,
        demand: Arc<PixelDemand>,
        mask_hw: (usize, usize),
    ) -> std::io::Result<Self> {
        let archive_counters = status.archive_counters();
        let archive = match archive {
            Some(config) => Some(ArchiveQueue::start(
                config,
                mask_hw,
                Arc::clone(&demand),
                archive_counters.clone(),
            )?),
            None => None,
        };
        Ok(OperatorTaps {
            status,
            archive,
            demand,
            mask_hw,
            archive_counters,
        })
    }

    /// The archive's counters (handles sharing the counts), for the run's summary.
    pub fn archive_counters(&self) -> ArchiveCounters {
        self.archive_counters.clone()
    }
}

impl ResultTaps for OperatorTaps {
    /// One result, after its line was written. `work` is the frame's record
    /// when it was inspected (its pixels may be taken by the archive); with
    /// a cavity layout, the cycle's first record, and `cycle` its cavities.
    fn record(
        &mut self,
        meta: &FrameMeta,
        d: &Decision,
        latencies: Option<&Latencies>,
        line: &str,
        work: Option<&mut FrameWork>,
        cycle: Option<&CycleVerdicts>,
    ) {
        self.status
            .counted(d, latencies, work.as_deref(), self.mask_hw, cycle);
        let archived = match (&mut self.archive, work) {
            (Some(archive), Some(work)) => archive.offer(work, d, line),
            _ => false,
        };
        self.status
            .boarded(meta, d, latencies.map(|l| l[3]), archived, cycle);
    }

    /// No frame for a while: publish what changed.
    fn idle(&mut self) {
        self.status.idle();
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
                    self.archive_counters.clone(),
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
        self.status.archive_settings(config);
    }

    /// Publishes the last numbers and lets the archive write what is queued.
    fn finish(mut self: Box<Self>) {
        self.status.finish();
        if let Some(archive) = self.archive.take() {
            archive.finish();
        }
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64((v.max(0.0)) * 1e-3)
}
