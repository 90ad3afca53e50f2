//! `RecipeDesk`: which recipe is active, which one is being prepared, and
//! what became of each request (a ticket's outcome). Every interface (the
//! Modbus stations, HTTP, later OPC UA) shares one desk; one switch runs at
//! a time, and a request while one runs is refused (`SwitchError::Busy`).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::config::{Recipe, Recipes};

/// A request's number: what `outcome` and `wait` are asked with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// How a request names its recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// The PLC's id (holding register 2, `?id=N`).
    Id(u16),
    /// The table's name (`?name=NAME`).
    Name(String),
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::Id(id) => write!(f, "id {id}"),
            Selector::Name(name) => write!(f, "\"{name}\""),
        }
    }
}

/// Why a recipe is not the active one after a request. The active recipe
/// keeps running in every case.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SwitchError {
    #[error("no recipe {asked}; the recipes are: {known}")]
    Unknown { asked: String, known: String },
    #[error(
        "recipe \"{preparing}\" is being prepared; ask again once it is active (one switch at a time)"
    )]
    Busy { preparing: Arc<str> },
    #[error(
        "recipe \"{recipe}\" refused at step `{step}`: {detail}; recipe \"{active}\" stays active"
    )]
    Refused {
        recipe: Arc<str>,
        active: Arc<str>,
        /// `open`, `contract`, `acceptance`, `warm-up` (`model_swap`), or
        /// `hand-over` (the model thread did not take it).
        step: &'static str,
        detail: String,
    },
    #[error("recipes cannot be switched now: {why}")]
    NotRunning { why: &'static str },
}

/// Outcomes kept for tickets not yet asked about (a PLC reads one at a time).
const OUTCOMES_KEPT: usize = 64;

/// What a worker is asked to do with `recipe`.
pub(super) struct Job {
    pub ticket: Ticket,
    pub recipe: Arc<Recipe>,
    pub kind: JobKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JobKind {
    /// Prepare it (if not prepared) and make it the active one.
    Switch,
    /// Prepare it and keep it ready; the active recipe stays.
    Prepare,
    /// Let go of what was prepared for it.
    Unprepare,
}

/// The recipes' state, shared by every interface and the worker.
pub struct RecipeDesk {
    recipes: Recipes,
    state: Mutex<State>,
    finished: Condvar,
}

struct State {
    active: Arc<Recipe>,
    /// The switch (or preparation) under way, if any.
    busy: Option<(Ticket, Arc<Recipe>)>,
    /// Recipes prepared and kept ready (`prepare`), in the order prepared.
    prepared: Vec<Arc<Recipe>>,
    outcomes: VecDeque<(Ticket, Result<Arc<Recipe>, SwitchError>)>,
    next: u64,
    /// The worker's queue, while it runs (`attach` .. `detach`).
    worker: Option<Sender<Job>>,
    switches: u64,
    refusals: u64,
}

impl RecipeDesk {
    /// A desk whose active recipe is `recipes`' start recipe; it takes
    /// requests once a worker is attached (`start_worker`).
    pub fn new(recipes: Recipes) -> Arc<RecipeDesk> {
        Arc::new(RecipeDesk {
            state: Mutex::new(State {
                active: Arc::clone(recipes.start()),
                busy: None,
                prepared: Vec::new(),
                outcomes: VecDeque::with_capacity(OUTCOMES_KEPT),
                next: 1,
                worker: None,
                switches: 0,
                refusals: 0,
            }),
            recipes,
            finished: Condvar::new(),
        })
    }

    pub fn recipes(&self) -> &Recipes {
        &self.recipes
    }

    /// The recipe judging now (the last one handed over).
    pub fn active(&self) -> Arc<Recipe> {
        Arc::clone(&self.lock().active)
    }

    /// The recipe being prepared, if a switch is under way.
    pub fn preparing(&self) -> Option<Arc<Recipe>> {
        self.lock().busy.as_ref().map(|(_, r)| Arc::clone(r))
    }

    /// Switches done and refused since start (`/metrics`).
    pub fn counts(&self) -> (u64, u64) {
        let state = self.lock();
        (state.switches, state.refusals)
    }

    /// The recipe `selector` names.
    pub fn find(&self, selector: &Selector) -> Result<Arc<Recipe>, SwitchError> {
        let found = match selector {
            Selector::Id(id) => self.recipes.by_id(*id),
            Selector::Name(name) => self.recipes.by_name(name),
        };
        found.cloned().ok_or_else(|| SwitchError::Unknown {
            asked: selector.to_string(),
            known: self.recipes.known(),
        })
    }

    /// Asks for `selector`'s recipe to become the active one. Refused at
    /// once (nothing changes) for an unknown recipe, while another switch
    /// is under way, or before the models run; otherwise the worker
    /// prepares it (unless prepared: `prepare`) and hands it over, and
    /// `outcome(ticket)` says when it is done. The active recipe asked
    /// again is done at once.
    pub fn request(&self, selector: &Selector) -> Result<Ticket, SwitchError> {
        self.submit(selector, JobKind::Switch)
    }

