//! The "recipe" thread: takes one request at a time from the desk, prepares
//! the recipe beside the running one (the same steps as a model swap on
//! reload, behind the same acceptance gate) and hands it to the thread that
//! runs the models, which takes it before the next part.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::desk::{Job, RecipeDesk, SwitchError};
use crate::config::{Config, Recipe};
use crate::model_swap::SwapRefused;

/// Where a prepared recipe goes: the pipeline's model thread
/// (`pipeline::reload::ModelSwapTarget` implements it).
pub trait RecipeSwap: Send {
    /// Prepares `judged` (the base config with the recipe's models and
    /// thresholds) and hands it to the model thread, tagged with `recipe`.
    /// `same_models`: the running model files stay, only the recipe (its
    /// thresholds) changes, and nothing is opened. Returns once the model
    /// thread has the recipe waiting: it judges every part from the next on.
    fn hand_over(
        &mut self,
        base: &Config,
        judged: &Config,
        recipe: &Arc<Recipe>,
        same_models: bool,
    ) -> Result<(), SwapRefused>;
}

/// Starts the worker and attaches it to `desk`. `on_switched` runs on the
/// worker's thread after each hand-over (each camera's deadline, the status
/// server's models). The thread ends once the desk is detached.
pub fn start_worker(
    desk: &Arc<RecipeDesk>,
    base: Config,
    mut swap: Box<dyn RecipeSwap>,
    on_switched: Box<dyn Fn(&Config, &Arc<Recipe>) + Send>,
) -> std::io::Result<JoinHandle<()>> {
    let (jobs, queue) = crossbeam_channel::bounded::<Job>(1);
    let worker_desk = Arc::clone(desk);
    let thread = std::thread::Builder::new()
        .name("recipe".into())
        .spawn(move || {
            for job in queue {
                let outcome = switch(&worker_desk, &base, swap.as_mut(), &job.recipe);
                if outcome.is_ok() {
                    on_switched(&job.recipe.config(&base), &job.recipe);
                }
                worker_desk.finish(job.ticket, outcome.map(|()| Arc::clone(&job.recipe)));
            }
        })?;
    desk.attach(jobs);
    Ok(thread)
}

fn switch(
    desk: &RecipeDesk,
    base: &Config,
    swap: &mut dyn RecipeSwap,
    recipe: &Arc<Recipe>,
) -> Result<(), SwitchError> {
    let started = Instant::now();
    let active = desk.active();
    let same_models = active.models(base) == recipe.models(base);
    let judged = recipe.config(base);
    swap.hand_over(base, &judged, recipe, same_models)
        .map_err(|refused| {
            log::error!(target: "sealcheck::recipe", recipe = &*recipe.name, id = recipe.id, step = refused.step,
                detail = refused.detail.as_str(), active = &*active.name;
                "recipe \"{}\" refused at step `{}`: {}; recipe \"{}\" stays active", recipe.name, refused.step, refused.detail, active.name);
            SwitchError::Refused {
                recipe: Arc::clone(&recipe.name),
                active: Arc::clone(&active.name),
                step: refused.step,
                detail: refused.detail,
            }
        })?;
    let (segmentation, classifier) = recipe.models(base);
    log::info!(target: "sealcheck::recipe", recipe = &*recipe.name, id = recipe.id, previous = &*active.name,
        models_changed = !same_models, segmentation:% = segmentation.display(), classifier:% = classifier.display(),
        prepare_ms = started.elapsed().as_secs_f64() * 1e3;
        "recipe \"{}\" active: it judges every part from the next one on", recipe.name);
    Ok(())
}
