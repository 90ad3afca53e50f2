//! `sealcheck run` as systemd runs it: a notify socket, a watchdog, signals.
//!
//! ```text
//! test (fake systemd: a datagram socket) <--READY/WATCHDOG/STATUS/RELOADING/STOPPING-- sealcheck run
//! test --SIGTERM/SIGHUP--> sealcheck run --results.jsonl--> test
//! ```
//!
//! Each test writes its own config into a temporary folder: the test pattern source (or the
//! demo clip, which has real seals), the demo models on tract, results in the folder.

use crate::common;

use common::{FakeSystemd, Sealcheck, repo};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Pings every 200 ms: systemd would kill a service silent for 400 ms.
const WATCHDOG_USEC: u64 = 400_000;
const WATCHDOG: Duration = Duration::from_micros(WATCHDOG_USEC);
/// Loading models with tract and building the GStreamer pipeline, on a slow machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);

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
    /// A camera stand-in: a live test pattern at 10 frames/s, so the
    /// pipeline empties between frames.
    #[cfg(feature = "fault-injection")]
    Camera,
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
        #[cfg(feature = "fault-injection")]
        Source::Camera => common::test_camera("smpte", 10) + "live = true\n",
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
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(dir.path(), &Source::TestPattern, "0.5", 5.0);
    let started = Instant::now();
    let mut service = start(&config, &systemd, &[]);

    let ready_at = systemd.wait_for_ready(started, START_TIMEOUT, &service);
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
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(dir.path(), &Source::DemoClip, "0.5", 10.0);
    let started = Instant::now();
    let mut service = start(&config, &systemd, &[]);
    systemd.wait_for_ready(started, START_TIMEOUT, &service);

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
    let _serial = common::serial();
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

/// A supervised run of `source` (defect threshold 0.5) with `stall_timeout`
/// and the fault hook `fault` set, once it sent READY=1: its folder, the
/// systemd double, the service and when READY=1 came.
#[cfg(feature = "fault-injection")]
fn start_with_fault(
    source: &Source,
    stall_timeout: Duration,
    fault: (&str, &str),
) -> (tempfile::TempDir, FakeSystemd, Sealcheck, Instant) {
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(dir.path(), source, "0.5", stall_timeout.as_secs_f64());
    let started = Instant::now();
    let service = start(&config, &systemd, &[fault]);
    let ready_at = systemd.wait_for_ready(started, START_TIMEOUT, &service);
    (dir, systemd, service, ready_at)
}

