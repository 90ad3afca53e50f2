//! Config validation: every problem listed, each with file, line, column, key
//! and what is allowed; `check-config` exits 78 on any of them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sealcheck::config::{self, ConfigError, OverflowPolicy, SourceKind};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A config file in a temp dir whose model paths point at real files there.
fn write_config(dir: &Path, body: &str) -> PathBuf {
    std::fs::write(
        dir.join("seg.onnx"),
        b"placeholder bytes: validation only checks the file exists",
    )
    .unwrap();
    std::fs::write(dir.join("cls.onnx"), b"placeholder bytes").unwrap();
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, body).unwrap();
    path
}

const VALID: &str = r#"
[source]
kind = "test"
num_buffers = 10

[models.segmentation]
path = "seg.onnx"

[models.classifier]
path = "cls.onnx"

[output]
results = "results.jsonl"
"#;

#[test]
fn minimal_config_gets_defaults_and_resolves_paths_against_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), VALID);
    let cfg = config::load(&path).unwrap();
    assert_eq!(cfg.segmentation.path, dir.path().join("seg.onnx"));
    assert_eq!(cfg.output.results, dir.path().join("results.jsonl"));
    assert_eq!(cfg.first_source().overflow, OverflowPolicy::Block);
    assert!(matches!(
        cfg.first_source().kind,
        SourceKind::Test {
            num_buffers: 10,
            ..
        }
    ));
    assert_eq!(cfg.decision.defect_threshold, 0.5);
}

#[test]
fn live_camera_defaults_to_dropping() {
    let dir = tempfile::tempdir().unwrap();
    let body = VALID.replace(
        "kind = \"test\"\nnum_buffers = 10",
        "kind = \"v4l2\"\ndevice = \"/dev/video3\"",
    );
    let cfg = config::load(&write_config(dir.path(), &body)).unwrap();
    assert_eq!(cfg.first_source().overflow, OverflowPolicy::Drop);
}

fn problems_of(body: &str) -> Vec<config::ConfigProblem> {
    let dir = tempfile::tempdir().unwrap();
    match config::load(&write_config(dir.path(), body)) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected invalid config, got {other:?}"),
    }
}

#[test]
fn every_problem_is_listed_with_line_column_and_key() {
    let body = VALID.to_string()
        + r#"
[decision]
defect_threshold = 1.5
min_seal_area = "small"
colour = "blue"
"#;
    let problems = problems_of(&body);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    let threshold = problems
        .iter()
        .find(|p| p.key == "decision.defect_threshold")
        .unwrap();
    assert_eq!((threshold.line, threshold.column), (16, 20));
    assert!(
        threshold.message.contains("from 0 to 1"),
        "{}",
        threshold.message
    );
    let wrong_type = problems
        .iter()
        .find(|p| p.key == "decision.min_seal_area")
        .unwrap();
    assert!(
        wrong_type.message.contains("must be a number") && wrong_type.message.contains("\"small\"")
    );
    let unknown = problems
        .iter()
        .find(|p| p.key == "decision.colour")
        .unwrap();
    assert_eq!(unknown.line, 18);
    assert!(
        unknown.message.contains("unknown key") && unknown.message.contains("defect_threshold")
    );
}

#[test]
fn unknown_choice_names_the_allowed_values() {
    let problems = problems_of(&VALID.replace("kind = \"test\"", "kind = \"webcam\""));
    // Only the kind: which other keys belong in [source] depends on it.
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let kind = problems.iter().find(|p| p.key == "source.kind").unwrap();
    assert!(
        kind.message.contains("\"webcam\"") && kind.message.contains("\"v4l2\""),
        "{}",
        kind.message
    );
}

#[test]
fn missing_model_file_is_named() {
    let problems = problems_of(&VALID.replace("path = \"cls.onnx\"", "path = \"gone.onnx\""));
    let p = problems
        .iter()
        .find(|p| p.key == "models.classifier.path")
        .unwrap();
    assert!(
        p.message.contains("gone.onnx") && p.message.contains("does not exist"),
        "{}",
        p.message
    );
}

#[test]
fn syntax_error_has_a_place() {
    let problems = problems_of("[source\nkind = 1");
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, 1);
    assert!(problems[0].message.contains("TOML syntax error"));
}

#[test]
fn missing_required_keys_are_reported() {
    let problems = problems_of("[source]\nkind = \"file\"\n");
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    for key in [
        "source.path",
        "models.segmentation.path",
        "models.classifier.path",
        "output.results",
    ] {
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }
}

#[test]
fn inconsistent_area_bounds_are_rejected() {
    let body = VALID.to_string() + "\n[decision]\nmin_seal_area = 0.5\nmax_seal_area = 0.2\n";
    let problems = problems_of(&body);
    assert!(problems.iter().any(|p| p.key == "decision.min_seal_area" && p.message.contains("below max_seal_area")));
}

