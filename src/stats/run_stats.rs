//! The run's statistics: per-stage latency histograms (fixed size, so
//! recording a frame allocates nothing) and the verdict counts the run
//! summary prints.

use std::time::Instant;

use super::counters::{ResultCounters, ResultCounts};
use super::percentile::{bin_of_rank, nearest_rank};
use crate::decision::Reason;

const BUCKET_MS: f64 = 0.05;
const BUCKETS: usize = 40_000;

/// Fixed-bucket latency histogram: 0.05 ms buckets up to 2 s by default
/// (`with_buckets` for finer ones); longer samples count in the last.
#[derive(Clone)]
pub struct LatencyHistogram {
    counts: Vec<u32>,
    bucket_ms: f64,
    total: u64,
    max_ms: f64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::with_buckets(BUCKET_MS, BUCKETS)
    }
}

impl LatencyHistogram {
    /// `buckets` buckets of `bucket_ms` each.
    pub fn with_buckets(bucket_ms: f64, buckets: usize) -> Self {
        LatencyHistogram {
            counts: vec![0; buckets.max(1)],
            bucket_ms,
            total: 0,
            max_ms: 0.0,
        }
    }

    pub fn record(&mut self, ms: f64) {
        let last = self.counts.len() - 1;
        let bucket = ((ms.max(0.0) / self.bucket_ms) as usize).min(last);
        self.counts[bucket] = self.counts[bucket].saturating_add(1);
        self.total += 1;
        self.max_ms = self.max_ms.max(ms);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest sample (0 with none).
    pub fn max_ms(&self) -> f64 {
        self.max_ms
    }

    /// The latency under which `q` (0..=1) of the samples fall, to a bucket.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let rank = nearest_rank(q, self.total)?;
        let counts = self.counts.iter().map(|&c| u64::from(c));
        Some(match bin_of_rank(counts, rank) {
            Some(i) => ((i + 1) as f64 * self.bucket_ms).min(self.max_ms.max(self.bucket_ms)),
            None => self.max_ms,
        })
    }
}

/// Names of the stages timed per frame, in pipeline order.
pub const STAGES: [&str; 4] = ["preprocess", "segment", "classify", "total"];

/// The run summary's numbers: counts read from the one result registry
/// (`ResultCounters`, shared with `/metrics` and the status page)
/// since measuring began, and per-stage latency percentiles of the frames
/// measured. `sealcheck bench` begins measuring after its warm-up; `run` at
/// the first frame.
#[derive(Default, Clone)]
pub struct RunStats {
    results: ResultCounters,
    /// The counts when the first measured result came, before it was counted.
    baseline: Option<ResultCounts>,
    pub latency: [LatencyHistogram; STAGES.len()],
    /// When the first and the latest recorded result were written.
    pub first_at: Option<Instant>,
    pub last_at: Option<Instant>,
    /// Capture to verdict per camera (`FrameMeta::camera`), with several.
    pub per_camera: Vec<LatencyHistogram>,
}

impl RunStats {
    /// Statistics over `results`, the counters every result line is counted in.
    pub fn new(results: ResultCounters) -> Self {
        RunStats {
            results,
            ..RunStats::default()
        }
    }

    /// A measured result, recorded before `results` counts it: its time and
    /// latencies (the first one also fixes where counting begins).
    pub fn record(&mut self, latencies_ms: Option<[f64; 4]>) {
        let now = Instant::now();
        self.first_at.get_or_insert(now);
        self.last_at = Some(now);
        if self.baseline.is_none() {
            self.baseline = Some(self.results.snapshot());
        }
        if let Some(lat) = latencies_ms {
            for (h, ms) in self.latency.iter_mut().zip(lat) {
                h.record(ms);
            }
        }
    }

    /// Camera `camera`'s capture-to-verdict latency of a measured result
    /// (its histogram made at the camera's first result).
    pub fn record_camera(&mut self, camera: usize, total_ms: f64) {
        if self.per_camera.len() <= camera {
            self.per_camera
                .resize_with(camera + 1, LatencyHistogram::default);
        }
        self.per_camera[camera].record(total_ms);
    }

