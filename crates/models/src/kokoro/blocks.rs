//! The layers Kokoro's prosody predictor and decoder share: linear and convolution layers
//! loaded by canonical name, StyleTTS 2's style-conditioned instance norm ([`AdaIn1d`]) and
//! its residual block ([`AdainResBlk1d`], with the ×2 upsampling variant).
//!
//! Everything works on one utterance: sequences are `[1, C, T]` (the convolution kernels'
//! `[B, C, L]` with B = 1) and a style is `[1, 128]`. Convolutions go through
//! [`crate::kernels`]; the rest are candle tensor ops, so the blocks run on any device.

use std::sync::Arc;

use candle_core::{Device, Result, Tensor, D};

use super::weights::Weights;
use crate::error::ModelError;
use crate::kernels::{self, InputMap, LinearOutput, PackedWeightCache, Precision, RowLinear};

/// `nn.Linear`: `weight` `[out, in]`, `bias` `[out]`, in the form its device multiplies.
#[derive(Debug, Clone)]
pub(crate) enum Linear {
    /// On the CPU: host rows, whose products a spare core shares ([`RowLinear`]). ALBERT's
    /// twelve passes over one 22 MB layer took 80 ms of a 2.5 s sentence through candle's
    /// `matmul` on one core, and 45 ms this way on two (docs/performance.md §3d).
    Rows {
        weight: Arc<RowLinear>,
        bias: Vec<f32>,
    },
    /// Elsewhere: `[in, out]`, transposed once at load so every product reads it row by row.
    Transposed { weight_t: Tensor, bias: Tensor },
}

impl Linear {
    /// `<prefix>.weight` `[out, in]` and `<prefix>.bias` `[out]`.
    pub fn load(
        w: &Weights,
        prefix: &str,
        input: usize,
        output: usize,
    ) -> std::result::Result<Self, ModelError> {
        let weight = w.get_shaped(&format!("{prefix}.weight"), &[output, input])?;
        let bias = w.get_shaped(&format!("{prefix}.bias"), &[output])?;
        Ok(if weight.device().is_cpu() {
            // `f32`, as every layer before the decoder: the durations are rounded from these
            // layers' outputs, so they stay `f32`'s whatever the decoder's precision.
            Self::Rows {
                weight: Arc::new(RowLinear::new(&weight, Precision::F32)?),
                bias: bias.to_vec1()?,
            }
        } else {
            Self::Transposed {
                weight_t: weight.t()?.contiguous()?,
                bias,
            }
        })
    }

    /// `x` `[..., in]` → `[..., out]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (weight, bias) = match self {
            Self::Transposed { weight_t, bias } => {
                return x.broadcast_matmul(weight_t)?.broadcast_add(bias)
            }
            Self::Rows { weight, bias } => (weight, bias),
        };
        let mut dims = x.dims().to_vec();
        let input = dims.pop().unwrap_or(1);
        let n = x.elem_count() / input.max(1);
        let x = x.flatten_all()?.to_vec1::<f32>()?;
        // The bias in every row, and the product added to it.
        let mut y = bias.repeat(n);
        weight.run_into(&x, n, &mut y, LinearOutput::Add);
        dims.push(bias.len());
        Tensor::from_vec(y, dims, &Device::Cpu)
    }
}

/// `nn.Conv1d` (weight norm folded): `weight` `[out, in/groups, k]`, optional `bias`.
#[derive(Debug, Clone)]
pub(crate) struct Conv1d {
    weight: Tensor,
    bias: Option<Tensor>,
    padding: usize,
    dilation: usize,
    groups: usize,
    stride: usize,
    /// The direct kernel's packed weights, in the precision the layer runs in.
    cache: PackedWeightCache,
}

/// How a [`Conv1d`] slides: `nn.Conv1d`'s keyword arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConvSpec {
    pub padding: usize,
    pub dilation: usize,
    pub groups: usize,
    pub stride: usize,
    pub bias: bool,
}

impl ConvSpec {
    /// Stride 1, no dilation or groups, "same" padding for an odd `kernel`, with bias.
    pub const fn same(kernel: usize) -> Self {
        Self {
            padding: (kernel - 1) / 2,
            dilation: 1,
            groups: 1,
            stride: 1,
            bias: true,
        }
    }
}

