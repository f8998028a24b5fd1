//! The short-time Fourier transform as a convolution, for vocoders that work on spectra.
//!
//! iSTFTNet-style vocoders (Kokoro's generator) take the STFT of a source signal inside the
//! network and end on an inverse STFT. With their tiny transforms (n_fft 20, hop 5) both are
//! best seen as linear maps with a fixed basis: the forward transform is a strided
//! convolution of the signal with window-weighted cosines and sines, one output channel per
//! real or imaginary bin; the inverse is a transposed convolution with the synthesis basis
//! (which [`super::conv_transpose1d`] already runs). A 20-point frame costs 20 multiply-adds
//! per bin either way, so an FFT would gain nothing, and as convolutions they run in the same
//! blocked kernels as the layers around them.
//!
//! The kernels only know stride-1 convolutions, so [`StridedConv1d`] rewrites a strided one
//! over the input's polyphase components: with stride `s`, input channel `c` becomes the `s`
//! channels `x[c, s·m + r]` (r < s), and tap `k = s·j + r` of the kernel becomes tap `j` of
//! channel `c·s + r`, a stride-1 convolution with `⌈K / s⌉` taps and no redundant outputs.

use candle_core::{Device, Result, Tensor};

use super::dispatch::conv1d_fused;
use super::layer::{InputMap, PackedWeightCache};
use super::precision::Precision;

/// A stride-`s` convolution `y[o, t] = b[o] + Σ_{c,k} w[o, c, k] · x[c, s·t + k − padding]`
/// (zero padding), as one stride-1 convolution over the polyphase components of its input.
#[derive(Debug, Clone)]
pub(crate) struct StridedConv1d {
    /// The kernel rearranged for the polyphase input: [C_out, C_in·s, ⌈K / s⌉].
    weight: Tensor,
    bias: Option<Tensor>,
    stride: usize,
    padding: usize,
    taps: usize,
    cache: PackedWeightCache,
}

impl StridedConv1d {
    /// `weight` [C_out, C_in, K] (PyTorch's layout), `bias` [C_out]; `stride` ≥ 1.
    pub(crate) fn new(
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Result<Self> {
        if stride == 0 {
            candle_core::bail!("a strided convolution needs a stride of at least 1");
        }
        let (c_out, c_in, taps) = weight.dims3()?;
        let phase_taps = taps.div_ceil(stride);
        // w'[o, c·s + r, j] = w[o, c, s·j + r], zero where s·j + r ≥ K.
        let weight = weight
            .pad_with_zeros(2, 0, phase_taps * stride - taps)?
            .reshape((c_out, c_in, phase_taps, stride))?
            .transpose(2, 3)?
            .reshape((c_out, c_in * stride, phase_taps))?
            .contiguous()?;
        Ok(Self {
            weight,
            bias: bias.cloned(),
            stride,
            padding,
            taps,
            cache: PackedWeightCache::new(Precision::F32),
        })
    }

    /// `x` [B, C_in, L] → [B, C_out, (L + 2·padding − K) / stride + 1].
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (batch, c_in, len) = x.dims3()?;
        let s = self.stride;
        let padded = len + 2 * self.padding;
        if padded < self.taps {
            candle_core::bail!(
                "strided convolution: input of {len} (+2·{}) is shorter than the kernel ({})",
                self.padding,
                self.taps
            );
        }
        let l_out = (padded - self.taps) / s + 1;
        let phase_taps = self.weight.dim(2)?;
        // Each phase needs columns 0..l_out + phase_taps − 1, i.e. padded samples up to
        // s · columns; the samples past the last output's reach only meet zero taps.
        let columns = l_out + phase_taps - 1;
        let wanted = s * columns;
        let x = x.pad_with_zeros(2, self.padding, self.padding)?;
        let x = if wanted > padded {
            x.pad_with_zeros(2, 0, wanted - padded)?
        } else {
            x.narrow(2, 0, wanted)?
        };
        // P[b, c·s + r, m] = x[b, c, s·m + r]
        let phases = x
            .reshape((batch, c_in, columns, s))?
            .transpose(2, 3)?
            .reshape((batch, c_in * s, columns))?;
        conv1d_fused(
            &phases,
            &self.weight,
            self.bias.as_ref(),
            0,
            1,
            &InputMap::IDENTITY,
            &[],
            Some(&self.cache),
        )
    }
}

/// The analysis basis of a one-sided DFT of `window.len()` points with the window folded in:
/// [2·(n_fft/2 + 1), 1, n_fft], rows `w[n]·cos(2πkn/N)` for k = 0..=N/2, then
/// `−w[n]·sin(2πkn/N)` — the sign of ONNX's `STFT` (`X[k] = Σ x[n]·e^{−2πikn/N}`).
pub(crate) fn stft_basis(window: &[f32], device: &Device) -> Result<Tensor> {
    let n_fft = window.len();
    let bins = n_fft / 2 + 1;
    let mut rows = vec![0f32; 2 * bins * n_fft];
    let (real, imag) = rows.split_at_mut(bins * n_fft);
    for k in 0..bins {
        for (n, &w) in window.iter().enumerate() {
            // k·n mod N keeps the angle exact before the one rounding to f32.
            let angle = std::f64::consts::TAU * ((k * n) % n_fft) as f64 / n_fft as f64;
            real[k * n_fft + n] = (f64::from(w) * angle.cos()) as f32;
            imag[k * n_fft + n] = (-f64::from(w) * angle.sin()) as f32;
        }
    }
    Tensor::from_vec(rows, (2 * bins, 1, n_fft), device)
}

