//! The typed `[trigger]` and `[modbus]` sections: what makes a part (a
//! frame, or a PLC's trigger) and the Modbus TCP server a PLC reads verdicts
//! from (docs/INTEGRATION.md has the register map).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// `[trigger] mode`: what a part is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TriggerMode {
    /// Every frame is a part, numbered by its `seq` (the default).
    #[default]
    Free,
    /// A part is a trigger request carrying a part id (Modbus, HTTP); the
    /// first frame captured at or after the trigger plus `delay_ms` is its frame.
    Plc,
    /// The camera is triggered on its own input line (a photo-eye): every
    /// frame it sends is a part, whose id is the count of the camera's
    /// frames (its `seq` + 1). The PLC reads the results (Modbus), pairing
    /// them by that count; it sends no triggers.
    Camera,
}

impl TriggerMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerMode::Free => "free",
            TriggerMode::Plc => "plc",
            TriggerMode::Camera => "camera",
        }
    }
}

/// `[trigger]`: applies to every camera; each camera has its own triggers
/// and part ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerConfig {
    pub mode: TriggerMode,
    /// From a trigger's arrival to the part's moment: the time it needs to
    /// reach the field of view.
    pub delay: Duration,
    /// A trigger whose moment passed this long ago without a frame fails `no_frame`.
    pub frame_wait: Duration,
    /// `POST /api/trigger` on the status server (for tests and line scripts).
    pub http: bool,
}

impl Default for TriggerConfig {
    fn default() -> Self {
        TriggerConfig {
            mode: TriggerMode::Free,
            delay: Duration::ZERO,
            frame_wait: Duration::from_millis(DEFAULT_FRAME_WAIT_MS),
            http: false,
        }
    }
}

/// `[trigger] frame_wait_ms` when left out: several frame intervals of a
/// slow camera, well under a camera outage's detection.
pub const DEFAULT_FRAME_WAIT_MS: u64 = 250;

/// `[modbus]`: the Modbus TCP server a PLC triggers through and reads
/// results from; unit id 1 is the first camera, 2 the second, in config order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModbusConfig {
    pub listen: SocketAddr,
    /// Results waiting for the PLC per camera, the presented one included.
    pub buffer: usize,
    /// `true`: the four-way handshake (ResultsValid / ResultsAck);
    /// `false`: each new result is presented at once.
    pub handshake: bool,
    /// Client addresses allowed to connect; empty = any.
    pub allow: Vec<IpAddr>,
    /// Connections served at once; more are closed at once.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
}

impl ModbusConfig {
    pub const DEFAULT_LISTEN: &'static str = "127.0.0.1:5020";
}
