//! Talks to systemd over the sd_notify datagram protocol (sd_notify(3)), without libsystemd.
//!
//! ```text
//! sealcheck --"READY=1" / "WATCHDOG=1" / "STATUS=..." / "RELOADING=1\nMONOTONIC_USEC=.."--> $NOTIFY_SOCKET
//! ```
//!
//! Each message is one datagram of `KEY=VALUE` lines. `NOTIFY_SOCKET` is either a file
//! path or, starting with '@', an abstract socket name. Without `NOTIFY_SOCKET` (run from a
//! terminal, or in tests) every call is a no-op. A failed send never stops the service:
//! it is logged, at most once a minute.
//!
//! The `sd-notify` crate gives the messages (`NotifyState`: READY, RELOADING, STOPPING,
//! STATUS, WATCHDOG, MONOTONIC_USEC, EXTEND_TIMEOUT_USEC) and the monotonic clock. The
//! socket stays ours, because the crate's `sd_notify::notify` cannot do what the service
//! needs: it reads `NOTIFY_SOCKET` and connects a new socket by path on every call, so
//! it reaches no abstract socket ('@') and no address given explicitly (the tests' fake
//! systemd), and it sends without a timeout (a full queue in the service manager would
//! block the watchdog thread). Its `watchdog_enabled` is not used either: see
//! `watchdog_interval_from`.

use std::ffi::OsStr;
use std::fmt::{self, Write as _};
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sd_notify::NotifyState;

use super::ratelimit::RateLimiter;

/// How long one send may block when systemd's queue is full; the watchdog thread must
/// not hang behind a busy service manager.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);
/// Send failures are logged at most this often.
const ERROR_LOG_WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error(
        "NOTIFY_SOCKET={value:?} is neither an absolute path nor an abstract socket name \
         starting with '@'; systemd notifications are off"
    )]
    BadAddress { value: String },
    #[error("cannot create a datagram socket for systemd notifications: {source}")]
    Socket { source: io::Error },
    #[error("NOTIFY_SOCKET {address} cannot be used as a socket address: {source}")]
    Address {
        address: NotifyAddress,
        source: io::Error,
    },
}

/// Where systemd listens for notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyAddress {
    /// A socket file, e.g. `/run/systemd/notify`.
    Path(PathBuf),
    /// An abstract socket name (the part after '@').
    Abstract(Vec<u8>),
}

impl NotifyAddress {
    /// Parses a `NOTIFY_SOCKET` value.
    pub fn parse(value: &OsStr) -> Result<NotifyAddress, NotifyError> {
        let bytes = value.as_bytes();
        match bytes.first() {
            Some(b'/') => Ok(NotifyAddress::Path(PathBuf::from(value))),
            Some(b'@') if bytes.len() > 1 => Ok(NotifyAddress::Abstract(bytes[1..].to_vec())),
            _ => Err(NotifyError::BadAddress {
                value: value.to_string_lossy().into_owned(),
            }),
        }
    }

    fn socket_addr(&self) -> io::Result<SocketAddr> {
        match self {
            NotifyAddress::Path(path) => SocketAddr::from_pathname(path),
            NotifyAddress::Abstract(name) => SocketAddr::from_abstract_name(name),
        }
    }
}

impl fmt::Display for NotifyAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotifyAddress::Path(path) => write!(f, "{}", path.display()),
            NotifyAddress::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
        }
    }
}

/// An open line to the service manager.
struct Channel {
    socket: UnixDatagram,
    address: NotifyAddress,
    socket_addr: SocketAddr,
}

/// Sends service state to systemd. Clones share one socket, so the watchdog thread can
/// ping while the main thread reports ready/reloading/stopping.
#[derive(Clone)]
pub struct Notifier {
    channel: Option<Arc<Channel>>,
    watchdog: Option<Duration>,
    send_errors: Arc<Mutex<RateLimiter>>,
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field(
                "address",
                &self.channel.as_ref().map(|c| c.address.to_string()),
            )
            .field("watchdog", &self.watchdog)
            .finish()
    }
}