#[test]
fn check_config_exits_78_and_lists_problems_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        &(VALID.to_string() + "\n[decision]\ndefect_threshold = -1\n"),
    );
    let out = Command::new(crate::common::sealcheck_bin())
        .arg("check-config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:16:20: `decision.defect_threshold`",
            path.display()
        )),
        "{stderr}"
    );
}

#[test]
fn shipped_configs_are_valid() {
    for demo in ["config/demo.toml", "config/demo-plc.toml"] {
        let out = Command::new(crate::common::sealcheck_bin())
            .arg("check-config")
            .arg(repo().join(demo))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{demo}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The production template points at installed paths; only its syntax and keys are checked here.
    let text = std::fs::read_to_string(repo().join("config/sealcheck.toml")).unwrap();
    match config::parse(&text, &repo().join("config/sealcheck.toml")) {
        Ok(_) => {}
        Err(e) => {
            for p in e.problems() {
                assert!(
                    p.message.contains("does not exist"),
                    "unexpected problem in the template: {p:?}"
                );
            }
        }
    }
}

#[test]
fn int8_engines_need_calibration_images() {
    let dir = tempfile::tempdir().unwrap();
    let body = VALID.to_string() + "\n[inference.tensorrt]\nprecision = \"int8\"\n";
    let problems = match config::load(&write_config(dir.path(), &body)) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected invalid config, got {other:?}"),
    };
    assert!(
        problems
            .iter()
            .any(|p| p.key == "inference.tensorrt.precision"
                && p.message.contains("calibration_images")),
        "{problems:#?}"
    );
}

#[test]
fn onnxruntime_session_settings_are_keys_with_defaults() {
    use sealcheck::config::{ArenaExtend, ConvAlgoSearch, GraphOptimization, OnnxRuntimeConfig};
    let dir = tempfile::tempdir().unwrap();
    let defaults = config::load(&write_config(dir.path(), VALID)).unwrap();
    assert_eq!(defaults.inference.onnxruntime, OnnxRuntimeConfig::default());
    assert!(
        !defaults.inference.onnxruntime.cuda_tf32,
        "TF32 breaks parity: off by default"
    );
    assert!(
        defaults.inference.onnxruntime.cuda_graph,
        "measured 2.3x on the GPU path"
    );

    let body = VALID.to_string()
        + "\n[inference.onnxruntime]\ngraph_optimization = \"basic\"\nmemory_pattern = false\n\
           cuda_arena_extend_strategy = \"same_as_requested\"\ncuda_mem_limit_mib = 512\n\
           cudnn_conv_algo_search = \"heuristic\"\ncuda_tf32 = true\ncuda_graph = false\n\
           cuda_prefer_nhwc = true\n";
    let set = config::load(&write_config(dir.path(), &body)).unwrap();
    assert_eq!(
        set.inference.onnxruntime,
        OnnxRuntimeConfig {
            graph_optimization: GraphOptimization::Basic,
            memory_pattern: false,
            cuda_arena_extend_strategy: ArenaExtend::SameAsRequested,
            cuda_mem_limit_mib: 512,
            cudnn_conv_algo_search: ConvAlgoSearch::Heuristic,
            cuda_tf32: true,
            cuda_graph: false,
            cuda_prefer_nhwc: true,
        }
    );

    let bad = VALID.to_string()
        + "\n[inference.onnxruntime]\ngraph_optimization = \"max\"\ncuda_mem_limit_mib = -1\n";
    let problems = problems_of(&bad);
    for key in [
        "inference.onnxruntime.graph_optimization",
        "inference.onnxruntime.cuda_mem_limit_mib",
    ] {
        assert!(
            problems.iter().any(|p| p.key == key),
            "{key}: {problems:#?}"
        );
    }
    let level = problems
        .iter()
        .find(|p| p.key == "inference.onnxruntime.graph_optimization")
        .unwrap();
    assert!(level.message.contains("\"extended\""), "{}", level.message);
}

#[test]
fn results_rotate_by_size_by_default() {
    use sealcheck::config::ResultsRotation;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config::load(&write_config(dir.path(), VALID)).unwrap();
    assert_eq!(
        cfg.output.rotation,
        ResultsRotation {
            max_mib: 256,
            keep_files: 8
        }
    );
    let problems = problems_of(&VALID.replace(
        "results = \"results.jsonl\"",
        "results = \"results.jsonl\"\nkeep_files = 0",
    ));
    assert!(
        problems
            .iter()
            .any(|p| p.key == "output.keep_files" && p.message.contains("1 to 1000")),
        "{problems:#?}"
    );
}

#[test]
fn csi_camera_is_a_live_source_with_a_sensor_mode() {
    let dir = tempfile::tempdir().unwrap();
    let body = VALID.replace(
        "kind = \"test\"\nnum_buffers = 10",
        "kind = \"csi\"\nsensor_id = 1\nwidth = 1280\nheight = 720\nframerate = 60",
    );
    let cfg = config::load(&write_config(dir.path(), &body)).unwrap();
    assert_eq!(
        cfg.first_source().kind,
        SourceKind::Csi {
            sensor_id: 1,
            width: 1280,
            height: 720,
            framerate: 60
        }
    );
    assert_eq!(
        cfg.first_source().overflow,
        OverflowPolicy::Drop,
        "a camera does not wait"
    );
    let problems = problems_of(&VALID.replace(
        "kind = \"test\"\nnum_buffers = 10",
        "kind = \"csi\"\nsensor_id = 9",
    ));
    assert!(
        problems.iter().any(|p| p.key == "source.sensor_id"),
        "{problems:#?}"
    );
}

