//! The HiFi-GAN decoder `dec`: latent frames z [B, C, F] → waveform [B, 1, F·hop].
//!
//! Transposed convolutions upsample by the hop length in stages; after each, a bank of
//! residual blocks with different kernel sizes is averaged (multi-receptive-field fusion).
//! In a padded batch every convolution input is masked to the item's own length so that an
//! item sees exactly the zero padding it would see alone.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::config::{ResBlockKind, VitsConfig};
use super::conv::{self, InputMap};
use super::layers::{apply_mask, Conv1d, ConvSpec};

/// LeakyReLU slope inside HiFi-GAN.
const LRELU_SLOPE: f64 = 0.1;
/// PyTorch's default LeakyReLU slope, used before `conv_post`.
const FINAL_LRELU_SLOPE: f64 = 0.01;

#[derive(Debug, Clone)]
struct ResBlock {
    /// Per step: dilated conv, and for type 1 a dilation-1 conv after it.
    steps: Vec<(Conv1d, Option<Conv1d>)>,
}

impl ResBlock {
    fn load(
        vb: VarBuilder,
        kind: ResBlockKind,
        channels: usize,
        kernel: usize,
        dilations: &[usize],
    ) -> Result<Self> {
        let steps = dilations
            .iter()
            .enumerate()
            .map(|(n, &d)| {
                let dilated = ConvSpec::same(channels, channels, kernel, d);
                let plain = ConvSpec::same(channels, channels, kernel, 1);
                Ok(match kind {
                    ResBlockKind::One => (
                        Conv1d::load(vb.pp(format!("convs1.{n}")), dilated)?,
                        Some(Conv1d::load(vb.pp(format!("convs2.{n}")), plain)?),
                    ),
                    ResBlockKind::Two => {
                        (Conv1d::load(vb.pp(format!("convs.{n}")), dilated)?, None)
                    }
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self { steps })
    }

    /// The block as residual units for [`conv::residual_stack_sum`].
    fn units(&self) -> Vec<Vec<conv::StackConv<'_>>> {
        self.steps
            .iter()
            .map(|(dilated, plain)| {
                std::iter::once(dilated)
                    .chain(plain)
                    .map(Conv1d::as_stack_conv)
                    .collect()
            })
            .collect()
    }

    /// x ← x + conv(LeakyReLU(x)) per step (type 1: two convs per step); each convolution
    /// applies the activation and mask to its input and adds the residual itself. With `sum`,
    /// returns `sum + x` instead (the last convolution adds it), for the stage's mean.
    fn forward(&self, x: &Tensor, mask: Option<&Tensor>, sum: Option<&Tensor>) -> Result<Tensor> {
        let map = InputMap {
            scale: 1.0,
            leaky_slope: Some(LRELU_SLOPE),
            mask,
        };
        let mut x = x.clone();
        for (step, (dilated, plain)) in self.steps.iter().enumerate() {
            let last = step + 1 == self.steps.len();
            let residuals: Vec<&Tensor> = std::iter::once(&x).chain(sum.filter(|_| last)).collect();
            x = match plain {
                None => dilated.forward_fused(&x, &map, &residuals)?,
                Some(plain) => {
                    let y = dilated.forward_fused(&x, &map, &[])?;
                    plain.forward_fused(&y, &map, &residuals)?
                }
            };
        }
        match (sum, self.steps.is_empty()) {
            (Some(s), true) => s + x,
            _ => Ok(x),
        }
    }
}

#[derive(Debug, Clone)]
struct Upsample {
    weight: Tensor,
    bias: Tensor,
    stride: usize,
    padding: usize,
}

#[derive(Debug, Clone)]
pub struct Generator {
    conv_pre: Conv1d,
    cond: Option<Conv1d>,
    ups: Vec<Upsample>,
    /// `resblocks[stage]` holds that stage's kernels.
    resblocks: Vec<Vec<ResBlock>>,
    conv_post: Conv1d,
}

impl Generator {
    pub fn load(vb: VarBuilder, cfg: &VitsConfig) -> Result<Self> {
        let d = &cfg.decoder;
        let c0 = d.initial_channels;
        let conv_pre = Conv1d::load(
            vb.pp("conv_pre"),
            ConvSpec::same(cfg.inter_channels, c0, d.pre_kernel_size, 1),
        )?;
        let cond = if cfg.gin_channels > 0 {
            Some(Conv1d::load(
                vb.pp("cond"),
                ConvSpec::pointwise(cfg.gin_channels, c0),
            )?)
        } else {
            None
        };
        let mut ups = Vec::new();
        let mut resblocks = Vec::new();
        let n_kernels = d.resblock_kernel_sizes.len();
        for (i, (&u, &k)) in d
            .upsample_rates
            .iter()
            .zip(&d.upsample_kernel_sizes)
            .enumerate()
        {
            let (c_in, c_out) = (c0 >> i, c0 >> (i + 1));
            let vb_up = vb.pp(format!("ups.{i}"));
            ups.push(Upsample {
                weight: vb_up.get((c_in, c_out, k), "weight")?,
                bias: vb_up.get(c_out, "bias")?,
                stride: u,
                padding: (k - u) / 2,
            });
            let stage = d
                .resblock_kernel_sizes
                .iter()
                .zip(&d.resblock_dilations)
                .enumerate()
                .map(|(j, (&kernel, dilations))| {
                    ResBlock::load(
                        vb.pp(format!("resblocks.{}", i * n_kernels + j)),
                        d.resblock,
                        c_out,
                        kernel,
                        dilations,
                    )
                })
                .collect::<Result<_>>()?;
            resblocks.push(stage);
        }
        let last = c0 >> d.upsample_rates.len();
        let conv_post = Conv1d::load(
            vb.pp("conv_post"),
            ConvSpec {
                bias: d.post_bias,
                ..ConvSpec::same(last, 1, d.post_kernel_size, 1)
            },
        )?;
        Ok(Self {
            conv_pre,
            cond,
            ups,
            resblocks,
            conv_post,
        })
    }

    /// `z` [B, C, F] → audio [B, 1, F·hop] in [−1, 1]. `masks` (batches of unequal lengths
    /// only) holds the item masks at the frame rate and after each upsampling stage.
    pub fn forward(
        &self,
        z: &Tensor,
        g: Option<&Tensor>,
        masks: Option<&[Tensor]>,
    ) -> Result<Tensor> {
        let mask = |i: usize| masks.map(|m| &m[i]);
        let mut x = self.conv_pre.forward(&apply_mask(z, mask(0))?)?;
        if let (Some(cond), Some(g)) = (&self.cond, g) {
            x = x.broadcast_add(&cond.forward(g)?)?;
        }
        // Each stage ends with the mean of its resblocks; the division is folded into the next
        // convolution's input map (LeakyReLU(s / n) = LeakyReLU(s) / n), saving a pass.
        let mut scale = 1.0;
        for (i, (up, stage)) in self.ups.iter().zip(&self.resblocks).enumerate() {
            let map = InputMap {
                scale,
                leaky_slope: Some(LRELU_SLOPE),
                mask: mask(i),
            };
            let y = conv::conv_transpose1d_fused(
                &x,
                &up.weight,
                Some(&up.bias),
                up.stride,
                up.padding,
                &map,
            )?;
            // Multi-receptive-field fusion: mean of the stage's resblocks.
            let units: Vec<_> = stage.iter().map(ResBlock::units).collect();
            x = match conv::residual_stack_sum(&y, &units, LRELU_SLOPE, mask(i + 1))? {
                Some(sum) => sum,
                None => {
                    let mut sum: Option<Tensor> = None;
                    for block in stage {
                        sum = Some(block.forward(&y, mask(i + 1), sum.as_ref())?);
                    }
                    sum.expect("at least one resblock per stage")
                }
            };
            scale = 1.0 / stage.len() as f64;
        }
        let map = InputMap {
            scale,
            leaky_slope: Some(FINAL_LRELU_SLOPE),
            mask: mask(self.ups.len()),
        };
        super::fast_math::tanh(&self.conv_post.forward_fused(&x, &map, &[])?)
    }
}
