//! Wide convolutions as products of spectra: overlap-save FFTs and one complex matrix
//! product per frequency bin.
//!
//! A dense convolution costs `C_out · C_in · K` multiply-adds per output sample however it is
//! scheduled, and on a CPU with only AVX2 the direct kernel already runs near its `f32` peak.
//! Kokoro's generator spends most of its time in 7- and 11-tap residual convolutions (128 and
//! 256 channels, over the audio-rate signal), where going to the frequency domain needs far fewer
//! operations: a block of `M = N − K + 1` outputs per `N`-point transform costs
//! `4 · C_out · C_in · (N/2 + 1)` real multiply-adds, so about `2.4 · C_out · C_in` per sample at
//! `N = 64` instead of `11 · C_out · C_in`, plus transforms that grow only with the channel
//! count. Unlike Winograd's small-tile algorithms the transforms are orthogonal, so the sums
//! stay as accurate as `f32` direct sums (≈ 1e-6 relative, tested below).
//!
//! A dilation `d` splits the signal into `d` phases (every `d`-th sample), each a dense
//! convolution of its own. Every (phase, block) is one column of the per-bin products, so one
//! product per bin covers a whole part of the signal. The price is memory: a layer keeps
//! `(N/2 + 1)` complex matrices instead of `K` real ones (at `N = 64`, 6× the weights at 11
//! taps and 9× at 7), which is why only layers that ask for it
//! ([`super::PackedWeightCache::spectral`]) and are wide enough to gain ([`worth_it`]) are
//! packed this way.

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
/// kernel: measured (`benches/conv.rs`, `spectral`) to pay from 7 taps at 128 and 256 channels
/// (1.4–1.6× on AVX2), and not at 3 taps or 64 channels.
pub(super) fn worth_it(c_out: usize, c_in: usize, taps: usize) -> bool {
    taps >= 7 && c_out >= 128 && c_in >= 128
}

