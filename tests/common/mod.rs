//! Helpers shared by the integration tests (`tests/integration.rs`; `mod common;` in the
//! test binaries of their own).
// Each test crate uses only some of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

mod child;
pub mod genicam;
pub mod http;
pub mod mqtt;
pub mod plc;
pub mod rtsp;
pub mod status_page;
#[allow(unused_imports)] // not every test crate starts sealcheck
pub use child::{FakeSystemd, Sealcheck};

/// One pipeline at a time in this process: each `sealcheck run` uses every core, and
/// the timing checks (the shadow's share of frames, the watchdog, deadlines, a part's
/// frame within its interval) mean little with another pipeline competing. A test that
/// starts one holds this guard for its whole length.
///
/// One lock for every file of `tests/integration.rs`, so that `cargo test --test
/// integration` keeps the rule; `make test` runs each test in a process of its own
/// (cargo-nextest), where the `pipeline` test group of `.config/nextest.toml` keeps it.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The source tree: the current folder when it is one (a test binary carried
/// to a GPU machine runs from a copy there), `SEALCHECK_REPO` when set, else
/// where this was built.
pub fn repo() -> PathBuf {
    if let Some(dir) = std::env::var_os("SEALCHECK_REPO") {
        return PathBuf::from(dir);
    }
    if Path::new("config/demo.toml").is_file() && Path::new("samples/demo_clip").is_dir() {
        return std::env::current_dir().unwrap();
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The sealcheck binary: `SEALCHECK_BIN` when set (a test binary run on
/// another machine), else the one cargo built beside this test.
pub fn sealcheck_bin() -> PathBuf {
    std::env::var_os("SEALCHECK_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_sealcheck")))
}

/// The first `frames` frames of the demo clip, copied into `dir/name/`.
pub fn clip_prefix(dir: &Path, name: &str, frames: usize) -> PathBuf {
    sample_prefix("demo_clip", dir, name, frames, false)
}

/// The first `frames` frames of the demo clip with their lines of
/// `labels.jsonl`, copied into `dir/name/`: a labelled image folder.
pub fn labelled_clip_prefix(dir: &Path, name: &str, frames: usize) -> PathBuf {
    sample_prefix("demo_clip", dir, name, frames, true)
}

/// The first `frames` frames of `samples/<sample>/` (`demo_clip`,
/// `demo_cavities`), with their lines of its `labels.jsonl` when
/// `labelled`, copied into `dir/name/`.
pub fn sample_prefix(
    sample: &str,
    dir: &Path,
    name: &str,
    frames: usize,
    labelled: bool,
) -> PathBuf {
    let from = repo().join("samples").join(sample);
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..frames {
        let file = format!("frame_{i:05}.jpg");
        std::fs::copy(from.join(&file), folder.join(&file)).unwrap();
    }
    if labelled {
        let all = std::fs::read_to_string(from.join("labels.jsonl")).unwrap();
        let labels: Vec<&str> = all.lines().take(frames).collect();
        std::fs::write(folder.join("labels.jsonl"), labels.join("\n") + "\n").unwrap();
    }
    folder
}

/// The fast engine for an integration test: ONNX Runtime where `make test`
/// set it up (`ORT_DYLIB_PATH`), else tract. Under `SEALCHECK_REQUIRE_ORT`
/// (set by `make test`) a missing library fails instead of falling back.
pub fn backend() -> &'static str {
    let found = std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| Path::new(&p).exists());
    assert!(
        found || std::env::var_os("SEALCHECK_REQUIRE_ORT").is_none(),
        "ORT_DYLIB_PATH does not name libonnxruntime"
    );
    if found { "onnxruntime" } else { "tract" }
}

