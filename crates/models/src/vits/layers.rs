//! Building blocks shared by every VITS sub-network.
//!
//! VITS works on `[B, C, T]` tensors with a `[B, 1, T]` mask; these small wrappers keep the
//! layout conventions (channel-wise LayerNorm, masked "same" convolutions) in one place so the
//! sub-networks can read like the paper. Their counterparts in Piper's reference code
//! (`src/python/piper_train/vits/` in rhasspy/piper) are PyTorch's `Conv1d` (weight norm
//! already folded in by the export), `modules.LayerNorm`, `modules.Flip` and
//! `commons.sequence_mask`. How the convolutions run is `super::kernels`' business.

use candle_core::{Device, Result, Tensor};
use candle_nn::VarBuilder;

use crate::kernels;
use crate::layers::FusedConv1d;

/// A 1-D convolution with its hyperparameters fixed at load time: the shared
/// [`FusedConv1d`] (its packed weights kept, in the layer's precision), and VITS' groups, for
/// which it falls back to [`kernels::conv1d`].
#[derive(Debug, Clone)]
pub struct Conv1d {
    conv: FusedConv1d,
    groups: usize,
}

/// How far a layer reads around the position it writes: output `n` depends on inputs
/// `n − left ..= n + right` (in the layer's input units; see `super::streaming`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    pub left: usize,
    pub right: usize,
}

impl Reach {
    /// `self`'s layer followed by `next` at the same rate.
    pub fn then(self, next: Reach) -> Reach {
        Reach {
            left: self.left + next.left,
            right: self.right + next.right,
        }
    }

    /// Parallel branches summed at the same rate.
    pub fn max(self, other: Reach) -> Reach {
        Reach {
            left: self.left.max(other.left),
            right: self.right.max(other.right),
        }
    }
}

/// How to load a [`Conv1d`]: shapes are checked against the stored weight.
#[derive(Debug, Clone, Copy)]
pub struct ConvSpec {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel_size: usize,
    pub dilation: usize,
    pub groups: usize,
    pub bias: bool,
}

impl ConvSpec {
    /// A pointwise (kernel 1) convolution with bias, the most common layer in VITS.
    pub fn pointwise(in_channels: usize, out_channels: usize) -> Self {
        Self::same(in_channels, out_channels, 1, 1)
    }

    /// A "same" convolution (output length = input length) with bias.
    pub fn same(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        dilation: usize,
    ) -> Self {
        Self {
            in_channels,
            out_channels,
            kernel_size,
            dilation,
            groups: 1,
            bias: true,
        }
    }
}

impl Conv1d {
    /// Loads `weight` [C_out, C_in / groups, K] (and `bias` [C_out]) from `vb`; padding keeps the length.
    pub fn load(vb: VarBuilder, spec: ConvSpec) -> Result<Self> {
        let weight = vb.get(
            (
                spec.out_channels,
                spec.in_channels / spec.groups,
                spec.kernel_size,
            ),
            "weight",
        )?;
        let bias = if spec.bias {
            Some(vb.get(spec.out_channels, "bias")?)
        } else {
            None
        };
        Ok(Self {
            conv: FusedConv1d::new(
                weight,
                bias,
                spec.dilation,
                kernels::PackedWeightCache::default(),
            )?,
            groups: spec.groups,
        })
    }

    /// The same layer with its convolution run in `precision` on the CPU (other devices
    /// always run `f32`).
    pub fn with_precision(self, precision: kernels::Precision) -> Self {
        Self {
            conv: self
                .conv
                .with_cache(kernels::PackedWeightCache::new(precision)),
            ..self
        }
    }

    /// `x` [B, C_in, T] → [B, C_out, T].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        // Convolutions that take the direct kernel anyway (groups 1, 3+ taps, or any reduced
        // precision, which only the direct kernel has) go through the fused entry point to
        // reuse the packed weights.
        let c = &self.conv;
        let reduced = c.cache().precision() != kernels::Precision::F32;
        if self.groups == 1 && (c.weight().dim(2)? >= 3 || reduced) {
            return self.forward_fused(x, &kernels::InputMap::IDENTITY, &[]);
        }
        kernels::conv1d(
            x,
            c.weight(),
            c.bias(),
            c.padding(),
            c.dilation(),
            self.groups,
        )
    }
}

impl Conv1d {
    /// Which inputs each output reads, from the loaded kernel, dilation and padding.
    pub fn reach(&self) -> Reach {
        let c = &self.conv;
        let span = c.dilation() * (c.weight().dims()[2] - 1);
        Reach {
            left: c.padding(),
            right: span - c.padding(),
        }
    }

