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
//! A line output's `send` must not block: it queues, and what does not fit
//! is dropped and counted (the house rule: no output ever slows a verdict).
//! Which verdict gives way is each output's, by what its reader needs:
//! - MQTT (`mqtt::queue`) drops the **oldest** waiting verdict: a
//!   subscriber wants the freshest, an old one is likely past its deadline,
//!   and the results file keeps every verdict anyway.
//! - A PLC (`plc::Station`, with the handshake) drops the **newest**: it
//!   does not present it and raises ErrorCode 4 (docs/INTEGRATION.md). The
//!   PLC reads results one at a time in trigger order; the oldest is on its
//!   registers while it reads and acknowledges it, and the ones behind are
//!   the results it waits for next. Dropping the oldest would change the
//!   result under the PLC's read, or take away the one it waits for; keeping
//!   them, the PLC gets every result it was promised up to the overflow, and
//!   rejects the parts after it, which never got one (fail safe). Without
//!   the handshake each new result replaces the one shown (nothing waits).
//! - The HTTP trigger's waiters (`trigger::PartWaiters`) keep the last 1024;
//!   a waiter that falls behind misses the oldest and times out.
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
