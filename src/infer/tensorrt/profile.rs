//! The optimization profile of a model with a dynamic batch, decided before
//! the engine is built (the profile is part of the engine's cache key, so a
//! changed `[inference] max_batch` builds a new engine):
//!
//! ```text
//! ONNX graph input [batch, C, H, W], max_batch = 4 -> profile  images:1xCxHxW/4xCxHxW/4xCxHxW
//! ONNX graph input [1, C, H, W]                    -> no profile (static shapes, the key as before)
//! ```
//!
//! Only the graph's declared input is read, with tract's ONNX protobuf
//! reader (`proto_model_for_path`, as the demo-asset tests use; no graph
//! analysis, since TensorRT takes operators tract may not). The engine's own
//! IO (-1 for the batch) is then checked by `model_io`, as every backend's.

use tract_onnx::pb::tensor_shape_proto::dimension::Value as DimValue;
use tract_onnx::pb::type_proto::Value as TypeValue;
use tract_onnx::pb::{ModelProto, ValueInfoProto};
use tract_onnx::prelude::Framework as _;

use super::bridge::ProfileShape;
use super::error::TrtError;
use crate::infer::error::InferError;
use crate::infer::model_io::{BatchDim, DeclaredTensor, Dim, ModelSpec, static_shape};

/// The ONNX model's input with a symbolic first (batch) dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BatchInput {
    pub(super) name: String,
    /// One frame's shape: `[1, C, H, W]`.
    pub(super) frame: Vec<i64>,
}

/// Reads `spec`'s ONNX file: its input, when its first dimension is
/// symbolic (`None` for a static model). Any other symbolic dimension is the
/// contract error every backend gives.
pub(super) fn dynamic_batch_input(spec: &ModelSpec<'_>) -> Result<Option<BatchInput>, TrtError> {
    let proto = tract_onnx::onnx()
        .proto_model_for_path(spec.path)
        .map_err(|e| InferError::ModelLoad {
            role: spec.role,
            path: spec.path.to_path_buf(),
            engine: "TensorRT",
            message: format!("{e:#}"),
        })?;
    Ok(batch_input_of(spec, &proto)?)
}

/// As `dynamic_batch_input`, on the decoded model. The input is the one the
/// config names, else the graph's only input (a wrong name is then reported
/// by `model_io` after the build, in the words every backend uses).
fn batch_input_of(
    spec: &ModelSpec<'_>,
    model: &ModelProto,
) -> Result<Option<BatchInput>, InferError> {
    let Some(graph) = &model.graph else {
        return Ok(None);
    };
    // Older exports list the weights among the graph inputs too.
    let inputs: Vec<&ValueInfoProto> = graph
        .input
        .iter()
        .filter(|i| !graph.initializer.iter().any(|w| w.name == i.name))
        .collect();
    let input = match inputs.iter().find(|i| i.name == spec.input) {
        Some(named) => *named,
        None => match inputs.as_slice() {
            [only] => *only,
            _ => return Ok(None),
        },
    };
    let Some(dims) = declared_dims(input) else {
        return Ok(None);
    };
    let declared = DeclaredTensor {
        name: input.name.clone(),
        dims: Some(dims),
        // The element type is checked on the engine's IO after the build.
        is_f32: true,
        element: String::new(),
    };
    let (frame, batch) = static_shape(spec, "input", &declared)?;
    Ok((batch == BatchDim::Dynamic).then(|| BatchInput {
        name: input.name.clone(),
        frame: frame
            .iter()
            .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
            .collect(),
    }))
}

/// The input's dimensions as `model_io` names them (`None`: no tensor
/// shape declared). A value of 0 or less counts as symbolic, as TensorRT's
/// ONNX parser reads it.
fn declared_dims(input: &ValueInfoProto) -> Option<Vec<Dim>> {
    // The only kind of value tract's ONNX schema knows.
    let TypeValue::TensorType(tensor) = input.r#type.as_ref()?.value.as_ref()?;
    let dims = tensor
        .shape
        .as_ref()?
        .dim
        .iter()
        .map(|d| match &d.value {
            Some(DimValue::DimValue(n)) => usize::try_from(*n)
                .ok()
                .filter(|&n| n > 0)
                .map_or_else(|| Dim::Symbolic(n.to_string()), Dim::Fixed),
            Some(DimValue::DimParam(name)) if !name.is_empty() => Dim::Symbolic(name.clone()),
            _ => Dim::Symbolic("?".to_string()),
        })
        .collect();
    Some(dims)
}

