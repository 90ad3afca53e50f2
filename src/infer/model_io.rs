//! What a model file declares about its input and output, and the check that
//! it fits both the config and the tensor contract the pipeline relies on.
//!
//! Every engine reports what it read from the model as `DeclaredTensor`s; the
//! check is shared so all engines accept and reject the same models with the
//! same words.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::error::InferError;
pub use super::model_role::ModelRole;
use crate::frame::TensorGeometry;

/// Names and shape of one model's single input and single output, read from the model file.
/// The shapes are one frame's (leading dimension 1); `batch` says whether
/// the model takes more frames per run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelIo {
    pub input_name: String,
    pub input_shape: Vec<usize>,
    pub output_name: String,
    pub output_shape: Vec<usize>,
    pub batch: BatchDim,
}

/// The leading (batch) dimension of a model's input and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchDim {
    /// Declared 1: one frame per run.
    One,
    /// Declared symbolic (`batch`, `N`, `-1`) on both input and output: any
    /// number of frames per run.
    Dynamic,
}

impl BatchDim {
    /// Most frames per run this model takes, at most `wanted`.
    pub fn frames(self, wanted: usize) -> usize {
        match self {
            BatchDim::One => 1,
            BatchDim::Dynamic => wanted.max(1),
        }
    }
}

impl ModelIo {
    pub fn input_len(&self) -> usize {
        self.input_shape.iter().product()
    }

    pub fn output_len(&self) -> usize {
        self.output_shape.iter().product()
    }
}

/// One dimension as the model file declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Fixed(usize),
    /// A named or unknown dimension (dynamic batch, `-1`, ...).
    Symbolic(String),
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Symbolic(s) => write!(f, "{s}"),
        }
    }
}

/// One graph input or output as an engine read it from the model file.
#[derive(Debug, Clone)]
pub struct DeclaredTensor {
    pub name: String,
    /// `None` when the engine could not tell the rank.
    pub dims: Option<Vec<Dim>>,
    /// Element type as the engine names it; `is_f32` decides.
    pub element: String,
    pub is_f32: bool,
}

/// The model file and the names the config expects in it.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec<'a> {
    pub role: ModelRole,
    pub path: &'a Path,
    pub input: &'a str,
    pub output: &'a str,
}

impl<'a> ModelSpec<'a> {
    pub fn segmentation(cfg: &'a crate::config::SegmentationModel) -> Self {
        ModelSpec {
            role: ModelRole::Segmentation,
            path: &cfg.path,
            input: &cfg.input,
            output: &cfg.output,
        }
    }

    pub fn classifier(cfg: &'a crate::config::ClassifierModel) -> Self {
        ModelSpec {
            role: ModelRole::Classifier,
            path: &cfg.path,
            input: &cfg.input,
            output: &cfg.output,
        }
    }

    /// A clear error for a missing file before any engine tries (engines word it badly).
    pub fn require_file(&self) -> Result<(), InferError> {
        if self.path.is_file() {
            Ok(())
        } else {
            Err(InferError::ModelMissing {
                role: self.role,
                path: self.path.to_path_buf(),
            })
        }
    }

    fn contract_error(&self, problem: impl Into<String>) -> InferError {
        InferError::Contract {
            role: self.role,
            path: self.path.to_path_buf(),
            problem: problem.into(),
        }
    }
}

/// Models opened in this process, by every engine (`record_opened`).
static MODELS_OPENED: AtomicUsize = AtomicUsize::new(0);

/// How many models engines have opened in this process so far.
pub fn models_opened() -> usize {
    MODELS_OPENED.load(Ordering::Relaxed)
}

/// Every engine calls this once per model it has opened and checked: the
/// "model opened" log line (and `models_opened`) show a model opened twice,
/// which on a Jetson is an engine twice in shared memory.
pub(crate) fn record_opened(spec: &ModelSpec<'_>, engine: &str) {
    MODELS_OPENED.fetch_add(1, Ordering::Relaxed);
    log::info!(target: "sealcheck::infer", model = spec.role.as_str(), engine = engine,
        path:% = spec.path.display(); "model opened");
}

