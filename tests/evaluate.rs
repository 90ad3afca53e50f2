//! `sealcheck evaluate` on the demo clip: tract as the reference, ONNX Runtime
//! CPU FP32 and INT8 as candidates; the JSON recounts to its summary; a
//! classifier with its classes swapped fails `--gate` naming the rule, also
//! when the config names it, so that the reference runs it too (the floors
//! against the labels); bad input is named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common;
use common::{labelled_clip_prefix, repo};

const FRAMES: usize = 24;

fn clip_prefix(dir: &Path) -> PathBuf {
    labelled_clip_prefix(dir, "clip", FRAMES)
}

fn ort_available() -> bool {
    let found = std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| Path::new(&p).is_file());
    if !found && std::env::var_os("SEALCHECK_REQUIRE_ORT").is_some() {
        panic!("SEALCHECK_REQUIRE_ORT is set but ORT_DYLIB_PATH names no library");
    }
    if !found {
        common::skipped(format_args!(
            "ONNX Runtime not available (set ORT_DYLIB_PATH; `make onnxruntime`)"
        ));
    }
    found
}

fn evaluate(dir: &Path, clip: &Path, args: &[&str]) -> (Output, Option<Value>) {
    evaluate_with(&repo().join("config/demo.toml"), dir, clip, args)
}

fn evaluate_with(config: &Path, dir: &Path, clip: &Path, args: &[&str]) -> (Output, Option<Value>) {
    let report = dir.join("report");
    let out = Command::new(crate::common::sealcheck_bin())
        .arg("evaluate")
        .arg("--config")
        .arg(config)
        .arg("--images")
        .arg(clip)
        .arg("--report")
        .arg(&report)
        .args(args)
        .output()
        .unwrap();
    let json = std::fs::read_to_string(report.join("evaluation.json"))
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap());
    (out, json)
}

/// `config/demo.toml` with its models taken from `models` (other paths kept).
fn demo_config(dir: &Path, models: &Path) -> PathBuf {
    let config = dir.join("c.toml");
    let demo = std::fs::read_to_string(repo().join("config/demo.toml")).unwrap();
    let demo = demo
        .replace("../models/", &format!("{}/", models.display()))
        .replace("../samples/", &format!("{}/samples/", repo().display()))
        .replace("../results/", &format!("{}/", dir.display()));
    std::fs::write(&config, demo).unwrap();
    config
}

/// The names of a report engine's gate rules that passed without being skipped.
fn judged_and_passed(engine: &Value) -> Vec<&str> {
    engine["gate"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["passed"] == true && r["skipped"] == false)
        .map(|r| r["rule"].as_str().unwrap())
        .collect()
}

