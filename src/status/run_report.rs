//! What the pipeline tells of its run (state, engine and models, the other
//! rooms' counters), handed to the status server over a watch channel: the
//! pipeline sends, whoever reads takes the latest value. With `[status]`
//! off nobody reads and the sends cost a lock each, so the pipeline carries
//! no `Option` and no "is the page on?" check.
//!
//! ```text
//! pipeline ──RunReport::set_*──▶ watch ──▶ Telemetry::facts() (HTTP thread:
//!                                          /healthz, /api/status, /metrics)
//! ```

use std::sync::Arc;

use tokio::sync::watch;

use super::external::ExternalStats;
use crate::service::Liveness;
use crate::shadow::ShadowAgreement;

/// The run as the status server last heard of it.
#[derive(Clone)]
pub struct RunFacts {
    pub state: RunState,
    /// The pipeline's liveness record, once the stages are about to start.
    pub liveness: Option<Liveness>,
    /// The engine and models, once the engine is chosen; models follow a swap.
    pub info: Option<RunInfo>,
    /// Counters the other rooms own, once they exist.
    pub external: ExternalStats,
    /// The shadow's agreement with production, when the run can have a
    /// shadow (its state says whether one runs).
    pub shadow: Option<Arc<ShadowAgreement>>,
}

impl RunFacts {
    /// Whether frames are coming from the source (as the watchdog last saw
    /// it). With several cameras, only while every camera's are: one lost
    /// camera is parts without verdicts, and the alert on
    /// `sealcheck_source_up` must fire for it.
    pub fn source_up(&self) -> bool {
        (0..self.external.cameras.len().max(1)).all(|i| self.camera_up(i))
    }

    /// Whether camera `index`'s source is up: the first camera as
    /// `source_up` judged it before there were several (the watchdog's
    /// view), each other one by its own source's state (a replay: while
    /// the run runs).
    pub fn camera_up(&self, index: usize) -> bool {
        if self.state != RunState::Running {
            return false;
        }
        if index == 0 {
            let streaming = self
                .liveness
                .as_ref()
                .is_some_and(Liveness::source_streaming);
            return streaming && self.external.source.as_ref().is_none_or(|s| s.is_up());
        }
        self.external
            .cameras
            .get(index)
            .and_then(|c| c.status.as_ref())
            .is_none_or(crate::capture::SourceStatus::is_up)
    }
}

impl Default for RunFacts {
    fn default() -> Self {
        RunFacts {
            state: RunState::Starting,
            liveness: None,
            info: None,
            external: ExternalStats::default(),
            shadow: None,
        }
    }
}

/// The pipeline's end of the watch: cheap to share (`Arc`), never blocks a
/// reader for longer than a field's update.
pub struct RunReport {
    sender: watch::Sender<RunFacts>,
}

impl Default for RunReport {
    fn default() -> Self {
        RunReport {
            sender: watch::Sender::new(RunFacts::default()),
        }
    }
}

impl RunReport {
    pub fn new() -> Arc<RunReport> {
        Arc::new(RunReport::default())
    }

    /// A reader for the status server.
    pub fn subscribe(&self) -> watch::Receiver<RunFacts> {
        self.sender.subscribe()
    }

    pub fn set_state(&self, state: RunState) {
        self.sender.send_modify(|facts| facts.state = state);
    }

    pub fn set_liveness(&self, liveness: Liveness) {
        self.sender
            .send_modify(|facts| facts.liveness = Some(liveness));
    }

    pub fn set_info(&self, info: RunInfo) {
        self.sender.send_modify(|facts| facts.info = Some(info));
    }

    /// After a model swap: the models judging now (role, file, id).
    pub fn set_models(&self, models: Vec<(&'static str, String, String)>) {
        self.sender.send_modify(|facts| {
            if let Some(info) = facts.info.as_mut() {
                info.models = models;
            }
        });
    }

    pub fn set_shadow(&self, shadow: Arc<ShadowAgreement>) {
        self.sender.send_modify(|facts| facts.shadow = Some(shadow));
    }

    pub fn set_external(&self, external: ExternalStats) {
        self.sender.send_modify(|facts| facts.external = external);
    }
}

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
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub backend: String,
    pub source: String,
    /// The cameras by `FrameMeta::camera`: `[cameras.NAME]`'s names, or
    /// one `None` for `[source]`.
    pub cameras: Vec<Option<String>>,
    /// (role, file name, model id)
    pub models: Vec<(&'static str, String, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_the_latest_facts_and_sends_need_no_reader() {
        let report = RunReport::new();
        // Nobody listens ([status] off): every send still succeeds.
        report.set_state(RunState::Running);
        let reader = report.subscribe();
        assert_eq!(reader.borrow().state, RunState::Running);
        report.set_info(RunInfo {
            backend: "tract".into(),
            source: "file".into(),
            cameras: vec![None],
            models: vec![("segmentation", "seg.onnx".into(), "aaaa".into())],
        });
        report.set_models(vec![("segmentation", "new.onnx".into(), "bbbb".into())]);
        report.set_state(RunState::Stopping);
        let facts = reader.borrow();
        assert_eq!(facts.state, RunState::Stopping);
        let info = facts.info.as_ref().expect("info was sent");
        assert_eq!(
            (info.backend.as_str(), info.models[0].2.as_str()),
            ("tract", "bbbb")
        );
    }
}
