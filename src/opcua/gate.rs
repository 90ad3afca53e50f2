//! The gate: the listener on `[opcua] listen`, in front of async-opcua's
//! own (bound to an ephemeral loopback port). It admits each connection,
//! and pipes its bytes to the server both ways; when `max_connections` are
//! open it closes the one that has gone longest without sending a byte to
//! admit the new one, counts it and logs it, as the Modbus server does
//! (`plc::ModbusServer`): a PLC that reconnects after a cable pull is
//! never locked out by the half-open connections it left behind.
//!
//! Why a gate: async-opcua 0.19 accepts every connection with no cap and
//! offers no hook at accept (its connection types are private), so a cap
//! with eviction has to sit in front of it. One OPC UA TCP connection
//! carries one secure channel, so the rule holds for secure channels.
//! Sessions outlive their connection until their timeout and async-opcua
//! cannot close one from outside; `server` sizes their limit so that
//! abandoned ones cannot fill it (docs/INTEGRATION.md, "OPC UA").

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use crate::service::RateLimiter;

/// An eviction is logged at most this often (each is counted).
const EVICTION_LOG_EVERY: Duration = Duration::from_secs(60);

/// The gate's counters (`OpcUaServer::counters`).
#[derive(Debug, Default)]
pub struct GateCounters {
    pub accepted: AtomicU64,
    /// Closed to admit a new connection: `max_connections` were open and
    /// this one had gone longest without sending.
    pub evicted_idle: AtomicU64,
    /// Open now.
    pub open: AtomicUsize,
}

/// The accept loop's state (one task: no locks).
pub struct Gate {
    pub upstream: SocketAddr,
    pub max_connections: usize,
    pub counters: Arc<GateCounters>,
    connections: Vec<Admitted>,
    epoch: Instant,
    eviction_log: RateLimiter,
}

struct Admitted {
    peer: SocketAddr,
    /// Milliseconds after `Gate::epoch` of its last byte from the client.
    last_sent: Arc<AtomicU64>,
    task: AbortHandle,
}

impl Gate {
    pub fn new(upstream: SocketAddr, max_connections: usize, counters: Arc<GateCounters>) -> Gate {
        Gate {
            upstream,
            max_connections: max_connections.max(1),
            counters,
            connections: Vec::new(),
            epoch: Instant::now(),
            eviction_log: RateLimiter::new(EVICTION_LOG_EVERY),
        }
    }

    /// Accepts until the task is dropped (the runtime ends).
    pub async fn run(mut self, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => self.admit(stream, peer),
                Err(error) => {
                    // Out of descriptors and the like: wait a little, go on.
                    log::warn!(target: "sealcheck::opcua", error:% = error; "OPC UA accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn admit(&mut self, stream: TcpStream, peer: SocketAddr) {
        let now = self.millis();
        self.connections.retain(|c| !c.task.is_finished());
        if self.connections.len() >= self.max_connections {
            self.evict_the_longest_idle(peer, now);
        }
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let last_sent = Arc::new(AtomicU64::new(now));
        let written = Arc::clone(&last_sent);
        let upstream = self.upstream;
        let epoch = self.epoch;
        let open = Open::new(Arc::clone(&self.counters));
        let task = tokio::spawn(async move {
            let _open = open;
            if let Err(error) = pipe(stream, upstream, &written, epoch).await {
                log::debug!(target: "sealcheck::opcua", peer:% = peer, error:% = error;
                    "OPC UA connection from {peer} ended: {error}");
            }
        });
        self.connections.push(Admitted {
            peer,
            last_sent,
            task: task.abort_handle(),
        });
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Closes the connection silent longest, to admit `newcomer`.
    fn evict_the_longest_idle(&mut self, newcomer: SocketAddr, now: u64) {
        let Some(index) = self
            .connections
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| c.last_sent.load(Ordering::Relaxed))
            .map(|(index, _)| index)
        else {
            return;
        };
        let evicted = self.connections.swap_remove(index);
        evicted.task.abort();
        let silent_ms = now.saturating_sub(evicted.last_sent.load(Ordering::Relaxed));
        let count = self.counters.evicted_idle.fetch_add(1, Ordering::Relaxed) + 1;
        if self.eviction_log.admit().is_log() {
            log::warn!(target: "sealcheck::opcua", peer:% = evicted.peer, newcomer:% = newcomer,
                silent_ms = silent_ms, max_connections = self.max_connections, evicted = count;
                "OPC UA connection from {} closed to admit {newcomer}: {} connections were open ([opcua] max_connections) and it had sent nothing for {:.1} s (logged once a minute; {count} closed so far)",
                evicted.peer, self.max_connections, silent_ms as f64 / 1000.0);
        }
    }
}

/// The client's bytes to the server and back until either side closes;
/// each read from the client stamps `last_sent`.
async fn pipe(
    client: TcpStream,
    upstream: SocketAddr,
    last_sent: &AtomicU64,
    epoch: Instant,
) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let up = async {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = from_client.read(&mut buffer).await?;
            if n == 0 {
                return Ok::<(), std::io::Error>(());
            }
            let since = u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
            last_sent.store(since, Ordering::Relaxed);
            to_server.write_all(&buffer[..n]).await?;
        }
    };
    let down = async {
        tokio::io::copy(&mut from_server, &mut to_client).await?;
        Ok::<(), std::io::Error>(())
    };
    // Either side's end ends both: dropping the halves closes the sockets.
    tokio::select! {
        result = up => result,
        result = down => result,
    }
}

/// One open connection, counted while it lives.
struct Open {
    counters: Arc<GateCounters>,
}

impl Open {
    fn new(counters: Arc<GateCounters>) -> Open {
        counters.open.fetch_add(1, Ordering::Relaxed);
        Open { counters }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}