#[cfg(feature = "fault-injection")]
#[test]
fn stalled_inference_stops_watchdog_pings_within_one_interval() {
    const STALL_AFTER: usize = 3;
    let stall_timeout = Duration::from_secs(1);
    let _serial = common::serial();
    let (dir, systemd, mut service, ready_at) = start_with_fault(
        &Source::TestPattern,
        stall_timeout,
        (
            "SEALCHECK_FAULT_STALL_INFER_AFTER",
            &STALL_AFTER.to_string(),
        ),
    );

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

/// An engine that fails every frame at once (a CUDA context after a sticky
/// error), behind a camera: each frame's `error` line is written before the
/// next frame comes, so nothing is ever in flight for long and a check for
/// stalled frames alone would ping for ever. It must stop within a stall
/// timeout of the first failure, and every frame must still get its line.
#[cfg(feature = "fault-injection")]
#[test]
fn engine_failing_every_frame_stops_watchdog_pings_and_each_frame_keeps_its_line() {
    const FAIL_FROM: usize = 3;
    let stall_timeout = Duration::from_secs(1);
    let _serial = common::serial();
    let (dir, systemd, mut service, ready_at) = start_with_fault(
        &Source::Camera,
        stall_timeout,
        ("SEALCHECK_FAULT_FAIL_INFER_AFTER", &FAIL_FROM.to_string()),
    );
    // The first failed frame's line is written: its time bounds the failure's start.
    wait_for_results(
        dir.path(),
        FAIL_FROM + 1,
        Duration::from_secs(120),
        &mut service,
    );
    let first_failure_seen = Instant::now();
    assert!(
        !systemd
            .times_of("WATCHDOG=1", ready_at, first_failure_seen)
            .is_empty(),
        "no ping while frames were judged"
    );
    let stopped_by = first_failure_seen + stall_timeout + WATCHDOG + Duration::from_millis(200);
    std::thread::sleep(stopped_by.saturating_duration_since(Instant::now()));
    let written_at_stop = results(dir.path()).len();
    std::thread::sleep(Duration::from_millis(1500));
    let window_end = Instant::now();
    let late = systemd.times_of("WATCHDOG=1", stopped_by, window_end);
    assert!(
        late.is_empty(),
        "{} WATCHDOG=1 while every frame failed",
        late.len()
    );
    assert!(
        systemd.messages().iter().any(|(t, m)| *t >= stopped_by
            && m.starts_with("STATUS=FAILING: every frame has failed in segment")),
        "no FAILING status: {:?}",
        systemd.messages().iter().rev().take(5).collect::<Vec<_>>()
    );
    assert!(
        results(dir.path()).len() > written_at_stop,
        "results stopped moving: this is the case a stall check alone misses"
    );
    assert!(
        service
            .stderr()
            .contains("every frame has failed in segment"),
        "{}",
        service.stderr()
    );
    // Under systemd with WatchdogSec= (here its test double), the log says who acts.
    assert!(
        service
            .stderr()
            .contains("watchdog pings stopped, systemd will restart the service"),
        "{}",
        service.stderr()
    );
    let status = service.terminate(Duration::from_secs(60));
    assert!(status.success(), "{status:?}\n{}", service.stderr());
    let lines = results(dir.path());
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"], i as u64, "seq without gaps");
        if i >= FAIL_FROM {
            assert_eq!(reason(line), "error", "frame {i} after the engine broke");
            assert_eq!(line["verdict"], "fail");
        }
    }
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn stalled_inference_stops_watchdog_pings_within_one_interval() {
    common::skipped(format_args!(
        "needs `cargo test --features fault-injection` (the stall hook is compiled out)"
    ));
}

#[cfg(not(feature = "fault-injection"))]
#[test]
fn engine_failing_every_frame_stops_watchdog_pings_and_each_frame_keeps_its_line() {
    common::skipped(format_args!(
        "needs `cargo test --features fault-injection` (the failure hook is compiled out)"
    ));
}

/// The threads that send verdicts to the line, as /proc names them, with
/// their nice values.
fn line_thread_nice(pid: u32) -> Vec<(String, i32)> {
    let mut found = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        let comm = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if !matches!(comm, "deadline" | "mqtt" | "mqtt-publish") {
            continue;
        }
        // Field 19 of stat is the nice value; the name before it may hold spaces.
        let stat = fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        if let Some(nice) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(16))
            .and_then(|n| n.parse().ok())
        {
            found.push((comm.to_string(), nice));
        }
    }
    found.sort();
    found
}

