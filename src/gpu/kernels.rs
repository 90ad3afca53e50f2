//! The kernels compiled by build.rs from `kernels/*.cu`, embedded in the
//! binary and loaded with the driver (`cuModuleLoadData`, no NVRTC): the
//! `Kernel` enum names each one, `KernelSet` loads them all at start (so a
//! missing one is reported then, not mid-stream), and the `#[repr(C)]`
//! parameter blocks mirror the structs in `kernels/tensors.cuh` field for field.

use std::ffi::{CStr, c_void};
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys::{CUfunction, CUmodule};

use super::context::GpuContext;
pub use super::element::{DeviceTap, TensorElement};
use super::error::GpuError;
use super::stream::Stream;
use crate::frame::PixelLayout;

/// The compiled kernel files (one fatbin per `kernels/*.cu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFile {
    FrameToTensors,
    Mask,
    BenchDelay,
}

/// 16-byte alignment for the embedded images: the driver reads the fatbin
/// header with wide loads.
#[repr(C, align(16))]
struct Aligned<B: ?Sized>(B);

static FRAME_TO_TENSORS_FATBIN: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/frame_to_tensors.fatbin"
)));
static MASK_FATBIN: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/mask.fatbin")));
static BENCH_DELAY_FATBIN: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/bench_delay.fatbin"
)));

impl KernelFile {
    pub const ALL: [KernelFile; 3] = [
        KernelFile::FrameToTensors,
        KernelFile::Mask,
        KernelFile::BenchDelay,
    ];
    /// What the pipeline loads: not the benchmark's delay kernel.
    pub const PIPELINE: [KernelFile; 2] = [KernelFile::FrameToTensors, KernelFile::Mask];

    pub fn source(self) -> &'static str {
        match self {
            KernelFile::FrameToTensors => "kernels/frame_to_tensors.cu",
            KernelFile::Mask => "kernels/mask.cu",
            KernelFile::BenchDelay => "kernels/bench_delay.cu",
        }
    }

    fn image(self) -> &'static [u8] {
        match self {
            KernelFile::FrameToTensors => &FRAME_TO_TENSORS_FATBIN.0,
            KernelFile::Mask => &MASK_FATBIN.0,
            KernelFile::BenchDelay => &BENCH_DELAY_FATBIN.0,
        }
    }
}

/// Every kernel the crate launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Frame to the segmentation input and the classifier's RGB channels.
    FrameToTensors(PixelLayout, TensorElement),
    /// Segmentation logits to the mask, its pixel count and (optionally)
    /// channel 3 of the classifier input, in one launch.
    LogitsToMask {
        logits: TensorElement,
        channel: TensorElement,
    },
    /// Busy-waits a number of GPU cycles (benchmark only).
    BenchDelay,
}

const LAYOUTS: [PixelLayout; 4] = [
    PixelLayout::Rgb,
    PixelLayout::Bgr,
    PixelLayout::Rgba,
    PixelLayout::Bgrx,
];
const ELEMENTS: [TensorElement; 2] = [TensorElement::F32, TensorElement::F16];

impl Kernel {
    pub const COUNT: usize = 4 * 2 + 2 * 2 + 1;

    /// Every kernel, in `index` order.
    pub fn all() -> impl Iterator<Item = Kernel> {
        let frame = ELEMENTS.into_iter().flat_map(|e| {
            LAYOUTS
                .into_iter()
                .map(move |l| Kernel::FrameToTensors(l, e))
        });
        frame
            .chain(ELEMENTS.into_iter().flat_map(|logits| {
                ELEMENTS
                    .into_iter()
                    .map(move |channel| Kernel::LogitsToMask { logits, channel })
            }))
            .chain([Kernel::BenchDelay])
    }

    /// Position in `KernelSet`'s table.
    pub fn index(self) -> usize {
        let layout = |l: PixelLayout| match l {
            PixelLayout::Rgb => 0,
            PixelLayout::Bgr => 1,
            PixelLayout::Rgba => 2,
            PixelLayout::Bgrx => 3,
        };
        let element = |e: TensorElement| match e {
            TensorElement::F32 => 0,
            TensorElement::F16 => 1,
        };
        match self {
            Kernel::FrameToTensors(l, e) => element(e) * 4 + layout(l),
            Kernel::LogitsToMask { logits, channel } => 8 + element(logits) * 2 + element(channel),
            Kernel::BenchDelay => 12,
        }
    }

    pub fn file(self) -> KernelFile {
        match self {
            Kernel::FrameToTensors(..) => KernelFile::FrameToTensors,
            Kernel::LogitsToMask { .. } => KernelFile::Mask,
            Kernel::BenchDelay => KernelFile::BenchDelay,
        }
    }

