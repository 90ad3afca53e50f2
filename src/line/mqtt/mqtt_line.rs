//! `MqttLine`, the MQTT side of a run: starts the threads, gives the line
//! its output (`VerdictQueue`), and flushes and stops at the end.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::client;
use super::queue::{Shared, State, VerdictQueue, WINDOW};
use super::stats::{MqttCounts, MqttStats};
use crate::config::MqttConfig;
use crate::line::verdict::LineOutput;
use crate::model_id::ModelIds;

/// The MQTT side of a run: the queue the line hands verdicts to, and the
/// threads that send them.
pub struct MqttLine {
    shared: Arc<Shared>,
    output: Arc<VerdictQueue>,
    running: Option<client::Running>,
}

impl MqttLine {
    /// Starts publishing to the configured broker. Never fails the run: a
    /// problem (password file, CA file) is logged with what to do, and every
    /// verdict is then counted as dropped `unavailable`; an unreachable broker
    /// is retried in the background. Parts before `measure_from_seq` (a
    /// benchmark's warm-up; 0 for a service run) are sent like any other but
    /// left out of the latency histograms.
    pub fn start(config: &MqttConfig, models: ModelIds, measure_from_seq: u64) -> MqttLine {
        let stats = Arc::new(MqttStats::new(config.broker.url(), measure_from_seq));
        stats.set_down(true);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::with_capacity(config.queue),
                connected: false,
                handed: VecDeque::with_capacity(WINDOW + 1),
                inflight: HashMap::with_capacity(2 * WINDOW),
                stopping: false,
                closed: false,
                overflow_logged: false,
            }),
            wake: Condvar::new(),
            stats,
            capacity: config.queue,
        });
        let running = match client::start(config, models, Arc::clone(&shared)) {
            Ok(running) => Some(running),
            Err(e) => {
                log::error!(target: "sealcheck::mqtt", broker = shared.stats.broker.as_str(), error = e.to_string().as_str();
                    "MQTT is off for this run: {e}; inspection and the results file go on");
                None
            }
        };
        let output = Arc::new(VerdictQueue {
            shared: Arc::clone(&shared),
            unavailable: running.is_none(),
        });
        MqttLine {
            shared,
            output,
            running,
        }
    }

    /// The line output to hand to `Line`.
    pub fn output(&self) -> Arc<dyn LineOutput> {
        self.output.clone()
    }

    pub fn stats(&self) -> Arc<MqttStats> {
        Arc::clone(&self.shared.stats)
    }

    /// After the last verdict: sends what is queued (up to `flush` long),
    /// counts the rest dropped `shutdown`, says `offline`, disconnects.
    pub fn finish(mut self, flush: Duration) -> MqttCounts {
        if let Some(running) = self.running.take() {
            running.finish(&self.shared, flush);
        }
        self.shared.stats.snapshot()
    }
}

impl Drop for MqttLine {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.finish(&self.shared, Duration::ZERO);
        }
    }
}
