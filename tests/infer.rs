//! Inference backends: ONNX Runtime (CPU) must agree with tract, the reference,
//! on the same models and inputs; every way a model or engine can be wrong
//! must stop the start with a message naming the file and the fix.
//!
//! Models: the demo models in models/ when present, else small Conv+Resize
//! models with the same contract shapes, written by python3 + onnx.
//! ONNX Runtime: found the way the service finds it (`make test` sets
//! ORT_DYLIB_PATH to .ort/lib); without it the ONNX Runtime tests print SKIPPED.

use crate::common;

use common::repo;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sealcheck::config::{self, Config};
use sealcheck::infer::{self, BackendKind, InferError, InferenceBackend, ModelRole};

/// Writes small ONNX models with the demo's contract: seg 1x3xHxW -> 1x2xHxW
/// (strided Conv, Relu, Conv, bilinear Resize x2), cls 1x4xHxW -> 1x2
/// (Conv, Relu, GlobalAveragePool, Flatten, Gemm). Weights are seeded.
const MODEL_GEN: &str = r#"
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper as nh

kind, out, in_name, out_name, c, h, w = sys.argv[1:8]
c, h, w = int(c), int(h), int(w)
mode = sys.argv[8] if len(sys.argv) > 8 else ""
rng = np.random.default_rng(7 if kind == "seg" else 11)
def init(name, shape, scale):
    return nh.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
batch = "N" if mode in ("dynamic", "dynamic_h") else 1
hh = "H" if mode == "dynamic_h" else h
x = helper.make_tensor_value_info(in_name, TensorProto.FLOAT, [batch, c, hh, w])
if kind == "seg":
    inits = [init("w1", [8, c, 3, 3], 0.3), init("b1", [8], 0.1), init("w2", [2, 8, 3, 3], 0.3), init("b2", [2], 0.1),
             nh.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    nodes = [
        helper.make_node("Conv", [in_name, "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Resize", ["c2", "", "scales"], [out_name], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
    ]
    y = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, [batch, 2, hh, w])
else:
    inits = [init("w1", [8, c, 3, 3], 0.3), init("b1", [8], 0.1), init("wg", [2, 8], 0.5), init("bg", [2], 0.1)]
    nodes = [
        helper.make_node("Conv", [in_name, "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("GlobalAveragePool", ["r1"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wg", "bg"], [out_name], transB=1),
    ]
    y = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, [batch, 2])
graph = helper.make_graph(nodes, kind, [x], [y], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model)
onnx.save(model, out)
"#;

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Writes one generated model; `extra` may be "dynamic" (batch dimension
/// named N) or "dynamic_h" (the height named H too).
fn gen_model(
    dir: &Path,
    file: &str,
    kind: &str,
    names: (&str, &str),
    chw: [usize; 3],
    extra: &str,
) -> PathBuf {
    let script = dir.join("gen_model.py");
    std::fs::write(&script, MODEL_GEN).unwrap();
    let path = dir.join(file);
    let status = Command::new(python())
        .arg(&script)
        .args([kind, path.to_str().unwrap(), names.0, names.1])
        .args(chw.iter().map(|d| d.to_string()))
        .arg(extra)
        .status()
        .expect("python3 (with numpy and onnx) is needed to generate test models");
    assert!(status.success(), "generating {file} failed");
    path
}

/// The models the parity test runs: the demo ones when both exist.
struct Models {
    seg: PathBuf,
    cls: PathBuf,
    what: &'static str,
    _dir: Option<tempfile::TempDir>,
}

fn models() -> Models {
    let (seg, cls) = (
        repo().join("models/seg.onnx"),
        repo().join("models/cls.onnx"),
    );
    if seg.is_file() && cls.is_file() {
        return Models {
            seg,
            cls,
            what: "demo models (models/seg.onnx, models/cls.onnx)",
            _dir: None,
        };
    }
    let dir = tempfile::tempdir().unwrap();
    let seg = gen_model(
        dir.path(),
        "seg.onnx",
        "seg",
        ("images", "logits"),
        [3, 640, 640],
        "",
    );
    let cls = gen_model(
        dir.path(),
        "cls.onnx",
        "cls",
        ("input", "logits"),
        [4, 224, 512],
        "",
    );
    Models {
        seg,
        cls,
        what: "generated Conv+Resize models (models/ has no demo models)",
        _dir: Some(dir),
    }
}

/// A validated config for these models; `inference` is the body of [inference].
fn config_for(dir: &Path, seg: &Path, cls: &Path, inference: &str) -> Config {
    let text = format!(
        r#"
[source]
kind = "test"

[inference]
{inference}

[models.segmentation]
path = "{}"

[models.classifier]
path = "{}"

[output]
results = "results.jsonl"
"#,
        seg.display(),
        cls.display()
    );
    let path = dir.join("sealcheck.toml");
    std::fs::write(&path, &text).unwrap();
    config::parse(&text, &path).unwrap_or_else(|e| panic!("test config invalid: {e}"))
}

/// Whether an ONNX Runtime library can be found the way the service looks for one.
fn ort_available() -> bool {
    let explicit = std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty());
    let found = match explicit {
        Some(path) => Path::new(&path).is_file(),
        None => infer::onnxruntime::discovery_candidates()
            .iter()
            .any(|(p, _)| p.is_file()),
    };
    if !found {
        common::skipped(format_args!(
            "libonnxruntime not found (run scripts/fetch_onnxruntime.sh)"
        ));
    }
    found
}

/// Deterministic values in roughly the range of normalized pixels (-2.2 .. 2.7).
fn normalized_input(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 4.9 - 2.2
        })
        .collect()
}

