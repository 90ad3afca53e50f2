//! Run statistics: verdict counts and per-stage latency percentiles.
//!
//! Latencies go into fixed-size histograms (0.05 ms buckets up to 2 s), so
//! recording a frame allocates nothing however long the service runs.

use std::time::Instant;

use crate::decision::{Reason, Verdict};

const BUCKET_MS: f64 = 0.05;
const BUCKETS: usize = 40_000;

/// Fixed-bucket latency histogram.
pub struct LatencyHistogram {
    counts: Vec<u32>,
    total: u64,
    max_ms: f64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            total: 0,
            max_ms: 0.0,
        }
    }
}

impl LatencyHistogram {
    pub fn record(&mut self, ms: f64) {
        let bucket = ((ms.max(0.0) / BUCKET_MS) as usize).min(BUCKETS - 1);
        self.counts[bucket] = self.counts[bucket].saturating_add(1);
        self.total += 1;
        self.max_ms = self.max_ms.max(ms);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The latency under which `q` (0..=1) of the samples fall, to 0.05 ms.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Some(((i + 1) as f64 * BUCKET_MS).min(self.max_ms.max(BUCKET_MS)));
            }
        }
        Some(self.max_ms)
    }
}

/// Names of the stages timed per frame, in pipeline order.
pub const STAGES: [&str; 4] = ["preprocess", "segment", "classify", "total"];

#[derive(Default)]
pub struct RunStats {
    pub frames: u64,
    pub passed: u64,
    pub failed: u64,
    pub by_reason: [u64; Reason::ALL.len()],
    pub latency: [LatencyHistogram; STAGES.len()],
    /// When the first and the latest recorded result were written.
    pub first_at: Option<Instant>,
    pub last_at: Option<Instant>,
}

impl RunStats {
    pub fn record(&mut self, verdict: Verdict, reason: Reason, latencies_ms: Option<[f64; 4]>) {
        let now = Instant::now();
        self.first_at.get_or_insert(now);
        self.last_at = Some(now);
        self.frames += 1;
        match verdict {
            Verdict::Pass => self.passed += 1,
            Verdict::Fail => self.failed += 1,
        }
        if let Some(i) = Reason::ALL.iter().position(|r| *r == reason) {
            self.by_reason[i] += 1;
        }
        if let Some(lat) = latencies_ms {
            for (h, ms) in self.latency.iter_mut().zip(lat) {
                h.record(ms);
            }
        }
    }

    /// Results per second between the first and the last recorded result.
    pub fn throughput(&self) -> Option<f64> {
        let span = self.last_at?.duration_since(self.first_at?).as_secs_f64();
        (self.frames > 1 && span > 0.0).then(|| (self.frames - 1) as f64 / span)
    }

    pub fn count(&self, reason: Reason) -> u64 {
        Reason::ALL
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.by_reason[i])
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
        format!(
            "{} frames, {:.1} fps, pass {}, fail {} (defect {}, no_seal {}, seal_area {}, not_inspected {}, error {})",
            self.frames,
            fps,
            self.passed,
            self.failed,
            self.count(Reason::Defect),
            self.count(Reason::NoSeal),
            self.count(Reason::SealArea),
            self.count(Reason::NotInspected),
            self.count(Reason::Error)
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
    fn counts_by_reason() {
        let mut s = RunStats::default();
        s.record(Verdict::Fail, Reason::Defect, None);
        s.record(Verdict::Pass, Reason::Ok, Some([1.0, 2.0, 3.0, 6.0]));
        assert_eq!(
            (s.frames, s.passed, s.failed, s.count(Reason::Defect)),
            (2, 1, 1, 1)
        );
        assert_eq!(s.latency[3].count(), 1);
    }
}