/// The periodic Hann window of `n` points (`torch.hann_window(n)`): `0.5 − 0.5·cos(2πi/n)`.
pub(crate) fn hann_window(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (0.5 - 0.5 * (std::f64::consts::TAU * i as f64 / n as f64).cos()) as f32)
        .collect()
}

/// The one-sided STFT of `x` [B, L] without padding (frames start at 0, hop apart, as ONNX's
/// `STFT` takes them): [B, 2·bins, (L − n_fft) / hop + 1], the real parts of bins 0..bins,
/// then their imaginary parts. `analysis` is a [`StridedConv1d`] over [`stft_basis`] with
/// stride `hop`.
pub(crate) fn stft(x: &Tensor, analysis: &StridedConv1d) -> Result<Tensor> {
    analysis.forward(&x.unsqueeze(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(shape: &[usize], seed: u64) -> Tensor {
        let n: usize = shape.iter().product();
        let mut state = seed;
        let data: Vec<f32> = (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    }

    fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    /// The polyphase rewrite equals candle's strided convolution, for strides that divide
    /// the kernel and ones that do not, with and without padding and bias.
    #[test]
    fn strided_convolution_matches_candle() {
        for (c_in, c_out, k, stride, padding, len) in [
            (22, 16, 12, 6, 3, 121),
            (1, 1, 3, 2, 1, 40),
            (1, 22, 20, 5, 0, 120),
            (3, 5, 7, 3, 2, 50),
            (4, 2, 2, 4, 0, 33),
            (2, 3, 5, 1, 2, 17),
        ] {
            let x = random(&[2, c_in, len], 1);
            let w = random(&[c_out, c_in, k], 2);
            let b = random(&[c_out], 3);
            let conv = StridedConv1d::new(&w, Some(&b), stride, padding).unwrap();
            let got = conv.forward(&x).unwrap();
            let want = x
                .conv1d(&w, padding, stride, 1, 1)
                .unwrap()
                .broadcast_add(&b.reshape((1, c_out, 1)).unwrap())
                .unwrap();
            assert_eq!(got.dims(), want.dims(), "k {k} stride {stride}");
            let err = max_abs_diff(&got, &want);
            assert!(err < 1e-5, "k {k} stride {stride}: {err}");
        }
    }

    /// Against a direct DFT in f64: a cosine on bin 3 and a constant land where they should,
    /// with the ONNX sign for the imaginary part.
    #[test]
    fn stft_is_the_windowed_dft_of_each_frame() {
        let (n_fft, hop, len) = (20, 5, 200);
        let window = hann_window(n_fft);
        let basis = stft_basis(&window, &Device::Cpu).unwrap();
        let analysis = StridedConv1d::new(&basis, None, hop, 0).unwrap();
        let x: Vec<f32> = (0..len)
            .map(|i| 0.3 + (std::f64::consts::TAU * 3.0 * i as f64 / 20.0 + 0.4).sin() as f32)
            .collect();
        let spec = stft(&Tensor::from_vec(x.clone(), (1, len), &Device::Cpu).unwrap(), &analysis)
            .unwrap();
        let frames = (len - n_fft) / hop + 1;
        assert_eq!(spec.dims(), [1, 22, frames]);
        let spec = spec.squeeze(0).unwrap().to_vec2::<f32>().unwrap();
        for t in 0..frames {
            for k in 0..11 {
                let (mut re, mut im) = (0f64, 0f64);
                for n in 0..n_fft {
                    let v = f64::from(x[t * hop + n]) * f64::from(window[n]);
                    let a = std::f64::consts::TAU * (k * n) as f64 / n_fft as f64;
                    re += v * a.cos();
                    im -= v * a.sin();
                }
                assert!((f64::from(spec[k][t]) - re).abs() < 1e-5, "re t {t} k {k}");
                assert!((f64::from(spec[11 + k][t]) - im).abs() < 1e-5, "im t {t} k {k}");
            }
        }
        // Bin 3 carries the cosine (|X| = N/4 for a periodic Hann window), bin 0 the offset.
        let mag3 = (spec[3][5].powi(2) + spec[14][5].powi(2)).sqrt();
        assert!((mag3 - 5.0).abs() < 1e-4, "{mag3}");
        assert!((spec[0][5] - 0.3 * 10.0).abs() < 1e-4);
    }

    /// The window equals torch's periodic Hann window as Kokoro's graph stores it.
    #[test]
    fn hann_window_is_periodic() {
        let w = hann_window(20);
        assert_eq!(w[0], 0.0);
        assert_eq!(w[10], 1.0);
        assert_eq!(w[5], 0.5);
        assert!((w[1] - 0.024_471_741).abs() < 1e-9);
        assert_eq!(w[1], w[19]);
    }
}
