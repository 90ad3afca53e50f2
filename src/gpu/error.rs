//! Why a GPU operation failed. Each variant names the driver call or the
//! buffer involved, so a technician can tell a missing driver from a wiring
//! bug from a failing device.

use cudarc::driver::DriverError;

use super::element::TensorElement;

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error(
        "the CUDA driver library (libcuda.so) was not found; install the NVIDIA driver \
         (on a Jetson it comes with JetPack) or set inference.preprocess = \"cpu\""
    )]
    NoDriver,
    #[error(
        "no CUDA device is present ({detail}); check `nvidia-smi` or set inference.preprocess = \"cpu\""
    )]
    NoDevice { detail: String },
    #[error("CUDA device {ordinal} does not exist: the driver sees {count} device(s)")]
    DeviceOutOfRange { ordinal: usize, count: usize },
    #[error("CUDA call {call} failed: {source}")]
    Driver {
        call: &'static str,
        #[source]
        source: DriverError,
    },
    #[error(
        "the embedded kernel file {file} could not be loaded: {source}. The fatbin holds code for \
         sm_87 and sm_90 and PTX for compute_90; this GPU or driver may be older than that toolkit"
    )]
    ModuleLoad {
        file: &'static str,
        #[source]
        source: DriverError,
    },
    #[error(
        "kernel {symbol} is missing from the embedded {file}: the build and src/gpu/kernels.rs disagree"
    )]
    KernelMissing {
        symbol: &'static str,
        file: &'static str,
        #[source]
        source: DriverError,
    },
    #[error("kernel {symbol} was not loaded into this kernel set (a benchmark-only kernel?)")]
    KernelNotLoaded { symbol: &'static str },
    #[error(
        "{buffer} buffer holds {len} elements but the model geometry needs {expected}; \
         it was sized for other models"
    )]
    BufferLength {
        buffer: &'static str,
        len: usize,
        expected: usize,
    },
    #[error("{what} needs {wanted:?} tensors but this GPU preprocessor was built for {built:?}")]
    ElementMismatch {
        what: &'static str,
        wanted: TensorElement,
        built: TensorElement,
    },
    #[error("mask class {mask_class} is not below the segmentation model's {classes} classes")]
    MaskClass { mask_class: usize, classes: usize },
    #[error(
        "a frame slot has no device address although mapped (zero-copy) transfer was chosen; \
         set frame transfer to copy"
    )]
    Unmapped,
    #[error(
        "crop [{x}, {y}, {width}, {height}] (x, y, width, height) leaves the {frame_width}x{frame_height} \
         frame or is empty"
    )]
    CropOutside {
        x: u32,
        y: u32,
        width: u32,
        height: u32,
        frame_width: usize,
        frame_height: usize,
    },
    #[error(
        "a crop of the frame already on the GPU was asked for, but no frame is staged there \
         (its staging failed, or another frame was staged since)"
    )]
    NoFrameToCrop,
    #[error("{what} is too large for the GPU kernels ({value}; at most {max})")]
    TooLarge {
        what: &'static str,
        value: usize,
        max: usize,
    },
}

impl GpuError {
    /// Wraps a driver status with the name of the call that returned it.
    pub(crate) fn driver(call: &'static str) -> impl FnOnce(DriverError) -> GpuError {
        move |source| GpuError::Driver { call, source }
    }
}