fn relative_error(a: &[f32], reference: &[f32]) -> f64 {
    let diff: f64 = a
        .iter()
        .zip(reference)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum();
    let norm: f64 = reference.iter().map(|y| (*y as f64).powi(2)).sum();
    (diff / norm.max(1e-30)).sqrt()
}

/// Per pixel, the class with the highest logit (logits are 1xCxHxW).
fn argmax_mask(logits: &[f32], classes: usize) -> Vec<u8> {
    let plane = logits.len() / classes;
    (0..plane)
        .map(|p| {
            let mut best = 0;
            for c in 1..classes {
                if logits[c * plane + p] > logits[best * plane + p] {
                    best = c;
                }
            }
            best as u8
        })
        .collect()
}

/// (median, fastest) milliseconds of `runs` calls after one warm-up; the
/// fastest is the better figure on a machine busy with other work.
fn time_ms(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (times[times.len() / 2], times[0])
}

fn open(cfg: &Config) -> Box<dyn InferenceBackend> {
    match infer::open_backend(cfg) {
        Ok(selection) => selection.backend,
        Err(e) => panic!("open_backend failed: {e}"),
    }
}

fn open_err(cfg: &Config) -> InferError {
    match infer::open_backend(cfg) {
        Ok(selection) => panic!(
            "expected an error, got backend {}",
            selection.backend.kind().as_str()
        ),
        Err(e) => e,
    }
}