/// Checks what the model declares against the config's names and the shape
/// contract, and returns its static input/output description.
pub fn resolve_model_io(
    spec: &ModelSpec<'_>,
    inputs: &[DeclaredTensor],
    outputs: &[DeclaredTensor],
) -> Result<ModelIo, InferError> {
    let input = single(spec, "input", inputs)?;
    let output = single(spec, "output", outputs)?;
    check_name(spec, "input", spec.input, &input.name)?;
    check_name(spec, "output", spec.output, &output.name)?;
    let (input_shape, input_batch) = static_shape(spec, "input", input)?;
    let (output_shape, output_batch) = static_shape(spec, "output", output)?;
    if input_batch != output_batch {
        return Err(spec.contract_error(format!(
            "input \"{}\" and output \"{}\" disagree on the batch (first) dimension: [{}] against [{}]; re-export with the same dynamic or fixed batch on both",
            input.name,
            output.name,
            input.dims.as_deref().map(join).unwrap_or_default(),
            output.dims.as_deref().map(join).unwrap_or_default(),
        )));
    }
    let io = ModelIo {
        input_name: input.name.clone(),
        input_shape,
        output_name: output.name.clone(),
        output_shape,
        batch: input_batch,
    };
    check_contract(spec, &io)?;
    Ok(io)
}

fn single<'t>(
    spec: &ModelSpec<'_>,
    what: &str,
    tensors: &'t [DeclaredTensor],
) -> Result<&'t DeclaredTensor, InferError> {
    match tensors {
        [one] => Ok(one),
        _ => {
            let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
            Err(spec.contract_error(format!(
                "it has {} {what}s {names:?}, the pipeline feeds exactly one",
                tensors.len()
            )))
        }
    }
}

fn check_name(
    spec: &ModelSpec<'_>,
    key: &'static str,
    configured: &str,
    actual: &str,
) -> Result<(), InferError> {
    if configured == actual {
        Ok(())
    } else {
        Err(InferError::NameMismatch {
            role: spec.role,
            path: spec.path.to_path_buf(),
            key,
            configured: configured.to_string(),
            actual: actual.to_string(),
        })
    }
}

/// One frame's shape (batch dimension 1) and the batch dimension: only the
/// first dimension may be symbolic. (Also read by TensorRT before a build,
/// to choose the optimization profile.)
pub(crate) fn static_shape(
    spec: &ModelSpec<'_>,
    what: &str,
    tensor: &DeclaredTensor,
) -> Result<(Vec<usize>, BatchDim), InferError> {
    if !tensor.is_f32 {
        return Err(spec.contract_error(format!(
            "{what} \"{}\" has element type {}, not f32",
            tensor.name, tensor.element
        )));
    }
    let Some(dims) = &tensor.dims else {
        return Err(
            spec.contract_error(format!("{what} \"{}\" has no declared shape", tensor.name))
        );
    };
    let mut shape = Vec::with_capacity(dims.len());
    let mut batch = BatchDim::One;
    for (index, dim) in dims.iter().enumerate() {
        match dim {
            Dim::Fixed(n) => shape.push(*n),
            Dim::Symbolic(_) if index == 0 => {
                batch = BatchDim::Dynamic;
                shape.push(1);
            }
            Dim::Symbolic(_) => {
                return Err(spec.contract_error(format!(
                    "{what} \"{}\" has dynamic shape [{}]; sealcheck needs static shapes but for the batch (first) dimension",
                    tensor.name,
                    join(dims)
                )));
            }
        }
    }
    Ok((shape, batch))
}

