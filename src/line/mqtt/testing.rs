//! Helpers the MQTT unit tests share: a verdict, with or without a deadline.

use std::time::Duration;

use crate::decision::Decision;
use crate::frame::FrameMeta;
use crate::line::part_deadline::PartDeadline;
use crate::line::verdict::LineVerdict;

pub(super) fn verdict(seq: u64, deadline_ms: Option<u64>) -> LineVerdict {
    let meta = FrameMeta::now(seq);
    LineVerdict {
        seq,
        part: meta.part,
        captured_at: meta.captured_at,
        captured_instant: meta.captured_instant,
        decision: Decision::error(),
        latency_ms: 1.0,
        deadline: deadline_ms.map(|ms| PartDeadline::of(&meta, Duration::from_millis(ms))),
        models: None,
        camera: None,
        cavities: None,
    }
}