/// The build's optimization profile: none for a static model; for a dynamic
/// batch one entry, min 1 frame, opt and max `max_batch` frames (the line
/// runs full batches whenever cameras deliver together).
pub(super) fn batch_profile(input: Option<&BatchInput>, max_batch: usize) -> Vec<ProfileShape> {
    let Some(input) = input else {
        return Vec::new();
    };
    let mut most = input.frame.clone();
    if let Some(batch) = most.first_mut() {
        *batch = i64::try_from(max_batch.max(1)).unwrap_or(i64::MAX);
    }
    vec![ProfileShape {
        input: input.name.clone(),
        min: input.frame.clone(),
        opt: most.clone(),
        max: most,
    }]
}

/// Most frames one run of an engine built with `profile` takes (1 without one).
pub(super) fn profile_max_batch(profile: &[ProfileShape]) -> usize {
    profile
        .iter()
        .filter_map(|p| p.max.first())
        .filter_map(|&n| usize::try_from(n).ok())
        .min()
        .unwrap_or(1)
        .max(1)
}

/// The profile as the engine cache key holds it: one
/// "name:min/opt/max" entry per input, e.g. "images:1x3x640x640/4x3x640x640/4x3x640x640".
pub(super) fn profile_key(profile: &[ProfileShape]) -> Vec<String> {
    let dims = |d: &[i64]| d.iter().map(i64::to_string).collect::<Vec<_>>().join("x");
    profile
        .iter()
        .map(|p| {
            format!(
                "{}:{}/{}/{}",
                p.input,
                dims(&p.min),
                dims(&p.opt),
                dims(&p.max)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use tract_onnx::pb::tensor_shape_proto::Dimension;
    use tract_onnx::pb::{GraphProto, TensorProto, TensorShapeProto, TypeProto, type_proto};

    use super::*;
    use crate::infer::model_io::ModelRole;
    use crate::infer::tensorrt::engine_cache::{EngineKey, EngineSpec};

    fn spec<'a>(path: &'a Path, role: ModelRole, input: &'a str) -> ModelSpec<'a> {
        ModelSpec {
            role,
            path,
            input,
            output: "logits",
        }
    }

    fn demo(file: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join(file)
    }

    fn value(name: &str, dims: &[Option<DimValue>]) -> ValueInfoProto {
        ValueInfoProto {
            name: name.to_string(),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: 1,
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|d| Dimension {
                                value: d.clone(),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn model(inputs: Vec<ValueInfoProto>, weights: &[&str]) -> ModelProto {
        ModelProto {
            graph: Some(GraphProto {
                input: inputs,
                initializer: weights
                    .iter()
                    .map(|w| TensorProto {
                        name: w.to_string(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn n(v: i64) -> Option<DimValue> {
        Some(DimValue::DimValue(v))
    }

    fn sym(s: &str) -> Option<DimValue> {
        Some(DimValue::DimParam(s.to_string()))
    }

    fn engine_spec(profile: Vec<String>) -> EngineSpec {
        EngineSpec {
            tensorrt_version: "10.3.0".into(),
            gpu_name: "Orin (nvgpu)".into(),
            compute_capability: (8, 7),
            precision: "fp16".into(),
            profile,
            workspace_mib: 1024,
            calibration: None,
        }
    }

    #[test]
    fn the_demo_batch_models_get_one_profile_up_to_max_batch() {
        let seg = demo("seg_batch.onnx");
        let cls = demo("cls_batch.onnx");
        let seg_input = dynamic_batch_input(&spec(&seg, ModelRole::Segmentation, "images"))
            .unwrap()
            .expect("seg_batch.onnx has a symbolic batch");
        assert_eq!(
            profile_key(&batch_profile(Some(&seg_input), 4)),
            ["images:1x3x640x640/4x3x640x640/4x3x640x640"]
        );
        let cls_input = dynamic_batch_input(&spec(&cls, ModelRole::Classifier, "input"))
            .unwrap()
            .expect("cls_batch.onnx has a symbolic batch");
        let profile = batch_profile(Some(&cls_input), 8);
        assert_eq!(
            profile_key(&profile),
            ["input:1x4x224x512/8x4x224x512/8x4x224x512"]
        );
        assert_eq!(profile_max_batch(&profile), 8);
    }

    #[test]
    fn a_static_model_has_no_profile_and_keeps_its_key() {
        let seg = demo("seg.onnx");
        let input = dynamic_batch_input(&spec(&seg, ModelRole::Segmentation, "images")).unwrap();
        assert_eq!(input, None);
        for max_batch in [1, 4, 64] {
            assert!(batch_profile(input.as_ref(), max_batch).is_empty());
        }
        assert_eq!(profile_max_batch(&[]), 1);
        // The key of a static model is what it was before batches: an empty profile.
        assert_eq!(
            EngineKey::new(b"seg", &engine_spec(profile_key(&batch_profile(None, 8)))),
            EngineKey::new(b"seg", &engine_spec(Vec::new()))
        );
    }

    #[test]
    fn engine_key_changes_with_max_batch_for_a_dynamic_model() {
        let input = BatchInput {
            name: "images".into(),
            frame: vec![1, 3, 640, 640],
        };
        let key = |max_batch| {
            EngineKey::new(
                b"seg_batch",
                &engine_spec(profile_key(&batch_profile(Some(&input), max_batch))),
            )
        };
        assert_ne!(key(4).digest, key(8).digest);
        assert_ne!(key(1).digest, key(2).digest);
        assert_eq!(key(4), key(4));
        let differences =
            crate::infer::tensorrt::engine_cache::differences(&key(4).fields, &key(8).fields);
        assert_eq!(
            differences,
            [
                "profile images:1x3x640x640/4x3x640x640/4x3x640x640 (now images:1x3x640x640/8x3x640x640/8x3x640x640)"
            ]
        );
    }

    #[test]
    fn the_input_is_found_among_weights_and_by_its_configured_name() {
        let path = PathBuf::from("seg.onnx");
        let images = value("images", &[sym("batch"), n(3), n(64), n(96)]);
        let old_style = model(
            vec![
                value("conv.weight", &[n(8), n(3), n(3), n(3)]),
                images.clone(),
            ],
            &["conv.weight"],
        );
        let found = batch_input_of(&spec(&path, ModelRole::Segmentation, "other"), &old_style)
            .unwrap()
            .unwrap();
        assert_eq!(found.name, "images");
        assert_eq!(found.frame, [1, 3, 64, 96]);

        let two = model(
            vec![images.clone(), value("extra", &[sym("batch"), n(1)])],
            &[],
        );
        assert!(
            batch_input_of(&spec(&path, ModelRole::Segmentation, "images"), &two)
                .unwrap()
                .is_some()
        );
        assert_eq!(
            batch_input_of(&spec(&path, ModelRole::Segmentation, "nothing"), &two).unwrap(),
            None,
            "two inputs and neither configured: no profile; model_io names the problem"
        );

        let minus_one = model(vec![value("images", &[n(-1), n(3), n(64), n(96)])], &[]);
        assert!(
            batch_input_of(&spec(&path, ModelRole::Segmentation, "images"), &minus_one)
                .unwrap()
                .is_some(),
            "-1 is a runtime dimension for TensorRT"
        );
    }

    #[test]
    fn a_dynamic_dimension_past_the_batch_is_the_contract_error() {
        let path = PathBuf::from("tall.onnx");
        let tall = model(
            vec![value("images", &[sym("N"), n(3), sym("H"), n(64)])],
            &[],
        );
        let err = batch_input_of(&spec(&path, ModelRole::Segmentation, "images"), &tall)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("dynamic shape [N, 3, H, 64]") && err.contains("tall.onnx"),
            "{err}"
        );
    }

    #[test]
    fn an_unreadable_model_is_a_load_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broken.onnx");
        std::fs::write(&path, [0xff_u8; 64]).unwrap();
        let err = dynamic_batch_input(&spec(&path, ModelRole::Classifier, "input"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("broken.onnx"), "{err}");
    }
}