    /// This layer as one convolution of a residual stack (groups 1, "same" padding).
    pub fn as_stack_conv(&self) -> kernels::StackConv<'_> {
        self.conv.as_stack_conv()
    }

    /// `Σ residuals + self(map(x))` with the map and residuals fused into the convolution
    /// where the kernel supports it (groups 1; see [`kernels::conv1d_fused`]).
    pub fn forward_fused(
        &self,
        x: &Tensor,
        map: &kernels::InputMap<'_>,
        residuals: &[&Tensor],
    ) -> Result<Tensor> {
        if self.groups != 1 {
            let mut y = self.forward(&map.apply(x)?)?;
            for r in residuals {
                y = (*r + y)?;
            }
            return Ok(y);
        }
        self.conv.forward_fused(x, map, residuals)
    }
}

/// LayerNorm over the channel axis of a `[B, C, T]` tensor (VITS' `modules.LayerNorm`).
#[derive(Debug, Clone)]
pub struct ChannelNorm {
    gamma: Tensor,
    beta: Tensor,
}

impl ChannelNorm {
    pub const EPS: f32 = 1e-5;

    pub fn load(vb: VarBuilder, channels: usize) -> Result<Self> {
        Ok(Self {
            gamma: vb.get(channels, "gamma")?,
            beta: vb.get(channels, "beta")?,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.run(x, None, false)
    }

    /// `LN(x + residual)`: the post-norm after a residual block.
    pub fn forward_sum(&self, x: &Tensor, residual: &Tensor) -> Result<Tensor> {
        self.run(x, Some(residual), false)
    }

    /// `GELU(LN(x))`.
    pub fn forward_gelu(&self, x: &Tensor) -> Result<Tensor> {
        self.run(x, None, true)
    }

    fn run(&self, x: &Tensor, residual: Option<&Tensor>, gelu: bool) -> Result<Tensor> {
        let fused = kernels::channel_norm(x, residual, &self.gamma, &self.beta, Self::EPS, gelu)?;
        if let Some(y) = fused {
            return Ok(y);
        }
        let x = match residual {
            Some(r) => (x + r)?,
            None => x.clone(),
        };
        let x = x.transpose(1, 2)?.contiguous()?;
        let y =
            candle_nn::ops::layer_norm(&x, &self.gamma, &self.beta, Self::EPS)?.transpose(1, 2)?;
        if gelu {
            y.gelu_erf()
        } else {
            Ok(y)
        }
    }
}

/// `[B, 1, max_len]` mask with ones before each item's length and zeros after it.
pub fn sequence_mask(lengths: &[usize], max_len: usize, device: &Device) -> Result<Tensor> {
    let mut data = vec![0f32; lengths.len() * max_len];
    for (row, &len) in data.chunks_mut(max_len.max(1)).zip(lengths) {
        row[..len.min(max_len)].fill(1.0);
    }
    Tensor::from_vec(data, (lengths.len(), 1, max_len), device)
}

/// Splits `[B, C, T]` into the first `c0` channels and the rest.
pub fn split_channels(x: &Tensor, c0: usize) -> Result<(Tensor, Tensor)> {
    let c = x.dim(1)?;
    Ok((x.narrow(1, 0, c0)?, x.narrow(1, c0, c - c0)?))
}

/// Reverses the channel order (VITS' `Flip` flow, its own inverse).
pub fn flip_channels(x: &Tensor) -> Result<Tensor> {
    let c = x.dim(1)?;
    let order: Vec<u32> = (0..c as u32).rev().collect();
    x.index_select(&Tensor::new(order, x.device())?, 1)
}

/// Multiplies by `mask` when there is one (a batch whose items all have the full length has none).
pub fn apply_mask(x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    match mask {
        Some(m) => x.broadcast_mul(m),
        None => Ok(x.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_mask_marks_each_length() -> Result<()> {
        let m = sequence_mask(&[1, 3, 0], 3, &Device::Cpu)?;
        assert_eq!(
            m.to_vec3::<f32>()?,
            vec![
                vec![vec![1., 0., 0.]],
                vec![vec![1., 1., 1.]],
                vec![vec![0., 0., 0.]]
            ]
        );
        Ok(())
    }

    #[test]
    fn flip_reverses_channels() -> Result<()> {
        let x = Tensor::arange(0f32, 6., &Device::Cpu)?.reshape((1, 3, 2))?;
        let y = flip_channels(&x)?;
        assert_eq!(
            y.to_vec3::<f32>()?,
            vec![vec![vec![4., 5.], vec![2., 3.], vec![0., 1.]]]
        );
        Ok(())
    }
}
