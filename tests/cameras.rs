//! Several cameras in one process: each camera's frames get one result
//! each, in its own `seq` order, with the verdict a single-camera run gives
//! them; frames ready at once are judged in one batch with every frame's
//! batch-1 result; one camera lost and back costs the other nothing.
//!
//! ```text
//! camera a (images) ─ring─┐
//! camera b (images) ─ring─┼─ one reader ─ one engine (batches) ─ output ─▶ results.jsonl ("camera", seq per camera)
//! camera c, d ...   ─ring─┘
//! ```

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::rtsp::RtspCamera;
use common::{Sealcheck, by_camera, free_port, repo, result_lines as lines_of};
use sealcheck::config::{self, BackendChoice};
use sealcheck::decision::decide;
use sealcheck::frame::{FrameMeta, FrameSlot, FrameWork};
use sealcheck::infer::{self, BatchBuffers, infer_batch, infer_frame};
use sealcheck::preprocess::cpu_preprocessor;

/// Clip frames `first..first + count`, renumbered from 0, into `dir/name/`:
/// an image-sequence camera of its own.
fn clip_part(dir: &Path, name: &str, first: usize, count: usize) -> String {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..count {
        std::fs::copy(
            repo().join(format!("samples/demo_clip/frame_{:05}.jpg", first + i)),
            folder.join(format!("frame_{i:05}.jpg")),
        )
        .unwrap();
    }
    format!("kind = \"images\"\nlocation = \"{name}/frame_%05d.jpg\"\n")
}

/// A config in `dir` with `cameras` (`[source]` or `[cameras.*]` tables).
fn write_config(
    dir: &Path,
    file: &str,
    cameras: &str,
    models: (&str, &str),
    extra: &str,
) -> PathBuf {
    let text = format!(
        r#"{cameras}
[inference]
backend = "{backend}"
{extra}

[models.segmentation]
path = "{models}/{seg}"

[models.classifier]
path = "{models}/{cls}"

[decision]
no_seal_below = 0.005
min_seal_area = 0.02
max_seal_area = 0.25

[output]
results = "{file}.jsonl"
log_verdicts = false
"#,
        backend = common::backend(),
        models = repo().join("models").display(),
        seg = models.0,
        cls = models.1,
    );
    let path = dir.join(format!("{file}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `config` to its end; its result lines.
fn run(config: &Path) -> (Vec<serde_json::Value>, String) {
    let (code, stdout, stderr) = Sealcheck::start(config, &[]).finish(Duration::from_secs(300));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let results = config.with_extension("jsonl");
    (lines_of(&results), stdout)
}

fn assert_contiguous(camera: &str, lines: &[serde_json::Value], count: usize) {
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (0..count as u64).collect::<Vec<_>>(),
        "camera {camera}"
    );
}

/// The same verdict, reason and defect probability (to `tolerance`) seq by seq.
fn assert_same_verdicts(
    camera: &str,
    got: &[serde_json::Value],
    want: &[serde_json::Value],
    tolerance: f64,
) {
    assert_eq!(got.len(), want.len(), "camera {camera}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(
            (&g["seq"], &g["verdict"], &g["reason"]),
            (&w["seq"], &w["verdict"], &w["reason"]),
            "camera {camera}: {g} against the single-camera run's {w}"
        );
        let (gp, wp) = (g["defect_prob"].as_f64(), w["defect_prob"].as_f64());
        assert!(
            match (gp, wp) {
                (Some(a), Some(b)) => (a - b).abs() <= tolerance,
                (a, b) => a == b,
            },
            "camera {camera} seq {}: defect_prob {gp:?} against {wp:?}",
            g["seq"]
        );
    }
}

#[test]
fn two_cameras_each_get_their_frames_judged_as_a_single_camera_would() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        clip_part(dir.path(), "a", 0, 14),
        clip_part(dir.path(), "b", 100, 9),
    );
    let models = ("seg.onnx", "cls.onnx");
    let both = write_config(
        dir.path(),
        "both",
        &format!("[cameras.top]\n{a}\n[cameras.side]\n{b}"),
        models,
        "",
    );
    let (lines, stdout) = run(&both);
    assert_eq!(lines.len(), 14 + 9, "one line per frame:\n{stdout}");
    let cameras = by_camera(&lines);
    assert_eq!(cameras.keys().collect::<Vec<_>>(), ["side", "top"]);
    assert_contiguous("top", &cameras["top"], 14);
    assert_contiguous("side", &cameras["side"], 9);
    for (name, source) in [("top", &a), ("side", &b)] {
        let alone = write_config(
            dir.path(),
            &format!("alone-{name}"),
            &format!("[source]\n{source}"),
            models,
            "",
        );
        let (single, _) = run(&alone);
        assert!(
            single.iter().all(|l| l.get("camera").is_none()),
            "[source] lines stay as they were"
        );
        assert_same_verdicts(name, &cameras[name], &single, 0.0);
    }
}

