//! New models on SIGHUP during a live run: a corrupt file, a model that breaks
//! the IO contract and one that fails the acceptance gate are refused with the
//! running models still judging; then good new models (the INT8 demo models)
//! are swapped in between two frames: `seq` stays contiguous and the result
//! lines' model ids change exactly once.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sealcheck::model_id::model_id;

mod common;
use common::{labelled_clip_prefix, repo};

fn ort_library() -> Option<String> {
    let lib = std::env::var("ORT_DYLIB_PATH")
        .ok()
        .filter(|p| Path::new(p).is_file());
    if lib.is_none() {
        assert!(
            std::env::var_os("SEALCHECK_REQUIRE_ORT").is_none(),
            "SEALCHECK_REQUIRE_ORT is set but ORT_DYLIB_PATH names no library"
        );
        println!("SKIPPED: ONNX Runtime not available (set ORT_DYLIB_PATH; `make onnxruntime`)");
    }
    lib
}

fn write_config(dir: &Path, seg: &Path, cls: &Path, acceptance: &Path) {
    let body = format!(
        r#"
[source]
kind = "test"
pattern = "ball"
width = 640
height = 360
framerate = 15

[inference]
backend = "onnxruntime"
threads = 1

[models]
acceptance_images = "{acceptance}"

[models.segmentation]
path = "{seg}"

[models.classifier]
path = "{cls}"

[output]
results = "results.jsonl"
flush_each_line = true
"#,
        seg = seg.display(),
        cls = cls.display(),
        acceptance = acceptance.display()
    );
    std::fs::write(dir.join("sealcheck.toml"), body).unwrap();
}

fn results(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
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

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) with the pid of a child we started and have not reaped.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0, "kill({sig}) failed");
}

/// Stops the service if a check fails half-way.
struct Service {
    child: Child,
    stderr: PathBuf,
}

impl Service {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn bad_models_are_refused_and_good_ones_swap_in_between_two_frames() {
    let Some(_) = ort_library() else { return };
    let dir = tempfile::tempdir().unwrap();
    let models = repo().join("models");
    let (seg, cls) = (models.join("seg.onnx"), models.join("cls.onnx"));
    let (seg8, cls8) = (models.join("seg_int8.onnx"), models.join("cls_int8.onnx"));
    let acceptance = labelled_clip_prefix(dir.path(), "acceptance", 8);
    let corrupt = dir.path().join("corrupt_cls.onnx");
    let bytes = std::fs::read(&cls).unwrap();
    std::fs::write(&corrupt, &bytes[..bytes.len() / 3]).unwrap();
    let swapped = dir.path().join("cls_swapped.onnx");
    let python = Command::new("python3")
        .arg(repo().join("scripts/swap_classes.py"))
        .args([&cls, &swapped])
        .output()
        .unwrap();
    assert!(
        python.status.success(),
        "{}",
        String::from_utf8_lossy(&python.stderr)
    );

    write_config(dir.path(), &seg, &cls, &acceptance);
    let stderr = dir.path().join("stderr.log");
    let mut service = Service {
        child: Command::new(env!("CARGO_BIN_EXE_sealcheck"))
            .args(["run", "--config"])
            .arg(dir.path().join("sealcheck.toml"))
            .stdout(Stdio::null())
            .stderr(File::create(&stderr).unwrap())
            .spawn()
            .unwrap(),
        stderr,
    };
    assert!(
        wait_until(Duration::from_secs(60), || results(dir.path()).len() >= 5),
        "no results:\n{}",
        service.log()
    );

    // Each bad candidate: refused at its step, naming it; the running models stay.
    for (candidate_cls, step, says) in [
        (&corrupt, "open", "corrupt_cls.onnx"),
        (&seg, "open", "seg.onnx"),
        (&swapped, "acceptance", "recall_not_below_reference"),
    ] {
        let refusals = service.log().matches("model swap refused").count();
        write_config(dir.path(), &seg, candidate_cls, &acceptance);
        signal(&service.child, libc::SIGHUP);
        assert!(
            wait_until(Duration::from_secs(90), || service
                .log()
                .matches("model swap refused")
                .count()
                > refusals),
            "{} not refused:\n{}",
            candidate_cls.display(),
            service.log()
        );
        let log = service.log();
        let refusal = log
            .lines()
            .filter(|l| l.contains("model swap refused"))
            .last()
            .unwrap();
        assert!(
            refusal.contains(&format!("step `{step}`")) && refusal.contains(says),
            "{refusal}"
        );
    }
    let before_swap = results(dir.path()).len();

    // Good new models: the INT8 pair, which passes the acceptance gate.
    write_config(dir.path(), &seg8, &cls8, &acceptance);
    signal(&service.child, libc::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(90), || service
            .log()
            .contains("new models accepted")),
        "INT8 models not accepted:\n{}",
        service.log()
    );
    let new_seg = model_id(&seg8).unwrap();
    assert!(
        wait_until(Duration::from_secs(60), || results(dir.path())
            .iter()
            .filter(|r| r["models"]["segmentation"] == new_seg.as_str())
            .count()
            >= 5),
        "no results from the new models:\n{}",
        service.log()
    );
    signal(&service.child, libc::SIGTERM);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = service.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{}", service.log());

    let lines = results(dir.path());
    let seqs: Vec<u64> = lines.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "seq has a gap or a repeat"
    );
    let ids: Vec<(String, String)> = lines
        .iter()
        .map(|r| {
            (
                r["models"]["segmentation"].as_str().unwrap().to_string(),
                r["models"]["classifier"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let old = (model_id(&seg).unwrap(), model_id(&cls).unwrap());
    let new = (new_seg, model_id(&cls8).unwrap());
    let switch = ids
        .iter()
        .position(|id| *id != old)
        .expect("the models never changed");
    assert!(
        switch >= before_swap,
        "new ids before the swap was asked for"
    );
    assert!(ids[..switch].iter().all(|id| *id == old));
    assert!(
        ids[switch..].iter().all(|id| *id == new),
        "ids changed more than once"
    );
}
