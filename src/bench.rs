//! `sealcheck bench`: the whole pipeline on frames decoded beforehand, so the
//! figures are the pipeline's (preprocess, inference, decision, output on
//! their own threads), not the camera's or the JPEG decoder's.
//!
//! Only the frames after the warm-up are measured, in every figure: the stage
//! histograms, throughput and MQTT's capture->ack and verdict->ack. The
//! measured frames start once the warm-up's results are written
//! (`capture::Replay`), so none waits behind a warm-up frame. `--rate` offers
//! them like a camera: stamped at their due time, dropped when the pipeline
//! has no free slot then; frames/s is then the frames judged per second of the
//! camera's time, which cannot exceed the rate.

use std::sync::Arc;

use crate::capture;
use crate::config::{CameraConfig, Config};
use crate::decision::Reason;
use crate::pipeline::{self, PipelineError, RunContext, RunSummary, SourcePlan};
use crate::service::Notifier;
use crate::stats::STAGES;

/// At most this many distinct frames are held in memory and replayed.
const MAX_DISTINCT_FRAMES: usize = 300;

/// How `bench` lays out the station: cameras replaying the same frames, and
/// the batch limit.
#[derive(Debug, Clone, Copy)]
pub struct Station {
    /// Cameras replaying the frames (1: the config's own camera).
    pub cameras: usize,
    /// `[inference] max_batch` for the run; `None`: the config's, or one
    /// frame per camera when `cameras` makes the station.
    pub max_batch: Option<usize>,
}

impl Default for Station {
    fn default() -> Self {
        Station {
            cameras: 1,
            max_batch: None,
        }
    }
}

/// GPU memory around the run (`cuMemGetInfo`: the device's memory in use,
/// every process on it), in bytes.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct GpuMemory {
    /// In use before the run opened its engines (this process's context made).
    pub before: u64,
    /// The most in use while the run ran (sampled every 20 ms).
    pub peak: u64,
}

impl GpuMemory {
    /// What the run's engines, buffers and streams took.
    pub fn run_bytes(&self) -> u64 {
        self.peak.saturating_sub(self.before)
    }
}

pub struct BenchReport {
    pub summary: RunSummary,
    /// Cameras the frames were replayed as.
    pub cameras: usize,
    /// With a GPU engine or GPU preprocessing: its memory around the run.
    pub gpu_memory: Option<GpuMemory>,
    pub distinct_frames: usize,
    pub frame_size: (u32, u32),
    pub measured_frames: u64,
    /// The pace frames were offered at (frames per second), if not as fast as possible.
    pub rate: Option<f64>,
    /// With a rate: how late the replay threads offered frames after their
    /// due time (their own wake-up; included in every latency above it).
    pub offer_lateness: Option<crate::stats::LatencyHistogram>,
}

impl BenchReport {
    /// Measured frames the source offered (each gets exactly one result).
    pub fn offered(&self) -> u64 {
        self.summary.stats.counts().frames
    }

    /// Measured frames dropped because no slot was free at their due time
    /// (only with a rate; their result is `not_inspected`).
    pub fn dropped(&self) -> u64 {
        self.summary.stats.count(Reason::NotInspected)
    }

    /// Measured frames that went through the pipeline (offered less dropped).
    pub fn judged(&self) -> u64 {
        self.offered() - self.dropped()
    }

