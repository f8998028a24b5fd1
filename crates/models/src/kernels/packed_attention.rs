//! Bidirectional attention over a packed batch (segments one after another, each attending to
//! itself only), as matrix products.
//!
//! candle-nn's variable-length CPU attention walks every (query, key) pair with a scalar
//! online softmax: at OmniVoice's size (16 heads of 128 over a 165- and a 125-position
//! segment) that was 30 % of a bf16 forward, for 2 % of its multiply-adds. Here each
//! (segment, head) is two `gemm` products around a vectorized softmax, written straight into
//! the `[N, heads, head_dim]` layout the output projection reads. It stays `f32` in every
//! precision. (The query/key norms and RoPE before it are [`super::transformer::norm_rotate`].)

use super::amx::{self, Tiles};
use super::fast_math::softmax_in_place;
use super::gemm::product;
use super::rows::as_uninit;
pub(crate) use super::rows::Strided;
use super::tile_attention::{self, attend, PackedKv, Scratch};
use super::Precision;
use crate::spare::{self, SharedOut};

/// The shapes of one packed attention call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heads {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub scale: f32,
}

/// [`packed_attention`] on AMX tiles: each part of the key/value heads (shared with a spare
/// core) packs a head per segment once for its group of query heads.
fn on_tiles(
    q: Strided,
    k: Strided,
    v: Strided,
    segments: &[usize],
    starts: &[usize],
    h: Heads,
    out_ptr: SharedOut,
) {
    let d = h.head_dim;
    let group = h.heads / h.kv_heads;
    let out_rs = h.heads * d;
    let work: usize = segments.iter().map(|&l| 2 * l * l * d).sum::<usize>() * h.heads;
    spare::in_parts(h.kv_heads, 1, work, |kv_heads| {
        let out_ptr = out_ptr.get();
        // SAFETY: the caller checked that AMX is usable; the configuration lives on this
        // thread for this part.
        let tiles = unsafe { Tiles::configure() };
        let (mut scratch, mut packed) = TILE_BUFFERS.replace((Scratch::new(), PackedKv::new()));
        for kv in kv_heads {
            for (&start, &len) in starts.iter().zip(segments) {
                packed.pack(k.from(start, kv * d), v.from(start, kv * d), len, d);
                for head in kv * group..(kv + 1) * group {
                    // SAFETY: rows start..start + len of this head's columns of `out`, which
                    // only this part writes (its key/value heads' query heads), inside `out`
                    // (asserted by the caller).
                    unsafe {
                        let at = out_ptr.add(start * out_rs + head * d);
                        attend(
                            &tiles,
                            q.from(start, head * d),
                            &packed,
                            h.scale,
                            (at, out_rs),
                            &mut scratch,
                        )
                    };
                }
            }
        }
        TILE_BUFFERS.set((scratch, packed));
    });
}

thread_local! {
    /// This thread's buffers for [`on_tiles`], kept between calls (fresh ones are fresh pages
    /// to fault in, 56 times a forward).
    static TILE_BUFFERS: std::cell::Cell<(Scratch, PackedKv)> =
        const { std::cell::Cell::new((Scratch::new(), PackedKv::new())) };
}

