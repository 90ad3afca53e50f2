//! The engine cache: serialized TensorRT engines on disk, keyed by everything
//! that makes an engine valid, so a JetPack upgrade, a new GPU or a new model
//! rebuilds the engine instead of crashing on a stale one.
//!
//! ```text
//! key  = SHA-256 of { ONNX file's SHA-256, TensorRT version, GPU name, compute
//!                     capability, precision, optimization profile, workspace,
//!                     INT8 calibration set }
//! file = <dir>/<model stem>.<precision>.<first 16 hex of key>.engine
//!        <dir>/<model stem>.<precision>.<first 16 hex of key>.json   (sidecar: the full key)
//! ```
//!
//! Both files are written atomically (temporary file in the same folder,
//! fsync, rename), the engine first, so a crash leaves either nothing or an
//! engine without sidecar, which counts as missing. A cached engine whose
//! sidecar disagrees with the key, whose bytes do not match the digest the
//! sidecar recorded, or that TensorRT refuses to deserialize is rebuilt with a
//! warning naming the mismatch; it never stops the start.
//!
//! Building and loading are passed in as closures, so everything here is
//! tested without TensorRT.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::error::TrtError;
use crate::model_id::sha256_hex;

/// Bump when the meaning of a key field or the sidecar layout changes.
const FORMAT: u32 = 1;

/// Hex digits of the key in the file name.
const SHORT_KEY: usize = 16;

/// Everything an engine depends on. Serialized (in this field order) into
/// the sidecar and hashed into the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyFields {
    pub format: u32,
    pub onnx_sha256: String,
    /// "10.3.0": engines do not move between TensorRT versions.
    pub tensorrt_version: String,
    pub gpu_name: String,
    /// "8.7": engines do not move between GPU architectures.
    pub compute_capability: String,
    /// "fp32", "fp16" or "int8".
    pub precision: String,
    /// One "name:min/opt/max" entry per input, e.g. "images:1x3x640x640/1x3x640x640/1x3x640x640";
    /// empty for a static model, 1 .. `max_batch` frames for a dynamic batch (`profile.rs`).
    pub profile: Vec<String>,
    pub workspace_mib: u64,
    /// INT8 only: SHA-256 over the calibration images' names and contents.
    pub calibration: Option<String>,
}

/// What the caller knows about the engine it wants, apart from the ONNX bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSpec {
    pub tensorrt_version: String,
    pub gpu_name: String,
    pub compute_capability: (i32, i32),
    pub precision: String,
    pub profile: Vec<String>,
    pub workspace_mib: u64,
    pub calibration: Option<String>,
}

/// A computed key: its fields and their digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineKey {
    pub fields: KeyFields,
    /// Lower-case hex SHA-256 of the fields' JSON.
    pub digest: String,
}

impl EngineKey {
    pub fn new(onnx: &[u8], spec: &EngineSpec) -> Self {
        let fields = KeyFields {
            format: FORMAT,
            onnx_sha256: sha256_hex(onnx),
            tensorrt_version: spec.tensorrt_version.clone(),
            gpu_name: spec.gpu_name.clone(),
            compute_capability: format!(
                "{}.{}",
                spec.compute_capability.0, spec.compute_capability.1
            ),
            precision: spec.precision.clone(),
            profile: spec.profile.clone(),
            workspace_mib: spec.workspace_mib,
            calibration: spec.calibration.clone(),
        };
        Self::from_fields(fields)
    }

    fn from_fields(fields: KeyFields) -> Self {
        // Serializing a struct of strings and numbers cannot fail; the
        // fallback keeps this total without a panic path.
        let json =
            serde_json::to_vec(&fields).unwrap_or_else(|_| format!("{fields:?}").into_bytes());
        EngineKey {
            digest: sha256_hex(&json),
            fields,
        }
    }

    pub fn short(&self) -> &str {
        &self.digest[..SHORT_KEY.min(self.digest.len())]
    }
}

/// The JSON file next to an engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sidecar {
    pub key: String,
    pub fields: KeyFields,
    /// The ONNX file the engine was built from (for people; not part of the key).
    pub onnx_path: String,
    /// SHA-256 of the engine file, to catch truncation or bit rot before TensorRT reads it.
    pub engine_sha256: String,
    pub engine_bytes: u64,
    pub build_seconds: f64,
}

