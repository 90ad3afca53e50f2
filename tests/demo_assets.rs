//! The committed demo world holds its contract: both models have exactly the
//! production IO (names, float32, static shapes), opset 17, weights inside,
//! at most 3 MB; the sample clip has a label per frame and fits the asset budget.

use std::path::PathBuf;

use sealcheck::config;
use sealcheck::infer;
use tract_onnx::prelude::Framework;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn demo_models_have_the_production_io_contract() {
    let mut cfg = config::load(&repo().join("config/demo.toml")).unwrap();
    cfg.inference.backend = config::BackendChoice::Tract;
    let selection = infer::open_backend(&cfg).unwrap();
    let seg = selection.backend.io(infer::ModelRole::Segmentation);
    assert_eq!(
        (seg.input_name.as_str(), seg.input_shape.as_slice()),
        ("images", &[1, 3, 640, 640][..])
    );
    assert_eq!(
        (seg.output_name.as_str(), seg.output_shape.as_slice()),
        ("logits", &[1, 2, 640, 640][..])
    );
    let cls = selection.backend.io(infer::ModelRole::Classifier);
    assert_eq!(
        (cls.input_name.as_str(), cls.input_shape.as_slice()),
        ("input", &[1, 4, 224, 512][..])
    );
    assert_eq!(
        (cls.output_name.as_str(), cls.output_shape.as_slice()),
        ("logits", &[1, 2][..])
    );
}

#[test]
fn demo_models_are_opset_17_float32_self_contained_and_small() {
    for name in ["seg.onnx", "cls.onnx"] {
        let path = repo().join("models").join(name);
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= 3 * 1024 * 1024, "{name} is {size} bytes, over 3 MB");
        let proto = tract_onnx::onnx().proto_model_for_path(&path).unwrap();
        let default_opset: Vec<i64> = proto
            .opset_import
            .iter()
            .filter(|o| o.domain.is_empty())
            .map(|o| o.version)
            .collect();
        assert_eq!(default_opset, [17], "{name}");
        assert!(
            proto.ir_version <= 10,
            "{name}: IR {} is newer than ONNX Runtime 1.31 and tract read",
            proto.ir_version
        );
        let graph = proto.graph.as_ref().unwrap();
        assert!(
            !graph.initializer.is_empty(),
            "{name} has no weights inside"
        );
        // data_location 1 = EXTERNAL: weights in a side file, which the contract forbids.
        assert!(
            graph.initializer.iter().all(|t| t.data_location != Some(1)),
            "{name} keeps weights outside the file"
        );
        for value in graph.input.iter().chain(&graph.output) {
            let elem_type = match value.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(tract_onnx::pb::type_proto::Value::TensorType(t)) => t.elem_type,
                other => panic!("{name}: {} is not a tensor: {other:?}", value.name),
            };
            assert_eq!(elem_type, 1, "{name}: {} is not float32", value.name);
        }
    }
}

#[test]
fn sample_clip_has_a_label_per_frame_and_fits_the_asset_budget() {
    let clip = repo().join("samples/demo_clip");
    let frames = std::fs::read_dir(&clip)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("frame_")
        })
        .count();
    assert!(frames >= 300, "{frames} frames");
    let labels = std::fs::read_to_string(clip.join("labels.jsonl")).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for (i, line) in labels.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["frame"], i as u64);
        let (label, kind) = (v["label"].as_str().unwrap(), v["kind"].as_str().unwrap());
        assert!(
            [
                "ok",
                "gap",
                "wrinkle",
                "contamination",
                "misaligned",
                "missing"
            ]
            .contains(&kind)
        );
        assert_eq!(
            label == "ok",
            kind == "ok",
            "frame {i}: label {label} with kind {kind}"
        );
        kinds.insert(kind.to_string());
    }
    assert_eq!(labels.lines().count(), frames);
    assert_eq!(kinds.len(), 6, "every kind appears in the clip: {kinds:?}");
    let total: u64 = ["models", "samples"]
        .iter()
        .flat_map(|d| walk(&repo().join(d)))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        total <= 20 * 1024 * 1024,
        "assets take {total} bytes, over 20 MB"
    );
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path))
        } else {
            out.push(path)
        }
    }
    out
}