    /// The `extern "C"` name in the .cu file.
    pub fn symbol(self) -> &'static CStr {
        use PixelLayout::*;
        use TensorElement::*;
        match self {
            Kernel::FrameToTensors(Rgb, F32) => c"frame_to_tensors_rgb_f32",
            Kernel::FrameToTensors(Bgr, F32) => c"frame_to_tensors_bgr_f32",
            Kernel::FrameToTensors(Rgba, F32) => c"frame_to_tensors_rgba_f32",
            Kernel::FrameToTensors(Bgrx, F32) => c"frame_to_tensors_bgrx_f32",
            Kernel::FrameToTensors(Rgb, F16) => c"frame_to_tensors_rgb_f16",
            Kernel::FrameToTensors(Bgr, F16) => c"frame_to_tensors_bgr_f16",
            Kernel::FrameToTensors(Rgba, F16) => c"frame_to_tensors_rgba_f16",
            Kernel::FrameToTensors(Bgrx, F16) => c"frame_to_tensors_bgrx_f16",
            Kernel::LogitsToMask {
                logits: F32,
                channel: F32,
            } => c"logits_to_mask_f32_f32",
            Kernel::LogitsToMask {
                logits: F32,
                channel: F16,
            } => c"logits_to_mask_f32_f16",
            Kernel::LogitsToMask {
                logits: F16,
                channel: F32,
            } => c"logits_to_mask_f16_f32",
            Kernel::LogitsToMask {
                logits: F16,
                channel: F16,
            } => c"logits_to_mask_f16_f16",
            Kernel::BenchDelay => c"bench_delay",
        }
    }
}

/// Block sizes; the kernels are compiled with the same numbers
/// (`FRAME_BLOCK`, `MASK_BLOCK`, `MASK_PIXELS_PER_THREAD`).
pub const FRAME_BLOCK: u32 = 128;
pub const MASK_BLOCK: u32 = 256;
pub const MASK_PIXELS_PER_THREAD: u64 = 4;

/// `ResizeTarget` in `kernels/tensors.cuh`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ResizeTarget {
    pub out: u64,
    pub out_h: u32,
    pub out_w: u32,
    pub scale: [f32; 3],
    pub bias: [f32; 3],
}
const _: () = assert!(size_of::<ResizeTarget>() == 40);

/// `FrameParams` in `kernels/tensors.cuh`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FrameParams {
    pub frame: u64,
    pub stride: u64,
    pub in_w: u32,
    pub in_h: u32,
    pub seg: ResizeTarget,
    pub cls: ResizeTarget,
    pub aligned4: u32,
    pub reserved: u32,
}
const _: () = assert!(size_of::<FrameParams>() == 24 + 2 * 40 + 8);

/// `MaskParams` in `kernels/tensors.cuh`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MaskParams {
    pub logits: u64,
    pub mask: u64,
    pub count: u64,
    /// Channel 3 plane of the classifier input; 0 for the mask alone.
    pub channel: u64,
    pub rows: u64,
    pub cols: u64,
    pub pixels: u64,
    pub classes: u32,
    pub mask_class: u32,
    pub mask_w: u32,
    pub channel_h: u32,
    pub channel_w: u32,
    /// Set by `mask_grid`: blocks before it make the mask, the rest the channel.
    pub mask_blocks: u32,
    pub scale: f32,
    pub bias: f32,
}
const _: () = assert!(size_of::<MaskParams>() == 7 * 8 + 8 * 4);

/// The loaded kernel modules and a function handle for every `Kernel`.
#[derive(Debug)]
pub struct KernelSet {
    gpu: Arc<GpuContext>,
    modules: Vec<CUmodule>,
    functions: [CUfunction; Kernel::COUNT],
}

// SAFETY: module and function handles may be used from any thread once their
// context is current (every launch binds it); they are never mutated after load.
unsafe impl Send for KernelSet {}
// SAFETY: as above; `&KernelSet` only reads the handles.
unsafe impl Sync for KernelSet {}

impl KernelSet {
    /// Loads the kernel files the pipeline runs (not the benchmark's) and
    /// looks up their kernels.
    pub fn load(gpu: &Arc<GpuContext>) -> Result<Self, GpuError> {
        Self::load_files(gpu, &KernelFile::PIPELINE)
    }

    /// As `load`, plus `BenchDelay` (benchmarks only).
    pub fn load_with_bench(gpu: &Arc<GpuContext>) -> Result<Self, GpuError> {
        Self::load_files(gpu, &KernelFile::ALL)
    }

