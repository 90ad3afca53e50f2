//! The state the pipeline's threads and the HTTP thread share
//! (`Telemetry`): the metrics, the board, the live view, the run's facts
//! as the pipeline reports them, and the health verdict `/healthz` and the
//! page give.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::board::SnapshotSlot;
use super::cameras;
use super::cavities;
use super::external;
use super::live::LiveView;
use super::metrics::LineMetrics;
use super::recipes;
use super::run_report::{RunFacts, RunInfo, RunState};
use crate::config::{ArchiveConfig, CameraConfig, CavityLayout};
use crate::frame::PixelDemand;
use crate::service::{Health, stuck_source_reason, unhealthy_remedy};

/// State shared by the pipeline's threads and the HTTP thread.
pub struct Telemetry {
    pub metrics: Arc<LineMetrics>,
    pub board: Arc<SnapshotSlot>,
    pub live: Arc<LiveView>,
    pub demand: Arc<PixelDemand>,
    /// What the pipeline reported of the run (`RunReport`), and the models
    /// `metrics` was last told of.
    facts: Mutex<FactsReader>,
    stall_timeout: Duration,
    /// systemd set a watchdog: it restarts the service when health fails.
    supervised: bool,
    /// The archive settings in force (reloads change them).
    archive: Mutex<Option<ArchiveConfig>>,
    started: Instant,
    /// `POST /api/trigger`, when `[trigger] http = true`.
    triggers: std::sync::OnceLock<super::TriggerApi>,
    /// Each camera's cavity layout, by `FrameMeta::camera` (`None`: no
    /// layout), as the config gave them at start (`set_cameras`).
    layouts: std::sync::OnceLock<CavityLayouts>,
    /// `[recipes.NAME]`: the desk and counts (`set_recipes`, at start).
    recipes: Arc<std::sync::OnceLock<super::RecipeApi>>,
}

/// The cameras' cavity layouts, by camera index.
pub type CavityLayouts = Arc<[Option<Arc<CavityLayout>>]>;

struct FactsReader {
    facts: watch::Receiver<RunFacts>,
    /// The info `metrics` carries (`build_info`, `model_info`); `None` until
    /// the engine is chosen.
    in_metrics: Option<RunInfo>,
}

impl Telemetry {
    /// `facts`: the pipeline's `RunReport`, subscribed.
    pub fn new(
        stall_timeout: Duration,
        supervised: bool,
        deadline: Duration,
        demand: Arc<PixelDemand>,
        archive: Option<ArchiveConfig>,
        facts: watch::Receiver<RunFacts>,
    ) -> Arc<Telemetry> {
        let metrics = LineMetrics::new(deadline);
        let board = Arc::new(SnapshotSlot::default());
        let reported = facts.clone();
        metrics
            .registry()
            .register_collector(Box::new(external::ExternalCollector(Arc::new(move || {
                reported.borrow().external.clone()
            }))));
        let (reported, tallies) = (facts.clone(), Arc::clone(&board));
        metrics
            .registry()
            .register_collector(Box::new(cameras::CameraCollector(Arc::new(move || {
                (reported.borrow().clone(), tallies.read(), stall_timeout)
            }))));
        let (reported, tallies) = (facts.clone(), Arc::clone(&board));
        metrics
            .registry()
            .register_collector(Box::new(cavities::CavityCollector(Arc::new(move || {
                (reported.borrow().clone(), tallies.read())
            }))));
        let recipes = Arc::new(std::sync::OnceLock::new());
        metrics
            .registry()
            .register_collector(Box::new(recipes::RecipeCollector(Arc::clone(&recipes))));
        Arc::new(Telemetry {
            metrics,
            board,
            live: Arc::new(LiveView::new(Arc::clone(&demand))),
            demand,
            facts: Mutex::new(FactsReader {
                facts,
                in_metrics: None,
            }),
            stall_timeout,
            supervised,
            archive: Mutex::new(archive),
            triggers: std::sync::OnceLock::new(),
            layouts: std::sync::OnceLock::new(),
            recipes,
            started: Instant::now(),
        })
    }