    /// Asks for `selector`'s recipe to be prepared (its models opened,
    /// checked, gated and warmed up) and kept ready, the active recipe
    /// running on: a later `request` for it then only hands it over.
    /// Refused as `request` is; `outcome(ticket)` is the recipe once it is
    /// ready. The active recipe, or one prepared already, is ready at once.
    pub fn prepare(&self, selector: &Selector) -> Result<Ticket, SwitchError> {
        self.submit(selector, JobKind::Prepare)
    }

    /// Lets go of what was prepared for `selector`'s recipe (its models
    /// are freed). Refused for an unknown recipe and while it is being
    /// prepared; a recipe not prepared is no error.
    pub fn unprepare(&self, selector: &Selector) -> Result<(), SwitchError> {
        let recipe = self.find(selector)?;
        let mut state = self.lock();
        if let Some((_, busy)) = &state.busy
            && **busy == *recipe
        {
            return Err(SwitchError::Busy {
                preparing: Arc::clone(&busy.name),
            });
        }
        let Some(index) = state.prepared.iter().position(|r| **r == *recipe) else {
            return Ok(());
        };
        state.prepared.remove(index);
        let ticket = Ticket(state.next);
        state.next += 1;
        if let Some(worker) = &state.worker {
            // The queue holds one job: the worker is idle (nothing is busy).
            let _ = worker.try_send(Job {
                ticket,
                recipe,
                kind: JobKind::Unprepare,
            });
        }
        Ok(())
    }

    /// The recipes prepared and kept ready, in the order prepared.
    pub fn prepared(&self) -> Vec<Arc<Recipe>> {
        self.lock().prepared.clone()
    }

    fn submit(&self, selector: &Selector, kind: JobKind) -> Result<Ticket, SwitchError> {
        let refused = |state: &mut State, error: SwitchError| {
            state.refusals += 1;
            log::warn!(target: "sealcheck::recipe", asked:% = selector, error:% = error; "recipe request refused: {error}");
            Err(error)
        };
        let recipe = self.find(selector);
        let mut state = self.lock();
        let recipe = match recipe {
            Ok(recipe) => recipe,
            Err(error) => return refused(&mut state, error),
        };
        if let Some((_, preparing)) = &state.busy {
            let error = SwitchError::Busy {
                preparing: Arc::clone(&preparing.name),
            };
            return refused(&mut state, error);
        }
        let ticket = Ticket(state.next);
        state.next += 1;
        let ready = match kind {
            JobKind::Switch => *recipe == *state.active,
            JobKind::Prepare => {
                *recipe == *state.active || state.prepared.iter().any(|r| **r == *recipe)
            }
            JobKind::Unprepare => false,
        };
        if ready {
            state.record(ticket, Ok(recipe));
            return Ok(ticket);
        }
        let Some(worker) = state.worker.clone() else {
            let error = SwitchError::NotRunning {
                why: "the service is starting or stopping",
            };
            return refused(&mut state, error);
        };
        state.busy = Some((ticket, Arc::clone(&recipe)));
        log::info!(target: "sealcheck::recipe", recipe = &*recipe.name, id = recipe.id, active = &*state.active.name, switch = kind == JobKind::Switch;
            "recipe {} requested: preparing recipe \"{}\"", if kind == JobKind::Switch { "switch" } else { "preparation" }, recipe.name);
        drop(state);
        if worker
            .send(Job {
                ticket,
                recipe,
                kind,
            })
            .is_err()
        {
            let error = SwitchError::NotRunning {
                why: "the service is stopping",
            };
            self.finish(ticket, Err(error.clone()));
            return Err(error);
        }
        Ok(ticket)
    }

    /// What became of `ticket`: `None` while it is being prepared (or when
    /// it is too old to be kept).
    pub fn outcome(&self, ticket: Ticket) -> Option<Result<Arc<Recipe>, SwitchError>> {
        self.lock()
            .outcomes
            .iter()
            .find(|(t, _)| *t == ticket)
            .map(|(_, outcome)| outcome.clone())
    }

