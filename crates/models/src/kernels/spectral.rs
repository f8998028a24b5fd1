//! Wide convolutions as products of spectra: overlap-save FFTs and one complex matrix
//! product per frequency bin.
//!
//! A dense convolution costs `C_out · C_in · K` multiply-adds per output sample however it is
//! scheduled, and on a CPU with only AVX2 the direct kernel already runs near its `f32` peak.
//! Kokoro's generator spends most of its time in 11-tap residual convolutions (128 and 256
//! channels, over the audio-rate signal), where going to the frequency domain needs far fewer
//! operations: a block of `M = N − K + 1` outputs per `N`-point transform costs
//! `4 · C_out · C_in · (N/2 + 1)` real multiply-adds, so about `2.4 · C_out · C_in` per sample at
//! `N = 64` instead of `11 · C_out · C_in`, plus transforms that grow only with the channel
//! count. Unlike Winograd's small-tile algorithms the transforms are orthogonal, so the sums
//! stay as accurate as `f32` direct sums (≈ 1e-6 relative, tested below).
//!
//! A dilation `d` splits the signal into `d` phases (every `d`-th sample), each a dense
//! convolution of its own. Every (phase, block) is one column of the per-bin products, so one
//! product per bin covers a whole part of the signal. The price is memory: a layer keeps
//! `(N/2 + 1)` complex matrices instead of `K` real ones (6× the weights at `N = 64`), which
//! is why only layers that ask for it ([`super::PackedWeightCache::spectral`]) and are wide
//! enough to gain ([`worth_it`]) are packed this way.

use std::ops::Range;
use std::sync::Arc;

use ::gemm::{c32, gemm, Parallelism};
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use super::rows::{Rows, RowsMut, SampleMap};
use crate::spare::{self, SharedOut};

/// Columns (phase blocks) per matrix product: wide enough for the product to run near its
/// peak, small enough that a part's spectra (`(N/2 + 1) · C · COLUMNS` complex values in and
/// out) stay in L2/L3.
const COLUMNS: usize = 64;

/// Whether a layer of this shape runs faster through its spectra than through the direct
/// kernel: measured (`benches/conv.rs`, `spectral`) to pay from 11 taps at 128 channels, and
/// not at 7 taps or 64 channels.
pub(super) fn worth_it(c_out: usize, c_in: usize, taps: usize) -> bool {
    taps >= 9 && c_out >= 128 && c_in >= 128
}

/// The transform length for a layer: wider layers spend relatively more in the products, which
/// shorter transforms (fewer bins per output) favour.
fn transform_len(c_out: usize, c_in: usize, taps: usize) -> usize {
    let n = if c_out.max(c_in) >= 256 { 32 } else { 64 };
    n.max((2 * taps).next_power_of_two())
}

/// A layer's weights as spectra: for each bin, the [C_out, C_in] complex matrix of the
/// reversed, zero-padded kernels' real FFTs, with the inverse transform's 1/N folded in.
pub(super) struct SpectralWeights {
    /// [bins][c_out][c_in]
    spectra: Vec<c32>,
    c_out: usize,
    c_in: usize,
    taps: usize,
    n: usize,
    forward: Arc<dyn RealToComplex<f32>>,
    inverse: Arc<dyn ComplexToReal<f32>>,
}

impl std::fmt::Debug for SpectralWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpectralWeights")
            .field("c_out", &self.c_out)
            .field("c_in", &self.c_in)
            .field("taps", &self.taps)
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl SpectralWeights {
    /// `w` is row-major [c_out, c_in, taps].
    pub fn new(w: &[f32], c_out: usize, c_in: usize, taps: usize) -> Self {
        Self::with_len(w, c_out, c_in, taps, transform_len(c_out, c_in, taps))
    }

    fn with_len(w: &[f32], c_out: usize, c_in: usize, taps: usize, n: usize) -> Self {
        assert_eq!(w.len(), c_out * c_in * taps);
        assert!(taps > 0 && n >= 2 * taps);
        let mut planner = RealFftPlanner::<f32>::new();
        let (forward, inverse) = (planner.plan_fft_forward(n), planner.plan_fft_inverse(n));
        let bins = n / 2 + 1;
        let mut spectra = vec![c32::new(0.0, 0.0); bins * c_out * c_in];
        let (mut kernel, mut spectrum) = (forward.make_input_vec(), forward.make_output_vec());
        let mut scratch = forward.make_scratch_vec();
        for (row, taps_of) in w.chunks_exact(taps).enumerate() {
            // Reversed, so that the circular convolution's sample m + K − 1 is the correlation
            // Σ_k w[k] · x[m + k] the layer computes.
            kernel.fill(0.0);
            for (k, &v) in taps_of.iter().enumerate() {
                kernel[taps - 1 - k] = v;
            }
            forward
                .process_with_scratch(&mut kernel, &mut spectrum, &mut scratch)
                .expect("buffers made by the plan");
            for (bin, &v) in spectrum.iter().enumerate() {
                spectra[bin * c_out * c_in + row] = v / n as f32;
            }
        }
        Self {
            spectra,
            c_out,
            c_in,
            taps,
            n,
            forward,
            inverse,
        }
    }

    pub fn has_shape(&self, c_out: usize, c_in: usize, taps: usize) -> bool {
        (self.c_out, self.c_in, self.taps) == (c_out, c_in, taps)
    }
}

