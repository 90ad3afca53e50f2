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
mod outcome;
mod overlay;
mod report;
mod run;
mod spec;
mod tally;

pub use gate::RuleOutcome;
pub use image_set::{EvalFrame, ImageSet, ImageSetError};
pub use outcome::{EngineOutcome, EngineRun, EvaluateError, EvaluateRequest, Evaluation};
pub use report::render;
pub use run::evaluate;
pub use spec::{EngineSpec, SpecError, int8_sibling};
pub use tally::{EngineTally, FrameRecord};