#[test]
fn live_source_recovery_keys_have_defaults_and_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let camera = |extra: &str| {
        VALID.replace(
            "kind = \"test\"\nnum_buffers = 10",
            &format!("kind = \"rtsp\"\nurl = \"rtsp://127.0.0.1:8554/line\"\n{extra}"),
        )
    };
    let cfg = config::load(&write_config(dir.path(), &camera(""))).unwrap();
    assert_eq!(
        cfg.first_source().recovery,
        config::SourceRecovery::default()
    );
    assert_eq!(
        cfg.first_source().recovery.retry_min,
        Duration::from_millis(500)
    );
    assert_eq!(
        cfg.first_source().recovery.retry_max,
        Duration::from_secs(10)
    );
    assert_eq!(
        cfg.first_source().recovery.frame_timeout,
        None,
        "from the frame rate"
    );

    let cfg = config::load(&write_config(
        dir.path(),
        &camera("retry_min_ms = 100\nretry_max_ms = 2000\nframe_timeout_ms = 1500"),
    ))
    .unwrap();
    assert_eq!(
        cfg.first_source().recovery.retry_min,
        Duration::from_millis(100)
    );
    assert_eq!(
        cfg.first_source().recovery.retry_max,
        Duration::from_secs(2)
    );
    assert_eq!(
        cfg.first_source().recovery.frame_timeout,
        Some(Duration::from_millis(1500))
    );

    let problems = problems_of(&camera("retry_min_ms = 5000\nretry_max_ms = 1000"));
    assert!(
        problems
            .iter()
            .any(|p| p.key == "source.retry_min_ms" && p.message.contains("retry_max_ms")),
        "{problems:#?}"
    );
    let problems = problems_of(&camera("frame_timeout_ms = 5"));
    assert!(
        problems
            .iter()
            .any(|p| p.key == "source.frame_timeout_ms" && p.line > 0),
        "{problems:#?}"
    );
}

#[test]
fn a_user_pipeline_is_live_only_when_marked() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = |extra: &str| {
        VALID.replace(
            "kind = \"test\"\nnum_buffers = 10",
            &format!(
                "kind = \"pipeline\"\npipeline = \"videotestsrc ! appsink name=sink\"\n{extra}"
            ),
        )
    };
    let cfg = config::load(&write_config(dir.path(), &pipeline(""))).unwrap();
    assert!(!cfg.first_source().kind.is_live());
    assert_eq!(cfg.first_source().overflow, OverflowPolicy::Block);
    let cfg = config::load(&write_config(dir.path(), &pipeline("live = true"))).unwrap();
    assert!(cfg.first_source().kind.is_live(), "recovers like a camera");
    assert_eq!(cfg.first_source().overflow, OverflowPolicy::Drop);
    let problems = problems_of(&VALID.replace("num_buffers = 10", "num_buffers = 10\nlive = true"));
    assert!(
        problems.iter().any(|p| p.key == "source.live"),
        "`live` belongs to pipeline sources only: {problems:#?}"
    );
}

#[test]
fn status_and_archive_are_off_unless_written_and_checked_when_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config::load(&write_config(dir.path(), VALID)).unwrap();
    assert!(cfg.status.is_none() && cfg.archive.is_none());

    let body = VALID.to_string()
        + "\n[status]\nlisten = \"127.0.0.1:9750\"\n\n[archive]\ndir = \"archive\"\n";
    let cfg = config::load(&write_config(dir.path(), &body)).unwrap();
    assert_eq!(cfg.status.unwrap().listen.to_string(), "127.0.0.1:9750");
    let archive = cfg.archive.unwrap();
    assert_eq!(archive.dir, dir.path().join("archive"));
    assert_eq!(
        (
            archive.keep,
            archive.format,
            archive.max_mib,
            archive.min_free_mib
        ),
        (
            config::ArchiveKeep::Fail,
            config::ImageFormat::Jpeg,
            10240,
            1024
        )
    );

    let body = VALID.to_string()
        + "\n[status]\nlisten = \"localhost\"\n\n[archive]\ndir = \"no/such/folder/archive\"\nkeep = \"some\"\nmax_mib = 0\n";
    let problems = match config::load(&write_config(dir.path(), &body)) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected invalid config, got {other:?}"),
    };
    for key in ["status.listen", "archive.keep", "archive.max_mib"] {
        assert!(
            problems.iter().any(|p| p.key == key && p.line > 0),
            "{key} not reported: {problems:#?}"
        );
    }
}