impl Conv1d {
    /// `<prefix>.weight` `[out, in/groups, kernel]` (+ `<prefix>.bias` `[out]` when
    /// `spec.bias`).
    pub fn load(
        w: &Weights,
        prefix: &str,
        (input, output, kernel): (usize, usize, usize),
        spec: ConvSpec,
    ) -> std::result::Result<Self, ModelError> {
        let weight = w.get_shaped(
            &format!("{prefix}.weight"),
            &[output, input / spec.groups, kernel],
        )?;
        let bias = if spec.bias {
            Some(w.get_shaped(&format!("{prefix}.bias"), &[output])?)
        } else {
            None
        };
        Ok(Self {
            weight,
            bias,
            padding: spec.padding,
            dilation: spec.dilation,
            groups: spec.groups,
            stride: spec.stride,
            cache: PackedWeightCache::new(Precision::F32),
        })
    }

    /// The same convolution with its weights packed for `precision` (on first use).
    pub fn in_precision(&mut self, precision: Precision) {
        self.cache = PackedWeightCache::new(precision);
    }

    /// Whether every call goes through the direct kernel with the cache: the only kernel
    /// with reduced precisions, and in `f32` the faster from 3 taps (pointwise convolutions
    /// are one matrix product either way).
    fn runs_packed(&self) -> bool {
        let reduced = self.cache.precision() != Precision::F32;
        self.stride == 1 && self.groups == 1 && (self.weight.dims()[2] >= 3 || reduced)
    }

    /// Packs the weights now and keeps only the packed copy, where every call reads that
    /// alone ([`kernels::packed_and_released`]). The precision is fixed from here on.
    pub fn release_unpacked(&mut self) -> Result<()> {
        if self.runs_packed() {
            self.weight = kernels::packed_and_released(&self.weight, &self.cache)?;
        }
        Ok(())
    }

    /// `x` `[1, in, T]` → `[1, out, T']`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.runs_packed() {
            return kernels::conv1d_fused(
                x,
                &self.weight,
                self.bias.as_ref(),
                self.padding,
                self.dilation,
                &InputMap::IDENTITY,
                &[],
                Some(&self.cache),
            );
        }
        if self.stride == 1 {
            return kernels::conv1d(
                x,
                &self.weight,
                self.bias.as_ref(),
                self.padding,
                self.dilation,
                self.groups,
            );
        }
        let y = x.conv1d(
            &self.weight,
            self.padding,
            self.stride,
            self.dilation,
            self.groups,
        )?;
        match &self.bias {
            Some(b) => y.broadcast_add(&b.reshape((1, (), 1))?),
            None => Ok(y),
        }
    }
}

/// `LeakyReLU(slope)` for `0 ≤ slope ≤ 1`.
pub(crate) fn leaky_relu(x: &Tensor, slope: f64) -> Result<Tensor> {
    x.maximum(&(x * slope)?)
}

/// Normalizes each channel of `x` `[1, C, T]` over time (biased variance), as
/// `nn.InstanceNorm1d` without affine parameters.
pub(crate) fn instance_norm(x: &Tensor, eps: f64) -> Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let centered = x.broadcast_sub(&mean)?;
    let var = centered.sqr()?.mean_keepdim(D::Minus1)?;
    centered.broadcast_div(&(var + eps)?.sqrt()?)
}

/// Normalizes each position of `x` `[T, C]` over its channels, as `F.layer_norm` without
/// affine parameters.
pub(crate) fn layer_norm_rows(x: &Tensor, eps: f64) -> Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let centered = x.broadcast_sub(&mean)?;
    let var = centered.sqr()?.mean_keepdim(D::Minus1)?;
    centered.broadcast_div(&(var + eps)?.sqrt()?)
}

/// StyleTTS 2's `AdaIN1d`: instance norm whose scale and shift come from the style,
/// `(1 + γ(s)) · IN(x) + β(s)` with `[γ, β] = fc(s)`.
#[derive(Debug, Clone)]
pub(crate) struct AdaIn1d {
    fc: Linear,
    channels: usize,
    eps: f64,
}

impl AdaIn1d {
    /// `<prefix>.fc` `[2C, style]`.
    pub fn load(
        w: &Weights,
        prefix: &str,
        style: usize,
        channels: usize,
        eps: f64,
    ) -> std::result::Result<Self, ModelError> {
        Ok(Self {
            fc: Linear::load(w, &format!("{prefix}.fc"), style, 2 * channels)?,
            channels,
            eps,
        })
    }

    /// The style's `(1 + γ, β)`, each `[1, C, 1]`: computed once per utterance by callers
    /// that apply the norm at several places.
    pub fn affine(&self, s: &Tensor) -> Result<(Tensor, Tensor)> {
        let h = self.fc.forward(s)?; // [1, 2C]
        let gamma = (h.narrow(1, 0, self.channels)? + 1.0)?;
        let beta = h.narrow(1, self.channels, self.channels)?;
        Ok((gamma.unsqueeze(2)?, beta.unsqueeze(2)?))
    }

