//! The two MQTT threads and the rumqttc client they share (see `mod.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rumqttc::Outgoing;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{
    ConnectReturnCode, LastWill, Packet, PubAckReason, PublishProperties,
};
use rumqttc::v5::{Client, Connection, ConnectionError, Event, MqttOptions, StateError, mqttbytes};

use super::message::format_verdict;
use super::queue::{Sent, Shared, State, WINDOW};
use super::start_error::{StartError, open_to_others};
use super::stats::{DropReason, thread_cpu_ns};
use super::tls;
use crate::config::{ClientCertificate, MqttConfig};
use crate::line::part_deadline::SEND_MARGIN;
use crate::model_id::ModelIds;

/// Reconnect backoff: the first retry after this, doubling up to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Seconds a connection attempt may take (TCP, TLS, CONNACK).
const CONNECT_TIMEOUT_S: u64 = 3;
/// Longest wait for the `offline` status to be acknowledged at a clean stop.
const GOODBYE: Duration = Duration::from_secs(1);

pub(super) struct Running {
    client: Client,
    event_thread: JoinHandle<()>,
    handover_thread: JoinHandle<()>,
    status_topic: String,
}

pub(super) fn start(
    config: &MqttConfig,
    models: ModelIds,
    shared: Arc<Shared>,
) -> Result<Running, StartError> {
    let options = options(config)?;
    let (client, connection) = Client::new(options, 2 * WINDOW);
    let qos = if config.qos == 0 {
        QoS::AtMostOnce
    } else {
        QoS::AtLeastOnce
    };
    let status_topic = format!("{}/status", config.topic);
    let events = EventLoop {
        shared: Arc::clone(&shared),
        client: client.clone(),
        status_topic: status_topic.clone(),
        describe: Describe {
            broker: shared.stats.broker.clone(),
            client_id: config.client_id.clone(),
            username: config.username.clone(),
            ca_file: config.broker.tls_ca_file.clone(),
            client_certificate: config.client_certificate.clone(),
        },
        rejection_logged: Default::default(),
    };
    let event_thread = std::thread::Builder::new()
        .name("mqtt".into())
        .spawn(move || {
            let stats = Arc::clone(&events.shared.stats);
            crate::line::priority::raise_thread_priority();
            events.run(connection);
            stats.cpu_ns.fetch_add(thread_cpu_ns(), Ordering::Relaxed);
        })
        .map_err(StartError::Spawn)?;
    let handover = Handover {
        shared,
        client: client.clone(),
        topic: config.topic.clone(),
        qos,
        models,
    };
    let handover_thread = std::thread::Builder::new()
        .name("mqtt-publish".into())
        .spawn(move || {
            let stats = Arc::clone(&handover.shared.stats);
            crate::line::priority::raise_thread_priority();
            handover.run();
            stats.cpu_ns.fetch_add(thread_cpu_ns(), Ordering::Relaxed);
        })
        .map_err(StartError::Spawn)?;
    Ok(Running {
        client,
        event_thread,
        handover_thread,
        status_topic,
    })
}

/// What `start` reads before it connects: the password, the CA, the client
/// certificate and key.
pub(super) fn check_files(config: &MqttConfig) -> Result<(), StartError> {
    options(config).map(|_| ())
}

fn options(config: &MqttConfig) -> Result<MqttOptions, StartError> {
    let broker = &config.broker;
    let mut options = MqttOptions::new(config.client_id.clone(), broker.host.clone(), broker.port);
    options
        .set_keep_alive(config.keep_alive)
        .set_clean_start(true)
        .set_connection_timeout(CONNECT_TIMEOUT_S)
        .set_last_will(LastWill::new(
            format!("{}/status", config.topic),
            "offline",
            QoS::AtLeastOnce,
            true,
            None,
        ));
    if let Some(user) = &config.username {
        let password = match &config.password_file {
            Some(path) => read_password(path)?,
            None => String::new(),
        };
        options.set_credentials(user.clone(), password);
    }
    if let Some(ca) = &broker.tls_ca_file {
        options.set_transport(rumqttc::Transport::tls_with_config(
            rumqttc::TlsConfiguration::Rustls(Arc::new(tls::client_config(
                ca,
                config.client_certificate.as_ref(),
            )?)),
        ));
    }
    Ok(options)
}

