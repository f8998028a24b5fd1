//! Inverse of the piecewise rational-quadratic spline (Durkan et al., "Neural Spline Flows").
//!
//! Piper's reference is `piecewise_rational_quadratic_transform(…, inverse=True,
//! tails="linear")` in `src/python/piper_train/vits/transforms.py` (rhasspy/piper).
//!
//! The stochastic duration predictor's ConvFlows transform one channel with a monotonic spline
//! whose knots the network predicts per frame; at inference we need the inverse. The work is
//! a few dozen scalar operations per frame with data-dependent bin lookup, so it runs on the
//! host over plain slices rather than as a chain of tiny tensor ops.

/// Smallest bin width/height and knot derivative, as in VITS.
pub const MIN_BIN_WIDTH: f32 = 1e-3;
pub const MIN_BIN_HEIGHT: f32 = 1e-3;
pub const MIN_DERIVATIVE: f32 = 1e-3;

/// Spline parameters for one element, unnormalized as the network emits them.
pub struct SplineParams<'a> {
    /// `[K]` bin widths (before softmax).
    pub widths: &'a [f32],
    /// `[K]` bin heights (before softmax).
    pub heights: &'a [f32],
    /// `[K − 1]` interior knot derivatives (before softplus); the two ends are fixed to 1.
    pub derivatives: &'a [f32],
}

/// Maps `y` back through the spline on `[-tail_bound, tail_bound]`; identity outside it
/// ("linear tails").
pub fn inverse_rq_spline(y: f32, p: &SplineParams, tail_bound: f32) -> f32 {
    if !(-tail_bound..=tail_bound).contains(&y) {
        return y;
    }
    let k = p.widths.len();
    debug_assert_eq!(p.heights.len(), k);
    debug_assert_eq!(p.derivatives.len() + 1, k);

    let knots_x = knots(p.widths, MIN_BIN_WIDTH, tail_bound);
    let knots_y = knots(p.heights, MIN_BIN_HEIGHT, tail_bound);
    // The end derivatives are min + softplus(ln(e^(1 − min) − 1)) = 1, which makes the
    // spline join the identity tails smoothly.
    let end = (f64::exp(1.0 - MIN_DERIVATIVE as f64) - 1.0).ln() as f32;
    let derivative = |i: usize| -> f32 {
        let raw = if i == 0 || i == k {
            end
        } else {
            p.derivatives[i - 1]
        };
        MIN_DERIVATIVE + softplus(raw)
    };

    // Bin i holds y when knots_y[i] <= y < knots_y[i + 1]; y == top stays in the last bin.
    let mut bin = 0;
    for (i, &ky) in knots_y.iter().enumerate().take(k) {
        if y >= ky {
            bin = i;
        }
    }

    let x0 = knots_x[bin];
    let width = knots_x[bin + 1] - knots_x[bin];
    let y0 = knots_y[bin];
    let height = knots_y[bin + 1] - knots_y[bin];
    let delta = height / width;
    let d0 = derivative(bin);
    let d1 = derivative(bin + 1);

    // Solve the rational-quadratic for θ ∈ [0, 1] with the numerically stable root.
    let dy = y - y0;
    let slope_sum = d0 + d1 - 2.0 * delta;
    let a = dy * slope_sum + height * (delta - d0);
    let b = height * d0 - dy * slope_sum;
    let c = -delta * dy;
    let discriminant = b * b - 4.0 * a * c;
    let theta = (2.0 * c) / (-b - discriminant.sqrt());
    theta * width + x0
}

/// Knot positions `[K + 1]` on `[-bound, bound]` from unnormalized bin sizes.
fn knots(unnormalized: &[f32], min_size: f32, bound: f32) -> Vec<f32> {
    let k = unnormalized.len();
    let max = unnormalized
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = unnormalized.iter().map(|v| (v - max).exp()).collect();
    let sum: f32 = exps.iter().sum();
    let mut knots = Vec::with_capacity(k + 1);
    knots.push(-bound);
    let mut cumulative = 0f32;
    for e in &exps[..k - 1] {
        cumulative += min_size + (1.0 - min_size * k as f32) * (e / sum);
        knots.push(2.0 * bound * cumulative - bound);
    }
    knots.push(bound);
    knots
}

fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forward spline, written independently, to check that the inverse undoes it.
    fn forward(x: f32, p: &SplineParams, bound: f32) -> f32 {
        if !(-bound..=bound).contains(&x) {
            return x;
        }
        let k = p.widths.len();
        let kx = knots(p.widths, MIN_BIN_WIDTH, bound);
        let ky = knots(p.heights, MIN_BIN_HEIGHT, bound);
        let d = |i: usize| {
            if i == 0 || i == k {
                1.0
            } else {
                MIN_DERIVATIVE + softplus(p.derivatives[i - 1])
            }
        };
        let bin = (0..k).rev().find(|&i| x >= kx[i]).unwrap();
        let (w, h) = (kx[bin + 1] - kx[bin], ky[bin + 1] - ky[bin]);
        let s = h / w;
        let t = (x - kx[bin]) / w;
        let num = h * (s * t * t + d(bin) * t * (1.0 - t));
        let den = s + (d(bin + 1) + d(bin) - 2.0 * s) * t * (1.0 - t);
        ky[bin] + num / den
    }

    #[test]
    fn inverse_undoes_forward() {
        let widths = [0.3, -1.0, 0.5, 2.0, 0.0];
        let heights = [1.0, 0.2, -0.7, 0.1, 0.4];
        let derivatives = [0.5, -2.0, 1.5, 0.0];
        let p = SplineParams {
            widths: &widths,
            heights: &heights,
            derivatives: &derivatives,
        };
        for i in 0..=100 {
            let x = -4.99 + 9.98 * i as f32 / 100.0;
            let y = forward(x, &p, 5.0);
            let back = inverse_rq_spline(y, &p, 5.0);
            assert!((back - x).abs() < 1e-4, "x {x} y {y} back {back}");
        }
    }

    #[test]
    fn identity_outside_the_tail_bound() {
        let zeros = [0f32; 4];
        let p = SplineParams {
            widths: &zeros,
            heights: &zeros,
            derivatives: &zeros[..3],
        };
        assert_eq!(inverse_rq_spline(7.5, &p, 5.0), 7.5);
        assert_eq!(inverse_rq_spline(-5.5, &p, 5.0), -5.5);
        // Uniform bins with unit end slopes and interior softplus(0)+min slopes: 0 ↦ 0.
        assert!(inverse_rq_spline(0.0, &p, 5.0).abs() < 1e-6);
    }
}
