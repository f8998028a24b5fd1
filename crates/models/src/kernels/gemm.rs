//! The per-tap matrix-product path: convolutions written as one `gemm` per kernel tap.
//!
//! Pointwise convolutions, grouped ones with several input channels per group, and transposed
//! convolutions over short inputs run here: each tap's (output × input channel) matrix times a
//! shifted window of the input, accumulated over column tiles that stay in cache, with zero
//! padding handled by clipping each tap's column range (no padded copy). Depthwise
//! convolutions (one input channel per group) are too little work per tap for a product and
//! run as a direct loop. Everything runs on the caller's thread (`Parallelism::None`).

use super::shape::{Conv1dShape, ConvTranspose1dShape};
use super::tensor::{bias_or_zero, with_contiguous_f32};
use crate::spare;
use ::gemm::{gemm, Parallelism};
use candle_core::{Result, Tensor};

/// Floats of output tile plus input slab worked on at once: about 256 KiB, so both stay in
/// L2 while every kernel tap passes over them.
const TILE_FLOATS: usize = 64 * 1024;

/// Output columns per tile for a product with `rows` output and `cols` input channels.
fn tile_columns(rows: usize, cols: usize) -> usize {
    (TILE_FLOATS / (rows + cols)).clamp(64, 8192)
}

/// Reorders a row-major [A, B, K] weight tensor so each tap k is one row-major matrix:
/// [K, A, B], or [K, B, A] when `swap` (for the transposed convolution's [C_in, C_out, K]).
/// One pass over the weights; small next to the convolution itself.
fn taps_first(w: &[f32], a: usize, b: usize, taps: usize, swap: bool) -> Vec<f32> {
    let mut out = vec![0f32; w.len()];
    for (ia, rows) in w.chunks_exact(b * taps).enumerate() {
        for (ib, row) in rows.chunks_exact(taps).enumerate() {
            let at = if swap { ib * a + ia } else { ia * b + ib };
            for (k, &v) in row.iter().enumerate() {
                out[k * a * b + at] = v;
            }
        }
    }
    out
}

/// One kernel tap of a convolution written as a matrix product: output column `t` receives
/// `weights · x[:, t + shift]` where the input column exists.
#[derive(Clone, Copy)]
struct Tap<'a> {
    /// A (output channel × input channel) matrix starting at `weights[0]`, element (r, c) at
    /// `r · row_stride + c · col_stride` (see [`TapWeights`] for the two layouts used).
    weights: &'a [f32],
    row_stride: usize,
    col_stride: usize,
    shift: isize,
}

impl<'a> Tap<'a> {
    /// The same tap's matrix from output channel `row` on.
    fn starting_at_row(&self, row: usize) -> Tap<'a> {
        Tap {
            weights: &self.weights[row * self.row_stride..],
            ..*self
        }
    }
}