/// The password, from a file only the service may read (like ssh's keys).
fn read_password(path: &Path) -> Result<String, StartError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => StartError::PasswordFileMissing(path.to_path_buf()),
        _ => StartError::PasswordFileRead {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    if let Some(mode) = open_to_others(&meta) {
        return Err(StartError::PasswordFileOpen {
            path: path.to_path_buf(),
            mode,
        });
    }
    let text = std::fs::read_to_string(path).map_err(|source| StartError::PasswordFileRead {
        path: path.to_path_buf(),
        source,
    })?;
    let password = text.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        return Err(StartError::PasswordFileEmpty(path.to_path_buf()));
    }
    Ok(password)
}

impl Running {
    pub(super) fn finish(self, shared: &Shared, flush: Duration) {
        let mut state = shared.lock();
        state.stopping = true;
        shared.wake.notify_all();
        state = shared
            .wake
            .wait_timeout_while(state, flush, |s| {
                s.connected && !(s.queue.is_empty() && s.handed.is_empty() && s.inflight.is_empty())
            })
            .unwrap_or_else(|p| p.into_inner())
            .0;
        let left = state.queue.len()
            + state
                .handed
                .iter()
                .chain(state.inflight.values())
                .filter(|s| matches!(s, Sent::Verdict(_)))
                .count();
        if left > 0 {
            shared
                .stats
                .drop_verdicts(DropReason::Shutdown, left as u64);
            log::warn!(target: "sealcheck::mqtt", verdicts = left; "stopping: verdicts not yet sent to the broker are dropped");
        }
        state.queue.clear();
        state.handed.clear();
        state.inflight.clear();
        // A clean DISCONNECT suppresses the last will: say `offline` ourselves.
        let goodbye = state.connected
            && self
                .client
                .try_publish(&self.status_topic, QoS::AtLeastOnce, true, "offline")
                .is_ok();
        if goodbye {
            state.handed.push_back(Sent::Status);
            state = shared
                .wake
                .wait_timeout_while(state, GOODBYE, |s| {
                    s.connected && !(s.handed.is_empty() && s.inflight.is_empty())
                })
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        state.closed = true;
        let connected = state.connected;
        drop(state);
        shared.wake.notify_all();
        if connected {
            let _ = self.client.try_disconnect();
        }
        // The event thread ends at the DISCONNECT, or within one connect attempt
        // while the broker is away; a thread still connecting is left to the exit.
        drop(self.client);
        let _ = self.handover_thread.join();
        let waited = Instant::now();
        while !self.event_thread.is_finished() {
            if waited.elapsed() > Duration::from_secs(CONNECT_TIMEOUT_S + 1) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.event_thread.join();
    }
}

/// Hands queued verdicts to rumqttc while connected, at most `WINDOW` unacknowledged.
struct Handover {
    shared: Arc<Shared>,
    client: Client,
    /// `[mqtt] topic`: verdicts go to `<topic>/verdict`, or with named
    /// cameras to `<topic>/<camera>/verdict`.
    topic: String,
    qos: QoS,
    models: ModelIds,
}

impl Handover {
    fn run(self) {
        let mut payload = String::with_capacity(512);
        let mut state = self.shared.lock();
        loop {
            if state.closed {
                return;
            }
            let now = Instant::now();
            self.shared.sweep_expired(&mut state, now);
            if state.queue.is_empty() {
                state.overflow_logged = false;
            }
            let room = state.connected && state.handed.len() + state.inflight.len() < WINDOW;
            if room && let Some(verdict) = state.queue.pop_front() {
                format_verdict(
                    &mut payload,
                    &verdict,
                    verdict.models.as_deref().unwrap_or(&self.models),
                );
                let properties = PublishProperties {
                    payload_format_indicator: Some(1),
                    message_expiry_interval: verdict
                        .deadline
                        .map(|d| expiry_seconds(d.expires.saturating_duration_since(now))),
                    content_type: Some("application/json".into()),
                    ..Default::default()
                };
                // Under the state lock: a disconnect cannot come between the
                // `connected` check and the hand-over (see EventLoop::disconnected).
                let topic = match &verdict.camera {
                    Some(camera) => format!("{}/{camera}/verdict", self.topic),
                    None => format!("{}/verdict", self.topic),
                };
                match self.client.try_publish_with_properties(
                    topic,
                    self.qos,
                    false,
                    payload.as_bytes().to_vec(),
                    properties,
                ) {
                    Ok(()) => state.handed.push_back(Sent::Verdict(verdict)),
                    Err(_) => {
                        // rumqttc's request channel is full (cannot happen within WINDOW): retry soon.
                        state.queue.push_front(verdict);
                        state = self.wait(state, Duration::from_millis(5));
                    }
                }
                continue;
            }
            // Wake for new verdicts, acks, a connect, or the next expiry in the queue.
            let next_expiry = state
                .queue
                .iter()
                .filter_map(|v| v.deadline.map(|d| d.expires))
                .min()
                .map(|expires| expires.saturating_duration_since(now + SEND_MARGIN));
            let wait = next_expiry.map_or(Duration::from_millis(200), |d| {
                d.clamp(Duration::from_millis(1), Duration::from_millis(200))
            });
            state = self.wait(state, wait);
        }
    }

    fn wait<'a>(
        &self,
        state: std::sync::MutexGuard<'a, State>,
        timeout: Duration,
    ) -> std::sync::MutexGuard<'a, State> {
        self.shared
            .wake
            .wait_timeout(state, timeout)
            .unwrap_or_else(|p| p.into_inner())
            .0
    }
}

