//! The second stage: raw sections to the typed `Config`, with every path
//! resolved against the config file's folder and every file checked to exist.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::de::DeTable;

use super::raw::{Problems, Section};
use super::*;

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Validates config text as if it were read from `path` (relative paths resolve
/// against `path`'s folder). Returns every problem found, not just the first.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let invalid = |problems| ConfigError::Invalid {
        path: path.to_path_buf(),
        problems,
    };
    let problems = Problems::new(text);
    let doc = match DeTable::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            problems.at(
                e.span(),
                "",
                format!("TOML syntax error: {}", e.message().trim()),
            );
            return Err(invalid(problems.into_vec()));
        }
    };
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let root = Section::root(&doc, &problems);
    let files = Files { base: &base };

    let decision = read_decision(&root.section("decision"), None);
    let cameras = read_cameras(&root, &files, decision.as_ref());
    let inference = read_inference(&root.section("inference"), &files);
    let models = root.section("models");
    let segmentation = read_segmentation(&models.section("segmentation"), &files);
    let classifier = read_classifier(&models.section("classifier"), &files);
    let acceptance_images = models.opt_str("acceptance_images").and_then(|dir| {
        let dir = files.resolve(&dir);
        if dir.is_dir() {
            Some(dir)
        } else {
            models.problem("acceptance_images", format!("folder {} does not exist (relative paths resolve against the config file's folder); it holds labelled frames new models must pass on reload", dir.display()));
            None
        }
    });
    models.finish();
    let output = read_output(&root.section("output"), &files);
    let logging = read_logging(&root.section("logging"));
    let service = read_service(&root.section("service"));
    let evaluate = read_evaluate(&root.section("evaluate"));
    let mqtt = root
        .has("mqtt")
        .then(|| read_mqtt(&root.section("mqtt"), &files));
    let status = read_status(&root, "status");
    let archive = read_archive(&root, "archive", &files);
    let shadow = read_shadow(&root, "shadow", &files, inference.as_ref());
    let inference = inference.map(|mut inference| {
        if inference.max_batch == 0 {
            let cameras = cameras.as_ref().map_or(1, Vec::len);
            inference.max_batch = cameras.clamp(1, DEFAULT_BATCH_CAP);
        }
        inference
    });
    let (segmentation, classifier) = match &inference {
        Some(i) if i.precision == EnginePrecision::Fp16 => (
            segmentation.and_then(|m| {
                fp16_model(&models, "segmentation", m.path.clone())
                    .map(|path| SegmentationModel { path, ..m })
            }),
            classifier.and_then(|m| {
                fp16_model(&models, "classifier", m.path.clone())
                    .map(|path| ClassifierModel { path, ..m })
            }),
        ),
        _ => (segmentation, classifier),
    };
    root.finish();

    match (
        cameras,
        inference,
        segmentation,
        classifier,
        decision,
        output,
        logging,
        service,
        evaluate,
    ) {
        (
            Some(cameras),
            Some(inference),
            Some(segmentation),
            Some(classifier),
            Some(decision),
            Some(output),
            Some(logging),
            Some(service),
            Some(evaluate),
        ) if problems.is_empty()
            && !matches!(mqtt, Some(None))
            && status.is_some()
            && archive.is_some()
            && shadow.is_some() =>
        {
            Ok(Config {
                path: path.to_path_buf(),
                cameras,
                inference,
                segmentation,
                classifier,
                decision,
                output,
                logging,
                service,
                evaluate,
                acceptance_images,
                mqtt: mqtt.flatten(),
                status: status.flatten(),
                archive: archive.flatten(),
                shadow: shadow.flatten(),
            })
        }
        _ => Err(invalid(problems.into_vec())),
    }
}

/// Resolves paths against the config's folder and checks that inputs exist.
struct Files<'a> {
    base: &'a Path,
}

impl Files<'_> {
    fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        }
    }

    /// A file that must exist at start.
    fn existing(&self, s: &Section, key: &str, what: &str) -> Option<PathBuf> {
        let path = self.resolve(&s.str_required(key, what)?);
        if path.is_file() {
            Some(path)
        } else {
            s.problem(key, format!("file {} does not exist (relative paths resolve against the config file's folder)", path.display()));
            None
        }
    }
}

/// The FP16 file of a named model (`precision = "fp16"`), which must exist.
fn fp16_model(models: &Section, key: &str, fp32: PathBuf) -> Option<PathBuf> {
    let fp16 = fp16_sibling(&fp32);
    if fp16.is_file() {
        return Some(fp16);
    }
    models.problem(
        key,
        format!(
            "[inference] precision = \"fp16\" runs {} beside {}, which does not exist: make it with scripts/export_batch_fp16.py, or leave precision out",
            fp16.display(),
            fp32.display()
        ),
    );
    None
}