#[test]
fn onnxruntime_cpu_matches_tract_on_random_inputs() {
    if !ort_available() {
        return;
    }
    let models = models();
    println!("models: {}", models.what);
    let dir = tempfile::tempdir().unwrap();
    let mut tract = open(&config_for(
        dir.path(),
        &models.seg,
        &models.cls,
        "backend = \"tract\"",
    ));
    let mut ort = open(&config_for(
        dir.path(),
        &models.seg,
        &models.cls,
        "backend = \"onnxruntime\"\ndevice = \"cpu\"",
    ));
    assert_eq!(tract.kind(), BackendKind::Tract);
    assert_eq!(ort.kind(), BackendKind::OnnxRuntimeCpu);
    for role in ModelRole::BOTH {
        assert_eq!(
            tract.io(role),
            ort.io(role),
            "both engines must read the same model IO"
        );
    }
    let g = infer::geometry(tract.as_ref()).unwrap();

    let mut worst = (0.0f64, 0.0f64);
    for seed in 1..=3u64 {
        let seg_in = normalized_input(g.seg_input_len(), seed);
        let (mut seg_ref, mut seg_ort) =
            (vec![0.0; g.seg_logits_len()], vec![0.0; g.seg_logits_len()]);
        tract
            .run(ModelRole::Segmentation, 1, &seg_in, &mut seg_ref)
            .unwrap();
        ort.run(ModelRole::Segmentation, 1, &seg_in, &mut seg_ort)
            .unwrap();
        let seg_err = relative_error(&seg_ort, &seg_ref);
        let (mask_ref, mask_ort) = (
            argmax_mask(&seg_ref, g.seg_classes),
            argmax_mask(&seg_ort, g.seg_classes),
        );
        let differing = mask_ref
            .iter()
            .zip(&mask_ort)
            .filter(|(a, b)| a != b)
            .count();

        let cls_in = normalized_input(g.cls_input_len(), seed + 100);
        let (mut cls_ref, mut cls_ort) = (vec![0.0; g.cls_classes], vec![0.0; g.cls_classes]);
        tract
            .run(ModelRole::Classifier, 1, &cls_in, &mut cls_ref)
            .unwrap();
        ort.run(ModelRole::Classifier, 1, &cls_in, &mut cls_ort)
            .unwrap();
        let cls_err = relative_error(&cls_ort, &cls_ref);
        println!(
            "seed {seed}: seg rel err {seg_err:.3e}, argmax differs at {differing}/{} px; cls rel err {cls_err:.3e} \
             (tract {cls_ref:?}, ort {cls_ort:?})",
            mask_ref.len()
        );
        assert!(
            seg_err < 1e-4,
            "segmentation logits differ: relative error {seg_err:.3e}"
        );
        assert!(
            cls_err < 1e-4,
            "classifier logits differ: relative error {cls_err:.3e}"
        );
        assert_eq!(differing, 0, "argmax masks differ at {differing} pixels");
        worst = (worst.0.max(seg_err), worst.1.max(cls_err));
    }
    println!(
        "worst relative error: seg {:.3e}, cls {:.3e}",
        worst.0, worst.1
    );

    // Timings for the report (release build; this machine's CPU).
    let seg_in = normalized_input(g.seg_input_len(), 9);
    let cls_in = normalized_input(g.cls_input_len(), 9);
    let mut seg_out = vec![0.0; g.seg_logits_len()];
    let mut cls_out = vec![0.0; g.cls_classes];
    for backend in [&mut tract, &mut ort] {
        let (seg_median, seg_min) = time_ms(10, || {
            backend
                .run(ModelRole::Segmentation, 1, &seg_in, &mut seg_out)
                .unwrap()
        });
        let (cls_median, cls_min) = time_ms(10, || {
            backend
                .run(ModelRole::Classifier, 1, &cls_in, &mut cls_out)
                .unwrap()
        });
        // As the pipeline calls them: one model after the other, every frame.
        let (frame_median, frame_min) = time_ms(10, || {
            backend
                .run(ModelRole::Segmentation, 1, &seg_in, &mut seg_out)
                .unwrap();
            backend
                .run(ModelRole::Classifier, 1, &cls_in, &mut cls_out)
                .unwrap();
        });
        println!(
            "{}: segment {seg_median:.1} ms (fastest {seg_min:.1}), classify {cls_median:.1} ms (fastest {cls_min:.1}), \
             both per frame {frame_median:.1} ms (fastest {frame_min:.1}); median of 10, {} CPUs",
            backend.kind().as_str(),
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
    }
}

/// Generated models for the error tests (small, so they load fast).
fn small_models(dir: &Path) -> (PathBuf, PathBuf) {
    (
        gen_model(
            dir,
            "seg.onnx",
            "seg",
            ("images", "logits"),
            [3, 64, 96],
            "",
        ),
        gen_model(dir, "cls.onnx", "cls", ("input", "logits"), [4, 32, 64], ""),
    )
}

#[test]
fn tract_runs_small_models_and_reads_their_io() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    let mut backend = open(&config_for(dir.path(), &seg, &cls, "backend = \"tract\""));
    let g = infer::geometry(backend.as_ref()).unwrap();
    assert_eq!(
        (g.seg_hw, g.seg_classes, g.cls_hw, g.cls_classes),
        ((64, 96), 2, (32, 64), 2)
    );
    let mut logits = vec![0.0; g.seg_logits_len()];
    backend
        .run(
            ModelRole::Segmentation,
            1,
            &normalized_input(g.seg_input_len(), 1),
            &mut logits,
        )
        .unwrap();
    assert!(logits.iter().all(|v| v.is_finite()) && logits.iter().any(|v| *v != 0.0));
    // A wrong-sized buffer is refused, not read past.
    let err = backend
        .run(ModelRole::Segmentation, 1, &[0.0; 10], &mut logits)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("input buffer holds 10 floats")
            && err.contains(&g.seg_input_len().to_string()),
        "{err}"
    );
}

#[test]
fn input_name_mismatch_names_both_names_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let seg = gen_model(
        dir.path(),
        "seg.onnx",
        "seg",
        ("input.1", "logits"),
        [3, 64, 96],
        "",
    );
    let cls = gen_model(
        dir.path(),
        "cls.onnx",
        "cls",
        ("input", "logits"),
        [4, 32, 64],
        "",
    );
    let err = open_err(&config_for(dir.path(), &seg, &cls, "backend = \"tract\"")).to_string();
    println!("{err}");
    for needle in [
        "\"images\"",
        "\"input.1\"",
        "[models.segmentation]",
        "input",
        &seg.display().to_string(),
    ] {
        assert!(err.contains(needle), "missing {needle:?} in: {err}");
    }
}