const FLOORS: [&str; 3] = ["min_accuracy", "min_defect_recall", "max_false_reject_rate"];

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Recounts a candidate's summary from its per-frame lines.
fn recount(candidate: &Value) {
    let frames = candidate["per_frame"].as_array().unwrap();
    assert_eq!(frames.len(), FRAMES);
    let wrong = frames
        .iter()
        .filter(|f| (f["verdict"] == "fail") != (f["label"] == "defect"))
        .count();
    let defects: Vec<&Value> = frames.iter().filter(|f| f["label"] == "defect").collect();
    let caught = defects.iter().filter(|f| f["verdict"] == "fail").count();
    let labels = &candidate["labels"];
    assert_eq!(labels["wrong_verdicts"], wrong as u64);
    let accuracy = 1.0 - wrong as f64 / FRAMES as f64;
    assert!((labels["accuracy"].as_f64().unwrap() - accuracy).abs() < 1e-12);
    let recall = caught as f64 / defects.len() as f64;
    assert!((labels["defect_recall"].as_f64().unwrap() - recall).abs() < 1e-12);
    if candidate["vs_reference"].is_object() {
        let flips = frames
            .iter()
            .filter(|f| f["verdict"] != f["reference_verdict"])
            .count();
        assert_eq!(candidate["vs_reference"]["verdict_flips"], flips as u64);
        let ious: Vec<f64> = frames
            .iter()
            .map(|f| f["mask_iou_vs_reference"].as_f64().unwrap())
            .collect();
        let mean = ious.iter().sum::<f64>() / ious.len() as f64;
        assert!((candidate["vs_reference"]["mask_iou_mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    }
    let by_reason: u64 = candidate["verdicts_by_reason"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(by_reason, FRAMES as u64);
}

#[test]
fn fp32_and_int8_against_tract_recount_from_the_json_and_pass_the_gate() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clip = clip_prefix(dir.path());
    let (out, json) = evaluate(
        dir.path(),
        &clip,
        &[
            "--candidate",
            "onnxruntime:cpu",
            "--candidate",
            "onnxruntime:cpu:int8",
            "--gate",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let json = json.unwrap();
    assert_eq!(json["frames"], FRAMES as u64);
    assert_eq!(json["gate_passed"], true);
    recount(&json["reference"]);
    // The demo models keep `[evaluate]`'s default floors against the labels,
    // the reference as well as each candidate.
    for engine in std::iter::once(&json["reference"]).chain(json["candidates"].as_array().unwrap())
    {
        let passed = judged_and_passed(engine);
        assert!(
            FLOORS.iter().all(|f| passed.contains(f)),
            "{}: {}",
            engine["spec"],
            engine["gate"]
        );
    }
    for candidate in json["candidates"].as_array().unwrap() {
        assert_eq!(candidate["evaluated"], true, "{candidate}");
        recount(candidate);
        assert!(
            candidate["gate"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["passed"] == true)
        );
    }
    // FP32 ONNX Runtime computes what tract computes; INT8 stays close.
    let fp32 = &json["candidates"][0]["vs_reference"];
    assert_eq!(fp32["verdict_flips"], 0);
    assert!(
        fp32["max_abs_logit_diff"].as_f64().unwrap() < 1e-3,
        "{fp32}"
    );
    let int8 = &json["candidates"][1]["vs_reference"];
    assert!(int8["mask_iou_mean"].as_f64().unwrap() >= 0.98, "{int8}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("onnxruntime:cpu:int8") && stdout.contains("mask IoU vs ref mean"),
        "{stdout}"
    );
    assert!(dir.path().join("report/index.html").is_file());
}

/// The classifier's two output classes swapped: every verdict on a seal
/// inverts. `--gate` must refuse it with exit 1, naming the rule.
#[test]
fn a_classifier_with_swapped_classes_fails_the_gate_naming_the_rule() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clip = clip_prefix(dir.path());
    let swapped = dir.path().join("cls_swapped.onnx");
    common::swap_classes(&swapped);
    let spec = format!("onnxruntime:cpu,cls={}", swapped.display());
    let (out, json) = evaluate(dir.path(), &clip, &["--candidate", &spec, "--gate"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("gate rule recall_not_below_reference broken")
            && all.contains(&format!("{spec}: gate rule min_accuracy broken")),
        "{all}"
    );
    // The reference runs the demo models: within its floors.
    assert!(!all.contains("(ref): gate rule"), "{all}");
    let json = json.unwrap();
    assert_eq!(json["gate_passed"], false);
    let candidate = &json["candidates"][0];
    recount(candidate);
    let flips = candidate["vs_reference"]["verdict_flips"].as_u64().unwrap();
    assert!(flips > 0);
    // Every disagreeing frame has its picture for a person to look at.
    let pictures = std::fs::read_dir(dir.path().join("report/overlays"))
        .unwrap()
        .count();
    let disagreeing = candidate["per_frame"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["verdict"] != f["reference_verdict"]
                || (f["verdict"] == "fail") != (f["label"] == "defect")
        })
        .count();
    assert_eq!(pictures, disagreeing);
}

/// Issue 19: new models are checked before a reload by naming them in the
/// config, so the reference runs them too. Compared only with the reference,
/// a classifier with its classes swapped (accuracy 0.08 on these frames)
/// passed `--gate`; the floors against the labels refuse it, and say that the
/// reference itself, the config's models, is below them.
#[test]
fn swapped_classes_named_in_the_config_fail_the_gate_at_the_floors_of_the_reference_too() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clip = clip_prefix(dir.path());
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::fs::copy(repo().join("models/seg.onnx"), models.join("seg.onnx")).unwrap();
    common::swap_classes(&models.join("cls.onnx"));
    let config = demo_config(dir.path(), &models);
    let (out, json) = evaluate_with(
        &config,
        dir.path(),
        &clip,
        &["--candidate", "onnxruntime:cpu", "--gate"],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(
            "tract (ref): gate rule min_accuracy broken: the reference itself is below this floor"
        ) && all.contains("onnxruntime:cpu: gate rule min_accuracy broken: accuracy"),
        "{all}"
    );
    assert!(
        all.contains("the reference itself is outside a floor against the labels"),
        "{all}"
    );
    let json = json.unwrap();
    assert_eq!(json["gate_passed"], false);
    let candidate = &json["candidates"][0];
    recount(candidate);
    // Against the reference alone it passes: the floors are what refuse it.
    let passed = judged_and_passed(candidate);
    for rule in [
        "recall_not_below_reference",
        "label_errors_not_above_reference",
        "mean_mask_iou",
    ] {
        assert!(passed.contains(&rule), "{}", candidate["gate"]);
    }
    for engine in [&json["reference"], candidate] {
        assert!(
            engine["labels"]["accuracy"].as_f64().unwrap() < 0.5,
            "{}",
            engine["labels"]
        );
        let broken: Vec<&str> = engine["gate"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["passed"] == false)
            .map(|r| r["rule"].as_str().unwrap())
            .collect();
        assert_eq!(broken, FLOORS, "{}", engine["spec"]);
    }
}

#[test]
fn a_candidate_that_cannot_run_is_reported_not_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let clip = clip_prefix(dir.path());
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    // INT8 models missing beside the FP32 ones: named, with what makes them.
    std::fs::copy(repo().join("models/seg.onnx"), models.join("seg.onnx")).unwrap();
    std::fs::copy(repo().join("models/cls.onnx"), models.join("cls.onnx")).unwrap();
    let config = demo_config(dir.path(), &models);
    let out = Command::new(crate::common::sealcheck_bin())
        .args(["evaluate", "--config"])
        .arg(&config)
        .arg("--images")
        .arg(&clip)
        .arg("--report")
        .arg(dir.path().join("report"))
        .args([
            "--candidate",
            "onnxruntime:cpu:int8",
            "--candidate",
            "tensorrt:fp16",
            "--gate",
        ])
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("onnxruntime:cpu:int8: not evaluated")
            && all.contains("seg_int8.onnx does not exist")
            && all.contains("make demo-assets"),
        "{all}"
    );
    assert!(all.contains("tensorrt:fp16: not evaluated"), "{all}");
    assert!(all.contains("gate rule candidate_ran broken"), "{all}");
}

#[test]
fn labels_naming_missing_frames_and_unknown_specs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let clip = clip_prefix(dir.path());
    std::fs::remove_file(clip.join("frame_00003.jpg")).unwrap();
    let (out, _) = evaluate(dir.path(), &clip, &["--candidate", "tract"]);
    let all = text(&out);
    assert!(!out.status.success());
    assert!(
        all.contains("name frames with no image") && all.contains('3'),
        "{all}"
    );

    let (out, _) = evaluate(dir.path(), &clip, &["--candidate", "pytorch:cuda"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("unknown backend `pytorch`"), "{all}");
}

#[test]
fn an_undecodable_frame_fails_with_error_for_every_engine_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let clip = clip_prefix(dir.path());
    std::fs::write(clip.join("frame_00005.jpg"), b"not a jpeg").unwrap();
    let (out, json) = evaluate(dir.path(), &clip, &["--candidate", "tract"]);
    assert!(out.status.success(), "{}", text(&out));
    let json = json.unwrap();
    for engine in [&json["reference"], &json["candidates"][0]] {
        let frame5 = &engine["per_frame"][5];
        assert_eq!(frame5["reason"], "error", "{frame5}");
        assert!(
            frame5["error"]
                .as_str()
                .unwrap()
                .contains("frame_00005.jpg"),
            "{frame5}"
        );
        recount(engine);
    }
}
