//! `OpcUaServer`: async-opcua's server on its own thread with a
//! current-thread tokio runtime (as `plc::ModbusServer`), behind the gate
//! (`gate`) on `[opcua] listen`; the Machine Vision NodeSet and
//! sealcheck's namespace (`space`); and the pump that turns each camera's
//! results (`output::OpcUaOutput`) into a ResultReadyEvent and plain
//! variables, in part order. A bounded stop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use async_opcua::server::diagnostics::NamespaceMetadata;
use async_opcua::server::node_manager::memory::{
    SimpleNodeManager, simple_node_manager, simple_node_manager_imports,
};
use async_opcua::server::{ServerBuilder, ServerHandle};
use tokio::net::TcpListener;
use tokio::sync::{mpsc as channel, oneshot};

use super::access::Access;
use super::error::OpcUaError;
use super::gate::{Gate, GateCounters};
use super::ids::{MV_URI, Namespaces, OUR_URI};
use super::nodeset::machine_vision;
use super::output::{OpcUaOutput, QUEUE};
use super::pump::Pump;
use super::recipe::RecipeBook;
use super::record::ResultRecord;
use super::security::{self, APPLICATION_URI};
use super::space::{CameraNodes, add_camera};
use super::station::VisionStation;
use super::types::MachineVisionTypes;
use super::users::Users;
use crate::config::OpcUaConfig;
use crate::line::LineOutput;
use crate::trigger::TriggerDesk;

/// How long `stop` waits for the server's thread; past it the thread is
/// left behind (logged), so the service never hangs on stop.
pub const STOP_WAIT: Duration = Duration::from_secs(2);
/// Events queued per monitored item at most (a client asks with QueueSize).
const MAX_ITEM_QUEUE: usize = 10_000;

/// A camera as the server serves it.
pub struct Camera {
    /// `[cameras.NAME]`'s name, or "camera" for one `[source]`.
    pub name: String,
    /// `plc` mode's desk (StartSingleJob triggers through it).
    pub desk: Option<Arc<TriggerDesk>>,
}

