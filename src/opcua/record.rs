//! One result as the OPC UA side keeps it (`ResultRecord`, made from the
//! line's `LineVerdict`), and the last N of a camera (`ResultLog`) that
//! `GetResultById` and `GetResultListFiltered` answer from.

use std::collections::VecDeque;
use std::time::SystemTime;

use super::recipe::DEFAULT_RECIPE;
use crate::decision::Verdict;
use crate::line::LineVerdict;

/// What the client said with `StartSingleJob`, kept until the part's result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobTags {
    pub meas_id: Option<String>,
    pub product_id: Option<String>,
    /// StartSingleJob's RecipeId as the client gave it (the ExternalRecipeId).
    pub recipe_id: Option<String>,
}

/// One camera's result, as the server publishes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRecord {
    /// The part's number on its camera's line: the JobId and ResultId.
    pub number: u64,
    /// The part id (a trigger's), `None` in free mode.
    pub part_id: Option<u64>,
    /// The judged frame's `seq`; `None` for a part without a frame.
    pub seq: Option<u64>,
    pub pass: bool,
    pub reason: &'static str,
    pub defect_prob: Option<f64>,
    pub seal_area: Option<f64>,
    /// Trigger (or capture) to verdict.
    pub latency_ms: f64,
    /// The trigger's time (or the capture's in free mode).
    pub started: SystemTime,
    /// When the line had the verdict.
    pub created: SystemTime,
    pub camera: Option<String>,
    /// The models that judged, `"seg=..,cls=.."`; empty for a late fail.
    pub models: String,
    /// The recipe that judged: the one the verdict's models were taken
    /// for (`ModelIds::recipe_name`), "default" without recipes.
    pub recipe: String,
    /// Filled by the server from the job that asked for the part.
    pub tags: JobTags,
}

impl ResultRecord {
    pub fn of(verdict: &LineVerdict) -> ResultRecord {
        let part = &verdict.part;
        let recipe = verdict
            .models
            .as_ref()
            .and_then(|m| m.recipe_name())
            .unwrap_or(DEFAULT_RECIPE)
            .to_string();
        let started = part.trigger.map_or(verdict.captured_at, |t| t.at);
        ResultRecord {
            number: part.number,
            part_id: part.trigger.map(|_| part.id),
            seq: part.framed.then_some(verdict.seq),
            pass: verdict.decision.verdict == Verdict::Pass,
            reason: verdict.decision.reason.as_str(),
            defect_prob: verdict.decision.defect_prob,
            seal_area: verdict.decision.seal_area,
            latency_ms: verdict.latency_ms,
            started,
            created: SystemTime::now(),
            camera: verdict.camera.as_deref().map(str::to_string),
            models: verdict
                .models
                .as_ref()
                .map(|m| format!("seg={},cls={}", m.segmentation, m.classifier))
                .unwrap_or_default(),
            recipe,
            tags: JobTags::default(),
        }
    }

    pub fn verdict(&self) -> &'static str {
        if self.pass { "pass" } else { "fail" }
    }

    /// OPC 40100-1's ResultState: 1 OK (pass), 2 NOK (fail).
    pub fn result_state(&self) -> i32 {
        if self.pass { 1 } else { 2 }
    }

    /// The JobId and ResultId: the part's number on its camera's line.
    pub fn job_id(&self) -> String {
        self.number.to_string()
    }

    /// The ResultContent: the result as one JSON object.
    pub fn content_json(&self) -> String {
        serde_json::json!({
            "verdict": self.verdict(),
            "reason": self.reason,
            "defect_prob": self.defect_prob,
            "seal_area": self.seal_area,
            "camera": self.camera,
            "models": self.models,
            "recipe": self.recipe,
            "part_id": self.part_id,
            "seq": self.seq,
            "latency_ms": self.latency_ms,
        })
        .to_string()
    }
}

/// The last `capacity` results of one camera, oldest first.
#[derive(Debug)]
pub struct ResultLog {
    capacity: usize,
    results: VecDeque<ResultRecord>,
}

impl ResultLog {
    pub fn new(capacity: usize) -> ResultLog {
        ResultLog {
            capacity: capacity.max(1),
            results: VecDeque::with_capacity(capacity.max(1)),
        }
    }

    pub fn push(&mut self, record: ResultRecord) {
        if self.results.len() == self.capacity {
            self.results.pop_front();
        }
        self.results.push_back(record);
    }

    pub fn by_id(&self, id: &str) -> Option<&ResultRecord> {
        let number: u64 = id.trim().parse().ok()?;
        self.results.iter().find(|r| r.number == number)
    }

    /// The results that pass `keep`, oldest first, from `start` on, at most
    /// `max` (0: all); and whether that was every one.
    pub fn filtered(
        &self,
        keep: impl Fn(&ResultRecord) -> bool,
        start: usize,
        max: usize,
    ) -> (Vec<&ResultRecord>, bool) {
        let matching: Vec<&ResultRecord> = self.results.iter().filter(|r| keep(r)).collect();
        let rest = matching.len().saturating_sub(start);
        let take = if max == 0 { rest } else { rest.min(max) };
        let page = matching.into_iter().skip(start).take(take).collect();
        (page, take == rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(number: u64, pass: bool) -> ResultRecord {
        ResultRecord {
            number,
            part_id: Some(1000 + number),
            seq: Some(number),
            pass,
            reason: if pass { "ok" } else { "defect" },
            defect_prob: Some(0.5),
            seal_area: None,
            latency_ms: 1.0,
            started: SystemTime::UNIX_EPOCH,
            created: SystemTime::UNIX_EPOCH,
            camera: None,
            models: String::new(),
            recipe: "default".into(),
            tags: JobTags::default(),
        }
    }

    #[test]
    fn the_log_keeps_the_newest_and_finds_them_by_id() {
        let mut log = ResultLog::new(3);
        for n in 0..5 {
            log.push(record(n, n % 2 == 0));
        }
        assert!(log.by_id("1").is_none(), "pushed out");
        assert_eq!(log.by_id("4").unwrap().number, 4);
        assert!(log.by_id("x").is_none());
        let (fails, complete) = log.filtered(|r| !r.pass, 0, 0);
        assert_eq!(fails.iter().map(|r| r.number).collect::<Vec<_>>(), [3]);
        assert!(complete);
        let (page, complete) = log.filtered(|_| true, 1, 1);
        assert_eq!(page.iter().map(|r| r.number).collect::<Vec<_>>(), [3]);
        assert!(!complete);
    }
}
