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
use crate::config::Config;
use crate::decision::Reason;
use crate::pipeline::{self, PipelineError, RunContext, RunSummary, SourcePlan};
use crate::service::Notifier;
use crate::stats::STAGES;

/// At most this many distinct frames are held in memory and replayed.
const MAX_DISTINCT_FRAMES: usize = 300;

pub struct BenchReport {
    pub summary: RunSummary,
    pub distinct_frames: usize,
    pub frame_size: (u32, u32),
    pub measured_frames: u64,
    /// The pace frames were offered at (frames per second), if not as fast as possible.
    pub rate: Option<f64>,
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
    /// rate seconds), so never above the rate. Otherwise results per second
    /// between the first and the last measured result.
    pub fn fps(&self) -> f64 {
        if let Some(rate) = self.rate
            && self.offered() > 0
        {
            return self.judged() as f64 * rate / self.offered() as f64;
        }
        self.summary
            .stats
            .throughput()
            .unwrap_or_else(|| self.summary.fps())
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "bench: {} frames of {}x{} replayed from memory ({} distinct) {}, backend {}\nmeasured frames: {} offered, {} judged, {} dropped\nthroughput: {:.2} frames/s\n",
            self.measured_frames,
            self.frame_size.0,
            self.frame_size.1,
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
    let (_keep_open, signals) = crossbeam_channel::bounded(1);
    let context = RunContext {
        notifier: Notifier::disabled(),
        signals,
        source: SourcePlan::Replay {
            frames: Arc::new(decoded),
            count: warmup + frames,
            rate,
        },
        measure_from_seq: warmup,
    };
    let summary = pipeline::run(config, context);
    let _ = std::fs::remove_file(&results);
    Ok(BenchReport {
        summary: summary?,
        distinct_frames,
        frame_size,
        measured_frames: frames,
        rate,
    })
}

fn tempfile_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sealcheck-bench-{}.jsonl", std::process::id()))
}