    /// `x` `[1, C, T]`, `s` `[1, style]` → `[1, C, T]`.
    pub fn forward(&self, x: &Tensor, s: &Tensor) -> Result<Tensor> {
        let (scale, shift) = self.affine(s)?;
        instance_norm(x, self.eps)?
            .broadcast_mul(&scale)?
            .broadcast_add(&shift)
    }
}

/// StyleTTS 2's `AdainResBlk1d`:
/// `(conv2(σ(AdaIN₂(conv1(pool(σ(AdaIN₁(x))))))) + conv1x1(up(x))) / √2`, σ = LeakyReLU(0.2).
/// With `upsample`, `up` repeats every frame twice and `pool` is a depthwise transposed
/// convolution (kernel 3, stride 2) that doubles the length; `conv1x1` exists when the
/// channel count changes.
#[derive(Debug, Clone)]
pub(crate) struct AdainResBlk1d {
    norm1: AdaIn1d,
    norm2: AdaIn1d,
    conv1: Conv1d,
    conv2: Conv1d,
    conv1x1: Option<Conv1d>,
    pool: Option<DepthwiseUpsample>,
    slope: f64,
}

/// The layout of one [`AdainResBlk1d`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResBlkSpec {
    pub dim_in: usize,
    pub dim_out: usize,
    pub style: usize,
    pub upsample: bool,
}

impl AdainResBlk1d {
    /// `<prefix>.{norm1,norm2,conv1,conv2}` (+ `conv1x1` when the width changes, `pool` when
    /// upsampling). `eps` is the instance norms' (1e-5), `slope` the LeakyReLU's (0.2).
    pub fn load(
        w: &Weights,
        prefix: &str,
        spec: ResBlkSpec,
        eps: f64,
        slope: f64,
    ) -> std::result::Result<Self, ModelError> {
        let ResBlkSpec {
            dim_in,
            dim_out,
            style,
            upsample,
        } = spec;
        let p = |name: &str| format!("{prefix}.{name}");
        let conv1x1 = if dim_in != dim_out {
            Some(Conv1d::load(
                w,
                &p("conv1x1"),
                (dim_in, dim_out, 1),
                ConvSpec {
                    bias: false,
                    ..ConvSpec::same(1)
                },
            )?)
        } else {
            None
        };
        let pool = if upsample {
            Some(DepthwiseUpsample::load(w, &p("pool"), dim_in)?)
        } else {
            None
        };
        Ok(Self {
            norm1: AdaIn1d::load(w, &p("norm1"), style, dim_in, eps)?,
            norm2: AdaIn1d::load(w, &p("norm2"), style, dim_out, eps)?,
            conv1: Conv1d::load(w, &p("conv1"), (dim_in, dim_out, 3), ConvSpec::same(3))?,
            conv2: Conv1d::load(w, &p("conv2"), (dim_out, dim_out, 3), ConvSpec::same(3))?,
            conv1x1,
            pool,
            slope,
        })
    }

    /// Runs the block's convolutions in `precision`.
    pub fn in_precision(&mut self, precision: Precision) {
        self.conv1.in_precision(precision);
        self.conv2.in_precision(precision);
        if let Some(c) = &mut self.conv1x1 {
            c.in_precision(precision);
        }
    }

    /// See [`Conv1d::release_unpacked`].
    pub fn release_unpacked(&mut self) -> Result<()> {
        self.conv1.release_unpacked()?;
        self.conv2.release_unpacked()?;
        if let Some(c) = &mut self.conv1x1 {
            c.release_unpacked()?;
        }
        Ok(())
    }

    /// `x` `[1, dim_in, T]`, `s` `[1, style]` → `[1, dim_out, T]` (`2T` when upsampling).
    pub fn forward(&self, x: &Tensor, s: &Tensor) -> Result<Tensor> {
        let mut r = leaky_relu(&self.norm1.forward(x, s)?, self.slope)?;
        if let Some(pool) = &self.pool {
            r = pool.forward(&r)?;
        }
        let r = self.conv1.forward(&r)?;
        let r = leaky_relu(&self.norm2.forward(&r, s)?, self.slope)?;
        let r = self.conv2.forward(&r)?;

        let mut shortcut = if self.pool.is_some() {
            repeat_frames(x)?
        } else {
            x.clone()
        };
        if let Some(c) = &self.conv1x1 {
            shortcut = c.forward(&shortcut)?;
        }
        (r + shortcut)? / std::f64::consts::SQRT_2
    }
}

