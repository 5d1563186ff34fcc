//! Percentiles of the examples' samples.

/// The `p`-th percentile (0.0 to 1.0) of `v`, sorting it; `v` must not be empty.
pub fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}