    /// One line per camera: its measured frames and p50/p99 capture to
    /// verdict (`names` by camera index).
    pub fn camera_table(&self, names: &[String]) -> String {
        let mut out = String::new();
        for (name, h) in names.iter().zip(&self.per_camera) {
            let q = |p| h.quantile(p).map_or("-".to_string(), |v| format!("{v:.2}"));
            out.push_str(&format!(
                "camera {name}: {} frames, capture to verdict p50 {} ms, p99 {} ms\n",
                h.count(),
                q(0.5),
                q(0.99)
            ));
        }
        out
    }

    /// Results counted since measuring began (none before).
    pub fn counts(&self) -> ResultCounts {
        self.baseline
            .map_or_else(ResultCounts::default, |b| self.results.snapshot().since(&b))
    }

    /// Results per second between the first and the last recorded result.
    pub fn throughput(&self) -> Option<f64> {
        let span = self.last_at?.duration_since(self.first_at?).as_secs_f64();
        let frames = self.counts().frames;
        (frames > 1 && span > 0.0).then(|| (frames - 1) as f64 / span)
    }

    pub fn count(&self, reason: Reason) -> u64 {
        self.counts().count(reason)
    }

    /// The per-stage latency table of the run summary and `sealcheck bench`,
    /// header included, one line a stage.
    pub fn latency_table(&self) -> String {
        let mut out = String::from("latency ms      p50      p95      p99\n");
        for (name, h) in STAGES.iter().zip(&self.latency) {
            let q = |p| h.quantile(p).map_or("-".to_string(), |v| format!("{v:.2}"));
            out.push_str(&format!(
                "  {name:<11} {:>8} {:>8} {:>8}\n",
                q(0.5),
                q(0.95),
                q(0.99)
            ));
        }
        out
    }

    /// One line for systemd's STATUS= and for progress logs.
    pub fn status_line(&self, fps: f64) -> String {
        let c = self.counts();
        format!(
            "{} frames, {:.1} fps, pass {}, fail {} (defect {}, no_seal {}, seal_area {}, not_inspected {}, error {})",
            c.frames,
            fps,
            c.passed(),
            c.failed(),
            c.count(Reason::Defect),
            c.count(Reason::NoSeal),
            c.count(Reason::SealArea),
            c.count(Reason::NotInspected),
            c.count(Reason::Error)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_uniform_samples() {
        let mut h = LatencyHistogram::default();
        for i in 1..=100 {
            h.record(i as f64);
        }
        assert!((h.quantile(0.5).unwrap() - 50.0).abs() < 0.06);
        assert!((h.quantile(0.99).unwrap() - 99.0).abs() < 0.06);
        assert!((h.quantile(1.0).unwrap() - 100.0).abs() < 0.06);
    }

    #[test]
    fn empty_histogram_has_no_quantile() {
        assert_eq!(LatencyHistogram::default().quantile(0.5), None);
    }

    #[test]
    fn counts_come_from_the_registry_from_the_first_measured_result_on() {
        let results = ResultCounters::default();
        let mut s = RunStats::new(results.clone());
        // A warm-up result: counted in the registry, not measured.
        results.record(Reason::Error);
        assert_eq!(s.counts(), ResultCounts::default(), "nothing measured yet");
        s.record(None);
        results.record(Reason::Defect);
        s.record(Some([1.0, 2.0, 3.0, 6.0]));
        results.record(Reason::Ok);
        let c = s.counts();
        assert_eq!(
            (c.frames, c.passed(), c.failed(), s.count(Reason::Defect)),
            (2, 1, 1, 1)
        );
        assert_eq!(s.count(Reason::Error), 0, "the warm-up result is left out");
        assert_eq!(
            results.snapshot().frames,
            3,
            "the registry counts every result"
        );
        assert_eq!(s.latency[3].count(), 1);
    }
}
