//! Shadow models (`[shadow]`) end to end: `sealcheck run` and `check-config`
//! as child processes on the demo clip, checked from the results file, the
//! run summary, `/metrics` and the archive.
//!
//! ```text
//! test --writes--> config + clip prefix (+ swapped-class classifier, + garbage .onnx)
//!   --> sealcheck run --> results.jsonl ("shadow":{...}), summary's `shadow:` line,
//!                         <archive>/shadow/<day>/manifest.jsonl, log (stderr)
//!   \--HTTP (loopback, port chosen by the OS)--> /metrics while it runs
//! ```
//!
//! Two sources: the `images` source goes as fast as decoding allows, so
//! production takes every core and the shadow (nice 19, spare capacity only)
//! skips most frames: fine where only the bookkeeping is checked. Where every
//! due frame must be judged, a paced GStreamer pipeline (`multifilesrc` with
//! a frame rate, `appsink sync=true`) delivers the clip in real time.
//!
//! ONNX Runtime is required (`ORT_DYLIB_PATH`; tract is ~10x slower): without
//! it the tests print `SKIPPED`, or fail under `SEALCHECK_REQUIRE_ORT`. The
//! swapped-class classifier is made with `python3 scripts/demo/swap_classes.py`
//! (python with `onnx`: the repo's `.venv`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{Sealcheck, repo};
use sealcheck::archive::sha256_hex;
use sealcheck::model_id::model_id;

/// How long one `sealcheck run` of a short clip may take.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// `[source]` body: the clip folder as fast as it decodes.
fn unpaced(clip: &Path) -> String {
    format!(
        "kind = \"images\"\nlocation = \"{}/frame_%05d.jpg\"\n",
        clip.display()
    )
}

/// `[source]` body: the first `frames` files of `clip` in real time, `fps`
/// frames a second (the appsink waits for each frame's time), ending after
/// the last. Not live: the ring blocks rather than drops.
fn paced(clip: &Path, frames: usize, fps: u32) -> String {
    format!(
        "kind = \"pipeline\"\npipeline = \"multifilesrc location={}/frame_%05d.jpg start-index=0 stop-index={} \
         caps=image/jpeg,framerate={fps}/1 ! jpegdec ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink sync=true\"\n",
        clip.display(),
        frames - 1
    )
}

/// A config `dir/sealcheck.toml` over the demo models on ONNX Runtime (one
/// thread each: production and the shadow each get a core), `source` the
/// `[source]` body, `extra` more sections (`[shadow]`, `[archive]`, ...).
fn write_config(dir: &Path, source: &str, extra: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let body = format!(
        r#"[source]
{source}
[inference]
backend = "onnxruntime"
threads = 1

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

{extra}
"#,
        models = repo().join("models").display()
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, body).unwrap();
    path
}

/// `sealcheck run` to its end (bounded): exit code, stdout, stderr.
fn run(config: &Path) -> (i32, String, String) {
    Sealcheck::start(config, &[]).finish(RUN_LIMIT)
}

/// A run that must succeed with one result per delivered frame.
fn run_ok(config: &Path, frames: usize) -> (String, String) {
    let (code, stdout, stderr) = run(config);
    assert_eq!(code, 0, "sealcheck run failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("frames: {frames} delivered, {frames} results")),
        "{stdout}"
    );
    (stdout, stderr)
}

