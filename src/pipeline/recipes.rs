//! `[recipes.NAME]` in a run (`crate::recipe`): the recipe desk made before
//! what takes requests (Modbus, HTTP), the start recipe's models opened at
//! start, and the worker started once the model thread runs.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::reload::ModelSwapTarget;
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
    telemetry: Option<&Arc<Telemetry>>,
) -> std::io::Result<JoinHandle<()>> {
    if let Some(telemetry) = telemetry {
        telemetry.set_recipes(RecipeApi {
            desk: Arc::clone(desk),
            counts,
        });
    }
    set_deadlines(config, lines, &desk.active());
    let (base, lines) = (config.clone(), lines.to_vec());
    let on_switched = Box::new(move |recipe: &Arc<Recipe>| set_deadlines(&base, &lines, recipe));
    match model_swap {
        Some(target) => start_worker(desk, config.clone(), target.clone(), on_switched),
        None => start_worker(desk, config.clone(), NoSwap, on_switched),
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
