//! The whole pipeline, camera to decision, on the demo clip and on bad input.
//! Every delivered frame gets exactly one result line, in order.

use crate::common;

use common::repo;

use std::path::{Path, PathBuf};
use std::process::Command;

fn sealcheck() -> Command {
    Command::new(crate::common::sealcheck_bin())
}

/// `sealcheck run --config CONFIG`, to its end.
fn run(config: &Path) -> std::process::Output {
    sealcheck()
        .arg("run")
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

/// A config in `dir` over the demo models; `source` is the whole [source] body.
fn write_config(dir: &Path, source: &str, backend: &str) -> PathBuf {
    let body = format!(
        r#"
[source]
{source}

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
"#,
        models = repo().join("models").display()
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, body).unwrap();
    path
}

fn results(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn labels() -> Vec<serde_json::Value> {
    std::fs::read_to_string(repo().join("samples/demo_clip/labels.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs the first `frames` frames of the demo clip through `backend`.
fn run_clip_prefix(dir: &Path, frames: usize, backend: &str) -> Vec<serde_json::Value> {
    common::clip_prefix(dir, "clip", frames);
    let config = write_config(
        dir,
        "kind = \"images\"\nlocation = \"clip/frame_%05d.jpg\"",
        backend,
    );
    let out = run(&config);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "run failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("frames: {frames} delivered, {frames} results")),
        "{stdout}"
    );
    results(dir)
}

/// ONNX Runtime is a library `make test` fetches, not hardware: where it
/// promised it (`SEALCHECK_REQUIRE_ORT=1`), its absence fails the test.
fn onnxruntime_available() -> bool {
    let found = std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| Path::new(&p).exists());
    if !found {
        assert!(
            std::env::var_os("SEALCHECK_REQUIRE_ORT").is_none(),
            "ORT_DYLIB_PATH does not name libonnxruntime"
        );
        common::skipped(format_args!(
            "ORT_DYLIB_PATH does not name libonnxruntime (make test sets it up)"
        ));
    }
    found
}

fn assert_schema(line: &serde_json::Value) {
    for key in [
        "seq",
        "ts",
        "verdict",
        "reason",
        "defect_prob",
        "seal_area",
        "latency_ms",
    ] {
        assert!(line.get(key).is_some(), "{key} missing in {line}");
    }
    let ts = line["ts"].as_str().unwrap();
    assert!(
        ts.len() == 24 && ts.ends_with('Z') && &ts[10..11] == "T",
        "not RFC 3339: {ts}"
    );
    for stage in ["preprocess", "segment", "classify", "total"] {
        assert!(line["latency_ms"][stage].as_f64().unwrap() >= 0.0);
    }
}

#[test]
fn demo_clip_prefix_one_ordered_result_per_frame_matching_labels() {
    let dir = tempfile::tempdir().unwrap();
    let frames = 40;
    let lines = run_clip_prefix(dir.path(), frames, "tract");
    assert_eq!(lines.len(), frames);
    let labels = labels();
    let mut right = 0;
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"], i as u64);
        assert_schema(line);
        let truth_fail = labels[i]["label"] == "defect";
        right += usize::from((line["verdict"] == "fail") == truth_fail);
        if labels[i]["kind"] == "missing" {
            assert_eq!(line["reason"], "no_seal", "frame {i}: {line}");
        }
    }
    // The model card's bar is 0.97 accuracy on held-out data.
    assert!(
        right as f64 / frames as f64 >= 0.97,
        "{right}/{frames} right"
    );
}

#[test]
fn onnxruntime_and_tract_give_the_same_verdicts_on_the_clip() {
    if !onnxruntime_available() {
        return;
    }
    let frames = 24;
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tract = run_clip_prefix(a.path(), frames, "tract");
    let ort = run_clip_prefix(b.path(), frames, "onnxruntime");
    for (t, o) in tract.iter().zip(&ort) {
        assert_eq!(
            (&t["verdict"], &t["reason"]),
            (&o["verdict"], &o["reason"]),
            "seq {}",
            t["seq"]
        );
        let (pt, po) = (
            t["defect_prob"].as_f64().unwrap(),
            o["defect_prob"].as_f64().unwrap(),
        );
        assert!(
            (pt - po).abs() < 1e-3,
            "seq {}: defect_prob {pt} vs {po}",
            t["seq"]
        );
    }
}

#[test]
fn dropped_frames_get_not_inspected_results_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    // A test source far faster than tract: most frames must be dropped, none lost.
    let source = "kind = \"test\"\nwidth = 320\nheight = 240\nnum_buffers = 400\noverflow = \"drop\"\npool_size = 2";
    let config = write_config(dir.path(), source, "tract");
    let out = run(&config);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = results(dir.path());
    assert_eq!(lines.len(), 400);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"], i as u64);
    }
    let dropped = lines
        .iter()
        .filter(|l| l["reason"] == "not_inspected")
        .count();
    assert!(dropped > 0, "nothing was dropped: the test proves nothing");
    assert!(
        lines
            .iter()
            .filter(|l| l["reason"] == "not_inspected")
            .all(|l| l["verdict"] == "fail")
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("not_inspected {dropped}")),
        "{stdout}"
    );
}