/// `dst[:, t - t0] += Σ_taps tap.weights · x[:, t + tap.shift]` for `t` in `t0..t1`, where
/// `x` has `cols` rows of `x_len` columns (stride `x_len`) and `dst` has `rows` rows of stride
/// `dst_stride`. Input columns outside `0..x_len` count as zero (the convolution's padding).
#[allow(clippy::too_many_arguments)]
fn accumulate_taps(
    dst: &mut [f32],
    dst_stride: usize,
    t0: usize,
    t1: usize,
    x: &[f32],
    x_len: usize,
    rows: usize,
    cols: usize,
    taps: &[Tap<'_>],
) {
    assert!(rows > 0 && cols > 0 && t0 <= t1);
    assert!(dst.len() >= (rows - 1) * dst_stride + (t1 - t0));
    assert!(x.len() >= cols * x_len);
    for tap in taps {
        assert!(tap.weights.len() > (rows - 1) * tap.row_stride + (cols - 1) * tap.col_stride);
        // Output columns whose input column t + shift lies inside 0..x_len.
        let lo = (t0 as isize).max(-tap.shift);
        let hi = (t1 as isize).min(x_len as isize - tap.shift);
        if lo >= hi {
            continue;
        }
        let (lo, n) = (lo as usize, (hi - lo) as usize);
        let x_start = (lo as isize + tap.shift) as usize;
        // SAFETY: gemm reads the `rows × cols` weight view (its last element is in bounds,
        // checked above), the input block of `cols` rows × columns x_start..x_start + n
        // (x_start + n ≤ x_len by the clipping above, and x holds cols · x_len values), and
        // reads/writes the `rows × n` destination block at column lo − t0
        // (lo − t0 + n ≤ t1 − t0, checked against dst.len() above). The three
        // regions come from distinct borrows, so the destination aliases neither input.
        unsafe {
            product(
                (rows, n, cols),
                (dst.as_mut_ptr().add(lo - t0), 1, dst_stride),
                true,
                (tap.weights.as_ptr(), tap.col_stride, tap.row_stride),
                (x.as_ptr().add(x_start), 1, x_len),
            );
        }
    }
}

/// `dst (+)= lhs · rhs` for an (m × n) destination and inner size k, each operand given as
/// (pointer, column stride, row stride); `accumulate` keeps what `dst` holds.
///
/// # Safety
/// Each view must lie inside its allocation, and `dst` must not overlap `lhs` or `rhs`.
pub(super) unsafe fn product(
    (m, n, k): (usize, usize, usize),
    (dst, dst_cs, dst_rs): (*mut f32, usize, usize),
    accumulate: bool,
    (lhs, lhs_cs, lhs_rs): (*const f32, usize, usize),
    (rhs, rhs_cs, rhs_rs): (*const f32, usize, usize),
) {
    // SAFETY: the caller's promise.
    unsafe {
        gemm(
            m,
            n,
            k,
            dst,
            dst_cs as isize,
            dst_rs as isize,
            accumulate,
            lhs,
            lhs_cs as isize,
            lhs_rs as isize,
            rhs,
            rhs_cs as isize,
            rhs_rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            Parallelism::None,
        )
    }
}

/// Below this many output columns per call, gemm reads the weights in the caller's layout
/// (packing them itself, once per call); above it, repacking every tap into one contiguous
/// matrix once per call is cheaper than gemm re-packing strided taps for every column tile.
const REPACK_MIN_COLUMNS: usize = 1024;

/// Where each tap's (output × input channel) matrix lives: the caller's weight layout read
/// with strides, or a `taps_first` copy.
enum TapWeights<'a> {
    Original(&'a [f32]),
    Packed(Vec<f32>),
}

/// A stride-1 grouped convolution: one product per tap and group, or the depthwise loop when
/// groups have one input channel each.
pub(super) fn conv1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    s: &Conv1dShape,
) -> Result<Tensor> {
    let c_in_g = s.c_in / s.groups;
    let bias = bias_or_zero(bias, s.c_out)?;
    let mut out = vec![0f32; s.batch * s.c_out * s.l_out];
    // weights: [C_out, C_in/groups, K] row-major.
    with_contiguous_f32(weight, |raw| {
        let weights = if c_in_g > 1 && s.l_out >= REPACK_MIN_COLUMNS {
            TapWeights::Packed(taps_first(raw, s.c_out, c_in_g, s.taps, false))
        } else {
            TapWeights::Original(raw)
        };
        with_contiguous_f32(x, |x| {
            for b in 0..s.batch {
                let x_b = &x[b * s.c_in * s.l_in..(b + 1) * s.c_in * s.l_in];
                let out_b = &mut out[b * s.c_out * s.l_out..(b + 1) * s.c_out * s.l_out];
                if c_in_g == 1 {
                    depthwise(out_b, x_b, raw, &bias, s);
                } else {
                    grouped_gemm(out_b, x_b, &weights, &bias, s);
                }
            }
        })
    })??;
    Tensor::from_vec(out, (s.batch, s.c_out, s.l_out), x.device())
}