#[test]
fn evaluate_floors_have_defaults_an_off_value_and_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config::load(&write_config(dir.path(), VALID)).unwrap();
    let e = cfg.evaluate;
    assert_eq!(
        (e.min_accuracy, e.min_defect_recall, e.max_false_reject_rate),
        (0.95, 0.95, 0.05)
    );

    let body = VALID.to_string()
        + "\n[evaluate]\nmin_accuracy = 0\nmin_defect_recall = 0.99\nmax_false_reject_rate = 1\n";
    let e = config::load(&write_config(dir.path(), &body))
        .unwrap()
        .evaluate;
    assert_eq!(
        (e.min_accuracy, e.min_defect_recall, e.max_false_reject_rate),
        (0.0, 0.99, 1.0)
    );

    let body = VALID.to_string()
        + "\n[evaluate]\nmin_accuracy = 1.5\nmin_defect_recall = -0.1\nmax_false_reject_rate = \"low\"\n";
    let problems = problems_of(&body);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    let accuracy = problems
        .iter()
        .find(|p| p.key == "evaluate.min_accuracy")
        .unwrap();
    assert_eq!((accuracy.line, accuracy.column), (16, 16), "{accuracy:?}");
    assert!(accuracy.message.contains("from 0 to 1"), "{accuracy:?}");
    let recall = problems
        .iter()
        .find(|p| p.key == "evaluate.min_defect_recall")
        .unwrap();
    assert_eq!(recall.line, 17, "{recall:?}");
    let frr = problems
        .iter()
        .find(|p| p.key == "evaluate.max_false_reject_rate")
        .unwrap();
    assert!(
        frr.line == 18 && frr.message.contains("must be a number"),
        "{frr:?}"
    );
}

#[test]
fn shadow_is_off_unless_written_and_its_keys_have_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config::load(&write_config(dir.path(), VALID)).unwrap();
    assert!(cfg.shadow.is_none());

    let body = VALID.to_string() + "\n[shadow]\nclassifier = \"cls.onnx\"\n";
    let shadow = config::load(&write_config(dir.path(), &body))
        .unwrap()
        .shadow
        .unwrap();
    assert_eq!(shadow.classifier, Some(dir.path().join("cls.onnx")));
    assert_eq!(
        (
            &shadow.segmentation,
            shadow.backend,
            shadow.device,
            shadow.precision,
            shadow.every
        ),
        (&None, None, None, None, 1)
    );
}

/// `check-config FILE` on `body`: the exit code, stderr and the file (in
/// the returned folder).
fn check_config(body: &str) -> (Option<i32>, String, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), body);
    let out = Command::new(crate::common::sealcheck_bin())
        .arg("check-config")
        .arg(&path)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr, path, dir)
}

#[test]
fn shadow_engine_combinations_that_cannot_run_are_refused_at_their_key() {
    // [shadow] is at line 15, its first key at 16.
    let cases: [(&str, &str, (usize, usize), &str); 4] = [
        (
            "backend = \"tract\"\nprecision = \"int8\"\n",
            "shadow.precision",
            (17, 13),
            "tract runs FP32 only",
        ),
        (
            "backend = \"onnxruntime\"\nprecision = \"fp16\"\n",
            "shadow.precision",
            (17, 13),
            "FP16 model files",
        ),
        (
            "backend = \"tract\"\ndevice = \"cuda\"\n",
            "shadow.device",
            (17, 10),
            "CPU only",
        ),
        (
            "backend = \"tensorrt\"\nprecision = \"int8\"\n",
            "shadow.precision",
            (17, 13),
            "calibration_images",
        ),
    ];
    for (keys, key, place, why) in cases {
        let body = VALID.to_string() + "\n[shadow]\n" + keys;
        let problems = problems_of(&body);
        assert_eq!(problems.len(), 1, "{keys}: {problems:#?}");
        let p = &problems[0];
        assert_eq!(p.key, key, "{keys}: {p:?}");
        assert_eq!((p.line, p.column), place, "{keys}: {p:?}");
        assert!(p.message.contains(why), "{keys}: {p:?}");

        let (code, stderr, path, _dir) = check_config(&body);
        assert_eq!(code, Some(78), "{keys}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "{}:{}:{}: `{key}`",
                path.display(),
                place.0,
                place.1
            )),
            "{keys}: {stderr}"
        );
    }
}

