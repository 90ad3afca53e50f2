//! Named spans of a run (a batch's GPU spans, a frame's host hand-overs),
//! each in a `LatencyHistogram` of 5 µs buckets up to 40 ms, summarised
//! once as p50/p99/max per span. Nothing is allocated per record.

use super::LatencyHistogram;

/// 5 µs buckets up to 40 ms; longer spans count in the last (their max is kept).
const BUCKET_MS: f64 = 0.005;
const BUCKETS: usize = 8000;

/// `N` spans recorded together, by name.
pub struct SpanHistogram<const N: usize> {
    names: [&'static str; N],
    spans: [LatencyHistogram; N],
}

impl<const N: usize> SpanHistogram<N> {
    pub fn new(names: [&'static str; N]) -> Self {
        SpanHistogram {
            names,
            spans: std::array::from_fn(|_| LatencyHistogram::with_buckets(BUCKET_MS, BUCKETS)),
        }
    }

    /// One record of every span, in milliseconds, in the order of the names.
    pub fn record(&mut self, spans: [f64; N]) {
        for (histogram, ms) in self.spans.iter_mut().zip(spans) {
            histogram.record(ms);
        }
    }

    pub fn records(&self) -> u64 {
        self.spans.first().map_or(0, LatencyHistogram::count)
    }

    /// `name p50/p99/max` of each span, in ms; `None` before any record.
    pub fn summary(&self) -> Option<String> {
        if self.records() == 0 {
            return None;
        }
        let spans: Vec<String> = self
            .names
            .iter()
            .zip(&self.spans)
            .map(|(name, h)| {
                format!(
                    "{name} {:.3}/{:.3}/{:.3}",
                    h.quantile(0.5).unwrap_or(0.0),
                    h.quantile(0.99).unwrap_or(0.0),
                    h.max_ms()
                )
            })
            .collect();
        Some(spans.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_binned_to_five_microseconds_and_keep_their_max() {
        let mut spans = SpanHistogram::new(["a", "b"]);
        assert!(spans.summary().is_none());
        for k in 1..=100 {
            spans.record([0.1, 0.01 * f64::from(k)]);
        }
        spans.record([50.0, 0.0]);
        let line = spans.summary().unwrap();
        assert!(line.starts_with("a 0.105/0.105/50.000 "), "{line}");
        assert!(line.contains("b 0.505/0.995/1.000"), "{line}");
        // A quantile is its 5 µs bucket's upper edge, never above the max.
        let mut one = SpanHistogram::new(["c"]);
        one.record([0.1]);
        assert_eq!(one.summary().unwrap(), "c 0.100/0.100/0.100");
        assert_eq!(spans.records(), 101);
    }
}
