//! The short-time Fourier transform as ONNX's `STFT` operator computes it in onnxruntime, and
//! the strided convolutions that spectral vocoders need around it.
//!
//! iSTFTNet-style vocoders (Kokoro's generator) take the STFT of a source signal inside the
//! network. Where that signal is silent, its bins hold nothing but the transform's rounding
//! noise, and their phase (`atan(im / re)`) is that noise's: a value in (−π, π] that the
//! network then reads as an input. The model was exported to ONNX and is judged against
//! onnxruntime, so [`Stft`] computes the transform the way onnxruntime's CPU kernel does,
//! operation for operation in `f32`: for a power-of-two length its radix-2 FFT, otherwise
//! (n_fft 20) Bluestein's chirp-z algorithm over radix-2 FFTs of the next power of two at
//! least 2N − 1, with its twiddles from `cosf`/`sinf` of `f32` angles. That reproduces its
//! output bit for bit, noise included (on Kokoro's source spectrum every magnitude equals the
//! graph's, and the phases differ only by the graph's own Atan, ≤ 5e-7); a plain DFT
//! agrees to 1e-6 on the signal but gives other noise, which moved Kokoro's `conv_post` by
//! −20 dB (the DC bin's phase flips between +π and −π with the sign of its noise).
//!
//! The convolution kernels only know stride 1, so [`StridedConv1d`] rewrites a strided
//! convolution over its input's polyphase components: with stride `s`, input channel `c`
//! becomes the `s` channels `x[c, s·m + r]` (r < s), and tap `k = s·j + r` of the kernel
//! becomes tap `j` of channel `c·s + r`, a stride-1 convolution with `⌈K / s⌉` taps and no
//! redundant outputs.

use candle_core::{Result, Tensor};

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

/// A complex `f32` with C++ `std::complex<float>`'s arithmetic: products as `(ac − bd,
/// ad + bc)`, no fused multiply-add.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Complex {
    re: f32,
    im: f32,
}

impl Complex {
    const ONE: Complex = Complex { re: 1.0, im: 0.0 };

    fn new(re: f32, im: f32) -> Self {
        Self { re, im }
    }

    fn mul(self, o: Complex) -> Complex {
        Complex::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }

    fn add(self, o: Complex) -> Complex {
        Complex::new(self.re + o.re, self.im + o.im)
    }

    fn scale(self, s: f32) -> Complex {
        Complex::new(self.re * s, self.im * s)
    }

    fn conj(self) -> Complex {
        Complex::new(self.re, -self.im)
    }

    /// `e^{i·angle}` from `f32` `cosf`/`sinf`.
    fn expi(angle: f32) -> Complex {
        Complex::new(angle.cos(), angle.sin())
    }
}