/// `[source]` (one camera) or `[cameras.NAME]` tables (several), never both.
fn read_cameras(
    root: &Section,
    files: &Files,
    decision: Option<&DecisionConfig>,
) -> Option<Vec<CameraConfig>> {
    if !root.has("cameras") {
        let source = read_source(&root.section("source"), files);
        return Some(vec![CameraConfig {
            name: None,
            source: source?,
            decision: *decision?,
        }]);
    }
    let tables = root.section("cameras");
    if root.has("source") {
        root.section("source");
        root.problem(
            "source",
            "a config has either [source] (one camera) or [cameras.NAME] tables (several), not both: move this source into a [cameras.NAME] table",
        );
    }
    let names = tables.keys_in_file_order();
    if names.is_empty() {
        root.problem(
            "cameras",
            "[cameras] names no camera: add a [cameras.NAME] table per camera (the keys of [source]), or remove [cameras] and use [source]",
        );
        return None;
    }
    let mut cameras = Some(Vec::with_capacity(names.len()));
    for name in names {
        let problem = camera_name_problem(&name);
        let valid = problem.is_none();
        if let Some(problem) = problem {
            tables.problem(&name, format!("camera name \"{name}\" {problem}"));
        }
        let table = tables.section(&name);
        let own_decision = read_decision(&table.section("decision"), decision);
        let source = read_source(&table, files);
        cameras = match (cameras, source, own_decision) {
            (Some(mut list), Some(source), Some(decision)) if valid => {
                list.push(CameraConfig {
                    name: Some(name),
                    source,
                    decision,
                });
                Some(list)
            }
            _ => None,
        };
    }
    cameras
}

fn read_source(s: &Section, files: &Files) -> Option<SourceConfig> {
    const KINDS: [&str; 7] = ["test", "file", "images", "v4l2", "rtsp", "pipeline", "csi"];
    let kind_index = s.choice("kind", &KINDS, None);
    let kind = kind_index.and_then(|kind| read_source_kind(s, files, kind));
    let default_overflow = if kind.as_ref().is_some_and(SourceKind::is_live) {
        1
    } else {
        0
    };
    let overflow = s
        .choice("overflow", &["block", "drop"], Some(default_overflow))
        .map(|i| match i {
            0 => OverflowPolicy::Block,
            _ => OverflowPolicy::Drop,
        });
    let pool_size = s.int_in("pool_size", 2..=64, Some(4));
    let recovery = read_recovery(s);
    // Which keys belong in [source] depends on the kind: judge them only once it is known.
    if kind_index.is_some() {
        s.finish();
    }
    Some(SourceConfig {
        kind: kind?,
        overflow: overflow?,
        pool_size: pool_size? as usize,
        recovery: recovery?,
    })
}

/// `retry_min_ms`, `retry_max_ms`, `frame_timeout_ms` of `[source]` (live sources).
fn read_recovery(s: &Section) -> Option<SourceRecovery> {
    let default = SourceRecovery::default();
    let ms = |d: Duration| d.as_millis() as i64;
    let retry_min = s.int_in("retry_min_ms", 10..=600_000, Some(ms(default.retry_min)));
    let retry_max = s.int_in("retry_max_ms", 10..=3_600_000, Some(ms(default.retry_max)));
    let frame_timeout = if s.has("frame_timeout_ms") {
        Some(s.int_in("frame_timeout_ms", 100..=3_600_000, None)?)
    } else {
        s.int_in("frame_timeout_ms", 0..=0, Some(0));
        None
    };
    let (retry_min, retry_max) = (retry_min?, retry_max?);
    if retry_min > retry_max {
        s.problem(
            "retry_min_ms",
            format!("({retry_min}) must not exceed retry_max_ms ({retry_max})"),
        );
        return None;
    }
    Some(SourceRecovery {
        retry_min: Duration::from_millis(retry_min as u64),
        retry_max: Duration::from_millis(retry_max as u64),
        frame_timeout: frame_timeout.map(|ms| Duration::from_millis(ms as u64)),
    })
}

