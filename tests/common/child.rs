//! `sealcheck run` as the integration tests start it: a child process with
//! an environment of its own, its output collected while it runs, killed if
//! a test ends early; and a test double for systemd's notify socket.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::sealcheck_bin;

/// A running `sealcheck run`.
pub struct Sealcheck {
    pub child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Sealcheck {
    /// `sealcheck run --config CONFIG` with nothing inherited that changes
    /// what it does (log level, journal, systemd socket, fault hooks), its
    /// output piped; the caller may add to it before `spawn`.
    pub fn command(config: &Path) -> Command {
        let mut cmd = Command::new(sealcheck_bin());
        cmd.arg("run").arg("--config").arg(config);
        Sealcheck::isolate(&mut cmd);
        cmd
    }

    /// Clears from `cmd` what would change what sealcheck does (log level,
    /// journal, systemd socket, fault hooks) and pipes its output: for a
    /// command that starts sealcheck through another program.
    pub fn isolate(cmd: &mut Command) {
        cmd.env_remove("RUST_LOG")
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_PID")
            .env_remove("WATCHDOG_USEC")
            .env_remove("SEALCHECK_FAULT_DELAY_INFER_MS")
            .env_remove("SEALCHECK_FAULT_DELAY_INFER_FIRST")
            .env_remove("SEALCHECK_FAULT_STALL_INFER_AFTER")
            .env_remove("SEALCHECK_FAULT_FAIL_INFER_AFTER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }

    /// `command(config)` with `env` added, started.
    pub fn start(config: &Path, env: &[(&str, &str)]) -> Sealcheck {
        let mut cmd = Sealcheck::command(config);
        cmd.envs(env.iter().copied());
        Sealcheck::spawn(cmd)
    }

    pub fn spawn(mut cmd: Command) -> Sealcheck {
        let mut child = cmd.spawn().expect("start sealcheck run");
        let collect = |pipe: Option<Box<dyn Read + Send>>| {
            let text = Arc::new(Mutex::new(String::new()));
            if let Some(pipe) = pipe {
                let sink = Arc::clone(&text);
                std::thread::spawn(move || {
                    for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                        let mut t = sink.lock().unwrap();
                        t.push_str(&line);
                        t.push('\n');
                    }
                });
            }
            text
        };
        let stdout = collect(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = collect(child.stderr.take().map(|p| Box::new(p) as _));
        Sealcheck {
            child,
            stdout,
            stderr,
        }
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn log_count(&self, text: &str) -> usize {
        self.stderr().matches(text).count()
    }

    /// Waits until `stderr` contains `text`.
    pub fn wait_for_log(&self, text: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.stderr().contains(text) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The status server's address, from its start-up log line (a run
    /// with `[status]`).
    pub fn status_addr(&mut self) -> SocketAddr {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = self.stderr();
            if let Some(rest) = text.split("status page at http://").nth(1) {
                return rest.split('/').next().unwrap().parse().unwrap();
            }
            assert!(self.is_running(), "sealcheck exited:\n{text}");
            assert!(Instant::now() < deadline, "no status server:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends signal `name` (`TERM`, `HUP`, ...).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args(["-s", name, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -s {name} failed");
    }

    /// The exit status, once it exits within `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader threads take the last lines.
                std::thread::sleep(Duration::from_millis(100));
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the exit (failing the test after `timeout`); returns the
    /// exit code (-1 for a signal), stdout and stderr.
    pub fn finish(mut self, timeout: Duration) -> (i32, String, String) {
        let Some(status) = self.wait(timeout) else {
            panic!(
                "sealcheck still running after {timeout:?}:\n{}",
                self.stderr()
            );
        };
        (status.code().unwrap_or(-1), self.stdout(), self.stderr())
    }

    /// SIGTERM, then the exit status (failing the test after `timeout`).
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        self.signal("TERM");
        self.wait(timeout)
            .unwrap_or_else(|| panic!("no exit {timeout:?} after SIGTERM:\n{}", self.stderr()))
    }
}

impl Drop for Sealcheck {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Test double for systemd's notify socket: keeps every datagram with its
/// arrival time.
pub struct FakeSystemd {
    path: PathBuf,
    /// When the socket was bound: before any message.
    pub bound_at: Instant,
    received: Arc<Mutex<Vec<(Instant, String)>>>,
}

impl FakeSystemd {
    pub fn bind(dir: &Path) -> FakeSystemd {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&received);
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = socket.recv(&mut buf) {
                sink.lock().unwrap().push((
                    Instant::now(),
                    String::from_utf8_lossy(&buf[..n]).into_owned(),
                ));
            }
        });
        FakeSystemd {
            path,
            bound_at: Instant::now(),
            received,
        }
    }

    /// Has `cmd` notify this socket, with a watchdog of `watchdog_usec`.
    pub fn supervise(&self, cmd: &mut Command, watchdog_usec: u64) {
        cmd.env("NOTIFY_SOCKET", &self.path)
            .env("WATCHDOG_USEC", watchdog_usec.to_string());
    }

    pub fn messages(&self) -> Vec<(Instant, String)> {
        self.received.lock().unwrap().clone()
    }

    /// Waits for a message matching `pred` that arrived at or after `since`.
    pub fn wait_for(
        &self,
        since: Instant,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<(Instant, String)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = self
                .messages()
                .into_iter()
                .find(|(t, m)| *t >= since && pred(m))
            {
                return Some(found);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// When `READY=1` arrived at or after `since`; fails the test, with
    /// `service`'s log, if it does not within `timeout`.
    pub fn wait_for_ready(
        &self,
        since: Instant,
        timeout: Duration,
        service: &Sealcheck,
    ) -> Instant {
        self.wait_for(since, timeout, |m| m.lines().any(|l| l == "READY=1"))
            .unwrap_or_else(|| panic!("no READY=1:\n{}", service.stderr()))
            .0
    }

    /// Arrival times of `message` between `from` and `to`.
    pub fn times_of(&self, message: &str, from: Instant, to: Instant) -> Vec<Instant> {
        self.messages()
            .into_iter()
            .filter(|(t, m)| m == message && *t >= from && *t <= to)
            .map(|(t, _)| t)
            .collect()
    }
}
