//! What else sees each result once its line is written: the operators'
//! metrics, the status page and the archive. `status::OperatorTaps` is the
//! one implementation the service runs; the output stage names only this
//! trait, so it imports nothing of the status room above it.

use crate::config::ArchiveConfig;
use crate::cycle::CycleVerdicts;
use crate::decision::Decision;
use crate::frame::{FrameMeta, FrameWork};

/// Latencies of one frame in ms: preprocess, segment, classify, total.
pub type Latencies = [f64; 4];

/// The output thread's hand-off, one call per result. An implementation must
/// not wait or allocate per frame: it runs on the verdict's path.
pub trait ResultTaps: Send {
    /// One result, after its line was written. `work` is the frame's record
    /// when it was inspected (its pixels may be taken by the archive);
    /// with a cavity layout, the cycle's first record (the frame's pixels)
    /// and `cycle` its cavities' verdicts.
    fn record(
        &mut self,
        meta: &FrameMeta,
        d: &Decision,
        latencies: Option<&Latencies>,
        line: &str,
        work: Option<&mut FrameWork>,
        cycle: Option<&CycleVerdicts>,
    );

    /// No frame came for a while: publish what is pending.
    fn idle(&mut self);

    /// `[archive]` after a reload: new settings, turned on or turned off.
    fn reload_archive(&mut self, config: Option<&ArchiveConfig>);

    /// The run is over: publish the last numbers, let queued work finish.
    fn finish(self: Box<Self>);
}