/// `x` `[1, C, T]` → `[1, C, 2T]`, every frame twice (`F.interpolate(scale_factor=2,
/// mode="nearest")`).
pub(crate) fn repeat_frames(x: &Tensor) -> Result<Tensor> {
    let (b, c, t) = x.dims3()?;
    x.unsqueeze(3)?
        .broadcast_as((b, c, t, 2))?
        .reshape((b, c, 2 * t))
}

/// The upsampling block's `pool`: `ConvTranspose1d(C, C, kernel 3, stride 2, groups C,
/// padding 1, output_padding 1)`, weight `[C, 1, 3]`. Output frame `2t` is `w₁·x_t` and
/// `2t + 1` is `w₂·x_t + w₀·x_{t+1}` (plus the bias), which is how it runs here.
#[derive(Debug, Clone)]
pub(crate) struct DepthwiseUpsample {
    taps: [Tensor; 3],
    bias: Tensor,
}

impl DepthwiseUpsample {
    pub fn load(
        w: &Weights,
        prefix: &str,
        channels: usize,
    ) -> std::result::Result<Self, ModelError> {
        let weight = w.get_shaped(&format!("{prefix}.weight"), &[channels, 1, 3])?;
        let bias = w.get_shaped(&format!("{prefix}.bias"), &[channels])?;
        let tap = |k: usize| -> std::result::Result<Tensor, ModelError> {
            Ok(weight.narrow(2, k, 1)?.reshape((1, channels, 1))?)
        };
        Ok(Self {
            taps: [tap(0)?, tap(1)?, tap(2)?],
            bias: bias.reshape((1, channels, 1))?,
        })
    }

    /// `x` `[1, C, T]` → `[1, C, 2T]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, c, t) = x.dims3()?;
        let [w0, w1, w2] = &self.taps;
        let even = x.broadcast_mul(w1)?.broadcast_add(&self.bias)?;
        let next = x.pad_with_zeros(2, 0, 1)?.narrow(2, 1, t)?; // x_{t+1}, zero past the end
        let odd = (x.broadcast_mul(w2)? + next.broadcast_mul(w0)?)?.broadcast_add(&self.bias)?;
        Tensor::stack(&[even, odd], 3)?.reshape((b, c, 2 * t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use std::collections::HashMap;
    use std::path::Path;

    #[test]
    fn depthwise_upsample_matches_the_transposed_convolution() {
        let dev = Device::Cpu;
        let (c, t) = (3, 5);
        let weight = Tensor::arange(0f32, (c * 3) as f32, &dev)
            .unwrap()
            .affine(0.25, -1.0)
            .unwrap()
            .reshape((c, 1, 3))
            .unwrap();
        let bias = Tensor::new(&[0.5f32, -0.5, 1.0], &dev).unwrap();
        let x = Tensor::arange(0f32, (c * t) as f32, &dev)
            .unwrap()
            .sin()
            .unwrap()
            .reshape((1, c, t))
            .unwrap();
        let w = Weights::from_tensors(
            Path::new("t"),
            HashMap::from([
                ("p.weight".to_string(), weight.clone()),
                ("p.bias".to_string(), bias.clone()),
            ]),
        );
        let ours = DepthwiseUpsample::load(&w, "p", c)
            .unwrap()
            .forward(&x)
            .unwrap();
        let candle = x
            .conv_transpose1d(&weight, 1, 1, 2, 1, c)
            .unwrap()
            .broadcast_add(&bias.reshape((1, c, 1)).unwrap())
            .unwrap();
        assert_eq!(ours.dims(), [1, c, 2 * t]);
        let diff = (ours - candle).unwrap().abs().unwrap().max_all().unwrap();
        assert!(diff.to_scalar::<f32>().unwrap() < 1e-6);
    }

    #[test]
    fn repeat_frames_doubles_each_frame() {
        let x = Tensor::new(&[[[1f32, 2.0], [3.0, 4.0]]], &Device::Cpu).unwrap();
        let y = repeat_frames(&x).unwrap().to_vec3::<f32>().unwrap();
        assert_eq!(
            y,
            vec![vec![vec![1.0, 1.0, 2.0, 2.0], vec![3.0, 3.0, 4.0, 4.0]]]
        );
    }

    #[test]
    fn instance_norm_gives_zero_mean_unit_variance() {
        let x = Tensor::new(&[[[1f32, 2.0, 3.0, 6.0]]], &Device::Cpu).unwrap();
        let y = instance_norm(&x, 0.0)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let mean: f32 = y.iter().sum::<f32>() / 4.0;
        let var: f32 = y.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 4.0;
        assert!(mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-5, "{y:?}");
    }
}
