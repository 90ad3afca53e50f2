//! GPU time of each preprocessing kernel, with CUDA events: for every case the
//! median (and p10/p90) of `--runs` launches after `--warmup` launches, each
//! launch between its own pair of events. A busy-wait kernel is queued first so
//! the host gets ahead of the GPU: the timed launches then run back to back and
//! the events measure the GPU, not the host's launch gaps. Inputs and outputs
//! rotate over several buffer sets larger together than the L2 cache, so the
//! frame is read from DRAM as in production.
//!
//! Also measured in the same run: device-to-device copy bandwidth (a 256 MiB
//! copy, counting bytes read plus bytes written), against which each kernel's
//! bytes moved (each input read once, each output written once) is compared.
//!
//! `cargo bench --features cuda --bench gpu_preprocess -- [--runs N]
//!  [--warmup N] [--out results.json] [--dump DIR]`; `--dump` writes one
//! 1280x720 frame and this crate's f32 outputs for it, for
//! `scripts/gpu/gpu_bench_torch.py` to compare with PyTorch. `scripts/gpu/gpu_bench.sh`
//! runs both.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use sealcheck::config::Normalization;
use sealcheck::frame::{PixelLayout, TensorGeometry};
use sealcheck::gpu::kernels::{self, FrameParams, MaskParams, ResizeTarget};
use sealcheck::gpu::{
    DeviceBuffer, DeviceValue, Event, GpuContext, GpuError, Kernel, KernelSet, PinnedBuffer,
    Stream, TensorElement,
};
use sealcheck::preprocess::gpu::tables::{self, ChannelAffine, DeviceTap, MaskAffine};

const SEG_NORM: Normalization = Normalization {
    mean: [0.485, 0.456, 0.406],
    std: [0.229, 0.224, 0.225],
};
const CLS_NORM: Normalization = Normalization {
    mean: [0.485, 0.456, 0.406],
    std: [0.229, 0.224, 0.225],
};
const GEOMETRY: TensorGeometry = TensorGeometry {
    seg_hw: (640, 640),
    seg_classes: 2,
    cls_hw: (224, 512),
    cls_classes: 2,
};
/// Buffer sets rotated through; 12 frame sets of 1080p RGB are ~100 MB.
const SETS: usize = 12;
/// GPU cycles of the busy-wait queued before the timed launches (~40 ms).
const DELAY_CYCLES: u64 = 80_000_000;

struct Args {
    runs: usize,
    warmup: usize,
    out: Option<PathBuf>,
    dump: Option<PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args {
        runs: 300,
        warmup: 30,
        out: None,
        dump: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => args.runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(args.runs),
            "--warmup" => {
                args.warmup = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(args.warmup)
            }
            "--out" => args.out = it.next().map(PathBuf::from),
            "--dump" => args.dump = it.next().map(PathBuf::from),
            _ => {} // cargo bench passes --bench
        }
    }
    args
}

