//! `sealcheck run` as systemd runs it: a notify socket, a watchdog, signals.
//!
//! ```text
//! test (fake systemd: a datagram socket) <--READY/WATCHDOG/STATUS/RELOADING/STOPPING-- sealcheck run
//! test --SIGTERM/SIGHUP--> sealcheck run --results.jsonl--> test
//! ```
//!
//! Each test writes its own config into a temporary folder: the test pattern source (or the
//! demo clip, which has real seals), the demo models on tract, results in the folder.

mod common;

use common::{FakeSystemd, Sealcheck, repo};

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Pings every 200 ms: systemd would kill a service silent for 400 ms.
const WATCHDOG_USEC: u64 = 400_000;
const WATCHDOG: Duration = Duration::from_micros(WATCHDOG_USEC);
/// Loading models with tract and building the GStreamer pipeline, on a slow machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// One `sealcheck run` at a time: each runs inference on every core, and the watchdog
/// timing these tests check is only meaningful without three other pipelines competing.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `sealcheck run` supervised by `systemd` (the test double), with `env` added.
fn start(config: &Path, systemd: &FakeSystemd, env: &[(&str, &str)]) -> Sealcheck {
    let mut cmd = Sealcheck::command(config);
    systemd.supervise(&mut cmd, WATCHDOG_USEC);
    cmd.envs(env.iter().copied());
    Sealcheck::spawn(cmd)
}

enum Source {
    /// videotestsrc, endless.
    TestPattern,
    /// The demo clip: real seals, so thresholds change verdicts.
    DemoClip,
}

fn write_config(
    dir: &Path,
    source: &Source,
    defect_threshold: &str,
    stall_timeout_s: f64,
) -> PathBuf {
    let source = match source {
        Source::TestPattern => "kind = \"test\"\nframerate = 30\nnum_buffers = 0\n".to_string(),
        Source::DemoClip => format!(
            "kind = \"images\"\nlocation = \"{}\"\nframerate = 5\n",
            repo().join("samples/demo_clip/frame_%05d.jpg").display()
        ),
    };
    let text = format!(
        r#"[source]
{source}
[inference]
backend = "tract"

[models.segmentation]
path = "{seg}"

[models.classifier]
path = "{cls}"

[decision]
defect_threshold = {defect_threshold}

[output]
results = "{results}"
flush_each_line = true
log_verdicts = false

[logging]
format = "logfmt"
level = "info"

[service]
drain_timeout_s = 20
stall_timeout_s = {stall_timeout_s}
"#,
        seg = repo().join("models/seg.onnx").display(),
        cls = repo().join("models/cls.onnx").display(),
        results = dir.join("results.jsonl").display(),
    );
    let path = dir.join("sealcheck.toml");
    fs::write(&path, text).unwrap();
    path
}

/// The complete lines of the results file (a line still being written is left out).
fn results(dir: &Path) -> Vec<serde_json::Value> {
    let text = fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad result line {l:?}: {e}")))
        .collect()
}

