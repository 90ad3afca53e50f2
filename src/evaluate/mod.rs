//! `sealcheck evaluate`: candidate engines (backend, device, precision, model
//! files) against a reference engine and the labels, on the same frames,
//! before any of them judges a part on the line.
//!
//! ```text
//! ImageSet (images, labels, masks) ──▶ for each frame:
//!     reference ImageJudge ──▶ verdict, mask, logits ─┐
//!     candidate ImageJudge ──▶ verdict, mask, logits ─┴▶ EngineTally (labels, reference, latency)
//! ──▶ gate rules ──▶ table (stdout), evaluation.json, index.html + overlays (report folder)
//! ```
//! The gate holds every engine, the reference included, to the floors against
//! the labels (`[evaluate] min_accuracy`, ...), and each candidate also to the
//! rules against the reference.
//! Every engine runs each frame through the same code as `sealcheck inspect`
//! (decode, CPU preprocessing, the engine, the decision), one engine after the
//! other on this thread, so per-stage latencies are comparable.

mod gate;
mod image_set;
mod overlay;
mod report;
mod spec;
mod tally;

pub use gate::RuleOutcome;
pub use image_set::{EvalFrame, ImageSet, ImageSetError};
pub use report::render;
pub use spec::{EngineSpec, SpecError, int8_sibling};
pub use tally::{EngineTally, FrameRecord};

use std::path::PathBuf;
use std::time::Instant;

use crate::config::Config;
use crate::frame::FrameMeta;
use crate::inspect::ImageJudge;

