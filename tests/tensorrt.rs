//! What is TensorRT's own, on the demo models and a real TensorRT:
//!
//! - the bridge's run-time loading (against stand-in libraries, anywhere),
//! - an explicit `backend = "tensorrt"` without TensorRT stops with a clear message,
//! - a second open loads both engines from the cache,
//! - a corrupted engine file and a changed ONNX file are rebuilt, not fatal,
//! - the dynamic-batch demo models (`models/seg_batch.onnx`,
//!   `models/cls_batch.onnx`) built for `max_batch = 4` run batches of 1 to 4
//!   that give every frame the logits its own run gives (the fp16 tolerance
//!   of `tests/parity.rs`'s TensorRT rows), and a batch past the profile is
//!   refused.
//!
//! The engine cache key of a dynamic model against `max_batch` and the
//! profile strings are unit tests (`src/infer/tensorrt/profile.rs`), which
//! run anywhere.
//!
//! Parity with the CPU reference (tract), host and device mode, is
//! `tests/parity.rs`'s TensorRT rows, not repeated here.
//!
//! Needs a build with `--features tensorrt`, TensorRT 10 (libnvinfer.so.10)
//! and a CUDA GPU; elsewhere each test prints `SKIPPED: <reason>` and passes.
//! `make test-tensorrt` runs them (the first run builds the engines: minutes
//! on a Jetson Orin Nano).

mod common;

#[cfg(not(feature = "tensorrt"))]
#[test]
fn tensorrt_backend() {
    crate::common::skipped(format_args!(
        "built without the `tensorrt` feature (make test-tensorrt builds with it)"
    ));
}

#[cfg(feature = "tensorrt")]
mod with_tensorrt {
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, MutexGuard, OnceLock};

    use crate::common::relative_error;
    use sealcheck::config::{self, Config};
    use sealcheck::gpu::GpuContext;
    use sealcheck::infer;
    use sealcheck::infer::tensorrt::{
        BuildReason, Builder, CacheOutcome, Precision, Runtime, TensorRtBackend, TensorRtSettings,
        compiled_against, load_library, version_string,
    };
    use sealcheck::infer::{BatchDim, InferenceBackend, ModelRole};

    fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// Why these tests cannot run here, if they cannot.
    fn skip_reason() -> Option<String> {
        // One short line each: the problem and what was tried, not the whole fix.
        let one_line = |text: String| {
            text.lines()
                .take(2)
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        };
        if let Err(e) = load_library() {
            return Some(one_line(format!("TensorRT not available: {e}")));
        }
        if let Err(e) = GpuContext::open(0) {
            return Some(one_line(format!("no CUDA GPU: {e}")));
        }
        for model in ["models/seg.onnx", "models/cls.onnx"] {
            if !repo().join(model).is_file() {
                return Some(format!("{model} missing (make demo-assets makes it)"));
            }
        }
        None
    }

    /// One test at a time on the GPU; the first one builds the engines.
    fn gpu_lock() -> MutexGuard<'static, ()> {
        static LOCK: Mutex<()> = Mutex::new(());
        LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    macro_rules! skip_without_tensorrt {
        () => {
            if let Some(reason) = skip_reason() {
                crate::common::skipped(format_args!("{reason}"));
                return;
            }
        };
    }

    fn demo_config() -> Config {
        config::load(&repo().join("config/demo.toml")).expect("config/demo.toml loads")
    }

    fn settings(engine_dir: &Path) -> TensorRtSettings {
        TensorRtSettings {
            precision: Precision::Fp16,
            workspace_mib: 1024,
            engine_dir: engine_dir.to_path_buf(),
            calibration_images: None,
            device: 0,
        }
    }

    /// The engine folder shared by the tests that only read engines, built once.
    fn shared_engine_dir() -> &'static Path {
        static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
        DIR.get_or_init(|| tempfile::tempdir().expect("temporary engine folder"))
            .path()
    }

    /// Stand-ins for libnvinfer.so.10 and libnvonnxparser.so.10 (test doubles):
    /// the entry points the bridge looks up, reporting the version in
    /// $SEALCHECK_FAKE_TRT_VERSION and creating no objects, as a TensorRT does
    /// that cannot find a GPU.
    const FAKE_NVINFER_C: &str = r#"
