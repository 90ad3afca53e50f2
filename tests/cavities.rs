//! Cavity layouts (`[source.layout]`) end to end: a machine cycle of
//! cavities in each frame, each cropped and judged on its own, the cycle in
//! one batch and one result line; and layouts that cannot fit, refused or
//! failed safe, naming the cavity.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::repo;

/// The layout of the cycle frames `cycle_frames` draws: 2 rows of 3 cells
/// of 640x360 in a 1920x720 frame, cavity 5 empty on the tool.
const LAYOUT: &str = "rows = 2\ncols = 3\nfirst = [320, 180]\npitch = [640, 360]\nsize = [600, 340]\nmargin = 10\ndisabled = [5]\n";

/// `frames` cycle frames (PNG, 1920x720) in `dir`/cycles, each cell a demo
/// clip frame scaled to 640x360, and each judged cavity's crop (its
/// region, 10 px of margin, clipped to the frame) in `dir`/crops, named
/// `f{frame}_c{cavity}.png`. Returns the crops in frame, then cavity order.
fn cycle_frames(dir: &Path, frames: usize) -> Vec<(usize, u16, PathBuf)> {
    let script = r#"
import sys
from PIL import Image
clip, out, frames = sys.argv[1], sys.argv[2], int(sys.argv[3])
import os
os.makedirs(out + "/cycles"); os.makedirs(out + "/crops")
for f in range(frames):
    canvas = Image.new("RGB", (1920, 720), (40, 40, 40))
    for c in range(6):
        cell = Image.open("%s/frame_%05d.jpg" % (clip, (f * 6 + c) % 300)).convert("RGB")
        canvas.paste(cell.resize((640, 360), Image.LANCZOS), ((c % 3) * 640, (c // 3) * 360))
    canvas.save("%s/cycles/frame_%05d.png" % (out, f))
    for c in range(6):
        if c + 1 == 5:
            continue
        x, y = 320 + (c % 3) * 640 - 300, 180 + (c // 3) * 360 - 170
        box = (max(x - 10, 0), max(y - 10, 0), min(x + 610, 1920), min(y + 350, 720))
        canvas.crop(box).save("%s/crops/f%d_c%d.png" % (out, f, c + 1))
"#;
    let made = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(repo().join("samples/demo_clip"))
        .arg(dir)
        .arg(frames.to_string())
        .output()
        .expect("python3 with Pillow (the repo's .venv) draws the cycle frames");
    assert!(
        made.status.success(),
        "drawing the cycle frames failed: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    (0..frames)
        .flat_map(|f| {
            [1u16, 2, 3, 4, 6]
                .into_iter()
                .map(move |c| (f, c, dir.join(format!("crops/f{f}_c{c}.png"))))
        })
        .collect()
}

/// A config in `dir`: `source` is the [source] body, `layout` the
/// [source.layout] body (none when empty); the batch demo models.
fn write_config(dir: &Path, name: &str, source: &str, layout: &str) -> PathBuf {
    let layout = if layout.is_empty() {
        String::new()
    } else {
        format!("[source.layout]\n{layout}")
    };
    let body = format!(
        r#"
[source]
{source}

{layout}

[inference]
backend = "{backend}"
max_batch = 6

[models.segmentation]
path = "{models}/seg_batch.onnx"

[models.classifier]
path = "{models}/cls_batch.onnx"

[decision]
no_seal_below = 0.005
min_seal_area = 0.02
max_seal_area = 0.25

[output]
results = "{name}.jsonl"
"#,
        backend = common::backend(),
        models = repo().join("models").display()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, body).unwrap();
    path
}

fn sealcheck(args: &[&str], config: &Path) -> std::process::Output {
    Command::new(common::sealcheck_bin())
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

fn assert_close(what: &str, a: &serde_json::Value, b: &serde_json::Value) {
    let (a, b) = (a.as_f64(), b.as_f64());
    match (a, b) {
        (Some(a), Some(b)) => assert!((a - b).abs() < 1e-3, "{what}: {a} in the cycle, {b} alone"),
        _ => assert_eq!(a, b, "{what}"),
    }
}

#[test]
fn a_cycles_cavities_judged_in_one_batch_match_the_same_crops_judged_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let frames = 6;
    let crops = cycle_frames(dir.path(), frames);
    let source = format!(
        "kind = \"images\"\nlocation = \"{}/cycles/frame_%05d.png\"\nframerate = 30",
        dir.path().display()
    );
    let config = write_config(dir.path(), "cycles", &source, LAYOUT);

    let checked = sealcheck(&["check-config"], &config);
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(
        said.contains("[source.layout]: 2x3 6 cavities, 5 judged per cycle (1 disabled), margin 10 px, on 1920x720 frames"),
        "check-config says what each frame is judged as: {said}"
    );

    let run = sealcheck(&["run"], &config);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let cycles = common::result_lines(&dir.path().join("cycles.jsonl"));
    assert_eq!(cycles.len(), frames, "one result line per cycle");

    // The same crops, each a frame of its own, judged one by one.
    let single = write_config(dir.path(), "single", &source, "");
    let mut inspect = Command::new(common::sealcheck_bin());
    inspect.arg("inspect").arg("--config").arg(&single);
    inspect.args(crops.iter().map(|(_, _, path)| path));
    let inspected = inspect.output().unwrap();
    assert!(
        inspected.status.success(),
        "{}",
        String::from_utf8_lossy(&inspected.stderr)
    );
    let alone: Vec<serde_json::Value> = String::from_utf8_lossy(&inspected.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(alone.len(), crops.len());

    let mut failed_cavities = 0;
    for (f, cycle) in cycles.iter().enumerate() {
        assert_eq!(cycle["seq"], f);
        let cavities = cycle["cavities"].as_array().expect("the cycle's cavities");
        let numbers: Vec<u64> = cavities
            .iter()
            .map(|c| c["cavity"].as_u64().unwrap())
            .collect();
        assert_eq!(
            numbers,
            [1, 2, 3, 4, 6],
            "judged cavities in number order, 5 disabled"
        );
        for cavity in cavities {
            let n = cavity["cavity"].as_u64().unwrap() as u16;
            let i = crops
                .iter()
                .position(|(cf, cc, _)| (*cf, *cc) == (f, n))
                .unwrap();
            let one = &alone[i];
            let what = format!("frame {f} cavity {n}");
            assert_eq!(cavity["verdict"], one["verdict"], "{what}");
            assert_eq!(cavity["reason"], one["reason"], "{what}");
            assert_close(
                &format!("{what} defect_prob"),
                &cavity["defect_prob"],
                &one["defect_prob"],
            );
            assert_close(
                &format!("{what} seal_area"),
                &cavity["seal_area"],
                &one["seal_area"],
            );
        }
        let rejects: Vec<u64> = cavities
            .iter()
            .filter(|c| c["verdict"] == "fail")
            .map(|c| c["cavity"].as_u64().unwrap())
            .collect();
        failed_cavities += rejects.len();
        assert_eq!(cycle["reject"], serde_json::json!(rejects));
        let mask: u64 = rejects.iter().map(|n| 1u64 << (n - 1)).sum();
        assert_eq!(cycle["reject_mask"], mask);
        assert_eq!(
            cycle["verdict"],
            if rejects.is_empty() { "pass" } else { "fail" }
        );
        if let Some(first) = rejects.first() {
            let decisive = cavities.iter().find(|c| c["cavity"] == *first).unwrap();
            assert_eq!(
                cycle["reason"], decisive["reason"],
                "the first failed cavity decides"
            );
        }
    }
    // The clip has defective and good seals: both kinds of cavity were seen.
    assert!(
        failed_cavities > 0 && failed_cavities < frames * 5,
        "{failed_cavities} failed cavities of {}",
        frames * 5
    );
}

#[test]
fn a_layout_that_does_not_fit_is_refused_by_check_config_and_fails_every_cavity_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let _ = cycle_frames(dir.path(), 1);
    let images = format!(
        "kind = \"images\"\nlocation = \"{}/cycles/frame_%05d.png\"",
        dir.path().display()
    );
    // The first image is 1920x720: a third column 700 px on leaves it.
    let wide = LAYOUT.replace("pitch = [640, 360]", "pitch = [700, 360]");
    let config = write_config(dir.path(), "wide", &images, &wide);
    let checked = sealcheck(&["check-config"], &config);
    let said = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(78), "{said}");
    assert!(
        said.contains("cavity 3 at [1420, 10, 600, 340] reaches past the 1920x720 frame"),
        "{said}"
    );

    // A test pattern of a size the config fixes: refused by the config itself.
    let test = "kind = \"test\"\nwidth = 1280\nheight = 720\nnum_buffers = 3";
    let config = write_config(dir.path(), "small", test, LAYOUT);
    let checked = sealcheck(&["check-config"], &config);
    let said = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(78), "{said}");
    assert!(
        said.contains("cavity 3 at [1300, 10, 600, 340] reaches past the 1280x720 frame"),
        "{said}"
    );

    // Overlapping and duplicate cavities, each pair named.
    let list = "cavities = [[0, 0, 100, 100], [50, 50, 100, 100], [0, 0, 100, 100]]";
    let config = write_config(dir.path(), "overlap", test, list);
    let checked = sealcheck(&["check-config"], &config);
    let said = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(78), "{said}");
    assert!(
        said.contains("cavities 1 at [0, 0, 100, 100] and 2 at [50, 50, 100, 100] overlap"),
        "{said}"
    );
    assert!(
        said.contains("cavities 1 and 3 are the same region"),
        "{said}"
    );

    // A camera whose size only its frames tell: 1280x720 frames under a
    // layout for 1920x720 fail every judged cavity, never pass, never crash.
    let pipeline = "kind = \"pipeline\"\npipeline = \"videotestsrc num-buffers=3 ! video/x-raw,width=1280,height=720,framerate=30/1 ! videoconvert ! video/x-raw,format=RGB ! appsink name=sink\"";
    let config = write_config(dir.path(), "misfit", pipeline, LAYOUT);
    let run = sealcheck(&["run"], &config);
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{log}");
    let lines = common::result_lines(&dir.path().join("misfit.jsonl"));
    assert_eq!(lines.len(), 3, "{log}");
    for line in &lines {
        assert_eq!(
            (&line["verdict"], &line["reason"]),
            (&"fail".into(), &"error".into())
        );
        let cavities = line["cavities"].as_array().unwrap();
        assert_eq!(cavities.len(), 5);
        assert!(
            cavities
                .iter()
                .all(|c| c["verdict"] == "fail" && c["reason"] == "error")
        );
        assert_eq!(line["reject"], serde_json::json!([1, 2, 3, 4, 6]));
        assert_eq!(line["reject_mask"], 0b10_1111);
    }
    assert!(
        log.contains("reaches past the 1280x720 frame"),
        "the log names why: {log}"
    );
}

#[test]
fn evaluate_scores_each_cavity_when_the_labels_name_cavities() {
    let dir = tempfile::tempdir().unwrap();
    let frames = 6;
    let images = common::sample_prefix("demo_cavities", dir.path(), "images", frames, true);
    let labels: Vec<String> = std::fs::read_to_string(images.join("labels.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let (mut defects, mut goods) = ([0u64; 7], [0u64; 7]);
    for line in &labels {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        for c in row["cavities"].as_array().unwrap() {
            let n = c["cavity"].as_u64().unwrap() as usize;
            if c["label"] == "defect" {
                defects[n] += 1;
            } else {
                goods[n] += 1;
            }
        }
    }

    let report = dir.path().join("report");
    let evaluate = |config: &Path| {
        Command::new(common::sealcheck_bin())
            .arg("evaluate")
            .arg("--config")
            .arg(config)
            .arg("--images")
            .arg(&images)
            .args(["--candidate", "onnxruntime:cpu", "--report"])
            .arg(&report)
            .output()
            .unwrap()
    };
    if common::backend() == "tract" {
        common::skipped(format_args!(
            "ONNX Runtime is not available for the candidate"
        ));
        return;
    }
    let out = evaluate(&repo().join("config/demo-cavities.toml"));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        table.starts_with(&format!(
            "{frames} frames ({} cavities, each judged on its own)",
            frames * 6
        )),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("evaluation.json")).unwrap())
            .unwrap();
    for engine in [&json["reference"], &json["candidates"][0]] {
        let per_cavity = engine["per_cavity"].as_array().unwrap();
        assert_eq!(per_cavity.len(), 6, "{engine}");
        for (i, c) in per_cavity.iter().enumerate() {
            let n = i + 1;
            assert_eq!(c["cavity"], n);
            assert_eq!(
                (c["defects"].as_u64(), c["goods"].as_u64()),
                (Some(defects[n]), Some(goods[n]))
            );
            // The demo models catch every defective cavity of the clip and pass every good one.
            assert_eq!(c["wrong_verdicts"], 0, "cavity {n}: {c}");
            let row = format!("cavity {n} caught, false rej");
            let cells = format!("{}/{}, 0/{}", defects[n], defects[n], goods[n]);
            assert!(
                table
                    .lines()
                    .any(|l| l.starts_with(&row) && l.matches(&cells).count() == 2),
                "{row} {cells}: {table}"
            );
        }
        assert_eq!(engine["per_frame"].as_array().unwrap().len(), frames * 6);
    }

    // The same labels with a config without a layout: said, not guessed.
    let plain = write_config(dir.path(), "plain", "kind = \"test\"", "");
    let out = evaluate(&plain);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("the labels name cavities, but the config has no [source.layout]"),
        "{said}"
    );
}

/// The first `frames` cycles of the cavity demo clip, as an image sequence in `dir`/clip.
fn cavity_clip(dir: &Path, frames: usize) -> String {
    let clip = common::sample_prefix("demo_cavities", dir, "clip", frames, false);
    format!(
        "kind = \"images\"\nlocation = \"{}/frame_%05d.jpg\"",
        clip.display()
    )
}

#[test]
fn each_cycles_mqtt_message_carries_its_cavities_and_a_late_cycle_fails_every_cavity() {
    use common::mqtt::{Broker, Subscriber, TOPIC, wait_until};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), "allow_anonymous true");
    let frames = 4;
    let source = cavity_clip(dir.path(), frames);
    let layout = LAYOUT.replace("disabled = [5]\n", "disabled = [3]\n");
    let run = |name: &str, deadline_ms: u64, env: &[(&str, &str)]| {
        let subscriber = Subscriber::start(broker.port, None);
        let config = write_config(dir.path(), name, &source, &layout);
        let mut text = std::fs::read_to_string(&config).unwrap();
        text = text.replace(
            "[output]",
            &format!("deadline_ms = {deadline_ms}\n\n[mqtt]\nurl = \"{}\"\ntopic = \"{TOPIC}\"\nqos = 1\n\n[output]", broker.url()),
        );
        std::fs::write(&config, text).unwrap();
        let (code, stdout, stderr) =
            common::Sealcheck::start(&config, env).finish(Duration::from_secs(240));
        assert_eq!(code, 0, "{stdout}\n{stderr}");
        assert!(wait_until(Duration::from_secs(5), || subscriber
            .verdicts()
            .len()
            >= frames));
        let verdicts = subscriber.verdicts();
        assert_eq!(verdicts.len(), frames, "one message per cycle");
        super::mqtt::assert_schema_valid(&verdicts);
        let results = common::result_lines(&dir.path().join(format!("{name}.jsonl")));
        assert_eq!(results.len(), frames);
        (
            verdicts.into_iter().map(|(_, m)| m).collect::<Vec<_>>(),
            results,
        )
    };

    let (messages, results) = run("on_time", 0, &[]);
    for (m, r) in messages.iter().zip(&results) {
        assert_eq!(m["seq"], r["seq"]);
        for key in ["verdict", "reason", "cavities", "reject", "reject_mask"] {
            assert_eq!(m[key], r[key], "{key} of seq {}", m["seq"]);
        }
        let numbers: Vec<u64> = m["cavities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["cavity"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, [1, 2, 4, 5, 6], "cavity 3 disabled");
    }

    // Inference 250 ms slower than a 100 ms deadline: every cycle is late,
    // and the line gets every judged cavity failed, whatever the models said.
    let (messages, results) = run("late", 100, &[("SEALCHECK_FAULT_DELAY_INFER_MS", "250")]);
    for (m, r) in messages.iter().zip(&results) {
        assert_eq!(
            (&m["verdict"], &m["reason"]),
            (&"fail".into(), &"late".into()),
            "{m}"
        );
        let cavities = m["cavities"].as_array().unwrap();
        assert_eq!(cavities.len(), 5, "{m}");
        assert!(
            cavities
                .iter()
                .all(|c| c["verdict"] == "fail" && c["reason"] == "late"),
            "{m}"
        );
        assert_eq!(m["reject"], serde_json::json!([1, 2, 4, 5, 6]));
        assert_eq!(m["reject_mask"], 0b11_1011);
        // The results file keeps what the models said, marked late.
        assert_eq!(r["late"], true);
        assert_ne!(r["reason"], "late");
    }
}

