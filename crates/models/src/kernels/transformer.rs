//! The steps of a pre-norm transformer layer between its products, over row-major rows on
//! the host: the RMS norms, the per-head query/key norm and rotation, and SwiGLU.
//!
//! Written as tensor ops these were a pass, an allocation and (for candle's binary maps) a
//! hand-off to candle's own thread pool each: in a bf16 OmniVoice forward on AMX they took
//! more of the time than the products' own thread could spare (docs/performance.md §13c).
//! Here each is one vectorized pass over the rows ([`super::fast_math`]), the rows shared
//! with a spare core like the products'.

use super::fast_math::{norm_rotate_row, rms_norm_row, swiglu};
use crate::spare::rows_in_parts;

/// Rows per part when a spare core shares a pass.
const ROWS_ALIGN: usize = 8;

/// `out[i] = x[i] / √(mean(x[i]²) + eps) · weight` for every row `x[i]` of `weight.len()`
/// values.
pub(crate) fn rms_norm_rows(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let width = weight.len();
    assert_eq!(x.len(), out.len());
    assert!(width > 0 && x.len().is_multiple_of(width));
    rows_in_parts(out, width, ROWS_ALIGN, 8 * x.len(), |rows, out| {
        let x = &x[rows.start * width..rows.end * width];
        for (x, out) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
            rms_norm_row(x, weight, eps, out);
        }
    });
}

/// A run of heads in each row of a norm-and-rotate pass: where its first head starts, how many
/// heads, and their norm's weight (one head's width).
pub(crate) struct HeadRun<'a> {
    pub offset: usize,
    pub heads: usize,
    pub weight: &'a [f32],
}

/// In every row of `x` (`stride` values each, one per position), each head of each run
/// RMS-normed with its run's weight, then rotated by the position's angles: the halves
/// (x₁, x₂) become (x₁ cos − x₂ sin, x₂ cos + x₁ sin). `cos` and `sin` hold half a head's
/// values per position.
pub(crate) fn norm_rotate(
    x: &mut [f32],
    stride: usize,
    runs: &[HeadRun],
    eps: f32,
    cos: &[f32],
    sin: &[f32],
) {
    assert!(stride > 0 && x.len().is_multiple_of(stride));
    let positions = x.len() / stride;
    assert_eq!(sin.len(), cos.len());
    let half = cos.len().checked_div(positions).unwrap_or(0);
    assert_eq!(cos.len(), positions * half);
    for run in runs {
        assert_eq!(run.weight.len(), 2 * half);
        assert!(run.offset + run.heads * 2 * half <= stride);
    }
    let work: usize = runs.iter().map(|r| r.heads).sum::<usize>() * 2 * half * positions * 8;
    rows_in_parts(x, stride, ROWS_ALIGN, work, |rows, x| {
        for (position, row) in rows.zip(x.chunks_exact_mut(stride)) {
            let (cos, sin) = (
                &cos[position * half..][..half],
                &sin[position * half..][..half],
            );
            for run in runs {
                let d = run.weight.len();
                for head in row[run.offset..][..run.heads * d].chunks_exact_mut(d) {
                    norm_rotate_row(head, run.weight, eps, cos, sin);
                }
            }
        }
    });
}

