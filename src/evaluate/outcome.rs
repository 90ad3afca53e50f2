//! What an evaluation is asked for (`EvaluateRequest`) and what it gives:
//! each engine's outcome, the whole evaluation and its gate verdicts.

use std::path::PathBuf;

use super::gate::RuleOutcome;
use super::image_set::ImageSetError;
use super::spec::EngineSpec;
use super::tally::EngineTally;
use crate::config::Config;

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
    #[error("{0}")]
    Cavities(String),
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
    /// With labels per cavity: the cavities judged (each a sample); 0 without.
    pub cavities: usize,
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