#[test]
fn shadow_every_and_files_are_checked() {
    let body = VALID.to_string() + "\n[shadow]\nevery = 0\n";
    let problems = problems_of(&body);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(
        (
            problems[0].key.as_str(),
            problems[0].line,
            problems[0].column
        ),
        ("shadow.every", 16, 9),
        "{problems:#?}"
    );
    let (code, stderr, path, _dir) = check_config(&body);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:16:9: `shadow.every`", path.display())),
        "{stderr}"
    );

    let body = VALID.to_string()
        + "\n[shadow]\nsegmentation = \"seg.onnx\"\nclassifier = \"gone.onnx\"\nevry = 3\n";
    let problems = problems_of(&body);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    let missing = problems
        .iter()
        .find(|p| p.key == "shadow.classifier")
        .unwrap_or_else(|| panic!("{problems:#?}"));
    assert_eq!(missing.line, 17, "{missing:?}");
    assert!(
        missing.message.contains("gone.onnx") && missing.message.contains("does not exist"),
        "{missing:?}"
    );
    let unknown = problems
        .iter()
        .find(|p| p.key == "shadow.evry")
        .unwrap_or_else(|| panic!("{problems:#?}"));
    assert!(
        unknown.message.contains("unknown key") && unknown.message.contains("every"),
        "{unknown:?}"
    );
    let (code, stderr, path, _dir) = check_config(&body);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:17:", path.display()))
            && stderr.contains("`shadow.classifier`")
            && stderr.contains("gone.onnx"),
        "{stderr}"
    );
}

/// VALID's models and output with `cameras` instead of its `[source]`.
fn with_cameras(cameras: &str) -> String {
    VALID.replace("[source]\nkind = \"test\"\nnum_buffers = 10\n", cameras)
}

#[test]
fn cameras_are_named_tables_in_file_order_with_their_own_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let body = with_cameras(
        "[cameras.top]\nkind = \"test\"\n\
         [cameras.side-2]\nkind = \"v4l2\"\ndevice = \"/dev/video2\"\n\
         [cameras.side-2.decision]\ndefect_threshold = 0.8\ndeadline_ms = 40\n\
         [cameras.a_lane]\nkind = \"test\"\n",
    ) + "[decision]\ndefect_threshold = 0.6\nmin_seal_area = 0.03\n";
    let cfg = config::load(&write_config(dir.path(), &body)).unwrap();
    let names: Vec<_> = cfg.cameras.iter().map(|c| c.name.as_deref()).collect();
    assert_eq!(names, [Some("top"), Some("side-2"), Some("a_lane")]);
    assert!(cfg.has_named_cameras());
    let (top, side) = (&cfg.cameras[0], &cfg.cameras[1]);
    assert_eq!(top.decision, cfg.decision, "no sub-table: [decision]'s");
    assert_eq!(side.decision.defect_threshold, 0.8);
    assert_eq!(side.decision.deadline, Some(Duration::from_millis(40)));
    assert_eq!(
        side.decision.min_seal_area, 0.03,
        "a key left out is [decision]'s"
    );
    assert_eq!(side.source.overflow, OverflowPolicy::Drop, "a live camera");
    assert_eq!(
        cfg.inference.max_batch, 3,
        "one frame per camera by default"
    );
    // One [source] stays one unnamed camera.
    let single = config::load(&write_config(dir.path(), VALID)).unwrap();
    assert_eq!(single.cameras.len(), 1);
    assert!(single.cameras[0].name.is_none());
    assert_eq!(single.inference.max_batch, 1);
}

#[test]
fn camera_config_errors_exit_78_naming_their_line() {
    let cases: [(String, &str, usize, &str); 4] = [
        (
            format!("{VALID}[cameras.top]\nkind = \"test\"\n"),
            "source",
            2,
            "either [source]",
        ),
        (with_cameras("[cameras]\n"), "cameras", 2, "names no camera"),
        (
            with_cameras("[cameras.\"top camera\"]\nkind = \"test\"\n"),
            "cameras.top camera",
            2,
            "letters, digits",
        ),
        (
            with_cameras("[cameras.top]\nkind = \"test\"\n[cameras.top.decision]\ncolour = 1\n"),
            "cameras.top.decision.colour",
            5,
            "unknown key",
        ),
    ];
    for (body, key, line, words) in cases {
        let (code, stderr, path, _dir) = check_config(&body);
        assert_eq!(code, Some(78), "{body}\n{stderr}");
        let place = format!("{}:{line}:", path.display());
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(&place) && l.contains(key) && l.contains(words)),
            "expected `{key}` at {place} saying {words:?}:\n{stderr}"
        );
    }
    for reserved in ["shadow", "2026-11-23"] {
        let problems = problems_of(&with_cameras(&format!(
            "[cameras.\"{reserved}\"]\nkind = \"test\"\n"
        )));
        assert!(
            problems
                .iter()
                .any(|p| p.message.contains("keeps for itself")),
            "{reserved}: {problems:#?}"
        );
    }
    let long = "x".repeat(33);
    let problems = problems_of(&with_cameras(&format!(
        "[cameras.{long}]\nkind = \"test\"\n"
    )));
    assert!(
        problems.iter().any(|p| p.message.contains("1 to 32")),
        "{problems:#?}"
    );
}