#[test]
fn undecodable_images_in_a_sequence_fail_with_error_in_their_own_place() {
    let dir = tempfile::tempdir().unwrap();
    let frames = 6;
    let clip = common::clip_prefix(dir.path(), "clip", frames);
    // A file that is no image, then a JPEG cut short (it would decode, partly grey).
    std::fs::write(clip.join("frame_00001.jpg"), b"not a jpeg").unwrap();
    let whole = std::fs::read(clip.join("frame_00004.jpg")).unwrap();
    std::fs::write(clip.join("frame_00004.jpg"), &whole[..whole.len() / 2]).unwrap();
    let config = write_config(
        dir.path(),
        "kind = \"images\"\nlocation = \"clip/frame_%05d.jpg\"",
        "tract",
    );
    let out = run(&config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("frame_00001.jpg") && stderr.contains("frame_00004.jpg"),
        "{stderr}"
    );

    let lines = results(dir.path());
    assert_eq!(lines.len(), frames, "one result per file");
    let expected = labels();
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["seq"], i as u64);
        if i == 1 || i == 4 {
            assert_eq!(line["verdict"], "fail", "{line}");
            assert_eq!(line["reason"], "error", "{line}");
        } else {
            assert_schema(line);
            // The files after a bad one are still judged as themselves.
            let defective = expected[i]["label"] != "ok";
            assert_eq!(line["verdict"] == "fail", defective, "frame {i}: {line}");
        }
    }
}

fn read_npy_shape(path: &Path) -> Vec<usize> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(header.contains("'descr': '<f4'"), "{header}");
    let shape = &header[header.find("'shape': (").unwrap() + 10..];
    let shape = &shape[..shape.find(')').unwrap()];
    let dims: Vec<usize> = shape
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    assert_eq!(
        bytes.len(),
        10 + header_len + 4 * dims.iter().product::<usize>()
    );
    dims
}

#[test]
fn inspect_prints_one_line_per_image_and_dumps_five_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "kind = \"test\"", "tract");
    let good = repo().join("samples/demo_clip/frame_00000.jpg");
    let corrupt = dir.path().join("corrupt.jpg");
    std::fs::write(&corrupt, b"\xff\xd8\xff\xe0 this is not really a jpeg").unwrap();
    let dump = dir.path().join("dump");
    let out = sealcheck()
        .args(["inspect", "--config"])
        .arg(&config)
        .arg("--dump")
        .arg(&dump)
        .arg(&good)
        .arg(&corrupt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0]["verdict"], "pass",
        "frame 0 of the clip is a good seal: {}",
        lines[0]
    );
    assert_schema(&lines[0]);
    assert_eq!(
        (&lines[1]["verdict"], &lines[1]["reason"]),
        (&"fail".into(), &"error".into())
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("corrupt.jpg"),
        "the unreadable image is not named: {stderr}"
    );
    let frame = dump.join("frame_00000");
    assert_eq!(
        read_npy_shape(&frame.join("seg_input.npy")),
        [1, 3, 640, 640]
    );
    assert_eq!(
        read_npy_shape(&frame.join("seg_logits.npy")),
        [1, 2, 640, 640]
    );
    assert_eq!(read_npy_shape(&frame.join("mask.npy")), [640, 640]);
    assert_eq!(
        read_npy_shape(&frame.join("cls_input.npy")),
        [1, 4, 224, 512]
    );
    assert_eq!(read_npy_shape(&frame.join("cls_logits.npy")), [1, 2]);
}

