//! The status page's tests' helpers: `sealcheck run` with the status
//! server, its JSON and metrics, and the page in headless Chromium.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::http::get;
use super::{Sealcheck, repo};

/// `sealcheck run` with info logs (the status server's address is read from them).
pub fn start(config: &Path, env: &[(&str, &str)]) -> Sealcheck {
    let mut cmd = Sealcheck::command(config);
    cmd.env("RUST_LOG", "info").envs(env.iter().copied());
    Sealcheck::spawn(cmd)
}

pub fn status_json(addr: SocketAddr) -> serde_json::Value {
    let reply = get(addr, "/api/status");
    assert_eq!(reply.status, 200, "{}", reply.text());
    serde_json::from_slice(&reply.body).unwrap()
}

pub fn wait_until(
    timeout: Duration,
    what: &str,
    service: &Sealcheck,
    mut done: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{}",
            service.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of a sample line `name{labels} value` in Prometheus text.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Debian's Chromium, or `None` (said where `cargo test` shows it) where it
/// is missing and the run does not require every tool.
pub fn chromium() -> Option<&'static Path> {
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.exists() {
        assert!(
            std::env::var_os("SEALCHECK_REQUIRE_ORT").is_none(),
            "chromium missing (make deps installs it)"
        );
        super::skipped(format_args!("no /usr/bin/chromium"));
        return None;
    }
    Some(chromium)
}

/// The opening tag and the text of the element with `id` in a dumped DOM.
pub fn element(dom: &str, id: &str) -> (String, String) {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in:\n{dom}"));
    let tag_start = dom[..at].rfind('<').unwrap();
    let from = at + dom[at..].find('>').unwrap() + 1;
    (
        dom[tag_start..from].to_string(),
        dom[from..from + dom[from..].find('<').unwrap()].to_string(),
    )
}

/// Headless Chromium on `url` with `extra` flags (bounded in time, virtual
/// time so the page's timers run at once); its stdout.
pub fn browse(chromium: &Path, url: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=4000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(extra)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let child = cmd.spawn().expect("start chromium");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(90)) {
        Ok(out) => String::from_utf8_lossy(&out.unwrap().stdout).into_owned(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("chromium did not finish within 90 s");
        }
    }
}

/// The demo clip's 60 frames over and over, paced at 5 frames/s like a
/// camera: a live source with seals, good and defective, that never ends.
pub fn looping_demo_clip() -> String {
    looping_sample("demo_clip", 60, 5)
}

/// The first `frames` frames of `samples/<sample>/` over and over, paced
/// at `fps` like a camera: `[source]` lines of a live source.
pub fn looping_sample(sample: &str, frames: usize, fps: u32) -> String {
    let clip = repo().join("samples").join(sample).join("frame_%05d.jpg");
    format!(
        "kind = \"pipeline\"\npipeline = \"multifilesrc location={} loop=true stop-index={} caps=image/jpeg,framerate={fps}/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! identity sync=true ! appsink name=sink\"\noverflow = \"drop\"",
        clip.display(),
        frames - 1
    )
}

/// A config in `dir` with the status server on a free port: `cameras`
/// (a `[source]` or `[cameras.*]` tables), `sections` and the stall timeout.
pub fn status_config(dir: &Path, cameras: &str, sections: &str, stall_timeout_s: f64) -> PathBuf {
    let text = format!(
        r#"{cameras}

[inference]
backend = "{backend}"

[models.segmentation]
path = "{models}/seg.onnx"

[models.classifier]
path = "{models}/cls.onnx"

[decision]
no_seal_below = 0.005
min_seal_area = 0.02
max_seal_area = 0.25

[output]
results = "results.jsonl"
flush_each_line = true
log_verdicts = false

[status]
listen = "127.0.0.1:0"

{sections}

[service]
stall_timeout_s = {stall_timeout_s}
"#,
        backend = super::backend(),
        models = repo().join("models").display(),
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, text).unwrap();
    path
}