impl Notifier {
    /// A notifier that sends nothing (no service manager listening).
    pub fn disabled() -> Notifier {
        Notifier {
            channel: None,
            watchdog: None,
            send_errors: Arc::new(Mutex::new(RateLimiter::new(ERROR_LOG_WINDOW))),
        }
    }

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from the environment.
    /// A malformed `NOTIFY_SOCKET` is logged and notifications are off: the service runs on.
    pub fn from_env() -> Notifier {
        let watchdog = watchdog_interval_from(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        let Some(value) = std::env::var_os("NOTIFY_SOCKET") else {
            return Notifier::disabled();
        };
        match NotifyAddress::parse(&value).and_then(|address| Notifier::connect(address, watchdog))
        {
            Ok(notifier) => notifier,
            Err(e) => {
                log::warn!(target: "sealcheck::service", "{e}");
                Notifier::disabled()
            }
        }
    }

    /// A notifier sending to `address`, with the watchdog interval systemd asked for (if any).
    pub fn connect(
        address: NotifyAddress,
        watchdog: Option<Duration>,
    ) -> Result<Notifier, NotifyError> {
        let socket_addr = address
            .socket_addr()
            .map_err(|source| NotifyError::Address {
                address: address.clone(),
                source,
            })?;
        let socket = UnixDatagram::unbound().map_err(|source| NotifyError::Socket { source })?;
        socket
            .set_write_timeout(Some(SEND_TIMEOUT))
            .map_err(|source| NotifyError::Socket { source })?;
        Ok(Notifier {
            channel: Some(Arc::new(Channel {
                socket,
                address,
                socket_addr,
            })),
            watchdog,
            send_errors: Arc::new(Mutex::new(RateLimiter::new(ERROR_LOG_WINDOW))),
        })
    }

    /// Whether a service manager is listening.
    pub fn is_enabled(&self) -> bool {
        self.channel.is_some()
    }

    /// The watchdog timeout systemd enforces (`WatchdogSec=`), if it watches this process.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// How often to ping: half the watchdog timeout, as sd_watchdog_enabled(3) advises.
    pub fn ping_interval(&self) -> Option<Duration> {
        self.watchdog.map(|w| w / 2)
    }

    /// Startup finished, or a reload finished (systemd leaves the "reloading" state on it).
    pub fn ready(&self) {
        self.notify(&[NotifyState::Ready]);
    }

    /// The pipeline is moving: reset systemd's watchdog timer.
    pub fn watchdog(&self) {
        self.notify(&[NotifyState::Watchdog]);
    }

    /// One line for `systemctl status`. Newlines would end the field, so they become spaces.
    pub fn status(&self, text: &str) {
        if self.channel.is_none() {
            return;
        }
        let line: String = text
            .chars()
            .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
            .collect();
        self.notify(&[NotifyState::Status(&line)]);
    }

    /// Shutdown has begun (draining frames in flight).
    pub fn stopping(&self) {
        self.notify(&[NotifyState::Stopping]);
    }

    /// A reload has begun; call `ready()` when it is done, whether the new config was
    /// applied or rejected. Both fields go in one datagram, as systemd requires.
    pub fn reloading(&self) {
        if self.channel.is_none() {
            return;
        }
        self.send(&reloading_message(monotonic_usec()));
    }

    /// Asks for more start (or stop) time, e.g. while a TensorRT engine is being built on
    /// first start. systemd counts `extra` from now.
    pub fn extend_timeout(&self, extra: Duration) {
        if self.channel.is_none() {
            return;
        }
        let usec = extra.as_micros();
        match u32::try_from(usec) {
            Ok(usec) => self.notify(&[NotifyState::ExtendTimeoutUsec(usec)]),
            // The crate's field is a u32 (about 71 minutes); systemd reads a u64.
            Err(_) => self.send(&format!("EXTEND_TIMEOUT_USEC={usec}")),
        }
    }

    /// Sends `states` as one datagram (nothing when no service manager listens).
    fn notify(&self, states: &[NotifyState<'_>]) {
        if self.channel.is_none() {
            return;
        }
        self.send(&message(states));
    }

    fn send(&self, message: &str) {
        let Some(channel) = &self.channel else { return };
        if let Err(e) = channel
            .socket
            .send_to_addr(message.as_bytes(), &channel.socket_addr)
        {
            let what = message.split('\n').next().unwrap_or(message);
            // A poisoned lock only means another thread panicked while logging; the
            // limiter's counters are still usable.
            let mut limiter = self.send_errors.lock().unwrap_or_else(|p| p.into_inner());
            limiter.log(
                log::Level::Warn,
                "sealcheck::service",
                "systemd notification failed",
                format_args!(
                    "cannot send {what} to {}: {e} (systemd may restart the service if watchdog pings are lost)",
                    channel.address
                ),
            );
        }
    }
}

/// One datagram: the states' `KEY=VALUE` lines, joined by newlines (no newline after the
/// last, as the service has always sent them).
fn message(states: &[NotifyState<'_>]) -> String {
    let mut text = String::new();
    for (i, state) in states.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        // Writing to a String cannot fail.
        let _ = write!(text, "{state}");
    }
    text
}

/// `RELOADING=1` with the CLOCK_MONOTONIC time the reload began, in one datagram.
pub fn reloading_message(monotonic_usec: u64) -> String {
    message(&[
        NotifyState::Reloading,
        NotifyState::MonotonicUsec(i128::from(monotonic_usec)),
    ])
}

/// The watchdog interval systemd set for this process: `WATCHDOG_USEC` microseconds,
/// provided `WATCHDOG_PID` is unset or names `own_pid` (otherwise the variables were
/// inherited from a parent that systemd watches, not us).
///
/// Ours rather than `sd_notify::watchdog_enabled`, which takes `WATCHDOG_USEC=0` for a
/// watchdog of zero length (the ping loop would spin) and an unreadable `WATCHDOG_PID`
/// for this process; sd_watchdog_enabled(3) reports both as no watchdog, and so does
/// this. It also reads the environment itself, so its rules could be tested only by
/// changing the process environment under running test threads.
pub fn watchdog_interval_from(
    usec: Option<&str>,
    pid: Option<&str>,
    own_pid: u32,
) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok()?;
    if usec == 0 {
        return None;
    }
    if let Some(pid) = pid {
        let pid: u32 = pid.trim().parse().ok()?;
        if pid != own_pid {
            return None;
        }
    }
    Some(Duration::from_micros(usec))
}

/// CLOCK_MONOTONIC in microseconds, the clock systemd uses for MONOTONIC_USEC (0 if it
/// cannot be read). std's `Instant` reads the same clock on Linux but does not expose
/// its value; the crate reads it for `NotifyState::MonotonicUsec`.
pub fn monotonic_usec() -> u64 {
    match NotifyState::monotonic_usec_now() {
        Ok(NotifyState::MonotonicUsec(usec)) => u64::try_from(usec).unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A bound datagram socket standing in for systemd, with a short read timeout so a
    /// missing message fails the test instead of hanging it.
    fn listener_in(dir: &std::path::Path) -> (UnixDatagram, NotifyAddress) {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        (socket, NotifyAddress::Path(path))
    }

    fn recv(socket: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = socket.recv(&mut buf).expect("a datagram from the notifier");
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn parses_path_and_abstract_addresses() {
        assert_eq!(
            NotifyAddress::parse(OsStr::new("/run/systemd/notify")).unwrap(),
            NotifyAddress::Path(PathBuf::from("/run/systemd/notify"))
        );
        assert_eq!(
            NotifyAddress::parse(OsStr::new("@/org/freedesktop/systemd1/notify/42")).unwrap(),
            NotifyAddress::Abstract(b"/org/freedesktop/systemd1/notify/42".to_vec())
        );
        for bad in ["", "@", "relative/path", "vsock:2:1234"] {
            assert!(
                NotifyAddress::parse(OsStr::new(bad)).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn sends_each_state_as_one_datagram() {
        let dir = tempfile::tempdir().unwrap();
        let (socket, address) = listener_in(dir.path());
        let n = Notifier::connect(address, None).unwrap();
        assert!(n.is_enabled());
        n.ready();
        assert_eq!(recv(&socket), "READY=1");
        n.watchdog();
        assert_eq!(recv(&socket), "WATCHDOG=1");
        n.status("12.0 fps, 340 pass, 2 fail\nsecond line");
        assert_eq!(
            recv(&socket),
            "STATUS=12.0 fps, 340 pass, 2 fail second line"
        );
        n.stopping();
        assert_eq!(recv(&socket), "STOPPING=1");
        n.extend_timeout(Duration::from_secs(30));
        assert_eq!(recv(&socket), "EXTEND_TIMEOUT_USEC=30000000");
    }

    #[test]
    fn a_timeout_extension_past_the_crates_u32_is_sent_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (socket, address) = listener_in(dir.path());
        let n = Notifier::connect(address, None).unwrap();
        n.extend_timeout(Duration::from_secs(5_000));
        assert_eq!(recv(&socket), "EXTEND_TIMEOUT_USEC=5000000000");
    }

    #[test]
    fn clones_send_to_the_same_socket() {
        let dir = tempfile::tempdir().unwrap();
        let (socket, address) = listener_in(dir.path());
        let n = Notifier::connect(address, Some(Duration::from_secs(10))).unwrap();
        let clone = n.clone();
        std::thread::spawn(move || clone.watchdog()).join().unwrap();
        assert_eq!(recv(&socket), "WATCHDOG=1");
        n.ready();
        assert_eq!(recv(&socket), "READY=1");
    }

    #[test]
    fn reloading_carries_the_monotonic_time_in_the_same_datagram() {
        let dir = tempfile::tempdir().unwrap();
        let (socket, address) = listener_in(dir.path());
        let n = Notifier::connect(address, None).unwrap();
        let before = monotonic_usec();
        n.reloading();
        let after = monotonic_usec();
        let message = recv(&socket);
        let lines: Vec<&str> = message.split('\n').collect();
        assert_eq!(lines.len(), 2, "{message:?}");
        assert_eq!(lines[0], "RELOADING=1");
        let usec: u64 = lines[1]
            .strip_prefix("MONOTONIC_USEC=")
            .expect("MONOTONIC_USEC line")
            .parse()
            .unwrap();
        assert!(
            before <= usec && usec <= after,
            "{before} <= {usec} <= {after}"
        );
    }

    #[test]
    fn monotonic_usec_agrees_with_the_system_uptime_clock() {
        // /proc/uptime counts CLOCK_BOOTTIME, which is >= CLOCK_MONOTONIC (it adds suspend).
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let mono_s = monotonic_usec() as f64 / 1e6;
        assert!(
            mono_s > 0.0 && mono_s <= uptime + 1.0,
            "monotonic {mono_s} s, uptime {uptime} s"
        );
    }

    #[test]
    fn reaches_an_abstract_socket() {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "sealcheck-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let socket =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let address = NotifyAddress::parse(OsStr::new(&format!("@{name}"))).unwrap();
        let n = Notifier::connect(address, None).unwrap();
        n.ready();
        assert_eq!(recv(&socket), "READY=1");
    }

    #[test]
    fn a_missing_listener_is_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let n = Notifier::connect(
            NotifyAddress::Path(dir.path().join("nobody-here.sock")),
            None,
        )
        .unwrap();
        for _ in 0..100 {
            n.watchdog(); // logs once, then counts; never panics
        }
        n.reloading();
    }

    #[test]
    fn disabled_notifier_does_nothing() {
        let n = Notifier::disabled();
        assert!(!n.is_enabled());
        assert_eq!(n.watchdog_interval(), None);
        n.ready();
        n.reloading();
        n.status("x");
    }

    #[test]
    fn watchdog_interval_honours_pid_and_zero() {
        assert_eq!(
            watchdog_interval_from(Some("10000000"), None, 7),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            watchdog_interval_from(Some("400000"), Some("7"), 7),
            Some(Duration::from_millis(400))
        );
        assert_eq!(
            watchdog_interval_from(Some("400000"), Some("8"), 7),
            None,
            "another process's watchdog"
        );
        assert_eq!(watchdog_interval_from(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval_from(Some("soon"), None, 7), None);
        assert_eq!(watchdog_interval_from(None, Some("7"), 7), None);
    }

    #[test]
    fn pings_at_half_the_watchdog_interval() {
        let dir = tempfile::tempdir().unwrap();
        let (_socket, address) = listener_in(dir.path());
        let n = Notifier::connect(address, Some(Duration::from_secs(10))).unwrap();
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(10)));
        assert_eq!(n.ping_interval(), Some(Duration::from_secs(5)));
    }
}