/// `sealcheck check-config FILE`: exit code, stdout, stderr.
fn check_config(config: &Path) -> (i32, String, String) {
    let mut cmd = Command::new(common::sealcheck_bin());
    cmd.arg("check-config").arg(config);
    Sealcheck::isolate(&mut cmd);
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The results file of the config in `dir`: every line must be JSON.
fn results(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The complete lines written so far (the file of a running service: a
/// line being written, not yet ended by its newline, is left out).
fn results_so_far(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Exactly one line per frame, `seq` 0.. without gaps or repeats.
fn assert_one_line_per_frame(lines: &[Value], frames: usize) {
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (0..frames as u64).collect::<Vec<_>>(),
        "seq must be 0..{frames}, one line each"
    );
}

/// Production's reasons for which a frame is inspected (and so comparable).
fn inspected(line: &Value) -> bool {
    matches!(
        line["reason"].as_str(),
        Some("ok" | "defect" | "no_seal" | "seal_area")
    )
}

/// The flips the lines show: `(compared, pass_to_fail, fail_to_pass)` over
/// the lines whose `shadow` has a verdict.
fn recount(lines: &[Value]) -> (u64, u64, u64) {
    let (mut compared, mut p2f, mut f2p) = (0, 0, 0);
    for line in lines {
        let Some(shadow) = line["shadow"]["verdict"].as_str() else {
            continue;
        };
        compared += 1;
        match (line["verdict"].as_str().unwrap(), shadow) {
            ("pass", "fail") => p2f += 1,
            ("fail", "pass") => f2p += 1,
            (p, s) => assert_eq!(p, s, "unknown verdicts in {line}"),
        }
    }
    (compared, p2f, f2p)
}

/// The run summary's `shadow: ` line, its numbers by name.
#[derive(Debug)]
struct ShadowSummary {
    line: String,
    every: u64,
    compared: u64,
    pass_to_fail: u64,
    fail_to_pass: u64,
    skipped: u64,
    failures: u64,
}

fn shadow_summary(stdout: &str) -> ShadowSummary {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("shadow: "))
        .unwrap_or_else(|| panic!("no `shadow: ` line in the summary:\n{stdout}"))
        .to_string();
    // The number right after `label` (`every 3`, `skipped 0`) or right
    // before it (`12 compared`).
    let after = |label: &str| -> u64 {
        let rest = line
            .split(label)
            .nth(1)
            .unwrap_or_else(|| panic!("no `{label}` in {line}"));
        rest.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|e| panic!("`{label}` in {line}: {e}"))
    };
    let compared = line
        .split(" compared")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `N compared` in {line}"));
    ShadowSummary {
        every: after("every "),
        compared,
        pass_to_fail: after("flips pass_to_fail "),
        fail_to_pass: after(" fail_to_pass "),
        skipped: after("skipped "),
        failures: after("failures "),
        line,
    }
}

/// `GET /metrics` over loopback, `None` when the server is not (or no
/// longer) there. Bounded by socket timeouts.
fn try_metrics(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The value of the sample whose name and labels are exactly `series`.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(series)
            .filter(|rest| rest.starts_with(' '))
            .and_then(|rest| rest.trim().parse().ok())
    })
}

/// The machine's load, for the messages of checks that need spare CPU.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// 1. A shadow classifier with its classes swapped, on the unpaced clip:
///    production's fields are those of the same run without a shadow, every
///    frame has one line, and the summary's counts are the lines' counts.
#[test]
fn swapped_shadow_leaves_production_as_it_was_and_the_summary_counts_the_lines() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let _serial = common::serial();
    let frames = 90;
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", frames);
    let swapped = common::swap_classes(&dir.path().join("cls_swapped.onnx"));

    let base_dir = dir.path().join("base");
    let (base_out, _) = run_ok(&write_config(&base_dir, &unpaced(&clip), ""), frames);
    assert!(
        !base_out.contains("shadow: "),
        "no [shadow], no shadow line:\n{base_out}"
    );
    let shadow_dir = dir.path().join("shadow");
    let shadowed = format!("[shadow]\nclassifier = \"{}\"\n", swapped.display());
    let (stdout, stderr) = run_ok(
        &write_config(&shadow_dir, &unpaced(&clip), &shadowed),
        frames,
    );

    let base = results(&base_dir);
    let lines = results(&shadow_dir);
    assert_one_line_per_frame(&base, frames);
    assert_one_line_per_frame(&lines, frames);
    let swapped_id = model_id(&swapped).unwrap();
    for (b, l) in base.iter().zip(&lines) {
        assert!(b.get("shadow").is_none(), "{b}");
        for key in [
            "verdict",
            "reason",
            "defect_prob",
            "seal_area",
            "late",
            "models",
        ] {
            assert_eq!(
                b[key], l[key],
                "seq {}: production's `{key}` changed by the shadow",
                b["seq"]
            );
        }
        if let Some(shadow) = l.get("shadow") {
            assert!(inspected(l), "only inspected frames go to the shadow: {l}");
            assert!(
                shadow.get("error").is_none(),
                "shadow failed (load {}): {l}",
                loadavg()
            );
            // Production's segmentation model, the swapped classifier.
            assert_eq!(
                shadow["models"]["segmentation"], l["models"]["segmentation"],
                "{l}"
            );
            assert_eq!(shadow["models"]["classifier"], swapped_id.as_str(), "{l}");
            // Same segmentation model and engine: the same mask.
            assert_eq!(shadow["mask_iou"].as_f64(), Some(1.0), "{l}");
        }
    }

    let summary = shadow_summary(&stdout);
    println!("{}", summary.line);
    let (compared, p2f, f2p) = recount(&lines);
    assert_eq!(
        (summary.compared, summary.pass_to_fail, summary.fail_to_pass),
        (compared, p2f, f2p),
        "the summary's counts differ from the lines': {}",
        summary.line
    );
    assert_eq!(summary.failures, 0, "{}", summary.line);
    // Every frame due (every = 1) and inspected was either judged or skipped.
    let due = lines.iter().filter(|l| inspected(l)).count() as u64;
    assert_eq!(
        summary.compared + summary.skipped,
        due,
        "compared + skipped must be the inspected frames: {}",
        summary.line
    );
    assert!(
        compared > 0,
        "the shadow judged no frame: {}\n{stderr}",
        summary.line
    );
    // Per production reason, as the summary's next line counts them: the
    // flips of the lines with that reason.
    let by_reason = stdout
        .lines()
        .find_map(|l| l.strip_prefix("shadow by production reason: "))
        .unwrap_or_else(|| panic!("no per-reason line in the summary:\n{stdout}"));
    for reason in ["ok", "defect", "no_seal", "seal_area"] {
        let mine: Vec<&Value> = lines
            .iter()
            .filter(|l| l["reason"] == reason && l["shadow"]["verdict"].is_string())
            .collect();
        let (_, p2f, f2p) = recount(
            &lines
                .iter()
                .filter(|l| l["reason"] == reason)
                .cloned()
                .collect::<Vec<_>>(),
        );
        let expected = format!(
            "{reason} {} (pass_to_fail {p2f}, fail_to_pass {f2p})",
            mine.len()
        );
        assert_eq!(
            by_reason.contains(&expected),
            !mine.is_empty(),
            "{expected} in `{by_reason}`"
        );
    }
    // Swapped classes: nearly every classified frame flips.
    let classified: Vec<&Value> = lines
        .iter()
        .filter(|l| l["shadow"]["verdict"].is_string())
        .filter(|l| matches!(l["reason"].as_str(), Some("ok" | "defect")))
        .collect();
    let flipped = classified
        .iter()
        .filter(|l| l["verdict"] != l["shadow"]["verdict"])
        .count();
    assert!(
        !classified.is_empty() && flipped * 2 > classified.len(),
        "a swapped classifier must flip most classified frames: {flipped} of {}",
        classified.len()
    );
}

