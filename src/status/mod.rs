//! What the people at the line see: Prometheus metrics, health, and the
//! operators' status page, served over HTTP by their own thread.
//!
//! ```text
//!  output thread ──OperatorTaps──▶ LineMetrics (atomics)      ─┐
//!      │                          StatusBoard ─▶ SnapshotSlot ─┼─▶ HTTP thread (tokio, axum):
//!      │                          LiveView (latest frame)     ─┘     /  /metrics  /healthz
//!      └──ArchiveQueue──▶ archive thread ──▶ dir/YYYY-MM-DD/HH/      /api/status  /api/live.jpg  /archive/…
//! ```
//!
//! Nothing here is on the frame path: the output thread touches atomics and,
//! a few times a second, a `try_lock` that never waits; encoding, JSON and
//! sockets happen on the HTTP and archive threads. No endpoint changes the
//! service.

mod board;
mod external;
mod http;
mod live;
pub mod metrics;
mod serve;
mod taps;

pub use board::{BoardState, SnapshotSlot, StatusBoard};
pub use external::ExternalStats;
pub use http::{StatusError, StatusServer};
pub use live::{LiveJpeg, LiveView};
pub use metrics::LineMetrics;
pub use taps::OperatorTaps;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::config::ArchiveConfig;
use crate::frame::PixelDemand;
use crate::service::{Health, Liveness, stuck_source_reason, unhealthy_remedy};

/// Where the run is, for `/healthz` and the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RunState {
    /// Loading models, opening the source.
    Starting = 0,
    Running = 1,
    /// Stop requested: finishing frames in flight.
    Stopping = 2,
    /// The stages have ended.
    Stopped = 3,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Stopping => "stopping",
            RunState::Stopped => "stopped",
        }
    }
}

/// Facts about the run known once the backend is open.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub backend: String,
    pub source: String,
    /// (role, file name, model id)
    pub models: Vec<(&'static str, String, String)>,
}

/// State shared by the pipeline's threads and the HTTP thread.
pub struct Telemetry {
    pub metrics: Arc<LineMetrics>,
    pub board: Arc<SnapshotSlot>,
    pub live: Arc<LiveView>,
    pub demand: Arc<PixelDemand>,
    /// Set once the stages are about to start (until then: "starting").
    liveness: OnceLock<Liveness>,
    stall_timeout: Duration,
    /// systemd set a watchdog: it restarts the service when health fails.
    supervised: bool,
    state: AtomicU8,
    /// Set once the backend is chosen; its models follow a model swap.
    info: Mutex<Option<RunInfo>>,
    /// Counters of the line and MQTT (`external`), once they exist.
    external: Arc<Mutex<ExternalStats>>,
    /// The archive settings in force (reloads change them).
    archive: Mutex<Option<ArchiveConfig>>,
    started: Instant,
}

impl Telemetry {
    pub fn new(
        stall_timeout: Duration,
        supervised: bool,
        deadline: Duration,
        demand: Arc<PixelDemand>,
        archive: Option<ArchiveConfig>,
    ) -> Arc<Telemetry> {
        let metrics = LineMetrics::new(deadline);
        let external = Arc::new(Mutex::new(ExternalStats::default()));
        metrics
            .registry()
            .register_collector(Box::new(external::ExternalCollector(Arc::clone(&external))));
        Arc::new(Telemetry {
            metrics,
            external,
            board: Arc::new(SnapshotSlot::default()),
            live: Arc::new(LiveView::new(Arc::clone(&demand))),
            demand,
            liveness: OnceLock::new(),
            stall_timeout,
            supervised,
            state: AtomicU8::new(RunState::Starting as u8),
            info: Mutex::new(None),
            archive: Mutex::new(archive),
            started: Instant::now(),
        })
    }

    /// The pipeline's liveness record, once the stages exist.
    pub fn set_liveness(&self, liveness: Liveness) {
        let _ = self.liveness.set(liveness);
    }

