//! What a run needs from outside the pipeline: the notifier, the service
//! signals, and where frames come from (the configured source or a replay).

use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::frame::FrameSlot;
use crate::service::{Notifier, ServiceSignal};

/// Everything a run needs from outside the pipeline.
pub struct RunContext {
    pub notifier: Notifier,
    /// Stop / reload / force-stop requests (from signals, or a test).
    pub signals: Receiver<ServiceSignal>,
    /// Where frames come from.
    pub source: SourcePlan,
    /// Frames before this `seq` get results but stay out of the statistics (warm-up).
    pub measure_from_seq: u64,
}

impl RunContext {
    /// A run of the configured source, as `sealcheck run` does it.
    pub fn configured(notifier: Notifier, signals: Receiver<ServiceSignal>) -> Self {
        RunContext {
            notifier,
            signals,
            source: SourcePlan::Configured,
            measure_from_seq: 0,
        }
    }
}

pub enum SourcePlan {
    /// The source the config names, through GStreamer.
    Configured,
    /// Frames decoded beforehand, replayed round-robin `count` times (`bench`).
    /// `rate`, if given, paces them like a camera (frames per second).
    Replay {
        frames: Arc<Vec<FrameSlot>>,
        count: u64,
        rate: Option<f64>,
        /// How late (ms) each paced frame was offered after its due time,
        /// every camera's together: the replay thread's own wake-up, which
        /// counts in the frames' latency and which a camera does not have.
        offer_lateness: Arc<std::sync::Mutex<crate::stats::LatencyHistogram>>,
    },
}
