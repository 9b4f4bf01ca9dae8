//! Histograms as torch's `add_histogram` makes them (`make_histogram` with `bins="tensorflow"`):
//! TensorFlow's default bucket edges (`±1e-12 · 1.1^k` up to `1e20`, and 0), NumPy's
//! counting (each bin `[left, right)`, the last one closed), then only the span from the first
//! to the last non-empty bin kept, with the empty bin before it so that the leftmost edge
//! shows.

use super::proto::HistogramProto;
use std::sync::OnceLock;

/// TensorFlow's default bucket edges, ascending (torch's `SummaryWriter._get_default_bins`,
/// computed the same way, so the same doubles).
fn default_edges() -> &'static [f64] {
    static EDGES: OnceLock<Vec<f64>> = OnceLock::new();
    EDGES.get_or_init(|| {
        let mut positive = Vec::new();
        let mut v = 1e-12;
        while v < 1e20 {
            positive.push(v);
            v *= 1.1;
        }
        let mut edges: Vec<f64> = positive.iter().rev().map(|v| -v).collect();
        edges.push(0.0);
        edges.extend(positive);
        edges
    })
}

/// The histogram of `values`, or why there is none: no values, a NaN or an infinity among
/// them, or every value beyond `±1e20` (outside every bucket).
pub(crate) fn histogram(values: &[f64]) -> Result<HistogramProto, String> {
    if values.is_empty() {
        return Err("the tensor has no elements".into());
    }
    if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
        return Err(format!("the values hold {bad}, which has no bucket"));
    }
    let edges = default_edges();
    let mut counts = vec![0.0f64; edges.len() - 1];
    let last = edges[edges.len() - 1];
    for &v in values {
        if v < edges[0] || v > last {
            continue;
        }
        // The bin whose left edge is the last edge <= v (the last bin also takes its right edge).
        let bin = (edges.partition_point(|&e| e <= v) - 1).min(counts.len() - 1);
        counts[bin] += 1.0;
    }
    let (Some(first), Some(end)) = (counts.iter().position(|&c| c > 0.0), counts.iter().rposition(|&c| c > 0.0)) else {
        return Err(format!("every value lies beyond ±{last:e}, outside every bucket"));
    };
    // Buckets are named by their right edge: keep the bins first..=end, and the (empty) bin
    // before the first so that its left edge is one of the limits.
    let mut bucket = vec![if first > 0 { counts[first - 1] } else { 0.0 }];
    bucket.extend_from_slice(&counts[first..=end]);
    Ok(HistogramProto {
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        num: values.len() as f64,
        sum: values.iter().sum(),
        sum_squares: values.iter().map(|v| v * v).sum(),
        bucket_limit: edges[first..=end + 1].to_vec(),
        bucket,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// torch's bins: 774 positive edges from 1e-12, their negatives, and 0.
    #[test]
    fn default_edges_are_tensorflows() {
        let e = default_edges();
        assert_eq!(e.len(), 2 * 774 + 1);
        assert_eq!((e[774], e[775], e[773]), (0.0, 1e-12, -1e-12));
        assert!(e.windows(2).all(|w| w[0] < w[1]));
        assert!(e[e.len() - 1] < 1e20 && e[e.len() - 1] * 1.1 >= 1e20);
    }

    /// Counts, limits and moments of a small sample, worked by hand against the edges.
    #[test]
    fn histogram_keeps_the_span_of_non_empty_bins() {
        let e = default_edges();
        let bin_of = |v: f64| e.iter().rposition(|&x| x <= v).unwrap();
        let values = [0.5, 0.5, -2.0, 3.0, 0.0];
        let h = histogram(&values).unwrap();
        let (lo, hi) = (bin_of(-2.0), bin_of(3.0));
        assert_eq!(h.bucket_limit, e[lo..=hi + 1].to_vec());
        assert_eq!(h.bucket.len(), h.bucket_limit.len());
        assert_eq!(h.bucket[0], 0.0);
        assert_eq!(h.bucket.iter().sum::<f64>(), 5.0);
        let count_at = |v: f64| h.bucket[bin_of(v) - lo + 1];
        assert_eq!((count_at(0.5), count_at(-2.0), count_at(3.0), count_at(0.0)), (2.0, 1.0, 1.0, 1.0));
        assert_eq!((h.min, h.max, h.num, h.sum, h.sum_squares), (-2.0, 3.0, 5.0, 2.0, 13.5));
        let one = histogram(&[0.0]).unwrap();
        assert_eq!((one.bucket_limit, one.bucket), (vec![0.0, 1e-12], vec![0.0, 1.0]));
    }

    #[test]
    fn histogram_refuses_what_has_no_bucket() {
        assert!(histogram(&[]).unwrap_err().contains("no elements"));
        assert!(histogram(&[1.0, f64::NAN]).unwrap_err().contains("NaN"));
        assert!(histogram(&[f64::INFINITY]).unwrap_err().contains("inf"));
        assert!(histogram(&[1e30, -1e25]).unwrap_err().contains("outside every bucket"));
    }
}
