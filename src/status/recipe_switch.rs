//! `POST /api/recipe?name=NAME` (or `id=N`): switches to the recipe and
//! answers once the switch is done; `&prepare=true` prepares it and keeps it
//! ready, the active recipe running on (`crate::recipe`).
//!
//! Answers: 200 with the active recipe (also when it was active already; a
//! preparation: the recipe prepared and the active one); 400 without `name`
//! or `id`; 404 for an unknown recipe (or without recipes); 409 when the
//! recipe's models are refused (the step and rule in the text); 503 while
//! another switch is under way or the service is starting or stopping; 504
//! when it was not done within `SWITCH_WAIT` (it goes on; `/api/status`
//! shows when it is active). In every case but 200 nothing changed.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::recipes::{SWITCH_WAIT, recipe_json};
use super::telemetry::Telemetry;
use crate::recipe::{Selector, SwitchError};

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