#[test]
fn fp16_precision_runs_the_fp16_files_and_needs_them() {
    let dir = tempfile::tempdir().unwrap();
    let body = VALID.to_string() + "[inference]\nbackend = \"onnxruntime\"\nprecision = \"fp16\"\n";
    let problems = problems_of(&body);
    assert!(
        problems
            .iter()
            .any(|p| p.key == "models.segmentation" && p.message.contains("seg_fp16.onnx")),
        "{problems:#?}"
    );
    std::fs::write(dir.path().join("seg_fp16.onnx"), b"placeholder").unwrap();
    std::fs::write(dir.path().join("cls_fp16.onnx"), b"placeholder").unwrap();
    let cfg = config::load(&write_config(dir.path(), &body)).unwrap();
    assert!(cfg.segmentation.path.ends_with("seg_fp16.onnx"));
    assert!(cfg.classifier.path.ends_with("cls_fp16.onnx"));
    let tract = VALID.to_string() + "[inference]\nbackend = \"tract\"\nprecision = \"fp16\"\n";
    assert!(
        problems_of(&tract)
            .iter()
            .any(|p| p.key == "inference.precision" && p.message.contains("tract")),
    );
}

#[test]
fn trigger_mode_camera_takes_modbus_but_no_http_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let camera =
        format!("{VALID}\n[trigger]\nmode = \"camera\"\n\n[modbus]\nlisten = \"127.0.0.1:5020\"\n");
    let loaded = config::load(&write_config(dir.path(), &camera)).unwrap();
    assert_eq!(loaded.trigger.mode, config::TriggerMode::Camera);
    assert!(loaded.modbus.is_some());
    let problems = problems_of(&format!(
        "{VALID}\n[trigger]\nmode = \"camera\"\nhttp = true\n"
    ));
    let http = problems.iter().find(|p| p.key == "trigger.http").unwrap();
    assert!(http.message.contains("\"camera\""), "{}", http.message);
    // [modbus] in free mode names both modes that serve a PLC.
    let problems = problems_of(&format!("{VALID}\n[modbus]\nlisten = \"127.0.0.1:5020\"\n"));
    let mode = problems.iter().find(|p| p.key == "trigger.mode").unwrap();
    assert!(mode.message.contains("\"camera\""), "{}", mode.message);
}

// The template names every key the config reads, and the config reads every
// key the template names (issue 36). A key is named as `key = value`: on a line
// of its own, set or commented out, under its table's header (set or commented
// out), or on a source kind's line under [source] (`# csi: sensor_id = 0, ...`).
// Which keys the config reads comes from the config itself: a key it did not
// read is reported "unknown key ...; allowed keys: <the keys it read>".

/// A key the template names.
struct TemplateKey {
    /// Dotted table, e.g. `inference.tensorrt`.
    table: String,
    key: String,
    /// `key = value`, TOML.
    text: String,
    /// The kind whose line names it (`# csi: sensor_id = 0`), if any.
    kind: Option<String>,
    /// 1-based line of the template.
    line: usize,
}

const PROBE: &str = "zz_template_probe";

/// `[a.b]`, set or commented out: `a.b`.
fn template_header(body: &str) -> Option<String> {
    let name = body.strip_prefix('[')?.strip_suffix(']')?;
    let dotted = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    dotted.then(|| name.to_string())
}

/// The `key = value` pairs of prose such as `sensor_id = 0, width = 1920 (a mode)`.
fn prose_assignments(mut rest: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    while let Some(at) = rest.find(" = ") {
        let key_start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let key = &rest[key_start..at];
        let after = &rest[at + 3..];
        let len = match after.strip_prefix('"') {
            Some(quoted) => quoted.find('"').map_or(after.len(), |end| end + 2),
            None => after
                .find(|c: char| c.is_whitespace() || matches!(c, ',' | '`' | ')'))
                .unwrap_or(after.len()),
        };
        if key.starts_with(|c: char| c.is_ascii_alphabetic()) {
            found.push((key.to_string(), after[..len].to_string()));
        }
        rest = &after[len..];
    }
    found
}

/// Every table (with its line) and every key the template names.
fn read_template(text: &str, kinds: &[String]) -> (Vec<(String, usize)>, Vec<TemplateKey>) {
    let (mut tables, mut keys) = (Vec::new(), Vec::new());
    let mut table = String::new();
    // A kind's line goes on in the comment lines indented under its values.
    let mut kind: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw.trim_start().strip_prefix('#');
        let continues = body.is_some_and(|b| b.starts_with("    "));
        if !continues {
            kind = None;
        }
        let body = body.unwrap_or(raw).trim();
        if let Some(name) = template_header(body) {
            table = name;
            tables.push((table.clone(), line));
            continue;
        }
        let mut push = |key: String, text: String, kind: Option<String>| {
            keys.push(TemplateKey {
                table: table.clone(),
                key,
                text,
                kind,
                line,
            })
        };
        let in_source = table == "source" || table.starts_with("cameras.");
        let kind_line = body.split_once(':').and_then(|(label, rest)| {
            let label = label.strip_suffix(" only").unwrap_or(label);
            kinds
                .iter()
                .find(|k| *k == label)
                .map(|k| (k.clone(), rest))
        });
        let prose = match (kind.is_some(), kind_line) {
            (true, _) => Some(body),
            (false, Some((name, rest))) if in_source => {
                kind = Some(name);
                Some(rest)
            }
            _ => None,
        };
        if let Some(prose) = prose {
            for (key, value) in prose_assignments(prose) {
                push(key.clone(), format!("{key} = {value}"), kind.clone());
            }
        } else if let Ok(pair) = body.parse::<toml::Table>()
            && pair.len() == 1
            && !pair.values().any(toml::Value::is_table)
        {
            let key = pair.keys().next().unwrap().clone();
            push(key, body.to_string(), None);
        }
    }
    (tables, keys)
}