    /// Frames per second over the measured frames (warm-up left out). Offered
    /// at a rate: frames judged per second of the camera's time (offered ÷
    /// rate seconds) times the cameras, so never above cameras × rate. Otherwise
    /// results per second
    /// between the first and the last measured result.
    pub fn fps(&self) -> f64 {
        if let Some(rate) = self.rate
            && self.offered() > 0
        {
            // Every camera offers `rate`: the station's is `cameras` times it.
            return self.judged() as f64 * rate * self.cameras as f64 / self.offered() as f64;
        }
        self.summary
            .stats
            .throughput()
            .unwrap_or_else(|| self.summary.fps())
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "bench: {} frames of {}x{}{} replayed from memory ({} distinct) {}, backend {}\nmeasured frames: {} offered, {} judged, {} dropped\nthroughput: {:.2} frames/s\n",
            self.measured_frames,
            self.frame_size.0,
            self.frame_size.1,
            if self.cameras > 1 {
                format!(" per camera, {} cameras,", self.cameras)
            } else {
                String::new()
            },
            self.distinct_frames,
            self.rate.map_or(
                "as fast as the pipeline takes them".to_string(),
                |r| format!(
                    "offered at {r} frames/s after the warm-up (dropped when no slot is free)"
                )
            ),
            self.summary.backend,
            self.offered(),
            self.judged(),
            self.dropped(),
            self.fps()
        );
        out.push_str(&self.summary.stats.latency_table());
        if let Some(late) = &self.offer_lateness {
            let q = |p| late.quantile(p).unwrap_or(0.0);
            out.push_str(&format!(
                "replay: frames offered late after their due time by p50 {:.2} / p99 {:.2} / max {:.2} ms \
                 (the replay thread's own wake-up, part of the latency above; a camera's frame does not wait for it)\n",
                q(0.5),
                q(0.99),
                late.max_ms()
            ));
        }
        out.push_str(&self.summary.stats.camera_table(&self.summary.camera_names));
        if let Some((runs, frames, max_batch)) = self.summary.batches {
            out.push_str(&format!(
                "batches: {runs} engine runs for {frames} frames (mean {:.2} frames, max_batch {max_batch})\n",
                frames as f64 / runs.max(1) as f64
            ));
        }
        if let Some(memory) = &self.gpu_memory {
            out.push_str(&format!(
                "GPU memory: {:.0} MiB for this run's engines and buffers (cuMemGetInfo: {:.0} MiB in use before they opened, {:.0} MiB at the most while running)\n",
                memory.run_bytes() as f64 / MIB,
                memory.before as f64 / MIB,
                memory.peak as f64 / MIB
            ));
        }
        out.push_str(&self.summary.render_line());
        if let Some(shadow) = &self.summary.shadow {
            // The shadow also judged warm-up frames: its counts are the run's.
            out.push_str(&shadow.render());
        }
        out
    }

    pub fn to_json(&self) -> String {
        let latency: serde_json::Map<String, serde_json::Value> = STAGES
            .iter()
            .zip(&self.summary.stats.latency)
            .map(|(name, h)| {
                let q = |p| {
                    h.quantile(p)
                        .map_or(serde_json::Value::Null, |v| serde_json::json!(v))
                };
                (
                    name.to_string(),
                    serde_json::json!({"p50": q(0.5), "p95": q(0.95), "p99": q(0.99)}),
                )
            })
            .collect();
        serde_json::json!({
            "backend": self.summary.backend,
            "backend_reason": self.summary.backend_reason,
            "frames": self.measured_frames,
            "offered": self.offered(),
            "judged": self.judged(),
            "dropped": self.dropped(),
            "offered_rate": self.rate,
            "frame_size": [self.frame_size.0, self.frame_size.1],
            "fps": self.fps(),
            "latency_ms": latency,
            "replay_offer_late_ms": self.offer_lateness.as_ref().map(|late| serde_json::json!({
                "p50": late.quantile(0.5),
                "p99": late.quantile(0.99),
                "max": late.max_ms(),
            })),
            "line": {"verdicts": self.summary.line.sent, "late": self.summary.line.late},
            "mqtt": self.summary.mqtt.as_ref().map(|m| {
                let dropped: serde_json::Map<String, serde_json::Value> = crate::line::mqtt::DropReason::ALL
                    .iter()
                    .map(|r| (r.as_str().to_string(), serde_json::json!(m.dropped(*r))))
                    .collect();
                serde_json::json!({
                    "broker": m.broker,
                    "published": m.published,
                    "dropped": dropped,
                    "outages": m.outages,
                    "late_in_queue": m.late,
                    "cpu_ms": m.cpu_ms,
                    "capture_to_ack_ms": m.ack_ms.map(|[p50, p99, p999]| serde_json::json!({"p50": p50, "p99": p99, "p99.9": p999})),
                    "verdict_to_ack_ms": m.send_ms.map(|[p50, p99, p999]| serde_json::json!({"p50": p50, "p99": p99, "p99.9": p999})),
                })
            }),
            "shadow": self.summary.shadow,
            "cameras": self.cameras,
            "per_camera": self.summary.camera_names.iter().zip(&self.summary.stats.per_camera).map(|(name, h)| {
                serde_json::json!({"camera": name, "frames": h.count(), "p50": h.quantile(0.5), "p99": h.quantile(0.99)})
            }).collect::<Vec<_>>(),
            "batches": self.summary.batches.map(|(runs, frames, max_batch)| serde_json::json!({"runs": runs, "frames": frames, "max_batch": max_batch})),
            "gpu_memory": self.gpu_memory.map(|m| serde_json::json!({"before_mib": m.before as f64 / MIB, "peak_mib": m.peak as f64 / MIB, "run_mib": m.run_bytes() as f64 / MIB})),
        })
        .to_string()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Capture(#[from] capture::CaptureError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("the source delivered no frame to benchmark with — check [source] in the config")]
    NoFrames,
    #[error("--rate {0}: give the frames per second to offer, a number above 0")]
    Rate(f64),
}

/// Runs `warmup + frames` frames through the pipeline; results go to a
/// temporary file, not the configured one.
pub fn run(
    config: &Config,
    frames: u64,
    warmup: u64,
    rate: Option<f64>,
    station: Station,
) -> Result<BenchReport, BenchError> {
    if let Some(r) = rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(BenchError::Rate(r));
    }
    let decoded = capture::load_frames(
        config.first_source(),
        MAX_DISTINCT_FRAMES.min((frames + warmup) as usize),
    )?;
    let first = decoded.first().ok_or(BenchError::NoFrames)?;
    let frame_size = (first.width, first.height);
    let distinct_frames = decoded.len();
    let results = tempfile_path();
    let mut config = config.clone();
    config.output.results = results.clone();
    config.output.log_verdicts = false;
    if station.cameras > 1 {
        let first = config.cameras[0].clone();
        config.cameras = (1..=station.cameras)
            .map(|i| CameraConfig {
                name: Some(format!("cam{i}")),
                ..first.clone()
            })
            .collect();
        config.inference.max_batch = station.cameras.min(crate::config::DEFAULT_BATCH_CAP);
    }
    if let Some(max_batch) = station.max_batch {
        config.inference.max_batch = max_batch.clamp(1, crate::config::MAX_BATCH);
    }
    let gpu = uses_gpu(&config)
        .then(|| crate::gpu::GpuContext::open(config.inference.tensorrt.device).ok())
        .flatten();
    let sampler = gpu
        .as_ref()
        .and_then(|gpu| MemorySampler::start(std::sync::Arc::clone(gpu)));
    let (_keep_open, signals) = crossbeam_channel::bounded(1);
    let offer_lateness = Arc::new(std::sync::Mutex::new(
        crate::stats::LatencyHistogram::default(),
    ));
    let context = RunContext {
        notifier: Notifier::disabled(),
        signals,
        source: SourcePlan::Replay {
            frames: Arc::new(decoded),
            count: warmup + frames,
            rate,
            offer_lateness: Arc::clone(&offer_lateness),
        },
        measure_from_seq: warmup,
    };
    let summary = pipeline::run(config, context);
    let gpu_memory = sampler.map(MemorySampler::finish);
    let _ = std::fs::remove_file(&results);
    Ok(BenchReport {
        summary: summary?,
        cameras: station.cameras.max(1),
        gpu_memory,
        distinct_frames,
        frame_size,
        measured_frames: frames,
        rate,
        offer_lateness: rate.map(|_| {
            offer_lateness
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        }),
    })
}

const MIB: f64 = 1024.0 * 1024.0;

/// Whether the run puts anything on a GPU (its engines or preprocessing).
fn uses_gpu(config: &Config) -> bool {
    use crate::config::{BackendChoice, ComputeDevice};
    config.inference.device == ComputeDevice::Cuda
        || config.inference.preprocess == ComputeDevice::Cuda
        || config.inference.backend == BackendChoice::TensorRt
}

/// Samples the GPU's memory in use every 20 ms on its own thread.
struct MemorySampler {
    before: u64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl MemorySampler {
    fn start(gpu: Arc<crate::gpu::GpuContext>) -> Option<MemorySampler> {
        let before = gpu.memory_in_use().ok()?;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("gpu-memory".into())
                .spawn(move || {
                    let mut peak = before;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        if let Ok(used) = gpu.memory_in_use() {
                            peak = peak.max(used);
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    peak
                })
                .ok()?
        };
        Some(MemorySampler {
            before,
            stop,
            thread,
        })
    }

    fn finish(self) -> GpuMemory {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let peak = self.thread.join().unwrap_or(self.before);
        GpuMemory {
            before: self.before,
            peak,
        }
    }
}

fn tempfile_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sealcheck-bench-{}.jsonl", std::process::id()))
}