    fn load_files(gpu: &Arc<GpuContext>, files: &[KernelFile]) -> Result<Self, GpuError> {
        gpu.bind()?;
        let mut set = KernelSet {
            gpu: Arc::clone(gpu),
            modules: Vec::with_capacity(files.len()),
            functions: [std::ptr::null_mut(); Kernel::COUNT],
        };
        let mut loaded = Vec::with_capacity(files.len());
        for &file in files {
            // SAFETY: the context is current; the image is a complete fatbin
            // written by build.rs, embedded 16-byte aligned.
            let module =
                unsafe { result::module::load_data(file.image().as_ptr().cast::<c_void>()) }
                    .map_err(|source| GpuError::ModuleLoad {
                        file: file.source(),
                        source,
                    })?;
            // Pushed at once so Drop unloads it even if a later step fails.
            set.modules.push(module);
            loaded.push((file, module));
        }
        for kernel in Kernel::all() {
            let Some(&(_, module)) = loaded.iter().find(|(f, _)| *f == kernel.file()) else {
                continue;
            };
            // SAFETY: the module was loaded above and is live.
            let function = unsafe { result::module::get_function(module, kernel.symbol().into()) }
                .map_err(|source| GpuError::KernelMissing {
                    symbol: kernel.symbol().to_str().unwrap_or("?"),
                    file: kernel.file().source(),
                    source,
                })?;
            set.functions[kernel.index()] = function;
        }
        Ok(set)
    }

    /// Queues `kernel` with one by-value parameter block.
    ///
    /// # Safety
    /// `P` must be the kernel's parameter struct (`FrameParams` for
    /// `FrameToTensors`, `MaskParams` for `LogitsToMask`, `u64` for
    /// `BenchDelay`); every device address in it must point to memory of the
    /// size the kernel reads or writes for this grid, and stay alive until
    /// the stream has passed the launch.
    pub unsafe fn launch<P: Copy>(
        &self,
        kernel: Kernel,
        grid: (u32, u32, u32),
        block: u32,
        stream: &Stream,
        params: &P,
    ) -> Result<(), GpuError> {
        let function = self.functions[kernel.index()];
        if function.is_null() {
            return Err(GpuError::KernelNotLoaded {
                symbol: kernel.symbol().to_str().unwrap_or("?"),
            });
        }
        self.gpu.bind()?;
        let mut args = [std::ptr::from_ref(params).cast_mut().cast::<c_void>()];
        // SAFETY: the function belongs to a module this set keeps loaded; the
        // caller vouches for the parameter block and the memory it names; the
        // driver copies the block during the call.
        unsafe { result::launch_kernel(function, grid, (block, 1, 1), 0, stream.raw(), &mut args) }
            .map_err(GpuError::driver("cuLaunchKernel"))
    }
}

impl Drop for KernelSet {
    fn drop(&mut self) {
        if let Err(e) = self.gpu.bind() {
            self.gpu
                .record_drop_error("binding the context to unload kernels", e);
            return;
        }
        for &module in &self.modules {
            // SAFETY: each module was loaded once and is unloaded once, here;
            // the owners that launch from this set synchronize their streams
            // before dropping it, so no queued launch still needs the code.
            if let Err(e) = unsafe { result::module::unload(module) } {
                self.gpu.record_drop_error("cuModuleUnload", e);
            }
        }
    }
}

/// Grid of a frame kernel launch: one thread per output pixel, one row of
/// blocks per output row of either tensor (`seg_h + cls_h <= MAX_FRAME_ROWS`).
pub fn frame_grid(seg_hw: (usize, usize), cls_hw: (usize, usize)) -> (u32, u32, u32) {
    let widest = seg_hw.1.max(cls_hw.1) as u32;
    (
        widest.div_ceil(FRAME_BLOCK),
        (seg_hw.0 + cls_hw.0) as u32,
        1,
    )
}

/// Most output rows (both tensors together) a frame launch can have: the
/// grid's y extent.
pub const MAX_FRAME_ROWS: usize = 65_535;

/// Grid of a mask launch, and the number of its blocks that make the mask
/// (the rest, when `channel_hw` is given, make the classifier's mask channel).
pub fn mask_grid(pixels: usize, channel_hw: Option<(usize, usize)>) -> ((u32, u32, u32), u32) {
    let threads = (pixels as u64).div_ceil(MASK_PIXELS_PER_THREAD);
    let mask_blocks = threads.div_ceil(u64::from(MASK_BLOCK)) as u32;
    let channel_blocks = channel_hw.map_or(0, |(h, w)| {
        ((h * w) as u64).div_ceil(u64::from(MASK_BLOCK)) as u32
    });
    ((mask_blocks + channel_blocks, 1, 1), mask_blocks)
}
