//! A reload (SIGHUP): the config file read again, thresholds and output
//! settings applied at once, new model files prepared on this thread and
//! swapped in by the thread that runs the models, the `[shadow]` applied,
//! and every other change logged as needing a restart.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::run_info::model_info;
use crate::config::{self, Config, Recipe};
use crate::infer::ModelSwap;
use crate::infer::device_stage::{DeviceModelsOpener, DeviceSwap};
use crate::model_id::ModelIds;
use crate::model_swap::{self, RunningEngine, SwapRefused};
use crate::output::LiveSettings;
use crate::recipe::RecipeSwap;
use crate::shadow::ShadowControl;
use crate::status::RunReport;

#[derive(Clone)]
pub(super) struct ModelSwapTarget {
    pub(super) sink: SwapSink,
    pub(super) running: RunningEngine,
    /// Where an accepted swap's models are reported (the status server's
    /// `model_info` follows them).
    pub(super) report: Arc<RunReport>,
}

/// The thread that takes new models, and what it takes.
#[derive(Clone)]
pub(super) enum SwapSink {
    /// The infer thread: a whole engine.
    Host(Sender<ModelSwap>),
    /// The device thread: an engine its runner binds; `opener` opens it on
    /// the running device.
    Device {
        swaps: Sender<DeviceSwap>,
        opener: Arc<dyn DeviceModelsOpener>,
    },
}

/// Re-reads the config file. Thresholds and output settings apply at once;
/// new model files are swapped in between two frames once they pass
/// `model_swap::prepare` (host path) or `prepare_device` (GPU device path);
/// anything else that changed is logged as needing a restart. An invalid file is rejected and the running config stays.
pub(super) fn reload(
    current: &mut Config,
    apply: &crossbeam_channel::Sender<LiveSettings>,
    model_swap: Option<&ModelSwapTarget>,
    shadow: &mut ShadowControl,
) {
    let new = match config::load(&current.path) {
        Ok(new) => new,
        Err(e) => {
            log::error!(target: "sealcheck::config", path = current.path.display().to_string().as_str(), error = e.to_string().as_str(); "reload rejected: the config file is invalid; the running config stays");
            return;
        }
    };
    for section in restart_sections(current, &new, model_swap.is_some()) {
        log::warn!(target: "sealcheck::config", section = section; "reload: [{section}] changed but only applies after `systemctl restart sealcheck`");
    }
    // Thresholds apply per camera; a camera added or removed needs a
    // restart (restart_sections said so), and the running ones keep theirs.
    let same_cameras = same_camera_names(current, &new);
    if same_cameras {
        for (running, reloaded) in current.cameras.iter_mut().zip(&new.cameras) {
            running.decision = reloaded.decision;
        }
    }
    let settings = LiveSettings {
        decisions: current.cameras.iter().map(|c| c.decision).collect(),
        output: new.output.clone(),
        archive: new.archive.clone(),
    };
    if apply.send(settings).is_err() {
        return;
    }
    log::info!(target: "sealcheck::config", path = new.path.display().to_string().as_str(); "config reloaded: decision and output settings applied");
    // Keep the running values of what needs a restart, so the next reload compares against them.
    current.decision = new.decision;
    current.output = new.output.clone();
    current.acceptance_images = new.acceptance_images.clone();
    current.archive = new.archive.clone();
    // With recipes, the recipes name the models: a changed file needs a
    // restart (restart_sections said so).
    if let Some(target) = model_swap
        && current.recipes.is_none()
        && model_swap::paths_changed(current, &new)
        && model_swap::only_paths_changed(current, &new)
    {
        swap_models(current, &new, target);
    }
    // After the swap: a shadow that names no model of its own follows
    // production's (swapped) models. The shadow opens on its own thread
    // and a refusal keeps the running one.
    if current.shadow.is_some() || new.shadow.is_some() {
        current.shadow = new.shadow.clone();
        shadow.apply(current, false);
    }
}

