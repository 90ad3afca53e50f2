//! Aravis' GigE Vision camera simulator (`arv-fake-gv-camera-0.8`), one per
//! test, each in a network namespace of its own so tests run in parallel
//! without sharing a camera (GigE Vision's control port 3956 is fixed).
//!
//! ```text
//! test ──unshare -n──▶ anchor (sleep; holds the namespace, lo up)
//!   ├──nsenter──▶ arv-fake-gv-camera-0.8 -i 127.0.0.1 [-r lost‰]   (killed, restarted at will)
//!   └──nsenter──▶ setpriv (no CAP_NET_RAW) ──▶ sealcheck run / this test binary
//! ```
//!
//! Without CAP_NET_RAW Aravis receives the stream on a plain UDP socket (as a
//! service user does); as root it picks its packet-socket method, which sees
//! nothing on loopback. Creating a namespace needs root (`make test` in CI
//! runs as root); elsewhere the tests say SKIPPED.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::skipped;

pub const SIMULATOR: &str = "arv-fake-gv-camera-0.8";
/// The simulator's GenICam id ("vendor-model-serial").
pub const CAMERA_ID: &str = "Aravis-Fake-GV01";
/// Longest the simulator may take to answer after it was started.
const SIMULATOR_START: Duration = Duration::from_secs(10);

/// A network namespace with its loopback up, held by an anchor process.
pub struct Netns {
    anchor: Child,
}

impl Netns {
    /// A new namespace, or `None` (said as SKIPPED) where this machine
    /// cannot run the simulator tests. Under `make test`
    /// (`SEALCHECK_REQUIRE_ORT`) a missing tool fails instead.
    pub fn new(test: &str) -> Option<Netns> {
        let required = std::env::var_os("SEALCHECK_REQUIRE_ORT").is_some();
        for tool in [
            SIMULATOR,
            "arv-tool-0.8",
            "unshare",
            "nsenter",
            "setpriv",
            "ip",
        ] {
            if !tool_exists(tool) {
                assert!(
                    !required,
                    "{tool} is missing (make deps installs aravis-tools)"
                );
                skipped(format_args!("{test}: {tool} not installed (make deps)"));
                return None;
            }
        }
        let gst = Command::new("gst-inspect-1.0").arg("aravissrc").output();
        if !gst.is_ok_and(|o| o.status.success()) {
            assert!(
                !required,
                "the aravissrc element is missing (libaravis-0.8-0)"
            );
            skipped(format_args!(
                "{test}: GStreamer element aravissrc not installed"
            ));
            return None;
        }
        let uid = Command::new("id").arg("-u").output().unwrap();
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            skipped(format_args!(
                "{test}: needs root to give the camera simulator a network namespace"
            ));
            return None;
        }
        let mut anchor = Command::new("unshare")
            .args([
                "-n",
                "sh",
                "-c",
                "ip link set lo up && echo up && exec sleep 600",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("unshare");
        let mut line = String::new();
        BufReader::new(anchor.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "up",
            "the namespace's loopback did not come up"
        );
        Some(Netns { anchor })
    }

    /// `program` run inside the namespace, without CAP_NET_RAW.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/proc/{}/ns/net", self.anchor.id()))
            .args(["setpriv", "--bounding-set=-net_raw", "--inh-caps=-net_raw"])
            .arg(program);
        cmd
    }

    /// Starts the simulator; `lost_per_thousand` stream packets are dropped.
    pub fn simulator(&self, lost_per_thousand: u32) -> Simulator {
        let mut cmd = self.command(SIMULATOR);
        cmd.args(["-i", "127.0.0.1"]);
        if lost_per_thousand > 0 {
            cmd.arg(format!("--gvsp-lost-ratio={lost_per_thousand}"));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the camera simulator");
        let simulator = Simulator { child };
        let deadline = Instant::now() + SIMULATOR_START;
        while self.arv_tool(&["control", "DeviceModelName"]).is_err() {
            assert!(
                Instant::now() < deadline,
                "the simulator did not answer within {SIMULATOR_START:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        simulator
    }

    /// `arv-tool-0.8 -a 127.0.0.1 ARGS` in the namespace: its output, or
    /// `Err` with it when it failed.
    pub fn arv_tool(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .command("timeout")
            .args(["10", "arv-tool-0.8", "-a", "127.0.0.1"])
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() && !text.contains("Can't connect") && !text.contains("not found") {
            Ok(text)
        } else {
            Err(text)
        }
    }

    /// A feature's value as `arv-tool-0.8 control NAME` prints it
    /// ("NAME = VALUE min:.. max:..").
    pub fn feature(&self, name: &str) -> String {
        let text = self
            .arv_tool(&["control", name])
            .unwrap_or_else(|e| panic!("arv-tool control {name}: {e}"));
        let line = text
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"));
        line.split(" = ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = self.anchor.kill();
        let _ = self.anchor.wait();
    }
}

/// A running simulator; killed when dropped.
pub struct Simulator {
    child: Child,
}

impl Simulator {
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_exists(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| Path::new(&dir).join(tool).is_file())
    })
}