#[test]
fn output_name_mismatch_on_onnxruntime_too() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let seg = gen_model(
        dir.path(),
        "seg.onnx",
        "seg",
        ("images", "logits"),
        [3, 64, 96],
        "",
    );
    let cls = gen_model(
        dir.path(),
        "cls.onnx",
        "cls",
        ("input", "probs"),
        [4, 32, 64],
        "",
    );
    let err = open_err(&config_for(
        dir.path(),
        &seg,
        &cls,
        "backend = \"onnxruntime\"",
    ))
    .to_string();
    println!("{err}");
    for needle in ["\"logits\"", "\"probs\"", "[models.classifier]", "output"] {
        assert!(err.contains(needle), "missing {needle:?} in: {err}");
    }
}

#[test]
fn wrong_input_channels_is_a_shape_error() {
    let dir = tempfile::tempdir().unwrap();
    // A 3-channel classifier: the pipeline feeds RGB + mask.
    let seg = gen_model(
        dir.path(),
        "seg.onnx",
        "seg",
        ("images", "logits"),
        [3, 64, 96],
        "",
    );
    let cls = gen_model(
        dir.path(),
        "cls.onnx",
        "cls",
        ("input", "logits"),
        [3, 32, 64],
        "",
    );
    let err = open_err(&config_for(dir.path(), &seg, &cls, "backend = \"tract\"")).to_string();
    println!("{err}");
    assert!(
        err.contains("[1, 3, 32, 64]") && err.contains("[1, 4, H, W]") && err.contains("cls.onnx"),
        "{err}"
    );
}

#[test]
fn a_dynamic_batch_opens_on_both_engines_and_a_dynamic_height_is_a_shape_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = |file: &str, kind: &str, names, chw, mode: &str| {
        gen_model(dir.path(), file, kind, names, chw, mode)
    };
    let seg = model(
        "seg.onnx",
        "seg",
        ("images", "logits"),
        [3, 64, 96],
        "dynamic",
    );
    let cls = model(
        "cls.onnx",
        "cls",
        ("input", "logits"),
        [4, 32, 64],
        "dynamic",
    );
    let tall = model(
        "tall.onnx",
        "seg",
        ("images", "logits"),
        [3, 64, 96],
        "dynamic_h",
    );
    let mut backends = vec![("backend = \"tract\"", 1)];
    if ort_available() {
        // ONNX Runtime runs a dynamic batch as one run; tract one frame at a time.
        backends.push(("backend = \"onnxruntime\"", sealcheck::config::MAX_BATCH));
    }
    for (backend, max_batch) in backends {
        let cfg = config_for(dir.path(), &seg, &cls, backend);
        let engine = infer::open_backend(&cfg).unwrap().backend;
        let seg = engine.io(ModelRole::Segmentation);
        assert_eq!(seg.input_shape, vec![1, 3, 64, 96], "{backend}");
        assert_eq!(seg.batch, infer::BatchDim::Dynamic);
        assert_eq!(engine.max_batch(), max_batch, "{backend}");
        let err = open_err(&config_for(dir.path(), &tall, &cls, backend)).to_string();
        assert!(
            err.contains("dynamic shape") && err.contains("tall.onnx"),
            "{backend}: {err}"
        );
    }
}

#[test]
fn missing_model_file_names_the_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    let mut cfg = config_for(dir.path(), &seg, &cls, "backend = \"auto\"");
    // The config checked the file existed; it vanished before start.
    std::fs::remove_file(&cls).unwrap();
    let err = open_err(&cfg);
    assert!(matches!(err, InferError::ModelMissing { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&cls.display().to_string()) && text.contains("[models.classifier] path"),
        "{text}"
    );
    cfg.inference.backend = config::BackendChoice::Tract;
    assert!(matches!(open_err(&cfg), InferError::ModelMissing { .. }));
}

#[test]
fn corrupt_model_file_is_a_clear_error_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    let bytes: Vec<u8> = normalized_input(4096, 5)
        .iter()
        .map(|v| v.to_bits() as u8)
        .collect();
    std::fs::write(&seg, bytes).unwrap();
    let mut backends = vec!["backend = \"tract\""];
    if ort_available() {
        backends.push("backend = \"onnxruntime\"");
    }
    for backend in backends {
        let err = open_err(&config_for(dir.path(), &seg, &cls, backend));
        println!("{backend}: {err}");
        assert!(
            matches!(
                err,
                InferError::ModelLoad { .. } | InferError::EnginePrepare { .. }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&seg.display().to_string()) && text.contains("segmentation"),
            "{text}"
        );
    }
}