#[test]
fn corrupt_model_exits_78_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("seg.onnx");
    std::fs::write(&bad, b"not an onnx model at all").unwrap();
    let config = write_config(dir.path(), "kind = \"test\"\nnum_buffers = 5", "tract");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        &format!("{}/seg.onnx", repo().join("models").display()),
        &bad.display().to_string(),
    );
    std::fs::write(&config, text).unwrap();
    let out = run(&config);
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&bad.display().to_string()), "{stderr}");
}

#[test]
fn tensorrt_without_the_feature_exits_at_start_with_a_clear_message() {
    if cfg!(feature = "tensorrt") {
        common::skipped(format_args!("this build has the tensorrt feature"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "kind = \"test\"\nnum_buffers = 5", "tensorrt");
    let out = run(&config);
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tensorrt"), "{stderr}");
    assert!(
        results(dir.path()).is_empty(),
        "frames were inspected by a silent fallback"
    );
}

#[test]
fn version_lists_backends() {
    let out = sealcheck().arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("tract") && text.contains("onnxruntime"),
        "{text}"
    );
}

/// The whole clip through ONNX Runtime, frame by frame against the training
/// pipeline's own output (`scripts/demo/evaluate.py` wrote `expected.jsonl` with
/// PyTorch preprocessing and onnxruntime). JPEG decoders differ in the last
/// bit of a few pixels, hence the tolerances.
#[test]
fn whole_clip_matches_the_training_pipeline_frame_by_frame() {
    if !onnxruntime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clip = repo().join("samples/demo_clip/frame_%05d.jpg");
    let config = write_config(
        dir.path(),
        &format!("kind = \"images\"\nlocation = \"{}\"", clip.display()),
        "onnxruntime",
    );
    let out = run(&config);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = results(dir.path());
    let expected: Vec<serde_json::Value> =
        std::fs::read_to_string(repo().join("samples/demo_clip/expected.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(lines.len(), expected.len());
    for (got, want) in lines.iter().zip(&expected) {
        let seq = &got["seq"];
        let want_fail = want["verdict"] == "defect" || want["seal_area"].as_f64().unwrap() < 0.005;
        assert_eq!(
            got["verdict"] == "fail",
            want_fail,
            "frame {seq}: {got} vs {want}"
        );
        let dp = (got["defect_prob"].as_f64().unwrap() - want["p_defect"].as_f64().unwrap()).abs();
        assert!(dp < 0.02, "frame {seq}: defect_prob differs by {dp}");
        let da = (got["seal_area"].as_f64().unwrap() - want["seal_area"].as_f64().unwrap()).abs();
        assert!(da < 1e-3, "frame {seq}: seal_area differs by {da}");
    }
}

/// How often `sealcheck run`'s log says each model was opened.
fn model_openings(stderr: &str) -> (usize, usize) {
    let opened = |model: &str| {
        stderr
            .lines()
            .filter(|l| l.contains("model opened") && l.contains(&format!("model={model}")))
            .count()
    };
    (opened("segmentation"), opened("classifier"))
}

/// Each model is opened once per run, whatever engine runs it: the device
/// path used to open a backend to read the shapes, drop it and open its own
/// (on a Jetson, every engine twice in 8 GB of shared memory). With
/// `preprocess = "cuda"` in a `cuda` build on a GPU machine this covers the
/// device path (scripts/gpu/gpu_verify_ort.sh step a also counts it there).
#[test]
fn each_model_is_opened_once_per_run() {
    let mut backends = vec!["tract"];
    if onnxruntime_available() {
        backends.extend(["onnxruntime", "auto"]);
    }
    for backend in backends {
        let dir = tempfile::tempdir().unwrap();
        common::clip_prefix(dir.path(), "clip", 2);
        let source = "kind = \"images\"\nlocation = \"clip/frame_%05d.jpg\"";
        let out = run(&write_config(dir.path(), source, backend));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(
            model_openings(&stderr),
            (1, 1),
            "backend {backend}: each model opened once\n{stderr}"
        );
    }
}
