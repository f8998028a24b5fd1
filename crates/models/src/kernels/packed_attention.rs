//! Bidirectional attention over a packed batch (segments one after another, each attending to
//! itself only), as matrix products, and the per-head RMS norm and rotation before it.
//!
//! candle-nn's variable-length CPU attention walks every (query, key) pair with a scalar
//! online softmax: at OmniVoice's size (16 heads of 128 over a 165- and a 125-position
//! segment) that was 30 % of a bf16 forward, for 2 % of its multiply-adds. Here each
//! (segment, head) is two `gemm` products around a vectorized softmax, written straight into
//! the `[N, heads, head_dim]` layout the output projection reads. Likewise the query/key RMS
//! norms and RoPE ran as a dozen tensor ops over the whole `[N, heads, head_dim]` tensor (each
//! one a pass and an allocation, 17 % of the forward); here they are one pass per head row.
//! Both stay `f32` in every precision.

use super::fast_math::softmax_in_place;
use super::gemm::product;
use crate::spare::{self, SharedOut};

/// Each `head_dim`-wide row of `x` (positions × heads, row-major) RMS-normed with `weight`,
/// then rotated by its position's angles: the halves (x₁, x₂) become (x₁ cos − x₂ sin,
/// x₂ cos + x₁ sin). `cos` and `sin` hold `head_dim / 2` values per position.
pub(crate) fn norm_rotate(
    x: &mut [f32],
    heads: usize,
    weight: &[f32],
    eps: f32,
    cos: &[f32],
    sin: &[f32],
) {
    let d = weight.len();
    let half = d / 2;
    assert!(d.is_multiple_of(2) && x.len().is_multiple_of(heads * d));
    assert_eq!(cos.len(), x.len() / heads / 2);
    assert_eq!(sin.len(), cos.len());
    for (position, rows) in x.chunks_exact_mut(heads * d).enumerate() {
        let (cos, sin) = (
            &cos[position * half..][..half],
            &sin[position * half..][..half],
        );
        for row in rows.chunks_exact_mut(d) {
            // As candle's `rms_norm`: x / sqrt(mean(x²) + eps) · weight.
            let sum2: f32 = row.iter().map(|v| v * v).sum();
            let m = (sum2 / d as f32 + eps).sqrt();
            for (v, w) in row.iter_mut().zip(weight) {
                *v = *v / m * w;
            }
            let (x1, x2) = row.split_at_mut(half);
            for i in 0..half {
                let (a, b) = (x1[i], x2[i]);
                x1[i] = a * cos[i] - b * sin[i];
                x2[i] = b * cos[i] + a * sin[i];
            }
        }
    }
}

/// The shapes of one packed attention call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heads {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub scale: f32,
}

/// `softmax(q kᵀ · scale) v` per segment and query head (each on its group's key/value head).
/// `q` is [N, heads, head_dim], `k` and `v` [N, kv_heads, head_dim], all row-major; `segments`
/// are the lengths of the packed rows (summing to N). Returns [N, heads, head_dim].
pub(crate) fn packed_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    segments: &[usize],
    h: Heads,
) -> Vec<f32> {
    let d = h.head_dim;
    let n: usize = segments.iter().sum();
    assert_eq!(q.len(), n * h.heads * d);
    assert_eq!(k.len(), n * h.kv_heads * d);
    assert_eq!(v.len(), k.len());
    let group = h.heads / h.kv_heads;
    let mut out: Vec<f32> = Vec::with_capacity(q.len());
    let out_ptr = SharedOut::new(&mut out.spare_capacity_mut()[..q.len()]);
    let starts: Vec<usize> = segments
        .iter()
        .scan(0, |at, &len| {
            let start = *at;
            *at += len;
            Some(start)
        })
        .collect();
    let longest = segments.iter().copied().max().unwrap_or(0);
    let (q_rs, kv_rs) = (h.heads * d, h.kv_heads * d);
    let work: usize = segments.iter().map(|&l| 2 * l * l * d).sum::<usize>() * h.heads;
    // Heads are independent: a spare core takes some of them.
    spare::in_parts(h.heads, 1, work, |heads| {
        let out_ptr = out_ptr.get();
        let mut scores = vec![0f32; longest * longest];
        for head in heads {
            let kv = head / group;
            for (&start, &len) in starts.iter().zip(segments) {
                if len == 0 {
                    continue;
                }
                let scores = &mut scores[..len * len];
                // SAFETY: every view lies inside its slice: rows start..start + len of the
                // head's columns (asserted lengths above), `scores` holds len × len values, and
                // `out` gets the same rows of this head's columns, which no other part writes.
                unsafe {
                    // scores[i, j] = q[i] · k[j]
                    product(
                        (len, len, d),
                        (scores.as_mut_ptr(), 1, len),
                        false,
                        (q.as_ptr().add(start * q_rs + head * d), 1, q_rs),
                        (k.as_ptr().add(start * kv_rs + kv * d), kv_rs, 1),
                    );
                }
                for row in scores.chunks_exact_mut(len) {
                    row.iter_mut().for_each(|s| *s *= h.scale);
                    softmax_in_place(row);
                }
                // SAFETY: as above.
                unsafe {
                    product(
                        (len, d, len),
                        (out_ptr.add(start * q_rs + head * d), 1, q_rs),
                        false,
                        (scores.as_ptr(), 1, len),
                        (v.as_ptr().add(start * kv_rs + kv * d), 1, kv_rs),
                    );
                }
            }
        }
    });
    // SAFETY: every (position, head) row was written by exactly one part above.
    unsafe { out.set_len(q.len()) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the plain definition, with a grouped head layout and uneven segments, with and
    /// without a spare core.
    #[test]
    fn matches_the_definition() {
        let h = Heads {
            heads: 4,
            kv_heads: 2,
            head_dim: 8,
            scale: 0.3,
        };
        let segments = [5, 1, 7];
        let n = 13;
        let values = |len: usize, seed: usize| -> Vec<f32> {
            (0..len)
                .map(|i| (((i * 7919 + seed) % 1000) as f32 / 500.0) - 1.0)
                .collect()
        };
        let (q, k, v) = (values(n * 32, 1), values(n * 16, 2), values(n * 16, 3));
        let mut expected = vec![0f32; n * 32];
        let mut start = 0;
        for &len in &segments {
            for head in 0..4 {
                let kv = head / 2;
                for i in 0..len {
                    let qi = &q[(start + i) * 32 + head * 8..][..8];
                    let s: Vec<f32> = (0..len)
                        .map(|j| {
                            qi.iter()
                                .zip(&k[(start + j) * 16 + kv * 8..][..8])
                                .map(|(a, b)| a * b)
                                .sum::<f32>()
                                * h.scale
                        })
                        .collect();
                    let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let e: Vec<f32> = s.iter().map(|x| (x - max).exp()).collect();
                    let z: f32 = e.iter().sum();
                    for t in 0..8 {
                        expected[(start + i) * 32 + head * 8 + t] = (0..len)
                            .map(|j| e[j] / z * v[(start + j) * 16 + kv * 8 + t])
                            .sum();
                    }
                }
            }
            start += len;
        }
        let check = |got: Vec<f32>| {
            for (a, b) in got.iter().zip(&expected) {
                assert!((a - b).abs() < 1e-5, "{a} vs {b}");
            }
        };
        check(packed_attention(&q, &k, &v, &segments, h));
        let _lending = crate::spare::lending_always();
        check(packed_attention(&q, &k, &v, &segments, h));
    }
}
