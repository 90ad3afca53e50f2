//! Run statistics: verdict counts and per-stage latency percentiles.
//!
//! Latencies go into fixed-size histograms (0.05 ms buckets up to 2 s), so
//! recording a frame allocates nothing however long the service runs.

mod counters;
mod percentile;
mod run_stats;
mod spans;

pub use counters::{RecipeCounts, ResultCounters, ResultCounts};
pub use percentile::{bin_of_rank, nearest_rank, percentile_of_sorted};
pub use run_stats::{LatencyHistogram, RunStats, STAGES};
pub use spans::SpanHistogram;