fn read_source_kind(s: &Section, files: &Files, kind: usize) -> Option<SourceKind> {
    let kind = match kind {
        0 => {
            let pattern = s.str_or("pattern", "smpte");
            let width = s.int_in("width", 16..=7680, Some(1280));
            let height = s.int_in("height", 16..=4320, Some(720));
            let framerate = s.int_in("framerate", 1..=240, Some(30));
            let num_buffers = s.int_in("num_buffers", 0..=u32::MAX as i64, Some(0));
            SourceKind::Test {
                pattern,
                width: width? as u32,
                height: height? as u32,
                framerate: framerate? as u32,
                num_buffers: num_buffers? as u32,
            }
        }
        1 => SourceKind::File {
            path: files.existing(s, "path", "the video file to read")?,
        },
        2 => {
            let location = s.str_required(
                "location",
                "a numbered file pattern such as \"frames/frame_%05d.jpg\"",
            );
            let framerate = s.int_in("framerate", 1..=240, Some(30));
            let (location, framerate) = (files.resolve(&location?), framerate? as u32);
            let first = image_sequence::image_file(&location, 0);
            if !image_sequence::is_numbered(&location) {
                s.problem(
                    "location",
                    "must contain a printf-style index such as %05d (e.g. \"frame_%05d.jpg\")",
                );
                return None;
            }
            if !first.is_file() {
                s.problem(
                    "location",
                    format!("the first image {} does not exist", first.display()),
                );
                return None;
            }
            SourceKind::Images {
                location,
                framerate,
            }
        }
        3 => SourceKind::V4l2 {
            device: PathBuf::from(s.str_or("device", "/dev/video0")),
            caps: s.opt_str("caps"),
        },
        4 => {
            let url = s.str_required("url", "the camera's rtsp:// URL");
            let latency_ms = s.int_in("latency_ms", 0..=10_000, Some(200));
            let url = url?;
            if !url.starts_with("rtsp://") && !url.starts_with("rtsps://") {
                s.problem(
                    "url",
                    format!("\"{url}\" is not an rtsp:// or rtsps:// URL"),
                );
            }
            SourceKind::Rtsp {
                url,
                latency_ms: latency_ms? as u32,
            }
        }
        6 => {
            let sensor_id = s.int_in("sensor_id", 0..=7, Some(0));
            let width = s.int_in("width", 16..=7680, Some(1920));
            let height = s.int_in("height", 16..=4320, Some(1080));
            let framerate = s.int_in("framerate", 1..=240, Some(30));
            SourceKind::Csi {
                sensor_id: sensor_id? as u32,
                width: width? as u32,
                height: height? as u32,
                framerate: framerate? as u32,
            }
        }
        _ => {
            let description = s.str_required(
                "pipeline",
                "a GStreamer launch description ending in \"appsink name=sink\"",
            )?;
            if !description.contains("name=sink") {
                s.problem(
                    "pipeline",
                    "must end in an appsink named sink (\"... ! appsink name=sink\")",
                );
            }
            // A camera behind a user pipeline: drops by default and is rebuilt when lost.
            let live = s.bool_or("live", false);
            SourceKind::Pipeline { description, live }
        }
    };
    Some(kind)
}

fn read_inference(s: &Section, files: &Files) -> Option<InferenceConfig> {
    const BACKENDS: [BackendChoice; 4] = [
        BackendChoice::Auto,
        BackendChoice::TensorRt,
        BackendChoice::OnnxRuntime,
        BackendChoice::Tract,
    ];
    const DEVICES: [ComputeDevice; 2] = [ComputeDevice::Cpu, ComputeDevice::Cuda];
    let backend = s
        .choice(
            "backend",
            &["auto", "tensorrt", "onnxruntime", "tract"],
            Some(0),
        )
        .map(|i| BACKENDS[i]);
    let device = s
        .choice("device", &["cpu", "cuda"], Some(0))
        .map(|i| DEVICES[i]);
    let preprocess = s
        .choice("preprocess", &["cpu", "cuda"], Some(0))
        .map(|i| DEVICES[i]);
    let threads = s.int_in("threads", 0..=256, Some(0));
    let frames_in_flight = s.int_in("frames_in_flight", 1..=2, Some(2));
    // 0: not given (one frame per camera, decided once the cameras are read).
    let max_batch = if s.has("max_batch") {
        s.int_in("max_batch", 1..=MAX_BATCH as i64, None)
    } else {
        Some(0)
    };
    let batch_wait_us = s.int_in("batch_wait_us", 0..=100_000, Some(0));
    let precision = s
        .choice("precision", &["fp32", "fp16"], Some(0))
        .map(|i| [EnginePrecision::Fp32, EnginePrecision::Fp16][i]);
    if precision == Some(EnginePrecision::Fp16) {
        match backend {
            Some(BackendChoice::TensorRt) => s.problem(
                "precision",
                "TensorRT builds its engine at [inference.tensorrt] precision: set it there and leave [inference] precision out",
            ),
            Some(BackendChoice::Tract) => s.problem(
                "precision",
                "tract runs FP32 only: use backend = \"onnxruntime\" (device = \"cuda\") for FP16, or leave precision out",
            ),
            _ => {}
        }
    }
    let tensorrt = read_tensorrt(&s.section("tensorrt"), files);
    let onnxruntime = read_onnxruntime(&s.section("onnxruntime"));
    let onnxruntime_library = if s.has("onnxruntime_library") {
        Some(files.existing(s, "onnxruntime_library", "path of libonnxruntime.so"))
    } else {
        s.opt_str("onnxruntime_library");
        None
    };
    s.finish();
    Some(InferenceConfig {
        backend: backend?,
        device: device?,
        preprocess: preprocess?,
        threads: threads? as usize,
        frames_in_flight: frames_in_flight? as usize,
        max_batch: max_batch? as usize,
        batch_wait: Duration::from_micros(batch_wait_us? as u64),
        precision: precision?,
        tensorrt: tensorrt?,
        onnxruntime: onnxruntime?,
        onnxruntime_library: match onnxruntime_library {
            Some(found) => Some(found?),
            None => None,
        },
    })
}

