//! A direct (no im2col, no per-tap matrix product) kernel for dense stride-1 1-D convolutions.
//!
//! Running a convolution as one matrix product per kernel tap re-reads and re-writes the whole
//! output once per tap; for the decoder's narrow (32–128 channel) but very long signals that
//! traffic, not arithmetic, bounds the speed. This kernel instead keeps a small block of output
//! (`ROWS` channels × `COLS` samples) in registers while it streams over every input channel and
//! tap, so each output value is written once. The input is copied tile by tile into a zero-padded
//! buffer, which is also where an elementwise prologue (scale, LeakyReLU, mask) is applied for
//! free, and the output tile starts from the bias plus an optional residual — the decoder's
//! `x + conv(LeakyReLU(x))` becomes one pass.
//!
//! On x86-64 with AVX2 and FMA (checked at run time) the block runs on 256-bit FMAs; elsewhere a
//! portable loop computes the same sums.

/// Output channels per register block.
const ROWS: usize = 6;
/// Output samples per register block (two 8-float vectors): 6 × 2 accumulators, two input
/// vectors and a broadcast fit the 16 AVX2 registers without spilling (4 × 24 spilled one).
const COLS: usize = 16;
/// Floats of weights (all output channels, a chunk of input channels) used per input pass
/// (~128 KiB, inside L2).
const WEIGHT_CHUNK_FLOATS: usize = 32 * 1024;
/// Floats of packed input tile plus output tile worked on at once (~192 KiB, inside L2).
const TILE_FLOATS: usize = 48 * 1024;

/// What happens to each input value before the convolution sees it:
/// `v ↦ LeakyReLU(v · scale) · mask[t]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InputMap<'a> {
    pub scale: f32,
    /// Negative-side slope of a LeakyReLU, if any (0 ≤ slope ≤ 1).
    pub leaky_slope: Option<f32>,
    /// One weight per input sample (`l_in` values), shared by all channels.
    pub mask: Option<&'a [f32]>,
}

impl InputMap<'_> {
    #[cfg(test)]
    pub const IDENTITY: InputMap<'static> = InputMap {
        scale: 1.0,
        leaky_slope: None,
        mask: None,
    };

    /// `dst[j] = map(src[j])` for the samples starting at `t0`; one simple pass per step so
    /// each loop vectorizes.
    fn apply_slice(&self, dst: &mut [f32], src: &[f32], t0: usize) {
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = v * self.scale;
        }
        if let Some(slope) = self.leaky_slope {
            for d in dst.iter_mut() {
                *d = d.max(*d * slope);
            }
        }
        if let Some(mask) = self.mask {
            for (d, &m) in dst.iter_mut().zip(&mask[t0..]) {
                *d *= m;
            }
        }
    }

    #[cfg(test)]
    fn apply(&self, v: f32, t: usize) -> f32 {
        let v = v * self.scale;
        let v = match self.leaky_slope {
            Some(s) => v.max(v * s),
            None => v,
        };
        match self.mask {
            Some(m) => v * m[t],
            None => v,
        }
    }
}

/// Weights [C_out, C_in, K] regrouped as [C_out / ROWS][C_in][K][ROWS] (rows past C_out are zero),
/// so the kernel reads each block's weights front to back.
pub(crate) struct PackedWeights {
    data: Vec<f32>,
    c_out: usize,
    c_in: usize,
    taps: usize,
}

impl std::fmt::Debug for PackedWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedWeights")
            .field("c_out", &self.c_out)
            .field("c_in", &self.c_in)
            .field("taps", &self.taps)
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
        assert_eq!(w.len(), c_out * c_in * taps);
        let blocks = c_out.div_ceil(ROWS);
        let mut data = vec![0f32; blocks * c_in * taps * ROWS];
        for co in 0..c_out {
            let (block, r) = (co / ROWS, co % ROWS);
            for ci in 0..c_in {
                for k in 0..taps {
                    data[((block * c_in + ci) * taps + k) * ROWS + r] =
                        w[(co * c_in + ci) * taps + k];
                }
            }
        }
        Self {
            data,
            c_out,
            c_in,
            taps,
        }
    }

    fn block(&self, block: usize) -> &[f32] {
        let len = self.c_in * self.taps * ROWS;
        &self.data[block * len..(block + 1) * len]
    }
}