/// What the command line asked for.
pub struct EvaluateRequest {
    pub config: Config,
    pub images: PathBuf,
    pub labels: Option<PathBuf>,
    pub candidates: Vec<EngineSpec>,
    pub reference: EngineSpec,
    /// Folder for evaluation.json, index.html and the overlays.
    pub report: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    #[error(transparent)]
    Images(#[from] ImageSetError),
    #[error("the reference engine `{spec}` cannot run, so nothing can be compared: {reason}")]
    Reference { spec: String, reason: String },
    #[error("cannot write the report in {}: {source}", path.display())]
    Report {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One engine's whole evaluation.
pub struct EngineOutcome {
    pub spec: EngineSpec,
    /// `Err(why)` when the engine could not be opened or judged no frame.
    pub result: Result<EngineRun, String>,
    /// The gate's rules for this engine (for the reference, only the floors
    /// against the labels).
    pub rules: Vec<RuleOutcome>,
}

pub struct EngineRun {
    /// The engine sealcheck opened, e.g. `onnxruntime-cpu`.
    pub engine: String,
    pub load_ms: f64,
    /// Resident memory the process gained while the engine opened.
    pub load_rss_mib: f64,
    pub tally: EngineTally,
}

/// All engines over all frames.
pub struct Evaluation {
    pub images: PathBuf,
    pub labelled: bool,
    pub frames: usize,
    pub reference: EngineOutcome,
    pub candidates: Vec<EngineOutcome>,
    /// Peak resident memory of the whole evaluation (all engines open at once).
    pub peak_rss_mib: f64,
    pub report: PathBuf,
}

impl Evaluation {
    /// True when the reference is within the floors and every candidate ran
    /// and passed every rule.
    pub fn gate_passed(&self) -> bool {
        self.reference_passed() && self.candidates_passed()
    }

    /// True when the reference is within the floors against the labels.
    pub fn reference_passed(&self) -> bool {
        self.reference.rules.iter().all(|r| r.passed)
    }

    /// True when every candidate ran and passed every rule, whatever the
    /// reference scored (the reload's gate: the reference there is the
    /// models already on the line).
    pub fn candidates_passed(&self) -> bool {
        self.candidates
            .iter()
            .all(|c| c.result.is_ok() && c.rules.iter().all(|r| r.passed))
    }
}

/// Runs the evaluation and writes the report folder.
pub fn evaluate(request: EvaluateRequest) -> Result<Evaluation, EvaluateError> {
    let set = ImageSet::open(&request.images, request.labels.as_deref())?;
    let report_dir = report::prepare_folder(&request.report)?;
    let mut reference = open_engine(&request.config, &request.reference).map_err(|reason| {
        EvaluateError::Reference {
            spec: request.reference.text.clone(),
            reason,
        }
    })?;
    let mut candidates: Vec<(EngineSpec, Result<OpenEngine, String>)> = request
        .candidates
        .iter()
        .map(|spec| (spec.clone(), open_engine(&request.config, spec)))
        .collect();
    for (spec, engine) in &mut candidates {
        if let Ok(open) = engine
            && open.judge.geometry != reference.judge.geometry
        {
            *engine = Err(format!(
                "its models' tensor shapes {:?} differ from the reference's {:?}",
                open.judge.geometry, reference.judge.geometry
            ));
            log::warn!(target: "sealcheck::evaluate", spec = spec.text.as_str(); "candidate not evaluated: tensor shapes differ");
        }
    }
    let mut overlays = overlay::OverlayWriter::new(&report_dir, reference.judge.geometry.seg_hw);
    let thresholds = request.config.decision;
    let mut gt = tally::GroundTruth::new(reference.judge.geometry.seg_hw);
    for (seq, frame) in set.frames.iter().enumerate() {
        let meta = FrameMeta::now(seq as u64);
        let ref_decision = reference.judge.judge(&frame.image, meta, &thresholds);
        let truth = frame.ground_truth_mask.as_deref().and_then(|p| gt.load(p));
        reference
            .tally
            .record(frame, &ref_decision, &reference.judge.work, None, truth);
        for (spec, engine) in &mut candidates {
            let Ok(open) = engine else { continue };
            let decision = open.judge.judge(&frame.image, meta, &thresholds);
            let record = open.tally.record(
                frame,
                &decision,
                &open.judge.work,
                Some((&ref_decision, &reference.judge.work)),
                truth,
            );
            if record.disagrees() {
                overlays.draw(
                    &spec.text,
                    frame,
                    open.judge.frame(),
                    &reference.judge.work.mask,
                    &open.judge.work.mask,
                );
            }
        }
    }
    let labelled = set.labelled();
    let reference_tally = reference.tally;
    let reference_run = EngineRun {
        engine: reference.engine,
        load_ms: reference.load_ms,
        load_rss_mib: reference.load_rss_mib,
        tally: reference_tally,
    };
    let candidates: Vec<EngineOutcome> = candidates
        .into_iter()
        .map(|(spec, engine)| {
            let result = engine.map(|open| EngineRun {
                engine: open.engine,
                load_ms: open.load_ms,
                load_rss_mib: open.load_rss_mib,
                tally: open.tally,
            });
            let rules = gate::rules(
                &request.config.evaluate,
                &reference_run.tally,
                result.as_ref().ok().map(|r| &r.tally),
                labelled,
            );
            EngineOutcome {
                spec,
                result,
                rules,
            }
        })
        .collect();
    let reference_rules =
        gate::reference_rules(&request.config.evaluate, &reference_run.tally, labelled);
    let evaluation = Evaluation {
        images: request.images,
        labelled,
        frames: set.frames.len(),
        reference: EngineOutcome {
            spec: request.reference,
            result: Ok(reference_run),
            rules: reference_rules,
        },
        candidates,
        peak_rss_mib: memory_mib("VmHWM:"),
        report: report_dir.clone(),
    };
    report::write(&evaluation, &overlays).map_err(|source| EvaluateError::Report {
        path: report_dir,
        source,
    })?;
    Ok(evaluation)
}

struct OpenEngine {
    engine: String,
    judge: ImageJudge,
    load_ms: f64,
    load_rss_mib: f64,
    tally: EngineTally,
}

/// Opens one engine; `Err` says, for the table, why it cannot be evaluated.
fn open_engine(base: &Config, spec: &EngineSpec) -> Result<OpenEngine, String> {
    let config = spec.config(base).map_err(|e| e.problem)?;
    let rss_before = memory_mib("VmRSS:");
    let started = Instant::now();
    let judge = ImageJudge::open(&config).map_err(|e| e.to_string())?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let engine = judge.backend.kind().as_str().to_string();
    log::info!(target: "sealcheck::evaluate", spec = spec.text.as_str(), engine = engine.as_str(), load_ms = load_ms, segmentation:% = config.segmentation.path.display(), classifier:% = config.classifier.path.display(); "engine opened");
    Ok(OpenEngine {
        tally: EngineTally::new(),
        engine,
        judge,
        load_ms,
        load_rss_mib: (memory_mib("VmRSS:") - rss_before).max(0.0),
    })
}

/// A `/proc/self/status` memory line in MiB (0 where there is none).
fn memory_mib(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}
