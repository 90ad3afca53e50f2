//! How far the shadow agrees with production: counted once per compared
//! frame by the shadow thread, read by `/metrics` (the counters), the status
//! server and the run summary (the snapshot).
//!
//! Two spans are kept: since the start, and the last `WINDOW` compared
//! frames (what a quality engineer watching a shift change wants). Both are
//! bounded: the window is a ring of `WINDOW` records, and the start's
//! |Δ p_defect| is a histogram of fixed bins.

use std::collections::VecDeque;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use serde::Serialize;

use crate::decision::{Decision, Reason, Verdict};
use crate::stats::{bin_of_rank, nearest_rank, percentile_of_sorted};

/// Compared frames in the running window, and between two journal lines.
pub const WINDOW: usize = 1000;

/// |Δ p_defect| bins of the since-start histogram: 0.001 wide, so its p99
/// is exact to 0.001.
const DELTA_BINS: usize = 1001;

/// The reasons production can give a frame the shadow judged.
const REASONS: [Reason; 4] = [Reason::Ok, Reason::Defect, Reason::NoSeal, Reason::SealArea];

/// Which way a verdict flipped, from production's to the shadow's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flip {
    /// Production passed the part; the shadow would have failed it.
    PassToFail,
    /// Production failed the part; the shadow would have passed it.
    FailToPass,
}

impl Flip {
    pub const ALL: [Flip; 2] = [Flip::PassToFail, Flip::FailToPass];

    pub fn as_str(self) -> &'static str {
        match self {
            Flip::PassToFail => "pass_to_fail",
            Flip::FailToPass => "fail_to_pass",
        }
    }

    /// The flip between two verdicts, if they differ.
    pub fn between(production: Verdict, shadow: Verdict) -> Option<Flip> {
        match (production, shadow) {
            (Verdict::Pass, Verdict::Fail) => Some(Flip::PassToFail),
            (Verdict::Fail, Verdict::Pass) => Some(Flip::FailToPass),
            _ => None,
        }
    }
}

/// Mask IoU buckets for `/metrics`: agreement sits near 1, so the buckets do too.
const IOU_BUCKETS: [f64; 9] = [0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995];

/// The shadow's counters, registered in `/metrics` by the status room
/// (the same handles): cheap to clone, each shares its atomic.
#[derive(Debug, Clone)]
pub struct ShadowCounters {
    /// Frames the shadow judged and compared with production.
    pub frames: Counter,
    /// Verdict flips, indexed like `Flip::ALL`.
    pub flips: [Counter; 2],
    /// Frames due to the shadow (`every`) that it did not judge: it was
    /// still busy, or its frame was not available.
    pub skipped: Counter,
    /// Frames the shadow's engine failed on.
    pub failures: Counter,
    /// Mask IoU against production's mask, per compared frame.
    pub mask_iou: Histogram,
}

impl ShadowCounters {
    /// Counters whose flip counts are `flips` (indexed like `Flip::ALL`;
    /// `/metrics` passes its labelled family's).
    pub fn new(flips: [Counter; 2]) -> Self {
        ShadowCounters {
            frames: Counter::default(),
            flips,
            skipped: Counter::default(),
            failures: Counter::default(),
            mask_iou: Histogram::new(IOU_BUCKETS),
        }
    }
}

impl Default for ShadowCounters {
    fn default() -> Self {
        ShadowCounters::new(Default::default())
    }
}

/// One compared frame, as the window keeps it.
#[derive(Debug, Clone, Copy)]
struct Compared {
    reason: Reason,
    flip: Option<Flip>,
    mask_iou: Option<f64>,
    delta: f64,
}

/// Counts over a span of compared frames.
#[derive(Debug, Clone, Default)]
struct Span {
    compared: u64,
    flips: [u64; 2],
    by_reason: [ReasonCounts; 4],
    iou_sum: f64,
    iou_frames: u64,
    iou_worst: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ReasonCounts {
    pub compared: u64,
    pub pass_to_fail: u64,
    pub fail_to_pass: u64,
}

impl Span {
    fn add(&mut self, c: &Compared) {
        self.compared += 1;
        let reason = REASONS.iter().position(|r| *r == c.reason);
        if let Some(r) = reason {
            self.by_reason[r].compared += 1;
        }
        if let Some(flip) = c.flip {
            let i = flip as usize;
            self.flips[i] += 1;
            if let Some(r) = reason {
                match flip {
                    Flip::PassToFail => self.by_reason[r].pass_to_fail += 1,
                    Flip::FailToPass => self.by_reason[r].fail_to_pass += 1,
                }
            }
        }
        if let Some(iou) = c.mask_iou {
            self.iou_sum += iou;
            self.iou_frames += 1;
            self.iou_worst = Some(self.iou_worst.map_or(iou, |w| w.min(iou)));
        }
    }

