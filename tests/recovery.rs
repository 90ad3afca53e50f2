//! `sealcheck run` through camera trouble and a results file that cannot be
//! written: the process never exits, frames keep their `seq`, and the journal
//! and systemd hear about it once.
//!
//! ```text
//! RTSP camera (GStreamer RTSP server, a child process of this test binary, 127.0.0.1:free port)
//!     │ killed for 4 s, started again on the same port
//!     ▼
//! sealcheck run --NOTIFY_SOCKET--> fake systemd (READY, WATCHDOG, STATUS)
//!     └──results.jsonl (symlinked to /dev/full for a while) --> test
//! ```
//!
//! The RTSP camera runs in a child process (this same test binary, re-run with
//! `SEALCHECK_TEST_RTSP_PORT` set, see `rtsp_camera_process`) so that stopping
//! it is what a camera going away is: its sockets close. Everything listens on
//! loopback only, and every wait is bounded.

use crate::common;

use common::rtsp::RtspCamera;
use common::{FakeSystemd, Sealcheck, free_port, repo, result_lines as lines_of};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Pings every 200 ms: systemd would kill a service silent for 400 ms.
const WATCHDOG_USEC: u64 = 400_000;
const WATCHDOG: Duration = Duration::from_micros(WATCHDOG_USEC);
/// Loading the models with tract and starting the pipeline, on a slow machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------
// The RTSP camera

// ---------------------------------------------------------------------------
// systemd and the service

/// `sealcheck run` supervised by `systemd` (the test double).
fn start(config: &Path, systemd: &FakeSystemd) -> Sealcheck {
    let mut cmd = Sealcheck::command(config);
    systemd.supervise(&mut cmd, WATCHDOG_USEC);
    Sealcheck::spawn(cmd)
}

/// The same, with a pipe to its standard input (for an `fdsrc fd=0` source).
fn start_fed(config: &Path, systemd: &FakeSystemd) -> (Sealcheck, std::process::ChildStdin) {
    let mut cmd = Sealcheck::command(config);
    systemd.supervise(&mut cmd, WATCHDOG_USEC);
    cmd.stdin(Stdio::piped());
    let mut service = Sealcheck::spawn(cmd);
    let stdin = service.child.stdin.take().unwrap();
    (service, stdin)
}

/// A config in `dir` over the demo models on tract; `source` is the [source] body.
fn write_config(dir: &Path, source: &str) -> PathBuf {
    let text = format!(
        r#"[source]
{source}

[inference]
backend = "tract"

[models.segmentation]
path = "{seg}"

[models.classifier]
path = "{cls}"

[output]
results = "{results}"
log_verdicts = false

[logging]
format = "logfmt"
level = "info"

[service]
drain_timeout_s = 20
stall_timeout_s = 1
"#,
        seg = repo().join("models/seg.onnx").display(),
        cls = repo().join("models/cls.onnx").display(),
        results = dir.join("results.jsonl").display(),
    );
    let path = dir.join("sealcheck.toml");
    fs::write(&path, text).unwrap();
    path
}

fn rtsp_source(port: u16) -> String {
    format!(
        "kind = \"rtsp\"\nurl = \"rtsp://127.0.0.1:{port}/line\"\nlatency_ms = 0\n\
         retry_min_ms = 200\nretry_max_ms = 1000\nframe_timeout_ms = 1000\n"
    )
}

