//! The "recipe" thread: takes one request at a time from the desk, prepares
//! the recipe beside the running one (the same steps as a model swap on
//! reload, behind the same acceptance gate), keeps it ready when asked to
//! (`RecipeDesk::prepare`), and hands it to the thread that runs the models,
//! which takes it before the next part.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::desk::{Job, JobKind, RecipeDesk, SwitchError};
use crate::config::{Config, Recipe};
use crate::model_swap::SwapRefused;

/// Where a recipe's models are prepared and where a recipe goes: the
/// pipeline's model thread (`pipeline::reload::ModelSwapTarget`).
pub trait RecipeSwap: Send + 'static {
    /// Models opened, checked, gated and warmed up, not yet handed over.
    type Prepared: Send;

    /// Prepares `judged`'s models (the base config with the recipe's model
    /// files and thresholds) beside the running ones.
    fn prepare(
        &mut self,
        base: &Config,
        judged: &Config,
        recipe: &Arc<Recipe>,
    ) -> Result<Self::Prepared, SwapRefused>;

    /// Hands `recipe` to the model thread: with `prepared` models, or
    /// (`None`) keeping the running model files, only the recipe (its
    /// thresholds) changing. Returns once the model thread has it waiting:
    /// it judges every part from the next on.
    fn hand_over(
        &mut self,
        judged: &Config,
        recipe: &Arc<Recipe>,
        prepared: Option<Self::Prepared>,
    ) -> Result<(), SwapRefused>;
}

/// Starts the worker and attaches it to `desk`. `on_switched` runs on the
/// worker's thread after each hand-over (each camera's deadline). The
/// thread ends once the desk is detached.
pub fn start_worker<S: RecipeSwap>(
    desk: &Arc<RecipeDesk>,
    base: Config,
    swap: S,
    on_switched: Box<dyn Fn(&Arc<Recipe>) + Send>,
) -> std::io::Result<JoinHandle<()>> {
    let (jobs, queue) = crossbeam_channel::bounded::<Job>(4);
    let mut worker = Worker {
        desk: Arc::clone(desk),
        base,
        swap,
        prepared: HashMap::new(),
    };
    let thread = std::thread::Builder::new()
        .name("recipe".into())
        .spawn(move || {
            for job in queue {
                match job.kind {
                    JobKind::Switch => {
                        let outcome = worker.switch(&job.recipe);
                        if outcome.is_ok() {
                            on_switched(&job.recipe);
                        }
                        let outcome = outcome.map(|()| Arc::clone(&job.recipe));
                        worker.desk.finish(job.ticket, outcome);
                    }
                    JobKind::Prepare => {
                        let outcome = worker.prepare(&job.recipe);
                        let outcome = outcome.map(|()| Arc::clone(&job.recipe));
                        worker.desk.finish_prepare(job.ticket, outcome);
                    }
                    JobKind::Unprepare => {
                        if worker.prepared.remove(&job.recipe.id).is_some() {
                            log::info!(target: "sealcheck::recipe", recipe = &*job.recipe.name, id = job.recipe.id;
                                "recipe \"{}\" no longer kept ready: its prepared models are freed", job.recipe.name);
                        }
                    }
                }
            }
        })?;
    desk.attach(jobs);
    Ok(thread)
}

struct Worker<S: RecipeSwap> {
    desk: Arc<RecipeDesk>,
    base: Config,
    swap: S,
    /// Recipes kept ready, by id: their models (`None`: they were the
    /// running ones when prepared, nothing to open).
    prepared: HashMap<u16, Option<S::Prepared>>,
}

impl<S: RecipeSwap> Worker<S> {
    /// Makes `recipe` the active one: its prepared models, else the running
    /// ones when it judges with those, else models prepared now.
    fn switch(&mut self, recipe: &Arc<Recipe>) -> Result<(), SwitchError> {
        let started = Instant::now();
        let active = self.desk.active();
        let same_models = active.models(&self.base) == recipe.models(&self.base);
        let judged = recipe.config(&self.base);
        let kept = self.prepared.remove(&recipe.id).flatten();
        let was_ready = kept.is_some();
        let models = match (same_models, kept) {
            (true, _) => None,
            (false, Some(kept)) => Some(kept),
            (false, None) => Some(
                self.swap
                    .prepare(&self.base, &judged, recipe)
                    .map_err(|r| self.refused(recipe, &active, r))?,
            ),
        };
        self.swap
            .hand_over(&judged, recipe, models)
            .map_err(|r| self.refused(recipe, &active, r))?;
        let (segmentation, classifier) = recipe.models(&self.base);
        log::info!(target: "sealcheck::recipe", recipe = &*recipe.name, id = recipe.id, previous = &*active.name,
            models_changed = !same_models, prepared_before = was_ready,
            segmentation:% = segmentation.display(), classifier:% = classifier.display(),
            switch_ms = started.elapsed().as_secs_f64() * 1e3;
            "recipe \"{}\" active: it judges every part from the next one on", recipe.name);
        Ok(())
    }

    /// Prepares `recipe`'s models and keeps them ready.
    fn prepare(&mut self, recipe: &Arc<Recipe>) -> Result<(), SwitchError> {
        let started = Instant::now();
        let active = self.desk.active();
        let models = if active.models(&self.base) == recipe.models(&self.base) {
            None
        } else {
            let judged = recipe.config(&self.base);
            Some(
                self.swap
                    .prepare(&self.base, &judged, recipe)
                    .map_err(|r| self.refused(recipe, &active, r))?,
            )
        };
        log::info!(target: "sealcheck::recipe", recipe = &*recipe.name, id = recipe.id, active = &*active.name,
            models_opened = models.is_some(), prepare_ms = started.elapsed().as_secs_f64() * 1e3;
            "recipe \"{}\" prepared and kept ready; recipe \"{}\" stays active", recipe.name, active.name);
        self.prepared.insert(recipe.id, models);
        Ok(())
    }

