//! The typed `[opcua]` section: the OPC UA server of the Machine Vision
//! companion specification (OPC 40100-1) that PLCs, MES and SCADA reach the
//! cameras through (`crate::opcua`).

use std::net::SocketAddr;
use std::path::PathBuf;

/// `[opcua]`: one `VisionSystem` per camera at `opc.tcp://HOST:PORT/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpcUaConfig {
    /// A loopback address offers SecurityPolicy None and anonymous clients
    /// besides the secure endpoints; any other address (0.0.0.0 too) only
    /// the secure endpoints, with a user of `users_file`.
    pub listen: SocketAddr,
    /// Connections (one secure channel each) served at once; when full, the
    /// one that has gone longest without a message is closed to admit a new
    /// one (a client is never locked out).
    pub max_connections: usize,
    /// Results per camera that `GetResultById` and `GetResultListFiltered`
    /// answer from (the newest ones).
    pub results_kept: usize,
    /// The certificate store: the server's application certificate and key
    /// (made on first start), `trusted/` (the client certificates it
    /// trusts) and `rejected/` (those it refused). `None`:
    /// `$STATE_DIRECTORY/opcua-pki` under systemd, else `opcua-pki/` beside
    /// the config file.
    pub pki_dir: Option<PathBuf>,
    /// How often the server publishes what its subscriptions hold (its
    /// subscription tick), and the least publishing interval a client gets:
    /// a ResultReadyEvent reaches a subscriber up to about twice this after
    /// the result. Lower costs the server's thread a wake-up per tick.
    pub publish_interval_ms: u64,
    /// The users who may log in, one `NAME:PASSWORD` a line; `None`: nobody
    /// (anonymous clients only, on a loopback address). Read at start, never logged.
    pub users_file: Option<PathBuf>,
}

impl OpcUaConfig {
    pub const DEFAULT_LISTEN: &'static str = "127.0.0.1:4840";

    /// Whether clients may connect without security and log in anonymously:
    /// only when the server listens on a loopback address.
    pub fn loopback(&self) -> bool {
        self.listen.ip().is_loopback()
    }
}
