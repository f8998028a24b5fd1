//! The text encoder's relative-position self-attention for CPU `f32`, without [T, T] copies.
//!
//! Written with tensor ops (as `crate::vits::text_encoder` states it), each layer builds
//! several [heads, T, T] tensors: the head-major copies of q, k and v, the band of relative
//! logits padded and shifted into place, the probabilities shifted back into a band. For a
//! long sentence (500 phoneme ids) those copies took as long as the products themselves, and
//! the text encoder runs before any audio can be sent. Here each head's scores are one matrix
//! product read with strides straight from the [B, H, T] layout the convolutions write; the
//! relative terms are added along the diagonal in place; and the output product writes
//! [B, H, T] directly. One [T, T] buffer serves every head.

use super::fast_math::softmax_in_place;
use super::gemm::product;
use super::tensor::is_cpu_f32;
use crate::spare::rows_in_parts;
use candle_core::{Device, Result, Tensor};

/// `out_i = Σ_j p_ij (v_j + e^V_(j−i))` with `p_i = softmax_j(q_i·k_j + q_i·e^K_(j−i))` per head.
///
/// `q`, `k`, `v` are [B, H, T] with H = `n_heads` × head_dim (q already scaled by
/// 1/√head_dim); `band_k`, `band_v` are [2r + 1, head_dim], row `r + (j − i)` for offset
/// j − i; `lengths[b]` is item b's length. Keys at or past the length are masked; a query
/// past it sees every key masked, which gives it the uniform average, as the tensor version
/// does. `None` when the tensors are not CPU `f32` (the caller then runs the tensor ops).
pub(crate) fn relative_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    band_k: &Tensor,
    band_v: &Tensor,
    n_heads: usize,
    lengths: &[usize],
) -> Result<Option<Tensor>> {
    if ![q, k, v, band_k, band_v].into_iter().all(is_cpu_f32) {
        return Ok(None);
    }
    let (b, h, t) = q.dims3()?;
    let (width, head_dim) = band_k.dims2()?;
    if k.dims3()? != (b, h, t)
        || v.dims3()? != (b, h, t)
        || band_v.dims2()? != (width, head_dim)
        || head_dim * n_heads != h
        || width % 2 == 0
        || lengths.len() != b
    {
        candle_core::bail!("relative attention: mismatched shapes");
    }
    // The [B, H, T] inputs are small next to the [T, T] work; plain copies keep this simple.
    let values = |x: &Tensor| x.flatten_all()?.to_vec1::<f32>();
    let (q, k, v) = (values(q)?, values(k)?, values(v)?);
    let (band_k, band_v) = (values(band_k)?, values(band_v)?);
    let mut out = vec![0f32; b * h * t];
    let per_head = head_dim * t;
    // Heads are independent: with a spare core, some of them are computed there.
    let work = b * h * t * t * 2;
    rows_in_parts(&mut out, per_head, 1, work, |heads, out| {
        let mut scratch = Scratch::new(t, width);
        for (i, out) in heads.zip(out.chunks_exact_mut(per_head)) {
            let at = i * per_head..(i + 1) * per_head;
            let head = Head {
                q: &q[at.clone()],
                k: &k[at.clone()],
                v: &v[at],
                band_k: &band_k,
                band_v: &band_v,
                head_dim,
                t,
                length: lengths[i / n_heads].min(t),
            };
            head.attend(out, &mut scratch);
        }
    });
    Ok(Some(Tensor::from_vec(out, (b, h, t), &Device::Cpu)?))
}

/// One head of one item, each matrix [head_dim, T] row-major (its slice of [B, H, T]).
struct Head<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    band_k: &'a [f32],
    band_v: &'a [f32],
    head_dim: usize,
    t: usize,
    length: usize,
}

/// Buffers reused across heads.
struct Scratch {
    /// Scores, then probabilities, [T, T] row-major (query i's row at i·T).
    p: Vec<f32>,
    /// Relative logits, then probabilities by offset, [T, 2r + 1].
    band: Vec<f32>,
}

impl Scratch {
    fn new(t: usize, width: usize) -> Self {
        Self {
            p: vec![0f32; t * t],
            band: vec![0f32; t * width],
        }
    }
}

impl Head<'_> {
    /// Writes this head's output, [head_dim, T], into `out`.
    fn attend(&self, out: &mut [f32], scratch: &mut Scratch) {
        let (t, d) = (self.t, self.head_dim);
        let width = self.band_k.len() / d;
        let r = width / 2;
        let (p, band) = (&mut scratch.p, &mut scratch.band);
        // Element (row, col) of an operand is at row·rs + col·cs; q, k and v are [d, T], so
        // "qᵀ" is q read with rs 1, cs T.
        // SAFETY: (for all four products) every operand view lies inside its slice — as
        // `relative_attention` and `Scratch::new` size them, q, k, v and out hold d·T values,
        // p T·T, band T·width, the bands width·d — and the destination never aliases an
        // input (distinct borrows).
        unsafe {
            // scores[i, j] = Σ_c q[c, i]·k[c, j]
            product(
                (t, t, d),
                (p.as_mut_ptr(), 1, t),
                false,
                (self.q.as_ptr(), t, 1),
                (self.k.as_ptr(), 1, t),
            );
            // band[i, c] = Σ_e q[e, i]·band_k[c, e]
            product(
                (t, width, d),
                (band.as_mut_ptr(), 1, width),
                false,
                (self.q.as_ptr(), t, 1),
                (self.band_k.as_ptr(), d, 1),
            );
        }
        for (i, row) in p.chunks_exact_mut(t).enumerate() {
            let relative = &mut band[i * width..(i + 1) * width];
            if i >= self.length {
                // Every key masked: the softmax of equal logits.
                row.fill(1.0 / t as f32);
            } else {
                for (c, &logit) in relative.iter().enumerate() {
                    if let Some(j) = (i + c).checked_sub(r).filter(|&j| j < t) {
                        row[j] += logit;
                    }
                }
                // A masked logit (−1e4) gets probability e^(−1e4 − max) = 0 in f32.
                softmax_in_place(&mut row[..self.length]);
                row[self.length..].fill(0.0);
            }
            // The probabilities by offset, zero where the offset leaves the sequence.
            for (c, slot) in relative.iter_mut().enumerate() {
                *slot = (i + c)
                    .checked_sub(r)
                    .filter(|&j| j < t)
                    .map_or(0.0, |j| row[j]);
            }
        }
        // SAFETY: as for the first two products: the views lie inside `v`, `p`, `band_v`,
        // `band` and `out` (sizes above), and `out` is a distinct borrow from every input.
        unsafe {
            // out[e, i] = Σ_j v[e, j]·p[i, j]
            product(
                (d, t, t),
                (out.as_mut_ptr(), 1, t),
                false,
                (self.v.as_ptr(), 1, t),
                (p.as_ptr(), t, 1),
            );
            // out[e, i] += Σ_c band_v[c, e]·band[i, c]
            product(
                (d, t, width),
                (out.as_mut_ptr(), 1, t),
                true,
                (self.band_v.as_ptr(), d, 1),
                (band.as_ptr(), width, 1),
            );
        }
    }
}
