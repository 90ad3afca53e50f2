//! `ModbusServer`: the listener on `[modbus] listen`, on its own thread with
//! a current-thread tokio runtime; the allow list and the connection cap at
//! accept; one task per connection (`connection`); a bounded stop.
//!
//! A full server never locks a PLC out: as Modbus devices commonly do (the
//! Modbus TCP implementation guide's connection management), the connection
//! that has gone longest without a request is closed to admit the new one,
//! counted (`ModbusCounters::evicted_idle`) and logged. A PLC that reconnects
//! after a cable pull leaves exactly such half-open connections behind.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::connection::{self, End};
use super::error::PlcError;
use super::station::Station;
use crate::config::ModbusConfig;
use crate::service::RateLimiter;

/// How long `stop` waits for the server's thread; past it the thread is
/// left behind (logged), so the service never hangs on stop.
pub const STOP_WAIT: Duration = Duration::from_secs(2);

/// A refused address (allow list) or the cap is logged at most this often.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);

/// Modbus unit ids for cameras: 1..=247 (the spec's range for devices).
const MAX_STATIONS: usize = 247;

/// The server's counters (requests, connections), read by the tests.
#[derive(Debug, Default)]
pub struct ModbusCounters {
    pub accepted: AtomicU64,
    /// Requests answered (a response or an exception).
    pub requests: AtomicU64,
    /// Closed at accept: the address is not on `allow`.
    pub refused_not_allowed: AtomicU64,
    /// Closed to admit a new connection: `max_connections` were open and
    /// this one had gone longest without a request.
    pub evicted_idle: AtomicU64,
    /// Closed after `idle_timeout` without a request.
    pub closed_idle: AtomicU64,
    /// Closed on a header that cannot be framed.
    pub closed_framing: AtomicU64,
    /// Open now.
    pub open: AtomicUsize,
}

/// The running server; `stop()` or dropping it ends it within `STOP_WAIT`.
pub struct ModbusServer {
    addr: SocketAddr,
    counters: Arc<ModbusCounters>,
    stop: Option<oneshot::Sender<()>>,
    done: mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl ModbusServer {
    /// Listens on `config.listen` and serves `stations` (unit id 1 is
    /// `stations[0]`); returns once the port is bound.
    pub fn start(
        config: &ModbusConfig,
        stations: Vec<Arc<Station>>,
    ) -> Result<ModbusServer, PlcError> {
        if stations.len() > MAX_STATIONS {
            return Err(PlcError::TooManyStations {
                count: stations.len(),
            });
        }
        for (index, station) in stations.iter().enumerate() {
            if usize::from(station.unit()) != index + 1 {
                return Err(PlcError::UnitOrder {
                    index,
                    unit: station.unit(),
                });
            }
        }
        let listen = config.listen;
        let std_listener =
            std::net::TcpListener::bind(listen).map_err(|e| PlcError::bind(listen, e))?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| PlcError::bind(listen, e))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|source| PlcError::Listen { addr, source })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|source| PlcError::Thread { addr, source })?;
        let counters = Arc::new(ModbusCounters::default());
        let units = stations.len();
        let (stop_tx, stop_rx) = oneshot::channel();
        let (done_tx, done) = mpsc::channel();
        let accept = Accept {
            stations: stations.into(),
            allow: config.allow.iter().map(|ip| ip.to_canonical()).collect(),
            max_connections: config.max_connections.max(1),
            idle: config.idle_timeout,
            counters: Arc::clone(&counters),
            connections: Vec::new(),
            epoch: Instant::now(),
            refusals: HashMap::new(),
            cap_log: RateLimiter::new(REFUSAL_LOG_EVERY),
        };
        let thread = std::thread::Builder::new()
            .name("modbus".into())
            .spawn(move || {
                let result = runtime.block_on(async move {
                    let listener = TcpListener::from_std(std_listener)?;
                    accept.run(listener, stop_rx).await;
                    Ok::<(), std::io::Error>(())
                });
                if let Err(error) = result {
                    log::error!(target: "sealcheck::plc", addr:% = addr, error:% = error;
                        "Modbus server stopped: {error}");
                }
                // Ends every connection task (their sockets close).
                drop(runtime);
                let _ = done_tx.send(());
            })
            .map_err(|source| PlcError::Thread { addr, source })?;
        log::info!(target: "sealcheck::plc", addr:% = addr, units = units;
            "Modbus TCP server listening on {addr}, unit ids 1 to {units}");
        Ok(ModbusServer {
            addr,
            counters,
            stop: Some(stop_tx),
            done,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port the OS chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn counters(&self) -> &Arc<ModbusCounters> {
        &self.counters
    }

    /// Closes the listener and every connection; waits at most `STOP_WAIT`.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let Some(stop) = self.stop.take() else { return };
        let _ = stop.send(());
        match self.done.recv_timeout(STOP_WAIT) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(thread) = self.thread.take() {
                    let _ = thread.join();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                log::warn!(target: "sealcheck::plc", addr:% = self.addr;
                    "the Modbus server did not stop within {} s; left behind", STOP_WAIT.as_secs());
            }
        }
    }
}