/// 2. The INT8 demo models as a shadow of the FP32 ones (ONNX Runtime runs
///    the `_int8.onnx` files beside the models), paced: near-zero flips and
///    masks that agree.
#[test]
fn int8_shadow_of_fp32_agrees() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let _serial = common::serial();
    let (frames, fps) = (40, 8);
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", frames);
    let shadowed = "[shadow]\nbackend = \"onnxruntime\"\nprecision = \"int8\"\n";
    let config = write_config(dir.path(), &paced(&clip, frames, fps), shadowed);
    let (stdout, _) = run_ok(&config, frames);
    let lines = results(dir.path());
    assert_one_line_per_frame(&lines, frames);

    let models = repo().join("models");
    let (seg8, cls8) = (
        model_id(&models.join("seg_int8.onnx")).unwrap(),
        model_id(&models.join("cls_int8.onnx")).unwrap(),
    );
    let judged: Vec<&Value> = lines
        .iter()
        .filter(|l| l["shadow"]["verdict"].is_string())
        .collect();
    for l in &judged {
        assert_eq!(
            (
                &l["shadow"]["models"]["segmentation"],
                &l["shadow"]["models"]["classifier"]
            ),
            (&Value::from(seg8.as_str()), &Value::from(cls8.as_str())),
            "the shadow must run the _int8 files: {l}"
        );
    }
    let summary = shadow_summary(&stdout);
    println!("{}", summary.line);
    let (compared, p2f, f2p) = recount(&lines);
    assert!(compared > 0, "no frame compared: {}", summary.line);
    assert_eq!(summary.failures, 0, "{}", summary.line);
    assert_eq!(
        (summary.compared, summary.pass_to_fail, summary.fail_to_pass),
        (compared, p2f, f2p),
        "{}",
        summary.line
    );
    assert!(
        (p2f + f2p) as f64 <= 0.02 * compared as f64,
        "INT8 flips {} of {compared} frames",
        p2f + f2p
    );
    let ious: Vec<f64> = judged
        .iter()
        .map(|l| l["shadow"]["mask_iou"].as_f64().unwrap())
        .collect();
    let mean = ious.iter().sum::<f64>() / ious.len() as f64;
    assert!(
        mean > 0.9,
        "mean mask IoU {mean} over {} frames",
        ious.len()
    );
    // The summary's mean and worst are the lines' (printed to 4 decimals).
    let worst = ious.iter().copied().fold(f64::INFINITY, f64::min);
    let printed = |label: &str| -> f64 {
        summary
            .line
            .split(label)
            .nth(1)
            .and_then(|r| r.split([' ', ',']).next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no `{label}` in {}", summary.line))
    };
    assert!(
        (printed("mask IoU mean ") - mean).abs() <= 6e-5,
        "lines' mean {mean}: {}",
        summary.line
    );
    assert!(
        (printed(" worst ") - worst).abs() <= 6e-5,
        "lines' worst {worst}: {}",
        summary.line
    );
    assert!(
        summary.line.contains("onnxruntime-cpu (running)"),
        "{}",
        summary.line
    );
}