/// Input `[1, channels, H, W]`; output `[1, C, H, W]` (same H, W) for segmentation,
/// `[1, C]` for the classifier; at least two classes either way.
pub fn check_contract(spec: &ModelSpec<'_>, io: &ModelIo) -> Result<(), InferError> {
    let channels = spec.role.input_channels();
    let input_ok =
        matches!(io.input_shape.as_slice(), [1, c, h, w] if *c == channels && *h > 0 && *w > 0);
    if !input_ok {
        return Err(spec.contract_error(format!(
            "input \"{}\" has shape {:?}, expected [1, {channels}, H, W]",
            io.input_name, io.input_shape
        )));
    }
    let (h, w) = (io.input_shape[2], io.input_shape[3]);
    let (output_ok, expected) = match spec.role {
        ModelRole::Segmentation => (
            matches!(io.output_shape.as_slice(), [1, c, oh, ow] if *c >= 2 && *oh == h && *ow == w),
            format!("[1, C, {h}, {w}] with C >= 2"),
        ),
        ModelRole::Classifier => (
            matches!(io.output_shape.as_slice(), [1, c] if *c >= 2),
            "[1, C] with C >= 2".to_string(),
        ),
    };
    if !output_ok {
        return Err(spec.contract_error(format!(
            "output \"{}\" has shape {:?}, expected {expected}",
            io.output_name, io.output_shape
        )));
    }
    Ok(())
}

/// Tensor shapes of the pair, for sizing the per-frame buffers.
pub fn geometry(seg: &ModelIo, cls: &ModelIo) -> Result<TensorGeometry, InferError> {
    let seg_ok = matches!((seg.input_shape.as_slice(), seg.output_shape.as_slice()),
        ([1, 3, h, w], [1, c, oh, ow]) if c >= &2 && oh == h && ow == w);
    if !seg_ok {
        return Err(InferError::Mismatch(format!(
            "segmentation model shapes {:?} -> {:?} are not [1,3,H,W] -> [1,C,H,W]",
            seg.input_shape, seg.output_shape
        )));
    }
    let cls_ok = matches!((cls.input_shape.as_slice(), cls.output_shape.as_slice()), ([1, 4, _, _], [1, c]) if c >= &2);
    if !cls_ok {
        return Err(InferError::Mismatch(format!(
            "classifier model shapes {:?} -> {:?} are not [1,4,H,W] -> [1,C]",
            cls.input_shape, cls.output_shape
        )));
    }
    Ok(TensorGeometry {
        seg_hw: (seg.input_shape[2], seg.input_shape[3]),
        seg_classes: seg.output_shape[1],
        cls_hw: (cls.input_shape[2], cls.input_shape[3]),
        cls_classes: cls.output_shape[1],
    })
}

/// Checks the buffers a caller hands to `segment`/`classify` (a wrong length is a bug upstream).
pub fn check_buffers(
    role: ModelRole,
    io: &ModelIo,
    input: &[f32],
    logits_out: &[f32],
) -> Result<(), InferError> {
    if input.len() != io.input_len() {
        return Err(InferError::BufferLength {
            role,
            buffer: "input",
            expected: io.input_len(),
            actual: input.len(),
        });
    }
    if logits_out.len() != io.output_len() {
        return Err(InferError::BufferLength {
            role,
            buffer: "logits",
            expected: io.output_len(),
            actual: logits_out.len(),
        });
    }
    Ok(())
}

/// The classifier's logits for one frame must be finite numbers (a handful of
/// floats, so every engine's every frame is checked). The segmentation logits
/// are not scanned: on the device path they never leave the GPU.
pub fn check_classifier_output(logits: &[f32]) -> Result<(), InferError> {
    if logits.iter().all(|l| l.is_finite()) {
        return Ok(());
    }
    Err(InferError::NonFiniteOutput {
        role: ModelRole::Classifier,
        values: format!("{logits:?}"),
    })
}