#[test]
fn inspect_judges_each_cavity_of_an_image_as_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let clip = common::sample_prefix("demo_cavities", dir.path(), "clip", 2, false);
    let config = write_config(
        dir.path(),
        "inspect",
        &format!(
            "kind = \"images\"\nlocation = \"{}/frame_%05d.jpg\"",
            clip.display()
        ),
        LAYOUT,
    );
    let run = sealcheck(&["run"], &config);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let ran = common::result_lines(&dir.path().join("inspect.jsonl"));
    let mut inspect = Command::new(common::sealcheck_bin());
    inspect.arg("inspect").arg("--config").arg(&config);
    inspect
        .arg(clip.join("frame_00000.jpg"))
        .arg(clip.join("frame_00001.jpg"));
    let out = inspect.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one line per image, the cycle's");
    for (inspected, ran) in lines.iter().zip(&ran) {
        assert!(inspected["image"].as_str().unwrap().ends_with(".jpg"));
        for key in ["verdict", "reason", "reject", "reject_mask"] {
            assert_eq!(inspected[key], ran[key], "{key}: {inspected} / {ran}");
        }
        let (a, b) = (
            inspected["cavities"].as_array().unwrap(),
            ran["cavities"].as_array().unwrap(),
        );
        assert_eq!(a.len(), 5);
        for (a, b) in a.iter().zip(b) {
            assert_eq!(
                (&a["cavity"], &a["verdict"], &a["reason"]),
                (&b["cavity"], &b["verdict"], &b["reason"])
            );
            assert_close("defect_prob", &a["defect_prob"], &b["defect_prob"]);
        }
    }
}