/// 3. A corrupt shadow classifier: `check-config` exits 78 naming the key
///    and the step; `run` goes on with production alone, says so, and writes
///    no `shadow` into any line. A good shadow checks out (exit 0).
#[test]
fn a_corrupt_shadow_is_refused_and_production_runs_on() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let _serial = common::serial();
    let frames = 30;
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", frames);
    let corrupt = dir.path().join("cls_corrupt.onnx");
    // Not a protobuf ONNX Runtime can read.
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&corrupt, garbage).unwrap();

    // The positive control: the same config with a good shadow checks out.
    let good = write_config(
        &dir.path().join("good"),
        &unpaced(&clip),
        &format!(
            "[shadow]\nclassifier = \"{}\"\n",
            repo().join("models/cls_int8.onnx").display()
        ),
    );
    let (code, stdout, stderr) = check_config(&good);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("shadow ok (runs on onnxruntime-cpu)"),
        "{stdout}"
    );

    let base_dir = dir.path().join("base");
    run_ok(&write_config(&base_dir, &unpaced(&clip), ""), frames);
    let bad_dir = dir.path().join("bad");
    let config = write_config(
        &bad_dir,
        &unpaced(&clip),
        &format!("[shadow]\nclassifier = \"{}\"\n", corrupt.display()),
    );
    let (code, stdout, stderr) = check_config(&config);
    assert_eq!(
        code, 78,
        "check-config must refuse the corrupt shadow:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("[shadow] classifier") && stderr.contains("step `open`"),
        "stderr must name the key and the step:\n{stderr}"
    );
    assert!(!stdout.contains(": ok ("), "{stdout}");

    let (stdout, stderr) = run_ok(&config, frames);
    let refusal = stderr
        .lines()
        .find(|l| l.contains("shadow refused at step `open` ([shadow] classifier)"))
        .unwrap_or_else(|| panic!("no refusal in the log:\n{stderr}"));
    assert!(
        refusal.contains("target=sealcheck::shadow")
            && refusal.contains("production runs on without it"),
        "{refusal}"
    );
    let summary = shadow_summary(&stdout);
    assert!(
        summary.line.contains("(refused)") && summary.compared == 0,
        "{}",
        summary.line
    );
    let base = results(&base_dir);
    let lines = results(&bad_dir);
    assert_one_line_per_frame(&lines, frames);
    for (b, l) in base.iter().zip(&lines) {
        assert!(
            l.get("shadow").is_none(),
            "a refused shadow judges nothing: {l}"
        );
        for key in ["verdict", "reason", "defect_prob", "models"] {
            assert_eq!(b[key], l[key], "seq {}: `{key}`", b["seq"]);
        }
    }
}

/// The other refusal steps `check-config` names: a shadow classifier whose
/// IO is not a classifier's (step `open`), and an INT8 shadow without
/// `_int8` files beside production's models (step `models`).
#[test]
fn check_config_names_the_step_and_key_of_other_refusals() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", 1);
    let models = repo().join("models");

    // The segmentation model as a classifier: its IO is not a classifier's.
    let config = write_config(
        &dir.path().join("contract"),
        &unpaced(&clip),
        &format!(
            "[shadow]\nclassifier = \"{}\"\n",
            models.join("seg.onnx").display()
        ),
    );
    let (code, stdout, stderr) = check_config(&config);
    assert_eq!(code, 78, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("step `open` ([shadow] classifier)"),
        "{stderr}"
    );

    // Production's models copied where no _int8 file lies beside them.
    let alone = dir.path().join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    for name in ["seg.onnx", "cls.onnx"] {
        std::fs::copy(models.join(name), alone.join(name)).unwrap();
    }
    let config = write_config(
        &dir.path().join("int8"),
        &unpaced(&clip),
        "[shadow]\nprecision = \"int8\"\n",
    );
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(&models.display().to_string(), &alone.display().to_string());
    std::fs::write(&config, text).unwrap();
    let (code, stdout, stderr) = check_config(&config);
    assert_eq!(code, 78, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("step `models` ([shadow] segmentation)")
            && stderr.contains("seg_int8.onnx"),
        "{stderr}"
    );
}

