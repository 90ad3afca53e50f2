//! The pipeline's end of the shadow: the lane between the output thread and
//! the shadow thread (`lane`), the thread's start when a config first asks
//! for a shadow and its later changes (`ShadowControl`), and the check
//! `check-config` runs (`check`).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Sender, bounded};

use super::agreement::ShadowAgreement;
use super::engine::ShadowRefused;
use super::handoff::{ShadowGate, ShadowHandoff};
use super::judge::{RECORDS, ShadowChange, ShadowJudge};
use crate::config::Config;
use crate::frame::{PixelDemand, TensorGeometry};

/// How long a result line of a shadowed frame waits for the shadow's
/// verdict before it is written without it (the shadow is stuck, or far
/// behind on a saturated machine).
pub const LINE_WAIT: Duration = Duration::from_secs(5);

/// How long the start waits for the shadow to open before production starts
/// without it (it goes on opening, and judges once ready).
pub const START_WAIT: Duration = Duration::from_secs(60);

/// The pipeline's end: starts the shadow thread when a config first asks
/// for a shadow, and hands it every later config.
pub struct ShadowControl {
    changes: Sender<ShadowChange>,
    /// Not started yet (no `[shadow]` so far).
    judge: Option<ShadowJudge>,
    thread: Option<JoinHandle<()>>,
}

/// The two ends of the shadow for one run: the output thread's hand-off and
/// the pipeline's control. `host_tensors`: the work records carry the
/// preprocessed tensors (host path); else the shadow preprocesses pixels
/// the device thread keeps for it through `demand`.
pub fn lane(
    geometry: TensorGeometry,
    host_tensors: bool,
    demand: Arc<PixelDemand>,
    agreement: Arc<ShadowAgreement>,
) -> (ShadowHandoff, ShadowControl) {
    let (frames_tx, frames_rx) = bounded(RECORDS);
    let (verdicts_tx, verdicts_rx) = bounded(RECORDS);
    let (free_tx, free_rx) = bounded(RECORDS);
    let (changes_tx, changes_rx) = bounded(4);
    let gate = Arc::new(ShadowGate::default());
    let handoff = ShadowHandoff {
        gate: Arc::clone(&gate),
        free: free_rx,
        frames: frames_tx,
        verdicts: verdicts_rx,
        agreement: Arc::clone(&agreement),
        host_tensors,
    };
    let judge = ShadowJudge::new(
        frames_rx,
        verdicts_tx,
        free_tx,
        changes_rx,
        gate,
        demand,
        host_tensors,
        agreement,
        geometry,
    );
    let control = ShadowControl {
        changes: changes_tx,
        judge: Some(judge),
        thread: None,
    };
    (handoff, control)
}

impl ShadowControl {
    /// Whether a `[shadow]` was ever applied in this run.
    pub fn started(&self) -> bool {
        self.thread.is_some()
    }

    /// Hands `config` to the shadow thread, starting it when `config` is
    /// the first to have a `[shadow]`. With `wait`, returns once the shadow
    /// opened or was refused, or after `START_WAIT` (the start: the first
    /// frames are then judged by it too); otherwise at once (a reload: it opens beside the running
    /// one, which judges until then).
    pub fn apply(&mut self, config: &Config, wait: bool) -> Option<Result<(), ShadowRefused>> {
        if self.thread.is_none() {
            config.shadow.as_ref()?;
            let judge = self.judge.take()?;
            match std::thread::Builder::new()
                .name("shadow".into())
                .spawn(move || judge.run())
            {
                Ok(thread) => self.thread = Some(thread),
                Err(e) => {
                    log::error!(target: "sealcheck::shadow", error = e.to_string().as_str();
                        "cannot start the shadow thread; production runs on without a shadow");
                    return None;
                }
            }
        }
        let (reply, outcome) = bounded(1);
        let change = ShadowChange {
            production: Box::new(config.clone()),
            reply: wait.then_some(reply),
        };
        if wait {
            if self.changes.send(change).is_err() {
                return None;
            }
            return match outcome.recv_timeout(START_WAIT) {
                Ok(opened) => Some(opened),
                Err(_) => {
                    log::warn!(target: "sealcheck::shadow", waited_s = START_WAIT.as_secs();
                        "the shadow is still opening (a TensorRT build?); production starts without waiting for it, the shadow judges once it is ready");
                    None
                }
            };
        }
        // A reload never waits behind a shadow still opening the last one.
        if let Err(crossbeam_channel::TrySendError::Full(_)) = self.changes.try_send(change) {
            log::warn!(target: "sealcheck::shadow",
                "the shadow is still opening earlier [shadow] settings; this reload's are not applied to it: reload again once the journal says `shadow running` or `shadow refused`");
        }
        None
    }
}

/// `check-config`: opens the shadow as `run` would (open, contract,
/// warm-up), against production's models opened the same way for their
/// tensor shapes. `Ok(None)` when there is no `[shadow]`; `Ok(Some(..))`
/// names the engine that would run it.
pub fn check(config: &Config) -> Result<Option<String>, ShadowRefused> {
    let Some(shadow) = &config.shadow else {
        return Ok(None);
    };
    let production = crate::infer::open_backend(config).map_err(|e| ShadowRefused {
        step: "open",
        key: "[models]",
        detail: format!("production's models, whose shapes the shadow must match: {e}"),
    })?;
    let geometry =
        crate::infer::geometry(production.backend.as_ref()).map_err(|e| ShadowRefused {
            step: "contract",
            key: "[models]",
            detail: e.to_string(),
        })?;
    drop(production);
    let opened = super::engine::open(config, shadow, geometry)?;
    Ok(Some(opened.backend.kind().as_str().to_string()))
}
