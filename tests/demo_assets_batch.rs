//! The dynamic-batch and FP16 demo models (issue 21) hold their contract:
//! `seg_batch.onnx` / `cls_batch.onnx` are the static models with a symbolic
//! first dimension, `X_fp16.onnx` beside each `X.onnx` has FLOAT16 weights but
//! float32 inputs and outputs; all opset 17, weights inside, under 3 MB; and
//! `scripts/demo/export_batch_fp16.py` rebuilds every one of them byte for byte from
//! the committed FP32 files (skipped where no Python with `onnx` is found).

use std::path::{Path, PathBuf};
use std::process::Command;

use tract_onnx::pb::tensor_shape_proto::dimension::Value as DimValue;
use tract_onnx::pb::type_proto::Value as TypeValue;
use tract_onnx::pb::{ModelProto, ValueInfoProto};
use tract_onnx::prelude::*;

const FLOAT: i32 = 1;
const FLOAT16: i32 = 10;
const STATIC: [&str; 2] = ["seg", "cls"];
/// Every file the script writes, for each static model.
const DERIVED: [&str; 3] = ["_batch", "_fp16", "_batch_fp16"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn model_path(file: &str) -> PathBuf {
    repo().join("models").join(file)
}

fn proto(file: &str) -> ModelProto {
    tract_onnx::onnx()
        .proto_model_for_path(model_path(file))
        .unwrap_or_else(|e| panic!("{file}: {e:?}"))
}

#[derive(Debug, Clone, PartialEq)]
enum Dim {
    Value(i64),
    Param(String),
}

/// (name, element type, dims) of each graph input, then each graph output.
fn io(file: &str, model: &ModelProto) -> Vec<(String, i32, Vec<Dim>)> {
    let graph = model.graph.as_ref().unwrap();
    let describe = |value: &ValueInfoProto| {
        let tensor = match value.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(TypeValue::TensorType(t)) => t,
            other => panic!("{file}: {} is not a tensor: {other:?}", value.name),
        };
        let dims = tensor
            .shape
            .as_ref()
            .unwrap_or_else(|| panic!("{file}: {} has no shape", value.name))
            .dim
            .iter()
            .map(|d| match &d.value {
                Some(DimValue::DimValue(v)) => Dim::Value(*v),
                Some(DimValue::DimParam(p)) => Dim::Param(p.clone()),
                None => panic!("{file}: {} has an unknown dimension", value.name),
            })
            .collect();
        (value.name.clone(), tensor.elem_type, dims)
    };
    graph
        .input
        .iter()
        .chain(&graph.output)
        .map(describe)
        .collect()
}

fn derived_files() -> Vec<String> {
    STATIC
        .iter()
        .flat_map(|stem| DERIVED.iter().map(move |sfx| format!("{stem}{sfx}.onnx")))
        .collect()
}

#[test]
fn batch_and_fp16_models_exist_opset_17_self_contained_and_small() {
    for file in derived_files() {
        let path = model_path(&file);
        assert!(path.is_file(), "{} is missing", path.display());
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size < 3 * 1024 * 1024, "{file} is {size} bytes, over 3 MB");
        let model = proto(&file);
        let default_opset: Vec<i64> = model
            .opset_import
            .iter()
            .filter(|o| o.domain.is_empty() || o.domain == "ai.onnx")
            .map(|o| o.version)
            .collect();
        assert_eq!(default_opset, [17], "{file}");
        assert_eq!(
            model.opset_import.len(),
            1,
            "{file}: only the default domain"
        );
        assert!(
            model.ir_version <= 10,
            "{file}: IR {} is newer than ONNX Runtime 1.31 and tract read",
            model.ir_version
        );
        let graph = model.graph.as_ref().unwrap();
        assert!(
            !graph.initializer.is_empty(),
            "{file} has no weights inside"
        );
        // data_location 1 = EXTERNAL: weights in a side file, which the contract forbids.
        assert!(
            graph.initializer.iter().all(|t| t.data_location != Some(1)),
            "{file} keeps weights outside the file"
        );
    }
}

#[test]
fn batch_models_have_a_symbolic_first_dim_and_the_static_rest() {
    for stem in STATIC {
        let fixed = io(stem, &proto(&format!("{stem}.onnx")));
        for file in [
            format!("{stem}_batch.onnx"),
            format!("{stem}_batch_fp16.onnx"),
        ] {
            let batch = io(&file, &proto(&file));
            assert_eq!(batch.len(), fixed.len(), "{file}: inputs + outputs");
            for ((name, elem, dims), (fixed_name, fixed_elem, fixed_dims)) in
                batch.iter().zip(&fixed)
            {
                assert_eq!(name, fixed_name, "{file}");
                assert_eq!(*elem, *fixed_elem, "{file}: {name}");
                assert_eq!(fixed_dims[0], Dim::Value(1), "{stem}.onnx: {name}");
                assert!(
                    matches!(&dims[0], Dim::Param(p) if !p.is_empty()),
                    "{file}: {name} starts with {:?}, not a symbolic batch",
                    dims[0]
                );
                assert_eq!(dims[1..], fixed_dims[1..], "{file}: {name}");
            }
        }
    }
}