    /// The line's and MQTT's counters (see `external`).
    pub fn set_external(&self, stats: ExternalStats) {
        *self.external.lock().unwrap_or_else(|p| p.into_inner()) = stats;
    }

    pub fn external(&self) -> ExternalStats {
        self.external
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn set_state(&self, state: RunState) {
        self.state.store(state as u8, Ordering::Relaxed);
    }

    pub fn state(&self) -> RunState {
        match self.state.load(Ordering::Relaxed) {
            0 => RunState::Starting,
            1 => RunState::Running,
            2 => RunState::Stopping,
            _ => RunState::Stopped,
        }
    }

    /// Records the backend and models (and registers `build_info`/`model_info`).
    pub fn set_info(&self, info: RunInfo) {
        self.metrics.register_info(&info.backend, &info.models);
        *self.info.lock().unwrap_or_else(|p| p.into_inner()) = Some(info);
    }

    /// After a model swap: the models judging now (role, file, id).
    pub fn set_models(&self, models: Vec<(&'static str, String, String)>) {
        self.metrics.set_models(&models);
        if let Some(info) = self.info.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            info.models = models;
        }
    }

    pub fn info(&self) -> Option<RunInfo> {
        self.info.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_archive(&self, archive: Option<ArchiveConfig>) {
        *self.archive.lock().unwrap_or_else(|p| p.into_inner()) = archive;
    }

    pub fn archive(&self) -> Option<ArchiveConfig> {
        self.archive
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `Ok(text)` while healthy, `Err(reason)` when the watchdog would stop
    /// pinging (or the pipeline is not running).
    pub fn health(&self) -> Result<String, String> {
        match self.state() {
            RunState::Starting => {
                return Err("starting: loading models and opening the source".into());
            }
            RunState::Stopping => return Err("stopping: finishing the frames in flight".into()),
            RunState::Stopped => return Err("stopped: the pipeline has ended".into()),
            RunState::Running => {}
        }
        let Some(liveness) = self.liveness.get() else {
            return Err("starting: the stages are not running yet".into());
        };
        match liveness.health(Instant::now(), self.stall_timeout) {
            Health::Alive { in_flight } => {
                Ok(format!("ok: results moving, {in_flight} frames in flight"))
            }
            Health::Idle => Ok("ok: idle, the source is streaming but sends no frames".into()),
            // The watchdog keeps pinging (a restart would not bring the
            // camera back); the page shows the source as lost.
            Health::SourceLost { for_ } => Ok(format!(
                "ok: the process is healthy; the source was lost {:.0} s ago and is being rebuilt (no frames, no verdicts meanwhile)",
                for_.as_secs_f64()
            )),
            Health::WaitingForSource { for_ } => Ok(format!(
                "ok: waiting for the source for {:.0} s",
                for_.as_secs_f64()
            )),
            Health::Stalled {
                stage,
                for_,
                in_flight,
            } => Err(format!(
                "stalled at {} for {:.1} s with {in_flight} frames in flight: {}",
                stage.name(),
                for_.as_secs_f64(),
                unhealthy_remedy(self.supervised)
            )),
            Health::Failing { stage, for_ } => Err(format!(
                "every frame has failed in {} for {:.1} s: the engine looks broken; {}",
                stage.as_str(),
                for_.as_secs_f64(),
                unhealthy_remedy(self.supervised)
            )),
            stuck @ Health::SourceStuck { .. } => Err(format!(
                "{}; {}",
                stuck_source_reason(&stuck, Some(liveness.source_name())).unwrap_or_default(),
                unhealthy_remedy(self.supervised)
            )),
        }
    }

    /// Whether frames are coming from the source (as the watchdog last saw it).
    pub fn source_up(&self) -> bool {
        if self.state() != RunState::Running {
            return false;
        }
        match self.external().source {
            Some(source) => {
                source.is_up() && self.liveness.get().is_some_and(Liveness::source_streaming)
            }
            None => self.liveness.get().is_some_and(Liveness::source_streaming),
        }
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}