/// One batch item of a convolution with several input channels per group.
fn grouped_gemm(
    out: &mut [f32],
    x: &[f32],
    weights: &TapWeights<'_>,
    bias: &[f32],
    s: &Conv1dShape,
) {
    let c_in_g = s.c_in / s.groups;
    let c_out_g = s.c_out / s.groups;
    let tile = tile_columns(c_out_g, c_in_g);
    let group_weights = c_out_g * c_in_g;
    for g in 0..s.groups {
        let x_g = &x[g * c_in_g * s.l_in..(g + 1) * c_in_g * s.l_in];
        let out_g = &mut out[g * c_out_g * s.l_out..(g + 1) * c_out_g * s.l_out];
        let taps: Vec<Tap> = (0..s.taps)
            .map(|k| {
                let shift = (k * s.dilation) as isize - s.padding as isize;
                match weights {
                    // [C_out, C_in/groups, K]
                    TapWeights::Original(w) => Tap {
                        weights: &w[g * group_weights * s.taps + k..],
                        row_stride: c_in_g * s.taps,
                        col_stride: s.taps,
                        shift,
                    },
                    // [K, C_out, C_in/groups]
                    TapWeights::Packed(w) => {
                        let start = (k * s.groups + g) * group_weights;
                        Tap {
                            weights: &w[start..start + group_weights],
                            row_stride: c_in_g,
                            col_stride: 1,
                            shift,
                        }
                    }
                }
            })
            .collect();
        // Output channels are independent: with a spare core, some of them are computed there.
        // In whole 64-row blocks (gemm's widest register block); gemm still picks its own
        // blocking of the sums from the part's shape, so a part's values can differ from the
        // whole call's in the last bits.
        let work = c_out_g * c_in_g * s.taps * s.l_out;
        spare::rows_in_parts(out_g, s.l_out, 64, work, |rows, out_rows| {
            let taps: Vec<Tap> = taps
                .iter()
                .map(|tap| tap.starting_at_row(rows.start))
                .collect();
            let bias = &bias[g * c_out_g + rows.start..];
            for t0 in (0..s.l_out).step_by(tile) {
                let t1 = (t0 + tile).min(s.l_out);
                for (row, &b) in out_rows.chunks_exact_mut(s.l_out).zip(bias) {
                    row[t0..t1].fill(b);
                }
                accumulate_taps(
                    &mut out_rows[t0..],
                    s.l_out,
                    t0,
                    t1,
                    x_g,
                    s.l_in,
                    rows.len(),
                    c_in_g,
                    &taps,
                );
            }
        });
    }
}

/// One batch item of a convolution with one input channel per group: each output channel is
/// a short filter over one input row, too little work for a matrix product. `weights` is
/// [C_out, 1, K].
fn depthwise(out: &mut [f32], x: &[f32], weights: &[f32], bias: &[f32], s: &Conv1dShape) {
    let c_out_g = s.c_out / s.groups;
    for (co, row) in out.chunks_exact_mut(s.l_out).enumerate() {
        let x_row = &x[(co / c_out_g) * s.l_in..][..s.l_in];
        row.fill(bias[co]);
        for k in 0..s.taps {
            let w = weights[co * s.taps + k];
            let shift = (k * s.dilation) as isize - s.padding as isize;
            let lo = 0isize.max(-shift);
            let hi = (s.l_out as isize).min(s.l_in as isize - shift);
            if lo >= hi {
                continue;
            }
            let (lo, hi) = (lo as usize, hi as usize);
            let x_lo = (lo as isize + shift) as usize;
            for (y, &v) in row[lo..hi].iter_mut().zip(&x_row[x_lo..]) {
                *y += w * v;
            }
        }
    }
}