/// The lowest `bits` bits of `i`, reversed.
fn bit_reverse(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

#[derive(Debug, Clone)]
/// onnxruntime's radix-2 FFT of `n = 2^bits` points with its table `v` (the forward
/// twiddles, in bit-reversed order). Its inverse reuses the forward table, which leaves
/// the output reversed (`y[n − i]` holds bin i, for i > 0), divided by n.
struct Radix2 {
    bits: u32,
    v: Vec<Complex>,
}

impl Radix2 {
    fn new(n: usize) -> Self {
        assert!(n.is_power_of_two());
        let bits = n.trailing_zeros();
        // `(−1 · τ) / n` with π as the f32 M_PI, then angle `(f32) i · ω`; −1 · τ is −τ.
        let tau = 2.0 * std::f32::consts::PI;
        let omega = -tau / n as f32;
        let mut v = vec![Complex::default(); n];
        for i in 0..n {
            v[bit_reverse(i, bits)] = Complex::expi(i as f32 * omega);
        }
        Self { bits, v }
    }

    /// `y` = FFT(`x`); `x` is read in bit-reversed order into `y` first.
    fn run(&self, x: &[Complex], y: &mut [Complex], inverse: bool) {
        let n = self.v.len();
        for (i, out) in y.iter_mut().enumerate() {
            *out = Complex::ONE
                .mul(x[bit_reverse(i, self.bits)])
                .mul(Complex::ONE);
        }
        let mut size = 2;
        let mut bits = 0;
        while size <= n {
            let mid = size >> 1;
            bits += 1;
            for k in 0..mid {
                let first = self.v[bit_reverse(k, bits)];
                let second = self.v[bit_reverse(mid + k, bits)];
                for j in (0..n).step_by(size) {
                    let (even, odd) = (y[k + j], y[k + j + mid]);
                    y[k + j] = even.add(first.mul(odd));
                    y[k + j + mid] = even.add(second.mul(odd));
                }
            }
            size <<= 1;
        }
        if inverse {
            let n = n as f32;
            for out in y.iter_mut() {
                *out = Complex::new(out.re / n, out.im / n);
            }
        }
    }
}

/// How the DFT of one frame is computed (see the module doc).
#[derive(Debug, Clone)]
enum Plan {
    /// n_fft is a power of two: one FFT of the windowed frame.
    Radix2(Radix2),
    /// Bluestein over M = 2^⌈log₂(2N − 1)⌉ points: the chirp `e^{−iπn²/N}` and the FFT of
    /// its conjugate, made once.
    Bluestein {
        fft: Radix2,
        chirp: Vec<Complex>,
        b_fft: Vec<Complex>,
    },
}

/// The one-sided STFT of ONNX's `STFT` as onnxruntime computes it: frames of `window.len()`
/// samples, `hop` apart, no padding.
#[derive(Debug, Clone)]
pub(crate) struct Stft {
    window: Vec<f32>,
    hop: usize,
    plan: Plan,
}

impl Stft {
    pub(crate) fn new(window: Vec<f32>, hop: usize) -> Self {
        let n = window.len();
        assert!(n > 0 && hop > 0, "an STFT needs a window and a hop");
        let plan = if n.is_power_of_two() {
            Plan::Radix2(Radix2::new(n))
        } else {
            let m = (2 * n - 1).next_power_of_two();
            let fft = Radix2::new(m);
            // `direction · π · n · n / N` (direction −1), evaluated left to right in f32.
            let chirp: Vec<Complex> = (0..n)
                .map(|i| Complex::expi(-std::f32::consts::PI * i as f32 * i as f32 / n as f32))
                .collect();
            let mut b = vec![Complex::default(); m];
            for (bi, c) in b.iter_mut().zip(&chirp) {
                *bi = c.conj();
            }
            for i in m - n + 1..m {
                b[i] = b[m - i];
            }
            let mut b_fft = vec![Complex::default(); m];
            fft.run(&b, &mut b_fft, false);
            Plan::Bluestein { fft, chirp, b_fft }
        };
        Self { window, hop, plan }
    }

    /// Bins per frame: n_fft / 2 + 1.
    pub(crate) fn bins(&self) -> usize {
        self.window.len() / 2 + 1
    }

    /// Frames of a signal of `len` samples.
    pub(crate) fn frames(&self, len: usize) -> usize {
        match len.checked_sub(self.window.len()) {
            Some(rest) => rest / self.hop + 1,
            None => 0,
        }
    }

    /// `x` → (real, imaginary) parts, each [bins, frames] row-major. A frame equal to the one
    /// before (long silences) reuses its result.
    pub(crate) fn forward(&self, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let (n, bins, frames) = (self.window.len(), self.bins(), self.frames(x.len()));
        let mut re = vec![0f32; bins * frames];
        let mut im = vec![0f32; bins * frames];
        let mut spectrum = vec![Complex::default(); bins];
        let mut work = Work::new(&self.plan);
        for t in 0..frames {
            let frame = &x[t * self.hop..t * self.hop + n];
            let repeat = t > 0 && {
                let before = &x[(t - 1) * self.hop..(t - 1) * self.hop + n];
                frame
                    .iter()
                    .zip(before)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            };
            if !repeat {
                self.frame(frame, &mut spectrum, &mut work);
            }
            for (k, c) in spectrum.iter().enumerate() {
                re[k * frames + t] = c.re;
                im[k * frames + t] = c.im;
            }
        }
        (re, im)
    }

    fn frame(&self, frame: &[f32], out: &mut [Complex], work: &mut Work) {
        match &self.plan {
            Plan::Radix2(fft) => {
                for ((a, &x), &w) in work.a.iter_mut().zip(frame).zip(&self.window) {
                    *a = Complex::new(x * w, 0.0);
                }
                fft.run(&work.a, &mut work.b, false);
                out.copy_from_slice(&work.b[..out.len()]);
            }
            Plan::Bluestein { fft, chirp, b_fft } => {
                let m = work.a.len();
                work.a.fill(Complex::default());
                for (((a, &x), &w), &c) in work.a.iter_mut().zip(frame).zip(&self.window).zip(chirp)
                {
                    *a = Complex::new(x, 0.0).scale(w).mul(c);
                }
                fft.run(&work.a, &mut work.b, false);
                for (bi, &f) in work.b.iter_mut().zip(b_fft) {
                    *bi = bi.mul(f);
                }
                fft.run(&work.b, &mut work.a, true);
                for (i, o) in out.iter_mut().enumerate() {
                    let c = if i == 0 { work.a[0] } else { work.a[m - i] };
                    *o = c.mul(chirp[i]).scale(1.0);
                }
            }
        }
    }
}

/// Scratch for one frame's transform.
struct Work {
    a: Vec<Complex>,
    b: Vec<Complex>,
}

impl Work {
    fn new(plan: &Plan) -> Self {
        let m = match plan {
            Plan::Radix2(fft) | Plan::Bluestein { fft, .. } => fft.v.len(),
        };
        Self {
            a: vec![Complex::default(); m],
            b: vec![Complex::default(); m],
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;
    use crate::test_support::max_abs_diff;

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

    fn hann(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (0.5 - 0.5 * (std::f64::consts::TAU * i as f64 / n as f64).cos()) as f32)
            .collect()
    }

    /// Both plans against a direct DFT in f64 (ONNX's sign, `X[k] = Σ x[n]·e^{−2πikn/N}`),
    /// with frames that repeat (reused) and frames that do not.
    #[test]
    fn stft_is_the_windowed_dft_of_each_frame() {
        for (n_fft, hop) in [(20, 5), (16, 4), (7, 3)] {
            let len = 200;
            let window = hann(n_fft);
            let stft = Stft::new(window.clone(), hop);
            let x: Vec<f32> = (0..len)
                .map(|i| {
                    if i < 60 {
                        0.25
                    } else {
                        0.3 + (std::f64::consts::TAU * 3.0 * i as f64 / 20.0 + 0.4).sin() as f32
                    }
                })
                .collect();
            let (re, im) = stft.forward(&x);
            let (bins, frames) = (n_fft / 2 + 1, stft.frames(len));
            assert_eq!((stft.bins(), frames), (bins, (len - n_fft) / hop + 1));
            for t in 0..frames {
                for k in 0..bins {
                    let (mut want_re, mut want_im) = (0f64, 0f64);
                    for n in 0..n_fft {
                        let v = f64::from(x[t * hop + n]) * f64::from(window[n]);
                        let a = std::f64::consts::TAU * (k * n) as f64 / n_fft as f64;
                        want_re += v * a.cos();
                        want_im -= v * a.sin();
                    }
                    let (got_re, got_im) = (re[k * frames + t], im[k * frames + t]);
                    assert!(
                        (f64::from(got_re) - want_re).abs() < 1e-5,
                        "n {n_fft} re t {t} k {k}"
                    );
                    assert!(
                        (f64::from(got_im) - want_im).abs() < 1e-5,
                        "n {n_fft} im t {t} k {k}"
                    );
                }
            }
        }
    }
}
