//! `kind = "genicam"` against Aravis' GigE Vision camera simulator: free run,
//! features read back from the camera, the camera's own pixel format followed,
//! the socket-buffer warning, incomplete frames per camera (summary and
//! /metrics), the software trigger, the hardware (line) trigger's setup, a
//! camera lost and reopened, packet loss, and the errors a technician meets first.
//!
//! ```text
//! arv-fake-gv-camera-0.8 (512x512, 25 fps; own network namespace per test, see common::genicam)
//!     │ GVCP/GVSP over loopback
//!     ▼
//! sealcheck run ──results.jsonl──▶ test          (free run, features, camera loss, errors)
//! this test binary, re-run inside the namespace  (software and line trigger, packet loss: frames
//!     └── Capture ──ring──▶ pixels checked            checked pixel by pixel)
//! ```
//!
//! The in-process tests re-run this binary inside the namespace with
//! `SEALCHECK_TEST_GENICAM_INNER` naming the part to run (`inner_*` tests do
//! nothing otherwise). Every wait is bounded; the tests share no simulator and
//! run in parallel.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::genicam::{CAMERA_ID, Netns};
use common::{Sealcheck, repo, result_lines};
use sealcheck::capture::{Capture, CaptureEvent, RingConsumer};
use sealcheck::config::{
    CameraValue, GenicamPixelFormat, GenicamSource, GenicamTrigger, OverflowPolicy, SourceConfig,
    SourceKind, SourceRecovery,
};
use sealcheck::frame::FrameSlot;
use sealcheck::ring::frame_ring;
use sealcheck::service::Liveness;

/// Loading the models and opening the camera, on a busy machine.
const START_TIMEOUT: Duration = Duration::from_secs(120);
const INNER_ENV: &str = "SEALCHECK_TEST_GENICAM_INNER";

/// A config in `dir` over the demo models; `source` is the [source] body.
fn write_config(dir: &Path, source: &str) -> PathBuf {
    let text = format!(
        r#"[source]
{source}

[inference]
backend = "{backend}"

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
"#,
        backend = common::backend(),
        seg = repo().join("models/seg.onnx").display(),
        cls = repo().join("models/cls.onnx").display(),
        results = dir.join("results.jsonl").display(),
    );
    let path = dir.join("sealcheck.toml");
    fs::write(&path, text).unwrap();
    path
}

/// The simulator at 256x256: a frame (64 KiB) fits the kernel's default socket
/// buffer, which `aravissrc` leaves the stream with; 512x512 frames overflow it
/// on a busy machine (docs/OPERATIONS.md, GigE settings).
const SIZE: &str = "Width=256 Height=256";

fn genicam_source(extra: &str) -> String {
    let extra = if extra.contains("features") {
        extra.to_string()
    } else {
        format!("features = \"{SIZE}\"\n{extra}")
    };
    format!(
        "kind = \"genicam\"\ncamera = \"{CAMERA_ID}\"\npixel_format = \"Bayer\"\n\
         retry_min_ms = 200\nretry_max_ms = 1000\n{extra}"
    )
}

/// `sealcheck run` inside the namespace.
fn start(ns: &Netns, config: &Path) -> Sealcheck {
    let mut cmd = ns.command(common::sealcheck_bin());
    cmd.arg("run").arg("--config").arg(config);
    for (key, value) in std::env::vars_os() {
        if key == "ORT_DYLIB_PATH" || key == "PATH" {
            cmd.env(key, value);
        }
    }
    Sealcheck::isolate(&mut cmd);
    Sealcheck::spawn(cmd)
}

