//! Named spans of a run (a batch's GPU spans, a frame's host hand-overs),
//! each in a fixed histogram of 5 µs buckets up to 40 ms, summarised once
//! as p50/p99/max per span. Nothing is allocated per record.

const BUCKET_MS: f64 = 0.005;
/// 5 µs buckets up to 40 ms; longer spans count in the last (their max is kept).
const BUCKETS: usize = 8000;

/// `N` spans recorded together, by name.
pub struct SpanHistogram<const N: usize> {
    names: [&'static str; N],
    counts: Vec<[u32; N]>,
    max: [f64; N],
    records: u64,
}

impl<const N: usize> SpanHistogram<N> {
    pub fn new(names: [&'static str; N]) -> Self {
        SpanHistogram {
            names,
            counts: vec![[0; N]; BUCKETS],
            max: [0.0; N],
            records: 0,
        }
    }

    /// One record of every span, in milliseconds, in the order of the names.
    pub fn record(&mut self, spans: [f64; N]) {
        for (i, ms) in spans.into_iter().enumerate() {
            let ms = ms.max(0.0);
            let bucket = ((ms / BUCKET_MS) as usize).min(BUCKETS - 1);
            self.counts[bucket][i] = self.counts[bucket][i].saturating_add(1);
            self.max[i] = self.max[i].max(ms);
        }
        self.records += 1;
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    /// Span `i`'s quantile `q` in ms (the bucket's upper edge).
    fn quantile(&self, i: usize, q: f64) -> f64 {
        let rank = ((q * self.records as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (bucket, counts) in self.counts.iter().enumerate() {
            seen += u64::from(counts[i]);
            if seen >= rank {
                return (bucket + 1) as f64 * BUCKET_MS;
            }
        }
        BUCKETS as f64 * BUCKET_MS
    }

    /// `name p50/p99/max` of each span, in ms; `None` before any record.
    pub fn summary(&self) -> Option<String> {
        if self.records == 0 {
            return None;
        }
        let spans: Vec<String> = (0..N)
            .map(|i| {
                format!(
                    "{} {:.3}/{:.3}/{:.3}",
                    self.names[i],
                    self.quantile(i, 0.5),
                    self.quantile(i, 0.99),
                    self.max[i]
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
        assert_eq!(spans.records(), 101);
    }
}