fn wait_for_results(
    dir: &Path,
    count: usize,
    timeout: Duration,
    service: &mut Sealcheck,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let lines = results(dir);
        if lines.len() >= count {
            return lines;
        }
        assert!(
            service.is_running(),
            "sealcheck exited early:\n{}",
            service.stderr()
        );
        assert!(
            Instant::now() < deadline,
            "only {} of {count} results after {timeout:?}:\n{}",
            lines.len(),
            service.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn reason(line: &serde_json::Value) -> &str {
    line["reason"].as_str().unwrap_or("")
}

#[test]
fn ready_watchdog_status_then_stopping_on_sigterm_with_every_frame_written() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(dir.path(), &Source::TestPattern, "0.5", 5.0);
    let started = Instant::now();
    let mut service = start(&config, &systemd, &[]);

    let (ready_at, _) = systemd
        .wait_for(started, START_TIMEOUT, |m| {
            m.lines().any(|l| l == "READY=1")
        })
        .unwrap_or_else(|| panic!("no READY=1:\n{}", service.stderr()));
    wait_for_results(dir.path(), 5, Duration::from_secs(120), &mut service);
    systemd
        .wait_for(ready_at, Duration::from_secs(10), |m| {
            m.starts_with("STATUS=")
        })
        .unwrap_or_else(|| panic!("no STATUS= after READY=1:\n{}", service.stderr()));
    std::thread::sleep(Duration::from_secs(2));

    // Pings come at half the watchdog interval: never a silence systemd would punish.
    let term_at = Instant::now();
    let pings = systemd.times_of("WATCHDOG=1", ready_at, term_at);
    assert!(
        pings.len() >= 5,
        "only {} WATCHDOG=1 in {:?}",
        pings.len(),
        term_at - ready_at
    );
    let first_gap = pings[0] - ready_at;
    let longest_gap = pings.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        first_gap < WATCHDOG && longest_gap < WATCHDOG,
        "first ping after {first_gap:?}, longest gap {longest_gap:?}"
    );

    service.signal("TERM");
    let status = service
        .wait(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("no exit after SIGTERM:\n{}", service.stderr()));
    assert_eq!(status.code(), Some(0), "stderr:\n{}", service.stderr());
    assert!(
        systemd
            .messages()
            .iter()
            .any(|(t, m)| *t >= term_at && m.lines().any(|l| l == "STOPPING=1")),
        "no STOPPING=1 after SIGTERM: {:?}",
        systemd.messages()
    );

    // Every delivered frame has exactly one line, in order, without gaps.
    let lines = results(dir.path());
    assert!(lines.len() >= 5);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"].as_u64(), Some(i as u64), "line {i}: {line}");
        assert!(
            [
                "ok",
                "defect",
                "no_seal",
                "seal_area",
                "not_inspected",
                "error"
            ]
            .contains(&reason(line)),
            "line {i}: {line}"
        );
    }
    let summary = service.stdout();
    let expected = format!("frames: {n} delivered, {n} results", n = lines.len());
    assert!(
        summary.contains(&expected),
        "summary does not match the results file ({expected}):\n{summary}"
    );
}

#[test]
fn sighup_applies_a_new_threshold_and_rejects_a_broken_config() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(dir.path(), &Source::DemoClip, "0.5", 10.0);
    let started = Instant::now();
    let mut service = start(&config, &systemd, &[]);
    systemd
        .wait_for(started, START_TIMEOUT, |m| {
            m.lines().any(|l| l == "READY=1")
        })
        .unwrap_or_else(|| panic!("no READY=1:\n{}", service.stderr()));

    // At 0.5, good seals of the demo clip pass.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !results(dir.path()).iter().any(|l| reason(l) == "ok") {
        assert!(
            service.is_running() && Instant::now() < deadline,
            "no passing frame at threshold 0.5:\n{}",
            service.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // 0.0: every seal that reaches the classifier fails with reason defect.
    write_config(dir.path(), &Source::DemoClip, "0.0", 10.0);
    let hup_at = Instant::now();
    service.signal("HUP");
    let (reloading_at, reloading) = systemd
        .wait_for(hup_at, Duration::from_secs(20), |m| {
            m.starts_with("RELOADING=1")
        })
        .unwrap_or_else(|| panic!("no RELOADING=1 after SIGHUP:\n{}", service.stderr()));
    let usec = reloading
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .expect("MONOTONIC_USEC in the RELOADING datagram");
    assert!(usec.parse::<u64>().unwrap() > 0);
    systemd
        .wait_for(reloading_at, Duration::from_secs(20), |m| {
            m.lines().any(|l| l == "READY=1")
        })
        .unwrap_or_else(|| panic!("no READY=1 after the reload:\n{}", service.stderr()));
    assert!(
        service.wait_for_log("config reloaded", Duration::from_secs(5)),
        "{}",
        service.stderr()
    );
    let applied_from = results(dir.path()).len() + 6; // frames already past the decision
    let lines = wait_for_results(
        dir.path(),
        applied_from + 10,
        Duration::from_secs(120),
        &mut service,
    );
    let after: Vec<_> = lines.iter().skip(applied_from).collect();
    assert!(
        after.iter().all(|l| reason(l) != "ok"),
        "a frame passed at threshold 0.0: {after:?}"
    );
    assert!(
        after.iter().any(|l| reason(l) == "defect"),
        "no defect at threshold 0.0: {after:?}"
    );

    // A broken file is rejected and the running thresholds stay.
    write_config(dir.path(), &Source::DemoClip, "1.5", 10.0);
    let hup_at = Instant::now();
    service.signal("HUP");
    systemd
        .wait_for(hup_at, Duration::from_secs(20), |m| {
            m.starts_with("RELOADING=1")
        })
        .unwrap_or_else(|| {
            panic!(
                "no RELOADING=1 after the second SIGHUP:\n{}",
                service.stderr()
            )
        });
    assert!(
        service.wait_for_log("reload rejected", Duration::from_secs(10)),
        "{}",
        service.stderr()
    );
    assert!(
        service
            .stderr()
            .lines()
            .any(|l| l.contains("reload rejected") && l.contains("defect_threshold")),
        "the rejection must name the bad key:\n{}",
        service.stderr()
    );
    let kept_from = results(dir.path()).len();
    let lines = wait_for_results(
        dir.path(),
        kept_from + 6,
        Duration::from_secs(120),
        &mut service,
    );
    assert!(
        lines.iter().skip(kept_from).all(|l| reason(l) != "ok"),
        "the old threshold 0.0 was not kept"
    );
    assert!(service.is_running());

    service.signal("TERM");
    let status = service
        .wait(Duration::from_secs(60))
        .expect("exit after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", service.stderr());
}