    fn refused(&self, recipe: &Recipe, active: &Recipe, refused: SwapRefused) -> SwitchError {
        log::error!(target: "sealcheck::recipe", recipe = &*recipe.name, id = recipe.id, step = refused.step,
            detail = refused.detail.as_str(), active = &*active.name;
            "recipe \"{}\" refused at step `{}`: {}; recipe \"{}\" stays active", recipe.name, refused.step, refused.detail, active.name);
        SwitchError::Refused {
            recipe: Arc::clone(&recipe.name),
            active: Arc::clone(&active.name),
            step: refused.step,
            detail: refused.detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::recipe::Selector;

    /// What the test double was asked: `prepare` of a recipe, `hand_over`
    /// of a recipe with prepared models (the prepare's number) or without.
    #[derive(Debug, Clone, PartialEq)]
    enum Call {
        Prepare(&'static str, u32),
        HandOver(&'static str, Option<u32>),
    }

    /// A model thread as a test double: numbers each preparation.
    struct Recorder(Arc<Mutex<Vec<Call>>>, u32);

    fn name(recipe: &Recipe) -> &'static str {
        match &*recipe.name {
            "a" => "a",
            "b" => "b",
            _ => "c",
        }
    }

    impl RecipeSwap for Recorder {
        type Prepared = u32;

        fn prepare(
            &mut self,
            _: &Config,
            _: &Config,
            recipe: &Arc<Recipe>,
        ) -> Result<u32, SwapRefused> {
            self.1 += 1;
            self.0
                .lock()
                .unwrap()
                .push(Call::Prepare(name(recipe), self.1));
            Ok(self.1)
        }

        fn hand_over(
            &mut self,
            _: &Config,
            recipe: &Arc<Recipe>,
            prepared: Option<u32>,
        ) -> Result<(), SwapRefused> {
            self.0
                .lock()
                .unwrap()
                .push(Call::HandOver(name(recipe), prepared));
            Ok(())
        }
    }

    /// Recipes a (start) and c on the config's model files, b on others.
    fn desk() -> (Arc<RecipeDesk>, Arc<Mutex<Vec<Call>>>) {
        let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
        let text = format!(
            "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"{models}/seg.onnx\"\n\
             [models.classifier]\npath = \"{models}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n\
             [recipes.a]\nid = 1\n[recipes.b]\nid = 2\nclassifier = \"{models}/seg.onnx\"\n\
             [recipes.c]\nid = 3\ndefect_threshold = 0.1\n"
        );
        let base = crate::config::parse(&text, std::path::Path::new("/tmp/s.toml")).unwrap();
        let desk = RecipeDesk::new(base.recipes.clone().unwrap());
        let calls = Arc::new(Mutex::new(Vec::new()));
        start_worker(
            &desk,
            base,
            Recorder(Arc::clone(&calls), 0),
            Box::new(|_| {}),
        )
        .unwrap();
        (desk, calls)
    }

    fn done(desk: &RecipeDesk, ticket: crate::recipe::Ticket) -> Arc<Recipe> {
        desk.wait(ticket, Duration::from_secs(10)).unwrap().unwrap()
    }

    #[test]
    fn a_prepared_recipe_is_handed_over_without_being_prepared_again() {
        let (desk, calls) = desk();
        let ready = done(&desk, desk.prepare(&Selector::Name("b".into())).unwrap());
        assert_eq!(&*ready.name, "b");
        assert_eq!(desk.prepared().len(), 1);
        assert_eq!(&*desk.active().name, "a", "preparing does not switch");
        done(&desk, desk.request(&Selector::Id(2)).unwrap());
        assert_eq!(&*desk.active().name, "b");
        assert!(desk.prepared().is_empty());
        assert_eq!(
            *calls.lock().unwrap(),
            [Call::Prepare("b", 1), Call::HandOver("b", Some(1))]
        );
    }

    #[test]
    fn a_switch_prepares_what_it_needs_and_nothing_when_the_models_stay() {
        let (desk, calls) = desk();
        // c judges with a's model files: only its thresholds change.
        done(&desk, desk.request(&Selector::Id(3)).unwrap());
        done(&desk, desk.request(&Selector::Id(2)).unwrap());
        // Prepared, let go, then switched to: prepared again at the switch.
        done(&desk, desk.prepare(&Selector::Id(1)).unwrap());
        desk.unprepare(&Selector::Id(1)).unwrap();
        assert!(desk.prepared().is_empty());
        done(&desk, desk.request(&Selector::Id(1)).unwrap());
        assert_eq!(
            *calls.lock().unwrap(),
            [
                Call::HandOver("c", None),
                Call::Prepare("b", 1),
                Call::HandOver("b", Some(1)),
                Call::Prepare("a", 2),
                Call::Prepare("a", 3),
                Call::HandOver("a", Some(3)),
            ]
        );
        // The active recipe is ready at once, without the worker.
        let ticket = desk.prepare(&Selector::Id(1)).unwrap();
        assert_eq!(&*desk.outcome(ticket).unwrap().unwrap().name, "a");
    }
}
