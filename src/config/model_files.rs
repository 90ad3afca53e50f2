//! The model files beside a named FP32 model: the INT8 and FP16 siblings
//! that the export scripts write and the config's precisions run.

use std::path::PathBuf;

/// The INT8 (QDQ) model beside an FP32 one, as `scripts/demo/quantize_int8.py`
/// names it: `models/seg.onnx` -> `models/seg_int8.onnx`. What
/// `sealcheck evaluate --candidate onnxruntime:cpu:int8` and an INT8
/// `[shadow]` on ONNX Runtime run.
pub fn int8_sibling(fp32: &std::path::Path) -> PathBuf {
    let stem = fp32.file_stem().unwrap_or_default().to_string_lossy();
    fp32.with_file_name(format!("{stem}_int8.onnx"))
}

/// The FP16 model beside an FP32 one, as `scripts/demo/export_batch_fp16.py`
/// names it: `models/seg.onnx` -> `models/seg_fp16.onnx` (a file already
/// named `_fp16` is its own). What `[inference] precision = "fp16"` and
/// `sealcheck evaluate --candidate onnxruntime:cuda:fp16` run on ONNX Runtime.
pub fn fp16_sibling(fp32: &std::path::Path) -> PathBuf {
    let stem = fp32.file_stem().unwrap_or_default().to_string_lossy();
    if stem.ends_with("_fp16") {
        return fp32.to_path_buf();
    }
    fp32.with_file_name(format!("{stem}_fp16.onnx"))
}