#[test]
fn four_cameras_judged_in_batches_match_batch_one_and_keep_their_own_thresholds() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let parts = [("a", 40), ("b", 80), ("c", 120), ("d", 0)];
    let frames = 10;
    let tables: String = parts
        .iter()
        .map(|(name, first)| format!("[cameras.{name}]\n{}", clip_part(dir.path(), name, *first, frames)))
        .collect::<Vec<_>>()
        .join("\n")
        // Camera d never fails a part for its defect probability.
        + "[cameras.d.decision]\ndefect_threshold = 1.0\n";
    let batched = write_config(
        dir.path(),
        "batched",
        &tables,
        ("seg_batch.onnx", "cls_batch.onnx"),
        "max_batch = 4",
    );
    let (lines, stdout) = run(&batched);
    assert_eq!(lines.len(), 4 * frames, "{stdout}");
    let cameras = by_camera(&lines);
    if common::backend() == "onnxruntime" {
        // The engine ran batches (the summary counts them).
        assert!(stdout.contains("batches:"), "{stdout}");
        assert!(
            !stdout.contains("mean 1.00 frames"),
            "no frames were batched:\n{stdout}"
        );
    }
    for (name, first) in parts {
        assert_contiguous(name, &cameras[name], frames);
        let single = write_config(
            dir.path(),
            &format!("single-{name}"),
            &format!(
                "[source]\n{}",
                clip_part(dir.path(), &format!("s{name}"), first, frames)
            ),
            ("seg.onnx", "cls.onnx"),
            "",
        );
        let (alone, _) = run(&single);
        if name == "d" {
            assert!(
                alone.iter().any(|l| l["reason"] == "defect"),
                "frames {first}.. have a defect: the override below is tested"
            );
            assert!(
                cameras["d"].iter().all(|l| l["reason"] != "defect"),
                "camera d's defect_threshold = 1.0 applies to it alone"
            );
            continue;
        }
        assert_same_verdicts(name, &cameras[name], &alone, 1e-4);
    }
}

#[test]
fn a_batch_of_n_gives_every_frame_its_batch_one_result() {
    let _serial = common::serial();
    let mut backends = vec![BackendChoice::Tract];
    if common::ort_library().is_some() {
        backends.push(BackendChoice::OnnxRuntime);
    }
    let demo = config::load(&repo().join("config/demo.toml")).unwrap();
    for backend in backends {
        let mut single = demo.clone();
        single.inference.backend = backend;
        let mut batch = single.clone();
        batch.segmentation.path = repo().join("models/seg_batch.onnx");
        batch.classifier.path = repo().join("models/cls_batch.onnx");
        let mut one = infer::open_backend(&single).unwrap().backend;
        let mut many = infer::open_backend(&batch).unwrap().backend;
        let geometry = infer::geometry(one.as_ref()).unwrap();
        let mut preprocessor = cpu_preprocessor(&demo, geometry);
        let mask_class = demo.segmentation.mask_class;
        let frames: Vec<FrameSlot> = (0..8)
            .map(|i| {
                let mut slot = FrameSlot::with_capacity(0);
                let path = repo().join(format!("samples/demo_clip/frame_{:05}.jpg", i * 37));
                sealcheck::capture::decode_image_file(&path, &mut slot).unwrap();
                slot
            })
            .collect();
        let prepared =
            |preprocessor: &mut sealcheck::preprocess::Preprocessor| -> Vec<Box<FrameWork>> {
                frames
                    .iter()
                    .enumerate()
                    .map(|(i, slot)| {
                        let mut work = Box::new(FrameWork::new(&geometry));
                        work.reset(FrameMeta::now(i as u64));
                        preprocessor
                            .frame_to_tensors(
                                slot.image(),
                                &mut work.seg_input,
                                &mut work.cls_input,
                            )
                            .unwrap();
                        work
                    })
                    .collect()
            };
        let mut reference = prepared(&mut preprocessor);
        for work in &mut reference {
            infer_frame(one.as_mut(), &preprocessor, mask_class, work);
            assert!(work.error.is_none(), "{:?}", work.error);
        }
        let batches = many.max_batch() > 1;
        assert_eq!(
            batches,
            backend == BackendChoice::OnnxRuntime,
            "ONNX Runtime runs a dynamic-batch model in batches; tract one frame after another"
        );
        let mut buffers = BatchBuffers::default();
        for n in [2, 3, 4, 8] {
            let mut works = prepared(&mut preprocessor);
            infer_batch(
                many.as_mut(),
                &preprocessor,
                mask_class,
                &mut works[..n],
                &mut buffers,
            );
            for (got, want) in works[..n].iter().zip(&reference) {
                assert!(
                    got.error.is_none(),
                    "{backend:?} batch {n}: {:?}",
                    got.error
                );
                let (g, w) = (
                    decide(got, demo.classifier.defect_class, &demo.decision),
                    decide(want, demo.classifier.defect_class, &demo.decision),
                );
                assert_eq!(
                    (g.verdict, g.reason),
                    (w.verdict, w.reason),
                    "{backend:?} batch {n} frame {}",
                    got.meta.seq
                );
                let worst = got
                    .cls_logits
                    .iter()
                    .zip(&want.cls_logits)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                assert!(
                    worst <= 1e-4,
                    "{backend:?} batch {n} frame {}: logits differ by {worst}",
                    got.meta.seq
                );
                let differing = got
                    .mask
                    .iter()
                    .zip(&want.mask)
                    .filter(|(a, b)| a != b)
                    .count();
                assert!(
                    differing as f64 <= 1e-4 * got.mask.len() as f64,
                    "{backend:?} batch {n}: {differing} mask pixels differ"
                );
            }
        }
    }
}

