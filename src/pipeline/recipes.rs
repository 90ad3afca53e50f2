//! `[recipes.NAME]` in a run (`crate::recipe`): the recipe desk made before
//! what takes requests (Modbus, HTTP), the start recipe's models opened at
//! start, and the worker started once the model thread runs.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::reload::ModelSwapTarget;
use crate::capture::CameraSettingsHandle;
use crate::config::{Config, Recipe};
use crate::line::Line;
use crate::model_swap::SwapRefused;
use crate::recipe::{RecipeDesk, RecipeSwap, start_worker};
use crate::stats::RecipeCounts;
use crate::status::{RecipeApi, Telemetry};

/// The recipe desk, with `[recipes.NAME]`; its active recipe is the start one.
pub(super) fn recipe_desk(config: &Config) -> Option<Arc<RecipeDesk>> {
    config.recipes.clone().map(RecipeDesk::new)
}

/// Results counted by recipe, one row per recipe of the config.
pub(super) fn recipe_counts(desk: &RecipeDesk) -> Arc<RecipeCounts> {
    Arc::new(RecipeCounts::new(
        desk.recipes().list.iter().map(|r| Arc::clone(&r.name)),
    ))
}

/// What the models are opened from at start: the config with the start
/// recipe's model files. The thresholds stay the config's: each frame is
/// decided with its recipe's over them (`output::LiveSettings::thresholds`).
pub(super) fn start_models(config: &Config, desk: Option<&Arc<RecipeDesk>>) -> Config {
    let mut judged = config.clone();
    if let Some(desk) = desk {
        let start = desk.active();
        let (segmentation, classifier) = start.models(config);
        judged.segmentation.path = segmentation.to_path_buf();
        judged.classifier.path = classifier.to_path_buf();
    }
    judged
}

/// Starts the recipe worker once the model thread runs: from then on the
/// desk takes requests. Each camera's line gets the start recipe's deadline
/// now and each new recipe's at its hand-over.
pub(super) fn start_recipes(
    config: &Config,
    desk: &Arc<RecipeDesk>,
    counts: Arc<RecipeCounts>,
    model_swap: Option<&ModelSwapTarget>,
    lines: &[Arc<Line>],
    cameras: Vec<Option<CameraSettingsHandle>>,
    telemetry: Option<&Arc<Telemetry>>,
) -> std::io::Result<JoinHandle<()>> {
    if let Some(telemetry) = telemetry {
        telemetry.set_recipes(RecipeApi {
            desk: Arc::clone(desk),
            counts,
        });
    }
    let start = desk.active();
    set_deadlines(config, lines, &start);
    set_cameras(&start, &cameras);
    let (base, lines) = (config.clone(), lines.to_vec());
    let on_switched = Box::new(move |recipe: &Arc<Recipe>| {
        set_deadlines(&base, &lines, recipe);
        set_cameras(recipe, &cameras);
    });
    match model_swap {
        Some(target) => start_worker(desk, config.clone(), target.clone(), on_switched),
        None => start_worker(desk, config.clone(), NoSwap, on_switched),
    }
}

/// Each GenICam camera's exposure and gain under `recipe`, where it sets
/// them. Set as the recipe is handed over: frames already captured are
/// judged with the settings they were taken with. A camera that refuses a
/// value keeps its own, logged (the recipe is active: its models judge).
fn set_cameras(recipe: &Recipe, cameras: &[Option<CameraSettingsHandle>]) {
    for (index, camera) in cameras.iter().enumerate() {
        let (Some(camera), Some(settings)) = (camera, recipe.camera(index)) else {
            continue;
        };
        match camera.apply(settings.exposure_us, settings.gain_db) {
            Ok((exposure_us, gain_db)) => {
                log::info!(target: "sealcheck::recipe", recipe = &*recipe.name, origin = camera.origin(),
                    exposure_us = exposure_us.unwrap_or(f64::NAN), gain_db = gain_db.unwrap_or(f64::NAN);
                    "camera set for recipe \"{}\" (exposure and gain as read back from the camera)", recipe.name)
            }
            Err(e) => {
                log::error!(target: "sealcheck::recipe", recipe = &*recipe.name, origin = camera.origin(), error = e.as_str();
                    "the camera refused recipe \"{}\"'s settings: {e}; it keeps its own (fix the recipe's exposure_us or gain_db)", recipe.name)
            }
        }
    }
}

/// Each camera's deadline under `recipe` (its own, else the camera's).
fn set_deadlines(config: &Config, lines: &[Arc<Line>], recipe: &Recipe) {
    for (camera, line) in config.cameras.iter().zip(lines) {
        line.set_deadline(recipe.decision(&camera.decision).deadline);
    }
}

/// An engine that cannot take other models while it runs: every switch is
/// refused, naming why.
struct NoSwap;

impl RecipeSwap for NoSwap {
    type Prepared = ();

    fn prepare(
        &mut self,
        _base: &Config,
        _judged: &Config,
        _recipe: &Arc<Recipe>,
    ) -> Result<(), SwapRefused> {
        Err(Self::refusal())
    }

    fn hand_over(
        &mut self,
        _judged: &Config,
        _recipe: &Arc<Recipe>,
        _prepared: Option<()>,
    ) -> Result<(), SwapRefused> {
        Err(Self::refusal())
    }
}

impl NoSwap {
    fn refusal() -> SwapRefused {
        SwapRefused {
            step: "open",
            detail: "this engine cannot take other models while it runs; recipes need the host path or a GPU engine that swaps models (docs/OPERATIONS.md, \"Models\")".into(),
        }
    }
}