/// MQTT 5 message expiry is whole seconds: the time left, rounded up, at least 1.
pub(super) fn expiry_seconds(left: Duration) -> u32 {
    let whole = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    u32::try_from(whole.max(1)).unwrap_or(u32::MAX)
}

/// Names the broker and client in messages.
struct Describe {
    broker: String,
    client_id: String,
    username: Option<String>,
    ca_file: Option<PathBuf>,
    client_certificate: Option<ClientCertificate>,
}

impl Describe {
    fn trust(&self) -> tls::TlsSetup<'_> {
        tls::TlsSetup {
            ca_file: self.ca_file.as_deref(),
            client: self.client_certificate.as_ref(),
        }
    }

    /// What went wrong and what to do, without any secret.
    fn error(&self, e: &ConnectionError) -> String {
        let b = &self.broker;
        match e {
            ConnectionError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                format!(
                    "connection to {b} refused: is the broker running and listening on that port?"
                )
            }
            // TLS 1.3 brings the broker's refusal of a client certificate
            // after the handshake, on the first read.
            ConnectionError::Io(io) => tls::explain_io(b, &self.trust(), io)
                .unwrap_or_else(|| format!("network error talking to {b}: {io}")),
            ConnectionError::Timeout(_) => format!(
                "no answer from {b} within {CONNECT_TIMEOUT_S} s: check the host, the port and any firewall, and that it speaks MQTT there"
            ),
            ConnectionError::ConnectionRefused(code) => match code {
                ConnectReturnCode::BadUserNamePassword => format!(
                    "{b} refused the user name or password: check `username` and the file named by `password_file` in [mqtt]"
                ),
                // Mosquitto answers a wrong password and a refused client id alike.
                ConnectReturnCode::NotAuthorized => format!(
                    "{b} does not authorise this client (client id \"{}\"{}): check the password in the file named by `password_file`, `username` and `client_id` in [mqtt] against the broker's users and allowed client ids",
                    self.client_id,
                    self.username
                        .as_deref()
                        .map_or(", anonymous".to_string(), |u| format!(", user \"{u}\""))
                ),
                ConnectReturnCode::ClientIdentifierNotValid | ConnectReturnCode::BadClientId => {
                    format!(
                        "{b} refused client id \"{}\": set `client_id` in [mqtt] to one the broker accepts",
                        self.client_id
                    )
                }
                ConnectReturnCode::Banned => {
                    format!("{b} has banned this client: ask its administrator")
                }
                other => format!("{b} refused the connection ({other:?})"),
            },
            ConnectionError::Tls(tls) => tls::explain(b, &self.trust(), tls),
            // A broker that refuses our client certificate (or its absence)
            // says so with an alert that rumqttc reads as a broken packet.
            ConnectionError::MqttState(
                StateError::Io(io) | StateError::Deserialization(mqttbytes::Error::Io(io)),
            ) => tls::explain_io(b, &self.trust(), io)
                .unwrap_or_else(|| format!("connection to {b} failed: {e}")),
            other => format!("connection to {b} failed: {other}"),
        }
    }
}