#[test]
fn config_error_at_start_exits_78_and_says_why_on_stderr() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(dir.path(), &Source::TestPattern, "1.5", 5.0);
    let mut service = start(&config, &systemd, &[]);
    let status = service
        .wait(Duration::from_secs(60))
        .expect("sealcheck should exit on a config error");
    assert_eq!(status.code(), Some(78), "stderr:\n{}", service.stderr());
    let stderr = service.stderr();
    assert!(
        stderr.contains("defect_threshold"),
        "the message must name the key:\n{stderr}"
    );
    assert!(
        stderr.contains(&config.display().to_string()),
        "the message must name the file:\n{stderr}"
    );
    assert!(
        !systemd
            .messages()
            .iter()
            .any(|(_, m)| m.lines().any(|l| l == "READY=1")),
        "READY=1 sent by a service that failed to start"
    );
}

#[cfg(feature = "fault-injection")]
#[test]
fn stalled_inference_stops_watchdog_pings_within_one_interval() {
    const STALL_AFTER: usize = 3;
    let stall_timeout = Duration::from_secs(1);
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(
        dir.path(),
        &Source::TestPattern,
        "0.5",
        stall_timeout.as_secs_f64(),
    );
    let started = Instant::now();
    let mut service = start(
        &config,
        &systemd,
        &[("SEALCHECK_FAULT_STALL_INFER_AFTER", "3")],
    );
    let (ready_at, _) = systemd
        .wait_for(started, START_TIMEOUT, |m| {
            m.lines().any(|l| l == "READY=1")
        })
        .unwrap_or_else(|| panic!("no READY=1:\n{}", service.stderr()));

    // Results 0..STALL_AFTER are the last progress; inference hangs on the next frame.
    wait_for_results(
        dir.path(),
        STALL_AFTER,
        Duration::from_secs(120),
        &mut service,
    );
    let last_progress = Instant::now();
    assert!(
        !systemd
            .times_of("WATCHDOG=1", ready_at, last_progress)
            .is_empty(),
        "no ping while the pipeline was moving"
    );

    // The stall is seen after stall_timeout; pings stop within one watchdog interval of that.
    let stopped_by = last_progress + stall_timeout + WATCHDOG + Duration::from_millis(200);
    std::thread::sleep(stopped_by.saturating_duration_since(Instant::now()));
    std::thread::sleep(Duration::from_millis(1500));
    let window_end = Instant::now();
    let late = systemd.times_of("WATCHDOG=1", stopped_by, window_end);
    assert!(
        late.is_empty(),
        "{} WATCHDOG=1 after the stall was due to be seen",
        late.len()
    );
    assert!(
        systemd
            .messages()
            .iter()
            .any(|(t, m)| *t >= stopped_by && m.starts_with("STATUS=STALLED")),
        "no STALLED status: {:?}",
        systemd.messages().iter().rev().take(5).collect::<Vec<_>>()
    );
    assert_eq!(
        results(dir.path()).len(),
        STALL_AFTER,
        "results moved during the injected stall"
    );
    assert!(
        service.stderr().contains("pipeline stalled"),
        "{}",
        service.stderr()
    );
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn stalled_inference_stops_watchdog_pings_within_one_interval() {
    common::skipped(format_args!(
        "needs `cargo test --features fault-injection` (the stall hook is compiled out)"
    ));
}