/// Why an engine was built rather than loaded.
#[derive(Debug, Clone, PartialEq)]
pub enum BuildReason {
    /// No engine for this key, and none for this model to compare with.
    Missing,
    /// An engine for this model exists, built under another key: what differs.
    KeyMismatch {
        file: PathBuf,
        differences: Vec<String>,
    },
    /// The engine for this key exists but cannot be used.
    Unusable { file: PathBuf, problem: String },
}

impl std::fmt::Display for BuildReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildReason::Missing => f.write_str("no cached engine"),
            BuildReason::KeyMismatch { file, differences } => {
                write!(
                    f,
                    "cached engine {} was built for {}",
                    file.display(),
                    differences.join(", ")
                )
            }
            BuildReason::Unusable { file, problem } => {
                write!(f, "cached engine {} is unusable: {problem}", file.display())
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum CacheOutcome {
    Hit,
    Built(BuildReason),
}

/// Where engines live, and the load-or-build logic.
#[derive(Debug, Clone)]
pub struct EngineCache {
    dir: PathBuf,
}

/// An engine obtained from the cache, with its file and how it was obtained.
#[derive(Debug)]
pub struct CachedEngine<E> {
    pub engine: E,
    pub path: PathBuf,
    pub key: EngineKey,
    pub outcome: CacheOutcome,
}

impl EngineCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        EngineCache { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<dir>/<stem>.<precision>.<short key>.engine`.
    pub fn engine_path(&self, onnx_path: &Path, key: &EngineKey) -> PathBuf {
        self.dir.join(format!(
            "{}{}.engine",
            self.prefix(onnx_path, &key.fields.precision),
            key.short()
        ))
    }

    fn prefix(&self, onnx_path: &Path, precision: &str) -> String {
        let stem = onnx_path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        format!("{stem}.{precision}.")
    }

    /// Loads the engine for `onnx_path` under `spec`, or builds, saves and
    /// loads it. `build` turns ONNX bytes into a serialized engine; `load`
    /// deserializes one. A cached engine that fails any check is rebuilt
    /// with a warning; only a failing build (or a freshly built engine that
    /// does not load) is an error.
    pub fn load_or_build<E>(
        &self,
        onnx_path: &Path,
        spec: &EngineSpec,
        mut build: impl FnMut(&[u8]) -> Result<Vec<u8>, TrtError>,
        mut load: impl FnMut(&[u8]) -> Result<E, TrtError>,
    ) -> Result<CachedEngine<E>, TrtError> {
        let onnx =
            fs::read(onnx_path).map_err(io_error("cannot read the ONNX model", onnx_path))?;
        let key = EngineKey::new(&onnx, spec);
        let path = self.engine_path(onnx_path, &key);

        let reason = match self.try_cached(&path, &key) {
            Ok(plan) => match load(&plan) {
                Ok(engine) => {
                    log::info!(target: "sealcheck::tensorrt", engine:% = path.display(), key = key.short(); "TensorRT engine loaded from cache");
                    return Ok(CachedEngine {
                        engine,
                        path,
                        key,
                        outcome: CacheOutcome::Hit,
                    });
                }
                Err(e) => BuildReason::Unusable {
                    file: path.clone(),
                    problem: format!("TensorRT refused it: {e}"),
                },
            },
            Err(CacheMiss::NoFile) => self.explain_missing(onnx_path, &key),
            Err(CacheMiss::Unusable(problem)) => BuildReason::Unusable {
                file: path.clone(),
                problem,
            },
        };
        match &reason {
            BuildReason::Missing => {
                log::info!(target: "sealcheck::tensorrt", onnx:% = onnx_path.display(), engine:% = path.display();
                    "no cached TensorRT engine: building one (this takes minutes on a Jetson)")
            }
            other => {
                log::warn!(target: "sealcheck::tensorrt", onnx:% = onnx_path.display(), engine:% = path.display();
                    "rebuilding the TensorRT engine: {other}")
            }
        }

        fs::create_dir_all(&self.dir)
            .map_err(io_error("cannot create the engine cache folder", &self.dir))?;
        let started = Instant::now();
        let plan = build(&onnx)?;
        let build_seconds = started.elapsed().as_secs_f64();
        write_atomically(&path, &plan)?;
        let sidecar = Sidecar {
            key: key.digest.clone(),
            fields: key.fields.clone(),
            onnx_path: onnx_path.display().to_string(),
            engine_sha256: sha256_hex(&plan),
            engine_bytes: plan.len() as u64,
            build_seconds,
        };
        let json = serde_json::to_vec_pretty(&sidecar).map_err(|e| TrtError::Io {
            action: "cannot serialize the engine sidecar for",
            path: sidecar_path(&path),
            source: std::io::Error::other(e),
        })?;
        write_atomically(&sidecar_path(&path), &json)?;
        log::info!(target: "sealcheck::tensorrt", engine:% = path.display(), bytes = plan.len(),
            build_s = (build_seconds * 10.0).round() / 10.0; "TensorRT engine built and cached");
        let engine = load(&plan)?;
        Ok(CachedEngine {
            engine,
            path,
            key,
            outcome: CacheOutcome::Built(reason),
        })
    }

    /// The engine bytes for `key` if its file and sidecar exist and agree.
    fn try_cached(&self, path: &Path, key: &EngineKey) -> Result<Vec<u8>, CacheMiss> {
        if !path.is_file() {
            return Err(CacheMiss::NoFile);
        }
        let sidecar = read_sidecar(&sidecar_path(path)).map_err(CacheMiss::Unusable)?;
        if sidecar.key != key.digest || sidecar.fields != key.fields {
            let differences = differences(&sidecar.fields, &key.fields);
            return Err(CacheMiss::Unusable(format!(
                "its sidecar holds another key ({})",
                if differences.is_empty() {
                    "digest differs".to_string()
                } else {
                    differences.join(", ")
                }
            )));
        }
        let plan =
            fs::read(path).map_err(|e| CacheMiss::Unusable(format!("cannot read it: {e}")))?;
        if plan.len() as u64 != sidecar.engine_bytes || sha256_hex(&plan) != sidecar.engine_sha256 {
            return Err(CacheMiss::Unusable(format!(
                "its contents changed since it was built ({} bytes, {} expected; digest mismatch): corrupt or truncated",
                plan.len(),
                sidecar.engine_bytes
            )));
        }
        Ok(plan)
    }

    /// For a key with no engine: is there an engine of the same model and
    /// precision built under another key? Then say what changed.
    fn explain_missing(&self, onnx_path: &Path, key: &EngineKey) -> BuildReason {
        let prefix = self.prefix(onnx_path, &key.fields.precision);
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return BuildReason::Missing;
        };
        let mut candidates: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|e| e == "json")
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            })
            .collect();
        candidates.sort();
        for candidate in candidates {
            if let Ok(sidecar) = read_sidecar(&candidate) {
                return BuildReason::KeyMismatch {
                    file: candidate.with_extension("engine"),
                    differences: differences(&sidecar.fields, &key.fields),
                };
            }
        }
        BuildReason::Missing
    }
}

enum CacheMiss {
    NoFile,
    Unusable(String),
}

pub fn sidecar_path(engine: &Path) -> PathBuf {
    engine.with_extension("json")
}

fn read_sidecar(path: &Path) -> Result<Sidecar, String> {
    let text = fs::read(path)
        .map_err(|e| format!("its sidecar {} cannot be read: {e}", path.display()))?;
    serde_json::from_slice(&text)
        .map_err(|e| format!("its sidecar {} is not valid: {e}", path.display()))
}

/// "tensorrt_version 10.3.0 (now 10.4.0)" for each field that differs.
pub fn differences(cached: &KeyFields, wanted: &KeyFields) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |name: &str, old: String, new: String| {
        if old != new {
            out.push(format!("{name} {old} (now {new})"));
        }
    };
    check(
        "format",
        cached.format.to_string(),
        wanted.format.to_string(),
    );
    check(
        "onnx_sha256",
        short(&cached.onnx_sha256),
        short(&wanted.onnx_sha256),
    );
    check(
        "tensorrt_version",
        cached.tensorrt_version.clone(),
        wanted.tensorrt_version.clone(),
    );
    check("gpu_name", cached.gpu_name.clone(), wanted.gpu_name.clone());
    check(
        "compute_capability",
        cached.compute_capability.clone(),
        wanted.compute_capability.clone(),
    );
    check(
        "precision",
        cached.precision.clone(),
        wanted.precision.clone(),
    );
    check(
        "profile",
        cached.profile.join(";"),
        wanted.profile.join(";"),
    );
    check(
        "workspace_mib",
        cached.workspace_mib.to_string(),
        wanted.workspace_mib.to_string(),
    );
    check(
        "calibration",
        cached
            .calibration
            .as_deref()
            .map(short)
            .unwrap_or_else(|| "none".into()),
        wanted
            .calibration
            .as_deref()
            .map(short)
            .unwrap_or_else(|| "none".into()),
    );
    out
}

fn short(digest: &str) -> String {
    digest.chars().take(12).collect()
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> TrtError {
    let path = path.to_path_buf();
    move |source| TrtError::Io {
        action,
        path,
        source,
    }
}

/// Writes `bytes` to `path` so that readers see the old file or the whole
/// new one, never a part: a temporary file in the same folder (same file
/// system, so rename is atomic), flushed to disk, then renamed over `path`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), TrtError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if let Err(source) = result {
        // Best effort: do not leave a half-written temporary behind.
        let _ = fs::remove_file(&temporary);
        return Err(TrtError::Io {
            action: "cannot write",
            path: path.to_path_buf(),
            source,
        });
    }
    // The rename is durable once the folder is synced; a failure here only
    // risks losing the new file in a power cut, which means a rebuild.
    if let Ok(folder) = fs::File::open(dir) {
        let _ = folder.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn spec() -> EngineSpec {
        EngineSpec {
            tensorrt_version: "10.3.0".into(),
            gpu_name: "Orin (nvgpu)".into(),
            compute_capability: (8, 7),
            precision: "fp16".into(),
            profile: vec!["images:1x3x640x640/1x3x640x640/1x3x640x640".into()],
            workspace_mib: 1024,
            calibration: None,
        }
    }

    /// Test double for TensorRT's builder: the "engine" is a fixed header plus
    /// the ONNX bytes, and every call is counted.
    struct FakeBuilder {
        calls: Cell<u32>,
    }

    impl FakeBuilder {
        fn new() -> Self {
            FakeBuilder {
                calls: Cell::new(0),
            }
        }
        fn build(&self, onnx: &[u8]) -> Result<Vec<u8>, TrtError> {
            self.calls.set(self.calls.get() + 1);
            let mut plan = b"FAKEPLAN".to_vec();
            plan.extend_from_slice(onnx);
            Ok(plan)
        }
    }

    /// Test double for deserializeCudaEngine: accepts only plans the fake builder makes.
    fn fake_load(plan: &[u8]) -> Result<Vec<u8>, TrtError> {
        if plan.starts_with(b"FAKEPLAN") {
            Ok(plan.to_vec())
        } else {
            Err(TrtError::TensorRt {
                action: "deserialize".into(),
                message: "magic tag mismatch".into(),
            })
        }
    }

    fn setup() -> (tempfile::TempDir, PathBuf, EngineCache) {
        let dir = tempfile::tempdir().unwrap();
        let onnx = dir.path().join("seg.onnx");
        fs::write(&onnx, b"onnx model v1").unwrap();
        let cache = EngineCache::new(dir.path().join("engines"));
        (dir, onnx, cache)
    }

    #[test]
    fn key_changes_with_every_field_and_is_stable() {
        let base = EngineKey::new(b"model", &spec());
        assert_eq!(base, EngineKey::new(b"model", &spec()));
        assert_eq!(base.digest.len(), 64);
        let variants: Vec<EngineSpec> = vec![
            EngineSpec {
                tensorrt_version: "10.4.0".into(),
                ..spec()
            },
            EngineSpec {
                gpu_name: "NVIDIA H100".into(),
                ..spec()
            },
            EngineSpec {
                compute_capability: (9, 0),
                ..spec()
            },
            EngineSpec {
                precision: "fp32".into(),
                ..spec()
            },
            EngineSpec {
                profile: vec!["images:1x3x320x320/1x3x320x320/1x3x320x320".into()],
                ..spec()
            },
            EngineSpec {
                workspace_mib: 512,
                ..spec()
            },
            EngineSpec {
                calibration: Some("abc".into()),
                ..spec()
            },
        ];
        for variant in variants {
            assert_ne!(
                EngineKey::new(b"model", &variant).digest,
                base.digest,
                "{variant:?}"
            );
        }
        assert_ne!(EngineKey::new(b"model2", &spec()).digest, base.digest);
    }

    #[test]
    fn file_name_carries_model_precision_and_short_key() {
        let cache = EngineCache::new("/var/lib/sealcheck/engines");
        let key = EngineKey::new(b"model", &spec());
        let path = cache.engine_path(Path::new("/models/seg.onnx"), &key);
        assert_eq!(
            path,
            PathBuf::from(format!(
                "/var/lib/sealcheck/engines/seg.fp16.{}.engine",
                &key.digest[..16]
            ))
        );
        assert_eq!(sidecar_path(&path).extension().unwrap(), "json");
    }

    #[test]
    fn second_run_is_a_cache_hit() {
        let (_dir, onnx, cache) = setup();
        let builder = FakeBuilder::new();
        let first = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        assert_eq!(first.outcome, CacheOutcome::Built(BuildReason::Missing));
        let second = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        assert_eq!(second.outcome, CacheOutcome::Hit);
        assert_eq!(builder.calls.get(), 1);
        assert_eq!(second.engine, first.engine);
        let sidecar = read_sidecar(&sidecar_path(&second.path)).unwrap();
        assert_eq!(sidecar.key, second.key.digest);
        assert_eq!(sidecar.fields, second.key.fields);
    }

    #[test]
    fn corrupted_engine_file_is_rebuilt() {
        let (_dir, onnx, cache) = setup();
        let builder = FakeBuilder::new();
        let first = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        let mut bytes = fs::read(&first.path).unwrap();
        bytes[3] ^= 0xff;
        fs::write(&first.path, &bytes).unwrap();
        let again = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        match &again.outcome {
            CacheOutcome::Built(BuildReason::Unusable { problem, .. }) => {
                assert!(problem.contains("corrupt"), "{problem}")
            }
            other => panic!("expected a rebuild, got {other:?}"),
        }
        assert_eq!(builder.calls.get(), 2);
        assert!(fake_load(&fs::read(&again.path).unwrap()).is_ok());
    }

    #[test]
    fn truncated_engine_file_is_rebuilt() {
        let (_dir, onnx, cache) = setup();
        let builder = FakeBuilder::new();
        let first = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        fs::write(&first.path, b"FAKE").unwrap();
        let again = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        assert!(matches!(
            again.outcome,
            CacheOutcome::Built(BuildReason::Unusable { .. })
        ));
        assert_eq!(builder.calls.get(), 2);
    }

    #[test]
    fn engine_that_tensorrt_refuses_is_rebuilt() {
        let (_dir, onnx, cache) = setup();
        let builder = FakeBuilder::new();
        cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        // A loader double that refuses once (as TensorRT refuses a plan from
        // another version), then accepts.
        let refusals = Cell::new(1);
        let picky = |plan: &[u8]| {
            if refusals.get() > 0 {
                refusals.set(refusals.get() - 1);
                Err(TrtError::TensorRt {
                    action: "deserialize".into(),
                    message: "version tag mismatch".into(),
                })
            } else {
                fake_load(plan)
            }
        };
        let again = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), picky)
            .unwrap();
        match &again.outcome {
            CacheOutcome::Built(BuildReason::Unusable { problem, .. }) => {
                assert!(problem.contains("version tag mismatch"), "{problem}")
            }
            other => panic!("expected a rebuild, got {other:?}"),
        }
        assert_eq!(builder.calls.get(), 2);
    }

    #[test]
    fn changed_onnx_rebuilds_and_names_the_difference() {
        let (_dir, onnx, cache) = setup();
        let builder = FakeBuilder::new();
        let first = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        fs::write(&onnx, b"onnx model v2").unwrap();
        let second = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        assert_ne!(second.path, first.path);
        match &second.outcome {
            CacheOutcome::Built(BuildReason::KeyMismatch { differences, .. }) => {
                assert_eq!(differences.len(), 1, "{differences:?}");
                assert!(differences[0].starts_with("onnx_sha256"), "{differences:?}");
            }
            other => panic!("expected a key mismatch, got {other:?}"),
        }
        assert_eq!(builder.calls.get(), 2);
        assert!(second.engine.ends_with(b"onnx model v2"));
    }

    #[test]
    fn new_tensorrt_version_rebuilds_and_names_both_versions() {
        let (_dir, onnx, cache) = setup();
        let builder = FakeBuilder::new();
        cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        let upgraded = EngineSpec {
            tensorrt_version: "10.4.0".into(),
            ..spec()
        };
        let second = cache
            .load_or_build(&onnx, &upgraded, |b| builder.build(b), fake_load)
            .unwrap();
        let CacheOutcome::Built(reason) = &second.outcome else {
            panic!("expected a rebuild")
        };
        let text = reason.to_string();
        assert!(
            text.contains("tensorrt_version 10.3.0 (now 10.4.0)"),
            "{text}"
        );
    }

    #[test]
    fn sidecar_with_another_key_or_garbage_is_rebuilt() {
        let (_dir, onnx, cache) = setup();
        let builder = FakeBuilder::new();
        let first = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        let sidecar_file = sidecar_path(&first.path);
        let mut sidecar = read_sidecar(&sidecar_file).unwrap();
        sidecar.fields.gpu_name = "Other GPU".into();
        fs::write(&sidecar_file, serde_json::to_vec(&sidecar).unwrap()).unwrap();
        let second = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        match &second.outcome {
            CacheOutcome::Built(BuildReason::Unusable { problem, .. }) => {
                assert!(problem.contains("gpu_name"), "{problem}")
            }
            other => panic!("expected a rebuild, got {other:?}"),
        }
        fs::write(&sidecar_file, b"{ not json").unwrap();
        let third = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        assert!(matches!(
            third.outcome,
            CacheOutcome::Built(BuildReason::Unusable { .. })
        ));
        assert_eq!(builder.calls.get(), 3);
        // After the rebuild the cache is whole again.
        let fourth = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        assert_eq!(fourth.outcome, CacheOutcome::Hit);
    }

    #[test]
    fn engine_without_sidecar_counts_as_unusable() {
        let (_dir, onnx, cache) = setup();
        let builder = FakeBuilder::new();
        let first = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        fs::remove_file(sidecar_path(&first.path)).unwrap();
        let second = cache
            .load_or_build(&onnx, &spec(), |b| builder.build(b), fake_load)
            .unwrap();
        assert!(matches!(
            second.outcome,
            CacheOutcome::Built(BuildReason::Unusable { .. })
        ));
    }

    #[test]
    fn failed_build_leaves_no_engine_and_reports_it() {
        let (_dir, onnx, cache) = setup();
        let failing = |_: &[u8]| -> Result<Vec<u8>, TrtError> {
            Err(TrtError::TensorRt {
                action: "build".into(),
                message: "unsupported operator".into(),
            })
        };
        let err = cache
            .load_or_build(&onnx, &spec(), failing, fake_load)
            .unwrap_err();
        assert!(err.to_string().contains("unsupported operator"), "{err}");
        let leftovers: Vec<_> = fs::read_dir(cache.dir()).unwrap().flatten().collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn atomic_write_replaces_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.engine");
        write_atomically(&path, b"first version").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["x.engine"]);
    }

    #[test]
    fn atomic_write_into_missing_folder_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-folder").join("x.engine");
        let err = write_atomically(&path, b"data").unwrap_err().to_string();
        assert!(err.contains("x.engine"), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn unreadable_onnx_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = EngineCache::new(dir.path());
        let missing = dir.path().join("missing.onnx");
        let builder = FakeBuilder::new();
        let err = cache
            .load_or_build(&missing, &spec(), |b| builder.build(b), fake_load)
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.onnx"), "{err}");
        assert_eq!(builder.calls.get(), 0);
    }
}
