//! `POST /api/trigger?part_id=N[&camera=NAME]`: one inspection of part N,
//! answered with its result, for tests and line scripts (`[trigger] http =
//! true`, `mode = "plc"`). It takes the same trigger desk as the PLC's
//! Modbus server: the part gets exactly one result, on every interface.
//!
//! Answers: 200 with the result (a fail too: `no_frame`, `overrun`,
//! `late`); 400 for a bad part id; 404 for an unknown camera or when the
//! HTTP trigger is off; 503 when the trigger is refused (the reason in the
//! text), nothing owed; 504 when no result came in time (the part still
//! gets its result on the other interfaces).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::telemetry::Telemetry;
use crate::trigger::{PartWaiters, TriggerDesk, verdict_of};

/// What the HTTP trigger takes triggers through (set by the pipeline).
pub struct TriggerApi {
    /// Each camera: its name (`None` for `[source]`), desk and verdicts.
    pub cameras: Vec<(Option<String>, Arc<TriggerDesk>, Arc<PartWaiters>)>,
    /// The longest a request waits for its part's result.
    pub wait: Duration,
}

#[derive(serde::Deserialize)]
pub(super) struct TriggerQuery {
    part_id: Option<String>,
    camera: Option<String>,
}

pub(super) async fn trigger(
    State(t): State<Arc<Telemetry>>,
    Query(query): Query<TriggerQuery>,
) -> Response {
    let Some(api) = t.triggers() else {
        return (
            StatusCode::NOT_FOUND,
            "the HTTP trigger is off: set [trigger] mode = \"plc\" and http = true\n",
        )
            .into_response();
    };
    let Some(id) = query.part_id.as_deref().and_then(|s| s.parse::<u32>().ok()) else {
        return (
            StatusCode::BAD_REQUEST,
            "part_id must be a whole number from 0 to 4294967295, e.g. /api/trigger?part_id=4711\n",
        )
            .into_response();
    };
    let camera = match &query.camera {
        None => api.cameras.first(),
        Some(name) => api
            .cameras
            .iter()
            .find(|(n, _, _)| n.as_deref() == Some(name.as_str())),
    };
    let Some((name, desk, waiters)) = camera else {
        let names: Vec<&str> = api
            .cameras
            .iter()
            .filter_map(|(n, _, _)| n.as_deref())
            .collect();
        return (
            StatusCode::NOT_FOUND,
            format!(
                "no camera {:?}; the cameras are: {}\n",
                query.camera.unwrap_or_default(),
                names.join(", ")
            ),
        )
            .into_response();
    };
    // Subscribed before the trigger: its verdict cannot slip past.
    let mut verdicts = waiters.subscribe();
    let part = match desk.trigger(u64::from(id), crate::frame::TriggeredBy::Http) {
        Ok(part) => part,
        Err(refused) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("trigger refused: {refused}\n"),
            )
                .into_response();
        }
    };
    let Some(v) = verdict_of(&mut verdicts, part.number, api.wait).await else {
        return (
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "part {id} was triggered but its result did not come within {} ms; the results file and MQTT have it\n",
                api.wait.as_millis()
            ),
        )
            .into_response();
    };
    let d = &v.decision;
    axum::Json(TriggerAnswer {
        camera: name.as_deref(),
        part_id: v.part.id,
        seq: v.part.framed.then_some(v.seq),
        verdict: d.verdict.as_str(),
        reason: d.reason.as_str(),
        defect_prob: d.defect_prob,
        seal_area: d.seal_area,
        latency_ms: v.latency_ms,
        recipe: v.models.as_deref().and_then(|m| m.recipe_name()),
    })
    .into_response()
}

/// The answer: the result line's numbers with its fixed decimals
/// (`json_line`), so that both read the same.
#[derive(serde::Serialize)]
struct TriggerAnswer<'a> {
    camera: Option<&'a str>,
    part_id: u64,
    seq: Option<u64>,
    verdict: &'static str,
    reason: &'static str,
    #[serde(serialize_with = "crate::json_line::six_decimals")]
    defect_prob: Option<f64>,
    #[serde(serialize_with = "crate::json_line::six_decimals")]
    seal_area: Option<f64>,
    #[serde(serialize_with = "crate::json_line::three_decimals")]
    latency_ms: f64,
    /// With `[recipes.NAME]`: the recipe that judged the part.
    #[serde(skip_serializing_if = "Option::is_none")]
    recipe: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::TriggerAnswer;

    #[test]
    fn the_answer_has_the_results_files_fixed_decimals() {
        let answer = TriggerAnswer {
            camera: None,
            part_id: 4711,
            seq: Some(192),
            verdict: "pass",
            reason: "ok",
            defect_prob: Some(0.000_041),
            seal_area: Some(2.44140625e-6),
            latency_ms: 37.038830000000004,
            recipe: None,
        };
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"camera":null,"part_id":4711,"seq":192,"verdict":"pass","reason":"ok","defect_prob":0.000041,"seal_area":0.000002,"latency_ms":37.039}"#
        );
    }
}
