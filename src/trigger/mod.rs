//! Parts instead of frames (`[trigger] mode = "plc"`): a PLC (over Modbus
//! TCP, `crate::plc`) or a line script (`POST /api/trigger`) asks for one
//! inspection of a named part; the first frame captured at or after the
//! trigger plus `delay_ms` is that part's frame, and every accepted trigger
//! gets exactly one result: its verdict, or a fail (`no_frame`, `overrun`,
//! `late`).
//!
//! ```text
//! Modbus / HTTP ──trigger(id)──▶ TriggerDesk (per camera: accept or refuse, number, deadline clock)
//!                                     │ waiting triggers
//! capture ─ring─▶ PartRings::pop ◀────┘ (matcher: claim, overrun, no_frame)
//!                      └─▶ frame with its Part / PartMissed marker ─▶ the one frame loop ─▶ output ─▶ Line (MQTT, Modbus)
//! ```
//!
//! A PLC's trigger, from its Trigger coil to the ResultsValid it reads back,
//! with the function where each hand-over is wired: `plc`'s module doc.
//!
//! The files: `desk` (`TriggerDesk`, `Refused`, `Pending`), `matcher` (the
//! pairing rule, pure), `rings` (`PartRings`, the frame path's source: its
//! `frame::FrameSource` impl is what the one frame loop reads), `waiters`
//! (`PartWaiters`: a part's verdict for the HTTP trigger).

mod desk;
mod matcher;
mod rings;
mod waiters;

pub use desk::{BACKLOG, Pending, Refused, TriggerDesk};
pub use matcher::CAPTURE_GRACE;
pub use rings::{NotAFrame, PartRings, UnjudgedFrames};
pub use waiters::{PartWaiters, verdict_of};
