//! The verdict message, one JSON object per part on `<topic>/verdict`; its
//! schema is `docs/verdict.schema.json` (documented in docs/INTEGRATION.md).

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::line::{LineVerdict, ModelIds};
use crate::timestamp::write_rfc3339;

/// Formats `v` into `out` (cleared first).
pub fn format_verdict(out: &mut String, v: &LineVerdict, models: &ModelIds) {
    out.clear();
    let d = &v.decision;
    let _ = write!(out, "{{\"seq\":{},\"part\":{},\"ts\":\"", v.seq, v.seq);
    write_rfc3339(out, v.captured_at);
    let _ = write!(
        out,
        "\",\"verdict\":\"{}\",\"reason\":\"{}\",\"evaluation\":\"{}\"",
        d.verdict.as_str(),
        d.reason.as_str(),
        d.reason.evaluation().as_str()
    );
    write_number(out, "defect_prob", d.defect_prob, 6);
    write_number(out, "seal_area", d.seal_area, 6);
    write_number(out, "latency_ms", Some(v.latency_ms), 3);
    write_time(out, "deadline", v.deadline.map(|d| d.at));
    write_time(out, "expires", v.deadline.map(|d| d.expires_at));
    out.push_str(",\"models\":");
    models.write_json(out);
    out.push('}');
}

fn write_number(out: &mut String, key: &str, value: Option<f64>, decimals: usize) {
    match value {
        Some(v) if v.is_finite() => {
            let _ = write!(out, ",\"{key}\":{v:.decimals$}");
        }
        _ => {
            let _ = write!(out, ",\"{key}\":null");
        }
    }
}

fn write_time(out: &mut String, key: &str, value: Option<SystemTime>) {
    match value {
        Some(t) => {
            let _ = write!(out, ",\"{key}\":\"");
            write_rfc3339(out, t);
            out.push('"');
        }
        None => {
            let _ = write!(out, ",\"{key}\":null");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::frame::FrameMeta;
    use crate::line::PartDeadline;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn message_has_every_field() {
        let mut meta = FrameMeta::now(41);
        meta.captured_at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let v = LineVerdict {
            seq: 41,
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: Decision::late(),
            latency_ms: 60.5,
            deadline: Some(PartDeadline::of(&meta, Duration::from_millis(60))),
            models: None,
        };
        let models = ModelIds {
            segmentation: "0123456789ab".into(),
            classifier: "ba9876543210".into(),
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
}
