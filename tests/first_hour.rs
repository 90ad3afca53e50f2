//! Issue 40, a newcomer's first hour: each trap a new user met, as a config
//! (or a command line) in and an exit code and a message out.
//!
//! - 1: a plc trigger that can never fire;
//! - 2: `check-config` opens the models;
//! - 3: `bench --trigger plc` on a source that is not live (the PLC demo
//!   itself: `plc::the_plc_demo_config_judges_every_part_a_plc_triggers`);
//! - 5: unknown sections get the full list and a "did you mean", paths the
//!   path looked for (plc mode's idle health text: the PLC demo test);
//! - 6: one command-line style;
//! - 7: the production template.
//!
//! Point 4 is in `recovery.rs` (the summary) and `capture::net_raw` (the
//! hint); point 8 in unit tests beside its code (`pipeline::summary`,
//! `plc::station`, `status::trigger_api`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

fn repo() -> PathBuf {
    common::repo()
}

/// A valid config in `dir` on the demo models, with `extra` appended.
fn config(dir: &Path, extra: &str) -> PathBuf {
    let models = repo().join("models");
    let text = format!(
        "[source]\nkind = \"test\"\nnum_buffers = 10\n\n[inference]\nbackend = \"{}\"\n\n\
         [models.segmentation]\npath = \"{}\"\n\n[models.classifier]\npath = \"{}\"\n\n\
         [output]\nresults = \"results.jsonl\"\n{extra}",
        common::backend(),
        models.join("seg.onnx").display(),
        models.join("cls.onnx").display(),
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn sealcheck(args: &[&str]) -> Output {
    Command::new(common::sealcheck_bin())
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// Exit code, stdout and stderr of `sealcheck ARGS... PATH`.
fn on(args: &[&str], path: &Path) -> (Option<i32>, String, String) {
    let mut all: Vec<&str> = args.to_vec();
    let path = path.to_str().unwrap();
    all.push(path);
    let out = sealcheck(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// 1. A config that can never judge a part.

#[test]
fn a_plc_trigger_with_no_way_to_fire_exits_78_naming_every_way_to_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "\n[trigger]\nmode = \"plc\"\n");
    for args in [&["check-config"][..], &["run", "--config"][..]] {
        let (code, stdout, stderr) = on(args, &path);
        assert_eq!(code, Some(78), "{args:?}: {stdout}{stderr}");
        assert!(
            stderr.contains(&format!("{}:", path.display()))
                && stderr.contains("`trigger.mode`")
                && stderr.contains("no way to trigger")
                && stderr.contains("[modbus]")
                && stderr.contains("http = true")
                && stderr.contains("OPC UA"),
            "{args:?}: {stderr}"
        );
    }
    // The HTTP trigger is served by the status server: without one it is off too.
    let path = config(dir.path(), "\n[trigger]\nmode = \"plc\"\nhttp = true\n");
    let (code, _, stderr) = on(&["check-config"], &path);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("`trigger.http`") && stderr.contains("[status]"),
        "{stderr}"
    );
    // Either way to trigger is enough, and check-config says which it found.
    let port = common::free_port();
    let path = config(
        dir.path(),
        &format!("\n[trigger]\nmode = \"plc\"\n\n[modbus]\nlisten = \"127.0.0.1:{port}\"\n"),
    );
    let (code, stdout, stderr) = on(&["check-config"], &path);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("Modbus TCP on 127.0.0.1"), "{stdout}");
    // Point 3: a source read as fast as it decodes may end before a trigger.
    assert!(stdout.contains("kind = \"test\") is not live"), "{stdout}");
}

// 2. check-config opens what it checks.

#[test]
fn check_config_opens_both_models_and_refuses_a_file_that_is_no_model_or_the_wrong_one() {
    let dir = tempfile::tempdir().unwrap();
    let good = config(dir.path(), "");
    let (code, stdout, stderr) = on(&["check-config"], &good);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("models opened with")
            && stdout.contains("segmentation")
            && stdout.contains("classifier")
            && stdout.contains("match the contract"),
        "says what it checked: {stdout}"
    );
    let text = std::fs::read_to_string(&good).unwrap();
    let seg = repo().join("models/seg.onnx").display().to_string();
    for (wrong, says) in [
        (repo().join("models/README.md"), "README.md"),
        (repo().join("models/cls.onnx"), "cls.onnx"),
    ] {
        std::fs::write(&good, text.replace(&seg, &wrong.display().to_string())).unwrap();
        let (code, stdout, stderr) = on(&["check-config"], &good);
        assert_eq!(code, Some(78), "{}: {stdout}{stderr}", wrong.display());
        assert!(
            stderr.contains("the models do not open") && stderr.contains(says),
            "{stderr}"
        );
        assert!(!stdout.contains(": ok"), "{stdout}");
    }
}