/// Waits until `done` holds for the results file's lines.
fn wait_for_lines(
    path: &Path,
    timeout: Duration,
    service: &mut Sealcheck,
    what: &str,
    done: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let lines = lines_of(path);
        if done(&lines) {
            return lines;
        }
        assert!(
            service.is_running(),
            "sealcheck exited while waiting for {what}:\n{}",
            service.stderr()
        );
        assert!(
            Instant::now() < deadline,
            "no {what} after {timeout:?} ({} lines):\n{}",
            lines.len(),
            service.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `t` as the results file writes `ts` (RFC 3339, ms, UTC): such strings sort by time.
fn ts(t: SystemTime) -> String {
    let mut s = String::new();
    sealcheck::output::write_rfc3339(&mut s, t);
    s
}

fn assert_seq_contiguous(lines: &[serde_json::Value]) {
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"].as_u64(), Some(i as u64), "line {i}: {line}");
    }
}

/// The value of `key=` in the first log line containing `message`.
fn log_field(stderr: &str, message: &str, key: &str) -> Option<f64> {
    let line = stderr.lines().find(|l| l.contains(message))?;
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    line[start..].split_whitespace().next()?.parse().ok()
}

/// Writes 30 raw 64x48 RGB frames to `camera` at 10 frames/s, waits for
/// their 30 results, then writes no more: returns how long after that the
/// service logged `source lost` (failing the test after 5 s).
fn feed_30_frames_then_freeze(
    camera: &mut impl std::io::Write,
    results: &Path,
    service: &mut Sealcheck,
) -> Duration {
    let frame = vec![0x60u8; 64 * 48 * 3];
    for _ in 0..30 {
        camera.write_all(&frame).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for_lines(
        results,
        Duration::from_secs(60),
        service,
        "30 results",
        |l| l.len() >= 30,
    );
    let frozen_at = Instant::now();
    assert!(
        service.wait_for_log("source lost", Duration::from_secs(5)),
        "the freeze was not noticed:\n{}",
        service.stderr()
    );
    frozen_at.elapsed()
}

// ---------------------------------------------------------------------------
// The tests

#[test]
fn rtsp_camera_gone_for_4_s_costs_frames_not_the_process() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let port = free_port();
    let camera = RtspCamera::start(port);
    let systemd = FakeSystemd::bind(dir.path());
    let mut service = start(&write_config(dir.path(), &rtsp_source(port)), &systemd);
    systemd.wait_for_ready(systemd.bound_at, START_TIMEOUT, &service);
    wait_for_lines(
        &results,
        Duration::from_secs(60),
        &mut service,
        "20 results",
        |l| l.len() >= 20,
    );

    let lost_at = Instant::now();
    camera.kill();
    assert!(
        service.wait_for_log("source lost", Duration::from_secs(5)),
        "the loss was not noticed:\n{}",
        service.stderr()
    );
    std::thread::sleep(Duration::from_secs(4).saturating_sub(lost_at.elapsed()));
    let (back_at, back_wall) = (Instant::now(), SystemTime::now());
    let _camera = RtspCamera::start(port);

    let after = ts(back_wall);
    let lines = wait_for_lines(
        &results,
        Duration::from_secs(20),
        &mut service,
        "results after the camera came back",
        |l| {
            l.iter()
                .any(|line| line["ts"].as_str().unwrap_or("") >= after.as_str())
        },
    );
    let first_back = lines
        .iter()
        .find(|line| line["ts"].as_str().unwrap_or("") >= after.as_str())
        .unwrap();
    let within = ts(back_wall + Duration::from_secs(3));
    assert!(
        first_back["ts"].as_str().unwrap() <= within.as_str(),
        "first frame after the camera came back at {after} was captured at {first_back}"
    );
    assert!(service.is_running());

    // The watchdog kept pinging through the outage (stall_timeout_s = 1 would
    // have stopped it), and STATUS= said what was going on.
    let pings = systemd.times_of("WATCHDOG=1", lost_at, back_at);
    let longest = pings
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    assert!(
        pings.len() >= 8 && longest < WATCHDOG,
        "{} pings during the outage, longest gap {longest:?}",
        pings.len()
    );
    assert!(
        systemd
            .messages()
            .iter()
            .any(|(t, m)| *t >= lost_at && m.starts_with("STATUS=camera lost since ")),
        "no STATUS=camera lost since ...: {:?}",
        systemd.messages()
    );

    assert_eq!(
        service.terminate(Duration::from_secs(60)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
    let stderr = service.stderr();
    assert_eq!(
        service.log_count("source lost"),
        1,
        "logged once:\n{stderr}"
    );
    assert_eq!(service.log_count("source is back after"), 1, "{stderr}");
    let outage = log_field(&stderr, "source is back after", "outage_s").unwrap();
    assert!(
        (3.5..10.0).contains(&outage),
        "outage of {outage} s:\n{stderr}"
    );
    assert_seq_contiguous(&lines_of(&results));
}

#[test]
fn camera_missing_at_start_is_waited_for_after_ready() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let port = free_port();
    let systemd = FakeSystemd::bind(dir.path());
    let started = Instant::now();
    let mut service = start(&write_config(dir.path(), &rtsp_source(port)), &systemd);
    systemd
        .wait_for(systemd.bound_at, START_TIMEOUT, |m| {
            m.lines().any(|l| l == "READY=1")
        })
        .unwrap_or_else(|| panic!("no READY=1 without a camera:\n{}", service.stderr()));
    systemd
        .wait_for(systemd.bound_at, Duration::from_secs(10), |m| {
            m.starts_with("STATUS=waiting for camera since ")
        })
        .unwrap_or_else(|| panic!("no STATUS=waiting for camera: {:?}", systemd.messages()));
    assert!(
        service.stderr().contains("source not available at start"),
        "{}",
        service.stderr()
    );
    // The camera appears 10 s after the start.
    std::thread::sleep(Duration::from_secs(10).saturating_sub(started.elapsed()));
    assert!(service.is_running(), "{}", service.stderr());
    assert!(lines_of(&results).is_empty());
    let _camera = RtspCamera::start(port);
    wait_for_lines(
        &results,
        Duration::from_secs(30),
        &mut service,
        "results",
        |l| l.len() >= 10,
    );
    assert_eq!(
        service.terminate(Duration::from_secs(60)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
    assert_eq!(service.log_count("source not available at start"), 1);
    assert_eq!(service.log_count("source is back after"), 1);
    assert_seq_contiguous(&lines_of(&results));
    // Issue 40, point 4: the summary tells the loss as it happened.
    let stdout = service.stdout();
    assert!(
        stdout.contains("source: lost 1 time(s), recovered inside the process each time"),
        "{stdout}"
    );
}

/// Issue 40, point 4: a camera that never sent a frame is not said to have
/// recovered; the summary says it was never back and no frame arrived.
#[test]
fn a_camera_that_never_streams_is_not_said_to_have_recovered() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let systemd = FakeSystemd::bind(dir.path());
    let mut service = start(
        &write_config(dir.path(), &rtsp_source(free_port())),
        &systemd,
    );
    assert!(
        service.wait_for_log("source not available at start", START_TIMEOUT),
        "{}",
        service.stderr()
    );
    // A few reopen tries (retry_min_ms of the source), all failing.
    std::thread::sleep(Duration::from_secs(3));
    service.terminate(Duration::from_secs(60));
    let stdout = service.stdout();
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("source: lost"))
        .unwrap_or_else(|| panic!("no loss in the summary:\n{stdout}\n{}", service.stderr()));
    assert!(
        summary.contains("lost 1 time(s), never recovered")
            && summary.contains("reopen tr")
            && summary.contains("still lost at the end")
            && summary.contains("no frame ever arrived")
            && !summary.contains("recovered inside"),
        "{summary}"
    );
    assert!(lines_of(&results).is_empty());
}

#[test]
fn results_file_unwritable_for_a_while_costs_lines_not_inspection() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let before = dir.path().join("before.jsonl");
    let systemd = FakeSystemd::bind(dir.path());
    // Faster than inspection, so lines pile up (not_inspected) and fill the backlog.
    let source = "kind = \"test\"\nwidth = 64\nheight = 48\nframerate = 200\noverflow = \"drop\"\n";
    let mut service = start(&write_config(dir.path(), source), &systemd);
    systemd.wait_for_ready(systemd.bound_at, START_TIMEOUT, &service);
    wait_for_lines(
        &results,
        Duration::from_secs(60),
        &mut service,
        "results",
        |l| l.len() >= 50,
    );

    // The disk is full: the path now leads to /dev/full, every write fails.
    fs::rename(&results, &before).unwrap();
    std::os::unix::fs::symlink("/dev/full", &results).unwrap();
    assert!(
        service.wait_for_log("cannot write the results file", Duration::from_secs(10)),
        "{}",
        service.stderr()
    );
    std::thread::sleep(Duration::from_secs(7));
    assert!(service.is_running(), "{}", service.stderr());
    // Space again: the file comes back by itself.
    fs::remove_file(&results).unwrap();
    assert!(
        service.wait_for_log("the results file is written again", Duration::from_secs(10)),
        "{}",
        service.stderr()
    );
    wait_for_lines(
        &results,
        Duration::from_secs(10),
        &mut service,
        "new lines",
        |l| l.len() >= 20,
    );

    let status = service.terminate(Duration::from_secs(60));
    let stderr = service.stderr();
    assert_eq!(status.code(), Some(1), "lines were lost: exit 1\n{stderr}");
    assert_eq!(
        service.log_count("cannot write the results file"),
        1,
        "{stderr}"
    );
    let lost = log_field(&stderr, "the results file is written again", "lost_lines").unwrap();
    assert!(lost > 0.0, "{stderr}");

    // What reached the files plus what was lost is every frame, in order.
    let seqs: Vec<u64> = lines_of(&before)
        .iter()
        .chain(lines_of(&results).iter())
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order, each once");
    let last = *seqs.last().unwrap();
    assert_eq!(
        seqs.len() as u64 + lost as u64,
        last + 1,
        "written + lost = delivered"
    );
    assert!(
        stderr.contains("result lines could not be written"),
        "{stderr}"
    );
}

#[test]
fn frozen_camera_is_rebuilt_within_its_frame_timeout_and_results_resume() {
    use std::io::Write;
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let systemd = FakeSystemd::bind(dir.path());
    // A camera that freezes: raw frames on our standard input, which simply stops
    // being written for a while (no error, no end-of-stream).
    let source = "kind = \"pipeline\"\nlive = true\n\
        pipeline = \"fdsrc fd=0 ! rawvideoparse width=64 height=48 format=rgb framerate=10/1 ! \
        videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false\"\n\
        retry_min_ms = 200\nretry_max_ms = 1000\nframe_timeout_ms = 1000\n";
    let (mut service, mut camera) = start_fed(&write_config(dir.path(), source), &systemd);
    systemd.wait_for_ready(systemd.bound_at, START_TIMEOUT, &service);
    let noticed = feed_30_frames_then_freeze(&mut camera, &results, &mut service);
    // frame_timeout_ms (1 s) after the last frame, plus one retry interval (0.2 s) and slack.
    assert!(
        noticed < Duration::from_millis(2000),
        "noticed after {noticed:?}"
    );
    assert!(
        service.stderr().contains("frozen source"),
        "{}",
        service.stderr()
    );
    std::thread::sleep(Duration::from_secs(3));
    // The camera thaws and keeps sending until the service is stopped.
    let frame = vec![0x60u8; 64 * 48 * 3];
    let thawed = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let feeder = {
        let thawed = Arc::clone(&thawed);
        std::thread::spawn(move || {
            while thawed.load(std::sync::atomic::Ordering::Relaxed) {
                if camera.write_all(&frame).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    wait_for_lines(
        &results,
        Duration::from_secs(30),
        &mut service,
        "60 results",
        |l| l.len() >= 60,
    );
    assert_eq!(
        service.terminate(Duration::from_secs(60)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
    thawed.store(false, std::sync::atomic::Ordering::Relaxed);
    feeder.join().unwrap();
    assert_eq!(service.log_count("source lost"), 1, "{}", service.stderr());
    assert_eq!(service.log_count("source is back after"), 1);
    let lines = lines_of(&results);
    assert!(lines.len() >= 60);
    assert_seq_contiguous(&lines);
}

/// A live source whose element blocks in a read and never comes out: a
/// `filesrc` on a named pipe whose writer keeps it open but stops writing (a
/// camera tool writing to a pipe that hung). filesrc cannot be interrupted
/// in its read, so setting NULL never returns. The outage is logged when it
/// starts, the pipeline is abandoned after 2 s and a new one built; when
/// three in a row are abandoned the watchdog pings stop and STATUS= and
/// /healthz name the source; SIGTERM still ends the process in time.
#[test]
fn source_blocked_in_a_read_is_abandoned_rebuilt_then_stops_the_watchdog_and_sigterm_still_exits() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let fifo = dir.path().join("camera.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo failed");
    // Read and write, so that opening does not wait for a reader, and the
    // pipe stays open (no end-of-stream) after the last frame is written.
    // filesrc reads whole blocks: one block is one frame (64x48 RGB).
    let mut camera = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let source = format!(
        "kind = \"pipeline\"\nlive = true\n\
         pipeline = \"filesrc location={} blocksize=9216 ! rawvideoparse width=64 height=48 format=rgb framerate=10/1 ! \
         videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=false\"\n\
         retry_min_ms = 200\nretry_max_ms = 1000\nframe_timeout_ms = 1000\n",
        fifo.display()
    );
    const DRAIN_S: u64 = 3;
    let config = write_config(dir.path(), &source);
    let text = fs::read_to_string(&config).unwrap().replace(
        "drain_timeout_s = 20",
        &format!("drain_timeout_s = {DRAIN_S}"),
    ) + "\n[status]\nlisten = \"127.0.0.1:0\"\n";
    fs::write(&config, text).unwrap();
    let systemd = FakeSystemd::bind(dir.path());
    let mut service = start(&config, &systemd);
    systemd.wait_for_ready(systemd.bound_at, START_TIMEOUT, &service);
    let status = service.status_addr();

    // The writer stops writing and keeps the pipe open: filesrc blocks in read(2).
    let noticed = feed_30_frames_then_freeze(&mut camera, &results, &mut service);
    let frozen_at = Instant::now() - noticed;
    // frame_timeout_ms (1 s) plus 2 s: logged when the outage starts, not
    // after a teardown that never ends.
    assert!(
        noticed < Duration::from_secs(3),
        "noticed after {noticed:?}"
    );
    assert!(
        service.wait_for_log("did not stop within", Duration::from_secs(5)),
        "the blocked pipeline was not abandoned:\n{}",
        service.stderr()
    );
    assert!(
        service.stderr().contains("a new pipeline is built"),
        "{}",
        service.stderr()
    );

    // Each rebuilt pipeline blocks the same way: after three in a row the
    // source is stuck and only a restart frees it.
    let (stuck_at, stuck_status) = systemd
        .wait_for(frozen_at, Duration::from_secs(90), |m| {
            m.starts_with("STATUS=SOURCE STUCK")
        })
        .unwrap_or_else(|| panic!("no SOURCE STUCK status:\n{}", service.stderr()));
    assert!(
        stuck_status.contains("[source] pipeline") && stuck_status.contains("3 of its pipelines"),
        "{stuck_status}"
    );
    assert!(
        service.log_count("did not stop within") >= 3,
        "{}",
        service.stderr()
    );
    std::thread::sleep(Duration::from_millis(1500));
    let pings = systemd.times_of("WATCHDOG=1", stuck_at + WATCHDOG, Instant::now());
    assert!(
        pings.is_empty(),
        "{} WATCHDOG=1 after the source was stuck",
        pings.len()
    );
    let health = common::http::get(status, "/healthz");
    assert_eq!(health.status, 503, "{}", health.text());
    assert!(
        health.text().contains("stuck") && health.text().contains("[source] pipeline"),
        "{}",
        health.text()
    );
    let metrics = common::http::get(status, "/metrics").text();
    let abandoned: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sealcheck_source_pipelines_abandoned_total "))
        .unwrap_or_else(|| panic!("no abandoned-pipelines counter:\n{metrics}"))
        .trim()
        .parse()
        .unwrap();
    assert!(abandoned >= 3, "{abandoned}");
    assert!(
        service.wait_for_log("is stuck", Duration::from_secs(2)),
        "no journal line for the stuck source:\n{}",
        service.stderr()
    );

    // The stop: the source's pipeline is blocked as well, yet the process ends
    // within drain_timeout_s plus a few seconds, by its own path (exit 0).
    let stop_at = Instant::now();
    let exit = service.terminate(Duration::from_secs(DRAIN_S + 5));
    let took = stop_at.elapsed();
    assert_eq!(exit.code(), Some(0), "took {took:?}:\n{}", service.stderr());
    drop(camera);
    // Every frame delivered got exactly one result.
    let lines = lines_of(&results);
    assert_eq!(lines.len(), 30, "{}", service.stderr());
    assert_seq_contiguous(&lines);
}
