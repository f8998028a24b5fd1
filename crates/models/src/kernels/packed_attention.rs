//! Bidirectional attention over a packed batch (segments one after another, each attending to
//! itself only), as matrix products.
//!
//! candle-nn's variable-length CPU attention walks every (query, key) pair with a scalar
//! online softmax: at OmniVoice's size (16 heads of 128 over a 165- and a 125-position
//! segment) that was 30 % of a bf16 forward, for 2 % of its multiply-adds. Here each
//! (segment, head) is two `gemm` products around a vectorized softmax, written straight into
//! the `[N, heads, head_dim]` layout the output projection reads. It stays `f32` in every
//! precision. (The query/key norms and RoPE before it are [`super::transformer::norm_rotate`].)

use super::fast_math::softmax_in_place;
use super::gemm::product;
use crate::spare::{self, SharedOut};

/// The shapes of one packed attention call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heads {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub scale: f32,
}

/// Row-major values whose rows (one per position) are `stride` apart: a view of the columns
/// of a wider product (one of q, k, v within a joint projection's output) without a copy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub data: &'a [f32],
    pub stride: usize,
}

impl Strided<'_> {
    /// Whether `n` rows of `width` values lie inside.
    fn holds(&self, n: usize, width: usize) -> bool {
        width <= self.stride && (n == 0 || (n - 1) * self.stride + width <= self.data.len())
    }
}

/// `softmax(q kᵀ · scale) v` per segment and query head (each on its group's key/value head).
/// `q` holds rows of [heads, head_dim], `k` and `v` of [kv_heads, head_dim], one per
/// position; `segments` are the lengths of the packed rows (summing to N). Writes `out`
/// [N, heads, head_dim].
pub(crate) fn packed_attention(
    q: Strided,
    k: Strided,
    v: Strided,
    segments: &[usize],
    h: Heads,
    out: &mut [f32],
) {
    let d = h.head_dim;
    let n: usize = segments.iter().sum();
    assert!(q.holds(n, h.heads * d));
    assert!(k.holds(n, h.kv_heads * d) && v.holds(n, h.kv_heads * d));
    assert_eq!(out.len(), n * h.heads * d);
    let group = h.heads / h.kv_heads;
    // SAFETY: `MaybeUninit<f32>` has `f32`'s layout, and only initialised values are written.
    let out_ptr =
        SharedOut::new(unsafe { &mut *(out as *mut [f32] as *mut [std::mem::MaybeUninit<f32>]) });
    let starts: Vec<usize> = segments
        .iter()
        .scan(0, |at, &len| {
            let start = *at;
            *at += len;
            Some(start)
        })
        .collect();
    let longest = segments.iter().copied().max().unwrap_or(0);
    let (q_rs, k_rs, v_rs, out_rs) = (q.stride, k.stride, v.stride, h.heads * d);
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
                        (q.data.as_ptr().add(start * q_rs + head * d), 1, q_rs),
                        (k.data.as_ptr().add(start * k_rs + kv * d), k_rs, 1),
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
                        (out_ptr.add(start * out_rs + head * d), 1, out_rs),
                        false,
                        (scores.as_ptr(), 1, len),
                        (v.data.as_ptr().add(start * v_rs + kv * d), 1, v_rs),
                    );
                }
            }
        }
    });
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
        let run = || {
            let mut out = vec![f32::NAN; n * 32];
            let view = |data, stride| Strided { data, stride };
            packed_attention(
                view(&q, 32),
                view(&k, 16),
                view(&v, 16),
                &segments,
                h,
                &mut out,
            );
            out
        };
        check(run());
        let _lending = crate::spare::lending_always();
        check(run());
        // And as columns of one joint product's rows: [q | k | v] per position.
        let joint: Vec<f32> = (0..n)
            .flat_map(|p| {
                let (q, k, v) = (&q[p * 32..][..32], &k[p * 16..][..16], &v[p * 16..][..16]);
                q.iter().chain(k).chain(v).copied()
            })
            .collect();
        let mut out = vec![f32::NAN; n * 32];
        let view = |from| Strided {
            data: &joint[from..],
            stride: 64,
        };
        packed_attention(view(0), view(32), view(48), &segments, h, &mut out);
        check(out);
    }
}
