//! The TensorRT backend against the CPU reference (tract), on the demo models
//! and the sample clip, plus the engine cache on a real TensorRT:
//!
//! - classifier probabilities within 1e-2 of the reference at fp16,
//! - segmentation masks at least 99.5% identical,
//! - the same verdicts on the whole sample clip (frames whose reference
//!   probability or seal area lies within the tolerance of a threshold are
//!   counted apart: a 1e-2 difference may legitimately flip them),
//! - a second open loads both engines from the cache,
//! - a corrupted engine file and a changed ONNX file are rebuilt, not fatal.
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

    use sealcheck::capture::decode_image_file;
    use sealcheck::config::{self, Config};
    use sealcheck::decision::{self, Decision};
    use sealcheck::frame::{FrameMeta, FrameSlot, FrameWork, TensorGeometry};
    use sealcheck::gpu::GpuContext;
    use sealcheck::infer::device_stage::DeviceFramePath;
    use sealcheck::infer::tensorrt::{
        BuildReason, Builder, CacheOutcome, Precision, Runtime, TensorRtBackend, TensorRtSettings,
        compiled_against, load_library, version_string,
    };
    use sealcheck::infer::{self, InferenceBackend, infer_frame, tract::TractBackend};
    use sealcheck::preprocess::Preprocessor;

    /// Largest allowed difference of a classifier probability at fp16.
    const PROB_TOLERANCE: f64 = 1e-2;
    /// Smallest allowed fraction of identical mask pixels.
    const MASK_AGREEMENT: f64 = 0.995;
    /// Every n-th clip frame for the tensor-level comparison.
    const PARITY_STRIDE: usize = 10;

    fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    fn clip_frames() -> Vec<PathBuf> {
        let dir = repo().join("samples/demo_clip");
        let mut frames: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
                    .collect()
            })
            .unwrap_or_default();
        frames.sort();
        frames
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
        if clip_frames().is_empty() {
            return Some(
                "samples/demo_clip/*.jpg missing (make demo-assets makes them)".to_string(),
            );
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

    /// Both backends plus what the pipeline needs to feed them.
    struct Pair {
        cfg: Config,
        reference: TractBackend,
        tensorrt: TensorRtBackend,
        geometry: TensorGeometry,
    }

    fn open_pair() -> Pair {
        let cfg = demo_config();
        let reference = TractBackend::open(&cfg).expect("tract opens the demo models");
        let tensorrt = TensorRtBackend::open_with(&cfg, &settings(shared_engine_dir()), None)
            .expect("TensorRT builds or loads both demo engines");
        let geometry =
            infer::geometry(reference.segmentation_io(), reference.classifier_io()).unwrap();
        assert_eq!(
            geometry,
            infer::geometry(tensorrt.segmentation_io(), tensorrt.classifier_io()).unwrap(),
            "both backends read the same model shapes"
        );
        Pair {
            cfg,
            reference,
            tensorrt,
            geometry,
        }
    }

    /// One frame through preprocessing and both backends, as `infer_frame` runs it.
    struct FrameRun {
        reference: FrameWork,
        tensorrt: FrameWork,
    }

    impl Pair {
        fn preprocessor(&self) -> Preprocessor {
            Preprocessor::new(
                self.cfg.segmentation.normalization,
                self.cfg.classifier.normalization,
                self.cfg.classifier.mask_mean,
                self.cfg.classifier.mask_std,
                self.geometry,
            )
        }

        fn run(
            &mut self,
            preprocessor: &mut Preprocessor,
            slot: &mut FrameSlot,
            image: &Path,
            seq: u64,
        ) -> FrameRun {
            slot.meta = FrameMeta::now(seq);
            decode_image_file(image, slot)
                .unwrap_or_else(|e| panic!("decoding {}: {e}", image.display()));
            // CPU preprocessing, as the pipeline's preprocess stage runs it.
            let mut reference = FrameWork::new(&self.geometry);
            preprocessor
                .frame_to_tensors(
                    slot.image(),
                    &mut reference.seg_input,
                    &mut reference.cls_input,
                )
                .unwrap_or_else(|e| panic!("preprocessing {}: {e}", image.display()));
            let mut tensorrt = FrameWork::new(&self.geometry);
            tensorrt.seg_input.copy_from_slice(&reference.seg_input);
            tensorrt.cls_input.copy_from_slice(&reference.cls_input);
            let mask_class = self.cfg.segmentation.mask_class;
            infer_frame(
                &mut self.reference,
                preprocessor,
                mask_class,
                &mut reference,
            );
            infer_frame(&mut self.tensorrt, preprocessor, mask_class, &mut tensorrt);
            assert!(
                reference.error.is_none(),
                "tract on {}: {:?}",
                image.display(),
                reference.error
            );
            assert!(
                tensorrt.error.is_none(),
                "TensorRT on {}: {:?}",
                image.display(),
                tensorrt.error
            );
            FrameRun {
                reference,
                tensorrt,
            }
        }

        fn decide(&self, work: &FrameWork) -> Decision {
            decision::decide(work, self.cfg.classifier.defect_class, &self.cfg.decision)
        }
    }

    fn mask_agreement(a: &[f32], b: &[f32]) -> f64 {
        let same = a
            .iter()
            .zip(b)
            .filter(|(x, y)| (**x >= 0.5) == (**y >= 0.5))
            .count();
        same as f64 / a.len().max(1) as f64
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

    #[test]
    fn classifier_probabilities_and_masks_match_the_cpu_reference() {
        skip_without_tensorrt!();
        let _gpu = gpu_lock();
        let mut pair = open_pair();
        let mut preprocessor = pair.preprocessor();
        let mut slot = FrameSlot::with_capacity(0);
        let defect_class = pair.cfg.classifier.defect_class;
        let (mut worst_prob, mut worst_mask) = (0.0f64, 1.0f64);
        let frames = clip_frames();
        for (seq, image) in frames.iter().enumerate().step_by(PARITY_STRIDE) {
            let run = pair.run(&mut preprocessor, &mut slot, image, seq as u64);
            let agreement = mask_agreement(&run.reference.mask, &run.tensorrt.mask);
            assert!(
                agreement >= MASK_AGREEMENT,
                "{}: masks agree on {:.3}% of pixels, need {:.1}%",
                image.display(),
                agreement * 100.0,
                MASK_AGREEMENT * 100.0
            );
            let reference =
                decision::class_probability(&run.reference.cls_logits, defect_class).unwrap();
            let tensorrt =
                decision::class_probability(&run.tensorrt.cls_logits, defect_class).unwrap();
            assert!(
                (reference - tensorrt).abs() <= PROB_TOLERANCE,
                "{}: defect probability {tensorrt:.4} (TensorRT) vs {reference:.4} (tract)",
                image.display()
            );
            worst_prob = worst_prob.max((reference - tensorrt).abs());
            worst_mask = worst_mask.min(agreement);
        }
        println!(
            "parity over {} frames: worst |dp| = {worst_prob:.5}, worst mask agreement = {:.4}%",
            frames.len().div_ceil(PARITY_STRIDE),
            worst_mask * 100.0
        );
    }

    /// Device mode (GPU preprocessing, both engines and the mask kernels on
    /// one stream, one wait per frame) against the CPU reference.
    #[test]
    fn device_path_matches_the_cpu_reference() {
        skip_without_tensorrt!();
        let _gpu = gpu_lock();
        let mut pair = open_pair();
        let mut preprocessor = pair.preprocessor();
        let mut slot = FrameSlot::with_capacity(0);
        let cfg = demo_config();
        let backend =
            TensorRtBackend::open_with(&cfg, &settings(shared_engine_dir()), None).unwrap();
        let mut device = sealcheck::infer::tensorrt::device_runner(&cfg, backend)
            .expect("device path over the GPU preprocessor");
        let defect_class = cfg.classifier.defect_class;
        for (seq, image) in clip_frames().iter().enumerate().step_by(PARITY_STRIDE) {
            let run = pair.run(&mut preprocessor, &mut slot, image, seq as u64);
            let mut work = FrameWork::new(&pair.geometry);
            let timings = device
                .run_frame(slot.image(), &mut work)
                .expect("device path runs the frame");
            let pixels = run.reference.mask.len() as f64;
            let area_difference =
                (work.mask_pixels as f64 - run.reference.mask_pixels as f64).abs() / pixels;
            assert!(
                area_difference <= 1.0 - MASK_AGREEMENT,
                "{}: mask pixels {} (device) vs {} (tract)",
                image.display(),
                work.mask_pixels,
                run.reference.mask_pixels
            );
            let reference =
                decision::class_probability(&run.reference.cls_logits, defect_class).unwrap();
            let on_device = decision::class_probability(&work.cls_logits, defect_class).unwrap();
            assert!(
                (reference - on_device).abs() <= PROB_TOLERANCE,
                "{}: defect probability {on_device:.4} (device path) vs {reference:.4} (tract)",
                image.display()
            );
            assert!(
                timings.segment_ms > 0.0 && timings.classify_ms > 0.0,
                "{timings:?}"
            );
        }
    }

    #[test]
    fn same_verdicts_on_the_sample_clip() {
        skip_without_tensorrt!();
        let _gpu = gpu_lock();
        let mut pair = open_pair();
        let mut preprocessor = pair.preprocessor();
        let mut slot = FrameSlot::with_capacity(0);
        let thresholds = pair.cfg.decision;
        let area_tolerance = 1.0 - MASK_AGREEMENT;
        let (mut borderline, mut disagreements) = (0usize, Vec::new());
        for (seq, image) in clip_frames().iter().enumerate() {
            let run = pair.run(&mut preprocessor, &mut slot, image, seq as u64);
            let (reference, tensorrt) = (pair.decide(&run.reference), pair.decide(&run.tensorrt));
            if (reference.verdict, reference.reason) == (tensorrt.verdict, tensorrt.reason) {
                continue;
            }
            let prob = reference.defect_prob.unwrap_or(0.0);
            let area = reference.seal_area.unwrap_or(0.0);
            let near =
                |value: f64, threshold: f64, tolerance: f64| (value - threshold).abs() <= tolerance;
            if near(prob, thresholds.defect_threshold, PROB_TOLERANCE)
                || near(area, thresholds.no_seal_below, area_tolerance)
                || near(area, thresholds.min_seal_area, area_tolerance)
                || near(area, thresholds.max_seal_area, area_tolerance)
            {
                borderline += 1;
            } else {
                disagreements.push(format!(
                    "{}: tract {reference:?}, TensorRT {tensorrt:?}",
                    image.display()
                ));
            }
        }
        println!("verdicts: {borderline} borderline differences (within tolerance of a threshold)");
        assert!(
            disagreements.is_empty(),
            "verdicts differ:\n{}",
            disagreements.join("\n")
        );
    }

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
}
