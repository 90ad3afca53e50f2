//! Recipes as the OPC UA side sees them (`RecipeBook`): the service's
//! `crate::recipe::RecipeDesk` with `[recipes.NAME]`, or one recipe,
//! "default", without. RecipeManagement's methods and StartSingleJob's
//! RecipeId come here; the pump (`server`) asks `finished` on each tick
//! and fires RecipePrepared for each preparation done.
//!
//! ```text
//! PrepareRecipe(id) ─▶ RecipeDesk::prepare ─▶ IsCompleted = false, ticket kept (at most PENDING_MAX)
//!   pump tick (50 ms) ─▶ RecipeDesk::outcome(ticket) ─▶ Ok: RecipePrepared event / refused: RecipeError
//! StartSingleJob(RecipeId) ─▶ active: trigger / prepared: RecipeDesk::request, wait (≤ SWITCH_WAIT), trigger
//!                              not prepared: Error 9, no trigger
//! ```
//!
//! A recipe is named by its id ("2") or its name ("cup200"), in an
//! ExternalId or an InternalId; empty or "0" is the active one. InternalIds
//! this server returns carry the name.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::recipe::{RecipeDesk, Selector, SwitchError, Ticket};

/// The one recipe's name without `[recipes.*]`.
pub const DEFAULT_RECIPE: &str = "default";
/// How long StartSingleJob waits for the switch to a prepared recipe (a
/// hand-over: milliseconds; the server's thread waits with it).
pub const SWITCH_WAIT: Duration = Duration::from_secs(1);
/// Preparations watched at once; a PrepareRecipe beyond is refused (Error 8).
const PENDING_MAX: usize = 16;
/// A preparation not done by then is no longer watched (logged): models
/// open, are gated and warmed in seconds to a few minutes.
const PENDING_LIMIT: Duration = Duration::from_secs(15 * 60);

/// Why a recipe request was refused: its `Error` output is `code()`, the
/// numbers the Modbus map uses for the same refusals (6 to 8) and 9.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecipeRefused {
    #[error("{0}")]
    Unknown(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Busy(String),
    #[error("recipe \"{0}\" is not prepared: call PrepareRecipe first and wait for RecipePrepared")]
    NotPrepared(String),
}

impl RecipeRefused {
    pub fn code(&self) -> i32 {
        match self {
            RecipeRefused::Unknown(_) => 6,
            RecipeRefused::Refused(_) => 7,
            RecipeRefused::Busy(_) => 8,
            RecipeRefused::NotPrepared(_) => 9,
        }
    }
}

impl From<SwitchError> for RecipeRefused {
    fn from(error: SwitchError) -> RecipeRefused {
        let text = error.to_string();
        match error {
            SwitchError::Unknown { .. } => RecipeRefused::Unknown(text),
            SwitchError::Refused { .. } => RecipeRefused::Refused(text),
            SwitchError::Busy { .. } | SwitchError::NotRunning { .. } => RecipeRefused::Busy(text),
        }
    }
}

/// A recipe as GetRecipeListFiltered lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    /// 0 for "default" (no `[recipes.*]`).
    pub id: u16,
    /// Active, or prepared and kept ready.
    pub prepared: bool,
}

/// A preparation's end, for the camera whose PrepareRecipe asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub camera: usize,
    /// What the client named it by (the event's ExternalId).
    pub asked: String,
    pub outcome: Result<String, RecipeRefused>,
}

struct Pending {
    camera: usize,
    asked: String,
    ticket: Option<Ticket>,
    since: Instant,
}

/// The recipes, shared by every camera's station and the pump.
#[derive(Clone)]
pub struct RecipeBook {
    desk: Option<Arc<RecipeDesk>>,
    pending: Arc<Mutex<Vec<Pending>>>,
}

