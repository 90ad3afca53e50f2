//! Where a batch's GPU time goes, over a run: each span of `GpuTimings`
//! (read from the batch's CUDA events, never inferred) in a fixed histogram
//! of 5 µs buckets, logged once when the device thread ends. Nothing is
//! allocated per batch.
//!
//! ```text
//! upload      upload stream: first H2D queued -> last H2D done (0 when mapped)
//! preprocess  compute stream: the batch's turn -> last frame kernel (waits for uploads not yet done)
//! segment     segmentation + mask kernels + counts copy
//! classify    classifier + logits copy
//! batch       first upload queued -> results on the host (overlaps the batch before)
//! ```

use super::device_path::GpuTimings;

const BUCKET_MS: f64 = 0.005;
/// 5 µs buckets up to 40 ms; longer spans count in the last.
const BUCKETS: usize = 8000;
const NAMES: [&str; 5] = ["upload", "preprocess", "segment", "classify", "batch"];

/// The spans of every batch a device path completed.
pub struct GpuSpans {
    counts: Vec<[u32; 5]>,
    batches: u64,
    frames: u64,
}

impl Default for GpuSpans {
    fn default() -> Self {
        GpuSpans {
            counts: vec![[0; 5]; BUCKETS],
            batches: 0,
            frames: 0,
        }
    }
}

impl GpuSpans {
    /// One batch of `frames` frames, timed `t`.
    pub fn record(&mut self, t: &GpuTimings, frames: usize) {
        let spans = [
            t.upload_ms,
            t.preprocess_ms,
            t.segment_ms,
            t.classify_ms,
            t.batch_ms,
        ];
        for (i, ms) in spans.into_iter().enumerate() {
            let bucket = ((ms.max(0.0) / BUCKET_MS) as usize).min(BUCKETS - 1);
            self.counts[bucket][i] = self.counts[bucket][i].saturating_add(1);
        }
        self.batches += 1;
        self.frames += frames as u64;
    }

    /// Span `i`'s quantile `q` in ms (the bucket's upper edge).
    fn quantile(&self, i: usize, q: f64) -> f64 {
        let rank = ((q * self.batches as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (bucket, counts) in self.counts.iter().enumerate() {
            seen += u64::from(counts[i]);
            if seen >= rank {
                return (bucket + 1) as f64 * BUCKET_MS;
            }
        }
        BUCKETS as f64 * BUCKET_MS
    }

    /// One line: p50 / p99 ms of each span, and the mean batch.
    pub fn summary(&self) -> Option<String> {
        if self.batches == 0 {
            return None;
        }
        let mut line = String::new();
        for (i, name) in NAMES.iter().enumerate() {
            line.push_str(&format!(
                "{name} {:.3}/{:.3} ",
                self.quantile(i, 0.5),
                self.quantile(i, 0.99)
            ));
        }
        line.push_str(&format!(
            "ms (p50/p99 per batch); {} batches, mean {:.2} frames",
            self.batches,
            self.frames as f64 / self.batches as f64
        ));
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_binned_to_five_microseconds() {
        let mut spans = GpuSpans::default();
        assert!(spans.summary().is_none());
        for k in 1..=100 {
            let t = GpuTimings {
                upload_ms: 0.1,
                preprocess_ms: 0.01 * k as f64,
                segment_ms: 0.2,
                classify_ms: 0.05,
                batch_ms: 1.0,
            };
            spans.record(&t, 4);
        }
        let line = spans.summary().unwrap();
        assert!(line.contains("upload 0.105/0.105"), "{line}");
        assert!(line.contains("preprocess 0.505/0.995"), "{line}");
        assert!(line.contains("100 batches, mean 4.00 frames"), "{line}");
    }
}