impl Drop for ModbusServer {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The accept loop's state (one task: no locks).
struct Accept {
    stations: Arc<[Arc<Station>]>,
    allow: Vec<IpAddr>,
    max_connections: usize,
    idle: Duration,
    counters: Arc<ModbusCounters>,
    /// The connections admitted, finished ones pruned at the cap.
    connections: Vec<Admitted>,
    /// The zero of `Admitted::last_request`.
    epoch: Instant,
    /// Each refused address's warnings, one per `REFUSAL_LOG_EVERY`.
    refusals: HashMap<IpAddr, RateLimiter>,
    /// Evictions at the cap, one warning per `REFUSAL_LOG_EVERY`.
    cap_log: RateLimiter,
}

/// An admitted connection, as the accept loop sees it.
struct Admitted {
    peer: SocketAddr,
    /// Milliseconds after `Accept::epoch` of its last request (its accept
    /// before the first), written by its task.
    last_request: Arc<AtomicU64>,
    task: AbortHandle,
}

impl Accept {
    async fn run(mut self, listener: TcpListener, mut stop: oneshot::Receiver<()>) {
        loop {
            let next = std::future::poll_fn(|cx| {
                if Pin::new(&mut stop).poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                listener.poll_accept(cx).map(Some)
            })
            .await;
            match next {
                None => return,
                Some(Ok((stream, peer))) => self.admit(stream, peer),
                Some(Err(error)) => {
                    // Out of descriptors and the like: wait a little, go on.
                    log::warn!(target: "sealcheck::plc", error:% = error; "Modbus accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn admit(&mut self, stream: tokio::net::TcpStream, peer: SocketAddr) {
        let ip = peer.ip().to_canonical();
        if !self.allow.is_empty() && !self.allow.contains(&ip) {
            self.counters
                .refused_not_allowed
                .fetch_add(1, Ordering::Relaxed);
            if self.refusals.len() > 1024 {
                self.refusals.retain(|_, log| !log.is_quiet());
            }
            let due = self
                .refusals
                .entry(ip)
                .or_insert_with(|| RateLimiter::new(REFUSAL_LOG_EVERY))
                .admit()
                .is_log();
            if due {
                log::warn!(target: "sealcheck::plc", peer:% = ip;
                    "Modbus connection from {ip} closed: not on [modbus] allow (logged once a minute per address)");
            }
            return;
        }
        let now = self.millis();
        self.connections.retain(|c| !c.task.is_finished());
        if self.connections.len() >= self.max_connections {
            self.evict_the_longest_idle(peer, now);
        }
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let open = Open::new(Arc::clone(&self.counters));
        let stations = Arc::clone(&self.stations);
        let idle = self.idle;
        let last_request = Arc::new(AtomicU64::new(now));
        let written = Arc::clone(&last_request);
        let epoch = self.epoch;
        log::info!(target: "sealcheck::plc", peer:% = peer; "PLC connected from {peer}");
        let task = tokio::spawn(async move {
            let activity = connection::Activity {
                requests: &open.counters.requests,
                last_request: &written,
                epoch,
            };
            let end = connection::serve(stream, stations, idle, activity).await;
            match &end {
                End::Closed => {
                    log::info!(target: "sealcheck::plc", peer:% = peer; "PLC {peer} disconnected")
                }
                End::Idle => {
                    open.counters.closed_idle.fetch_add(1, Ordering::Relaxed);
                    log::info!(target: "sealcheck::plc", peer:% = peer, idle_s = idle.as_secs();
                        "PLC {peer} closed: no request for {} s ([modbus] idle_timeout_s)", idle.as_secs());
                }
                End::Framing(why) => {
                    open.counters.closed_framing.fetch_add(1, Ordering::Relaxed);
                    log::warn!(target: "sealcheck::plc", peer:% = peer;
                        "PLC {peer} closed: not a Modbus TCP frame: {why}");
                }
                End::Io(error) => {
                    log::info!(target: "sealcheck::plc", peer:% = peer, error:% = error;
                    "PLC {peer} connection ended: {error}")
                }
            }
            drop(open);
        });
        self.connections.push(Admitted {
            peer,
            last_request,
            task: task.abort_handle(),
        });
    }

    /// Milliseconds since `epoch`, the clock of `Admitted::last_request`.
    fn millis(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Closes the connection that has gone longest without a request, to
    /// admit `newcomer`. Its task is aborted: the runtime (this thread) drops
    /// it when it next schedules it, soon after this accept; that closes its
    /// socket and drops its `Open` (`counters.open` lags until then).
    fn evict_the_longest_idle(&mut self, newcomer: SocketAddr, now: u64) {
        let Some(index) = self
            .connections
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| c.last_request.load(Ordering::Relaxed))
            .map(|(index, _)| index)
        else {
            return;
        };
        let evicted = self.connections.swap_remove(index);
        evicted.task.abort();
        let silent_ms = now.saturating_sub(evicted.last_request.load(Ordering::Relaxed));
        let count = self.counters.evicted_idle.fetch_add(1, Ordering::Relaxed) + 1;
        if self.cap_log.admit().is_log() {
            log::warn!(target: "sealcheck::plc", peer:% = evicted.peer, newcomer:% = newcomer,
                silent_ms = silent_ms, max_connections = self.max_connections, evicted = count;
                "Modbus connection from {} closed to admit {newcomer}: {} connections were open ([modbus] max_connections) and it had sent no request for {:.1} s (logged once a minute; {count} closed so far)",
                evicted.peer, self.max_connections, silent_ms as f64 / 1000.0);
        }
    }
}

/// One open connection, counted while it lives.
struct Open {
    counters: Arc<ModbusCounters>,
}

impl Open {
    fn new(counters: Arc<ModbusCounters>) -> Open {
        counters.open.fetch_add(1, Ordering::Relaxed);
        Open { counters }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}