/// A shadow classifier that opens and has a classifier's IO, but takes
/// frames of another size (224x256, production's takes 224x512): refused at
/// step `contract`, naming the key of the file that differs.
#[test]
fn a_shadow_of_another_input_size_is_refused_at_the_contract_naming_its_key() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", 1);
    let narrow = dir.path().join("cls_narrow.onnx");
    // The demo classifier pools globally before its Gemm: it runs on any
    // input size, and declares 224x256 here.
    let python = Command::new("python3")
        .args([
            "-c",
            "import onnx, sys\n\
             m = onnx.load(sys.argv[1])\n\
             m.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 256\n\
             onnx.save(m, sys.argv[2])\n",
        ])
        .arg(repo().join("models/cls.onnx"))
        .arg(&narrow)
        .output()
        .expect("python3 with onnx (the repo's .venv)");
    assert!(
        python.status.success(),
        "{}",
        String::from_utf8_lossy(&python.stderr)
    );
    let config = write_config(
        dir.path(),
        &unpaced(&clip),
        &format!("[shadow]\nclassifier = \"{}\"\n", narrow.display()),
    );
    let (code, stdout, stderr) = check_config(&config);
    assert_eq!(code, 78, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("step `contract` ([shadow] classifier)"),
        "{stderr}"
    );
}

/// 4. `every = 3` on a paced source: exactly the frames with `seq % 3 == 0`
///    carry `shadow`, each with a verdict, nothing skipped; `/metrics`
///    follows the lines while it runs.
#[test]
fn every_third_frame_exactly_on_a_paced_source() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let _serial = common::serial();
    let (frames, fps) = (36, 10);
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", frames);
    let swapped = common::swap_classes(&dir.path().join("cls_swapped.onnx"));
    let extra = format!(
        "[shadow]\nclassifier = \"{}\"\nevery = 3\n\n[status]\nlisten = \"127.0.0.1:0\"\n",
        swapped.display()
    );
    let config = write_config(dir.path(), &paced(&clip, frames, fps), &extra);
    // The whole service at nice 19, the shadow's priority: on a machine
    // shared with other work (builds), load from outside would otherwise
    // starve the shadow alone and make it skip. Here production and shadow
    // share what CPU there is, and `every` alone decides what is judged.
    let mut cmd = Command::new("nice");
    cmd.args(["-n", "19"])
        .arg(common::sealcheck_bin())
        .arg("run")
        .arg("--config")
        .arg(&config);
    Sealcheck::isolate(&mut cmd);
    let mut service = Sealcheck::spawn(cmd);
    let addr = service.status_addr();

    // While it runs: the counters are never behind the lines already
    // written (a line carries the shadow's verdict only after it counted),
    // and nothing is skipped.
    let mut polls = 0;
    let mut last = (0.0, 0.0, 0.0);
    let deadline = Instant::now() + RUN_LIMIT;
    while service.is_running() && Instant::now() < deadline {
        let lines = results_so_far(dir.path());
        let Some(metrics) = try_metrics(addr) else {
            // Not there (yet, or any more): the loop ends with the process.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let value = |series: &str| {
            sample(&metrics, series)
                .unwrap_or_else(|| panic!("no {series} in /metrics:\n{metrics}"))
        };
        let frames_total = value("sealcheck_shadow_frames_total");
        let p2f = value("sealcheck_shadow_flips_total{direction=\"pass_to_fail\"}");
        let f2p = value("sealcheck_shadow_flips_total{direction=\"fail_to_pass\"}");
        assert_eq!(
            value("sealcheck_shadow_skipped_total"),
            0.0,
            "the shadow skipped a due frame (load {}):\n{metrics}",
            loadavg()
        );
        let (compared, lp2f, lf2p) = recount(&lines);
        assert!(
            frames_total >= compared as f64 && p2f >= lp2f as f64 && f2p >= lf2p as f64,
            "/metrics behind the results file: {frames_total} {p2f} {f2p} vs {compared} {lp2f} {lf2p}"
        );
        assert!(
            frames_total >= last.0 && p2f >= last.1 && f2p >= last.2,
            "a counter went down"
        );
        last = (frames_total, p2f, f2p);
        polls += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, stdout, stderr) = service.finish(RUN_LIMIT);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        polls >= 3,
        "/metrics read only {polls} times during the run"
    );
    assert!(
        last.0 > 0.0,
        "/metrics never counted a shadow frame during the run"
    );

    let lines = results(dir.path());
    assert_one_line_per_frame(&lines, frames);
    // The source really was paced (else "nothing skipped" proves little).
    let ts =
        |l: &Value| chrono_ms(l["ts"].as_str().unwrap()).unwrap_or_else(|| panic!("bad ts in {l}"));
    let span_ms = ts(&lines[frames - 1]) - ts(&lines[0]);
    let expected_ms = (frames as i64 - 1) * 1000 / i64::from(fps);
    assert!(
        span_ms * 10 >= expected_ms * 8,
        "the source was not paced: {span_ms} ms for {frames} frames at {fps}/s"
    );
    for l in &lines {
        let seq = l["seq"].as_u64().unwrap();
        assert!(inspected(l), "{l}");
        if seq % 3 == 0 {
            assert!(
                l["shadow"]["verdict"].is_string(),
                "seq {seq} is due (every = 3) and must carry the shadow's verdict (load {}): {l}",
                loadavg()
            );
        } else {
            assert!(l.get("shadow").is_none(), "seq {seq} is not due: {l}");
        }
    }
    let summary = shadow_summary(&stdout);
    println!("{}", summary.line);
    let (compared, p2f, f2p) = recount(&lines);
    assert_eq!(compared, frames as u64 / 3);
    assert_eq!(
        (
            summary.every,
            summary.compared,
            summary.pass_to_fail,
            summary.fail_to_pass,
            summary.skipped,
            summary.failures
        ),
        (3, compared, p2f, f2p, 0, 0),
        "{} (load {})",
        summary.line,
        loadavg()
    );
    // The last poll saw no more than the run's end.
    assert!(last.0 <= compared as f64 && last.1 <= p2f as f64 && last.2 <= f2p as f64);
}