/// The shipped unit grants no capability (`CapabilityBoundingSet=` empty);
/// the deadline and MQTT threads get their higher priority from its
/// `LimitNICE=`, a resource limit. Here sealcheck runs as an unprivileged
/// user with no capabilities, without the unit's limit and with it: the
/// threads are at 0 without it and at the unit's nice value with it (where
/// this machine lets root raise the limit).
#[test]
fn line_threads_get_their_priority_from_the_units_nice_limit_without_a_capability() {
    use std::os::unix::fs::MetadataExt as _;
    if fs::metadata("/proc/self").unwrap().uid() != 0 {
        common::skipped(format_args!(
            "starting sealcheck as another user needs root (CI runs make test as root)"
        ));
        return;
    }
    let _serial = common::serial();
    let unit = fs::read_to_string(repo().join("systemd/sealcheck.service")).unwrap();
    assert!(
        unit.lines().any(|l| l == "CapabilityBoundingSet="),
        "the unit grants no capability"
    );
    let nice: i32 = unit
        .lines()
        .find_map(|l| l.strip_prefix("LimitNICE="))
        .expect("the unit sets LimitNICE=")
        .parse()
        .expect("LimitNICE= as a signed nice value, e.g. -10");
    assert!(nice < 0, "LimitNICE={nice} allows no higher priority");

    // Everything the unprivileged user needs, in a folder it owns.
    let dir = tempfile::tempdir().unwrap();
    let nobody = 65534;
    let bin = dir.path().join("sealcheck");
    fs::copy(common::sealcheck_bin(), &bin).unwrap();
    for model in ["seg.onnx", "cls.onnx"] {
        fs::copy(repo().join("models").join(model), dir.path().join(model)).unwrap();
    }
    let closed_port = common::free_port();
    let config = dir.path().join("sealcheck.toml");
    fs::write(
        &config,
        format!(
            "[source]\nkind = \"test\"\nframerate = 10\nnum_buffers = 0\n\
             [inference]\nbackend = \"tract\"\n\
             [models.segmentation]\npath = \"seg.onnx\"\n\
             [models.classifier]\npath = \"cls.onnx\"\n\
             [decision]\ndeadline_ms = 500\n\
             [output]\nresults = \"results.jsonl\"\nlog_verdicts = false\n\
             [mqtt]\nurl = \"mqtt://127.0.0.1:{closed_port}\"\n"
        ),
    )
    .unwrap();
    std::os::unix::fs::chown(dir.path(), Some(nobody), Some(nobody)).unwrap();

    let run = |limit: Option<i32>| -> Vec<(String, i32)> {
        // prlimit sets the limit and execs setpriv, which drops to nobody with
        // no capabilities and execs sealcheck: one process id throughout.
        let mut cmd = Command::new(if limit.is_some() {
            "prlimit"
        } else {
            "setpriv"
        });
        if let Some(nice) = limit {
            // RLIMIT_NICE is 20 - nice, as systemd turns LimitNICE=-10 into 30.
            cmd.arg(format!("--nice={}", 20 - nice))
                .args(["--", "setpriv"]);
        }
        cmd.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ])
        .arg(&bin)
        .args(["run", "--config"])
        .arg(&config)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("GST_REGISTRY", dir.path().join("gst-registry.bin"));
        Sealcheck::isolate(&mut cmd);
        let mut child = Sealcheck::spawn(cmd);
        let pid = child.child.id();
        let deadline = Instant::now() + START_TIMEOUT;
        let mut threads = line_thread_nice(pid);
        while threads.len() < 3 && Instant::now() < deadline && child.is_running() {
            std::thread::sleep(Duration::from_millis(50));
            threads = line_thread_nice(pid);
        }
        assert_eq!(
            threads.len(),
            3,
            "deadline, mqtt and mqtt-publish threads: {threads:?}\n{}",
            child.stderr()
        );
        // Each thread sets its priority first thing; give it that moment.
        let settle = Instant::now() + Duration::from_secs(5);
        while Instant::now() < settle && threads.iter().any(|(_, n)| Some(*n) != limit) {
            std::thread::sleep(Duration::from_millis(50));
            threads = line_thread_nice(pid);
        }
        let status = child.terminate(Duration::from_secs(60));
        assert!(status.success(), "{status:?}\n{}", child.stderr());
        threads
    };

    let without = run(None);
    assert!(
        without.iter().all(|(_, n)| *n == 0),
        "without the limit the threads cannot raise their priority: {without:?}"
    );
    // Raising a hard limit needs CAP_SYS_RESOURCE, which systemd (PID 1) has
    // and a container's root may lack.
    let can_raise = Command::new("prlimit")
        .arg(format!("--nice={}", 20 - nice))
        .arg("true")
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !can_raise {
        common::skipped(format_args!(
            "the half under LimitNICE={nice}: this machine's root cannot raise RLIMIT_NICE (no CAP_SYS_RESOURCE)"
        ));
        return;
    }
    let with_limit = run(Some(nice));
    assert!(
        with_limit.iter().all(|(_, n)| *n == nice),
        "with LimitNICE={nice}: {with_limit:?}"
    );
}

