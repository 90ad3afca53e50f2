//! The Modbus TCP server a PLC runs the line through (`[modbus]`): it
//! triggers an inspection of a named part, and reads that part's verdict.
//! docs/INTEGRATION.md ("Modbus TCP") is the contract: the register map,
//! unit ids, error and exception codes, and the handshake.
//!
//! ```text
//! PLC ──TCP──▶ ModbusServer (thread "modbus", current-thread tokio runtime)
//!               ├─ accept: allow list, connection cap
//!               └─ connection (one task each): MBAP frame ─▶ pdu::decode ─▶ dispatch ─▶ Station (unit id)
//!                                                                                          │ Trigger edge
//!                                                                                          ▼
//!                                                                            TriggerDesk::trigger(PartId)
//! Line ──LineOutput::send──▶ Station (queue of results; presented one at a time)
//! ```
//!
//! A trigger's whole way, from the PLC's coil to the ResultsValid it reads
//! back (the frame's way is drawn in `src/lib.rs`); on the right, the
//! function where each hand-over is wired, at start, once:
//!
//! ```text
//! PLC raises Trigger (coil 1), PartId in holding registers 0-1
//!  ─TCP─▶ connection::serve ─▶ dispatch::answer ─▶ Station::write_coil   ModbusServer::start(config, stations)
//!  ─rising edge─▶ TriggerDesk::trigger(PartId)                           Station::for_desks (one per desk, unit id 1 = camera 0)
//!        accepted: numbered, deadline clock started, TriggerAck high      (desks: pipeline::parts::trigger_desks)
//!        refused (or TriggerEnable off): TriggerAck stays low, ErrorCode 1-3 or 5
//!  ─waiting triggers─▶ PartRings::pop pairs the first frame at or       pipeline::run::run hands parts::matched_desks
//!        after trigger + delay_ms with the part (none: PartMissed)         to the stages; they read PartRings::triggered
//!  ─▶ the one frame loop judges it (infer::batcher) ─▶ output stage
//!  ─▶ Line::deliver (in time) or Line::expire (deadline thread: late)   pipeline::run::camera_lines (a Line per camera)
//!  ─▶ LineOutput::send for each of the camera's outputs                  pipeline::parts::line_outputs (the station is
//!        (MQTT, this camera's Station, the HTTP trigger's waiters)          an output of its camera's Line)
//!  ─▶ Station::send ─▶ queued (buffer), presented once the one before
//!        was acknowledged ─▶ ResultsValid high (discrete input 3)
//! PLC reads the result registers, raises ResultsAck ─▶ Station::write_coil: ResultsValid low;
//! ResultsAck low again ─▶ the next waiting result is presented
//! ```
//!
//! Online (discrete input 0) is the desk's: high after READY=1
//! (`pipeline::parts::set_ready`) while its camera streams
//! (`TriggerDesk::set_streaming_probe`, set in `pipeline::run::run`).
//!
//! Why not tokio-modbus's own server: its codec closes the connection,
//! answering nothing, on any request PDU it cannot decode: a function code
//! of 0x80 and above, a coil value other than 0x0000/0xFF00, a truncated
//! PDU, a byte count that does not match (and on FC 0x0F with more coils
//! than bytes its decoder panics). The issue asks for exception 01 and 03
//! there, and that codec is private to the crate. So the MBAP framing (7
//! bytes, `connection`), the spec's checks before decoding (`pdu`) and the
//! response encoding (`pdu::encode`) are ours; the request decoding and the
//! protocol's types are the crate's.
//!
//! The files: `map` (addresses, error codes, `PlcResult`), `station`
//! (`Station`: the state machine and `LineOutput`), `pdu` (checks, decoding,
//! encoding), `dispatch` (unit and table), `connection` (one PLC), `server`
//! (`ModbusServer`), `error` (`PlcError`).

mod connection;
mod dispatch;
mod error;
pub mod map;
mod pdu;
mod server;
mod station;

pub use error::PlcError;
pub use map::{ErrorCode, PlcResult};
pub use server::{ModbusCounters, ModbusServer, STOP_WAIT};
pub use station::{Station, TriggerOutcome};