/// Milliseconds since the epoch of an RFC 3339 UTC stamp such as
/// `2026-11-23T04:05:06.789Z` (within one month is enough here: days count
/// from the month's start).
fn chrono_ms(ts: &str) -> Option<i64> {
    let n = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (day, h, m, s, ms) = (n(8..10)?, n(11..13)?, n(14..16)?, n(17..19)?, n(20..23)?);
    Some((((day * 24 + h) * 60 + m) * 60 + s) * 1000 + ms)
}

/// 5. With `[archive]`, the flips are archived under `<dir>/shadow/<day>/`:
///    one manifest line per flipped frame of the results file, its `result`
///    that frame's line (production's verdict and the shadow's, differing),
///    its files on disk with the hashes the manifest names, chained.
#[test]
fn disagreements_are_archived_with_both_masks() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let _serial = common::serial();
    let frames = 30;
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", frames);
    let swapped = common::swap_classes(&dir.path().join("cls_swapped.onnx"));
    let archive = dir.path().join("archive");
    let extra = format!(
        "[shadow]\nclassifier = \"{}\"\n\n[archive]\ndir = \"{}\"\nmax_mib = 256\nmin_free_mib = 0\n",
        swapped.display(),
        archive.display()
    );
    let config = write_config(dir.path(), &unpaced(&clip), &extra);
    let (stdout, _) = run_ok(&config, frames);
    let lines = results(dir.path());
    assert_one_line_per_frame(&lines, frames);
    let flipped: BTreeMap<u64, &Value> = lines
        .iter()
        .filter(|l| l["shadow"]["verdict"].is_string() && l["shadow"]["verdict"] != l["verdict"])
        .map(|l| (l["seq"].as_u64().unwrap(), l))
        .collect();
    assert!(
        !flipped.is_empty(),
        "no flip to archive: {}",
        shadow_summary(&stdout).line
    );

    let shadow_root = archive.join("shadow");
    let days: Vec<PathBuf> = std::fs::read_dir(&shadow_root)
        .unwrap_or_else(|e| panic!("{}: {e}", shadow_root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("manifest.jsonl").is_file())
        .collect();
    assert!(
        !days.is_empty(),
        "no <dir>/shadow/<day>/manifest.jsonl under {}",
        shadow_root.display()
    );
    let mut archived = BTreeSet::new();
    for day in &days {
        let manifest = std::fs::read_to_string(day.join("manifest.jsonl")).unwrap();
        let mut prev: Option<String> = None;
        for text in manifest.lines() {
            let entry: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                entry["prev"].as_str(),
                prev.as_deref(),
                "hash chain broken at {text}"
            );
            prev = Some(sha256_hex(text.as_bytes()));
            let result = &entry["result"];
            let seq = result["seq"].as_u64().unwrap();
            let (production, shadow) = (&result["verdict"], &result["shadow"]["verdict"]);
            assert!(
                production.is_string() && shadow.is_string() && production != shadow,
                "an archived disagreement must carry two different verdicts: {text}"
            );
            let line = flipped.get(&seq).unwrap_or_else(|| {
                panic!("seq {seq} archived but not a flip in the results: {text}")
            });
            assert_eq!(
                result, *line,
                "the archived result is the frame's result line"
            );
            for (file, hash) in [
                ("file", "sha256"),
                ("mask", "mask_sha256"),
                ("shadow_mask", "shadow_mask_sha256"),
            ] {
                let rel = entry[file]
                    .as_str()
                    .unwrap_or_else(|| panic!("no `{file}` in {text}"));
                let path = day.join(rel);
                let bytes =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(
                    entry[hash].as_str(),
                    Some(sha256_hex(&bytes).as_str()),
                    "{}",
                    path.display()
                );
            }
            assert!(entry["mask"].as_str().unwrap().ends_with("_mask.png"));
            assert!(
                entry["shadow_mask"]
                    .as_str()
                    .unwrap()
                    .ends_with("_shadow_mask.png")
            );
            assert!(archived.insert(seq), "seq {seq} archived twice");
        }
    }
    assert_eq!(
        archived,
        flipped.keys().copied().collect::<BTreeSet<_>>(),
        "every flip in the results file is archived, nothing else"
    );
}

