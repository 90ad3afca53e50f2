//! Counts as the JSON of `/api/status` writes them, for the station and
//! for each camera alike.

use serde_json::{Value, json};

use crate::decision::Reason;

pub fn by_reason(counts: &[u64]) -> Value {
    Reason::ALL
        .iter()
        .zip(counts)
        .map(|(r, n)| (r.as_str().to_string(), json!(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

pub fn yield_pct(passed: u64, total: u64) -> Value {
    if total == 0 {
        Value::Null
    } else {
        json!((passed as f64 * 1000.0 / total as f64).round() / 10.0)
    }
}