/// A free loopback port (bound, read, released: another process could take it
/// in between, which a test run on one machine does not do). Also a port
/// where nothing listens.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `[source]` lines for a camera stand-in: GStreamer's live test pattern
/// `pattern` at `fps` frames/s, 320x240; callers add `live`, `overflow`, ...
pub fn test_camera(pattern: &str, fps: u32) -> String {
    format!(
        "kind = \"pipeline\"\npipeline = \"videotestsrc is-live=true pattern={pattern} ! video/x-raw,width=320,height=240,framerate={fps}/1 ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink\"\n"
    )
}

/// Says why a test cannot run here, where `cargo test` shows it: libtest
/// keeps a passing test's `println!` to itself, and a test that skips
/// returns early and passes, so its reason would never be seen. A write to
/// the stderr handle is not captured.
pub fn skipped(reason: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
}

/// The ONNX Runtime library the tests load (`ORT_DYLIB_PATH`), or `None`
/// after saying why the test is skipped; with `SEALCHECK_REQUIRE_ORT` set
/// (as `make test` sets it) a missing library fails instead.
pub fn ort_library() -> Option<String> {
    let lib = std::env::var("ORT_DYLIB_PATH")
        .ok()
        .filter(|p| Path::new(p).is_file());
    if lib.is_none() {
        assert!(
            std::env::var_os("SEALCHECK_REQUIRE_ORT").is_none(),
            "SEALCHECK_REQUIRE_ORT is set but ORT_DYLIB_PATH names no library"
        );
        skipped(format_args!(
            "ONNX Runtime not available (set ORT_DYLIB_PATH; `make onnxruntime`)"
        ));
    }
    lib
}

/// The demo classifier with its two output classes swapped
/// (scripts/demo/swap_classes.py, python with `onnx`: the repo's .venv), written
/// to `out`: a model that calls every good seal defective and every
/// defective one good, its IO contract intact. Returns `out`.
pub fn swap_classes(out: &Path) -> PathBuf {
    let python = std::process::Command::new("python3")
        .arg(repo().join("scripts/demo/swap_classes.py"))
        .args([&repo().join("models/cls.onnx"), out])
        .output()
        .expect("python3 (with onnx: the repo's .venv) to make the swapped classifier");
    assert!(
        python.status.success(),
        "scripts/demo/swap_classes.py failed: {}",
        String::from_utf8_lossy(&python.stderr)
    );
    out.to_path_buf()
}

/// The complete lines of a results file, parsed (a line still being
/// written is left out).
pub fn result_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..=end]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad result line {l:?}: {e}")))
        .collect()
}

/// Result lines by their `"camera"`, each camera's in file order.
pub fn by_camera(
    lines: &[serde_json::Value],
) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    let mut cameras: std::collections::BTreeMap<String, Vec<serde_json::Value>> =
        Default::default();
    for line in lines {
        let camera = line["camera"]
            .as_str()
            .unwrap_or_else(|| panic!("a line without its camera: {line}"));
        cameras
            .entry(camera.to_string())
            .or_default()
            .push(line.clone());
    }
    cameras
}

/// How far `a` is from `reference`, as the parity tests measure logits: the
/// largest absolute difference over the reference's largest magnitude.
pub fn relative_error(a: &[f32], reference: &[f32]) -> f64 {
    let scale = reference
        .iter()
        .map(|v| f64::from(v.abs()))
        .fold(0.0, f64::max)
        .max(1e-6);
    a.iter()
        .zip(reference)
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max)
        / scale
}

/// `promtool check metrics` accepts `text` (skipped, said, where promtool
/// is missing and the run does not require every tool: `make test` does).
pub fn promtool_accepts(text: &str) {
    use std::process::{Command, Stdio};
    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(mut promtool) => {
            std::io::Write::write_all(&mut promtool.stdin.take().unwrap(), text.as_bytes())
                .unwrap();
            let out = promtool.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "promtool check metrics:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Err(e) => {
            assert!(
                std::env::var_os("SEALCHECK_REQUIRE_ORT").is_none(),
                "promtool: {e} (make deps installs it)"
            );
            skipped(format_args!("promtool check ({e})"));
        }
    }
}
