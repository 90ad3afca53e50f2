//! `OpcUaOutput`: a camera's line output to the OPC UA server. The line
//! calls `send` once per part, in part order; it queues the result for the
//! server's thread (bounded, never blocking: the house rule), which ties
//! it to its job, publishes its ResultReadyEvent and updates the plain
//! variables (`server`). A result that does not fit (the server's thread
//! stalled for thousands of results) is counted and logged, never waited for.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

use super::record::ResultRecord;
use crate::line::{LineOutput, LineVerdict};
use crate::service::RateLimiter;

/// Results waiting for the server's thread, all cameras together.
pub const QUEUE: usize = 4096;

/// One camera's output.
pub struct OpcUaOutput {
    camera: usize,
    queue: mpsc::Sender<(usize, ResultRecord)>,
    dropped: Arc<AtomicU64>,
    log: std::sync::Mutex<RateLimiter>,
}

impl OpcUaOutput {
    pub fn new(
        camera: usize,
        queue: mpsc::Sender<(usize, ResultRecord)>,
        dropped: Arc<AtomicU64>,
    ) -> OpcUaOutput {
        OpcUaOutput {
            camera,
            queue,
            dropped,
            log: std::sync::Mutex::new(RateLimiter::new(Duration::from_secs(10))),
        }
    }
}

impl LineOutput for OpcUaOutput {
    fn send(&self, verdict: &LineVerdict) {
        let record = ResultRecord::of(verdict);
        if self.queue.try_send((self.camera, record)).is_err() {
            let total = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            let due = self
                .log
                .lock()
                .map(|mut l| l.admit().is_log())
                .unwrap_or(true);
            if due {
                log::warn!(target: "sealcheck::opcua", part = verdict.part.number, dropped = total;
                    "OPC UA: result of part {} not published (the server's queue of {QUEUE} is full or the server stopped; {total} so far); the results file and the other outputs have it",
                    verdict.part.number);
            }
        }
    }
}
