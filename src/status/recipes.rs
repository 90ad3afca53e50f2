//! Recipes on the status server (`[recipes.NAME]`, `crate::recipe`):
//! `POST /api/recipe?name=NAME` (or `id=N`) switches and answers once the
//! switch is done (`&prepare=true`: prepares it and keeps it ready, the
//! active recipe running on); `/api/status` and the page show the active recipe;
//! `/metrics` counts results by recipe.
//!
//! Answers of `POST /api/recipe`: 200 with the active recipe (also when it
//! was active already); 400 without `name` or `id`; 404 for an unknown
//! recipe (or without recipes); 409 when the recipe's models are refused
//! (the step and rule in the text); 503 while another switch is under way
//! or the service is starting or stopping; 504 when it was not done within
//! `SWITCH_WAIT` (it goes on; `/api/status` shows when it is active). In
//! every case but 200 the active recipe keeps running.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde_json::{Value, json};

use super::telemetry::Telemetry;
use crate::config::Recipe;
use crate::decision::Reason;
use crate::recipe::{RecipeDesk, Selector, SwitchError};
use crate::stats::RecipeCounts;

/// The longest `POST /api/recipe` waits for a switch to be done (opening
/// models, the acceptance gate and the warm-up take seconds to minutes).
pub const SWITCH_WAIT: Duration = Duration::from_secs(120);

/// What the status server knows of recipes (set by the pipeline at start).
pub struct RecipeApi {
    pub desk: Arc<RecipeDesk>,
    pub counts: Arc<RecipeCounts>,
}

#[derive(serde::Deserialize)]
pub(super) struct RecipeQuery {
    name: Option<String>,
    id: Option<String>,
    /// `true`: prepare the recipe and keep it ready, the active one running
    /// on (a later switch to it only hands it over).
    prepare: Option<String>,
}

pub(super) async fn switch(
    State(t): State<Arc<Telemetry>>,
    Query(query): Query<RecipeQuery>,
) -> Response {
    let Some(api) = t.recipes() else {
        return (
            StatusCode::NOT_FOUND,
            "the config has no recipes: add [recipes.NAME] tables (docs/INTEGRATION.md, \"Recipes\")\n",
        )
            .into_response();
    };
    let selector = match (&query.name, &query.id) {
        (Some(name), None) => Selector::Name(name.clone()),
        (None, Some(id)) => match id.parse::<u16>() {
            Ok(id) if id > 0 => Selector::Id(id),
            _ => {
                return bad_request(
                    "id must be a whole number from 1 to 65535, e.g. /api/recipe?id=2",
                );
            }
        },
        _ => {
            return bad_request(
                "name the recipe with name or id (one of them), e.g. /api/recipe?name=cup125 or /api/recipe?id=2",
            );
        }
    };
    let prepare = match query.prepare.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return bad_request(
                "prepare is true or false, e.g. /api/recipe?name=cup200&prepare=true",
            );
        }
    };
    let asked = if prepare {
        api.desk.prepare(&selector)
    } else {
        api.desk.request(&selector)
    };
    let ticket = match asked {
        Ok(ticket) => ticket,
        Err(error) => return refusal(&error),
    };
    let desk = Arc::clone(&api.desk);
    let outcome = tokio::task::spawn_blocking(move || desk.wait(ticket, SWITCH_WAIT))
        .await
        .ok()
        .flatten();
    match outcome {
        Some(Ok(recipe)) if prepare => axum::Json(json!({
            "prepared": recipe_json(&recipe),
            "active": recipe_json(&api.desk.active()),
        }))
        .into_response(),
        Some(Ok(recipe)) => axum::Json(json!({ "active": recipe_json(&recipe) })).into_response(),
        Some(Err(error)) => refusal(&error),
        None => (
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "recipe {selector} is still being prepared after {} s; GET /api/status shows when it is active\n",
                SWITCH_WAIT.as_secs()
            ),
        )
            .into_response(),
    }
}

fn bad_request(text: &str) -> Response {
    (StatusCode::BAD_REQUEST, format!("{text}\n")).into_response()
}

fn refusal(error: &SwitchError) -> Response {
    let status = match error {
        SwitchError::Unknown { .. } => StatusCode::NOT_FOUND,
        SwitchError::Refused { .. } => StatusCode::CONFLICT,
        SwitchError::Busy { .. } | SwitchError::NotRunning { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    (status, format!("{error}\n")).into_response()
}

fn recipe_json(recipe: &Recipe) -> Value {
    json!({"id": recipe.id, "name": &*recipe.name})
}

/// `/api/status`'s `"recipe"`: the active one, the one being prepared, and
/// every recipe of the config.
pub(super) fn status_json(api: &RecipeApi) -> Value {
    let desk = &api.desk;
    json!({
        "active": recipe_json(&desk.active()),
        "preparing": desk.preparing().map(|r| recipe_json(&r)),
        "prepared": desk.prepared().iter().map(|r| recipe_json(r)).collect::<Vec<_>>(),
        "recipes": desk.recipes().list.iter().map(|r| recipe_json(r)).collect::<Vec<_>>(),
    })
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecipeVerdictLabels {
    recipe: String,
    verdict: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecipeLabels {
    recipe: String,
}

/// The recipe series of `/metrics`, read at scrape time; none without recipes.
#[derive(Clone)]
pub struct RecipeCollector(pub Arc<std::sync::OnceLock<RecipeApi>>);

impl std::fmt::Debug for RecipeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecipeCollector")
    }
}

impl Collector for RecipeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(api) = self.0.get() else {
            return Ok(());
        };
        {
            let mut family = encoder.encode_descriptor(
                "recipe_results",
                "Result lines by the recipe that judged them, by verdict and reason (summed over recipes: verdicts_total)",
                None,
                MetricType::Counter,
            )?;
            for (recipe, by_reason) in api.counts.snapshot() {
                for (reason, n) in Reason::ALL.iter().zip(by_reason) {
                    ConstCounter::new(n).encode(family.encode_family(&RecipeVerdictLabels {
                        recipe: recipe.to_string(),
                        verdict: reason.verdict().as_str(),
                        reason: reason.as_str(),
                    })?)?;
                }
            }
        }
        let active = api.desk.active();
        {
            let mut family = encoder.encode_descriptor(
                "recipe_active",
                "1 for the recipe judging now, 0 for the others",
                None,
                MetricType::Gauge,
            )?;
            for recipe in &api.desk.recipes().list {
                ConstGauge::new(i64::from(**recipe == *active)).encode(family.encode_family(
                    &RecipeLabels {
                        recipe: recipe.name.to_string(),
                    },
                )?)?;
            }
        }
        let (switches, refusals) = api.desk.counts();
        ConstCounter::new(switches).encode(encoder.encode_descriptor(
            "recipe_switches",
            "Recipe switches done since start",
            None,
            MetricType::Counter,
        )?)?;
        ConstCounter::new(refusals).encode(encoder.encode_descriptor(
            "recipe_refusals",
            "Recipe switches refused since start (unknown recipe, models refused, another switch under way)",
            None,
            MetricType::Counter,
        )?)?;
        Ok(())
    }
}