#[test]
fn fp16_models_keep_float32_io_and_hold_float16_weights() {
    for source in ["seg", "cls", "seg_batch", "cls_batch"] {
        // the rule: the FP16 file of X.onnx is X_fp16.onnx beside it
        let file = format!("{source}_fp16.onnx");
        let model = proto(&file);
        let values = io(&file, &model);
        for (name, elem, _) in &values {
            assert_eq!(*elem, FLOAT, "{file}: {name} is not float32");
        }
        assert_eq!(
            values,
            io(source, &proto(&format!("{source}.onnx"))),
            "{file}: inputs and outputs differ from {source}.onnx"
        );
        let graph = model.graph.as_ref().unwrap();
        let fp16 = graph
            .initializer
            .iter()
            .filter(|t| t.data_type == FLOAT16)
            .count();
        assert!(fp16 >= 1, "{file} has no FLOAT16 initializer");
    }
}

#[test]
fn cls_batch_runs_a_batch_of_two_in_tract_like_two_single_runs() {
    let single = tract_onnx::onnx()
        .model_for_path(model_path("cls.onnx"))
        .unwrap()
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let batch = tract_onnx::onnx()
        .model_for_path(model_path("cls_batch.onnx"))
        .unwrap()
        .with_input_fact(0, f32::fact([2, 4, 224, 512]).into())
        .unwrap()
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    // a deterministic input whose two rows differ
    let x = tract_ndarray::Array4::<f32>::from_shape_fn((2, 4, 224, 512), |(n, c, y, x)| {
        (((n * 7 + c * 13 + y * 3 + x) % 97) as f32 / 48.0 - 1.0) * if n == 0 { 1.0 } else { -0.7 }
    });
    let out = batch.run(tvec!(x.clone().into_tensor().into())).unwrap();
    let out = out[0].to_plain_array_view::<f32>().unwrap();
    assert_eq!(out.shape(), &[2, 2]);
    for n in 0..2 {
        let row = x.slice(tract_ndarray::s![n..n + 1, .., .., ..]).to_owned();
        let one = single.run(tvec!(row.into_tensor().into())).unwrap();
        let one = one[0].to_plain_array_view::<f32>().unwrap();
        for k in 0..2 {
            let (a, b) = (out[[n, k]], one[[0, k]]);
            assert!(
                (a - b).abs() <= 1e-4,
                "row {n} logit {k}: batch {a} vs single {b}"
            );
        }
    }
}

/// A Python that can import `onnx` and `numpy`: the repo's `.venv`, else `python3`.
fn python_with_onnx() -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    for python in [repo().join(".venv/bin/python"), PathBuf::from("python3")] {
        match Command::new(&python)
            .args(["-c", "import onnx, numpy"])
            .output()
        {
            Ok(out) if out.status.success() => return Ok(python),
            Ok(out) => tried.push(format!(
                "{}: {}",
                python.display(),
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("failed")
            )),
            Err(e) => tried.push(format!("{}: {e}", python.display())),
        }
    }
    Err(format!(
        "no Python with onnx and numpy ({})",
        tried.join("; ")
    ))
}

fn sha256_hex(path: &Path) -> String {
    use sha2::Digest;
    let bytes = std::fs::read(path).unwrap();
    format!("{:x}", sha2::Sha256::digest(&bytes))
}

#[test]
fn export_script_reproduces_the_committed_files_byte_for_byte() {
    let python = match python_with_onnx() {
        Ok(python) => python,
        Err(reason) => {
            println!("SKIPPED: {reason}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    for stem in STATIC {
        let file = format!("{stem}.onnx");
        std::fs::copy(model_path(&file), dir.path().join(&file)).unwrap();
    }
    let out = Command::new(&python)
        .arg(repo().join("scripts/demo/export_batch_fp16.py"))
        .arg("--models")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} scripts/demo/export_batch_fp16.py failed: {}\n{}",
        python.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for file in derived_files() {
        let (made, committed) = (dir.path().join(&file), model_path(&file));
        assert!(made.is_file(), "the script wrote no {file}");
        assert_eq!(
            sha256_hex(&made),
            sha256_hex(&committed),
            "{file}: the script's bytes differ from the committed file (re-run \
             `python3 scripts/demo/export_batch_fp16.py --models models` and commit, or find what \
             made the conversion non-deterministic)"
        );
    }
}