/// Opens, checks, gates and warms up the reloaded config's models, then hands
/// them to the infer or device thread. Runs while systemd shows the reload
/// in progress.
fn swap_models(current: &mut Config, new: &Config, target: &ModelSwapTarget) {
    let started = Instant::now();
    log::info!(target: "sealcheck::model_swap", segmentation:% = new.segmentation.path.display(), classifier:% = new.classifier.path.display(), acceptance_images = new.acceptance_images.is_some(); "new model files named: opening them beside the running ones");
    let prepared = match &target.sink {
        SwapSink::Host(swaps) => model_swap::prepare(current, new, target.running).map(|swap| {
            let info = model_info(new, &swap.models);
            let models = Arc::clone(&swap.models);
            let sent = swaps.send(swap).is_ok();
            if sent {
                target.report.set_models(info);
            }
            (models, sent)
        }),
        SwapSink::Device { swaps, opener } => {
            model_swap::prepare_device(current, new, target.running, opener.as_ref()).map(
                |mut swap| {
                    // The device thread may still fail to bind it: the
                    // status follows only a swap that happened.
                    let info = model_info(new, &swap.models);
                    let report = Arc::clone(&target.report);
                    swap.on_swapped = Some(Box::new(move || report.set_models(info)));
                    let models = Arc::clone(&swap.models);
                    (models, swaps.send(swap).is_ok())
                },
            )
        }
    };
    match prepared {
        Ok((models, sent)) => {
            let (seg, cls) = (models.segmentation.clone(), models.classifier.clone());
            if !sent {
                return;
            }
            log::info!(target: "sealcheck::model_swap", segmentation = seg.as_str(), classifier = cls.as_str(), prepare_ms = started.elapsed().as_secs_f64() * 1e3; "new models accepted: they judge from the next frame on");
            current.segmentation = new.segmentation.clone();
            current.classifier = new.classifier.clone();
        }
        Err(refused) => {
            log::error!(target: "sealcheck::model_swap", step = refused.step, detail = refused.detail.as_str(), segmentation:% = new.segmentation.path.display(), classifier:% = new.classifier.path.display(); "{refused}");
        }
    }
}

/// How long the model thread's queue may stay full before a recipe is
/// refused at step `hand-over` (it takes its queue before every part).
const HAND_OVER_WAIT: Duration = Duration::from_secs(10);

/// A recipe's models prepared for one of the two model threads.
pub(super) enum PreparedModels {
    Host(ModelSwap),
    Device(DeviceSwap),
}

/// A recipe switch (`crate::recipe`): its models prepared here as a
/// reload's model swap is (opened, checked, gated, warmed up), then queued
/// for the model thread with the recipe in their ids; or only the recipe's
/// ids, when the running models stay.
impl RecipeSwap for ModelSwapTarget {
    type Prepared = PreparedModels;

    fn prepare(
        &mut self,
        base: &Config,
        judged: &Config,
        _recipe: &Arc<Recipe>,
    ) -> Result<PreparedModels, SwapRefused> {
        Ok(match &self.sink {
            SwapSink::Host(_) => {
                PreparedModels::Host(model_swap::prepare(base, judged, self.running)?)
            }
            SwapSink::Device { opener, .. } => PreparedModels::Device(model_swap::prepare_device(
                base,
                judged,
                self.running,
                opener.as_ref(),
            )?),
        })
    }

