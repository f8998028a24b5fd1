//! The HiFi-GAN decoder `dec`: latent frames z [B, C, F] → waveform [B, 1, F·hop].
//!
//! The VITS paper's decoder (Kim et al. 2021, arXiv:2106.06103, §2.5.3 "Decoder") is the
//! HiFi-GAN V1 generator: transposed convolutions upsample by the hop length in stages; after
//! each, a bank of residual blocks with different kernel sizes is averaged (multi-receptive-field
//! fusion, MRF). In Piper's reference code (`src/python/piper_train/vits/` in rhasspy/piper) it
//! is `Generator` in `models.py`, with `ResBlock1` / `ResBlock2` in `modules.py`.
//! In a padded batch every convolution input is masked to the item's own length so that an
//! item sees exactly the zero padding it would see alone.
//!
//! [`Generator::forward`] is the paper's loop; [`Stage`] and [`Mean`] keep the CPU fusions
//! (LeakyReLU, masks and the MRF mean folded into the next convolution, the strip-wise MRF
//! of `super::kernels`) out of it.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::config::{ResBlockKind, VitsConfig};
use super::layers::{apply_mask, Conv1d, ConvSpec, Reach};
use crate::kernels::{self, InputMap, Precision};

/// LeakyReLU slope inside HiFi-GAN.
const LRELU_SLOPE: f64 = 0.1;
/// PyTorch's default LeakyReLU slope, used before `conv_post`.
const FINAL_LRELU_SLOPE: f64 = 0.01;

