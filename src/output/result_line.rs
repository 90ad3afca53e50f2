//! A frame's result line: the JSON object every result writes (the schema
//! in `docs/INTEGRATION.md`), its fixed-decimal numbers, and the fields the
//! output stage adds (`late`, `models`).

use std::time::SystemTime;

use serde::Serialize;

use crate::cycle::{CycleVerdicts, JsonCycle};
use crate::decision::Decision;
use crate::frame::FrameMeta;
use crate::json_line::{self, write_json};
use crate::line::ModelIds;

/// Latencies of one frame in milliseconds: preprocess, segment, classify, total.
pub type FrameLatencies = [f64; 4];

/// Formats one result line into `line` (cleared first). Reuses the buffer's
/// capacity: no allocation once it has grown to a line's size.
pub fn format_result(
    line: &mut String,
    camera: Option<&str>,
    meta: &FrameMeta,
    decision: &Decision,
    latencies: Option<&FrameLatencies>,
) {
    let mut result = ResultLine::new(meta, decision, latencies);
    result.camera = camera;
    write_json(line, &result);
}

/// Formats the output stage's result line into `line` (cleared first):
/// `format_result`'s line with `"late"` (the line got a `late` fail for this
/// part instead of this result), `"models"` (the model ids) and, with
/// recipes, `"recipe"` (its name) after it.
#[allow(clippy::too_many_arguments)]
pub fn format_output_line(
    line: &mut String,
    camera: Option<&str>,
    meta: &FrameMeta,
    decision: &Decision,
    latencies: Option<&FrameLatencies>,
    late: bool,
    models: Option<&ModelIds>,
    cycle: Option<&CycleVerdicts>,
) {
    let mut result = ResultLine::new(meta, decision, latencies).with_cavities(cycle);
    result.camera = camera;
    write_json(
        line,
        &OutputLine {
            result,
            late,
            models,
            recipe: models.and_then(ModelIds::recipe_name),
        },
    );
}

/// One frame's result, as the results file (and `inspect`, which names the
/// image first) writes it; the key order is the line's.
#[derive(Serialize)]
pub struct ResultLine<'a> {
    /// With `[cameras.NAME]`: the camera (its `seq` counts on its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    camera: Option<&'a str>,
    /// The judged frame; `null` for a triggered part no frame was judged
    /// for (`no_frame`, `overrun`).
    seq: Option<u64>,
    /// `[trigger] mode = "plc"`: the part's id as the PLC named it;
    /// `"camera"`: the camera's count of its frames (`seq` + 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    part_id: Option<u64>,
    /// `plc`: when the trigger came; `camera`: the frame's capture.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "json_line::rfc3339_or_null"
    )]
    triggered: Option<SystemTime>,
    /// The frame's capture time (a part without a frame: its trigger's).
    #[serde(serialize_with = "json_line::rfc3339")]
    ts: SystemTime,
    verdict: &'static str,
    reason: &'static str,
    #[serde(serialize_with = "json_line::six_decimals")]
    defect_prob: Option<f64>,
    #[serde(serialize_with = "json_line::six_decimals")]
    seal_area: Option<f64>,
    /// `null` for a frame no stage timed (not inspected, not captured).
    latency_ms: Option<LatencyMs>,
    /// `plc`: from the trigger to the frame's capture and to the verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    trigger_ms: Option<TriggerMs>,
    /// With a cavity layout: `cavities`, `reject`, `reject_mask`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    cycle: Option<JsonCycle<'a>>,
}

impl<'a> ResultLine<'a> {
    pub fn new(meta: &FrameMeta, decision: &Decision, latencies: Option<&FrameLatencies>) -> Self {
        let trigger = meta.part.trigger;
        ResultLine {
            camera: None,
            seq: meta.part.framed.then_some(meta.seq),
            part_id: meta.part.triggered_id(),
            triggered: trigger.map(|t| t.at),
            ts: meta.captured_at,
            verdict: decision.verdict.as_str(),
            reason: decision.reason.as_str(),
            defect_prob: decision.defect_prob,
            seal_area: decision.seal_area,
            latency_ms: latencies.map(|&[preprocess, segment, classify, total]| LatencyMs {
                preprocess,
                segment,
                classify,
                total,
            }),
            trigger_ms: trigger.map(|t| TriggerMs {
                frame: meta
                    .part
                    .framed
                    .then(|| ms_between(t.instant, meta.captured_instant)),
                verdict: t.instant.elapsed().as_secs_f64() * 1e3,
            }),
            cycle: None,
        }
    }