    /// The run's cameras as configured (once, at start, before the status
    /// feed is made): their cavity layouts, for the per-cavity tallies the
    /// feed makes at start, `/api/status` and the page.
    pub fn set_cameras(&self, cameras: &[CameraConfig]) {
        self.set_cavity_layouts(cameras.iter().map(|c| c.source.layout.clone()).collect());
    }

    /// As `set_cameras`, the layouts alone (by camera index).
    pub fn set_cavity_layouts(&self, layouts: Vec<Option<Arc<CavityLayout>>>) {
        let _ = self.layouts.set(layouts.into());
    }

    /// Each camera's cavity layout, by index (empty before `set_cameras`).
    pub fn cavity_layouts(&self) -> CavityLayouts {
        self.layouts.get().cloned().unwrap_or_else(|| Arc::new([]))
    }

    /// Turns `POST /api/trigger` on (once, at start).
    pub fn set_triggers(&self, api: super::TriggerApi) {
        let _ = self.triggers.set(api);
    }

    /// Turns `POST /api/recipe`, `/api/status`'s recipe and the recipe
    /// metrics on (once, at start, with `[recipes.NAME]`).
    pub fn set_recipes(&self, api: super::RecipeApi) {
        let _ = self.recipes.set(api);
    }

    /// The recipes, when the config has them.
    pub fn recipes(&self) -> Option<&super::RecipeApi> {
        self.recipes.get()
    }

    /// The HTTP trigger's desks and waiters, once it is on.
    pub fn triggers(&self) -> Option<&super::TriggerApi> {
        self.triggers.get()
    }

    /// The latest facts; `build_info` and `model_info` in `metrics` follow
    /// them before this returns, so a scrape after a swap names the new models.
    pub fn facts(&self) -> RunFacts {
        let mut reader = self.facts.lock().unwrap_or_else(|p| p.into_inner());
        let facts = reader.facts.borrow_and_update().clone();
        if let Some(info) = &facts.info
            && reader.in_metrics.as_ref() != Some(info)
        {
            match &reader.in_metrics {
                None => self.metrics.register_info(&info.backend, &info.models),
                Some(_) => self.metrics.set_models(&info.models),
            }
            reader.in_metrics = Some(info.clone());
        }
        facts
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
        self.health_of(&self.facts())
    }

    /// As `health`, from facts already read (one snapshot per request).
    /// With named cameras, each lost one is named after the verdict ("ok:
    /// results moving, ...; camera side lost since ..."): the process is
    /// healthy while another camera inspects, as with one lost `[source]`.
    pub fn health_of(&self, facts: &RunFacts) -> Result<String, String> {
        let lost = cameras::lost_cameras_note(facts);
        match self.run_health(facts) {
            Ok(text) => Ok(text + &lost),
            Err(reason) => Err(reason + &lost),
        }
    }

    /// How long a camera may send no result before it counts as idle.
    pub fn idle_after(&self) -> Duration {
        self.stall_timeout
    }

    fn run_health(&self, facts: &RunFacts) -> Result<String, String> {
        match facts.state {
            RunState::Starting => {
                return Err("starting: loading models and opening the source".into());
            }
            RunState::Stopping => return Err("stopping: finishing the frames in flight".into()),
            RunState::Stopped => return Err("stopped: the pipeline has ended".into()),
            RunState::Running => {}
        }
        let Some(liveness) = &facts.liveness else {
            return Err("starting: the stages are not running yet".into());
        };
        match liveness.health(Instant::now(), self.stall_timeout) {
            Health::Alive { in_flight } => {
                Ok(format!("ok: results moving, {in_flight} frames in flight"))
            }
            // In plc mode frames flow and are passed over until a trigger
            // claims one: idle is waiting for the PLC, not a silent camera.
            Health::Idle if !facts.external.triggers.is_empty() => {
                let (accepted, _, passed_over) = facts.external.trigger_counts();
                Ok(format!(
                    "ok: idle, waiting for a trigger (the camera streams: {passed_over} frames passed over untriggered, {accepted} triggers accepted so far)"
                ))
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
        self.facts().source_up()
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}
