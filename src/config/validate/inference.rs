//! `[inference]` with its `[inference.tensorrt]` and
//! `[inference.onnxruntime]` tables: engine, device, batching, precision.

use std::time::Duration;

use super::files::{Files, looked_for};
use crate::config::raw::Section;
use crate::config::types::{
    ArenaExtend, BackendChoice, ComputeDevice, ConvAlgoSearch, DEFAULT_BATCH_CAP, EnginePrecision,
    GraphOptimization, InferenceConfig, MAX_BATCH, OnnxRuntimeConfig, TensorRtConfig,
};

/// `max_batch` not given (read as 0): one frame per camera, up to
/// `DEFAULT_BATCH_CAP`, once the cameras are read (`None`: they had a problem).
pub(super) fn with_default_batch(
    mut inference: InferenceConfig,
    cameras: Option<usize>,
) -> InferenceConfig {
    if inference.max_batch == 0 {
        inference.max_batch = cameras.unwrap_or(1).clamp(1, DEFAULT_BATCH_CAP);
    }
    inference
}

pub(super) fn read_inference(s: &Section, files: &Files) -> Option<InferenceConfig> {
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
    let max_batch = if s.given("max_batch") {
        s.int_in("max_batch", 1..=MAX_BATCH as i64, None)
    } else {
        Some(0)
    };
    let batch_wait_us = s.int_in("batch_wait_us", 0..=100_000, Some(0));
    // Not given: mapped on a GPU that shares the host's memory (decided
    // once the GPU is open).
    let zero_copy = s.given("zero_copy").then(|| s.bool_or("zero_copy", false));
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
        zero_copy,
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
            format!("folder {} does not exist", looked_for(&dir).display()),
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
