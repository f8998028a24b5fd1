//! A direct (no im2col, no per-tap matrix product) kernel for dense stride-1 1-D convolutions.
//!
//! Running a convolution as one matrix product per kernel tap re-reads and re-writes the whole
//! output once per tap; for the decoder's narrow (32–128 channel) but very long signals that
//! traffic, not arithmetic, bounds the speed. This kernel instead keeps a block of output
//! (`rows` channels × a few vectors of samples) in registers while it streams over every input
//! channel and tap, so each output value is written once. The input is copied tile by tile into a
//! zero-padded buffer, which is also where an elementwise prologue (scale, LeakyReLU, mask) is
//! applied for free; the register block starts from the bias, residuals and (optionally) the
//! output's current value, so the decoder's `x + conv(LeakyReLU(x))` and a running sum over
//! residual blocks are one pass.
//!
//! Signals are read and written as [`Rows`] — a row stride apart, so a window of a longer signal
//! (the decoder's strips, see [`super::strips`]) needs no copy. The register blocks themselves,
//! one per instruction set, are in [`super::block`].

use std::ops::Range;

use super::block;
use super::rows::{Rows, RowsMut, SampleMap};
use crate::spare::{self, SharedOut};

/// Floats of weights (all output channels, a chunk of input channels) used per input pass
/// (~512 KiB, inside a 1 MiB L2; 128 KiB measured up to 10 % slower on the flow's 192 → 384).
const WEIGHT_CHUNK_FLOATS: usize = 128 * 1024;
/// Floats of packed input tile (~256 KiB, inside L2). Outputs are written once, in place, so
/// they need no tile of their own.
const TILE_FLOATS: usize = 64 * 1024;

/// Weights [C_out, C_in, K] regrouped as [C_out / rows][C_in][K][rows] (rows past C_out are
/// zero), so the kernel reads each block's weights front to back. `rows` is the register
/// block's height on this CPU.
pub(super) struct PackedWeights {
    data: Vec<f32>,
    c_out: usize,
    c_in: usize,
    taps: usize,
    rows: usize,
}

impl std::fmt::Debug for PackedWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedWeights")
            .field("c_out", &self.c_out)
            .field("c_in", &self.c_in)
            .field("taps", &self.taps)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl PackedWeights {
    /// Whether these were packed from a [c_out, c_in, taps] weight.
    pub fn has_shape(&self, c_out: usize, c_in: usize, taps: usize) -> bool {
        (self.c_out, self.c_in, self.taps) == (c_out, c_in, taps)
    }

    /// `w` is row-major [c_out, c_in, taps].
    pub fn new(w: &[f32], c_out: usize, c_in: usize, taps: usize) -> Self {
        Self::with_rows(w, c_out, c_in, taps, block::rows_for(c_out))
    }

    fn with_rows(w: &[f32], c_out: usize, c_in: usize, taps: usize, rows: usize) -> Self {
        assert_eq!(w.len(), c_out * c_in * taps);
        let blocks = c_out.div_ceil(rows);
        let mut data = vec![0f32; blocks * c_in * taps * rows];
        for co in 0..c_out {
            let (block, r) = (co / rows, co % rows);
            for ci in 0..c_in {
                for k in 0..taps {
                    data[((block * c_in + ci) * taps + k) * rows + r] =
                        w[(co * c_in + ci) * taps + k];
                }
            }
        }
        Self {
            data,
            c_out,
            c_in,
            taps,
            rows,
        }
    }

    /// Input channels `ci0..` of output block `block`.
    fn block_from(&self, block: usize, ci0: usize) -> &[f32] {
        let len = self.c_in * self.taps * self.rows;
        &self.data[block * len + ci0 * self.taps * self.rows..(block + 1) * len]
    }
}