#include <stdlib.h>
int getInferLibVersion(void) { const char* v = getenv("SEALCHECK_FAKE_TRT_VERSION"); return v ? atoi(v) : 0; }
void* createInferBuilder_INTERNAL(void* logger, int version) { (void)logger; (void)version; return 0; }
void* createInferRuntime_INTERNAL(void* logger, int version) { (void)logger; (void)version; return 0; }
"#;
    const FAKE_PARSER_C: &str = r#"
int getNvOnnxParserVersion(void) { return 1; }
void* createNvOnnxParser_INTERNAL(void* network, void* logger, int version) { (void)network; (void)logger; (void)version; return 0; }
"#;
    const FAKE_CHILD: &str = "SEALCHECK_FAKE_TRT_CHILD";
    const THIS_TEST: &str =
        "with_tensorrt::bridge_opens_a_stand_in_library_and_reports_what_it_refuses";

    /// The bridge's run-time loading without TensorRT: dlopen/dlsym of the
    /// entry points, the version check against the headers, and TensorRT
    /// failing to create objects becoming errors (never a null object). Runs
    /// in child processes of this test binary, since a loaded library stays
    /// loaded for the life of a process.
    #[test]
    fn bridge_opens_a_stand_in_library_and_reports_what_it_refuses() {
        if let Ok(mode) = std::env::var(FAKE_CHILD) {
            return stand_in_child(&mode);
        }
        let dir = tempfile::tempdir().unwrap();
        for (source, library) in [
            (FAKE_NVINFER_C, "libnvinfer.so.10"),
            (FAKE_PARSER_C, "libnvonnxparser.so.10"),
        ] {
            let c_file = dir.path().join(format!("{library}.c"));
            std::fs::write(&c_file, source).unwrap();
            let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
            let status = std::process::Command::new(&compiler)
                .args(["-shared", "-fPIC", "-o"])
                .arg(dir.path().join(library))
                .arg(&c_file)
                .status();
            match status {
                Ok(s) if s.success() => {}
                other => {
                    crate::common::skipped(format_args!(
                        "no C compiler ({compiler}: {other:?}) to build the stand-in libraries"
                    ));
                    return;
                }
            }
        }
        let header = version_number(&compiled_against());
        for (mode, version) in [("older", header - 1), ("same", header)] {
            let output = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", THIS_TEST, "--nocapture", "--test-threads=1"])
                .env(FAKE_CHILD, mode)
                .env("SEALCHECK_FAKE_TRT_VERSION", version.to_string())
                .env("SEALCHECK_TENSORRT_LIB_DIR", dir.path())
                .output()
                .unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(
                output.status.success(),
                "stand-in library, {mode} version {version}:\n{text}"
            );
            assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
        }
    }

    fn version_number(text: &str) -> i32 {
        let parts: Vec<i32> = text.split('.').map(|p| p.parse().unwrap()).collect();
        parts[0] * 10000 + parts[1] * 100 + parts[2]
    }

    fn stand_in_child(mode: &str) {
        let version: i32 = std::env::var("SEALCHECK_FAKE_TRT_VERSION")
            .unwrap()
            .parse()
            .unwrap();
        match mode {
            "older" => {
                let err = load_library()
                    .expect_err("a library older than the headers is refused")
                    .to_string();
                println!("{err}");
                assert!(
                    err.contains(&version_string(version)) && err.contains(&compiled_against()),
                    "{err}"
                );
                assert!(err.contains("rebuild sealcheck on this machine"), "{err}");
            }
            "same" => {
                let info = load_library().expect("the stand-in library loads");
                assert_eq!(info.library_version, version);
                assert!(info.nvinfer_path.contains("libnvinfer.so.10"), "{info:?}");
                let err = Builder::new(&info)
                    .err()
                    .expect("a null builder is an error")
                    .to_string();
                assert!(err.contains("createInferBuilder"), "{err}");
                let err = Runtime::new(&info)
                    .err()
                    .expect("a null runtime is an error")
                    .to_string();
                assert!(err.contains("createInferRuntime"), "{err}");
                println!("{err}");
            }
            other => panic!("unknown stand-in mode {other}"),
        }
    }

    /// `backend = "tensorrt"` where TensorRT cannot run: a clear error at
    /// start (what is missing, what to install, which backend to pick
    /// instead), never a crash or a quiet fallback to another engine.
    #[test]
    fn explicit_tensorrt_backend_without_tensorrt_stops_with_a_clear_message() {
        if load_library().is_ok() && GpuContext::open(0).is_ok() {
            crate::common::skipped(format_args!(
                "TensorRT and a GPU are present here; this checks their absence"
            ));
            return;
        }
        let mut cfg = demo_config();
        cfg.inference.backend = config::BackendChoice::TensorRt;
        let err = match infer::open_backend(&cfg) {
            Ok(selection) => panic!("opened {:?} instead of failing", selection.backend.kind()),
            Err(e) => e.to_string(),
        };
        println!("backend = \"tensorrt\" without TensorRT stops the start with:\n{err}");
        assert!(err.contains("TensorRT"), "{err}");
        assert!(
            err.contains("backend = \"onnxruntime\" or \"auto\""),
            "{err}"
        );
    }

    // Parity with the CPU reference (host and device mode, masks,
    // probabilities and verdicts on the clip) is `tests/parity.rs`'s
    // "tensorrt (host)" and "tensorrt (device)" rows, which `make
    // test-tensorrt` runs on every frame; this file tests what is TensorRT's
    // own: the bridge, the engine cache and its rebuilds.

    #[test]
    fn second_open_loads_both_engines_from_the_cache() {
        skip_without_tensorrt!();
        let _gpu = gpu_lock();
        let cfg = demo_config();
        // The first open may build; the second must not.
        drop(TensorRtBackend::open_with(&cfg, &settings(shared_engine_dir()), None).unwrap());
        let again = TensorRtBackend::open_with(&cfg, &settings(shared_engine_dir()), None).unwrap();
        for (role, path, outcome) in again.engines() {
            assert_eq!(
                *outcome,
                CacheOutcome::Hit,
                "{role} engine {} was rebuilt: {outcome:?}",
                path.display()
            );
        }
    }

    /// A copy of the shared engines in a folder of its own, to damage.
    fn private_copy_of_engines(cfg: &Config) -> tempfile::TempDir {
        drop(TensorRtBackend::open_with(cfg, &settings(shared_engine_dir()), None).unwrap());
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(shared_engine_dir()).unwrap().flatten() {
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        dir
    }

    #[test]
    fn corrupted_engine_file_is_rebuilt_with_a_warning() {
        skip_without_tensorrt!();
        let _gpu = gpu_lock();
        let cfg = demo_config();
        let dir = private_copy_of_engines(&cfg);
        let seg_engine = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|e| e == "engine")
                    && p.file_name().unwrap().to_string_lossy().starts_with("seg.")
            })
            .expect("the segmentation engine is cached");
        let mut bytes = std::fs::read(&seg_engine).unwrap();
        let middle = bytes.len() / 2;
        for byte in &mut bytes[middle..middle + 64] {
            *byte ^= 0x5a;
        }
        std::fs::write(&seg_engine, &bytes).unwrap();
        let backend = TensorRtBackend::open_with(&cfg, &settings(dir.path()), None)
            .expect("a corrupt engine is rebuilt, not fatal");
        let [(_, _, seg), (_, _, cls)] = backend.engines();
        assert!(
            matches!(seg, CacheOutcome::Built(BuildReason::Unusable { .. })),
            "{seg:?}"
        );
        assert_eq!(*cls, CacheOutcome::Hit);
    }

    #[test]
    fn changed_onnx_file_is_rebuilt() {
        skip_without_tensorrt!();
        let _gpu = gpu_lock();
        let mut cfg = demo_config();
        let dir = private_copy_of_engines(&cfg);
        // Same network, different bytes: an unknown protobuf field (number
        // 1000, varint 1) appended to the ModelProto, which ONNX parsers skip.
        let models = tempfile::tempdir().unwrap();
        let seg = models.path().join("seg.onnx");
        let mut bytes = std::fs::read(&cfg.segmentation.path).unwrap();
        bytes.extend_from_slice(&[0xC0, 0x3E, 0x01]);
        std::fs::write(&seg, &bytes).unwrap();
        cfg.segmentation.path = seg;
        let backend = TensorRtBackend::open_with(&cfg, &settings(dir.path()), None)
            .expect("a changed model is rebuilt");
        let [(_, _, seg), (_, _, cls)] = backend.engines();
        match seg {
            CacheOutcome::Built(BuildReason::KeyMismatch { differences, .. }) => {
                assert!(
                    differences.iter().any(|d| d.starts_with("onnx_sha256")),
                    "{differences:?}"
                )
            }
            other => panic!("expected a rebuild for the changed ONNX, got {other:?}"),
        }
        assert_eq!(*cls, CacheOutcome::Hit);
    }

    /// Why the dynamic-batch test cannot run here, if it cannot.
    fn batch_skip_reason() -> Option<String> {
        skip_reason().or_else(|| {
            ["models/seg_batch.onnx", "models/cls_batch.onnx"]
                .into_iter()
                .find(|model| !repo().join(model).is_file())
                .map(|model| format!("{model} missing (make demo-assets makes it)"))
        })
    }

    /// The classifier-logits tolerance of `tests/parity.rs`'s TensorRT rows
    /// (fp16 engines), held here for every logit of both models.
    const BATCH_TOLERANCE: f64 = 2e-2;

    /// `frames` frames of `len` values in [-2, 2), the same for a seed.
    fn inputs(frames: usize, len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..frames * len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
            })
            .collect()
    }

    /// The demo models with a dynamic batch, built for `max_batch = 4`:
    /// batches of 1, 2, 3 and 4 (and back down, so the input shape changes
    /// both ways) give every frame the logits of its own batch-of-one run.
    #[test]
    fn batches_of_one_to_four_give_each_frame_the_logits_of_its_own_run() {
        if let Some(reason) = batch_skip_reason() {
            crate::common::skipped(format_args!("{reason}"));
            return;
        }
        let _gpu = gpu_lock();
        let mut cfg = demo_config();
        cfg.segmentation.path = repo().join("models/seg_batch.onnx");
        cfg.classifier.path = repo().join("models/cls_batch.onnx");
        cfg.inference.max_batch = 4;
        let mut backend =
            TensorRtBackend::open_with(&cfg, &settings(shared_engine_dir()), None).unwrap();
        assert!(backend.batches());
        assert_eq!(InferenceBackend::max_batch(&backend), 4);
        for io in ModelRole::BOTH.map(|role| backend.io(role)) {
            assert_eq!(io.batch, BatchDim::Dynamic, "{io:?}");
            assert_eq!(io.input_shape[0], 1, "one frame's shape: {io:?}");
        }
        // The profile is in the engine's key (its sidecar): another max_batch
        // is another engine.
        for (role, path, _) in backend.engines() {
            let sidecar: serde_json::Value =
                serde_json::from_slice(&std::fs::read(path.with_extension("json")).unwrap())
                    .unwrap();
            let profile = sidecar["fields"]["profile"].to_string();
            assert!(profile.contains("/4x"), "{role}: {profile}");
        }

        for (role, seed) in [(ModelRole::Segmentation, 21), (ModelRole::Classifier, 22)] {
            let io = backend.io(role);
            let (in_len, out_len) = (io.input_len(), io.output_len());
            let input = inputs(4, in_len, seed);
            let mut alone = vec![f32::NAN; 4 * out_len];
            for (frame, logits) in input
                .chunks_exact(in_len)
                .zip(alone.chunks_exact_mut(out_len))
            {
                backend.run(role, 1, frame, logits).unwrap();
            }
            assert!(alone.iter().all(|v| v.is_finite()), "{role}: batch of one");
            for frames in [1, 2, 3, 4, 3, 2, 1, 4] {
                let mut logits = vec![f32::NAN; frames * out_len];
                backend
                    .run(role, frames, &input[..frames * in_len], &mut logits)
                    .unwrap_or_else(|e| panic!("{role}, a batch of {frames}: {e}"));
                for (k, (got, want)) in logits
                    .chunks_exact(out_len)
                    .zip(alone.chunks_exact(out_len))
                    .enumerate()
                {
                    let error = relative_error(got, want);
                    println!("{role}: batch of {frames}, frame {k}: relative error {error:.2e}");
                    // `!(x <= limit)` on purpose: a NaN difference fails.
                    #[allow(clippy::neg_cmp_op_on_partial_ord)]
                    let off = !(error <= BATCH_TOLERANCE);
                    assert!(
                        !off,
                        "{role}: frame {k} of a batch of {frames} differs from its own run by {error:.2e} (limit {BATCH_TOLERANCE:.0e})"
                    );
                }
            }
            // Past the profile: a clear error, never a run on too small buffers.
            let mut logits = vec![0.0; 5 * out_len];
            let input = inputs(5, in_len, seed);
            let err = backend
                .run(role, 5, &input, &mut logits)
                .unwrap_err()
                .to_string();
            println!("{role}, a batch of 5 on an engine built for 4: {err}");
            assert!(
                err.contains("5 frame(s)") && err.contains("4 frame(s)"),
                "{err}"
            );
        }
    }
}