fn read_onnxruntime(s: &Section) -> Option<OnnxRuntimeConfig> {
    const LEVELS: [GraphOptimization; 4] = [
        GraphOptimization::Disable,
        GraphOptimization::Basic,
        GraphOptimization::Extended,
        GraphOptimization::All,
    ];
    const ARENA: [ArenaExtend; 2] = [ArenaExtend::NextPowerOfTwo, ArenaExtend::SameAsRequested];
    const SEARCH: [ConvAlgoSearch; 3] = [
        ConvAlgoSearch::Exhaustive,
        ConvAlgoSearch::Heuristic,
        ConvAlgoSearch::Default,
    ];
    let default = OnnxRuntimeConfig::default();
    let graph_optimization = s
        .choice(
            "graph_optimization",
            &["disable", "basic", "extended", "all"],
            Some(3),
        )
        .map(|i| LEVELS[i]);
    let memory_pattern = s.bool_or("memory_pattern", default.memory_pattern);
    let cuda_arena_extend_strategy = s
        .choice(
            "cuda_arena_extend_strategy",
            &["next_power_of_two", "same_as_requested"],
            Some(0),
        )
        .map(|i| ARENA[i]);
    let cuda_mem_limit_mib = s.int_in("cuda_mem_limit_mib", 0..=1_048_576, Some(0));
    let cudnn_conv_algo_search = s
        .choice(
            "cudnn_conv_algo_search",
            &["exhaustive", "heuristic", "default"],
            Some(0),
        )
        .map(|i| SEARCH[i]);
    let cuda_tf32 = s.bool_or("cuda_tf32", default.cuda_tf32);
    let cuda_graph = s.bool_or("cuda_graph", default.cuda_graph);
    let cuda_prefer_nhwc = s.bool_or("cuda_prefer_nhwc", default.cuda_prefer_nhwc);
    s.finish();
    Some(OnnxRuntimeConfig {
        graph_optimization: graph_optimization?,
        memory_pattern,
        cuda_arena_extend_strategy: cuda_arena_extend_strategy?,
        cuda_mem_limit_mib: cuda_mem_limit_mib? as u64,
        cudnn_conv_algo_search: cudnn_conv_algo_search?,
        cuda_tf32,
        cuda_graph,
        cuda_prefer_nhwc,
    })
}

fn read_tensorrt(s: &Section, files: &Files) -> Option<TensorRtConfig> {
    const PRECISIONS: [EnginePrecision; 3] = [
        EnginePrecision::Fp32,
        EnginePrecision::Fp16,
        EnginePrecision::Int8,
    ];
    let precision = s
        .choice("precision", &["fp32", "fp16", "int8"], Some(1))
        .map(|i| PRECISIONS[i]);
    let workspace_mib = s.int_in("workspace_mib", 16..=65_536, Some(1024));
    let engine_dir = s.opt_str("engine_dir").map(|d| files.resolve(&d));
    let calibration_images = s.opt_str("calibration_images").map(|d| files.resolve(&d));
    let device = s.int_in("device", 0..=63, Some(0));
    s.finish();
    if let Some(dir) = &calibration_images
        && !dir.is_dir()
    {
        s.problem(
            "calibration_images",
            format!("folder {} does not exist", dir.display()),
        );
        return None;
    }
    if precision == Some(EnginePrecision::Int8) && calibration_images.is_none() {
        s.problem(
            "precision",
            "\"int8\" needs `calibration_images`, a folder of typical frames from the line",
        );
        return None;
    }
    Some(TensorRtConfig {
        precision: precision?,
        workspace_mib: workspace_mib? as u64,
        engine_dir,
        calibration_images,
        device: device? as usize,
    })
}

const IMAGENET: Normalization = Normalization {
    mean: [0.485, 0.456, 0.406],
    std: [0.229, 0.224, 0.225],
};

fn read_normalization(s: &Section) -> Option<Normalization> {
    let mean = s.triple_in("mean", 0.0..=1.0, IMAGENET.mean);
    let std = s.triple_in("std", 1e-6..=10.0, IMAGENET.std);
    Some(Normalization {
        mean: mean?,
        std: std?,
    })
}

