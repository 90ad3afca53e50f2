//! `[shadow]`: a candidate model pair judges the same frames as production,
//! on its own thread, and never touches a verdict. What a quality engineer
//! wants to know before promoting a model: would it have judged this
//! week's frames of this line the same way?
//!
//! ```text
//! output thread: production verdict -> line (MQTT, deadline) -> due to the shadow (seq % every == 0)
//!     and a free ShadowRecord? --try_send--> shadow thread (nice 19): [CPU preprocess] -> engine -> decide
//!     (none free: skipped, counted)                   │  compare: flips, mask IoU, |Δ p_defect| (ShadowAgreement)
//!                                                     │  a flip, [archive] on: <dir>/shadow/
//!     result line written once the shadow's verdict ◀─┘  (the line carries "shadow":{...})
//! ```
//!
//! Production's verdicts, their timing and the deadline do not depend on the
//! shadow: the verdict goes to the line before the frame is handed over,
//! and the hand-over never waits. Only the results file's line of a
//! shadowed frame waits for the shadow's verdict (lines stay in `seq`
//! order, so the lines after it wait too), at most `LINE_WAIT`.
//!
//! The files: `agreement` (the counts, the window, the snapshot readers
//! show), `handoff` (the output thread's end), `engine` (the shadow's
//! config and opening: the steps of a model swap), `judge` (the thread),
//! `archive` (disagreements on disk), `lane` (the pipeline's end: the
//! thread's start and its changes).

mod agreement;
mod archive;
mod engine;
mod handoff;
mod judge;
mod lane;

pub use agreement::{
    AgreementSnapshot, Flip, FlipCounts, ReasonCounts, ShadowAgreement, ShadowCounters,
    ShadowState, SpanSummary, WINDOW, mask_iou,
};
pub use engine::{OpenedShadow, ShadowRefused, engine_config, open};
pub use handoff::{ShadowGate, ShadowHandoff, ShadowOutcome, ShadowVerdict};
pub use judge::ShadowChange;
pub use lane::{LINE_WAIT, START_WAIT, ShadowControl, check, lane};