    /// The cycle's cavities, after the fields above (a camera with a
    /// cavity layout).
    pub fn with_cavities(self, cycle: Option<&'a CycleVerdicts>) -> ResultLine<'a> {
        ResultLine {
            cycle: cycle.map(CycleVerdicts::json),
            ..self
        }
    }
}

/// Milliseconds from `from` to `to` (0 when `to` is earlier).
pub(super) fn ms_between(from: std::time::Instant, to: std::time::Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1e3
}

/// A triggered part's times, from its trigger.
#[derive(Serialize)]
struct TriggerMs {
    /// To the capture of its frame (`delay_ms` plus the wait for the
    /// next frame); `null` without a frame.
    #[serde(serialize_with = "json_line::three_decimals_or_null")]
    frame: Option<f64>,
    /// To the verdict (as the result line is made).
    #[serde(serialize_with = "json_line::three_decimals")]
    verdict: f64,
}

#[derive(Serialize)]
struct LatencyMs {
    #[serde(serialize_with = "json_line::three_decimals")]
    preprocess: f64,
    #[serde(serialize_with = "json_line::three_decimals")]
    segment: f64,
    #[serde(serialize_with = "json_line::three_decimals")]
    classify: f64,
    #[serde(serialize_with = "json_line::three_decimals")]
    total: f64,
}

/// The output stage's line (`format_output_line`): the result's fields,
/// then what the output stage adds.
#[derive(Serialize)]
struct OutputLine<'a> {
    #[serde(flatten)]
    result: ResultLine<'a>,
    late: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    models: Option<&'a ModelIds>,
    /// With `[recipes.NAME]`: the recipe that judged the part (a part no
    /// model judged: the recipe active then).
    #[serde(skip_serializing_if = "Option::is_none")]
    recipe: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Reason;
    use crate::decision::Verdict;
    use std::time::UNIX_EPOCH;

    #[test]
    fn result_line_is_json_with_the_schema() {
        let meta = FrameMeta {
            seq: 7,
            camera: 0,
            captured_at: UNIX_EPOCH,
            captured_instant: std::time::Instant::now(),
            part: crate::frame::Part::free(7),
        };
        let d = Decision {
            verdict: Verdict::Fail,
            reason: Reason::Defect,
            defect_prob: Some(0.93),
            seal_area: Some(0.2),
        };
        let mut line = String::new();
        format_result(&mut line, None, &meta, &d, Some(&[1.0, 2.0, 3.0, 7.5]));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["ts"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["verdict"], "fail");
        assert_eq!(v["reason"], "defect");
        assert!((v["defect_prob"].as_f64().unwrap() - 0.93).abs() < 1e-9);
        assert_eq!(v["latency_ms"]["total"], 7.5);
    }

    #[test]
    fn line_fields_are_appended_as_json() {
        let meta = FrameMeta {
            seq: 3,
            camera: 0,
            captured_at: UNIX_EPOCH,
            captured_instant: std::time::Instant::now(),
            part: crate::frame::Part::free(3),
        };
        let mut line = String::new();
        let models = ModelIds {
            segmentation: "aaaaaaaaaaaa".into(),
            classifier: "bbbbbbbbbbbb".into(),
            recipe: None,
        };
        format_output_line(
            &mut line,
            None,
            &meta,
            &Decision::error(),
            None,
            true,
            Some(&models),
            None,
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["late"], true);
        assert_eq!(v["models"]["segmentation"], "aaaaaaaaaaaa");
        assert_eq!(v["reason"], "error");
    }