    fn hand_over(
        &mut self,
        judged: &Config,
        recipe: &Arc<Recipe>,
        prepared: Option<PreparedModels>,
    ) -> Result<(), SwapRefused> {
        let tagged = |ids: &ModelIds| Arc::new(ids.clone().for_recipe(Some(Arc::clone(recipe))));
        let (models, sent) = match (&self.sink, prepared) {
            (SwapSink::Host(swaps), prepared) => {
                let swap = match prepared {
                    Some(PreparedModels::Host(swap)) => ModelSwap {
                        models: tagged(&swap.models),
                        ..swap
                    },
                    _ => ModelSwap {
                        backend: None,
                        models: tagged(&ModelIds::of(judged)),
                        on_swapped: None,
                    },
                };
                let models = Arc::clone(&swap.models);
                (models, swaps.send_timeout(swap, HAND_OVER_WAIT).is_ok())
            }
            (SwapSink::Device { swaps, .. }, prepared) => {
                let swap = match prepared {
                    Some(PreparedModels::Device(swap)) => DeviceSwap {
                        models: tagged(&swap.models),
                        ..swap
                    },
                    _ => DeviceSwap {
                        engine: None,
                        models: tagged(&ModelIds::of(judged)),
                        on_swapped: None,
                    },
                };
                let models = Arc::clone(&swap.models);
                (models, swaps.send_timeout(swap, HAND_OVER_WAIT).is_ok())
            }
        };
        if !sent {
            return Err(SwapRefused {
                step: "hand-over",
                detail: format!(
                    "the model thread did not take the recipe within {} s (it is stopping, or stuck)",
                    HAND_OVER_WAIT.as_secs()
                ),
            });
        }
        self.report.set_models(model_info(judged, &models));
        Ok(())
    }
}

/// Whether both configs name the same cameras in the same order.
fn same_camera_names(old: &Config, new: &Config) -> bool {
    old.cameras.len() == new.cameras.len()
        && old
            .cameras
            .iter()
            .zip(&new.cameras)
            .all(|(a, b)| a.name == b.name)
}

/// Config sections that differ and cannot change while running.
fn restart_sections(old: &Config, new: &Config, models_swap: bool) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if !same_camera_names(old, new) {
        changed.push("cameras (a camera added, removed or renamed)");
    } else if old
        .cameras
        .iter()
        .zip(&new.cameras)
        .any(|(a, b)| a.source != b.source)
    {
        changed.push("source");
    }
    if old.inference != new.inference {
        changed.push("inference");
    }
    let swappable =
        models_swap && old.recipes.is_none() && model_swap::only_paths_changed(old, new);
    if (old.segmentation != new.segmentation || old.classifier != new.classifier) && !swappable {
        changed.push("models");
    }
    if old.logging != new.logging {
        changed.push("logging");
    }
    if old.service != new.service {
        changed.push("service");
    }
    if old.mqtt != new.mqtt {
        changed.push("mqtt");
    }
    if old.status != new.status {
        changed.push("status");
    }
    if old.trigger != new.trigger {
        changed.push("trigger");
    }
    if old.modbus != new.modbus {
        changed.push("modbus");
    }
    if old.recipes != new.recipes {
        changed.push("recipes");
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
        let text = format!(
            "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"{models}/seg.onnx\"\n\
             [models.classifier]\npath = \"{models}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n{extra}"
        );
        config::parse(&text, std::path::Path::new("/tmp/sealcheck.toml")).unwrap()
    }

    #[test]
    fn a_changed_mqtt_section_needs_a_restart_and_a_deadline_does_not() {
        let old = config("[mqtt]\nurl = \"mqtt://a\"\n");
        let new = config("[mqtt]\nurl = \"mqtt://b\"\n[decision]\ndeadline_ms = 60\n");
        assert_eq!(restart_sections(&old, &new, false), vec!["mqtt"]);
        let deadline_only = config("[mqtt]\nurl = \"mqtt://a\"\n[decision]\ndeadline_ms = 60\n");
        assert!(restart_sections(&old, &deadline_only, false).is_empty());
    }

    #[test]
    fn new_model_paths_need_a_restart_only_where_no_path_can_swap() {
        let old = config("");
        let mut new = old.clone();
        new.classifier.path = "other.onnx".into();
        assert_eq!(restart_sections(&old, &new, false), vec!["models"]);
        assert!(restart_sections(&old, &new, true).is_empty());
        new.classifier.defect_class += 1;
        assert_eq!(restart_sections(&old, &new, true), vec!["models"]);
    }
}
