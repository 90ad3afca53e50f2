//! The engines are warmed up before READY=1 and before capture starts
//! (issue 19: the first parts of a shift were judged slowest, the engines'
//! first runs being real frames). How much faster the first frames are is
//! measured in docs/PERFORMANCE.md ("First frames of a run"), not here.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{FakeSystemd, Sealcheck, repo};

const START_TIMEOUT: Duration = Duration::from_secs(180);

/// Ten frames of a 320x240 test pattern, whose size the config states.
fn write_config(dir: &Path) -> PathBuf {
    let text = format!(
        r#"[source]
kind = "test"
width = 320
height = 240
framerate = 30
num_buffers = 10

[inference]
backend = "{backend}"

[models.segmentation]
path = "{models}/seg.onnx"

[models.classifier]
path = "{models}/cls.onnx"

[output]
results = "results.jsonl"
log_verdicts = false
"#,
        backend = common::backend(),
        models = repo().join("models").display(),
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Where in `log` the first line containing `text` is.
fn line_of(log: &str, text: &str) -> usize {
    log.lines()
        .position(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no log line with {text:?}:\n{log}"))
}

#[test]
fn engines_warm_up_on_frames_of_the_source_size_before_capture_and_ready() {
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(dir.path());
    let mut cmd = Sealcheck::command(&config);
    cmd.current_dir(dir.path());
    systemd.supervise(&mut cmd, 30_000_000);
    let started = Instant::now();
    let mut service = Sealcheck::spawn(cmd);
    systemd.wait_for_ready(started, START_TIMEOUT, &service);
    let status = service
        .wait(Duration::from_secs(120))
        .unwrap_or_else(|| panic!("the 10-frame run did not end:\n{}", service.stderr()));
    let log = service.stderr();
    assert!(status.success(), "{status:?}:\n{log}");

    // One line says what was warmed up, on which path, at what size and how long it took.
    let warmed = line_of(&log, "engines warmed up before the start");
    let line = log.lines().nth(warmed).unwrap();
    for field in [
        "path=host",
        "width=320",
        "height=240",
        "size_from=source",
        "ms=",
    ] {
        assert!(line.contains(field), "{field} missing: {line}");
    }
    assert!(line.contains("engine=onnxruntime-cpu") || line.contains("engine=tract"));
    // In program order: warm-up, then capture starts, then READY=1 and the
    // "pipeline running" line that follows it; no camera frame waited.
    assert!(
        warmed < line_of(&log, "starting capture")
            && line_of(&log, "starting capture") < line_of(&log, "pipeline running"),
        "{log}"
    );

    // The warm-up's frames are not parts: no result, no seq taken.
    let results = std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap();
    let seqs: Vec<u64> = results
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (0..10).collect::<Vec<_>>(), "{results}");
}