fn join(dims: &[Dim]) -> String {
    dims.iter()
        .map(Dim::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn f32_tensor(name: &str, dims: &[usize]) -> DeclaredTensor {
        DeclaredTensor {
            name: name.into(),
            dims: Some(dims.iter().map(|d| Dim::Fixed(*d)).collect()),
            element: "f32".into(),
            is_f32: true,
        }
    }

    fn seg_spec(path: &Path) -> ModelSpec<'_> {
        ModelSpec {
            role: ModelRole::Segmentation,
            path,
            input: "images",
            output: "logits",
        }
    }

    #[test]
    fn accepts_contract_shapes() {
        let path = PathBuf::from("seg.onnx");
        let io = resolve_model_io(
            &seg_spec(&path),
            &[f32_tensor("images", &[1, 3, 64, 96])],
            &[f32_tensor("logits", &[1, 2, 64, 96])],
        )
        .unwrap();
        assert_eq!(io.input_shape, vec![1, 3, 64, 96]);
        assert_eq!(io.output_len(), 2 * 64 * 96);
    }

    #[test]
    fn name_mismatch_names_both() {
        let path = PathBuf::from("seg.onnx");
        let err = resolve_model_io(
            &seg_spec(&path),
            &[f32_tensor("input.1", &[1, 3, 64, 64])],
            &[f32_tensor("logits", &[1, 2, 64, 64])],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("\"images\"") && err.contains("\"input.1\"") && err.contains("seg.onnx"),
            "{err}"
        );
    }

    fn with_dims(mut tensor: DeclaredTensor, first: Dim, height: Dim) -> DeclaredTensor {
        let dims = tensor.dims.as_mut().unwrap();
        dims[0] = first;
        dims[2] = height;
        tensor
    }

    #[test]
    fn a_dynamic_batch_is_taken_and_any_other_dynamic_dim_is_rejected() {
        let path = PathBuf::from("seg.onnx");
        let n = || Dim::Symbolic("N".into());
        let input = with_dims(f32_tensor("images", &[1, 3, 64, 64]), n(), Dim::Fixed(64));
        let output = with_dims(f32_tensor("logits", &[1, 2, 64, 64]), n(), Dim::Fixed(64));
        let io = resolve_model_io(
            &seg_spec(&path),
            std::slice::from_ref(&input),
            std::slice::from_ref(&output),
        )
        .unwrap();
        assert_eq!(io.batch, BatchDim::Dynamic);
        assert_eq!(io.input_shape, vec![1, 3, 64, 64], "one frame's shape");
        assert_eq!(io.output_shape, vec![1, 2, 64, 64]);
        assert_eq!(io.batch.frames(4), 4);

        let tall = with_dims(
            f32_tensor("images", &[1, 3, 64, 64]),
            n(),
            Dim::Symbolic("H".into()),
        );
        let err = resolve_model_io(&seg_spec(&path), &[tall], &[output])
            .unwrap_err()
            .to_string();
        assert!(err.contains("dynamic shape [N, 3, H, 64]"), "{err}");

        let fixed_out = f32_tensor("logits", &[1, 2, 64, 64]);
        let err = resolve_model_io(&seg_spec(&path), &[input], &[fixed_out])
            .unwrap_err()
            .to_string();
        assert!(err.contains("disagree on the batch"), "{err}");
    }

    #[test]
    fn output_size_must_match_input() {
        let path = PathBuf::from("seg.onnx");
        let err = resolve_model_io(
            &seg_spec(&path),
            &[f32_tensor("images", &[1, 3, 64, 64])],
            &[f32_tensor("logits", &[1, 2, 32, 32])],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("[1, 2, 32, 32]") && err.contains("[1, C, 64, 64]"),
            "{err}"
        );
    }

    #[test]
    fn geometry_reads_both_models() {
        let seg = ModelIo {
            input_name: "images".into(),
            input_shape: vec![1, 3, 640, 640],
            output_name: "logits".into(),
            output_shape: vec![1, 2, 640, 640],
            batch: BatchDim::One,
        };
        let cls = ModelIo {
            input_name: "input".into(),
            input_shape: vec![1, 4, 224, 512],
            output_name: "logits".into(),
            output_shape: vec![1, 2],
            batch: BatchDim::One,
        };
        let g = geometry(&seg, &cls).unwrap();
        assert_eq!(
            g,
            TensorGeometry {
                seg_hw: (640, 640),
                seg_classes: 2,
                cls_hw: (224, 512),
                cls_classes: 2
            }
        );
        assert!(geometry(&cls, &seg).is_err());
    }
}