/// One batch item: `out[co, t] = bias[co] + Σ residuals[co, t] + Σ_ci Σ_k w[co, ci, k] ·
/// map(x[ci, t + k·dilation − padding])`, with `x` outside `0..l_in` read as zero. A negative
/// `padding` starts the output inside the signal (used by the transposed convolution's phases).
/// `x` is [C_in, l_in], `out` and each residual are [C_out, l_out], all row-major.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv1d(
    out: &mut [f32],
    l_out: usize,
    x: &[f32],
    l_in: usize,
    w: &PackedWeights,
    bias: &[f32],
    residuals: &[&[f32]],
    padding: isize,
    dilation: usize,
    map: &InputMap<'_>,
) {
    let (c_in, c_out, taps) = (w.c_in, w.c_out, w.taps);
    assert_eq!(x.len(), c_in * l_in);
    assert_eq!(out.len(), c_out * l_out);
    assert_eq!(bias.len(), c_out);
    assert!(residuals.iter().all(|r| r.len() == out.len()));
    assert!(map.mask.is_none_or(|m| m.len() == l_in));
    let span = dilation * (taps - 1);
    let tile = ((TILE_FLOATS / (c_in + c_out)).saturating_sub(span) / COLS * COLS).max(COLS);
    // Packed input tile: C_in rows of the tile's columns rounded up to whole blocks, plus span.
    let row_len = tile + span;
    let mut packed = vec![0f32; c_in * row_len];
    let fast = simd::available();
    let ci_chunk = (WEIGHT_CHUNK_FLOATS / (c_out.div_ceil(ROWS) * ROWS * taps))
        .max(8)
        .min(c_in);
    let mut block_out = [[0f32; COLS]; ROWS];
    for t0 in (0..l_out).step_by(tile) {
        let width = tile.min(l_out - t0);
        let padded_width = width.div_ceil(COLS) * COLS;
        // Input sample read by packed column j is t0 + j − padding: columns before the signal
        // start and past its end are zero padding.
        let first = t0 as isize - padding;
        let j_lo = (-first).clamp(0, (padded_width + span) as isize) as usize;
        let j_hi =
            (l_in as isize - first).clamp(j_lo as isize, (padded_width + span) as isize) as usize;
        for (ci, row) in packed.chunks_exact_mut(row_len).enumerate() {
            row[..j_lo].fill(0.0);
            row[j_hi..padded_width + span].fill(0.0);
            let i_lo = (first + j_lo as isize) as usize;
            let i_hi = i_lo + (j_hi - j_lo);
            map.apply_slice(
                &mut row[j_lo..j_hi],
                &x[ci * l_in + i_lo..ci * l_in + i_hi],
                i_lo,
            );
        }
        for co in 0..c_out {
            let row = &mut out[co * l_out + t0..co * l_out + t0 + width];
            row.fill(bias[co]);
            for r in residuals {
                let r = &r[co * l_out + t0..co * l_out + t0 + width];
                for (y, &v) in row.iter_mut().zip(r) {
                    *y += v;
                }
            }
        }
        // Input channels in chunks whose weights (all output channels) stay in L2; per chunk,
        // column blocks outside and channel blocks inside, so the input columns one block reads
        // stay in L1 while the weights stream through in order.
        for ci0 in (0..c_in).step_by(ci_chunk) {
            let chunk = ci_chunk.min(c_in - ci0);
            for j0 in (0..width).step_by(COLS) {
                let cols = COLS.min(width - j0);
                let xs = &packed[ci0 * row_len + j0..];
                for block in 0..c_out.div_ceil(ROWS) {
                    let weights = &w.block(block)[ci0 * taps * ROWS..(ci0 + chunk) * taps * ROWS];
                    let rows = ROWS.min(c_out - block * ROWS);
                    if fast {
                        // SAFETY: `available()` confirmed AVX2 and FMA. The block reads, for
                        // each input channel c < chunk, xs[c·row_len + k·dilation + 0..COLS]
                        // with k ≤ taps − 1, i.e. packed[(ci0 + c)·row_len + j0 + ..]: since
                        // j0 + COLS ≤ padded_width, the last index is below
                        // (ci0 + c)·row_len + padded_width + span ≤ (ci0 + c + 1)·row_len,
                        // inside `packed`. `weights` holds chunk·taps·ROWS values. (`block`
                        // asserts both bounds itself before reading.)
                        unsafe {
                            simd::block(
                                weights,
                                xs,
                                row_len,
                                chunk,
                                taps,
                                dilation,
                                rows,
                                &mut block_out,
                            )
                        };
                    } else {
                        portable_block(weights, xs, row_len, chunk, taps, dilation, &mut block_out);
                    }
                    for (r, acc) in block_out.iter().enumerate().take(rows) {
                        let start = (block * ROWS + r) * l_out + t0 + j0;
                        for (y, &v) in out[start..start + cols].iter_mut().zip(acc) {
                            *y += v;
                        }
                    }
                }
            }
        }
    }
}

