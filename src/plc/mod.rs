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