/// `out[i, c·g + j] = silu(y[i, 2c·g + j]) · y[i, (2c + 1)·g + j]` for rows of `width`
/// outputs and `g = group`: the gate and up products of a SwiGLU MLP computed as one layer
/// whose output features interleave `group` gate features with the `group` up features of
/// the same indices, so that each part of the product holds both halves of what it needs.
pub(crate) fn swiglu_rows(y: &[f32], width: usize, group: usize, out: &mut [f32]) {
    assert_eq!(y.len(), 2 * out.len());
    assert!(group > 0 && width.is_multiple_of(group) && out.len().is_multiple_of(width));
    rows_in_parts(out, width, ROWS_ALIGN, 16 * out.len(), |rows, out| {
        let y = &y[rows.start * 2 * width..rows.end * 2 * width];
        for (y, out) in y.chunks_exact(2 * group).zip(out.chunks_exact_mut(group)) {
            swiglu(y, out);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::values;

    fn close(a: f32, b: f64) -> bool {
        (a as f64 - b).abs() <= 2e-6 * (1.0 + b.abs())
    }

    /// Against the definitions in `f64`, with and without a spare core.
    #[test]
    fn rms_norm_matches_the_definition() {
        let (rows, width) = (37, 100);
        let x = values(rows * width, 1);
        let weight = values(width, 2);
        let check = || {
            let mut out = vec![f32::NAN; x.len()];
            rms_norm_rows(&x, &weight, 1e-6, &mut out);
            for (row, got) in x.chunks_exact(width).zip(out.chunks_exact(width)) {
                let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / width as f64;
                let m = (ms + 1e-6).sqrt();
                for ((&v, &w), &g) in row.iter().zip(&weight).zip(got) {
                    assert!(close(g, v as f64 / m * w as f64), "{g}");
                }
            }
        };
        check();
        let _lending = crate::spare::lending_always();
        check();
    }

    #[test]
    fn norm_rotate_matches_the_definition() {
        // Rows of 3 + 2 heads of 8 with 5 unused values at each end, two runs.
        let (positions, d, half, stride) = (29, 8, 4, 50);
        let x = values(positions * stride, 3);
        let (wq, wk) = (values(d, 4), values(d, 5));
        let angles: Vec<f32> = (0..positions * half).map(|i| i as f32 * 0.37).collect();
        let cos: Vec<f32> = angles.iter().map(|a| a.cos()).collect();
        let sin: Vec<f32> = angles.iter().map(|a| a.sin()).collect();
        let runs = [
            HeadRun {
                offset: 5,
                heads: 3,
                weight: &wq,
            },
            HeadRun {
                offset: 29,
                heads: 2,
                weight: &wk,
            },
        ];
        let check = || {
            let mut got = x.clone();
            norm_rotate(&mut got, stride, &runs, 1e-6, &cos, &sin);
            for p in 0..positions {
                let row = &x[p * stride..][..stride];
                let out = &got[p * stride..][..stride];
                let mut expected: Vec<f64> = row.iter().map(|&v| v as f64).collect();
                for run in &runs {
                    for h in 0..run.heads {
                        let at = run.offset + h * d;
                        let head = &row[at..at + d];
                        let m = (head.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / d as f64
                            + 1e-6)
                            .sqrt();
                        let n: Vec<f64> = head
                            .iter()
                            .zip(run.weight)
                            .map(|(&v, &w)| v as f64 / m * w as f64)
                            .collect();
                        for i in 0..half {
                            let (c, s) = (cos[p * half + i] as f64, sin[p * half + i] as f64);
                            expected[at + i] = n[i] * c - n[half + i] * s;
                            expected[at + half + i] = n[half + i] * c + n[i] * s;
                        }
                    }
                }
                for (j, (&g, &e)) in out.iter().zip(&expected).enumerate() {
                    assert!(close(g, e), "position {p}, value {j}: {g} vs {e}");
                }
            }
        };
        check();
        let _lending = crate::spare::lending_always();
        check();
    }

    #[test]
    fn swiglu_pairs_each_gate_with_its_up() {
        let (rows, width, group) = (21, 48, 16);
        let y = values(rows * 2 * width, 6);
        let check = || {
            let mut out = vec![f32::NAN; rows * width];
            swiglu_rows(&y, width, group, &mut out);
            for i in 0..rows {
                for f in 0..width {
                    let (c, j) = (f / group, f % group);
                    let g = y[i * 2 * width + 2 * c * group + j] as f64;
                    let u = y[i * 2 * width + (2 * c + 1) * group + j] as f64;
                    let expected = g / (1.0 + (-g).exp()) * u;
                    assert!(close(out[i * width + f], expected), "row {i}, feature {f}");
                }
            }
        };
        check();
        let _lending = crate::spare::lending_always();
        check();
    }
}