    /// `outcome`, waiting up to `limit` for it.
    pub fn wait(
        &self,
        ticket: Ticket,
        limit: Duration,
    ) -> Option<Result<Arc<Recipe>, SwitchError>> {
        let until = Instant::now() + limit;
        let mut state = self.lock();
        loop {
            if let Some((_, outcome)) = state.outcomes.iter().find(|(t, _)| *t == ticket) {
                return Some(outcome.clone());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            state = self
                .finished
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The worker takes requests from now on.
    pub(super) fn attach(&self, worker: Sender<Job>) {
        self.lock().worker = Some(worker);
    }

    /// No more requests (the service stops): the worker's queue closes, and
    /// it ends after the job it is on.
    pub fn detach(&self) {
        self.lock().worker = None;
    }

    /// The worker's word on a switch's `ticket`: the recipe now active, or why not.
    pub(super) fn finish(&self, ticket: Ticket, outcome: Result<Arc<Recipe>, SwitchError>) {
        let mut state = self.lock();
        if state.busy.as_ref().is_some_and(|(t, _)| *t == ticket) {
            state.busy = None;
        }
        match &outcome {
            Ok(recipe) => {
                state.active = Arc::clone(recipe);
                state.prepared.retain(|r| **r != **recipe);
                state.switches += 1;
            }
            Err(_) => state.refusals += 1,
        }
        state.record(ticket, outcome);
        drop(state);
        self.finished.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Each statement leaves the state whole: a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RecipeDesk {
    /// The worker's word on a preparation's `ticket`: the recipe ready, or why not.
    pub(super) fn finish_prepare(&self, ticket: Ticket, outcome: Result<Arc<Recipe>, SwitchError>) {
        let mut state = self.lock();
        if state.busy.as_ref().is_some_and(|(t, _)| *t == ticket) {
            state.busy = None;
        }
        match &outcome {
            Ok(recipe) => {
                if !state.prepared.iter().any(|r| **r == **recipe) {
                    state.prepared.push(Arc::clone(recipe));
                }
            }
            Err(_) => state.refusals += 1,
        }
        state.record(ticket, outcome);
        drop(state);
        self.finished.notify_all();
    }
}

impl State {
    fn record(&mut self, ticket: Ticket, outcome: Result<Arc<Recipe>, SwitchError>) {
        if self.outcomes.len() == OUTCOMES_KEPT {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back((ticket, outcome));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DecisionOverrides;

    fn recipes() -> Recipes {
        let recipe = |id, name: &str| {
            Arc::new(Recipe {
                id,
                name: name.into(),
                segmentation: None,
                classifier: None,
                decision: DecisionOverrides::default(),
                cameras: Vec::new(),
            })
        };
        Recipes {
            list: vec![recipe(1, "cup125"), recipe(2, "cup200")],
            start: 0,
        }
    }

    #[test]
    fn an_unknown_recipe_is_refused_naming_the_known_ones() {
        let desk = RecipeDesk::new(recipes());
        let error = desk.request(&Selector::Id(9)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "no recipe id 9; the recipes are: cup125 (id 1), cup200 (id 2)"
        );
        assert_eq!(desk.counts(), (0, 1));
        assert_eq!(&*desk.active().name, "cup125");
    }

    #[test]
    fn before_a_worker_runs_a_switch_is_refused_and_the_active_one_is_done_at_once() {
        let desk = RecipeDesk::new(recipes());
        let ticket = desk.request(&Selector::Name("cup125".into())).unwrap();
        assert_eq!(&*desk.outcome(ticket).unwrap().unwrap().name, "cup125");
        assert!(matches!(
            desk.request(&Selector::Id(2)),
            Err(SwitchError::NotRunning { .. })
        ));
    }

    #[test]
    fn one_switch_at_a_time_and_the_outcome_makes_the_recipe_active() {
        let desk = RecipeDesk::new(recipes());
        let (jobs, queue) = crossbeam_channel::unbounded();
        desk.attach(jobs);
        let ticket = desk.request(&Selector::Id(2)).unwrap();
        assert_eq!(&*desk.preparing().unwrap().name, "cup200");
        assert_eq!(
            desk.request(&Selector::Id(1)).unwrap_err(),
            SwitchError::Busy {
                preparing: "cup200".into()
            }
        );
        assert!(desk.outcome(ticket).is_none());
        assert!(desk.wait(ticket, Duration::from_millis(20)).is_none());
        let job = queue.try_recv().unwrap();
        assert_eq!(job.ticket, ticket);
        // The worker finishes from its own thread; a waiter wakes.
        let waiter = {
            let desk = Arc::clone(&desk);
            std::thread::spawn(move || desk.wait(ticket, Duration::from_secs(10)))
        };
        desk.finish(ticket, Ok(job.recipe));
        let done = waiter.join().unwrap().unwrap().unwrap();
        assert_eq!(&*done.name, "cup200");
        assert_eq!(&*desk.active().name, "cup200");
        assert!(desk.preparing().is_none());
        assert_eq!(desk.counts(), (1, 1));
    }

    #[test]
    fn a_refused_switch_keeps_the_active_recipe() {
        let desk = RecipeDesk::new(recipes());
        let (jobs, _queue) = crossbeam_channel::unbounded();
        desk.attach(jobs);
        let ticket = desk.request(&Selector::Id(2)).unwrap();
        let refusal = SwitchError::Refused {
            recipe: "cup200".into(),
            active: "cup125".into(),
            step: "acceptance",
            detail: "accuracy 0.5 below the floor 0.9".into(),
        };
        desk.finish(ticket, Err(refusal.clone()));
        assert_eq!(desk.outcome(ticket), Some(Err(refusal)));
        assert_eq!(&*desk.active().name, "cup125");
        // The desk takes the next request.
        desk.request(&Selector::Id(2)).unwrap();
    }
}
