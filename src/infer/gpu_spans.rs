//! Where a batch's GPU time goes, over a run: each span of `GpuTimings`
//! (read from the batch's CUDA events, never inferred) in a
//! `stats::SpanHistogram`, logged once when the device thread ends.
//!
//! ```text
//! upload      upload stream: first H2D queued -> last H2D done (0 when mapped)
//! preprocess  compute stream: the batch's turn -> last frame kernel (waits for uploads not yet done)
//! segment     segmentation + mask kernels + counts copy
//! classify    classifier + logits copy
//! batch       first upload queued -> results on the host (overlaps the batch before)
//! ```

use super::device_path::GpuTimings;
use crate::stats::SpanHistogram;

/// The spans of every batch a device path completed.
pub struct GpuSpans {
    spans: SpanHistogram<5>,
    frames: u64,
}

impl Default for GpuSpans {
    fn default() -> Self {
        GpuSpans {
            spans: SpanHistogram::new(["upload", "preprocess", "segment", "classify", "batch"]),
            frames: 0,
        }
    }
}

impl GpuSpans {
    /// One batch of `frames` frames, timed `t`.
    pub fn record(&mut self, t: &GpuTimings, frames: usize) {
        self.spans.record([
            t.upload_ms,
            t.preprocess_ms,
            t.segment_ms,
            t.classify_ms,
            t.batch_ms,
        ]);
        self.frames += frames as u64;
    }

    /// One line: p50 / p99 / max ms of each span, and the mean batch.
    pub fn summary(&self) -> Option<String> {
        let spans = self.spans.summary()?;
        let batches = self.spans.records();
        Some(format!(
            "{spans} ms (p50/p99/max per batch); {batches} batches, mean {:.2} frames",
            self.frames as f64 / batches as f64
        ))
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
        assert!(line.contains("upload 0.100/0.100/0.100"), "{line}");
        assert!(line.contains("preprocess 0.505/0.995/1.000"), "{line}");
        assert!(line.contains("100 batches, mean 4.00 frames"), "{line}");
    }
}
