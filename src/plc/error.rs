//! What can keep the Modbus server from starting, each with what to do.

use std::io;
use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum PlcError {
    #[error(
        "[modbus] listen = \"{addr}\": port {} is below 1024 and needs CAP_NET_BIND_SERVICE; \
         the systemd unit grants it with AmbientCapabilities=CAP_NET_BIND_SERVICE \
         (docs/INTEGRATION.md, \"Port 502\"), or listen on a port above 1023",
        addr.port()
    )]
    Privileged { addr: SocketAddr },
    #[error(
        "[modbus] listen = \"{addr}\": the port is taken by another program (another \
         sealcheck, or a Modbus gateway); stop it or choose another port"
    )]
    InUse { addr: SocketAddr },
    #[error(
        "[modbus] listen = \"{addr}\": this machine has no such address; use one of its \
         own addresses (ip -br addr), or 0.0.0.0 for all"
    )]
    NoSuchAddress { addr: SocketAddr },
    #[error("[modbus] listen = \"{addr}\": cannot listen: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("Modbus server on {addr}: cannot start its thread: {source}")]
    Thread {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error(
        "Modbus server: station {index} has unit id {unit}; unit ids are 1, 2, ... in the \
         cameras' config order (a bug in the caller)"
    )]
    UnitOrder { index: usize, unit: u8 },
    #[error("Modbus server: {count} cameras; Modbus unit ids reach 247 cameras at most")]
    TooManyStations { count: usize },
}

impl PlcError {
    /// The error of binding `addr`, with the hint a technician needs.
    pub fn bind(addr: SocketAddr, source: io::Error) -> PlcError {
        match source.kind() {
            io::ErrorKind::PermissionDenied if addr.port() < 1024 => PlcError::Privileged { addr },
            io::ErrorKind::AddrInUse => PlcError::InUse { addr },
            io::ErrorKind::AddrNotAvailable => PlcError::NoSuchAddress { addr },
            _ => PlcError::Listen { addr, source },
        }
    }
}