/// The general form: `out[co, j] = (out[co, j] if accumulate) + bias[co] + Σ residuals[co, j] +
/// Σ_ci Σ_k w[co, ci, k] · map(x[ci, j + offset + k·dilation])` for `j < out.len`, with `x` read
/// as zero outside its `0..x.len` columns and the map's mask indexed like `x`'s columns.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv1d_rows(
    out: RowsMut<'_>,
    accumulate: bool,
    x: Rows<'_>,
    offset: isize,
    w: &PackedWeights,
    bias: &[f32],
    dilation: usize,
    map: &SampleMap<'_>,
    residuals: &[Rows<'_>],
) {
    let (c_in, c_out, taps, rows_per) = (w.c_in, w.c_out, w.taps, w.rows);
    let (l_in, l_out) = (x.len, out.len);
    assert!(x.holds(c_in) && x.len <= x.stride);
    assert!(out.holds(c_out));
    assert_eq!(bias.len(), c_out);
    assert!(residuals
        .iter()
        .all(|r| r.holds(c_out) && r.len == l_out && r.len <= r.stride));
    assert!(map.mask.is_none_or(|m| m.len() >= l_in));
    assert!(
        map.channels.is_none(),
        "the routing applies channel maps before the f32 kernels"
    );
    assert!(taps > 0 && dilation > 0);
    if l_out == 0 || c_out == 0 {
        return;
    }
    let kernel = block::pick(rows_per);
    let cols = kernel.cols;
    let span = dilation * (taps - 1);
    let tile = ((TILE_FLOATS / c_in).saturating_sub(span) / cols * cols).max(cols);
    let blocks = c_out.div_ceil(rows_per);
    let ci_chunk = (WEIGHT_CHUNK_FLOATS / (blocks * rows_per * taps))
        .max(8)
        .min(c_in);
    let out_len = out.data.len();
    let out_ptr = SharedOut::new(out.data);
    // Each output column is computed from the input alone, so column ranges are independent:
    // with a spare core, some of them are computed there.
    let columns = |range: Range<usize>| {
        // Packed input tile: C_in rows of the tile's columns rounded up to whole blocks, plus
        // span; a part narrower than a tile packs only its own columns.
        let tile = tile.min(range.len().div_ceil(cols) * cols);
        let row_len = tile + span;
        let out_ptr = out_ptr.get();
        let mut packed = vec![0f32; c_in * row_len];
        // The register block's starting values for a block cut short (last rows or columns).
        let mut edge = vec![0f32; rows_per * cols];
        for t0 in range.clone().step_by(tile) {
            let width = tile.min(range.end - t0);
            let padded_width = width.div_ceil(cols) * cols;
            // Input column read by packed column j is t0 + j + offset: columns before the signal
            // start and past its end are zero padding.
            let first = t0 as isize + offset;
            let j_lo = (-first).clamp(0, (padded_width + span) as isize) as usize;
            let j_hi = (l_in as isize - first).clamp(j_lo as isize, (padded_width + span) as isize)
                as usize;
            for (ci, row) in packed.chunks_exact_mut(row_len).enumerate() {
                row[..j_lo].fill(0.0);
                row[j_hi..padded_width + span].fill(0.0);
                let i_lo = (first + j_lo as isize) as usize;
                let i_hi = i_lo + (j_hi - j_lo);
                let src = &x.data[ci * x.stride..];
                map.apply_slice(&mut row[j_lo..j_hi], &src[i_lo..i_hi], i_lo);
            }
            // Input channels in chunks whose weights (all output channels) stay in L2; per chunk,
            // column blocks outside and channel blocks inside, so the input columns one block reads
            // stay in L1 while the weights stream through in order.
            for ci0 in (0..c_in).step_by(ci_chunk) {
                let chunk = ci_chunk.min(c_in - ci0);
                let first_chunk = ci0 == 0;
                for j0 in (0..width).step_by(cols) {
                    let n_cols = cols.min(width - j0);
                    let xs = &packed[ci0 * row_len + j0..];
                    for block in 0..blocks {
                        let co0 = block * rows_per;
                        let n_rows = rows_per.min(c_out - co0);
                        let weights = w.block_from(block, ci0);
                        let at = |stride: usize| co0 * stride + t0 + j0;
                        let args = block::Args {
                            weights,
                            x: xs,
                            x_stride: row_len,
                            c_in: chunk,
                            taps,
                            dilation,
                        };
                        if n_rows == rows_per && n_cols == cols {
                            let mut res = [(std::ptr::null(), 0); block::MAX_RESIDUALS];
                            let n_res = if first_chunk { residuals.len() } else { 0 };
                            assert!(n_res <= block::MAX_RESIDUALS);
                            for (dst, r) in res.iter_mut().zip(&residuals[..n_res]) {
                                let start = at(r.stride);
                                assert!(start + (rows_per - 1) * r.stride + cols <= r.data.len());
                                *dst = (r.data[start..].as_ptr(), r.stride);
                            }
                            let start = at(out.stride);
                            assert!(start + (rows_per - 1) * out.stride + cols <= out_len);
                            let init = block::Init {
                                bias: first_chunk.then(|| bias[co0..].as_ptr()),
                                residuals: &res[..n_res],
                                load_out: accumulate || !first_chunk,
                            };
                            // SAFETY: the block writes (and, with `load_out`, reads) rows_per rows
                            // of `cols` values `out.stride` apart from `start`, and reads residual
                            // rows likewise — all asserted in bounds above; `load_out` only reads
                            // values this call or the caller initialized. The weight and input
                            // bounds are asserted by `run` itself.
                            unsafe { kernel.run(&args, out_ptr.add(start), out.stride, &init) };
                        } else {
                            // A cut block runs on `edge`, filled with its starting values.
                            for r in 0..rows_per {
                                for j in 0..cols {
                                    edge[r * cols + j] = if r >= n_rows || j >= n_cols {
                                        0.0
                                    } else {
                                        let mut v = if accumulate || !first_chunk {
                                            let i = at(out.stride) + r * out.stride + j;
                                            assert!(i < out_len);
                                            // SAFETY: in bounds, and initialized as above.
                                            unsafe { out_ptr.add(i).read() }
                                        } else {
                                            0.0
                                        };
                                        if first_chunk {
                                            v += bias[co0 + r];
                                            for res in residuals {
                                                v += res.data[at(res.stride) + r * res.stride + j];
                                            }
                                        }
                                        v
                                    };
                                }
                            }
                            let init = block::Init {
                                bias: None,
                                residuals: &[],
                                load_out: true,
                            };
                            // SAFETY: `edge` holds rows_per rows of `cols` values.
                            unsafe { kernel.run(&args, edge.as_mut_ptr(), cols, &init) };
                            for r in 0..n_rows {
                                let start = at(out.stride) + r * out.stride;
                                assert!(start + n_cols <= out_len);
                                // SAFETY: in bounds; `edge` and `out` do not overlap.
                                unsafe {
                                    std::ptr::copy_nonoverlapping(
                                        edge[r * cols..].as_ptr(),
                                        out_ptr.add(start),
                                        n_cols,
                                    )
                                };
                            }
                        }
                    }
                }
            }
        }
    };
    let work = c_out * c_in * taps * l_out;
    spare::in_parts(l_out, cols, work, columns);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Straightforward reference: the definition, summed in f64.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        x: &[f32],
        l_in: usize,
        w: &[f32],
        c_out: usize,
        c_in: usize,
        taps: usize,
        bias: &[f32],
        residuals: &[&[f32]],
        padding: usize,
        dilation: usize,
        map: &SampleMap<'_>,
    ) -> Vec<f32> {
        let l_out = l_in + 2 * padding - dilation * (taps - 1);
        let mut out = vec![0f32; c_out * l_out];
        for co in 0..c_out {
            for t in 0..l_out {
                let mut s = bias[co] as f64
                    + residuals
                        .iter()
                        .map(|r| r[co * l_out + t] as f64)
                        .sum::<f64>();
                for ci in 0..c_in {
                    for k in 0..taps {
                        let i = (t + k * dilation) as isize - padding as isize;
                        if i >= 0 && (i as usize) < l_in {
                            let v = map.apply(x[ci * l_in + i as usize], i as usize);
                            s += w[(co * c_in + ci) * taps + k] as f64 * v as f64;
                        }
                    }
                }
                out[co * l_out + t] = s as f32;
            }
        }
        out
    }

    fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    fn worst(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max)
    }

    #[test]
    fn matches_the_definition_with_prologue_and_residual() {
        let mut rng = StdRng::seed_from_u64(3);
        // (c_in, c_out, l_in, taps, dilation, padding): decoder shapes (long enough for the wide
        // block), odd edges, one output row, a weight chunk split (c_in 768).
        let cases = [
            (32, 32, 1500, 7, 12, 36),
            (64, 64, 301, 5, 3, 6),
            (16, 7, 50, 3, 1, 1),
            (32, 1, 97, 7, 1, 3),
            (5, 9, 3, 7, 2, 6),
            (8, 8, 40, 1, 1, 0),
            (12, 8, 60, 3, 2, 0),
            (768, 24, 37, 3, 1, 1),
        ];
        for (i, &(c_in, c_out, l_in, taps, dilation, padding)) in cases.iter().enumerate() {
            let x = random(&mut rng, c_in * l_in);
            let w = random(&mut rng, c_out * c_in * taps);
            let bias = random(&mut rng, c_out);
            let l_out = l_in + 2 * padding - dilation * (taps - 1);
            let residual = random(&mut rng, c_out * l_out);
            let mask: Vec<f32> = (0..l_in).map(|t| (t < l_in * 2 / 3) as u8 as f32).collect();
            let maps = [
                SampleMap::IDENTITY,
                SampleMap {
                    scale: 1.0 / 3.0,
                    leaky_slope: Some(0.1),
                    mask: Some(&mask),
                    channels: None,
                },
            ];
            for map in &maps {
                let res: &[&[f32]] = if i % 2 == 0 { &[&residual] } else { &[] };
                let want = reference(
                    &x, l_in, &w, c_out, c_in, taps, &bias, res, padding, dilation, map,
                );
                let packed = PackedWeights::new(&w, c_out, c_in, taps);
                let mut got = vec![0f32; c_out * l_out];
                let res: Vec<Rows> = res.iter().map(|r| Rows::contiguous(r, l_out)).collect();
                conv1d_rows(
                    RowsMut::new(&mut got, l_out, l_out),
                    false,
                    Rows::contiguous(&x, l_in),
                    -(padding as isize),
                    &packed,
                    &bias,
                    dilation,
                    map,
                    &res,
                );
                let worst = worst(&got, &want);
                assert!(worst < 1e-4, "case {i}: max |diff| {worst}");
            }
        }
    }

    /// A window of a longer signal, strided rows, two residuals and accumulation: the same
    /// values as the whole-signal convolution restricted to the window.
    #[test]
    fn windows_of_strided_rows_match_the_whole_signal() {
        let mut rng = StdRng::seed_from_u64(11);
        let (c, len, taps, dilation) = (16, 700, 5, 3);
        let padding = dilation * (taps - 1) / 2;
        let x = random(&mut rng, c * len);
        let w = random(&mut rng, c * c * taps);
        let bias = random(&mut rng, c);
        let residual = random(&mut rng, c * len);
        let before = random(&mut rng, c * len);
        let map = SampleMap {
            scale: 0.5,
            leaky_slope: Some(0.1),
            mask: None,
            channels: None,
        };
        let want = reference(
            &x,
            len,
            &w,
            c,
            c,
            taps,
            &bias,
            &[&residual, &before],
            padding,
            dilation,
            &map,
        );
        let packed = PackedWeights::new(&w, c, c, taps);
        // Output columns 100..400 from input columns 90..430 (enough halo), written into a
        // copy of `before` in place.
        let (o0, o1, i0, i1) = (100, 400, 90, 430);
        let mut got = before.clone();
        let out = RowsMut::new(&mut got[o0..], len, o1 - o0);
        let input = Rows::contiguous(&x, len).window(i0, i1 - i0);
        let res = Rows::contiguous(&residual, len).window(o0, o1 - o0);
        conv1d_rows(
            out,
            true,
            input,
            o0 as isize - padding as isize - i0 as isize,
            &packed,
            &bias,
            dilation,
            &map,
            &[res],
        );
        for ch in 0..c {
            let row = ch * len;
            assert_eq!(
                &got[row..row + o0],
                &before[row..row + o0],
                "left of the window"
            );
            assert_eq!(&got[row + o1..row + len], &before[row + o1..row + len]);
            let diff = worst(&got[row + o0..row + o1], &want[row + o0..row + o1]);
            assert!(diff < 1e-4, "channel {ch}: {diff}");
        }
    }
}