    fn summary(&self, p99_delta: Option<f64>) -> SpanSummary {
        SpanSummary {
            compared: self.compared,
            flips: FlipCounts {
                pass_to_fail: self.flips[0],
                fail_to_pass: self.flips[1],
            },
            agreement: (self.compared > 0)
                .then(|| 1.0 - (self.flips[0] + self.flips[1]) as f64 / self.compared as f64),
            mask_iou_mean: (self.iou_frames > 0).then(|| self.iou_sum / self.iou_frames as f64),
            mask_iou_worst: self.iou_worst,
            p99_abs_delta_defect_prob: p99_delta,
            by_reason: REASONS
                .iter()
                .zip(&self.by_reason)
                .filter(|(_, counts)| counts.compared > 0)
                .map(|(reason, counts)| (reason.as_str(), *counts))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlipCounts {
    pub pass_to_fail: u64,
    pub fail_to_pass: u64,
}

/// A span's figures, as `/api/status`, the page and the summary show them.
#[derive(Debug, Clone, Serialize)]
pub struct SpanSummary {
    pub compared: u64,
    pub flips: FlipCounts,
    /// Share of compared frames with the same verdict; `null` before any.
    pub agreement: Option<f64>,
    pub mask_iou_mean: Option<f64>,
    pub mask_iou_worst: Option<f64>,
    pub p99_abs_delta_defect_prob: Option<f64>,
    /// Keyed by production's reason for the frame.
    pub by_reason: std::collections::BTreeMap<&'static str, ReasonCounts>,
}

/// What the shadow is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShadowState {
    /// Its models are being opened, checked and warmed up.
    Opening,
    Running,
    /// Its models were refused (see the journal); production runs on.
    Refused,
    /// Its engine failed too many frames in a row and was stopped.
    Stopped,
    /// `[shadow]` was removed on reload.
    Off,
}

impl ShadowState {
    /// As `/api/status` spells it (serde's `snake_case`).
    pub fn as_str(self) -> &'static str {
        match self {
            ShadowState::Opening => "opening",
            ShadowState::Running => "running",
            ShadowState::Refused => "refused",
            ShadowState::Stopped => "stopped",
            ShadowState::Off => "off",
        }
    }
}

/// Everything the readers show, taken under one lock.
#[derive(Debug, Clone, Serialize)]
pub struct AgreementSnapshot {
    pub state: ShadowState,
    /// What runs the shadow, e.g. `onnxruntime-cpu`; `null` before it opened.
    pub engine: Option<String>,
    pub models: Option<crate::model_id::ModelIds>,
    pub every: u64,
    pub since_start: SpanSummary,
    pub last_1000: SpanSummary,
    pub skipped: u64,
    pub failures: u64,
    /// Why the shadow is refused or stopped, for the page.
    pub problem: Option<String>,
}

struct Tally {
    state: ShadowState,
    engine: Option<String>,
    models: Option<crate::model_id::ModelIds>,
    every: u64,
    problem: Option<String>,
    since_start: Span,
    delta_bins: Vec<u64>,
    window: VecDeque<Compared>,
    skipped: u64,
    failures: u64,
}

/// The shadow's agreement with production, shared by the shadow thread
/// (which records) and the readers.
pub struct ShadowAgreement {
    pub counters: ShadowCounters,
    tally: Mutex<Tally>,
}

impl ShadowAgreement {
    pub fn new(counters: ShadowCounters) -> Self {
        ShadowAgreement {
            counters,
            tally: Mutex::new(Tally {
                state: ShadowState::Opening,
                engine: None,
                models: None,
                every: 1,
                problem: None,
                since_start: Span::default(),
                delta_bins: vec![0; DELTA_BINS],
                window: VecDeque::with_capacity(WINDOW),
                skipped: 0,
                failures: 0,
            }),
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        // A reader that panicked holding the lock left only counts behind.
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records one compared frame; returns the snapshot to journal when this
    /// frame completes another `WINDOW` compared frames.
    pub fn record(
        &self,
        production: &Decision,
        shadow: &Decision,
        mask_iou: Option<f64>,
    ) -> Option<AgreementSnapshot> {
        let flip = Flip::between(production.verdict, shadow.verdict);
        let delta = match (production.defect_prob, shadow.defect_prob) {
            (Some(p), Some(s)) => (p - s).abs(),
            // One classified and the other did not (a no-seal or area call
            // on one side): as far apart as they can be.
            (Some(_), None) | (None, Some(_)) => 1.0,
            (None, None) => 0.0,
        };
        let compared = Compared {
            reason: production.reason,
            flip,
            mask_iou,
            delta,
        };
        self.counters.frames.inc();
        if let Some(flip) = flip {
            self.counters.flips[flip as usize].inc();
        }
        if let Some(iou) = mask_iou {
            self.counters.mask_iou.observe(iou);
        }
        let mut t = self.tally();
        t.since_start.add(&compared);
        let bin = ((delta * 1000.0).round() as usize).min(DELTA_BINS - 1);
        t.delta_bins[bin] += 1;
        if t.window.len() == WINDOW {
            t.window.pop_front();
        }
        t.window.push_back(compared);
        let journal = t.since_start.compared.is_multiple_of(WINDOW as u64);
        drop(t);
        journal.then(|| self.snapshot())
    }

    pub fn skipped(&self) {
        self.counters.skipped.inc();
        self.tally().skipped += 1;
    }

    pub fn failed(&self) {
        self.counters.failures.inc();
        self.tally().failures += 1;
    }

    /// The shadow's state, and what it runs once opened.
    pub fn set_state(&self, state: ShadowState, problem: Option<String>) {
        let mut t = self.tally();
        t.state = state;
        t.problem = problem;
    }

    pub fn set_running(&self, engine: &str, models: crate::model_id::ModelIds, every: u64) {
        let mut t = self.tally();
        t.state = ShadowState::Running;
        t.problem = None;
        t.engine = Some(engine.to_string());
        t.models = Some(models);
        t.every = every;
    }

    pub fn snapshot(&self) -> AgreementSnapshot {
        let t = self.tally();
        let mut window = Span::default();
        let mut deltas: Vec<f64> = Vec::with_capacity(t.window.len());
        for c in &t.window {
            window.add(c);
            deltas.push(c.delta);
        }
        deltas.sort_by(f64::total_cmp);
        AgreementSnapshot {
            state: t.state,
            engine: t.engine.clone(),
            models: t.models.clone(),
            every: t.every,
            since_start: t.since_start.summary(p99_of_bins(&t.delta_bins)),
            last_1000: window.summary(percentile_of_sorted(&deltas, 0.99)),
            skipped: t.skipped,
            failures: t.failures,
            problem: t.problem.clone(),
        }
    }
}

/// The 99th percentile (nearest rank) of the 0.001-wide |Δ| bins.
fn p99_of_bins(bins: &[u64]) -> Option<f64> {
    let rank = nearest_rank(0.99, bins.iter().sum())?;
    bin_of_rank(bins.iter().copied(), rank).map(|bin| bin as f64 / 1000.0)
}

/// Intersection over union of two 0/1 masks of the same size; two empty
/// masks agree completely.
pub fn mask_iou(a: &[f32], b: &[f32]) -> f64 {
    let (mut both, mut either) = (0u64, 0u64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (*x > 0.5, *y > 0.5);
        both += u64::from(x && y);
        either += u64::from(x || y);
    }
    if either == 0 {
        1.0
    } else {
        both as f64 / either as f64
    }
}

impl AgreementSnapshot {
    /// The run summary's shadow line(s).
    pub fn render(&self) -> String {
        let s = &self.since_start;
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2} %", v * 100.0));
        let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
        format!(
            "shadow: {} ({}), every {}: {} compared, agreement {}, flips pass_to_fail {} fail_to_pass {}, mask IoU mean {} worst {}, p99 |d p_defect| {}, skipped {}, failures {}\n",
            self.engine.as_deref().unwrap_or("not opened"),
            self.state.as_str(),
            self.every,
            s.compared,
            pct(s.agreement),
            s.flips.pass_to_fail,
            s.flips.fail_to_pass,
            num(s.mask_iou_mean),
            num(s.mask_iou_worst),
            num(s.p99_abs_delta_defect_prob),
            self.skipped,
            self.failures,
        ) + &self.render_by_reason()
    }

    /// Since the start, per production reason: `shadow by reason: ok 120
    /// (pass_to_fail 3, fail_to_pass 0), defect 40 (...)`; empty before any.
    fn render_by_reason(&self) -> String {
        let by_reason = &self.since_start.by_reason;
        if by_reason.is_empty() {
            return String::new();
        }
        let parts: Vec<String> = by_reason
            .iter()
            .map(|(reason, c)| {
                format!(
                    "{reason} {} (pass_to_fail {}, fail_to_pass {})",
                    c.compared, c.pass_to_fail, c.fail_to_pass
                )
            })
            .collect();
        format!("shadow by production reason: {}\n", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(verdict: Verdict, reason: Reason, p: f64) -> Decision {
        Decision {
            verdict,
            reason,
            defect_prob: Some(p),
            seal_area: Some(0.05),
        }
    }

    #[test]
    fn flips_are_counted_apart_by_direction_and_by_production_reason() {
        let agreement = ShadowAgreement::new(ShadowCounters::default());
        let pass = decision(Verdict::Pass, Reason::Ok, 0.1);
        let fail = decision(Verdict::Fail, Reason::Defect, 0.9);
        agreement.record(&pass, &pass, Some(1.0));
        agreement.record(&pass, &fail, Some(0.9));
        agreement.record(&fail, &pass, Some(0.8));
        agreement.record(&fail, &pass, None);
        let s = agreement.snapshot();
        assert_eq!(s.since_start.compared, 4);
        assert_eq!(
            s.since_start.flips,
            FlipCounts {
                pass_to_fail: 1,
                fail_to_pass: 2
            }
        );
        assert_eq!(s.since_start.agreement, Some(0.25));
        assert_eq!(s.since_start.by_reason["ok"].pass_to_fail, 1);
        assert_eq!(s.since_start.by_reason["defect"].fail_to_pass, 2);
        assert!((s.since_start.mask_iou_mean.unwrap() - 0.9).abs() < 1e-12);
        assert_eq!(s.since_start.mask_iou_worst, Some(0.8));
        assert_eq!(agreement.counters.flips[0].get(), 1);
        assert_eq!(agreement.counters.flips[1].get(), 2);
        assert_eq!(agreement.counters.frames.get(), 4);
    }

    #[test]
    fn the_window_keeps_the_last_thousand_and_the_journal_fires_once_per_thousand() {
        let agreement = ShadowAgreement::new(ShadowCounters::default());
        let pass = decision(Verdict::Pass, Reason::Ok, 0.1);
        let fail = decision(Verdict::Fail, Reason::Defect, 0.9);
        let mut journals = 0;
        // 500 flips first, then 1500 agreements: the window has forgotten the flips.
        for i in 0..2000 {
            let shadow = if i < 500 { &fail } else { &pass };
            journals += usize::from(agreement.record(&pass, shadow, Some(1.0)).is_some());
        }
        assert_eq!(journals, 2);
        let s = agreement.snapshot();
        assert_eq!(s.since_start.flips.pass_to_fail, 500);
        assert_eq!(s.last_1000.compared, 1000);
        assert_eq!(s.last_1000.flips.pass_to_fail, 0);
        assert_eq!(s.last_1000.agreement, Some(1.0));
    }

    #[test]
    fn p99_of_the_defect_probability_difference() {
        let agreement = ShadowAgreement::new(ShadowCounters::default());
        let production = decision(Verdict::Pass, Reason::Ok, 0.1);
        for i in 0..100 {
            // 99 frames 0.01 apart, one 0.5 apart: the p99 is the 99th value.
            let p = if i == 0 { 0.6 } else { 0.11 };
            agreement.record(&production, &decision(Verdict::Pass, Reason::Ok, p), None);
        }
        let s = agreement.snapshot();
        assert!((s.last_1000.p99_abs_delta_defect_prob.unwrap() - 0.01).abs() < 1e-9);
        assert!((s.since_start.p99_abs_delta_defect_prob.unwrap() - 0.01).abs() < 1e-9);
    }

    #[test]
    fn the_summary_names_the_flips_per_production_reason() {
        let agreement = ShadowAgreement::new(ShadowCounters::default());
        let pass = decision(Verdict::Pass, Reason::Ok, 0.1);
        let fail = decision(Verdict::Fail, Reason::Defect, 0.9);
        agreement.record(&pass, &fail, Some(1.0));
        agreement.record(&fail, &fail, Some(1.0));
        let text = agreement.snapshot().render();
        assert!(
            text.contains("2 compared")
                && text.contains("shadow by production reason: defect 1 (pass_to_fail 0, fail_to_pass 0), ok 1 (pass_to_fail 1, fail_to_pass 0)"),
            "{text}"
        );
    }

    #[test]
    fn the_summary_spells_each_state_as_api_status_does() {
        for state in [
            ShadowState::Opening,
            ShadowState::Running,
            ShadowState::Refused,
            ShadowState::Stopped,
            ShadowState::Off,
        ] {
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        }
    }

    #[test]
    fn mask_iou_of_masks() {
        assert_eq!(
            mask_iou(&[1.0, 1.0, 0.0, 0.0], &[1.0, 0.0, 1.0, 0.0]),
            1.0 / 3.0
        );
        assert_eq!(mask_iou(&[0.0; 4], &[0.0; 4]), 1.0);
        assert_eq!(mask_iou(&[1.0; 4], &[0.0; 4]), 0.0);
    }

    #[test]
    fn skipped_and_failed_frames_are_counted_not_compared() {
        let agreement = ShadowAgreement::new(ShadowCounters::default());
        agreement.skipped();
        agreement.failed();
        let s = agreement.snapshot();
        assert_eq!((s.skipped, s.failures, s.since_start.compared), (1, 1, 0));
        assert_eq!(s.since_start.agreement, None);
        assert_eq!(agreement.counters.skipped.get(), 1);
    }
}
