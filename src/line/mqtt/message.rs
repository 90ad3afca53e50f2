//! The verdict message, one JSON object per part on `<topic>/verdict`; its
//! schema is `docs/verdict.schema.json` (documented in docs/INTEGRATION.md).

use std::time::SystemTime;

use serde::Serialize;

use crate::cycle::{CycleVerdicts, JsonCycle};
use crate::json_line::{self, write_json};
use crate::line::verdict::LineVerdict;
use crate::model_id::ModelIds;

/// Formats `v` into `out` (cleared first), in its capacity; `models` are
/// `v`'s (else the line output's first), with their recipe.
pub fn format_verdict(out: &mut String, v: &LineVerdict, models: &ModelIds) {
    let d = &v.decision;
    let trigger = v.part.trigger;
    let message = VerdictMessage {
        seq: v.part.framed.then_some(v.seq),
        part: v.part.id,
        part_id: v.part.triggered_id(),
        camera: v.camera.as_deref(),
        ts: v.captured_at,
        triggered: trigger.map(|t| t.at),
        verdict: d.verdict.as_str(),
        reason: d.reason.as_str(),
        evaluation: d.reason.evaluation().as_str(),
        defect_prob: d.defect_prob,
        seal_area: d.seal_area,
        latency_ms: v.latency_ms,
        deadline: v.deadline.map(|d| d.at),
        expires: v.deadline.map(|d| d.expires_at),
        models,
        recipe: models.recipe_name(),
        cycle: v.cavities.as_deref().map(CycleVerdicts::json),
    };
    write_json(out, &message);
}

/// The message's fields in the schema's order.
#[derive(Serialize)]
struct VerdictMessage<'a> {
    /// The judged frame; `null` for a triggered part without one.
    seq: Option<u64>,
    /// The part's id: `seq` in `free` mode, the PLC's id in `plc` mode.
    part: u64,
    /// `plc` mode: the PLC's id again, under the name every output uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    part_id: Option<u64>,
    /// With `[cameras.NAME]`: whose part (the topic says it too, for a
    /// subscriber of `<topic>/+/verdict`).
    #[serde(skip_serializing_if = "Option::is_none")]
    camera: Option<&'a str>,
    #[serde(serialize_with = "json_line::rfc3339")]
    ts: SystemTime,
    /// `plc` mode: when the trigger came (the deadline counts from it).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "json_line::rfc3339_or_null"
    )]
    triggered: Option<SystemTime>,
    verdict: &'static str,
    reason: &'static str,
    evaluation: &'static str,
    #[serde(serialize_with = "json_line::six_decimals")]
    defect_prob: Option<f64>,
    #[serde(serialize_with = "json_line::six_decimals")]
    seal_area: Option<f64>,
    #[serde(serialize_with = "json_line::three_decimals")]
    latency_ms: f64,
    #[serde(serialize_with = "json_line::rfc3339_or_null")]
    deadline: Option<SystemTime>,
    #[serde(serialize_with = "json_line::rfc3339_or_null")]
    expires: Option<SystemTime>,
    models: &'a ModelIds,
    /// With `[recipes.NAME]`: the recipe that judged the part (a `late`
    /// fail: the one active then).
    #[serde(skip_serializing_if = "Option::is_none")]
    recipe: Option<&'a str>,
    /// With a cavity layout: `cavities`, `reject`, `reject_mask`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    cycle: Option<JsonCycle<'a>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::frame::FrameMeta;
    use crate::line::part_deadline::PartDeadline;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn message_has_every_field() {
        let mut meta = FrameMeta::now(41);
        meta.captured_at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let v = LineVerdict {
            seq: 41,
            part: meta.part,
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: Decision::late(),
            latency_ms: 60.5,
            deadline: Some(PartDeadline::of(&meta, Duration::from_millis(60))),
            models: None,
            camera: None,
            cavities: None,
        };
        let models = ModelIds {
            segmentation: "0123456789ab".into(),
            classifier: "ba9876543210".into(),
            recipe: None,
        };
        let mut s = String::new();
        format_verdict(&mut s, &v, &models);
        let j: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(j["seq"], 41);
        assert_eq!(j["part"], 41);
        assert_eq!(j["ts"], "2023-11-14T22:13:20.123Z");
        assert_eq!(j["deadline"], "2023-11-14T22:13:20.183Z");
        assert_eq!(j["verdict"], "fail");
        assert_eq!(j["reason"], "late");
        assert_eq!(j["evaluation"], "NotDecidable");
        assert!(j["defect_prob"].is_null());
        assert_eq!(j["latency_ms"], 60.5);
        assert_eq!(j["models"]["classifier"], "ba9876543210");
    }

    /// PLCs parse this message byte for byte: the bytes are pinned as they
    /// were when it was still written by hand (fixed decimals, nulls).
    #[test]
    fn message_bytes_are_pinned() {
        let mut meta = FrameMeta::now(41);
        meta.captured_at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let models = ModelIds {
            segmentation: "0123456789ab".into(),
            classifier: "ba9876543210".into(),
            recipe: None,
        };
        let late = LineVerdict {
            seq: 41,
            part: meta.part,
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: Decision::late(),
            latency_ms: 60.5,
            deadline: Some(PartDeadline::of(&meta, Duration::from_millis(60))),
            models: None,
            camera: None,
            cavities: None,
        };
        let mut s = String::new();
        format_verdict(&mut s, &late, &models);
        assert_eq!(
            s,
            "{\"seq\":41,\"part\":41,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"fail\",\"reason\":\"late\",\"evaluation\":\"NotDecidable\",\"defect_prob\":null,\"seal_area\":null,\"latency_ms\":60.500,\"deadline\":\"2023-11-14T22:13:20.183Z\",\"expires\":\"2023-11-14T22:13:20.183Z\",\"models\":{\"segmentation\":\"0123456789ab\",\"classifier\":\"ba9876543210\"}}"
        );
        let pass = LineVerdict {
            decision: Decision {
                verdict: crate::decision::Verdict::Pass,
                reason: crate::decision::Reason::Ok,
                defect_prob: Some(0.012_345_67),
                seal_area: Some(f64::INFINITY),
            },
            latency_ms: 12.000_4,
            deadline: None,
            ..late
        };
        format_verdict(&mut s, &pass, &models);
        assert_eq!(
            s,
            "{\"seq\":41,\"part\":41,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"pass\",\"reason\":\"ok\",\"evaluation\":\"OK\",\"defect_prob\":0.012346,\"seal_area\":null,\"latency_ms\":12.000,\"deadline\":null,\"expires\":null,\"models\":{\"segmentation\":\"0123456789ab\",\"classifier\":\"ba9876543210\"}}"
        );
        let camera = LineVerdict {
            camera: Some("side".into()),
            cavities: None,
            ..pass.clone()
        };
        format_verdict(&mut s, &camera, &models);
        assert!(
            s.starts_with("{\"seq\":41,\"part\":41,\"camera\":\"side\",\"ts\":"),
            "{s}"
        );
        let nan_latency = LineVerdict {
            latency_ms: f64::NAN,
            ..pass
        };
        format_verdict(&mut s, &nan_latency, &models);
        assert_eq!(
            s,
            "{\"seq\":41,\"part\":41,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"pass\",\"reason\":\"ok\",\"evaluation\":\"OK\",\"defect_prob\":0.012346,\"seal_area\":null,\"latency_ms\":null,\"deadline\":null,\"expires\":null,\"models\":{\"segmentation\":\"0123456789ab\",\"classifier\":\"ba9876543210\"}}"
        );
    }
}