    /// People parse these lines byte for byte: the bytes are pinned as they
    /// were when the line was still written by hand (fixed decimals, nulls).
    #[test]
    fn result_line_bytes_are_pinned() {
        let meta = FrameMeta {
            seq: 7,
            camera: 0,
            captured_at: UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123),
            captured_instant: std::time::Instant::now(),
            part: crate::frame::Part::free(7),
        };
        let d = Decision {
            verdict: Verdict::Fail,
            reason: Reason::Defect,
            defect_prob: Some(0.93),
            seal_area: Some(f64::NAN),
        };
        let mut line = String::new();
        format_result(
            &mut line,
            None,
            &meta,
            &d,
            Some(&[1.0, 2.25, 0.0004, 12_345.678_9]),
        );
        assert_eq!(
            line,
            "{\"seq\":7,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"fail\",\"reason\":\"defect\",\"defect_prob\":0.930000,\"seal_area\":null,\"latency_ms\":{\"preprocess\":1.000,\"segment\":2.250,\"classify\":0.000,\"total\":12345.679}}"
        );
        let d = Decision {
            verdict: Verdict::Pass,
            reason: Reason::Ok,
            defect_prob: Some(1e-7),
            seal_area: Some(-0.0),
        };
        format_result(&mut line, None, &meta, &d, Some(&[0.0, 0.0, 0.0, 0.0]));
        assert_eq!(
            line,
            "{\"seq\":7,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"pass\",\"reason\":\"ok\",\"defect_prob\":0.000000,\"seal_area\":-0.000000,\"latency_ms\":{\"preprocess\":0.000,\"segment\":0.000,\"classify\":0.000,\"total\":0.000}}"
        );
        format_result(&mut line, None, &meta, &Decision::not_inspected(), None);
        assert_eq!(
            line,
            "{\"seq\":7,\"ts\":\"2023-11-14T22:13:20.123Z\",\"verdict\":\"fail\",\"reason\":\"not_inspected\",\"defect_prob\":null,\"seal_area\":null,\"latency_ms\":null}"
        );
    }

    #[test]
    fn line_fields_bytes_are_pinned() {
        let meta = FrameMeta {
            seq: 3,
            camera: 0,
            captured_at: UNIX_EPOCH,
            captured_instant: std::time::Instant::now(),
            part: crate::frame::Part::free(3),
        };
        let models = ModelIds {
            segmentation: "0123456789ab".into(),
            classifier: "unreadable".into(),
            recipe: None,
        };
        let mut line = String::new();
        format_output_line(
            &mut line,
            None,
            &meta,
            &Decision::error(),
            None,
            true,
            Some(&models),
            None,
        );
        assert_eq!(
            line,
            "{\"seq\":3,\"ts\":\"1970-01-01T00:00:00.000Z\",\"verdict\":\"fail\",\"reason\":\"error\",\"defect_prob\":null,\"seal_area\":null,\"latency_ms\":null,\"late\":true,\"models\":{\"segmentation\":\"0123456789ab\",\"classifier\":\"unreadable\"}}"
        );
        format_output_line(
            &mut line,
            None,
            &meta,
            &Decision::late(),
            Some(&[1.5, 2.0, 3.0, 70.25]),
            false,
            None,
            None,
        );
        assert_eq!(
            line,
            "{\"seq\":3,\"ts\":\"1970-01-01T00:00:00.000Z\",\"verdict\":\"fail\",\"reason\":\"late\",\"defect_prob\":null,\"seal_area\":null,\"latency_ms\":{\"preprocess\":1.500,\"segment\":2.000,\"classify\":3.000,\"total\":70.250},\"late\":false}"
        );
    }

    #[test]
    fn not_inspected_line_has_nulls() {
        let meta = FrameMeta {
            seq: 1,
            camera: 0,
            captured_at: UNIX_EPOCH,
            captured_instant: std::time::Instant::now(),
            part: crate::frame::Part::free(1),
        };
        let mut line = String::new();
        format_result(&mut line, None, &meta, &Decision::not_inspected(), None);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["reason"], "not_inspected");
        assert!(v["defect_prob"].is_null() && v["latency_ms"].is_null());
    }
}