/// On SIGHUP a `[shadow]` added, changed and removed applies to a running
/// line: its model ids in the lines follow, then the lines carry none.
#[test]
fn reload_adds_changes_and_removes_the_shadow() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", 30);
    let swapped = common::swap_classes(&dir.path().join("cls_swapped.onnx"));
    // The clip in a loop at 10 frames/s, until SIGTERM.
    let source = paced(&clip, 30, 10).replace(" stop-index=29", " stop-index=29 loop=true");
    let write = |extra: &str| write_config(dir.path(), &source, extra);
    let config = write("");
    let mut service = Sealcheck::start(&config, &[]);
    let lines = || results_so_far(dir.path());
    let running_logs = |s: &Sealcheck| s.log_count("shadow running");
    let wait_lines = |service: &mut Sealcheck, what: &str, done: &dyn Fn(&[Value]) -> bool| {
        let ok = wait_until(Duration::from_secs(30), || done(&lines()));
        assert!(ok, "{what}: not within 30 s:\n{}", service.stderr());
        assert!(service.is_running(), "{}", service.stderr());
    };
    wait_lines(&mut service, "first lines", &|l| l.len() >= 5);

    // Added.
    write(&format!(
        "[shadow]\nclassifier = \"{}\"\n",
        swapped.display()
    ));
    service.signal("HUP");
    assert!(
        service.wait_for_log("shadow running", Duration::from_secs(30)),
        "{}",
        service.stderr()
    );
    let swapped_id = model_id(&swapped).unwrap();
    wait_lines(&mut service, "lines with the swapped shadow", &|l| {
        l.iter()
            .filter(|l| l["shadow"]["models"]["classifier"] == swapped_id.as_str())
            .count()
            >= 5
    });

    // Changed to a corrupt classifier: refused, the running shadow goes on.
    let corrupt = dir.path().join("cls_corrupt.onnx");
    std::fs::write(
        &corrupt,
        b"not an ONNX model, not even protobuf \xff\xff\xff",
    )
    .unwrap();
    write(&format!(
        "[shadow]\nclassifier = \"{}\"\n",
        corrupt.display()
    ));
    service.signal("HUP");
    assert!(
        service.wait_for_log(
            "the shadow that was running goes on",
            Duration::from_secs(30)
        ),
        "{}",
        service.stderr()
    );
    assert!(
        service
            .stderr()
            .contains("shadow refused at step `open` ([shadow] classifier)"),
        "{}",
        service.stderr()
    );
    let judged_by_swapped = |l: &[Value]| {
        l.iter()
            .filter(|l| l["shadow"]["models"]["classifier"] == swapped_id.as_str())
            .count()
    };
    let before = judged_by_swapped(&lines());
    wait_lines(
        &mut service,
        "the swapped shadow judging on after the refusal",
        &|l| judged_by_swapped(l) >= before + 5,
    );

    // Changed: the INT8 files instead.
    write("[shadow]\nbackend = \"onnxruntime\"\nprecision = \"int8\"\n");
    service.signal("HUP");
    assert!(
        wait_until(Duration::from_secs(30), || running_logs(&service) >= 2),
        "no second `shadow running`:\n{}",
        service.stderr()
    );
    let int8_id = model_id(&repo().join("models/cls_int8.onnx")).unwrap();
    wait_lines(&mut service, "lines with the INT8 shadow", &|l| {
        l.iter()
            .filter(|l| l["shadow"]["models"]["classifier"] == int8_id.as_str())
            .count()
            >= 2
    });

    // Removed.
    write("");
    service.signal("HUP");
    assert!(
        service.wait_for_log("[shadow] removed on reload", Duration::from_secs(30)),
        "{}",
        service.stderr()
    );
    let at_removal = lines().len();
    wait_lines(&mut service, "lines after the removal", &|l| {
        l.len() >= at_removal + 15
    });
    let status = service.terminate(Duration::from_secs(30));
    let stdout = service.stdout();
    assert!(status.success(), "{status:?}\n{}", service.stderr());

    let all = results(dir.path());
    assert_one_line_per_frame(&all, all.len());
    // Frames handed over just before the removal are judged by the removed
    // shadow, never failed.
    let errors: Vec<&Value> = all
        .iter()
        .filter(|l| l["shadow"].get("error").is_some())
        .collect();
    assert!(
        errors.is_empty(),
        "shadow errors after a removal: {errors:?}"
    );
    let ids: Vec<&str> = all
        .iter()
        .filter(|l| l["shadow"]["verdict"].is_string())
        .filter_map(|l| l["shadow"]["models"]["classifier"].as_str())
        .collect();
    // First the swapped classifier only, then the INT8 one only.
    let switch = ids
        .iter()
        .position(|id| *id == int8_id)
        .unwrap_or_else(|| panic!("no line judged by the INT8 shadow: {ids:?}"));
    assert!(
        switch > 0 && ids[..switch].iter().all(|id| *id == swapped_id),
        "{ids:?}"
    );
    assert!(ids[switch..].iter().all(|id| *id == int8_id), "{ids:?}");
    assert!(
        all[..5].iter().all(|l| l.get("shadow").is_none()),
        "shadow before [shadow] was added"
    );
    let tail = &all[all.len() - 10..];
    assert!(
        tail.iter().all(|l| l.get("shadow").is_none()),
        "the shadow judged frames long after it was removed: {tail:?}"
    );
    let summary = shadow_summary(&stdout);
    assert!(summary.line.contains("(off)"), "{}", summary.line);
    assert_eq!(summary.failures, errors.len() as u64, "{}", summary.line);
}