/// A supervised run of the test pattern with `drain_timeout_s` and the fault
/// hook `fault`, once it sent READY=1 and wrote a few results.
#[cfg(feature = "fault-injection")]
fn start_for_stop(drain_timeout_s: u64, fault: (&str, &str)) -> (tempfile::TempDir, Sealcheck) {
    let dir = tempfile::tempdir().unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let config = write_config(dir.path(), &Source::TestPattern, "0.5", 5.0);
    let text = fs::read_to_string(&config).unwrap().replace(
        "drain_timeout_s = 20",
        &format!("drain_timeout_s = {drain_timeout_s}"),
    );
    fs::write(&config, text).unwrap();
    let mut service = start(&config, &systemd, &[fault]);
    systemd.wait_for_ready(systemd.bound_at, START_TIMEOUT, &service);
    wait_for_results(dir.path(), 3, Duration::from_secs(120), &mut service);
    (dir, service)
}

/// Sends SIG`name` and waits for the exit, failing the test after `limit`:
/// the exit status and how long it took.
#[cfg(feature = "fault-injection")]
fn signal_and_wait(
    service: &mut Sealcheck,
    name: &str,
    limit: Duration,
) -> (std::process::ExitStatus, Duration) {
    let sent = Instant::now();
    service.signal(name);
    let exit = service.wait(limit).unwrap_or_else(|| {
        panic!(
            "still running {limit:?} after SIG{name}:\n{}",
            service.stderr()
        )
    });
    (exit, sent.elapsed())
}

/// SIGINT (Ctrl-C, run by hand) with the inference thread hung for good: the
/// drain cannot finish, and the process still ends within drain_timeout_s
/// plus a few seconds, naming the thread it left behind. (SIGTERM takes the
/// same path: the blocked-source test in tests/recovery.rs sends it.)
#[cfg(feature = "fault-injection")]
#[test]
fn sigint_ends_the_process_though_the_inference_thread_never_returns() {
    const DRAIN_S: u64 = 2;
    let _serial = common::serial();
    let (_dir, mut service) = start_for_stop(DRAIN_S, ("SEALCHECK_FAULT_STALL_INFER_AFTER", "3"));
    let (exit, took) = signal_and_wait(&mut service, "INT", Duration::from_secs(DRAIN_S + 5));
    assert_eq!(exit.code(), Some(0), "took {took:?}:\n{}", service.stderr());
    assert!(
        service
            .stderr()
            .lines()
            .any(|l| l.contains("did not finish within drain_timeout_s") && l.contains("infer")),
        "the line must name the thread left behind:\n{}",
        service.stderr()
    );
}

/// SIGTERM when the shutdown itself hangs (the fault hook parks the main
/// thread after the drain, as an exit handler waiting for a thread stuck in
/// a GPU driver would): the stop guard ends the process at drain_timeout_s
/// plus its grace, exit 1, with one line naming the threads still running.
#[cfg(feature = "fault-injection")]
#[test]
fn sigterm_ends_the_process_though_its_shutdown_hangs() {
    const DRAIN_S: u64 = 1;
    let _serial = common::serial();
    let (_dir, mut service) = start_for_stop(DRAIN_S, ("SEALCHECK_FAULT_HANG_AFTER_STOP", "1"));
    let (exit, took) = signal_and_wait(&mut service, "TERM", Duration::from_secs(DRAIN_S + 5));
    assert_eq!(exit.code(), Some(1), "took {took:?}:\n{}", service.stderr());
    assert!(
        took >= Duration::from_secs(DRAIN_S) + sealcheck::service::STOP_GRACE
            - Duration::from_millis(200),
        "the guard fired early, after {took:?}"
    );
    let stderr = service.stderr();
    let line = stderr
        .lines()
        .find(|l| l.contains("the stop did not finish within"))
        .unwrap_or_else(|| panic!("no stop-guard line:\n{stderr}"));
    // The watchdog thread was stopped by the hung shutdown's caller: at least
    // the signal thread is still there, by name.
    assert!(
        line.contains("leaving behind the threads") && line.contains("signals"),
        "{line}"
    );
}