fn read_segmentation(s: &Section, files: &Files) -> Option<SegmentationModel> {
    let path = files.existing(s, "path", "the segmentation model (.onnx)");
    let input = s.str_or("input", "images");
    let output = s.str_or("output", "logits");
    let normalization = read_normalization(s);
    let mask_class = s.int_in("mask_class", 0..=255, Some(1));
    s.finish();
    Some(SegmentationModel {
        path: path?,
        input,
        output,
        normalization: normalization?,
        mask_class: mask_class? as usize,
    })
}

fn read_classifier(s: &Section, files: &Files) -> Option<ClassifierModel> {
    let path = files.existing(s, "path", "the classifier model (.onnx)");
    let input = s.str_or("input", "input");
    let output = s.str_or("output", "logits");
    let normalization = read_normalization(s);
    let mask_mean = s.float_in("mask_mean", -10.0..=10.0, Some(0.0));
    let mask_std = s.float_in("mask_std", 1e-6..=10.0, Some(1.0));
    let defect_class = s.int_in("defect_class", 0..=255, Some(1));
    s.finish();
    Some(ClassifierModel {
        path: path?,
        input,
        output,
        normalization: normalization?,
        mask_mean: mask_mean? as f32,
        mask_std: mask_std? as f32,
        defect_class: defect_class? as usize,
    })
}

/// `[evaluate]`: the rules `sealcheck evaluate --gate` holds a candidate to,
/// and the floors against the labels it holds every engine to.
fn read_evaluate(s: &Section) -> Option<EvaluateConfig> {
    let min_mean_mask_iou = s.float_in("min_mean_mask_iou", 0.0..=1.0, Some(0.98));
    let recall_tolerance = s.float_in("recall_tolerance", 0.0..=1.0, Some(0.0));
    let extra_label_errors = s.int_in("extra_label_errors", 0..=1_000_000, Some(0));
    // The demo models score 0.997 / 0.992 / 0 on the demo clip: room enough
    // for a model that is right, none for one with its classes swapped.
    let min_accuracy = s.float_in("min_accuracy", 0.0..=1.0, Some(0.95));
    let min_defect_recall = s.float_in("min_defect_recall", 0.0..=1.0, Some(0.95));
    let max_false_reject_rate = s.float_in("max_false_reject_rate", 0.0..=1.0, Some(0.05));
    s.finish();
    Some(EvaluateConfig {
        min_mean_mask_iou: min_mean_mask_iou?,
        recall_tolerance: recall_tolerance?,
        extra_label_errors: extra_label_errors? as u64,
        min_accuracy: min_accuracy?,
        min_defect_recall: min_defect_recall?,
        max_false_reject_rate: max_false_reject_rate?,
    })
}

/// `[decision]`, or a camera's `decision` sub-table over `base` (the
/// station's `[decision]`): a key left out takes `base`'s value.
fn read_decision(s: &Section, base: Option<&DecisionConfig>) -> Option<DecisionConfig> {
    let base = base.copied().unwrap_or(DecisionConfig::DEFAULT);
    let defect_threshold = s.float_in("defect_threshold", 0.0..=1.0, Some(base.defect_threshold));
    let no_seal_below = s.float_in("no_seal_below", 0.0..=1.0, Some(base.no_seal_below));
    let min_seal_area = s.float_in("min_seal_area", 0.0..=1.0, Some(base.min_seal_area));
    let max_seal_area = s.float_in("max_seal_area", 0.0..=1.0, Some(base.max_seal_area));
    let base_deadline = base.deadline.map_or(0, |d| d.as_millis() as i64);
    let deadline_ms = s.int_in("deadline_ms", 0..=60_000, Some(base_deadline));
    s.finish();
    let d = DecisionConfig {
        defect_threshold: defect_threshold?,
        no_seal_below: no_seal_below?,
        min_seal_area: min_seal_area?,
        max_seal_area: max_seal_area?,
        deadline: match deadline_ms? {
            0 => None,
            ms => Some(Duration::from_millis(ms as u64)),
        },
    };
    if d.no_seal_below > d.min_seal_area {
        s.problem(
            "no_seal_below",
            format!(
                "({}) must not exceed min_seal_area ({})",
                d.no_seal_below, d.min_seal_area
            ),
        );
        return None;
    }
    if d.min_seal_area >= d.max_seal_area {
        s.problem(
            "min_seal_area",
            format!(
                "({}) must be below max_seal_area ({})",
                d.min_seal_area, d.max_seal_area
            ),
        );
        return None;
    }
    Some(d)
}