/// Removing `[shadow]` on reload while the shadow is busy (INT8 at nice 19
/// on a 20 frames/s source, a frame always waiting for it): the frames
/// already handed over are judged (or written without a shadow), never
/// failed: the removal is no failure of the shadow's engine. Three removals
/// in one run, so that one lands with a frame waiting.
#[test]
fn removing_the_shadow_on_reload_fails_no_frame_already_handed_over() {
    let Some(_) = common::ort_library() else {
        return;
    };
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let clip = common::clip_prefix(dir.path(), "clip", 30);
    let source = paced(&clip, 30, 20).replace(" stop-index=29", " stop-index=29 loop=true");
    let shadowed = "[shadow]\nbackend = \"onnxruntime\"\nprecision = \"int8\"\n";
    let config = write_config(dir.path(), &source, shadowed);
    let mut service = Sealcheck::start(&config, &[]);
    let judged = || {
        results_so_far(dir.path())
            .iter()
            .filter(|l| l["shadow"]["verdict"].is_string())
            .count()
    };
    for round in 1..=3 {
        if round > 1 {
            write_config(dir.path(), &source, shadowed);
            service.signal("HUP");
        }
        let before = judged();
        assert!(
            wait_until(Duration::from_secs(30), || service
                .log_count("shadow running")
                >= round
                && judged() >= before + 5),
            "round {round}: the shadow did not judge 5 frames:\n{}",
            service.stderr()
        );
        write_config(dir.path(), &source, "");
        service.signal("HUP");
        assert!(
            wait_until(Duration::from_secs(30), || service
                .log_count("[shadow] removed on reload")
                >= round),
            "round {round}: no removal:\n{}",
            service.stderr()
        );
    }
    let status = service.terminate(Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{}", service.stderr());
    let summary = shadow_summary(&service.stdout());
    let lines = results(dir.path());
    assert_one_line_per_frame(&lines, lines.len());
    let errors: Vec<&Value> = lines
        .iter()
        .filter(|l| l["shadow"].get("error").is_some())
        .collect();
    assert!(
        errors.is_empty(),
        "frames failed by the removal: {errors:?}\n{}",
        summary.line
    );
    assert_eq!(summary.failures, 0, "{}", summary.line);
}