// 5. Hints that mislead.

#[test]
fn an_unknown_section_gets_every_allowed_name_and_a_did_you_mean() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, key, guess) in [
        (
            "\n[mqqt]\nurl = \"mqtt://broker\"\n",
            "`mqqt`",
            "did you mean [mqtt]?",
        ),
        (
            "\n[camera.top]\nkind = \"test\"\n",
            "`camera`",
            "did you mean [cameras]?",
        ),
        (
            "\n[decision]\ndefect_treshold = 0.4\n",
            "`decision.defect_treshold`",
            "did you mean `defect_threshold`?",
        ),
    ] {
        let path = config(dir.path(), extra);
        let (code, _, stderr) = on(&["check-config"], &path);
        assert_eq!(code, Some(78), "{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("{key} not named: {stderr}"));
        assert!(line.contains(guess), "{line}");
        if !key.contains('.') {
            for name in ["cameras", "mqtt", "source", "trigger", "modbus", "status"] {
                assert!(line.contains(name), "{name} not among the allowed: {line}");
            }
        }
    }
    let path = config(dir.path(), "");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("kind = \"test\"", "kind = \"tset\"")).unwrap();
    let (_, _, stderr) = on(&["check-config"], &path);
    assert!(stderr.contains("did you mean \"test\"?"), "{stderr}");
}

#[test]
fn a_missing_model_names_the_path_looked_for_and_resolves_only_relative_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("etc")).unwrap();
    let path = config(&dir.path().join("etc"), "");
    let text = std::fs::read_to_string(&path).unwrap();
    let seg = repo().join("models/seg.onnx").display().to_string();
    std::fs::write(&path, text.replace(&seg, "../models/seg.onnx")).unwrap();
    let (code, _, stderr) = on(&["check-config"], &path);
    assert_eq!(code, Some(78), "{stderr}");
    let looked = dir.path().join("models/seg.onnx");
    assert!(
        stderr.contains(&format!("file {} does not exist", looked.display()))
            && stderr.contains("\"../models/seg.onnx\" is relative"),
        "{stderr}"
    );
    let gone = dir.path().join("gone.onnx");
    std::fs::write(&path, text.replace(&seg, &gone.display().to_string())).unwrap();
    let (_, _, stderr) = on(&["check-config"], &path);
    assert!(
        stderr.contains(&format!("file {} does not exist", gone.display()))
            && !stderr.contains("relative"),
        "an absolute path is not resolved: {stderr}"
    );
}

// 6. One command-line style.

#[test]
fn every_command_takes_config_with_help_and_says_a_missing_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "");
    let (bare, _, _) = on(&["check-config"], &path);
    let (flag, stdout, stderr) = on(&["check-config", "--config"], &path);
    assert_eq!((bare, flag), (Some(0), Some(0)), "{stdout}{stderr}");

    let gone = dir.path().join("gone.toml");
    for command in [
        "check-config",
        "run",
        "inspect",
        "bench",
        "build-engine",
        "evaluate",
    ] {
        let help = String::from_utf8_lossy(&sealcheck(&[command, "--help"]).stdout).into_owned();
        assert!(
            help.contains("--config <FILE>") && help.contains("The config file (TOML)"),
            "{command} --help: {help}"
        );
        let mut args = vec![command, "--config", gone.to_str().unwrap()];
        match command {
            "inspect" => args.push("image.png"),
            "evaluate" => args.extend(["--images", "x", "--candidate", "onnxruntime:cpu"]),
            _ => {}
        }
        let out = sealcheck(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{command}: {stderr}");
        assert_eq!(
            stderr.matches("os error 2").count(),
            1,
            "{command}: said once: {stderr}"
        );
        assert!(stderr.contains(&gone.display().to_string()), "{stderr}");
    }
}