fn read_output(s: &Section, files: &Files) -> Option<OutputConfig> {
    let results = s.str_required("results", "the JSON-lines results file to append to");
    let flush_each_line = s.bool_or("flush_each_line", false);
    let log_verdicts = s.bool_or("log_verdicts", true);
    let max_mib = s.int_in("rotate_mib", 0..=1_048_576, Some(256));
    let keep_files = s.int_in("keep_files", 1..=1000, Some(8));
    s.finish();
    let results = files.resolve(&results?);
    match results.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            s.problem(
                "results",
                format!(
                    "folder {} does not exist; create it or choose another path",
                    dir.display()
                ),
            );
            None
        }
        _ => Some(OutputConfig {
            results,
            flush_each_line,
            log_verdicts,
            rotation: ResultsRotation {
                max_mib: max_mib? as u64,
                keep_files: keep_files? as u32,
            },
        }),
    }
}

fn read_logging(s: &Section) -> Option<LoggingConfig> {
    let format = s
        .choice("format", &["logfmt", "json"], Some(0))
        .map(|i| [LogFormat::Logfmt, LogFormat::Json][i]);
    let level = s.str_or("level", "info");
    s.finish();
    Some(LoggingConfig {
        format: format?,
        level,
    })
}

fn read_service(s: &Section) -> Option<ServiceConfig> {
    let drain = s.float_in("drain_timeout_s", 0.1..=600.0, Some(10.0));
    let stall = s.float_in("stall_timeout_s", 0.1..=600.0, Some(5.0));
    s.finish();
    Some(ServiceConfig {
        drain_timeout: Duration::from_secs_f64(drain?),
        stall_timeout: Duration::from_secs_f64(stall?),
    })
}

fn read_mqtt(s: &Section, files: &Files) -> Option<MqttConfig> {
    let url = s.str_required("url", "the broker, e.g. \"mqtt://192.168.1.10:1883\"");
    let ca_file = s.opt_str("ca_file").map(|p| files.resolve(&p));
    let host = host_name();
    let client_id = s.str_or("client_id", &host);
    let topic = s.str_or("topic", &format!("sealcheck/{host}"));
    let qos = s.int_in("qos", 0..=1, Some(1));
    let username = s.opt_str("username");
    let password_file = s.opt_str("password_file").map(|p| files.resolve(&p));
    let cert_file = s.opt_str("cert_file").map(|p| files.resolve(&p));
    let key_file = s.opt_str("key_file").map(|p| files.resolve(&p));
    let keep_alive = s.int_in("keep_alive_s", 5..=3600, Some(10));
    let queue = s.int_in("queue", 1..=100_000, Some(256));
    s.finish();
    let broker = url.and_then(|url| match parse_mqtt_url(&url) {
        Ok((tls, host, port)) => Some((tls, host, port)),
        Err(message) => {
            s.problem("url", message);
            None
        }
    });
    let tls_ca_file = match (&broker, ca_file) {
        (Some((true, ..)), None) => {
            s.problem(
                "url",
                "mqtts:// needs `ca_file`, the PEM file of the certificate authority that signed the broker's certificate",
            );
            return None;
        }
        (Some((false, ..)), Some(_)) => {
            s.problem(
                "ca_file",
                "is only used with an mqtts:// url; use mqtts:// or remove ca_file",
            );
            return None;
        }
        (_, Some(ca)) if !ca.is_file() => {
            s.problem("ca_file", format!("file {} does not exist", ca.display()));
            return None;
        }
        (_, ca) => ca,
    };
    if client_id.is_empty() || client_id.len() > 256 || client_id.starts_with(char::is_whitespace) {
        s.problem(
            "client_id",
            "must be 1 to 256 characters, not starting with a space",
        );
        return None;
    }
    if topic.is_empty()
        || topic.contains(['+', '#', '\0'])
        || topic.starts_with('$')
        || topic.ends_with('/')
    {
        s.problem(
            "topic",
            format!("\"{topic}\" is not a topic to publish under: no + or # wildcards, no leading $, no trailing /"),
        );
        return None;
    }
    let client_certificate = match (cert_file, key_file) {
        (None, None) => None,
        (Some(_), None) => {
            s.problem(
                "cert_file",
                "needs `key_file` too: the private key of this client's certificate",
            );
            return None;
        }
        (None, Some(_)) => {
            s.problem(
                "key_file",
                "needs `cert_file` too: the certificate this key belongs to",
            );
            return None;
        }
        (Some(cert_file), Some(key_file)) => {
            if tls_ca_file.is_none() {
                s.problem(
                    "cert_file",
                    "a client certificate is only used with an mqtts:// url; use mqtts:// (with ca_file) or remove cert_file and key_file",
                );
                return None;
            }
            for (key, path) in [("cert_file", &cert_file), ("key_file", &key_file)] {
                if !path.is_file() {
                    s.problem(key, format!("file {} does not exist", path.display()));
                    return None;
                }
            }
            Some(ClientCertificate {
                cert_file,
                key_file,
            })
        }
    };
    if password_file.is_some() && username.is_none() {
        s.problem(
            "password_file",
            "needs `username`: the broker checks the password of a named user",
        );
        return None;
    }
    let (_, host, port) = broker?;
    Some(MqttConfig {
        broker: MqttBroker {
            host,
            port,
            tls_ca_file,
        },
        client_id,
        topic,
        qos: qos? as u8,
        username,
        password_file,
        client_certificate,
        keep_alive: Duration::from_secs(keep_alive? as u64),
        queue: queue? as usize,
    })
}