#[test]
fn wrong_onnxruntime_library_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    // A file that exists (the config checks that) but is no shared library.
    let fake = dir.path().join("libonnxruntime.so");
    std::fs::write(&fake, b"not a library").unwrap();
    let inference = format!(
        "backend = \"onnxruntime\"\nonnxruntime_library = \"{}\"",
        fake.display()
    );
    let err = open_err(&config_for(dir.path(), &seg, &cls, &inference));
    println!("{err}");
    assert!(
        matches!(err, InferError::OrtLibraryInvalid { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&fake.display().to_string()) && text.contains("onnxruntime_library"),
        "{text}"
    );
    assert!(
        text.contains("make onnxruntime") && text.contains("ORT_DYLIB_PATH"),
        "{text}"
    );
}

#[test]
fn a_real_library_that_is_not_onnxruntime_is_refused() {
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/usr/lib/libc.so.6",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file());
    let Some(libc) = libc else {
        common::skipped(format_args!("no libc.so.6 at the usual paths"));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    let inference = format!(
        "backend = \"onnxruntime\"\nonnxruntime_library = \"{}\"",
        libc.display()
    );
    let text = open_err(&config_for(dir.path(), &seg, &cls, &inference)).to_string();
    println!("{text}");
    assert!(
        text.contains("not an ONNX Runtime library") && text.contains("libc.so.6"),
        "{text}"
    );
}

#[test]
#[cfg(not(feature = "tensorrt"))]
fn tensorrt_without_the_feature_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    let err = open_err(&config_for(
        dir.path(),
        &seg,
        &cls,
        "backend = \"tensorrt\"",
    ));
    assert!(matches!(err, InferError::TensorRtNotBuilt), "{err:?}");
    assert!(
        err.to_string()
            .contains("built without the `tensorrt` feature"),
        "{err}"
    );
}

#[test]
fn cuda_requested_on_a_cpu_only_runtime_is_an_error_not_a_fallback() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    match infer::open_backend(&config_for(
        dir.path(),
        &seg,
        &cls,
        "backend = \"onnxruntime\"\ndevice = \"cuda\"",
    )) {
        // A GPU build of ONNX Runtime on a machine with a GPU: CUDA really runs.
        Ok(selection) => assert_eq!(selection.backend.kind(), BackendKind::OnnxRuntimeCuda),
        Err(err) => {
            println!("{err}");
            assert!(matches!(err, InferError::CudaUnavailable { .. }), "{err:?}");
            assert!(err.to_string().contains("CUDA execution provider"), "{err}");
        }
    }
}

#[test]
fn auto_says_why_it_chose_its_backend() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    let selection =
        infer::open_backend(&config_for(dir.path(), &seg, &cls, "backend = \"auto\"")).unwrap();
    println!(
        "{}: {}",
        selection.backend.kind().as_str(),
        selection.reason
    );
    let expected_start = if cfg!(feature = "tensorrt") {
        "auto: TensorRT"
    } else {
        "auto: TensorRT not built in"
    };
    assert!(
        selection.reason.starts_with(expected_start),
        "{}",
        selection.reason
    );
    let expected_end = match selection.backend.kind() {
        BackendKind::OnnxRuntimeCuda => "using ONNX Runtime CUDA",
        BackendKind::OnnxRuntimeCpu => "using ONNX Runtime CPU",
        BackendKind::Tract => "using tract",
        BackendKind::TensorRt => return,
    };
    assert!(
        selection.reason.ends_with(expected_end),
        "{}",
        selection.reason
    );
    if selection.backend.kind() != BackendKind::OnnxRuntimeCuda {
        let skipped_ort = selection
            .reason
            .contains("ONNX Runtime CUDA provider unavailable")
            || selection
                .reason
                .contains("ONNX Runtime unavailable (ONNX Runtime library not found");
        assert!(skipped_ort, "{}", selection.reason);
    }
}

#[test]
fn class_index_beyond_the_model_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, cls) = small_models(dir.path());
    let mut cfg = config_for(dir.path(), &seg, &cls, "backend = \"tract\"");
    cfg.classifier.defect_class = 2;
    let text = open_err(&cfg).to_string();
    assert!(
        text.contains("defect_class = 2") && text.contains("2 classes"),
        "{text}"
    );
}

#[test]
fn version_lists_the_built_in_backends() {
    let backends = infer::available_backends();
    assert_eq!(backends[0], "tract");
    assert!(backends[1].starts_with("onnxruntime (cpu; cuda if provider present"));
    assert_eq!(
        backends.iter().any(|b| b == "tensorrt"),
        cfg!(feature = "tensorrt")
    );
}