/// Output position j = q·stride + r − padding (phase r) collects the taps k = r + m·stride
/// from input i = q − m, so each phase is an ordinary convolution over q with kernel taps
/// m = 0, 1, …; phases are computed into a tile and interleaved into the output.
pub(super) fn conv_transpose1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    s: &ConvTranspose1dShape,
) -> Result<Tensor> {
    let bias = bias_or_zero(bias, s.c_out)?;
    // [C_in, C_out, K] → [K, C_out, C_in]: each tap's (output × input channel) matrix
    // contiguous.
    let tap_len = s.c_out * s.c_in;
    let tile = tile_columns(s.c_out, s.c_in);
    let mut out = vec![0f32; s.batch * s.c_out * s.l_out];
    let mut phase_tile = vec![0f32; s.c_out * tile];
    let (stride, padding) = (s.stride as isize, s.padding as isize);
    // weights: [C_in, C_out, K] row-major.
    with_contiguous_f32(weight, |raw| {
        let weights = if s.l_in >= REPACK_MIN_COLUMNS {
            TapWeights::Packed(taps_first(raw, s.c_in, s.c_out, s.taps, true))
        } else {
            TapWeights::Original(raw)
        };
        with_contiguous_f32(x, |x| {
            for b in 0..s.batch {
                let x_b = &x[b * s.c_in * s.l_in..(b + 1) * s.c_in * s.l_in];
                let out_b = &mut out[b * s.c_out * s.l_out..(b + 1) * s.c_out * s.l_out];
                for r in 0..s.stride {
                    // q range with 0 ≤ q·stride + r − padding < l_out.
                    let q_lo = (padding - r as isize).div_euclid(stride)
                        + ((padding - r as isize).rem_euclid(stride) != 0) as isize;
                    let q_hi =
                        (s.l_out as isize + padding - r as isize + stride - 1).div_euclid(stride);
                    // Columns are indexed phase-locally, t = q − q_lo, so tap m reads input
                    // i = q − m = t + q_lo − m.
                    let taps: Vec<Tap> = (r..s.taps)
                        .step_by(s.stride)
                        .enumerate()
                        .map(|(m, k)| {
                            let shift = q_lo - m as isize;
                            match &weights {
                                // [C_in, C_out, K]
                                TapWeights::Original(w) => Tap {
                                    weights: &w[k..],
                                    row_stride: s.taps,
                                    col_stride: s.c_out * s.taps,
                                    shift,
                                },
                                // [K, C_out, C_in]
                                TapWeights::Packed(w) => Tap {
                                    weights: &w[k * tap_len..(k + 1) * tap_len],
                                    row_stride: s.c_in,
                                    col_stride: 1,
                                    shift,
                                },
                            }
                        })
                        .collect();
                    let n_q = (q_hi - q_lo).max(0) as usize;
                    for t0 in (0..n_q).step_by(tile) {
                        let t1 = (t0 + tile).min(n_q);
                        let width = t1 - t0;
                        for (row, &bv) in phase_tile.chunks_exact_mut(tile).zip(&bias) {
                            row[..width].fill(bv);
                        }
                        accumulate_taps(
                            &mut phase_tile,
                            tile,
                            t0,
                            t1,
                            x_b,
                            s.l_in,
                            s.c_out,
                            s.c_in,
                            &taps,
                        );
                        let j0 = ((t0 as isize + q_lo) * stride + r as isize - padding) as usize;
                        for (out_row, row) in out_b
                            .chunks_exact_mut(s.l_out)
                            .zip(phase_tile.chunks_exact(tile))
                        {
                            let out_phase = out_row[j0..].iter_mut().step_by(s.stride);
                            for (y, &v) in out_phase.zip(&row[..width]) {
                                *y = v;
                            }
                        }
                    }
                }
            }
        })
    })??;
    Tensor::from_vec(out, (s.batch, s.c_out, s.l_out), x.device())
}