impl RecipeBook {
    /// With the service's desk (`[recipes.NAME]`), or `None`: "default" only.
    pub fn new(desk: Option<Arc<RecipeDesk>>) -> RecipeBook {
        RecipeBook {
            desk,
            pending: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The recipe judging from the next part on.
    pub fn active(&self) -> String {
        self.desk.as_ref().map_or_else(
            || DEFAULT_RECIPE.to_string(),
            |d| d.active().name.to_string(),
        )
    }

    /// The one being prepared now ("" for none).
    pub fn preparing(&self) -> String {
        self.desk
            .as_ref()
            .and_then(|d| d.preparing())
            .map_or_else(String::new, |r| r.name.to_string())
    }

    /// The recipes kept ready besides the active one, by name, comma-separated.
    pub fn prepared_names(&self) -> String {
        self.desk.as_ref().map_or_else(String::new, |d| {
            d.prepared()
                .iter()
                .map(|r| r.name.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// The recipe `asked` names: `None` for the active one (empty, "0").
    fn selector(asked: &str) -> Option<Selector> {
        let asked = asked.trim();
        if asked.is_empty() || asked == "0" {
            return None;
        }
        Some(match asked.parse::<u16>() {
            Ok(id) => Selector::Id(id),
            Err(_) => Selector::Name(asked.to_string()),
        })
    }

    /// Without recipes: "default" (or empty, "0") is the one recipe.
    fn the_default(asked: &str) -> Result<String, RecipeRefused> {
        match Self::selector(asked) {
            None => Ok(DEFAULT_RECIPE.to_string()),
            Some(Selector::Name(name)) if name == DEFAULT_RECIPE => Ok(name),
            Some(other) => Err(RecipeRefused::Unknown(format!(
                "no recipe {other}: this service has no [recipes.NAME] tables, its one recipe is \"{DEFAULT_RECIPE}\""
            ))),
        }
    }

    /// StartSingleJob's RecipeId: the active recipe, or a prepared one made
    /// active now (waiting at most `SWITCH_WAIT`). `Ok`: the recipe that
    /// judges the job's part.
    pub fn for_job(&self, asked: &str) -> Result<String, RecipeRefused> {
        let Some(desk) = &self.desk else {
            return Self::the_default(asked);
        };
        let Some(selector) = Self::selector(asked) else {
            return Ok(desk.active().name.to_string());
        };
        let recipe = desk.find(&selector)?;
        if recipe == desk.active() {
            return Ok(recipe.name.to_string());
        }
        if !desk.prepared().contains(&recipe) {
            return Err(RecipeRefused::NotPrepared(recipe.name.to_string()));
        }
        let ticket = desk.request(&selector)?;
        match desk.wait(ticket, SWITCH_WAIT) {
            Some(Ok(active)) => Ok(active.name.to_string()),
            Some(Err(error)) => Err(error.into()),
            None => Err(RecipeRefused::Busy(format!(
                "the switch to recipe \"{}\" did not end within {} ms; it goes on: start the job again once ActiveRecipe names it",
                recipe.name,
                SWITCH_WAIT.as_millis()
            ))),
        }
    }

    /// PrepareRecipe for camera `camera`: `Ok((name, completed))`, where
    /// `completed` is false while it is being prepared (RecipePrepared
    /// follows); a RecipePrepared is fired for a completed one too.
    pub fn prepare(&self, camera: usize, asked: &str) -> Result<(String, bool), RecipeRefused> {
        let (name, ticket) = match &self.desk {
            None => (Self::the_default(asked)?, None),
            Some(desk) => {
                let selector = Self::selector(asked);
                let recipe = match &selector {
                    None => desk.active(),
                    Some(selector) => desk.find(selector)?,
                };
                let mut pending = self.lock();
                if pending.len() >= PENDING_MAX {
                    return Err(RecipeRefused::Busy(format!(
                        "{PENDING_MAX} preparations are under way or unannounced; ask again later"
                    )));
                }
                let ticket = desk.prepare(&Selector::Name(recipe.name.to_string()))?;
                let completed = desk.outcome(ticket).is_some();
                pending.push(Pending {
                    camera,
                    asked: asked.to_string(),
                    ticket: Some(ticket),
                    since: Instant::now(),
                });
                return Ok((recipe.name.to_string(), completed));
            }
        };
        self.lock().push(Pending {
            camera,
            asked: asked.to_string(),
            ticket,
            since: Instant::now(),
        });
        Ok((name, true))
    }

    /// UnprepareRecipe: the recipe's prepared models freed (the active one
    /// and one not prepared: nothing to do). `Ok`: its name.
    pub fn unprepare(&self, asked: &str) -> Result<String, RecipeRefused> {
        let Some(desk) = &self.desk else {
            return Self::the_default(asked);
        };
        let recipe = match Self::selector(asked) {
            None => desk.active(),
            Some(selector) => desk.find(&selector)?,
        };
        desk.unprepare(&Selector::Name(recipe.name.to_string()))?;
        Ok(recipe.name.to_string())
    }

    /// Every recipe, in the config's order.
    pub fn list(&self) -> Vec<Listed> {
        let Some(desk) = &self.desk else {
            return vec![Listed {
                name: DEFAULT_RECIPE.to_string(),
                id: 0,
                prepared: true,
            }];
        };
        let active = desk.active();
        let prepared = desk.prepared();
        desk.recipes()
            .list
            .iter()
            .map(|r| Listed {
                name: r.name.to_string(),
                id: r.id,
                prepared: **r == *active || prepared.contains(r),
            })
            .collect()
    }

    /// The preparations that ended since the last call; those watched past
    /// `PENDING_LIMIT` are dropped (logged).
    pub fn finished(&self) -> Vec<Finished> {
        let mut pending = self.lock();
        let mut done = Vec::new();
        pending.retain(|p| {
            let outcome = match (&self.desk, p.ticket) {
                (Some(desk), Some(ticket)) => match desk.outcome(ticket) {
                    Some(outcome) => outcome
                        .map(|r| r.name.to_string())
                        .map_err(RecipeRefused::from),
                    None if p.since.elapsed() > PENDING_LIMIT => {
                        log::warn!(target: "sealcheck::opcua", asked = p.asked.as_str();
                            "OPC UA PrepareRecipe({:?}): no outcome within {} min; no RecipePrepared will be fired for it",
                            p.asked, PENDING_LIMIT.as_secs() / 60);
                        return false;
                    }
                    None => return true,
                },
                _ => Self::the_default(&p.asked),
            };
            done.push(Finished {
                camera: p.camera,
                asked: p.asked.clone(),
                outcome,
            });
            false
        });
        done
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Pending>> {
        // Each statement leaves the list whole: a panic elsewhere leaves it usable.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[path = "recipe_tests.rs"]
mod tests;