/// `mqtt://host[:port]` or `mqtts://host[:port]` to (tls, host, port). The
/// message never repeats the URL: one with a password in it must not reach a log.
///
/// Not rumqttc's `MqttOptions::parse_url` (issue 22 looked): it sits behind
/// rumqttc's `url` feature, which brings in 26 crates (url, idna and the ICU
/// tables), and it takes what this must refuse: `tcp://` and `ssl://`, a
/// user and password in the URL, a path (ignored), port 0; it wants
/// `?client_id=` in the URL, keeps the brackets of an IPv6 host, and says
/// "Unsupported URL scheme." where a technician needs what to write.
fn parse_mqtt_url(url: &str) -> Result<(bool, String, u16), String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("mqtt://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("mqtts://") {
        (true, rest)
    } else {
        return Err(
            "must start with mqtt:// or mqtts:// (e.g. \"mqtt://192.168.1.10:1883\")".into(),
        );
    };
    if rest.contains('@') {
        return Err("must not hold a user name or password: set `username`, and put the password in a file named by `password_file`".into());
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#']) {
        return Err("must be only mqtt://host:port (no path or query)".into());
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or("has an IPv6 address without its closing ]")?;
        (host, after.strip_prefix(':'))
    } else {
        match rest.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        }
    };
    if host.is_empty()
        || host.contains(|c: char| c.is_whitespace() || c == ':' && !rest.starts_with('['))
    {
        return Err("has no valid host name or address".into());
    }
    let port = match port {
        None => {
            if tls {
                8883
            } else {
                1883
            }
        }
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err("has a port that is not a number from 1 to 65535".into()),
        },
    };
    Ok((tls, host.to_string(), port))
}

/// This machine's host name (the default client id and topic), or "sealcheck".
pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length, which is what we pass;
    // gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(name) if rc == 0 && !name.is_empty() => name.to_string(),
        _ => "sealcheck".to_string(),
    }
}

/// `[status]`, absent = off: `Some(None)`; a problem: `None`.
fn read_status(root: &Section, key: &str) -> Option<Option<StatusConfig>> {
    if !root.has(key) {
        root.section(key);
        return Some(None);
    }
    let s = root.section(key);
    let listen = s.str_required(
        "listen",
        "the address and port to serve on, e.g. \"127.0.0.1:9750\" (loopback only)",
    );
    s.finish();
    let listen = listen?;
    match listen.parse::<std::net::SocketAddr>() {
        Ok(listen) => Some(Some(StatusConfig { listen })),
        Err(_) => {
            s.problem(
                "listen",
                format!(
                    "\"{listen}\" is not an address and port; use e.g. \"127.0.0.1:9750\" \
                     (or \"0.0.0.0:9750\" to be reachable from the network)"
                ),
            );
            None
        }
    }
}

/// `[archive]`, absent = off: `Some(None)`; a problem: `None`.
fn read_archive(root: &Section, key: &str, files: &Files) -> Option<Option<ArchiveConfig>> {
    if !root.has(key) {
        root.section(key);
        return Some(None);
    }
    let s = root.section(key);
    let dir = s.str_required("dir", "the folder archived frames are written under");
    let keep = s
        .choice("keep", &["fail", "all", "none"], Some(0))
        .map(|i| [ArchiveKeep::Fail, ArchiveKeep::All, ArchiveKeep::None][i]);
    let format = s
        .choice("format", &["jpeg", "png"], Some(0))
        .map(|i| [ImageFormat::Jpeg, ImageFormat::Png][i]);
    let max_mib = s.int_in("max_mib", 1..=16_777_216, Some(10_240));
    let min_free_mib = s.int_in("min_free_mib", 0..=16_777_216, Some(1024));
    s.finish();
    let dir = files.resolve(&dir?);
    if let Some(parent) = dir.parent()
        && !parent.as_os_str().is_empty()
        && !parent.is_dir()
    {
        s.problem(
            "dir",
            format!(
                "folder {} does not exist; create it or choose another path",
                parent.display()
            ),
        );
        return None;
    }
    Some(Some(ArchiveConfig {
        dir,
        keep: keep?,
        format: format?,
        max_mib: max_mib? as u64,
        min_free_mib: min_free_mib? as u64,
    }))
}