/// One column of the per-bin products: output samples `phase + d·(first + m)` for `m < M`
/// (those below the output's length).
#[derive(Clone, Copy)]
struct Column {
    phase: usize,
    first: usize,
}

/// The same definition as [`super::direct::conv1d_rows`]: `out[co, j] = (out[co, j] if
/// accumulate) + bias[co] + Σ residuals[co, j] + Σ_ci Σ_k w[co, ci, k] · map(x[ci, j + offset
/// + k·dilation])`, `x` read as zero outside its `0..x.len` columns.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv1d_rows(
    out: RowsMut<'_>,
    accumulate: bool,
    x: Rows<'_>,
    offset: isize,
    w: &SpectralWeights,
    bias: &[f32],
    dilation: usize,
    map: &SampleMap<'_>,
    residuals: &[Rows<'_>],
) {
    let (c_in, c_out, taps, n) = (w.c_in, w.c_out, w.taps, w.n);
    let (l_in, l_out) = (x.len, out.len);
    assert!(x.holds(c_in) && x.len <= x.stride);
    assert!(out.holds(c_out));
    assert_eq!(bias.len(), c_out);
    assert!(residuals
        .iter()
        .all(|r| r.holds(c_out) && r.len == l_out && r.len <= r.stride));
    assert!(map.mask.is_none_or(|m| m.len() >= l_in));
    assert!(dilation > 0);
    if l_out == 0 || c_out == 0 {
        return;
    }
    let m = n - taps + 1;
    let bins = n / 2 + 1;
    // Phase p holds output samples p, p + d, …: ⌈(l_out − p) / d⌉ of them, in blocks of M.
    let columns: Vec<Column> = (0..dilation.min(l_out))
        .flat_map(|phase| {
            let len = (l_out - phase).div_ceil(dilation);
            (0..len.div_ceil(m)).map(move |b| Column {
                phase,
                first: b * m,
            })
        })
        .collect();
    let (out_stride, out_len) = (out.stride, out.data.len());
    let out_ptr = SharedOut::new(out.data);
    let part = |range: Range<usize>| {
        let out_ptr = out_ptr.get();
        let (mut signal, mut spectrum) = (w.forward.make_input_vec(), w.forward.make_output_vec());
        let mut scratch = w.forward.make_scratch_vec();
        let mut inverse_scratch = w.inverse.make_scratch_vec();
        let mut spectra_in = vec![c32::new(0.0, 0.0); bins * c_in * COLUMNS];
        let mut spectra_out = vec![c32::new(0.0, 0.0); bins * c_out * COLUMNS];
        for group in columns[range].chunks(COLUMNS) {
            let cols = group.len();
            // Each input row's segments, transformed: [bins][c_in][cols].
            for ci in 0..c_in {
                let row = &x.data[ci * x.stride..];
                for (c, col) in group.iter().enumerate() {
                    // Segment sample s reads input column phase + offset + d·(first + s).
                    let start = (col.phase + dilation * col.first) as isize + offset;
                    for (s, v) in signal.iter_mut().enumerate() {
                        let i = start + (dilation * s) as isize;
                        *v = if i >= 0 && (i as usize) < l_in {
                            let i = i as usize;
                            let mut v = row[i] * map.scale;
                            if let Some(slope) = map.leaky_slope {
                                v = v.max(v * slope);
                            }
                            match map.mask {
                                Some(mask) => v * mask[i],
                                None => v,
                            }
                        } else {
                            0.0
                        };
                    }
                    w.forward
                        .process_with_scratch(&mut signal, &mut spectrum, &mut scratch)
                        .expect("buffers made by the plan");
                    for (bin, &v) in spectrum.iter().enumerate() {
                        spectra_in[(bin * c_in + ci) * cols + c] = v;
                    }
                }
            }
            // Per bin: [c_out, cols] = [c_out, c_in] · [c_in, cols].
            for bin in 0..bins {
                let lhs = &w.spectra[bin * c_out * c_in..(bin + 1) * c_out * c_in];
                let rhs = &spectra_in[bin * c_in * cols..(bin + 1) * c_in * cols];
                let dst = &mut spectra_out[bin * c_out * cols..(bin + 1) * c_out * cols];
                // SAFETY: each matrix is row-major with the dimensions given, and the three
                // slices have exactly those lengths.
                unsafe {
                    gemm(
                        c_out,
                        cols,
                        c_in,
                        dst.as_mut_ptr(),
                        1,
                        cols as isize,
                        false,
                        lhs.as_ptr(),
                        1,
                        c_in as isize,
                        rhs.as_ptr(),
                        1,
                        cols as isize,
                        c32::new(0.0, 0.0),
                        c32::new(1.0, 0.0),
                        false,
                        false,
                        false,
                        Parallelism::None,
                    )
                };
            }
            // Each output row's blocks back to samples; the valid ones are M from K − 1.
            for co in 0..c_out {
                for (c, col) in group.iter().enumerate() {
                    for (bin, v) in spectrum.iter_mut().enumerate() {
                        *v = spectra_out[(bin * c_out + co) * cols + c];
                    }
                    // A real signal's first and last bins are real: drop the rounding.
                    spectrum[0].im = 0.0;
                    spectrum[bins - 1].im = 0.0;
                    w.inverse
                        .process_with_scratch(&mut spectrum, &mut signal, &mut inverse_scratch)
                        .expect("buffers made by the plan");
                    let len = (l_out - col.phase).div_ceil(dilation);
                    for (s, &v) in signal[taps - 1..].iter().enumerate() {
                        let q = col.first + s;
                        if q >= len {
                            break;
                        }
                        let j = col.phase + dilation * q;
                        let mut total = v + bias[co];
                        for r in residuals {
                            total += r.data[co * r.stride + j];
                        }
                        let at = co * out_stride + j;
                        assert!(at < out_len);
                        // SAFETY: in bounds; each output sample belongs to exactly one
                        // column, so the parts write disjoint samples, and one read with
                        // `accumulate` reads a value the caller initialized.
                        unsafe {
                            let dst = out_ptr.add(at);
                            if accumulate {
                                total += dst.read();
                            }
                            dst.write(total);
                        }
                    }
                }
            }
        }
    };
    let work = c_out * c_in * taps * l_out;
    spare::in_parts(columns.len(), COLUMNS, work, part);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::direct::{self, PackedWeights};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    /// Against the direct kernel (itself tested against the definition in f64): Kokoro's
    /// generator shapes, a signal shorter than one block, an odd offset with a mask and a
    /// LeakyReLU, accumulation and residuals, on whole signals and strided windows.
    #[test]
    fn agrees_with_the_direct_kernel() {
        let mut rng = StdRng::seed_from_u64(7);
        // (c_in, c_out, l_in, l_out, taps, dilation, offset, transform length)
        let cases = [
            (128, 128, 1203, 1203, 11, 5, -25, 64),
            (256, 128, 301, 301, 11, 1, -5, 32),
            (24, 40, 7, 7, 11, 3, -15, 32),
            (16, 16, 500, 480, 9, 2, 3, 64),
            (8, 8, 97, 97, 3, 1, -1, 8),
        ];
        for (i, &(c_in, c_out, l_in, l_out, taps, dilation, offset, n)) in cases.iter().enumerate()
        {
            let x = random(&mut rng, c_in * l_in);
            let weights = random(&mut rng, c_out * c_in * taps);
            let bias = random(&mut rng, c_out);
            let residual = random(&mut rng, c_out * l_out);
            let start = random(&mut rng, c_out * l_out);
            let mask: Vec<f32> = (0..l_in).map(|t| (t % 7 != 3) as u8 as f32).collect();
            let map = if i % 2 == 0 {
                SampleMap::IDENTITY
            } else {
                SampleMap {
                    scale: 0.5,
                    leaky_slope: Some(0.1),
                    mask: Some(&mask),
                }
            };
            let accumulate = i % 2 == 1;
            let res = [Rows::contiguous(&residual, l_out)];
            let (mut want, mut got) = (start.clone(), start.clone());
            direct::conv1d_rows(
                RowsMut::new(&mut want, l_out, l_out),
                accumulate,
                Rows::contiguous(&x, l_in),
                offset,
                &PackedWeights::new(&weights, c_out, c_in, taps),
                &bias,
                dilation,
                &map,
                &res,
            );
            conv1d_rows(
                RowsMut::new(&mut got, l_out, l_out),
                accumulate,
                Rows::contiguous(&x, l_in),
                offset,
                &SpectralWeights::with_len(&weights, c_out, c_in, taps, n),
                &bias,
                dilation,
                &map,
                &res,
            );
            let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = want
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            // f32 sums of c_in · taps (up to 2,816) products: ≈ 1e-6 of the largest output
            // either way; an indexing slip is of the order of the outputs themselves.
            assert!(worst <= 2e-5 * scale, "case {i}: {worst} of {scale}");
        }
    }

    #[test]
    fn only_wide_layers_with_many_taps_go_through_spectra() {
        assert!(worth_it(128, 128, 11));
        assert!(worth_it(256, 256, 11));
        assert!(!worth_it(128, 128, 7));
        assert!(!worth_it(64, 64, 11));
        assert_eq!(transform_len(128, 128, 11), 64);
        assert_eq!(transform_len(256, 256, 11), 32);
        assert_eq!(transform_len(8, 8, 40), 128);
    }
}
