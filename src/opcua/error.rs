//! What can keep the OPC UA server from starting, each with what to do.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use super::users::UsersError;

#[derive(Debug, thiserror::Error)]
pub enum OpcUaError {
    #[error(
        "[opcua] listen = \"{addr}\": port {} is below 1024 and needs CAP_NET_BIND_SERVICE; \
         use OPC UA's registered port 4840 (or another above 1023)",
        addr.port()
    )]
    Privileged { addr: SocketAddr },
    #[error(
        "[opcua] listen = \"{addr}\": the port is taken by another program (another \
         sealcheck, or an OPC UA server); stop it or choose another port"
    )]
    InUse { addr: SocketAddr },
    #[error(
        "[opcua] listen = \"{addr}\": this machine has no such address; use one of its \
         own addresses (ip -br addr), or 0.0.0.0 for all"
    )]
    NoSuchAddress { addr: SocketAddr },
    #[error("[opcua] listen = \"{addr}\": cannot listen: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("OPC UA server on {addr}: cannot start its thread: {source}")]
    Thread {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("OPC UA server: the Machine Vision NodeSet does not load: {0}")]
    NodeSet(String),
    #[error("OPC UA server: {0} (a bug: the server's own configuration)")]
    Build(String),
    #[error("OPC UA server on {addr}: it stopped while starting: {why}")]
    Start { addr: SocketAddr, why: String },
    #[error(
        "[opcua] pki_dir = \"{}\": cannot make or read the server's application certificate: \
         {why}; make the folder writable by the service (systemd: StateDirectory=), or set \
         pki_dir to one that is",
        dir.display()
    )]
    Certificate { dir: PathBuf, why: String },
    #[error(
        "OPC UA: {} is there but {} is not: restore it, or remove both to have a new \
         certificate made at start (clients that trusted the old one must trust the new one)",
        there.display(),
        missing.display()
    )]
    HalfCertificate { there: PathBuf, missing: PathBuf },
    #[error(transparent)]
    Users(#[from] UsersError),
}

impl OpcUaError {
    /// The error of binding `addr`, with the hint a technician needs.
    pub fn bind(addr: SocketAddr, source: io::Error) -> OpcUaError {
        match source.kind() {
            io::ErrorKind::PermissionDenied if addr.port() < 1024 => {
                OpcUaError::Privileged { addr }
            }
            io::ErrorKind::AddrInUse => OpcUaError::InUse { addr },
            io::ErrorKind::AddrNotAvailable => OpcUaError::NoSuchAddress { addr },
            _ => OpcUaError::Listen { addr, source },
        }
    }
}
