//! The typed `[opcua]` section: the OPC UA server of the Machine Vision
//! companion specification (OPC 40100-1) that PLCs, MES and SCADA reach the
//! cameras through (`crate::opcua`).

use std::net::SocketAddr;

/// `[opcua]`: one `VisionSystem` per camera at `opc.tcp://HOST:PORT/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpcUaConfig {
    pub listen: SocketAddr,
    /// Connections (one secure channel each) served at once; when full, the
    /// one that has gone longest without a message is closed to admit a new
    /// one (a client is never locked out).
    pub max_connections: usize,
    /// Results per camera that `GetResultById` and `GetResultListFiltered`
    /// answer from (the newest ones).
    pub results_kept: usize,
}

impl OpcUaConfig {
    pub const DEFAULT_LISTEN: &'static str = "127.0.0.1:4840";
}
