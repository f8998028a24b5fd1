//! The weight-free signal stages at both ends of the iSTFTNet generator ([`super::generator`]):
//! the harmonic source made from F0 before the network ([`HarmonicSource`], with the ONNX
//! `Resize` steps and the phase it uses) and the inverse STFT after it ([`InverseStft`]).
//!
//! A file of their own because they are signal processing, not layers: each reproduces the
//! exported graph's arithmetic step for step (checked against onnxruntime runs of those
//! subgraphs), while the generator is the network between them.

use candle_core::{Result, Tensor};

use crate::kernels;

/// The harmonic source `m_source` as exported: F0 at 2F values → excitation [600·F].
#[derive(Debug, Clone)]
pub(super) struct HarmonicSource {
    /// Samples per F0 value: Π upsample rates × hop = 300.
    pub(super) upsample: usize,
    pub(super) sample_rate: f32,
    pub(super) sine_amp: f32,
    /// Voiced where F0 > threshold (Hz).
    pub(super) voiced_threshold: f32,
    /// `l_linear`: one weight per harmonic (fundamental first) and a bias.
    pub(super) merge: Vec<f32>,
    pub(super) merge_bias: f32,
}

impl HarmonicSource {
    /// `f0` (Hz), one value per half frame → `tanh(l_linear(sines))`, `upsample` samples each.
    ///
    /// The graph's steps, in its order and precision: F0 repeated to the sample rate
    /// (nearest Resize); per harmonic h = 1..=9 the phase increment `frac(h·F0 / sr)`;
    /// a linear Resize by 1/300 back to one value per F0 value; a running sum, × 2π × 300;
    /// a linear Resize ×300 up again; `sin · sine_amp`, zero where unvoiced; the weighted sum
    /// over harmonics plus bias; tanh. PyTorch adds a random initial phase per harmonic and
    /// Gaussian noise here; the export has neither.
    pub(super) fn forward(&self, f0: &[f32]) -> Vec<f32> {
        let up = self.upsample;
        let harmonics = self.merge.len();
        let samples = f0.len() * up;
        let f0_up = resize_nearest(f0, up);
        let down_scale = 1.0 / up as f32;
        let mut source = vec![self.merge_bias; samples];
        for h in 0..harmonics {
            let rad: Vec<f32> = f0_up
                .iter()
                .map(|&f| {
                    let r = f * (h + 1) as f32 / self.sample_rate;
                    r - r.floor()
                })
                .collect();
            let rad = resize_linear(&rad, f0.len(), down_scale);
            let mut phase = Vec::with_capacity(rad.len());
            let mut total = 0f32;
            for r in rad {
                total += r;
                phase.push(total * 2.0 * std::f32::consts::PI * up as f32);
            }
            let phase = resize_linear(&phase, samples, up as f32);
            let weight = self.merge[h];
            for ((out, p), &f) in source.iter_mut().zip(&phase).zip(&f0_up) {
                let voiced = if f > self.voiced_threshold { 1.0 } else { 0.0 };
                *out += p.sin() * self.sine_amp * voiced * weight;
            }
        }
        source.iter().map(|v| v.tanh()).collect()
    }
}

/// ONNX `Resize` (mode nearest, `asymmetric`, `floor`) by an integer factor: each value
/// repeated `factor` times.
pub(super) fn resize_nearest(x: &[f32], factor: usize) -> Vec<f32> {
    x.iter()
        .flat_map(|&v| std::iter::repeat_n(v, factor))
        .collect()
}

/// ONNX `Resize` (mode linear, `half_pixel`, no antialias) of `x` to `len` values at
/// `scale` (the graph's f32 scale, which for a downsampling is not exactly 1/factor): output
/// `j` samples the input at `(j + 0.5) / scale − 0.5`, clamped to the ends, between its two
/// neighbours.
pub(super) fn resize_linear(x: &[f32], len: usize, scale: f32) -> Vec<f32> {
    let last = x.len() - 1;
    (0..len)
        .map(|j| {
            let at = ((j as f32 + 0.5) / scale - 0.5).clamp(0.0, last as f32);
            let i0 = (at as usize).min(last);
            let i1 = (i0 + 1).min(last);
            let w1 = at - i0 as f32;
            x[i0] * (1.0 - w1) + x[i1] * w1
        })
        .collect()
}

/// `x` [1, L] with `pad` samples mirrored at each end (`reflect`, the edge not repeated).
pub(super) fn reflect_pad(x: &[f32], pad: usize) -> Vec<f32> {
    let n = x.len();
    let left = (1..=pad).rev().map(|i| x[i]);
    let right = (0..pad).map(|i| x[n - 2 - i]);
    left.chain(x.iter().copied()).chain(right).collect()
}

/// The phase as the graph computes it from `atan(im / re)` with `Where` (not `atan2`):
/// ±π added by the sign of `im` when `re < 0`. Where both parts are exactly 0 the graph's
/// 0/0 would give NaN; there this gives 0, as `atan2` does.
pub(super) fn phase_of(re: f32, im: f32) -> f32 {
    if re == 0.0 && im == 0.0 {
        return 0.0;
    }
    let a = (im / re).atan();
    if re < 0.0 {
        if im > 0.0 {
            a + std::f32::consts::PI
        } else {
            a - std::f32::consts::PI
        }
    } else {
        a
    }
}

/// The inverse STFT as exported: torch-stft's `inverse` (pseeth/torch-stft), a transposed
/// convolution with a fixed synthesis basis, divided by the window's sum of squares, × n_fft
/// / hop, and `n_fft / 2` samples trimmed at each end. The export froze the normalizer at its
/// traced length of 20 samples, so only the first 20 output samples are divided (those where
/// it exceeds `f32::MIN_POSITIVE`); the interior keeps the overlap gain of 1.5, and the
/// 20th sample (the 10th after the trim) is divided by about 6e-4.
#[derive(Debug, Clone)]
pub(super) struct InverseStft {
    /// [2·bins, 1, n_fft]: real parts' rows, then imaginary parts'.
    pub(super) basis: Tensor,
    pub(super) window_sum: Vec<f32>,
    pub(super) hop: usize,
    pub(super) n_fft: usize,
}

impl InverseStft {
    /// `log_mag` and `phase_pre` [1, bins, K] (conv_post's two halves) → samples
    /// [hop·(K − 1)]: magnitude `exp(log_mag)`, phase `sin(phase_pre)`.
    pub(super) fn forward(&self, log_mag: &Tensor, phase_pre: &Tensor) -> Result<Vec<f32>> {
        let magnitude = log_mag.exp()?;
        let phase = phase_pre.sin()?;
        let spectrum = Tensor::cat(
            &[(&magnitude * phase.cos()?)?, (&magnitude * phase.sin()?)?],
            1,
        )?;
        let frames = kernels::conv_transpose1d(&spectrum, &self.basis, None, self.hop, 0)?;
        let mut y = frames.flatten_all()?.to_vec1::<f32>()?;
        for (v, &w) in y.iter_mut().zip(&self.window_sum) {
            if w > f32::MIN_POSITIVE {
                *v /= w;
            }
        }
        let gain = (self.n_fft / self.hop) as f32;
        let trim = self.n_fft / 2;
        Ok(y[trim..y.len() - trim].iter().map(|v| v * gain).collect())
    }
}