/// The unknown-key problems of a probe document: `(key, allowed keys)`.
fn unknown_keys(doc: &str) -> Vec<(String, Vec<String>)> {
    let problems = match config::parse(doc, &repo().join("config/probe.toml")) {
        Ok(_) => Vec::new(),
        Err(e) => e.problems().to_vec(),
    };
    problems
        .into_iter()
        .filter_map(|p| {
            let (_, allowed) = p.message.split_once("allowed keys: ")?;
            p.message.starts_with("unknown key").then(|| {
                let allowed = allowed.split(", ").map(str::to_string).collect();
                (p.key, allowed)
            })
        })
        .collect()
}

/// The table whose keys the template names for `table`: a camera's are
/// [source]'s, its `decision` sub-table's are [decision]'s.
fn template_table(table: &str) -> String {
    match table.strip_prefix("cameras.") {
        Some(camera) => match camera.split_once('.') {
            Some((_, sub)) => sub.to_string(),
            None => "source".to_string(),
        },
        None => table.to_string(),
    }
}

fn key_path(table: &str, key: &str) -> String {
    if table.is_empty() {
        key.to_string()
    } else {
        format!("{table}.{key}")
    }
}

#[test]
fn the_template_names_every_key_the_config_reads_and_no_other() {
    let text = std::fs::read_to_string(repo().join("config/sealcheck.toml")).unwrap();
    // The source kinds, as the config lists them for a kind it does not know.
    let kinds: Vec<String> = config::parse("[source]\nkind = \"zz\"\n", &repo())
        .unwrap_err()
        .problems()
        .iter()
        .find(|p| p.key == "source.kind")
        .and_then(|p| p.message.split_once("use one of "))
        .map(|(_, list)| list.split(", ").map(|k| k.trim_matches('"').to_string()))
        .expect("the kinds a [source] may be")
        .collect();
    let (tables, keys) = read_template(&text, &kinds);
    assert!(keys.len() > 100 && tables.len() > 15, "{} keys", keys.len());

    // The names the template gives each table: its keys and its sub-tables.
    let mut names: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for k in &keys {
        names
            .entry(template_table(&k.table))
            .or_default()
            .insert(k.key.clone());
    }
    for (table, _) in &tables {
        let mut parent = String::new();
        for name in table.split('.') {
            names
                .entry(template_table(&parent))
                .or_default()
                .insert(name.to_string());
            parent = key_path(&parent, name);
        }
    }

    // Probe documents: the template with every key set (cameras apart from
    // [source], which they replace), and one [source] per kind with its line's
    // keys; each table also holds PROBE, which the config reports with the
    // keys it read.
    let table_text = |table: &str, kind: Option<&str>| {
        let mut body = format!("[{table}]\n");
        if let Some(kind) = kind {
            body += &format!("kind = \"{kind}\"\n");
        }
        let mut seen = std::collections::BTreeSet::new();
        for k in keys
            .iter()
            .filter(|k| k.table == table && k.kind.as_deref() == kind)
        {
            if seen.insert(&k.key) {
                body += &k.text;
                body.push('\n');
            }
        }
        body + &format!("{PROBE} = 0\n")
    };
    let whole = |cameras: bool| {
        let mut doc = format!("{PROBE} = 0\n");
        for (table, _) in tables
            .iter()
            .filter(|(t, _)| t.starts_with("cameras.") == cameras)
        {
            doc += &table_text(table, None);
        }
        doc
    };
    let mut probes = vec![(whole(false), None), (whole(true), None)];
    probes.extend(
        kinds
            .iter()
            .map(|k| (table_text("source", Some(k.as_str())), Some(k.clone()))),
    );

    let mut wrong = Vec::new();
    let mut read_tables = std::collections::BTreeSet::new();
    for (doc, kind) in &probes {
        for (key, allowed) in unknown_keys(doc) {
            let Some(table) = key
                .strip_suffix(&format!(".{PROBE}"))
                .or_else(|| (key == PROBE).then_some(""))
            else {
                let line = keys
                    .iter()
                    .find(|k| key_path(&k.table, &k.key) == key && k.kind == *kind)
                    .map_or(0, |k| k.line);
                wrong.push(format!(
                    "config/sealcheck.toml:{line}: `{key}`{} is not a key the config reads",
                    kind.as_ref()
                        .map_or(String::new(), |k| format!(" (kind = \"{k}\")"))
                ));
                continue;
            };
            read_tables.insert(table.to_string());
            let named = names
                .get(&template_table(table))
                .cloned()
                .unwrap_or_default();
            for key in allowed {
                let named_for_kind = match kind {
                    // A sub-table of [source] ([source.layout]) is every kind's.
                    Some(kind) => {
                        keys.iter().any(|k| {
                            k.table == "source"
                                && k.key == key
                                && (k.kind.is_none() || k.kind.as_ref() == Some(kind))
                        }) || tables.iter().any(|(t, _)| *t == key_path("source", &key))
                    }
                    None => named.contains(&key),
                };
                if !named_for_kind {
                    wrong.push(format!(
                        "the config reads `{}`{}, which config/sealcheck.toml does not name",
                        key_path(table, &key),
                        kind.as_ref()
                            .map_or(String::new(), |k| format!(" (kind = \"{k}\")"))
                    ));
                }
            }
        }
    }
    for (table, line) in &tables {
        if !read_tables.contains(table) {
            wrong.push(format!(
                "config/sealcheck.toml:{line}: [{table}] is not a table the config reads"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn recipes_are_read_with_every_problem_named_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let body = VALID.to_string()
        + r#"
[decision]
min_seal_area = 0.02

[recipe]
start = "cup200"

[recipes.cup125]
id = 1

[recipes.cup200]
id = 2
defect_threshold = 0.3
deadline_ms = 0
"#;
    let cfg = config::load(&write_config(dir.path(), &body)).unwrap();
    let recipes = cfg.recipes.as_ref().unwrap();
    assert_eq!(recipes.list.len(), 2);
    let start = recipes.start();
    assert_eq!((start.id, &*start.name), (2, "cup200"));
    let d = start.decision(&cfg.cameras[0].decision);
    assert_eq!(
        (d.defect_threshold, d.min_seal_area, d.deadline),
        (0.3, 0.02, None)
    );
    // Without [recipes.*], none; the first recipe starts without [recipe].
    assert!(
        config::load(&write_config(dir.path(), VALID))
            .unwrap()
            .recipes
            .is_none()
    );

    let bad = VALID.to_string()
        + r#"
[recipe]
start = "nope"

[recipes.a]
id = 1
min_seal_area = 0.95

[recipes.b]
id = 1
exposure_us = 800

[recipes."c d"]
id = 0
classifier = "missing.onnx"
"#;
    let problems = problems_of(&bad);
    let at = |key: &str| {
        problems
            .iter()
            .find(|p| p.key == key)
            .unwrap_or_else(|| panic!("no problem at {key}: {problems:#?}"))
            .message
            .clone()
    };
    assert!(at("recipes.a.min_seal_area").contains("under this recipe"));
    assert!(at("recipes.b.exposure_us").contains("only a GenICam camera"));
    assert!(at("recipes.c d").contains("letters, digits"));
    assert!(at("recipes.c d.id").contains("out of range"));
    assert!(at("recipes.c d.classifier").contains("does not exist"));

    let duplicate = VALID.to_string() + "[recipes.a]\nid = 7\n[recipes.b]\nid = 7\n";
    assert!(
        problems_of(&duplicate)
            .iter()
            .any(|p| p.key == "recipes.b.id" && p.message.contains("also recipe \"a\"'s id"))
    );
    let unknown_start = VALID.to_string() + "[recipe]\nstart = \"x\"\n[recipes.a]\nid = 1\n";
    assert!(
        problems_of(&unknown_start)
            .iter()
            .any(|p| p.key == "recipe.start" && p.message.contains("the recipes are: a"))
    );
    let without = VALID.to_string() + "[recipe]\nstart = \"x\"\n";
    assert!(
        problems_of(&without)
            .iter()
            .any(|p| p.key == "recipe" && p.message.contains("no [recipes.NAME]"))
    );
}

#[test]
fn check_config_opens_each_recipes_models_and_names_the_recipe_that_fails() {
    let dir = tempfile::tempdir().unwrap();
    let models = repo().join("models");
    std::fs::write(dir.path().join("broken.onnx"), b"not a model").unwrap();
    let body = format!(
        "{VALID}\n[recipes.a]\nid = 1\n[recipes.b]\nid = 2\nclassifier = \"{}\"\n",
        models.join("cls.onnx").display()
    );
    let config = write_config(dir.path(), &body);
    // The demo models stand in for VALID's: copy them where it names them.
    for name in ["seg.onnx", "cls.onnx"] {
        std::fs::copy(models.join(name), dir.path().join(name)).unwrap();
    }
    let out = Command::new(crate::common::sealcheck_bin())
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("recipe a (id 1, the start recipe): the models of [models.*]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("recipe b (id 2): models opened with"),
        "{stdout}"
    );

    let broken = format!(
        "{VALID}\n[recipes.a]\nid = 1\n[recipes.b]\nid = 2\nclassifier = \"broken.onnx\"\n"
    );
    let config = write_config(dir.path(), &broken);
    for name in ["seg.onnx", "cls.onnx"] {
        std::fs::copy(models.join(name), dir.path().join(name)).unwrap();
    }
    let out = Command::new(crate::common::sealcheck_bin())
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("[recipes.b]: its models do not open"),
        "{stderr}"
    );
}