/// The transform length for a layer: 64 points, or more for kernels longer than 32 taps.
/// Longer transforms need fewer bins per output (33 for 58 outputs at 7 taps), but their
/// per-group spectra leave the L2 cache: measured on AVX2, 64 points beat 32 by 1.1–1.3× at
/// 256 channels, and 128 points gain at most 1.1× at 128 channels and lose 2× at 256.
fn transform_len(taps: usize) -> usize {
    64.max((2 * taps).next_power_of_two())
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
        Self::with_len(w, c_out, c_in, taps, transform_len(taps))
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
    assert!(
        map.channels.is_none(),
        "the routing applies channel maps before the f32 kernels"
    );
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
    // Segment sample s of a column reads input column `start(col) + d·s`.
    let start = |col: &Column| (col.phase + dilation * col.first) as isize + offset;
    let part = |range: Range<usize>| {
        let out_ptr = out_ptr.get();
        let mut signal = w.forward.make_input_vec();
        // One row's segments as spectra, [cols][bins]: the transforms' own layout, moved to
        // and from the products' [bins][rows][cols] in runs of `cols` values per bin.
        let mut row_spectra = vec![c32::new(0.0, 0.0); bins * COLUMNS];
        let mut scratch = w.forward.make_scratch_vec();
        let mut inverse_scratch = w.inverse.make_scratch_vec();
        let mut mapped = Vec::new();
        // [bins][c_in][cols] and [bins][c_out][cols]: one product per bin.
        let mut spectra_in = vec![c32::new(0.0, 0.0); bins * c_in * COLUMNS];
        let mut spectra_out = vec![c32::new(0.0, 0.0); bins * c_out * COLUMNS];
        for group in columns[range].chunks(COLUMNS) {
            let cols = group.len();
            // The input columns the group's segments read, mapped once per row.
            let reach = (dilation * (n - 1)) as isize;
            let lo = group.iter().map(&start).min().unwrap_or(0).max(0);
            let hi = group
                .iter()
                .map(|c| start(c) + reach + 1)
                .max()
                .unwrap_or(0)
                .min(l_in as isize);
            let (lo, hi) = (lo as usize, (hi as usize).max(lo as usize));
            mapped.resize(hi - lo, 0.0);
            for ci in 0..c_in {
                let row = &x.data[ci * x.stride..][..l_in];
                map.apply_slice(&mut mapped, &row[lo..hi], lo);
                for (c, col) in group.iter().enumerate() {
                    let start = start(col);
                    // The samples whose input column lies in lo..hi; the rest read zeros.
                    let first = if start >= lo as isize {
                        0
                    } else {
                        ((lo as isize - start) as usize).div_ceil(dilation)
                    };
                    let end = if start >= hi as isize {
                        0
                    } else {
                        ((hi as isize - start) as usize).div_ceil(dilation).min(n)
                    };
                    let first = first.min(end);
                    signal[..first].fill(0.0);
                    signal[end..].fill(0.0);
                    if first < end {
                        let from = (start + (dilation * first) as isize) as usize - lo;
                        let values = &mut signal[first..end];
                        if dilation == 1 {
                            values.copy_from_slice(&mapped[from..from + values.len()]);
                        } else {
                            let taken = mapped[from..].iter().step_by(dilation);
                            values.iter_mut().zip(taken).for_each(|(v, &m)| *v = m);
                        }
                    }
                    let spectrum = &mut row_spectra[c * bins..][..bins];
                    w.forward
                        .process_with_scratch(&mut signal, spectrum, &mut scratch)
                        .expect("buffers made by the plan");
                }
                for bin in 0..bins {
                    let run = &mut spectra_in[(bin * c_in + ci) * cols..][..cols];
                    for (c, v) in run.iter_mut().enumerate() {
                        *v = row_spectra[c * bins + bin];
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
                for bin in 0..bins {
                    let run = &spectra_out[(bin * c_out + co) * cols..][..cols];
                    for (c, &v) in run.iter().enumerate() {
                        row_spectra[c * bins + bin] = v;
                    }
                }
                for (c, col) in group.iter().enumerate() {
                    let spectrum = &mut row_spectra[c * bins..][..bins];
                    // A real signal's first and last bins are real: drop the rounding.
                    spectrum[0].im = 0.0;
                    spectrum[bins - 1].im = 0.0;
                    w.inverse
                        .process_with_scratch(spectrum, &mut signal, &mut inverse_scratch)
                        .expect("buffers made by the plan");
                    let len = (l_out - col.phase).div_ceil(dilation);
                    let count = (len - col.first).min(m);
                    let values = &mut signal[taps - 1..taps - 1 + count];
                    let at = |s: usize| col.phase + dilation * (col.first + s);
                    values.iter_mut().for_each(|v| *v += bias[co]);
                    for r in residuals {
                        let row = &r.data[co * r.stride..];
                        for (s, v) in values.iter_mut().enumerate() {
                            *v += row[at(s)];
                        }
                    }
                    assert!(co * out_stride + at(count - 1) < out_len);
                    // SAFETY: in bounds (the last sample checked above, the others below it);
                    // each output sample belongs to exactly one column, so the parts write
                    // disjoint samples, and a read with `accumulate` reads a value the caller
                    // initialized.
                    unsafe {
                        let row = out_ptr.add(co * out_stride);
                        if accumulate {
                            for (s, &v) in values.iter().enumerate() {
                                let dst = row.add(at(s));
                                dst.write(v + dst.read());
                            }
                        } else {
                            for (s, &v) in values.iter().enumerate() {
                                row.add(at(s)).write(v);
                            }
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
                    channels: None,
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
        assert!(worth_it(128, 128, 7));
        assert!(!worth_it(256, 256, 3));
        assert!(!worth_it(64, 64, 11));
        assert_eq!(transform_len(11), 64);
        assert_eq!(transform_len(40), 128);
    }
}
