//! What the line gets: exactly one verdict per part, in part order, on time or
//! failed `late` at its deadline, handed to every line output (MQTT today; a
//! GPIO reject pulse or Modbus can be added as another `LineOutput`).
//!
//! ```text
//! ring producer ──delivered(meta)──▶ DeadlineFeed ──FIFO (seq, due)──▶ deadline thread ──expire(seq)──┐
//! output stage (decision) ──deliver(seq, decision)───────────────────────────────────────────────▶ Line ──▶ LineOutput::send
//!                                                                                                           (MQTT queue, ...)
//! ```
//!
//! The gate: `Line` keeps the next part number the line is waiting for. The
//! decision stage and the deadline thread each claim a part under one short
//! lock; whoever claims part N hands its verdict to the outputs before the
//! lock is released, so the line sees every part once and in order. The
//! decision stage claims a part it decided in time and sends its real verdict;
//! the deadline thread claims a part still open at its deadline and sends a
//! `late` fail, and the real result, when it comes, only goes to the results
//! file and the log (marked late).
//!
//! A line output's `send` must not block: it queues, and when its queue is
//! full it drops the oldest verdict and counts it (the house rule: no output
//! ever slows a verdict).
//!
//! The files: `gate` (`Line`, `Delivery`), `verdict` (`LineVerdict`,
//! `LineOutput`), `part_deadline` (`PartDeadline`, `SEND_MARGIN`), `stats`
//! (`LineStats`, `LineCounts`), `priority` (the timing threads' nice value),
//! `deadline` (the deadline thread), `mqtt` (the MQTT output).

pub mod deadline;
mod gate;
pub mod mqtt;
mod part_deadline;
mod priority;
mod stats;
mod verdict;

// Model ids live beside the models' config (`crate::model_id`); kept reachable here.
pub use crate::model_id;
pub use crate::model_id::ModelIds;
pub use gate::{Delivery, Line};
pub use part_deadline::{PartDeadline, SEND_MARGIN};
pub use stats::{LineCounts, LineStats};
pub use verdict::{LineOutput, LineVerdict};