/// One MRF residual block: Piper's `ResBlock1` (type 1, `convs1` / `convs2`) or `ResBlock2`
/// (type 2, `convs`) in `modules.py`.
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
        precision: Precision,
    ) -> Result<Self> {
        let conv = |name: String, spec| -> Result<Conv1d> {
            Ok(Conv1d::load(vb.pp(name), spec)?.with_precision(precision))
        };
        let steps = dilations
            .iter()
            .enumerate()
            .map(|(n, &d)| {
                let dilated = ConvSpec::same(channels, channels, kernel, d);
                let plain = ConvSpec::same(channels, channels, kernel, 1);
                Ok(match kind {
                    ResBlockKind::One => (
                        conv(format!("convs1.{n}"), dilated)?,
                        Some(conv(format!("convs2.{n}"), plain)?),
                    ),
                    ResBlockKind::Two => (conv(format!("convs.{n}"), dilated)?, None),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self { steps })
    }

    /// Its convolutions run one after another.
    fn reach(&self) -> Reach {
        self.steps
            .iter()
            .flat_map(|(dilated, plain)| std::iter::once(dilated).chain(plain))
            .map(Conv1d::reach)
            .fold(Reach::default(), Reach::then)
    }

    /// The block as residual units for [`kernels::residual_stack_sum`].
    fn units(&self) -> Vec<Vec<kernels::StackConv<'_>>> {
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
            channels: None,
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

/// `ups[i]`: a transposed convolution that upsamples by `stride`.
#[derive(Debug, Clone)]
struct Upsample {
    weight: Tensor,
    bias: Tensor,
    stride: usize,
    padding: usize,
    kernel: usize,
    /// The direct kernel's per-phase layout of `weight` in the decoder's precision.
    packed: kernels::PackedPhaseCache,
}

/// The mean of a stage's resblocks, kept as their sum until the next convolution reads it:
/// LeakyReLU(s / n) = LeakyReLU(s) / n, so the division rides along in that convolution's
/// input map instead of costing a pass over the signal.
struct Mean {
    /// [B, C, L]
    sum: Tensor,
    count: usize,
}

impl Mean {
    fn of_one(x: Tensor) -> Self {
        Self { sum: x, count: 1 }
    }

    /// `LeakyReLU(mean, slope) · mask` as the input map of the convolution that reads it.
    fn leaky_relu<'m>(&self, slope: f64, mask: Option<&'m Tensor>) -> InputMap<'m> {
        InputMap {
            scale: 1.0 / self.count as f64,
            leaky_slope: Some(slope),
            mask,
            channels: None,
        }
    }
}

/// One upsampling stage of the generator: `ups[i]`, then the MRF over its resblocks
/// `resblocks[i·K .. (i+1)·K]` (K kernel sizes).
#[derive(Debug, Clone)]
struct Stage {
    upsample: Upsample,
    resblocks: Vec<ResBlock>,
}

impl Stage {
    /// Which inputs each output block (the `stride` samples one input makes) reads, through
    /// the transposed convolution and the widest resblock after it.
    fn reach(&self) -> Reach {
        let mrf = self
            .resblocks
            .iter()
            .map(ResBlock::reach)
            .fold(Reach::default(), Reach::max);
        let up = &self.upsample;
        let (s, p, k) = (up.stride as i64, up.padding as i64, up.kernel as i64);
        // Output sample n = m·s − p + j (tap j < k) reads inputs m in
        // ⌈(n + p − k + 1) / s⌉ ..= ⌊(n + p) / s⌋. Block m0 spans n = m0·s ..= m0·s + s − 1,
        // widened by the resblocks' reach.
        let left = (k - 1 - p + mrf.left as i64).div_euclid(s);
        let right = 1 + (mrf.right as i64 + p - 1).div_euclid(s);
        Reach {
            left: left.max(0) as usize,
            right: right.max(0) as usize,
        }
    }

    /// `x` [B, C, L] → MRF(ups(LeakyReLU(x))) [B, C / 2, L·stride]. `mask_in` [B, 1, L] and
    /// `mask_out` [B, 1, L·stride] (padded batches only) mask every convolution's input.
    fn forward(
        &self,
        x: &Mean,
        mask_in: Option<&Tensor>,
        mask_out: Option<&Tensor>,
    ) -> Result<Mean> {
        let up = &self.upsample;
        let y = kernels::conv_transpose1d_fused(
            &x.sum,
            &up.weight,
            Some(&up.bias),
            up.stride,
            up.padding,
            &x.leaky_relu(LRELU_SLOPE, mask_in),
            Some(&up.packed),
        )?;
        Ok(Mean {
            sum: self.resblock_sum(&y, mask_out)?,
            count: self.resblocks.len(),
        })
    }

    /// `Σ_j resblock_j(y)`: strip by strip on the CPU once the signal outgrows the cache,
    /// otherwise block by block, each block adding itself to the running sum.
    fn resblock_sum(&self, y: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let units: Vec<_> = self.resblocks.iter().map(ResBlock::units).collect();
        if let Some(sum) = kernels::residual_stack_sum(y, &units, LRELU_SLOPE, mask)? {
            return Ok(sum);
        }
        let mut sum: Option<Tensor> = None;
        for block in &self.resblocks {
            sum = Some(block.forward(y, mask, sum.as_ref())?);
        }
        Ok(sum.expect("at least one resblock per stage"))
    }
}

/// The decoder: Piper's `Generator` (`models.py`), loaded from `dec.*`.
#[derive(Debug, Clone)]
pub struct Generator {
    conv_pre: Conv1d,
    cond: Option<Conv1d>,
    stages: Vec<Stage>,
    conv_post: Conv1d,
}

impl Generator {
    /// Loads `dec.*`; its convolutions run in `precision` on the CPU (a layer too narrow for
    /// it, like the single-channel `conv_post`, keeps `f32`).
    pub fn load(vb: VarBuilder, cfg: &VitsConfig, precision: Precision) -> Result<Self> {
        let d = &cfg.decoder;
        let c0 = d.initial_channels;
        let conv_pre = Conv1d::load(
            vb.pp("conv_pre"),
            ConvSpec::same(cfg.inter_channels, c0, d.pre_kernel_size, 1),
        )?
        .with_precision(precision);
        let cond = if cfg.gin_channels > 0 {
            Some(Conv1d::load(
                vb.pp("cond"),
                ConvSpec::pointwise(cfg.gin_channels, c0),
            )?)
        } else {
            None
        };
        let n_kernels = d.resblock_kernel_sizes.len();
        let stages = d
            .upsample_rates
            .iter()
            .zip(&d.upsample_kernel_sizes)
            .enumerate()
            .map(|(i, (&u, &k))| {
                let (c_in, c_out) = (c0 >> i, c0 >> (i + 1));
                let vb_up = vb.pp(format!("ups.{i}"));
                let upsample = Upsample {
                    weight: vb_up.get((c_in, c_out, k), "weight")?,
                    bias: vb_up.get(c_out, "bias")?,
                    stride: u,
                    padding: (k - u) / 2,
                    kernel: k,
                    packed: kernels::PackedPhaseCache::new(precision),
                };
                let resblocks = d
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
                            precision,
                        )
                    })
                    .collect::<Result<_>>()?;
                Ok(Stage {
                    upsample,
                    resblocks,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let last = c0 >> d.upsample_rates.len();
        let conv_post = Conv1d::load(
            vb.pp("conv_post"),
            ConvSpec {
                bias: d.post_bias,
                ..ConvSpec::same(last, 1, d.post_kernel_size, 1)
            },
        )?
        .with_precision(precision);
        Ok(Self {
            conv_pre,
            cond,
            stages,
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
        let mut x = Mean::of_one(self.pre(z, g, mask(0))?);
        // Stage i: upsample, then MRF: [B, C0 / 2^i, L] → [B, C0 / 2^(i+1), L·u_i].
        for (i, stage) in self.stages.iter().enumerate() {
            x = stage.forward(&x, mask(i), mask(i + 1))?;
        }
        self.post(&x, mask(self.stages.len()))
    }

    /// How many pieces [`Generator::run_piece`] cuts the decoder into: `conv_pre`, one per
    /// upsampling stage, `conv_post`.
    pub fn pieces(&self) -> usize {
        self.stages.len() + 2
    }

    /// Piece `i`'s upsampling factor, and which inputs it reads around each output block.
    pub fn piece_shape(&self, i: usize) -> (usize, Reach) {
        match i {
            0 => (1, self.conv_pre.reach()),
            i if i <= self.stages.len() => {
                let stage = &self.stages[i - 1];
                (stage.upsample.stride, stage.reach())
            }
            _ => (1, self.conv_post.reach()),
        }
    }

    /// Piece `i` of [`Generator::forward`] on its own (one item, no masks), reading piece
    /// `i − 1`'s output (piece 0 reads z). Between stages the signal is the sum of the last
    /// stage's resblocks (see [`Mean`]).
    pub fn run_piece(&self, i: usize, x: &Tensor, g: Option<&Tensor>) -> Result<Tensor> {
        if i == 0 {
            return self.pre(x, g, None);
        }
        let count = match i {
            1 => 1,
            i => self.stages[i - 2].resblocks.len(),
        };
        let x = Mean {
            sum: x.clone(),
            count,
        };
        match self.stages.get(i - 1) {
            Some(stage) => Ok(stage.forward(&x, None, None)?.sum),
            None => self.post(&x, None),
        }
    }

    /// conv_pre, plus the speaker's conditioning: [B, C, F] → [B, C0, F].
    fn pre(&self, z: &Tensor, g: Option<&Tensor>, mask: Option<&Tensor>) -> Result<Tensor> {
        let x = self.conv_pre.forward(&apply_mask(z, mask)?)?;
        match (&self.cond, g) {
            (Some(cond), Some(g)) => x.broadcast_add(&cond.forward(g)?),
            _ => Ok(x),
        }
    }

    /// tanh(conv_post(LeakyReLU(x))): [B, C_last, F·hop] → [B, 1, F·hop].
    fn post(&self, x: &Mean, mask: Option<&Tensor>) -> Result<Tensor> {
        let map = x.leaky_relu(FINAL_LRELU_SLOPE, mask);
        kernels::tanh(&self.conv_post.forward_fused(&x.sum, &map, &[])?)
    }
}