#[test]
fn one_camera_lost_for_seconds_costs_the_other_camera_nothing() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let camera = RtspCamera::start_at(port, 5);
    let rtsp = format!(
        "kind = \"rtsp\"\nurl = \"rtsp://127.0.0.1:{port}/line\"\nlatency_ms = 0\n\
         retry_min_ms = 200\nretry_max_ms = 1000\nframe_timeout_ms = 1000\n"
    );
    // 5 + 5 frames/s: well inside what this 2-core machine judges, so a
    // drop would be the outage's doing.
    let steady = format!("{}live = true\n", common::test_camera("ball", 5));
    let config = write_config(
        dir.path(),
        "live",
        &format!("[cameras.door]\n{rtsp}\n[cameras.steady]\n{steady}"),
        ("seg.onnx", "cls.onnx"),
        "",
    );
    let results = dir.path().join("live.jsonl");
    let mut service = Sealcheck::start(&config, &[]);
    let count = |camera: &str, lines: &[serde_json::Value]| {
        lines.iter().filter(|l| l["camera"] == camera).count()
    };
    let wait =
        |service: &mut Sealcheck, what: &str, done: &dyn Fn(&[serde_json::Value]) -> bool| {
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let lines = lines_of(&results);
                if done(&lines) {
                    return lines;
                }
                assert!(
                    service.is_running(),
                    "sealcheck exited waiting for {what}:\n{}",
                    service.stderr()
                );
                assert!(
                    Instant::now() < deadline,
                    "no {what}:\n{}",
                    service.stderr()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        };
    wait(&mut service, "results of both cameras", &|l| {
        count("door", l) >= 10 && count("steady", l) >= 10
    });
    camera.kill();
    assert!(
        service.wait_for_log("source lost", Duration::from_secs(10)),
        "the loss was not noticed:\n{}",
        service.stderr()
    );
    let before = count("steady", &lines_of(&results));
    let lost_for = Duration::from_secs(4);
    std::thread::sleep(lost_for);
    let during = count("steady", &lines_of(&results)) - before;
    let _camera = RtspCamera::start_at(port, 5);
    let lost_before_back = count("door", &lines_of(&results));
    wait(
        &mut service,
        "the lost camera's results after it came back",
        &|l| count("door", l) >= lost_before_back + 10,
    );
    assert_eq!(
        service.terminate(Duration::from_secs(60)).code(),
        Some(0),
        "{}",
        service.stderr()
    );
    // 5 frames/s for 4 s: the steady camera kept its rate through the outage.
    assert!(
        during >= 15,
        "the steady camera got {during} results in {lost_for:?}"
    );
    let lines = lines_of(&results);
    let cameras = by_camera(&lines);
    for (name, lines) in &cameras {
        assert_contiguous(name, lines, lines.len());
    }
    assert!(
        cameras["steady"]
            .iter()
            .all(|l| l["reason"] != "not_inspected" && l["reason"] != "error"),
        "nothing dropped on the steady camera: {:?}",
        cameras["steady"]
            .iter()
            .filter(|l| l["reason"] == "not_inspected" || l["reason"] == "error")
            .map(|l| (l["seq"].as_u64(), l["ts"].as_str().map(str::to_string)))
            .collect::<Vec<_>>()
    );
    assert!(
        service
            .stderr()
            .contains("camera door: RTSP camera rtsp://"),
        "the journal names the camera:\n{}",
        service.stderr()
    );
}