/// `out[r][j] = Σ_ci Σ_k weights[(ci·taps + k)·ROWS + r] · x[ci·x_stride + j + k·dilation]`.
fn portable_block(
    weights: &[f32],
    x: &[f32],
    x_stride: usize,
    c_in: usize,
    taps: usize,
    dilation: usize,
    out: &mut [[f32; COLS]; ROWS],
) {
    *out = [[0.0; COLS]; ROWS];
    let mut w = weights.chunks_exact(ROWS);
    for ci in 0..c_in {
        for k in 0..taps {
            let wk = w.next().expect("weights hold c_in · taps blocks");
            let xs = &x[ci * x_stride + k * dilation..][..COLS];
            for (acc, &wr) in out.iter_mut().zip(wk) {
                for (a, &v) in acc.iter_mut().zip(xs) {
                    *a += wr * v;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use super::{COLS, ROWS};
    use std::arch::x86_64::*;

    /// 8-float vectors per block row.
    const VECS: usize = COLS / 8;

    pub fn available() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// The AVX2/FMA version of [`super::portable_block`], computing only the first `rows`
    /// output rows (the last block of a channel count that is not a multiple of ROWS).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `weights` must hold `c_in·taps·ROWS` values and `x`
    /// must be readable at `ci·x_stride + k·dilation + 0..COLS` for every ci < c_in, k < taps.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn block(
        weights: &[f32],
        x: &[f32],
        x_stride: usize,
        c_in: usize,
        taps: usize,
        dilation: usize,
        rows: usize,
        out: &mut [[f32; COLS]; ROWS],
    ) {
        // Checked here, once per block, so the pointer arithmetic below stays in bounds whatever
        // the caller computed.
        assert!(c_in > 0 && taps > 0 && rows <= ROWS);
        assert!(weights.len() >= c_in * taps * ROWS);
        assert!(x.len() >= (c_in - 1) * x_stride + (taps - 1) * dilation + COLS);
        let args = (weights, x, x_stride, c_in, taps, dilation);
        match rows {
            1 => rows_block::<1>(args, out),
            2 => rows_block::<2>(args, out),
            3 => rows_block::<3>(args, out),
            4 => rows_block::<4>(args, out),
            5 => rows_block::<5>(args, out),
            _ => rows_block::<ROWS>(args, out),
        }
    }

    /// [`block`] for R ≤ ROWS rows; safety requirements as there.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows_block<const R: usize>(
        (weights, x, x_stride, c_in, taps, dilation): (&[f32], &[f32], usize, usize, usize, usize),
        out: &mut [[f32; COLS]; ROWS],
    ) {
        let mut acc = [[_mm256_setzero_ps(); VECS]; R];
        let mut wp = weights.as_ptr();
        for ci in 0..c_in {
            let row = x.as_ptr().add(ci * x_stride);
            for k in 0..taps {
                let xs = row.add(k * dilation);
                let xv: [__m256; VECS] = std::array::from_fn(|v| _mm256_loadu_ps(xs.add(8 * v)));
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let w = _mm256_broadcast_ss(&*wp.add(r));
                    for (a, &xv) in acc_r.iter_mut().zip(&xv) {
                        *a = _mm256_fmadd_ps(w, xv, *a);
                    }
                }
                wp = wp.add(ROWS);
            }
        }
        for (dst, acc_r) in out.iter_mut().zip(&acc) {
            for (v, a) in acc_r.iter().enumerate() {
                _mm256_storeu_ps(dst.as_mut_ptr().add(8 * v), *a);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    use super::{COLS, ROWS};

    pub fn available() -> bool {
        false
    }

    /// Never called: `available()` is false off x86-64.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn block(
        weights: &[f32],
        x: &[f32],
        x_stride: usize,
        c_in: usize,
        taps: usize,
        dilation: usize,
        _rows: usize,
        out: &mut [[f32; COLS]; ROWS],
    ) {
        super::portable_block(weights, x, x_stride, c_in, taps, dilation, out)
    }
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
        map: &InputMap<'_>,
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

    #[test]
    fn matches_the_definition_with_prologue_and_residual() {
        let mut rng = StdRng::seed_from_u64(3);
        // (c_in, c_out, l_in, taps, dilation, padding): decoder shapes, odd edges, one output row.
        let cases = [
            (32, 32, 700, 7, 12, 36),
            (64, 64, 301, 5, 3, 6),
            (16, 7, 50, 3, 1, 1),
            (32, 1, 97, 7, 1, 3),
            (5, 9, 3, 7, 2, 6),
            (8, 8, 40, 1, 1, 0),
            (12, 8, 60, 3, 2, 0),
        ];
        for (i, &(c_in, c_out, l_in, taps, dilation, padding)) in cases.iter().enumerate() {
            let x = random(&mut rng, c_in * l_in);
            let w = random(&mut rng, c_out * c_in * taps);
            let bias = random(&mut rng, c_out);
            let l_out = l_in + 2 * padding - dilation * (taps - 1);
            let residual = random(&mut rng, c_out * l_out);
            let mask: Vec<f32> = (0..l_in).map(|t| (t < l_in * 2 / 3) as u8 as f32).collect();
            let maps = [
                InputMap::IDENTITY,
                InputMap {
                    scale: 1.0 / 3.0,
                    leaky_slope: Some(0.1),
                    mask: Some(&mask),
                },
            ];
            for map in &maps {
                let res: &[&[f32]] = if i % 2 == 0 { &[&residual] } else { &[] };
                let want = reference(
                    &x, l_in, &w, c_out, c_in, taps, &bias, res, padding, dilation, map,
                );
                let packed = PackedWeights::new(&w, c_out, c_in, taps);
                let mut got = vec![0f32; c_out * l_out];
                conv1d(
                    &mut got,
                    l_out,
                    &x,
                    l_in,
                    &packed,
                    &bias,
                    res,
                    padding as isize,
                    dilation,
                    map,
                );
                let worst = got
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(worst < 1e-4, "case {i}: max |diff| {worst}");
            }
        }
    }

    #[test]
    fn portable_block_agrees_with_the_vector_block() {
        if !simd::available() {
            return;
        }
        let mut rng = StdRng::seed_from_u64(5);
        let (c_in, taps, dilation, stride) = (6, 3, 2, 40);
        let weights = random(&mut rng, c_in * taps * ROWS);
        let x = random(&mut rng, c_in * stride);
        let mut a = [[0f32; COLS]; ROWS];
        portable_block(&weights, &x, stride, c_in, taps, dilation, &mut a);
        for rows in 1..=ROWS {
            let mut b = [[f32::NAN; COLS]; ROWS];
            // SAFETY: AVX2/FMA checked above; x rows are 40 ≥ (taps − 1)·dilation + COLS long.
            unsafe { simd::block(&weights, &x, stride, c_in, taps, dilation, rows, &mut b) };
            for (ra, rb) in a.iter().zip(&b).take(rows) {
                for (va, vb) in ra.iter().zip(rb) {
                    assert!((va - vb).abs() < 1e-5, "{rows} rows: {va} vs {vb}");
                }
            }
        }
    }
}