/// The running server; `stop()` or dropping it ends it within `STOP_WAIT`.
pub struct OpcUaServer {
    addr: SocketAddr,
    counters: Arc<GateCounters>,
    dropped: Arc<AtomicU64>,
    access: Arc<Access>,
    stop: Option<oneshot::Sender<()>>,
    done: mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl OpcUaServer {
    /// Listens on `config.listen` and serves one VisionSystem per camera;
    /// returns once the server is up, with each camera's line output.
    /// `pki_dir` is the certificate store (`[opcua] pki_dir` or its default):
    /// the server's certificate is made there on first start.
    pub fn start(
        config: &OpcUaConfig,
        cameras: Vec<Camera>,
        recipes: RecipeBook,
        pki_dir: PathBuf,
    ) -> Result<(OpcUaServer, Vec<Arc<dyn LineOutput>>), OpcUaError> {
        let listen = config.listen;
        let users = match &config.users_file {
            Some(path) => Users::read(path)?,
            None => Users::default(),
        };
        let thumbprint = security::ensure_certificate(&pki_dir, listen.ip())?;
        security::adopt_trusted(&pki_dir);
        let access = Arc::new(Access::new(config.loopback(), users.clone()));
        let public =
            std::net::TcpListener::bind(listen).map_err(|e| OpcUaError::bind(listen, e))?;
        let addr = public
            .local_addr()
            .map_err(|e| OpcUaError::bind(listen, e))?;
        public
            .set_nonblocking(true)
            .map_err(|source| OpcUaError::Listen { addr, source })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|source| OpcUaError::Thread { addr, source })?;
        let (queue, results) = channel::channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let stations: Vec<Arc<VisionStation>> = cameras
            .iter()
            .enumerate()
            .map(|(index, camera)| {
                Arc::new(VisionStation::new(
                    index,
                    camera.desk.clone(),
                    recipes.clone(),
                    config.results_kept,
                ))
            })
            .collect();
        let outputs = (0..cameras.len())
            .map(|index| {
                Arc::new(OpcUaOutput::new(index, queue.clone(), Arc::clone(&dropped)))
                    as Arc<dyn LineOutput>
            })
            .collect();
        let counters = Arc::new(GateCounters::default());
        let gate_counters = Arc::clone(&counters);
        let names: Vec<String> = cameras.into_iter().map(|c| c.name).collect();
        let max_connections = config.max_connections;
        let publish_interval_ms = config.publish_interval_ms;
        let server_access = Arc::clone(&access);
        let (stop_tx, stop_rx) = oneshot::channel();
        let (done_tx, done) = mpsc::channel();
        let (up_tx, up_rx) = mpsc::channel::<Result<(), String>>();
        let thread = std::thread::Builder::new()
            .name("opcua".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let serving = Serving {
                        addr,
                        names,
                        stations,
                        max_connections,
                        pki_dir,
                        access: server_access,
                        recipes,
                        publish_interval_ms,
                    };
                    serving
                        .run(public, gate_counters, results, stop_rx, up_tx)
                        .await;
                });
                // Ends every connection task (their sockets close).
                drop(runtime);
                let _ = done_tx.send(());
            })
            .map_err(|source| OpcUaError::Thread { addr, source })?;
        match up_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => return Err(OpcUaError::Start { addr, why }),
            Err(_) => {
                return Err(OpcUaError::Start {
                    addr,
                    why: "it did not come up within 30 s".into(),
                });
            }
        }
        let open = if config.loopback() {
            "SecurityPolicy None and anonymous clients (loopback), and "
        } else {
            "no SecurityPolicy None nor anonymous clients (off loopback); "
        };
        log::info!(target: "sealcheck::opcua", addr:% = addr, certificate = thumbprint.as_str();
            "OPC UA server listening on opc.tcp://{addr}/ (Machine Vision, OPC 40100-1): {open}Basic256Sha256 and Aes256Sha256RsaPss (Sign, SignAndEncrypt) with {} user(s) of [opcua] users_file; certificate thumbprint {thumbprint}",
            users.len());
        let server = OpcUaServer {
            addr,
            counters,
            dropped,
            access,
            stop: Some(stop_tx),
            done,
            thread: Some(thread),
        };
        Ok((server, outputs))
    }

    /// The address it listens on (the port the OS chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn counters(&self) -> &Arc<GateCounters> {
        &self.counters
    }

    /// Logins refused since start (anonymous off loopback, a wrong password).
    pub fn logins_refused(&self) -> u64 {
        self.access.refused()
    }

    /// Results not published because the server's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
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
                log::warn!(target: "sealcheck::opcua", addr:% = self.addr;
                    "the OPC UA server did not stop within {} s; left behind", STOP_WAIT.as_secs());
            }
        }
    }
}

impl Drop for OpcUaServer {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// What the server's thread runs.
struct Serving {
    addr: SocketAddr,
    names: Vec<String>,
    stations: Vec<Arc<VisionStation>>,
    max_connections: usize,
    pki_dir: PathBuf,
    access: Arc<Access>,
    recipes: RecipeBook,
    publish_interval_ms: u64,
}

impl Serving {
    async fn run(
        self,
        public: std::net::TcpListener,
        counters: Arc<GateCounters>,
        results: channel::Receiver<(usize, ResultRecord)>,
        stop: oneshot::Receiver<()>,
        up: mpsc::Sender<Result<(), String>>,
    ) {
        let started = match self.build(public, counters).await {
            Ok(started) => started,
            Err(why) => {
                let _ = up.send(Err(why));
                return;
            }
        };
        let _ = up.send(Ok(()));
        let Started {
            server,
            handle,
            gate,
            pump,
        } = started;
        let gate = tokio::spawn(gate);
        let pump = tokio::spawn(pump.run(results));
        // The server runs in this task (its future need not be Send).
        let mut server = server;
        tokio::select! {
            _ = &mut server => {}
            _ = stop => {
                gate.abort();
                handle.cancel();
                let _ = tokio::time::timeout(STOP_WAIT, &mut server).await;
            }
        }
        pump.abort();
    }