/// Owns the connection: drives rumqttc's event loop, reconnects with backoff,
/// and matches acknowledgements to verdicts.
struct EventLoop {
    shared: Arc<Shared>,
    client: Client,
    status_topic: String,
    describe: Describe,
    /// A refused publish was logged (once per run: it is a broker setting).
    rejection_logged: std::sync::atomic::AtomicBool,
}

/// The current outage: when it began and what was dropped before it.
struct Outage {
    since: Instant,
    dropped_before: u64,
    logged: String,
}

impl EventLoop {
    fn run(self, mut connection: Connection) {
        let mut backoff = MIN_BACKOFF;
        let mut outage: Option<Outage> = None;
        let mut ever_connected = false;
        loop {
            let event = match connection.recv() {
                Ok(event) => event,
                // Every client handle is gone: the run is over.
                Err(_) => break,
            };
            match event {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    backoff = MIN_BACKOFF;
                    self.connected(&mut outage, ever_connected);
                    ever_connected = true;
                }
                Ok(Event::Outgoing(Outgoing::Publish(pkid))) => self.written(pkid),
                Ok(Event::Incoming(Packet::PubAck(ack))) => self.acknowledged(ack.pkid, ack.reason),
                Ok(Event::Outgoing(Outgoing::Disconnect)) => break,
                Ok(_) => {}
                Err(e) => {
                    self.disconnected(&mut connection, &e, &mut outage, ever_connected);
                    if self.sleep_unless_closed(backoff) {
                        break;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
            let over = {
                let state = self.shared.lock();
                state.closed && !state.connected
            };
            if over {
                break;
            }
        }
        let mut state = self.shared.lock();
        state.connected = false;
        self.shared.stats.set_down(true);
        drop(state);
        self.shared.wake.notify_all();
    }

    fn connected(&self, outage: &mut Option<Outage>, reconnect: bool) {
        let mut state = self.shared.lock();
        // First thing on every connection: the retained `online`.
        if self
            .client
            .try_publish(&self.status_topic, QoS::AtLeastOnce, true, "online")
            .is_ok()
        {
            state.handed.push_back(Sent::Status);
        }
        state.connected = true;
        self.shared.stats.set_down(false);
        drop(state);
        self.shared.wake.notify_all();
        let stats = &self.shared.stats;
        match outage.take() {
            Some(o) => log::info!(target: "sealcheck::mqtt", broker = stats.broker.as_str(),
                down_s = o.since.elapsed().as_secs_f64(), dropped = stats.dropped_total() - o.dropped_before;
                "MQTT broker {} reachable again after {:.1} s; {} verdicts were dropped meanwhile",
                stats.broker, o.since.elapsed().as_secs_f64(), stats.dropped_total() - o.dropped_before),
            None if !reconnect => {
                log::info!(target: "sealcheck::mqtt", broker = stats.broker.as_str(), topic = self.status_topic.trim_end_matches("/status");
                "connected to the MQTT broker; verdicts go to <topic>/verdict")
            }
            None => {}
        }
    }

    /// A publish was written: QoS 0 is done, QoS 1 waits for its PUBACK.
    fn written(&self, pkid: u16) {
        let mut state = self.shared.lock();
        let Some(sent) = state.handed.pop_front() else {
            return;
        };
        if pkid == 0 {
            if let Sent::Verdict(_) = sent {
                self.shared.stats.published.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            state.inflight.insert(pkid, sent);
        }
        drop(state);
        self.shared.wake.notify_all();
    }

    fn acknowledged(&self, pkid: u16, reason: PubAckReason) {
        let mut state = self.shared.lock();
        let sent = state.inflight.remove(&pkid);
        drop(state);
        self.shared.wake.notify_all();
        let Some(Sent::Verdict(v)) = sent else {
            return;
        };
        let stats = &self.shared.stats;
        match reason {
            PubAckReason::Success | PubAckReason::NoMatchingSubscribers => {
                stats.published.fetch_add(1, Ordering::Relaxed);
                stats.record_ack(&v);
            }
            refused => {
                stats.drop_verdicts(DropReason::Rejected, 1);
                if !self.rejection_logged.swap(true, Ordering::Relaxed) {
                    log::error!(target: "sealcheck::mqtt", broker = stats.broker.as_str(), seq = v.seq, reason = format!("{refused:?}").as_str();
                        "the broker refused a verdict ({refused:?}): check its ACL lets this user publish to <topic>/verdict; such verdicts are dropped (counted as rejected)");
                }
            }
        }
    }

    /// The connection failed (or could not be made). Nothing stale may go out
    /// after the reconnect: rumqttc's resend list is emptied and what was not
    /// acknowledged goes back to our queue, where expiry applies.
    fn disconnected(
        &self,
        connection: &mut Connection,
        e: &ConnectionError,
        outage: &mut Option<Outage>,
        ever_connected: bool,
    ) {
        let mut state = self.shared.lock();
        state.connected = false;
        self.shared.stats.set_down(true);
        // Under the lock, so the hand-over thread cannot add a request now:
        // move rumqttc's channel and in-flight into `pending`, then drop them.
        connection.eventloop.clean();
        connection.eventloop.pending.clear();
        self.shared.requeue_unacked(&mut state);
        drop(state);
        self.shared.wake.notify_all();
        let why = self.describe.error(e);
        let stats = &self.shared.stats;
        match outage {
            None => {
                stats.outages.fetch_add(1, Ordering::Relaxed);
                let what = if ever_connected {
                    "lost the MQTT broker"
                } else {
                    "cannot reach the MQTT broker"
                };
                log::error!(target: "sealcheck::mqtt", broker = stats.broker.as_str(), error = why.as_str();
                    "{what}: {why}; inspection and the results file go on, verdicts wait (until their deadline) and the client retries every 1 s up to 30 s");
                *outage = Some(Outage {
                    since: Instant::now(),
                    dropped_before: stats.dropped_total(),
                    logged: why,
                });
            }
            // Once per outage; again only if the cause changes (e.g. the broker
            // is back but now refuses the password).
            Some(o) if o.logged != why => {
                log::error!(target: "sealcheck::mqtt", broker = stats.broker.as_str(), error = why.as_str(); "MQTT broker still unavailable: {why}");
                o.logged = why;
            }
            Some(_) => {}
        }
    }

    /// Waits `backoff` before the next attempt; true when the run is over.
    fn sleep_unless_closed(&self, backoff: Duration) -> bool {
        let until = Instant::now() + backoff;
        let mut state = self.shared.lock();
        loop {
            if state.closed {
                return true;
            }
            let now = Instant::now();
            if now >= until {
                return false;
            }
            state = self
                .shared
                .wake
                .wait_timeout(state, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn expiry_rounds_up_to_whole_seconds_and_at_least_one() {
        assert_eq!(expiry_seconds(Duration::from_millis(1)), 1);
        assert_eq!(expiry_seconds(Duration::ZERO), 1);
        assert_eq!(expiry_seconds(Duration::from_millis(1000)), 1);
        assert_eq!(expiry_seconds(Duration::from_millis(1001)), 2);
    }

    #[test]
    fn password_file_must_exist_and_be_private_and_errors_never_show_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        assert!(matches!(
            read_password(&path),
            Err(StartError::PasswordFileMissing(_))
        ));
        std::fs::write(&path, "s3cret-pw\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_password(&path).unwrap_err();
        assert!(
            e.to_string().contains("chmod 600") && !e.to_string().contains("s3cret"),
            "{e}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_password(&path).unwrap(), "s3cret-pw");
    }
}