fn main() {
    let args = parse_args();
    let gpu = match GpuContext::open(0) {
        Ok(gpu) => gpu,
        Err(e @ (GpuError::NoDriver | GpuError::NoDevice { .. })) => {
            println!("SKIPPED: no CUDA device ({e})");
            return;
        }
        Err(e) => {
            eprintln!("gpu_preprocess bench: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = run(&gpu, &args) {
        eprintln!("gpu_preprocess bench failed: {e}");
        std::process::exit(1);
    }
}

/// One measured case.
struct Row {
    kernel: String,
    case: String,
    bytes: usize,
    median_us: f64,
    p10_us: f64,
    p90_us: f64,
    batch_mean_us: f64,
}

struct Bench {
    gpu: Arc<GpuContext>,
    stream: Stream,
    kernels: KernelSet,
    events: Vec<Event>,
    batch: [Event; 2],
    runs: usize,
    warmup: usize,
}

impl Bench {
    /// Times `launch(i)` (i = run index, for rotating buffers): median of
    /// per-launch event pairs, and the mean over one batch of `runs` launches.
    fn time(
        &mut self,
        mut launch: impl FnMut(&Bench, usize) -> Result<(), GpuError>,
    ) -> Result<[f64; 4], GpuError> {
        for i in 0..self.warmup {
            launch(self, i)?;
        }
        self.stream.synchronize()?;
        self.delay()?;
        for i in 0..self.runs {
            self.events[2 * i].record(&self.stream)?;
            launch(self, i)?;
            self.events[2 * i + 1].record(&self.stream)?;
        }
        self.stream.synchronize()?;
        let mut us = Vec::with_capacity(self.runs);
        for i in 0..self.runs {
            us.push(f64::from(self.events[2 * i + 1].elapsed_ms_since(&self.events[2 * i])?) * 1e3);
        }
        us.sort_by(f64::total_cmp);
        let pick = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
        self.delay()?;
        self.batch[0].record(&self.stream)?;
        for i in 0..self.runs {
            launch(self, i)?;
        }
        self.batch[1].record(&self.stream)?;
        self.stream.synchronize()?;
        let batch_mean =
            f64::from(self.batch[1].elapsed_ms_since(&self.batch[0])?) * 1e3 / self.runs as f64;
        Ok([pick(0.5), pick(0.1), pick(0.9), batch_mean])
    }

    fn delay(&self) -> Result<(), GpuError> {
        // SAFETY: BenchDelay takes one u64 by value and touches no memory.
        unsafe {
            self.kernels.launch(
                Kernel::BenchDelay,
                (1, 1, 1),
                1,
                &self.stream,
                &DELAY_CYCLES,
            )
        }
    }

    fn buffer<T: DeviceValue>(&self, len: usize) -> Result<DeviceBuffer<T>, GpuError> {
        DeviceBuffer::new(&self.gpu, len)
    }

    /// A device buffer holding `values` (waits for the copy).
    fn filled<T: DeviceValue>(&self, values: &[T]) -> Result<DeviceBuffer<T>, GpuError> {
        let buffer = self.buffer(values.len())?;
        // SAFETY: `values` outlives the synchronize below.
        unsafe { self.stream.upload(values, &buffer, 0)? };
        self.stream.synchronize()?;
        Ok(buffer)
    }
}

fn run(gpu: &Arc<GpuContext>, args: &Args) -> Result<(), GpuError> {
    let events = (0..2 * args.runs)
        .map(|_| Event::new(gpu, true))
        .collect::<Result<Vec<_>, _>>()?;
    let mut bench = Bench {
        gpu: Arc::clone(gpu),
        stream: Stream::new(gpu)?,
        kernels: KernelSet::load_with_bench(gpu)?,
        events,
        batch: [Event::new(gpu, true)?, Event::new(gpu, true)?],
        runs: args.runs.max(1),
        warmup: args.warmup,
    };
    println!(
        "device: {} (compute capability {:?}); {} runs after {} warm-up; {SETS} rotating buffer sets",
        gpu.name(),
        gpu.compute_capability(),
        bench.runs,
        bench.warmup
    );
    let mut rows = Vec::new();
    let mut rng = 0x1234_5678_9abc_def0u64;

    // Device-to-device copy bandwidth (bytes read + bytes written).
    let copy_bytes = 256 << 20;
    let src: DeviceBuffer<u8> = bench.buffer(copy_bytes)?;
    let dst: DeviceBuffer<u8> = bench.buffer(copy_bytes)?;
    // SAFETY: both buffers outlive the synchronize at the end of `time`.
    unsafe { bench.stream.fill_bytes(&src, 0x5A)? };
    let [median, p10, p90, batch] = bench.time(|b, _| unsafe {
        // SAFETY: both buffers live until `time` synchronizes.
        b.stream.copy(&src, &dst, copy_bytes)
    })?;
    drop((src, dst));
    let copy_gbps = 2.0 * copy_bytes as f64 / (median * 1e-6) / 1e9;
    rows.push(Row {
        kernel: "memcpy D2D".into(),
        case: "256 MiB".into(),
        bytes: 2 * copy_bytes,
        median_us: median,
        p10_us: p10,
        p90_us: p90,
        batch_mean_us: batch,
    });

    // An empty launch: the floor under any kernel timed this way.
    let [median, p10, p90, batch] = bench.time(|b, _| {
        // SAFETY: BenchDelay takes one u64 by value and touches no memory.
        unsafe {
            b.kernels
                .launch(Kernel::BenchDelay, (1, 1, 1), 1, &b.stream, &0u64)
        }
    })?;
    rows.push(Row {
        kernel: "empty launch".into(),
        case: "bench_delay(0 cycles)".into(),
        bytes: 0,
        median_us: median,
        p10_us: p10,
        p90_us: p90,
        batch_mean_us: batch,
    });

    let seg_affine = ChannelAffine::from_normalization(&SEG_NORM);
    let cls_affine = ChannelAffine::from_normalization(&CLS_NORM);
    let cls_plane = GEOMETRY.cls_hw.0 * GEOMETRY.cls_hw.1;

    // Frame kernel: frame -> seg input + classifier RGB.
    for (w, h) in [(1280usize, 720usize), (1920, 1080)] {
        for layout in [PixelLayout::Rgb, PixelLayout::Bgrx] {
            let stride = w * layout.bytes_per_pixel();
            let frames = (0..SETS)
                .map(|_| bench.filled(&random_bytes(&mut rng, stride * h)))
                .collect::<Result<Vec<DeviceBuffer<u8>>, _>>()?;
            for element in [TensorElement::F32, TensorElement::F16] {
                let seg_bytes = GEOMETRY.seg_input_len() * element.bytes();
                let cls_bytes = GEOMETRY.cls_input_len() * element.bytes();
                let segs = (0..SETS)
                    .map(|_| bench.buffer::<u8>(seg_bytes))
                    .collect::<Result<Vec<_>, _>>()?;
                let clss = (0..SETS)
                    .map(|_| bench.buffer::<u8>(cls_bytes))
                    .collect::<Result<Vec<_>, _>>()?;
                let params = |i: usize| FrameParams {
                    frame: frames[i % SETS].device_ptr(),
                    stride: stride as u64,
                    in_w: w as u32,
                    in_h: h as u32,
                    seg: target(segs[i % SETS].device_ptr(), GEOMETRY.seg_hw, &seg_affine),
                    cls: target(clss[i % SETS].device_ptr(), GEOMETRY.cls_hw, &cls_affine),
                    aligned4: u32::from(stride % 4 == 0),
                    reserved: 0,
                };
                let kernel = Kernel::FrameToTensors(layout, element);
                let grid = kernels::frame_grid(GEOMETRY.seg_hw, GEOMETRY.cls_hw);
                let [median, p10, p90, batch] = bench.time(|b, i| {
                    let p = params(i);
                    // SAFETY: the frame holds stride*h bytes for these tables;
                    // the outputs hold the seg input and the 4-channel
                    // classifier input in `element`; all live until `time`
                    // synchronizes.
                    unsafe {
                        b.kernels
                            .launch(kernel, grid, kernels::FRAME_BLOCK, &b.stream, &p)
                    }
                })?;
                rows.push(Row {
                    kernel: "frame_to_tensors".into(),
                    case: format!("{w}x{h} {layout:?} -> {element:?}"),
                    bytes: stride * h + seg_bytes + 3 * cls_plane * element.bytes(),
                    median_us: median,
                    p10_us: p10,
                    p90_us: p90,
                    batch_mean_us: batch,
                });
                if let (Some(dir), (1280, 720), PixelLayout::Rgb, TensorElement::F32) =
                    (&args.dump, (w, h), layout, element)
                {
                    dump(
                        &bench,
                        dir,
                        &frames[0],
                        &segs[0],
                        &clss[0],
                        params(0),
                        kernel,
                        grid,
                        (w, h),
                    )?;
                }
            }
        }
    }

    // Mask kernel: logits -> mask + count, alone and with the classifier's
    // channel 3 (the fused launch the pipeline uses).
    let pixels = GEOMETRY.mask_len();
    let mask_affine = MaskAffine::new(0.5, 0.5);
    let mut mask_taps: [Vec<DeviceTap>; 2] = Default::default();
    tables::linear_taps(GEOMETRY.seg_hw.0, GEOMETRY.cls_hw.0, &mut mask_taps[0]);
    tables::linear_taps(GEOMETRY.seg_hw.1, GEOMETRY.cls_hw.1, &mut mask_taps[1]);
    let mask_rows = bench.filled(&mask_taps[0])?;
    let mask_cols = bench.filled(&mask_taps[1])?;
    let masks = (0..SETS)
        .map(|_| bench.buffer::<u8>(pixels))
        .collect::<Result<Vec<_>, _>>()?;
    let counts = (0..SETS)
        .map(|_| bench.buffer::<u64>(1))
        .collect::<Result<Vec<_>, _>>()?;
    for element in [TensorElement::F32, TensorElement::F16] {
        let logits_bytes = GEOMETRY.seg_logits_len() * element.bytes();
        let logits = (0..SETS)
            .map(|_| bench.filled(&random_logits(&mut rng, GEOMETRY.seg_logits_len(), element)))
            .collect::<Result<Vec<DeviceBuffer<u8>>, _>>()?;
        let outs = (0..SETS)
            .map(|_| bench.buffer::<u8>(GEOMETRY.cls_input_len() * element.bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        for with_channel in [false, true] {
            let channel_hw = with_channel.then_some(GEOMETRY.cls_hw);
            let (grid, mask_blocks) = kernels::mask_grid(pixels, channel_hw);
            let kernel = Kernel::LogitsToMask {
                logits: element,
                channel: element,
            };
            let [median, p10, p90, batch] = bench.time(|b, i| {
                let p = MaskParams {
                    logits: logits[i % SETS].device_ptr(),
                    mask: masks[i % SETS].device_ptr(),
                    count: counts[i % SETS].device_ptr(),
                    channel: if with_channel {
                        outs[i % SETS].device_ptr_at(3 * cls_plane * element.bytes())
                    } else {
                        0
                    },
                    rows: mask_rows.device_ptr(),
                    cols: mask_cols.device_ptr(),
                    pixels: pixels as u64,
                    classes: GEOMETRY.seg_classes as u32,
                    mask_class: 1,
                    mask_w: GEOMETRY.seg_hw.1 as u32,
                    channel_h: GEOMETRY.cls_hw.0 as u32,
                    channel_w: GEOMETRY.cls_hw.1 as u32,
                    mask_blocks,
                    scale: mask_affine.scale,
                    bias: mask_affine.bias,
                };
                // SAFETY: logits hold 2 planes of `pixels` values of
                // `element`, the mask `pixels` bytes, the count one u64, the
                // output's channel 3 plane 224x512 values of `element`, and
                // the tables map 640x640 to 224x512; all live until `time`
                // synchronizes. (The count accumulates over runs: only the
                // time matters here.)
                unsafe {
                    b.kernels
                        .launch(kernel, grid, kernels::MASK_BLOCK, &b.stream, &p)
                }
            })?;
            let (name, case, bytes) = if with_channel {
                (
                    "logits_to_mask+channel",
                    format!("2x640x640 {element:?} logits -> mask, count, 224x512 channel"),
                    logits_bytes + pixels + cls_plane * element.bytes(),
                )
            } else {
                (
                    "logits_to_mask",
                    format!("2x640x640 {element:?} logits -> mask, count"),
                    logits_bytes + pixels,
                )
            };
            rows.push(Row {
                kernel: name.into(),
                case,
                bytes,
                median_us: median,
                p10_us: p10,
                p90_us: p90,
                batch_mean_us: batch,
            });
        }
    }

    // Report.
    let mut table = String::new();
    let _ = writeln!(
        table,
        "\n| kernel | case | bytes moved | median µs | p10 | p90 | batch mean µs | GB/s | % of copy |"
    );
    let _ = writeln!(table, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut json = String::from("[\n");
    for (i, row) in rows.iter().enumerate() {
        let gbps = row.bytes as f64 / (row.median_us * 1e-6) / 1e9;
        let _ = writeln!(
            table,
            "| {} | {} | {:.2} MB | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0}% |",
            row.kernel,
            row.case,
            row.bytes as f64 / 1e6,
            row.median_us,
            row.p10_us,
            row.p90_us,
            row.batch_mean_us,
            gbps,
            100.0 * gbps / copy_gbps
        );
        let _ = writeln!(
            json,
            "  {{\"kernel\": \"{}\", \"case\": \"{}\", \"bytes\": {}, \"median_us\": {:.3}, \"p10_us\": {:.3}, \
             \"p90_us\": {:.3}, \"batch_mean_us\": {:.3}, \"gbps\": {:.1}, \"copy_gbps\": {:.1}}}{}",
            row.kernel,
            row.case,
            row.bytes,
            row.median_us,
            row.p10_us,
            row.p90_us,
            row.batch_mean_us,
            gbps,
            copy_gbps,
            if i + 1 < rows.len() { "," } else { "" }
        );
    }
    json.push_str("]\n");
    println!("{table}");
    println!("device-to-device copy: {copy_gbps:.0} GB/s (read + write)");
    if let Some(out) = &args.out
        && let Err(e) = std::fs::write(out, &json)
    {
        eprintln!("cannot write {}: {e}", out.display());
    }
    Ok(())
}

fn target(out: u64, (h, w): (usize, usize), affine: &ChannelAffine) -> ResizeTarget {
    ResizeTarget {
        out,
        out_h: h as u32,
        out_w: w as u32,
        scale: affine.scale,
        bias: affine.bias,
    }
}

/// Runs the frame kernel once on `frame` and writes the frame and both
/// outputs as raw little-endian files for the PyTorch comparison.
#[allow(clippy::too_many_arguments)]
fn dump(
    bench: &Bench,
    dir: &std::path::Path,
    frame: &DeviceBuffer<u8>,
    seg: &DeviceBuffer<u8>,
    cls: &DeviceBuffer<u8>,
    params: FrameParams,
    kernel: Kernel,
    grid: (u32, u32, u32),
    (w, h): (usize, usize),
) -> Result<(), GpuError> {
    // SAFETY: as in the timed launches; synchronized below.
    unsafe {
        bench
            .kernels
            .launch(kernel, grid, kernels::FRAME_BLOCK, &bench.stream, &params)?
    };
    let mut host_frame = PinnedBuffer::<u8>::new(&bench.gpu, frame.len(), false)?;
    let mut host_seg = PinnedBuffer::<u8>::new(&bench.gpu, seg.len(), false)?;
    let mut host_cls = PinnedBuffer::<u8>::new(&bench.gpu, cls.len(), false)?;
    // SAFETY: the host buffers are read only after the synchronize below.
    unsafe {
        bench
            .stream
            .download(frame, 0, frame.len(), &mut host_frame)?;
        bench.stream.download(seg, 0, seg.len(), &mut host_seg)?;
        bench.stream.download(cls, 0, cls.len(), &mut host_cls)?;
    }
    bench.stream.synchronize()?;
    let write = |name: &str, bytes: &[u8]| {
        if let Err(e) =
            std::fs::create_dir_all(dir).and_then(|_| std::fs::write(dir.join(name), bytes))
        {
            eprintln!("cannot write {}/{name}: {e}", dir.display());
        }
    };
    write("frame_rgb_u8.bin", host_frame.as_slice());
    write("seg_f32.bin", host_seg.as_slice());
    write("cls_f32.bin", host_cls.as_slice());
    write(
        "meta.json",
        format!(
            "{{\"width\": {w}, \"height\": {h}, \"seg_hw\": [640, 640], \"cls_hw\": [224, 512], \
             \"seg_mean\": {:?}, \"seg_std\": {:?}, \"cls_mean\": {:?}, \"cls_std\": {:?}}}\n",
            SEG_NORM.mean, SEG_NORM.std, CLS_NORM.mean, CLS_NORM.std
        )
        .as_bytes(),
    );
    Ok(())
}

fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn random_bytes(state: &mut u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&next(state).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Random logits in [-4, 4) as raw bytes of `element`.
fn random_logits(state: &mut u64, len: usize, element: TensorElement) -> Vec<u8> {
    let mut out = Vec::with_capacity(len * element.bytes());
    for _ in 0..len {
        let v = ((next(state) >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0;
        match element {
            TensorElement::F32 => out.extend_from_slice(&v.to_le_bytes()),
            // Multiples of 1/256 in [-4, 4) are exact in f16.
            TensorElement::F16 => {
                let q = (v * 256.0).round() / 256.0;
                out.extend_from_slice(&f16_bits(q).to_le_bytes());
            }
        }
    }
    out
}

/// f16 bits of a normal (or zero) value with at most 11 significant bits.
fn f16_bits(v: f32) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let bits = v.to_bits();
    let sign = ((bits >> 31) as u16) << 15;
    let exp = (((bits >> 23) & 0xff) as i32 - 127 + 15).clamp(1, 30) as u16;
    sign | (exp << 10) | ((bits & 0x7f_ffff) >> 13) as u16
}