#[test]
fn the_readme_lists_every_command() {
    let help = String::from_utf8_lossy(&sealcheck(&["--help"]).stdout).into_owned();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 7, "{help}");
    for command in commands {
        assert!(
            readme.contains(&format!("sealcheck {command} ")),
            "README.md's commands lack `sealcheck {command}`"
        );
    }
}

// 3. The PLC path (the demo itself: plc::the_plc_demo_config_judges_every_part_a_plc_triggers).

#[test]
fn bench_with_a_plc_on_a_source_that_is_not_live_refuses_naming_the_reason() {
    let out = sealcheck(&[
        "bench",
        "--config",
        repo().join("config/demo.toml").to_str().unwrap(),
        "--trigger",
        "plc",
        "--frames",
        "5",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("needs a live camera")
            && stderr.contains("kind = \"images\"")
            && stderr.contains("config/demo-plc.toml")
            && !stderr.contains("os error 115"),
        "{stderr}"
    );
}

// 7. The production template.

#[test]
fn the_template_says_who_creates_every_path_check_config_misses() {
    let template = repo().join("config/sealcheck.toml");
    let text = std::fs::read_to_string(&template).unwrap();
    let header: String = text
        .lines()
        .take_while(|l| l.starts_with('#') || l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    // Every problem of the template on a machine without the install is a path
    // that does not exist, under a folder the header says how to create.
    let (code, _, stderr) = on(&["check-config"], &template);
    if code == Some(0) {
        return; // installed here: nothing is missing
    }
    assert_eq!(code, Some(78), "{stderr}");
    let problems: Vec<&str> = stderr.lines().filter(|l| l.contains("`")).collect();
    assert!(!problems.is_empty(), "{stderr}");
    for problem in problems {
        assert!(problem.contains("does not exist"), "{problem}");
        let named = ["/usr/local/share/sealcheck/models", "/var/lib/sealcheck"]
            .into_iter()
            .find(|folder| problem.contains(folder))
            .unwrap_or_else(|| panic!("a path the header does not explain: {problem}"));
        assert!(header.contains(named), "the header does not name {named}");
    }
    assert!(header.contains("make install"), "{header}");
    // Every source kind is listed with its keys (the keys themselves:
    // config::the_template_names_every_key_the_config_reads_and_no_other).
    for kind in [
        "v4l2", "csi", "rtsp", "genicam", "file", "images", "test", "pipeline",
    ] {
        assert!(
            text.contains(&format!("# {kind}:")),
            "kind {kind} has no line"
        );
    }
}

// 8. The smaller points that are words and files (the code's: unit tests).

#[test]
fn the_smaller_points_are_written_where_a_newcomer_reads() {
    // `sealcheck evaluate`'s default report folder is not left for git to show.
    let gitignore = std::fs::read_to_string(repo().join(".gitignore")).unwrap();
    assert!(
        gitignore.lines().any(|l| l == "/evaluation/"),
        "{gitignore}"
    );
    // The handshake starts with TriggerEnable (a trigger before it is refused).
    let integration = std::fs::read_to_string(repo().join("docs/INTEGRATION.md")).unwrap();
    let handshake = integration
        .split("### The handshake")
        .nth(1)
        .and_then(|rest| rest.split("Triggering (one per part)").next())
        .expect("docs/INTEGRATION.md has the handshake");
    assert!(
        handshake.contains("TriggerEnable") && handshake.contains("ErrorCode 1"),
        "{handshake}"
    );
    // The README does not promise a seq without gaps in plc mode.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let results = readme
        .lines()
        .skip_while(|l| !l.starts_with("- **Results**"))
        .take(4)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        results.contains("`plc` mode") && results.contains("passed over"),
        "{results}"
    );
}