/// `softmax(q kᵀ · scale) v` per segment and query head (each on its group's key/value head).
/// `q` holds rows of [heads, head_dim], `k` and `v` of [kv_heads, head_dim], one per
/// position; `segments` are the lengths of the packed rows (summing to N). Writes `out`
/// [N, heads, head_dim]. With `products` bf16 and usable AMX tiles, the two products run on
/// the tiles in bf16 ([`tile_attention`]); otherwise in `f32`.
pub(crate) fn packed_attention(
    q: Strided,
    k: Strided,
    v: Strided,
    segments: &[usize],
    h: Heads,
    products: Precision,
    out: &mut [f32],
) {
    let d = h.head_dim;
    let n: usize = segments.iter().sum();
    assert!(q.holds(n, h.heads * d));
    assert!(k.holds(n, h.kv_heads * d) && v.holds(n, h.kv_heads * d));
    assert_eq!(out.len(), n * h.heads * d);
    assert!(h.kv_heads > 0 && h.heads.is_multiple_of(h.kv_heads));
    let group = h.heads / h.kv_heads;
    let out_ptr = SharedOut::new(as_uninit(out));
    let starts: Vec<usize> = segments
        .iter()
        .scan(0, |at, &len| {
            let start = *at;
            *at += len;
            Some(start)
        })
        .collect();
    if products == Precision::Bf16 && amx::usable() && tile_attention::fits(d) {
        return on_tiles(q, k, v, segments, &starts, h, out_ptr);
    }
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

    /// `softmax(q kᵀ · scale) v` per segment and query head by the definition, in `f64`: `q`
    /// [N, heads, D], `k` and `v` [N, kv_heads, D], each query head on its group's key/value
    /// head.
    fn definition(q: &[f32], k: &[f32], v: &[f32], segments: &[usize], h: Heads) -> Vec<f64> {
        let d = h.head_dim;
        let (q_rs, kv_rs, group) = (h.heads * d, h.kv_heads * d, h.heads / h.kv_heads);
        let mut expected = vec![0f64; q.len()];
        let mut start = 0;
        for &len in segments {
            for head in 0..h.heads {
                let kv = head / group;
                for i in 0..len {
                    let qi = &q[(start + i) * q_rs + head * d..][..d];
                    let s: Vec<f64> = (0..len)
                        .map(|j| {
                            let kj = &k[(start + j) * kv_rs + kv * d..][..d];
                            let dot: f64 =
                                qi.iter().zip(kj).map(|(&a, &b)| a as f64 * b as f64).sum();
                            dot * h.scale as f64
                        })
                        .collect();
                    let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for t in 0..d {
                        expected[(start + i) * q_rs + head * d + t] = (0..len)
                            .map(|j| e[j] / z * v[(start + j) * kv_rs + kv * d + t] as f64)
                            .sum();
                    }
                }
            }
            start += len;
        }
        expected
    }

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
        let expected = definition(&q, &k, &v, &segments, h);
        let check = |got: Vec<f32>| {
            for (&a, &b) in got.iter().zip(&expected) {
                assert!((a as f64 - b).abs() < 1e-5, "{a} vs {b}");
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
                Precision::F32,
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
        packed_attention(
            view(0),
            view(32),
            view(48),
            &segments,
            h,
            Precision::F32,
            &mut out,
        );
        check(out);
    }

    /// On AMX tiles in bf16: against the definition in `f64` within bf16's rounding of the
    /// queries, keys, probabilities and values (measured ≤ 4e-3 on values within ±1; 2e-2
    /// leaves a factor of 5, while a misplaced tile or unmasked padding key moves outputs by
    /// tenths), on segments that end inside a block and heads sharing key/value heads, with
    /// and without a spare core. Skipped (with a note) where AMX is not usable.
    #[test]
    fn bf16_tiles_match_the_definition() {
        if !amx::usable() {
            eprintln!("no usable AMX here (or OMNIVOICE_KERNEL_ISA caps it): nothing to test");
            return;
        }
        let h = Heads {
            heads: 4,
            kv_heads: 2,
            head_dim: 64,
            scale: 0.125,
        };
        let segments = [37, 5, 70];
        let n: usize = segments.iter().sum();
        let values = |len: usize, seed: usize| -> Vec<f32> {
            (0..len)
                .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0) - 1.0)
                .collect()
        };
        let (q, k, v) = (values(n * 256, 1), values(n * 128, 2), values(n * 128, 3));
        let expected = definition(&q, &k, &v, &segments, h);
        let run = || {
            let mut out = vec![f32::NAN; n * 256];
            let view = |data, stride| Strided { data, stride };
            let (q, k, v) = (view(&q, 256), view(&k, 128), view(&v, 128));
            packed_attention(q, k, v, &segments, h, Precision::Bf16, &mut out);
            let worst = out
                .iter()
                .zip(&expected)
                .map(|(&a, &b)| (a as f64 - b).abs())
                .fold(0f64, f64::max);
            assert!(worst < 2e-2, "{worst}");
            // Rounded to bf16, not computed in f32 after all.
            assert!(worst > 1e-4, "{worst}");
            eprintln!("bf16 tiles: largest error {worst:.2e}");
        };
        run();
        let _lending = crate::spare::lending_always();
        run();
    }
}