    async fn build(
        self,
        public: std::net::TcpListener,
        counters: Arc<GateCounters>,
    ) -> Result<Started, String> {
        let public = TcpListener::from_std(public).map_err(|e| e.to_string())?;
        let inner = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let upstream = inner.local_addr().map_err(|e| e.to_string())?;
        let import = machine_vision().map_err(|e| e.to_string())?;
        let mut builder = ServerBuilder::new()
            .application_name("sealcheck")
            .application_uri(APPLICATION_URI)
            .product_uri(APPLICATION_URI)
            .host(security::endpoint_host(self.addr.ip()))
            .port(self.addr.port())
            // The certificate is made before (`security::ensure_certificate`);
            // client certificates are trusted only from pki_dir/trusted.
            .pki_dir(self.pki_dir.clone())
            .create_sample_keypair(false)
            .trust_client_certs(false)
            .with_authenticator(self.access.clone())
            .discovery_urls(vec![security::PATH.to_owned()])
            // Sessions cannot be closed from outside (the gate's module
            // doc): room for every connection's and the abandoned ones'.
            .max_sessions(self.max_connections * 4 + 16)
            .max_session_timeout_ms(60_000)
            .with_type_loader(MachineVisionTypes::loader())
            .with_node_manager(simple_node_manager_imports(
                vec![Box::new(import)],
                "machine-vision",
            ))
            .with_node_manager(simple_node_manager(
                NamespaceMetadata {
                    namespace_uri: OUR_URI.to_owned(),
                    ..Default::default()
                },
                "sealcheck",
            ));
        for (id, endpoint) in security::endpoints(self.addr.ip().is_loopback()) {
            builder = builder.add_endpoint(id, endpoint);
        }
        // async-opcua publishes on a timer only (100 ms by default, its
        // least publishing interval too): `[opcua] publish_interval_ms`.
        builder = builder.subscription_poll_interval_ms(self.publish_interval_ms);
        let subscriptions = &mut builder.limits_mut().subscriptions;
        subscriptions.max_monitored_item_queue_size = MAX_ITEM_QUEUE;
        subscriptions.min_publishing_interval_ms = self.publish_interval_ms as f64;
        let (server, handle) = builder.build()?;
        let ns = Namespaces {
            mv: handle
                .get_namespace_index(MV_URI)
                .ok_or("the Machine Vision namespace is missing")?,
            ours: handle
                .get_namespace_index(OUR_URI)
                .ok_or("sealcheck's namespace is missing")?,
        };
        let managers = handle.node_managers();
        let mv = managers
            .get_by_name::<SimpleNodeManager>("machine-vision")
            .ok_or("no Machine Vision node manager")?;
        let ours = managers
            .get_by_name::<SimpleNodeManager>("sealcheck")
            .ok_or("no sealcheck node manager")?;
        let nodes: Vec<CameraNodes> = {
            let mv_space = mv.address_space().read();
            self.names
                .iter()
                .zip(&self.stations)
                .map(|(name, station)| add_camera(&ours, &mv_space, ns, name, station))
                .collect()
        };
        let gate = Gate::new(upstream, self.max_connections, counters).run(public);
        let pump = Pump::new(ns, handle.clone(), ours, self.stations, nodes, self.recipes);
        let server = async move {
            if let Err(why) = server.run_with(inner).await {
                log::error!(target: "sealcheck::opcua", "OPC UA server stopped: {why}");
            }
        };
        Ok(Started {
            server: Box::pin(server),
            handle,
            gate: Box::pin(gate),
            pump,
        })
    }
}

type Task = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

struct Started {
    server: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>,
    handle: ServerHandle,
    gate: Task,
    pump: Pump,
}