/// `[shadow]`, absent = off: `Some(None)`; a problem: `None`. Engine
/// combinations that cannot run are refused here, naming the key, as
/// `sealcheck evaluate` refuses the same specs.
fn read_shadow(
    root: &Section,
    key: &str,
    files: &Files,
    inference: Option<&InferenceConfig>,
) -> Option<Option<ShadowConfig>> {
    if !root.has(key) {
        root.section(key);
        return Some(None);
    }
    let s = root.section(key);
    let model = |key: &str, what: &str| {
        if s.has(key) {
            Some(files.existing(&s, key, what))
        } else {
            s.opt_str(key);
            None
        }
    };
    let segmentation = model("segmentation", "the shadow's segmentation model (.onnx)");
    let classifier = model("classifier", "the shadow's classifier model (.onnx)");
    let backend = s.has("backend").then(|| {
        s.choice(
            "backend",
            &["auto", "tensorrt", "onnxruntime", "tract"],
            None,
        )
        .map(|i| {
            [
                BackendChoice::Auto,
                BackendChoice::TensorRt,
                BackendChoice::OnnxRuntime,
                BackendChoice::Tract,
            ][i]
        })
    });
    let device = s.has("device").then(|| {
        s.choice("device", &["cpu", "cuda"], None)
            .map(|i| [ComputeDevice::Cpu, ComputeDevice::Cuda][i])
    });
    let precision = s.has("precision").then(|| {
        s.choice("precision", &["fp32", "fp16", "int8"], None)
            .map(|i| {
                [
                    EnginePrecision::Fp32,
                    EnginePrecision::Fp16,
                    EnginePrecision::Int8,
                ][i]
            })
    });
    let every = s.int_in("every", 1..=1_000_000, Some(1));
    s.finish();
    let shadow = ShadowConfig {
        segmentation: given(segmentation)?,
        classifier: given(classifier)?,
        backend: given(backend)?,
        device: given(device)?,
        precision: given(precision)?,
        every: every? as u64,
    };
    let inference = inference?;
    let runs = shadow.backend.unwrap_or(inference.backend);
    let on = shadow.device.unwrap_or(inference.device);
    let refuse = |key: &str, why: &str| {
        s.problem(key, why.to_string());
        None
    };
    match (runs, shadow.precision) {
        (BackendChoice::Tract, _) if on == ComputeDevice::Cuda && shadow.device.is_some() => {
            refuse(
                "device",
                "tract runs on the CPU only; use backend = \"onnxruntime\" for cuda",
            )
        }
        (BackendChoice::Tract, Some(p)) if p != EnginePrecision::Fp32 => refuse(
            "precision",
            "tract runs FP32 only; use backend = \"onnxruntime\" for int8 (the _int8 models) or \"tensorrt\"",
        ),
        (BackendChoice::OnnxRuntime | BackendChoice::Auto, Some(EnginePrecision::Fp16)) => refuse(
            "precision",
            "ONNX Runtime takes the precision of the model file: name FP16 model files in segmentation and classifier and leave precision out",
        ),
        (BackendChoice::TensorRt, _) if shadow.device == Some(ComputeDevice::Cpu) => {
            refuse("device", "TensorRT runs on an NVIDIA GPU (cuda) only")
        }
        (BackendChoice::TensorRt, Some(EnginePrecision::Int8))
            if inference.tensorrt.calibration_images.is_none() =>
        {
            refuse(
                "precision",
                "a TensorRT \"int8\" shadow needs [inference.tensorrt] calibration_images, a folder of typical frames from the line",
            )
        }
        _ => Some(Some(shadow)),
    }
}

/// An optional key: absent `Some(None)`, valid `Some(Some(v))`, a problem `None`.
fn given<T>(key: Option<Option<T>>) -> Option<Option<T>> {
    key.map_or(Some(None), |value| value.map(Some))
}

#[cfg(test)]
mod mqtt_url_tests {
    use super::parse_mqtt_url;

    #[test]
    fn urls_with_and_without_port_and_tls() {
        assert_eq!(
            parse_mqtt_url("mqtt://broker.local").unwrap(),
            (false, "broker.local".into(), 1883)
        );
        assert_eq!(
            parse_mqtt_url("mqtts://10.0.0.2:8884").unwrap(),
            (true, "10.0.0.2".into(), 8884)
        );
        assert_eq!(
            parse_mqtt_url("mqtt://[::1]:1999").unwrap(),
            (false, "::1".into(), 1999)
        );
    }

    #[test]
    fn bad_urls_are_refused_without_repeating_them() {
        for bad in [
            "http://x",
            "mqtt://",
            "mqtt://h:0",
            "mqtt://h:port",
            "mqtt://h/x",
            "mqtt://u:secret@h",
        ] {
            let e = parse_mqtt_url(bad).unwrap_err();
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