/// Waits until the results file has at least `n` lines.
fn wait_for_results(path: &Path, n: usize, timeout: Duration, service: &mut Sealcheck) {
    let deadline = Instant::now() + timeout;
    while result_lines(path).len() < n {
        assert!(
            service.is_running(),
            "sealcheck exited while waiting for {n} results:\n{}",
            service.stderr()
        );
        assert!(
            Instant::now() < deadline,
            "fewer than {n} results after {timeout:?}:\n{}",
            service.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every line's `seq`, in file order.
fn seqs(path: &Path) -> Vec<u64> {
    result_lines(path)
        .iter()
        .map(|l| l["seq"].as_u64().expect("seq"))
        .collect()
}

/// The counts sealcheck logs at the end of capture: (whole, incomplete).
fn logged_counts(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .rfind(|l| l.contains("camera frame counts at the end of capture"))
        .unwrap_or_else(|| panic!("no frame counts logged:\n{stderr}"));
    let field = |name: &str| -> u64 {
        line.split(&format!(" {name}="))
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    (field("frames"), field("incomplete_frames"))
}

#[test]
fn free_run_gives_one_result_per_delivered_frame_with_seq_contiguous() {
    let Some(ns) = Netns::new("free run") else {
        return;
    };
    let _camera = ns.simulator(0);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &genicam_source(""));
    let results = dir.path().join("results.jsonl");
    let mut service = start(&ns, &config);
    wait_for_results(&results, 1, START_TIMEOUT, &mut service);
    std::thread::sleep(Duration::from_secs(10));
    let status = service.terminate(Duration::from_secs(30));
    let stderr = service.stderr();
    assert!(status.success(), "exit {status}:\n{stderr}");
    let seqs = seqs(&results);
    let (whole, incomplete) = logged_counts(&stderr);
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "seq must count from 0 with no gap"
    );
    assert_eq!(
        seqs.len() as u64,
        whole,
        "one result per frame the camera delivered whole"
    );
    // 10 s at 25 fps after the first result; the simulator's clock and a busy
    // machine may lose a few, but frames not counted would be missing here.
    assert!(
        whole + incomplete >= 240,
        "{whole} whole + {incomplete} incomplete frames in > 10 s at 25 fps:\n{stderr}"
    );
    assert_eq!(
        summary_counts(&service.stdout(), "camera"),
        (incomplete, whole),
        "the summary counts what capture logged"
    );
}

/// The run summary's GenICam line for `camera` ("camera" for `[source]`,
/// "camera NAME"): (incomplete, whole).
fn summary_counts(stdout: &str, camera: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{camera}: ")) && l.contains("incomplete frame(s)"))
        .unwrap_or_else(|| {
            panic!("no incomplete-frames line for {camera} in the summary:\n{stdout}")
        });
    let number = |text: &str| -> u64 {
        text.split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {line}"))
    };
    let incomplete = number(&line[camera.len() + 2..]);
    // "..., 2500 whole[; see ...]": the word before " whole".
    let whole = number(
        line.split(" whole")
            .next()
            .and_then(|before| before.rsplit(' ').next())
            .unwrap_or_else(|| panic!("no whole count in {line}")),
    );
    (incomplete, whole)
}

/// `net.core.rmem_default` as seen inside the namespace, in bytes.
fn rmem_default(ns: &Netns) -> u64 {
    let out = ns
        .command("cat")
        .arg("/proc/sys/net/core/rmem_default")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("rmem_default is a number")
}

/// Sizes as sealcheck words them: "208 KiB", "150.5 KiB".
fn kib(bytes: u64) -> String {
    if bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

/// The start warning's words, for all but the camera's name.
const BUFFER_WARNING: &str = "is larger than the socket buffer its GigE Vision stream gets";

/// Issue 37, item 6: a config that names only the camera works. Without
/// `pixel_format` the camera keeps the format it has (Mono8, the simulator's
/// own; then BayerGR8, set with arv-tool: left alone, `aravissrc` would take
/// the first format the camera offers and set it) and its frames are judged,
/// Bayer through bayer2rgb. A 64 KiB frame fits the default socket buffer: no
/// warning. A format sealcheck cannot convert (Mono16) is named at start.
#[test]
fn without_pixel_format_the_camera_keeps_its_format_and_its_frames_are_judged() {
    let Some(ns) = Netns::new("camera's own pixel format") else {
        return;
    };
    let _camera = ns.simulator(0);
    let fits = rmem_default(&ns) >= 256 * 256;
    let dir = tempfile::tempdir().unwrap();
    let source = format!(
        "kind = \"genicam\"\ncamera = \"{CAMERA_ID}\"\nfeatures = \"{SIZE}\"\n\
         retry_min_ms = 200\nretry_max_ms = 1000\n"
    );
    let config = write_config(dir.path(), &source);
    let results = dir.path().join("results.jsonl");
    for format in ["Mono8", "BayerGR8"] {
        if format != "Mono8" {
            ns.arv_tool(&["control", &format!("PixelFormat={format}")])
                .unwrap_or_else(|e| panic!("the simulator takes {format}: {e}"));
        }
        assert_eq!(ns.feature("PixelFormat"), format);
        let _ = fs::remove_file(&results);
        let mut service = start(&ns, &config);
        wait_for_results(&results, 5, START_TIMEOUT, &mut service);
        let status = service.terminate(Duration::from_secs(30));
        let stderr = service.stderr();
        assert!(status.success(), "{format}: exit {status}:\n{stderr}");
        assert!(
            stderr.contains(&format!("pixel_format={format} pixel_format_from=camera")),
            "{format}: the camera's own format is logged:\n{stderr}"
        );
        if fits {
            assert!(
                !stderr.contains(BUFFER_WARNING),
                "{format}: a 64 KiB frame fits the socket buffer:\n{stderr}"
            );
        }
        let lines = result_lines(&results);
        assert!(
            lines
                .iter()
                .any(|l| l["reason"] != "error" && l["reason"] != "not_inspected"),
            "{format}: no frame judged: {lines:?}"
        );
        assert!(
            lines.iter().all(|l| l["reason"] != "error"),
            "{format}: a frame failed: {lines:?}"
        );
        assert_eq!(
            ns.feature("PixelFormat"),
            format,
            "sealcheck left the camera's PixelFormat as it was"
        );
    }
    // A format sealcheck does not convert: a config problem, named at start.
    ns.arv_tool(&["control", "PixelFormat=Mono16"])
        .unwrap_or_else(|e| panic!("the simulator takes Mono16: {e}"));
    let (code, _, stderr) = start(&ns, &config).finish(START_TIMEOUT);
    assert_eq!(
        code, 78,
        "a format sealcheck cannot read is EX_CONFIG:\n{stderr}"
    );
    assert!(
        stderr.contains("the camera sends PixelFormat Mono16, which sealcheck cannot convert")
            && stderr
                .contains("the camera offers BayerBG8, BayerGB8, BayerGR8, BayerRG8, Mono8, RGB8"),
        "the format and the values to set are named:\n{stderr}"
    );
}

/// Issue 37, item 6: a GigE camera whose frame is larger than the socket
/// buffer its stream gets (`net.core.rmem_default`, read by the test inside
/// the namespace as sealcheck reads it) is warned of once at start, by
/// `sealcheck run` and by `sealcheck cameras`, with both sizes and the fix.
#[test]
fn a_frame_larger_than_the_socket_buffer_is_warned_of_at_start_by_run_and_cameras() {
    let Some(ns) = Netns::new("socket buffer warning") else {
        return;
    };
    let rmem = rmem_default(&ns);
    // The smallest square 8-bit frame (side a multiple of 32) larger than the buffer.
    let side = ((rmem as f64).sqrt() as u64 / 32 + 1) * 32;
    if side > 2048 {
        common::skipped(format_args!(
            "socket buffer warning: net.core.rmem_default is {rmem} bytes, more than the \
             simulator's largest 8-bit frame (2048x2048)"
        ));
        return;
    }
    let _camera = ns.simulator(0);
    let expected = format!(
        "GenICam camera {CAMERA_ID}: one frame ({}) {BUFFER_WARNING} (net.core.rmem_default = {})",
        kib(side * side),
        kib(rmem)
    );
    let dir = tempfile::tempdir().unwrap();
    let source = genicam_source(&format!("features = \"Width={side} Height={side}\"\n"));
    let config = write_config(dir.path(), &source);
    let mut service = start(&ns, &config);
    assert!(
        service.wait_for_log(BUFFER_WARNING, START_TIMEOUT),
        "no warning for a {side}x{side} frame and a {rmem}-byte buffer:\n{}",
        service.stderr()
    );
    service.terminate(Duration::from_secs(30));
    let stderr = service.stderr();
    let warning = stderr.lines().find(|l| l.contains(BUFFER_WARNING)).unwrap();
    assert!(
        warning.contains(&expected)
            && warning.contains("level=warn")
            && warning.contains("sysctl -p /etc/sysctl.d/60-sealcheck-gige.conf"),
        "expected {expected:?} at WARN with the fix in:\n{warning}"
    );
    assert_eq!(
        stderr.matches(BUFFER_WARNING).count(),
        1,
        "once at start:\n{stderr}"
    );
    println!("{side}x{side} frame, rmem_default {rmem}: {warning}");

    let cameras = |width: u64| -> String {
        ns.arv_tool(&[
            "control",
            &format!("Width={width}"),
            &format!("Height={width}"),
        ])
        .unwrap_or_else(|e| panic!("the simulator takes {width}x{width}: {e}"));
        let out = ns
            .command("timeout")
            .arg("30")
            .arg(common::sealcheck_bin())
            .arg("cameras")
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(out.status.success(), "sealcheck cameras: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let listed = cameras(side);
    assert!(
        listed.contains(&expected),
        "sealcheck cameras: expected {expected:?} in:\n{listed}"
    );
    if rmem >= 64 * 64 {
        let small = cameras(64);
        assert!(
            !small.contains(BUFFER_WARNING),
            "a 4 KiB frame fits:\n{small}"
        );
    }
}

/// Issue 37, item 6: the run's summary and `/metrics` count each GenICam
/// camera's incomplete frames by its name, and they agree with the counts
/// capture logs at its end. The simulator loses 5 % of its packets (8 KiB
/// packets, 10 a frame): frames go missing while it runs.
#[test]
fn incomplete_frames_are_counted_per_camera_in_the_summary_and_in_metrics() {
    let Some(ns) = Netns::new("incomplete frames per camera") else {
        return;
    };
    let _camera = ns.simulator(50);
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let config = write_config(dir.path(), &genicam_source("packet_size = 8192\n"));
    let text = fs::read_to_string(&config)
        .unwrap()
        .replacen("[source]\n", "[cameras.side]\n", 1);
    fs::write(
        &config,
        format!("{text}\n[status]\nlisten = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    let results = dir.path().join("results.jsonl");
    let mut service = start(&ns, &config);
    wait_for_results(&results, 5, START_TIMEOUT, &mut service);
    let scrape = || -> (u64, String) {
        let out = ns
            .command("curl")
            .args(["-s", "-m", "10"])
            .arg(format!("http://127.0.0.1:{port}/metrics"))
            .output()
            .expect("curl in the namespace");
        let metrics = String::from_utf8_lossy(&out.stdout).into_owned();
        let series = |name: &str| -> u64 {
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in /metrics:\n{metrics}"))
        };
        // Both series from the first scrape on (each read at its own moment
        // of the scrape: a frame may be counted in between).
        let camera = series("sealcheck_camera_incomplete_frames_total{camera=\"side\"}");
        series("sealcheck_source_incomplete_frames_total");
        (camera, metrics)
    };
    // It counts while the run goes on.
    let deadline = Instant::now() + Duration::from_secs(30);
    let scraped = loop {
        let (camera, metrics) = scrape();
        if camera > 0 {
            break camera;
        }
        assert!(
            Instant::now() < deadline,
            "no incomplete frame counted in 30 s at 5 % packet loss:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let status = service.terminate(Duration::from_secs(30));
    let stderr = service.stderr();
    assert!(status.success(), "exit {status}:\n{stderr}");
    let (whole, incomplete) = logged_counts(&stderr);
    println!("scraped {scraped} incomplete; at the end {whole} whole, {incomplete} incomplete");
    assert_eq!(
        summary_counts(&service.stdout(), "camera side"),
        (incomplete, whole),
        "the summary names the camera and counts what capture logged:\n{}",
        service.stdout()
    );
    assert!(
        scraped <= incomplete,
        "a counter only goes up: {scraped} scraped, {incomplete} at the end"
    );
}

#[test]
fn exposure_and_gain_from_the_config_are_read_back_from_the_camera() {
    let Some(ns) = Netns::new("features") else {
        return;
    };
    let _camera = ns.simulator(0);
    assert_eq!(
        ns.feature("ExposureTimeAbs"),
        "10000",
        "the simulator's default"
    );
    let dir = tempfile::tempdir().unwrap();
    let source =
        genicam_source("exposure_us = 2500\ngain_db = 3\nfeatures = \"Width=256 Height=256\"\n");
    let config = write_config(dir.path(), &source);
    let results = dir.path().join("results.jsonl");
    let mut service = start(&ns, &config);
    wait_for_results(&results, 1, START_TIMEOUT, &mut service);
    let stderr = service.stderr();
    assert!(
        stderr.contains("exposure_us=2500 gain_db=3"),
        "sealcheck logs the values it read back:\n{stderr}"
    );
    assert!(service.terminate(Duration::from_secs(30)).success());
    // The camera keeps its registers after sealcheck let go: read them ourselves.
    assert_eq!(ns.feature("ExposureTimeAbs"), "2500");
    assert_eq!(ns.feature("GainRaw"), "3");
}

/// A recipe's exposure and gain (`[recipes.NAME]`) are set on the running
/// camera when the recipe is switched to over HTTP, and read back.
#[test]
fn a_recipe_switch_sets_the_running_cameras_exposure_and_gain() {
    let Some(ns) = Netns::new("recipe") else {
        return;
    };
    let _camera = ns.simulator(0);
    let dir = tempfile::tempdir().unwrap();
    let source = genicam_source("exposure_us = 2500\ngain_db = 3\n");
    let config = write_config(dir.path(), &source);
    // The namespace has its own loopback: any port is free there.
    let port = 19750;
    let mut text = fs::read_to_string(&config).unwrap();
    text += &format!(
        "\n[status]\nlisten = \"127.0.0.1:{port}\"\n\n[recipes.day]\nid = 1\n\n\
         [recipes.night]\nid = 2\nexposure_us = 4000\ngain_db = 5\n"
    );
    fs::write(&config, text).unwrap();
    let results = dir.path().join("results.jsonl");
    let mut service = start(&ns, &config);
    wait_for_results(&results, 1, START_TIMEOUT, &mut service);
    let post = format!(
        "import urllib.request as u; r = u.urlopen(u.Request('http://127.0.0.1:{port}/api/recipe?name=night', method='POST'), timeout=60); print(r.status, r.read().decode())"
    );
    let out = ns.command("python3").args(["-c", &post]).output().unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.starts_with("200") && answer.contains("\"night\""),
        "{answer}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        service.stderr()
    );
    assert!(
        service.wait_for_log("camera set for recipe", Duration::from_secs(10)),
        "{}",
        service.stderr()
    );
    let stderr = service.stderr();
    assert!(
        stderr.contains("exposure_us=4000 gain_db=5"),
        "sealcheck logs the values it read back:\n{stderr}"
    );
    let n = result_lines(&results).len();
    wait_for_results(&results, n + 2, START_TIMEOUT, &mut service);
    assert!(service.terminate(Duration::from_secs(30)).success());
    let lines = result_lines(&results);
    assert_eq!(lines.last().unwrap()["recipe"], "night");
    // The camera keeps its registers after sealcheck let go: read them ourselves.
    assert_eq!(ns.feature("ExposureTimeAbs"), "4000");
    assert_eq!(ns.feature("GainRaw"), "5");
}

#[test]
fn camera_lost_for_3_s_is_reopened_in_process_and_seq_goes_on() {
    let Some(ns) = Netns::new("camera loss") else {
        return;
    };
    let camera = ns.simulator(0);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &genicam_source("frame_timeout_ms = 1000\n"));
    let results = dir.path().join("results.jsonl");
    let mut service = start(&ns, &config);
    wait_for_results(&results, 10, START_TIMEOUT, &mut service);
    camera.kill();
    assert!(
        service.wait_for_log("source lost", Duration::from_secs(15)),
        "the loss is logged:\n{}",
        service.stderr()
    );
    std::thread::sleep(Duration::from_secs(3));
    let before = result_lines(&results).len();
    let _camera = ns.simulator(0);
    wait_for_results(&results, before + 25, Duration::from_secs(60), &mut service);
    assert!(service.is_running(), "still the same process");
    let status = service.terminate(Duration::from_secs(30));
    let stderr = service.stderr();
    assert!(status.success(), "exit {status}:\n{stderr}");
    let seqs = seqs(&results);
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "seq goes on across the reopen, no gap, no restart from 0"
    );
    assert!(
        stderr.contains("camera frame counts at the loss"),
        "the camera was let go at the loss:\n{stderr}"
    );
}

#[test]
fn an_unknown_camera_id_is_named() {
    let Some(ns) = Netns::new("unknown camera") else {
        return;
    };
    let _camera = ns.simulator(0);
    let dir = tempfile::tempdir().unwrap();
    let source = "kind = \"genicam\"\ncamera = \"Acme-Nope-12345\"\npixel_format = \"Mono8\"\n";
    let config = write_config(dir.path(), source);
    let mut service = start(&ns, &config);
    assert!(
        service.wait_for_log("Acme-Nope-12345", START_TIMEOUT),
        "the camera id is named:\n{}",
        service.stderr()
    );
    let stderr = service.stderr();
    assert!(
        stderr.contains("source not available at start") && stderr.contains("sealcheck cameras"),
        "a missing camera is waited for, and the message says how to list cameras:\n{stderr}"
    );
    service.terminate(Duration::from_secs(30));
}

#[test]
fn a_feature_the_camera_refuses_is_named_with_its_value_and_range() {
    let Some(ns) = Netns::new("refused feature") else {
        return;
    };
    let _camera = ns.simulator(0);
    let dir = tempfile::tempdir().unwrap();
    for (extra, named) in [
        (
            "features = \"Width=99999\"\n",
            "the camera refuses Width = 99999: out of the camera's range; the camera accepts 1 to 2048 — change `features`",
        ),
        (
            "exposure_us = 50000000\n",
            "the camera refuses ExposureTime = 50000000: out of the camera's range; the camera accepts 10 to 10000000 — change `exposure_us`",
        ),
        (
            "features = \"NoSuchFeature=1\"\n",
            "the camera refuses NoSuchFeature = 1: the camera has no such feature",
        ),
    ] {
        let config = write_config(dir.path(), &genicam_source(extra));
        let service = start(&ns, &config);
        let (code, _, stderr) = service.finish(START_TIMEOUT);
        assert_eq!(
            code, 78,
            "{extra}: a refused setting is a config problem (EX_CONFIG):\n{stderr}"
        );
        assert!(
            stderr.contains(named),
            "{extra}: expected {named:?} in:\n{stderr}"
        );
    }
}

#[test]
fn sealcheck_cameras_lists_the_simulator_with_its_settings() {
    let Some(ns) = Netns::new("cameras") else {
        return;
    };
    let _camera = ns.simulator(0);
    let out = ns
        .command("timeout")
        .arg("30")
        .arg(common::sealcheck_bin())
        .arg("cameras")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!(
            "{CAMERA_ID}  address 127.0.0.1  Aravis Fake (GigEVision)"
        )) && text.contains("PixelFormat Mono8  Width 512  Height 512  TriggerMode Off"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------
// In-process: the capture's frames themselves, inside the namespace

/// The name the test harness knows `test` of this module by: its path in the
/// test crate (`genicam::inner_line_trigger`), the crate's own name left out.
fn test_path(test: &str) -> String {
    match module_path!().split_once("::") {
        Some((_crate, module)) => format!("{module}::{test}"),
        None => test.to_string(),
    }
}

/// Re-runs this binary's test `inner` inside `ns`; it fails when the inner one
/// fails. Returns what it printed.
fn run_inside(ns: &Netns, inner: &str) -> String {
    let out = ns
        .command("timeout")
        .arg("120")
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_path(inner),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INNER_ENV, inner)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{inner} inside the namespace:\n{text}"
    );
    assert!(
        text.contains(&format!("INNER DONE {inner}")),
        "{inner} did not run:\n{text}"
    );
    text
}

/// Whether this process is the inner run of `name`.
fn inner(name: &str) -> bool {
    std::env::var(INNER_ENV).is_ok_and(|v| v == name)
}

fn mono_source(trigger: GenicamTrigger) -> SourceConfig {
    SourceConfig {
        kind: SourceKind::Genicam(GenicamSource {
            camera: Some(CAMERA_ID.into()),
            exposure_us: CameraValue::Fixed(10_000.0),
            gain_db: CameraValue::Fixed(0.0),
            pixel_format: Some(GenicamPixelFormat::Mono8),
            packet_size: None,
            features: vec![
                ("Width".into(), "256".into()),
                ("Height".into(), "256".into()),
            ],
            trigger,
        }),
        overflow: OverflowPolicy::Block,
        pool_size: 8,
        recovery: SourceRecovery::default(),
        layout: None,
    }
}

/// The simulator's Mono8 picture at exposure 10000 µs and gain 0 is
/// `(x + y + frame_id) % 255` (arvfakecamera.c, diagonal ramp), grey in RGB.
/// Returns `frame_id % 255` when every pixel of `frame` fits one frame id:
/// a frame with a part of another frame, or a hole, does not.
fn whole_frame_id(frame: &FrameSlot) -> Result<u32, String> {
    let pixel = |x: usize, y: usize| frame.data[y * frame.stride + x * 3];
    let id = pixel(0, 0) as u32;
    for y in 0..frame.height as usize {
        for x in 0..frame.width as usize {
            let expected = ((x as u32 + y as u32 + id) % 255) as u8;
            let row = &frame.data[y * frame.stride + x * 3..][..3];
            if row != [expected; 3] {
                return Err(format!(
                    "frame {}: pixel ({x}, {y}) is {row:?}, a whole frame {id} has {expected}",
                    frame.meta.seq
                ));
            }
        }
    }
    Ok(id)
}

/// Pops one frame within `timeout`; checks it whole and returns its id.
fn next_frame(consumer: &mut RingConsumer, timeout: Duration) -> Option<Result<u32, String>> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        match consumer.pop(Duration::from_millis(50)) {
            Some(CaptureEvent::Frame(slot)) => {
                let id = whole_frame_id(&slot);
                consumer.recycle(slot);
                return Some(id);
            }
            Some(CaptureEvent::End(end)) => panic!("capture ended: {end:?}"),
            // The ring was full (drop policy): those frames never reach a judge.
            Some(CaptureEvent::Dropped { .. }) => {}
            Some(CaptureEvent::Failed { message, .. }) => panic!("a frame failed: {message}"),
            None => {}
        }
    }
    None
}

#[test]
fn software_trigger_fired_n_times_gives_n_distinct_frames() {
    let Some(ns) = Netns::new("software trigger") else {
        return;
    };
    let _camera = ns.simulator(0);
    run_inside(&ns, "inner_software_trigger");
}

#[test]
fn inner_software_trigger() {
    if !inner("inner_software_trigger") {
        return;
    }
    const FIRES: usize = 20;
    let (producer, mut consumer) = frame_ring(8);
    let capture = Capture::start_camera(
        Some("trig"),
        &mono_source(GenicamTrigger::Software),
        producer,
        Liveness::new(),
    )
    .expect("the simulator opens");
    let trigger = capture
        .software_trigger()
        .expect("a software-triggered camera has a trigger");
    // Untriggered, the camera sends nothing.
    assert!(
        next_frame(&mut consumer, Duration::from_secs(1)).is_none(),
        "a frame came without a trigger"
    );
    let mut ids = Vec::new();
    for n in 1..=FIRES {
        assert_eq!(trigger.fire().expect("fire"), n as u64);
        let id = next_frame(&mut consumer, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("no frame within 5 s of fire {n}"))
            .unwrap_or_else(|e| panic!("fire {n}: {e}"));
        ids.push(id);
        // One frame per fire: nothing more comes.
        assert!(
            next_frame(&mut consumer, Duration::from_millis(150)).is_none(),
            "a second frame after fire {n}"
        );
    }
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        FIRES,
        "each fire's frame is a new picture: {ids:?}"
    );
    assert_eq!(trigger.fired(), FIRES as u64);
    assert_eq!(capture.genicam_counters().unwrap().frames(), FIRES as u64);
    capture.shutdown();
    println!("INNER DONE inner_software_trigger");
}

#[test]
fn line_trigger_sets_the_camera_to_its_input_line_and_waits_without_a_frame() {
    let Some(ns) = Netns::new("line trigger") else {
        return;
    };
    let _camera = ns.simulator(0);
    run_inside(&ns, "inner_line_trigger");
    // The capture set the camera to its hardware trigger on Line0 (read back).
    assert_eq!(ns.feature("TriggerMode"), "On");
    assert_eq!(ns.feature("TriggerSource"), "Line0");
}

/// The simulator has no input line: in trigger mode on Line0 it sends nothing
/// (arvgvfakecamera.c sends only in free run or on TriggerSoftware). What can
/// be checked here: the camera is set to its hardware trigger, waits without
/// a frame, and a triggered camera's silence is not taken for a frozen one.
#[test]
fn inner_line_trigger() {
    if !inner("inner_line_trigger") {
        return;
    }
    let (producer, mut consumer) = frame_ring(8);
    let capture = Capture::start_camera(
        Some("line"),
        &mono_source(GenicamTrigger::Line(0)),
        producer,
        Liveness::new(),
    )
    .expect("the simulator opens");
    assert!(
        capture.software_trigger().is_none(),
        "only a software-triggered camera has a software trigger"
    );
    let counters = capture.genicam_counters().unwrap();
    assert_eq!(counters.trigger(), GenicamTrigger::Line(0));
    // Longer than the first-frame timeout (5 s) a free-running camera gets.
    assert!(
        next_frame(&mut consumer, Duration::from_secs(7)).is_none(),
        "a frame came with no edge on the line"
    );
    assert_eq!(
        capture.source_status().outages(),
        0,
        "a triggered camera waiting for its line was taken for a lost one"
    );
    assert_eq!(counters.frames(), 0);
    capture.shutdown();
    println!("INNER DONE inner_line_trigger");
}

#[test]
fn packet_loss_frames_are_whole_or_counted_incomplete() {
    let Some(ns) = Netns::new("packet loss") else {
        return;
    };
    // 5 % of the stream's packets lost.
    let _camera = ns.simulator(50);
    let text = run_inside(&ns, "inner_packet_loss");
    let number = |key: &str| -> f64 {
        text.split(&format!("{key} "))
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in:\n{text}"))
    };
    let (accounted, span_s) = (number("ACCOUNTED"), number("SPAN_S"));
    if let Some(line) = text.lines().find(|l| l.contains("packet loss:")) {
        println!("{line}");
    }
    // Between the first and the last whole frame the camera sent one frame per
    // interval of its rate (as the capture set it): each is either delivered
    // whole or counted incomplete. Arrival times jitter by a frame or so.
    let rate: f64 = ns.feature("AcquisitionFrameRate").parse().unwrap();
    let sent = (span_s * rate).round() + 1.0;
    assert!(
        (accounted - sent).abs() <= 3f64.max(sent / 10.0),
        "{accounted} frames accounted for; the camera sent about {sent} in {span_s:.2} s at {rate} fps:\n{text}"
    );
}

#[test]
fn inner_packet_loss() {
    if !inner("inner_packet_loss") {
        return;
    }
    let (producer, mut consumer) = frame_ring(8);
    let mut source = mono_source(GenicamTrigger::Off);
    source.overflow = OverflowPolicy::Drop;
    // 8 KiB packets: 10 per frame with leader and trailer, so about 60 % of the
    // frames arrive whole. (1400-byte packets leave 9 % whole, and gaps of 2 s
    // without a whole frame, where aravissrc ends its stream: an outage, not this test.)
    if let SourceKind::Genicam(g) = &mut source.kind {
        g.packet_size = Some(8192);
    }
    let capture = Capture::start_camera(Some("lossy"), &source, producer, Liveness::new())
        .expect("the simulator opens");
    let counters = capture.genicam_counters().unwrap();
    let status = capture.source_status();
    let until = Instant::now() + Duration::from_secs(6);
    let (mut whole, mut dropped) = (0u64, 0u64);
    let (mut first, mut last) = (None, None);
    let mut capture = Some(capture);
    // For 6 s, then (capture shut down) what is left in the ring, up to its End.
    loop {
        if Instant::now() >= until
            && let Some(capture) = capture.take()
        {
            capture.shutdown();
        }
        match consumer.pop(Duration::from_millis(100)) {
            Some(CaptureEvent::Frame(slot)) => {
                if let Err(torn) = whole_frame_id(&slot) {
                    panic!("a torn frame reached the ring: {torn}");
                }
                first.get_or_insert(slot.meta.captured_instant);
                last = Some(slot.meta.captured_instant);
                whole += 1;
                consumer.recycle(slot);
            }
            Some(CaptureEvent::Dropped { count, .. }) => dropped += count,
            Some(CaptureEvent::End(_)) if capture.is_none() => break,
            Some(CaptureEvent::End(end)) => panic!("capture ended: {end:?}"),
            Some(CaptureEvent::Failed { message, .. }) => panic!("a frame failed: {message}"),
            None => assert!(
                Instant::now() < until + Duration::from_secs(10),
                "no End within 10 s of the shutdown"
            ),
        }
    }
    let delivered = counters.frames();
    let incomplete = counters.incomplete();
    println!(
        "packet loss: {whole} whole frames checked pixel by pixel, {dropped} dropped by the ring, \
         {delivered} delivered by Aravis, {incomplete} counted incomplete"
    );
    assert_eq!(
        status.outages(),
        0,
        "the camera was lost during the test: frames then go uncounted"
    );
    assert!(whole >= 2, "fewer than 2 frames came through at 5 % loss");
    assert!(
        incomplete > 0,
        "5 % packet loss and no incomplete frame counted"
    );
    // Every frame the element delivered reached the ring (judged, or dropped and counted).
    assert!(
        (whole + dropped).abs_diff(delivered) <= 1,
        "{whole} + {dropped} ring events for {delivered} delivered frames"
    );
    // The outer test compares this with the camera's frame rate.
    let span = last.unwrap().duration_since(first.unwrap());
    println!(
        "ACCOUNTED {} SPAN_S {}",
        delivered + incomplete,
        span.as_secs_f64()
    );
    println!("INNER DONE inner_packet_loss");
}

// ---------------------------------------------------------------------------
// check-config: no camera needed

#[test]
fn check_config_names_every_bad_genicam_key_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let source = "kind = \"genicam\"\nexposure_us = \"long\"\ngain_db = -3\npixel_format = \"YUV\"\n\
                  packet_size = 20\nfeatures = \"Width\"\ntrigger = \"line\"\n";
    let config = write_config(dir.path(), source);
    let out = std::process::Command::new(common::sealcheck_bin())
        .arg("check-config")
        .arg(&config)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(78), "{text}");
    for key in [
        "source.exposure_us",
        "source.gain_db",
        "source.pixel_format",
        "source.packet_size",
        "source.features",
        "source.trigger",
    ] {
        assert!(text.contains(key), "{key} not named in:\n{text}");
    }
    for good in [
        "kind = \"genicam\"\ncamera = \"192.168.10.20\"\nexposure_us = \"auto\"\ngain_db = 6.5\n\
         pixel_format = \"Mono8\"\npacket_size = 8192\nfeatures = \"BalanceWhiteAuto=Off\"\ntrigger = \"line1\"\n",
        // Only the camera: its pixel format is the one it sends.
        "kind = \"genicam\"\ncamera = \"192.168.10.20\"\n",
    ] {
        let good = write_config(dir.path(), good);
        let out = std::process::Command::new(common::sealcheck_bin())
            .arg("check-config")
            .arg(&good)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Issue 29 with issue 31: `[trigger] mode = "plc"` on a camera with
/// `trigger = "software"`. Each accepted trigger (here `POST /api/trigger`,
/// sent from inside the camera's network namespace) fires the camera once;
/// the frame it sends back is that part's.
#[test]
fn plc_triggers_fire_the_software_trigger_and_each_part_gets_its_own_frame() {
    let Some(ns) = Netns::new("plc software trigger") else {
        return;
    };
    let _camera = ns.simulator(0);
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let config = write_config(dir.path(), &genicam_source("trigger = \"software\""));
    let mut text = fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[status]\nlisten = \"127.0.0.1:{port}\"\n\n[trigger]\nmode = \"plc\"\nhttp = true\nframe_wait_ms = 1000\n"
    ));
    fs::write(&config, text).unwrap();
    let mut service = start(&ns, &config);
    assert!(
        service.wait_for_log("pipeline running", START_TIMEOUT),
        "not running:\n{}",
        service.stderr()
    );
    let trigger = |id: u32| -> (String, serde_json::Value) {
        let out = ns
            .command("curl")
            .args(["-s", "-m", "10", "-w", "\n%{http_code}", "-X", "POST"])
            .arg(format!("http://127.0.0.1:{port}/api/trigger?part_id={id}"))
            .output()
            .expect("curl in the namespace");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or((&text, ""));
        (
            code.to_string(),
            serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
        )
    };
    // Online once the camera streams (a triggered camera streams no frame
    // until fired: Online is its pipeline's state).
    let deadline = Instant::now() + Duration::from_secs(30);
    while trigger(1).0 != "200" {
        assert!(
            Instant::now() < deadline,
            "never online:\n{}",
            service.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut answers = Vec::new();
    for id in 100..150u32 {
        answers.push((id, trigger(id)));
        // The simulator looks for a software trigger every 40 ms.
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = service.terminate(Duration::from_secs(30));
    assert!(status.success(), "exit {status}:\n{}", service.stderr());
    let mut seqs = Vec::new();
    for (id, (code, answer)) in &answers {
        assert_eq!(code, "200", "part {id}: {answer}");
        assert_eq!(answer["part_id"], *id);
        let seq = answer["seq"]
            .as_u64()
            .unwrap_or_else(|| panic!("part {id} got no frame: {answer}"));
        seqs.push(seq);
    }
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "one distinct frame per part: {seqs:?}"
    );
    let lines = result_lines(&dir.path().join("results.jsonl"));
    let ids: Vec<u64> = lines
        .iter()
        .filter_map(|l| l["part_id"].as_u64())
        .filter(|&id| id >= 100)
        .collect();
    assert_eq!(
        ids,
        (100..150).collect::<Vec<u64>>(),
        "every part once, in order"
    );
}
