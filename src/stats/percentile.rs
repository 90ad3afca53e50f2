//! Nearest-rank percentiles: the one rule every figure of the crate uses
//! (run summary, `sealcheck evaluate`, the status page, the shadow's
//! agreement), so that a p99 means the same thing everywhere.
//!
//! The nearest-rank `q` quantile of `n` values is the value of rank
//! `ceil(q * n)` (1-based) in ascending order, at least rank 1.

/// The 1-based rank of the nearest-rank `q` (0..=1) quantile among `n`
/// values; `None` when there are none.
pub fn nearest_rank(q: f64, n: u64) -> Option<u64> {
    (n > 0).then(|| ((q * n as f64).ceil() as u64).clamp(1, n))
}

/// The bin that holds the value of 1-based `rank`, walking `counts` (how
/// many values each bin holds, bins ascending): the one histogram walk of
/// the crate (`LatencyHistogram::quantile`, the shadow's |Δ| bins). `None`
/// when the bins hold fewer than `rank` values.
pub fn bin_of_rank(counts: impl IntoIterator<Item = u64>, rank: u64) -> Option<usize> {
    let mut seen = 0u64;
    counts.into_iter().position(|n| {
        seen += n;
        seen >= rank
    })
}

/// The nearest-rank `q` (0..=1) quantile of values sorted ascending;
/// `None` when `sorted` is empty.
pub fn percentile_of_sorted<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = nearest_rank(q, sorted.len() as u64)?;
    sorted.get(rank as usize - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentile() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile_of_sorted(&v, 0.99), Some(99.0));
        assert_eq!(percentile_of_sorted(&v, 0.5), Some(50.0));
        assert_eq!(percentile_of_sorted(&v, 0.0), Some(1.0), "rank 1 at least");
        assert_eq!(percentile_of_sorted(&v, 1.0), Some(100.0));
        assert_eq!(percentile_of_sorted::<f64>(&[], 0.5), None);
    }

    #[test]
    fn ranks_are_one_based_and_within_the_values() {
        assert_eq!(nearest_rank(0.5, 0), None);
        assert_eq!(nearest_rank(0.99, 1), Some(1));
        assert_eq!(nearest_rank(0.99, 1000), Some(990));
        assert_eq!(nearest_rank(0.99, 1001), Some(991));
        assert_eq!(nearest_rank(1.5, 10), Some(10));
    }

    #[test]
    fn the_bin_of_a_rank_is_where_the_running_count_reaches_it() {
        let bins = [0u64, 2, 0, 3];
        assert_eq!(bin_of_rank(bins, 1), Some(1));
        assert_eq!(bin_of_rank(bins, 2), Some(1));
        assert_eq!(bin_of_rank(bins, 3), Some(3));
        assert_eq!(bin_of_rank(bins, 5), Some(3));
        assert_eq!(bin_of_rank(bins, 6), None, "fewer values than the rank");
    }

    #[test]
    fn works_for_f32_too() {
        assert_eq!(percentile_of_sorted(&[1.0f32, 2.0, 3.0], 0.5), Some(2.0));
    }
}
