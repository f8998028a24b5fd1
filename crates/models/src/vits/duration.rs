//! Duration predictors: how many acoustic frames each phoneme lasts.
//!
//! Piper voices use VITS' stochastic predictor, a normalizing flow run in reverse from noise
//! (scaled by `noise_w`) that gives natural timing variation; some exports use the plain
//! deterministic conv predictor instead. Both return log-durations `logw` [B, 1, T].
//!
//! VITS paper (Kim et al. 2021, arXiv:2106.06103): §2.2.2 "Duration Prediction from Text" and
//! §2.5.5 "Stochastic Duration Predictor". In Piper's reference code
//! (`src/python/piper_train/vits/` in rhasspy/piper): `StochasticDurationPredictor` and
//! `DurationPredictor` in `models.py`, `DDSConv`, `ConvFlow`, `ElementwiseAffine` and `Flip` in
//! `modules.py`.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::config::{DurationPredictorConfig, VitsConfig};
use super::layers::{flip_channels, split_channels, ChannelNorm, Conv1d, ConvSpec};
use super::spline::{inverse_rq_spline, SplineParams};

/// Dilated depth-separable conv stack; layer i uses dilation kernel^i (`modules.DDSConv`).
#[derive(Debug, Clone)]
struct DdsConv {
    layers: Vec<(Conv1d, ChannelNorm, Conv1d, ChannelNorm)>,
}

impl DdsConv {
    fn load(vb: VarBuilder, channels: usize, kernel: usize, n_layers: usize) -> Result<Self> {
        let layers = (0..n_layers)
            .map(|i| {
                let separable = ConvSpec {
                    groups: channels,
                    ..ConvSpec::same(channels, channels, kernel, kernel.pow(i as u32))
                };
                Ok((
                    Conv1d::load(vb.pp(format!("convs_sep.{i}")), separable)?,
                    ChannelNorm::load(vb.pp(format!("norms_1.{i}")), channels)?,
                    Conv1d::load(
                        vb.pp(format!("convs_1x1.{i}")),
                        ConvSpec::pointwise(channels, channels),
                    )?,
                    ChannelNorm::load(vb.pp(format!("norms_2.{i}")), channels)?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    /// x ← x + GELU(LN(1×1(GELU(LN(sep(x·mask)))))) per layer; `g` is added first.
    fn forward(&self, x: &Tensor, mask: &Tensor, g: Option<&Tensor>) -> Result<Tensor> {
        let mut x = match g {
            Some(g) => (x + g)?,
            None => x.clone(),
        };
        for (sep, norm_1, pointwise, norm_2) in &self.layers {
            let y = sep.forward(&x.broadcast_mul(mask)?)?;
            let y = norm_1.forward_gelu(&y)?;
            let y = pointwise.forward(&y)?;
            let y = norm_2.forward_gelu(&y)?;
            x = (x + y)?;
        }
        x.broadcast_mul(mask)
    }
}

/// Coupling flow whose second channel goes through a rational-quadratic spline conditioned
/// on the first channel and the predictor's hidden states (`modules.ConvFlow`).
#[derive(Debug, Clone)]
struct ConvFlow {
    pre: Conv1d,
    convs: DdsConv,
    proj: Conv1d,
    num_bins: usize,
    tail_bound: f32,
    filter_channels: usize,
}

impl ConvFlow {
    /// Reverse pass: `z` [B, 2, T] → [B, 2, T].
    fn reverse(&self, z: &Tensor, mask: &Tensor, h_dp: &Tensor) -> Result<Tensor> {
        let (x0, x1) = split_channels(z, 1)?;
        let h = self.pre.forward(&x0)?;
        let h = self.convs.forward(&h, mask, Some(h_dp))?;
        // [B, 3K − 1, T]: K widths, K heights, K − 1 interior derivatives per frame.
        let params = self.proj.forward(&h)?.broadcast_mul(mask)?;
        let (b, n_params, t) = params.dims3()?;
        let params = params
            .transpose(1, 2)?
            .contiguous()?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let y = x1.contiguous()?.flatten_all()?.to_vec1::<f32>()?;

        let k = self.num_bins;
        let scale = (self.filter_channels as f32).sqrt();
        let mut out = Vec::with_capacity(y.len());
        let (mut widths, mut heights) = (vec![0f32; k], vec![0f32; k]);
        for (i, &yi) in y.iter().enumerate() {
            let p = &params[i * n_params..(i + 1) * n_params];
            for j in 0..k {
                widths[j] = p[j] / scale;
                heights[j] = p[k + j] / scale;
            }
            let spline = SplineParams {
                widths: &widths,
                heights: &heights,
                derivatives: &p[2 * k..],
            };
            out.push(inverse_rq_spline(yi, &spline, self.tail_bound));
        }
        let x1 = Tensor::from_vec(out, (b, 1, t), z.device())?;
        Tensor::cat(&[&x0, &x1], 1)?.broadcast_mul(mask)
    }
}

/// `dp` as `models.StochasticDurationPredictor`, of which inference runs only the reverse
/// branch (`flows`; the posterior `post_*` layers are for training).
#[derive(Debug, Clone)]
pub struct StochasticDurationPredictor {
    pre: Conv1d,
    convs: DdsConv,
    proj: Conv1d,
    cond: Option<Conv1d>,
    /// Applied in this order (descending flow index), each preceded by a channel flip.
    conv_flows: Vec<ConvFlow>,
    /// ElementwiseAffine `flows.0`: `[2, 1]` mean and log-scale.
    affine_m: Tensor,
    affine_logs: Tensor,
}

impl StochasticDurationPredictor {
    /// `noise` [B, 2, T] is N(0, 1) already multiplied by each item's `noise_w`.
    pub fn reverse(
        &self,
        x: &Tensor,
        mask: &Tensor,
        g: Option<&Tensor>,
        noise: &Tensor,
    ) -> Result<Tensor> {
        let mut h = self.pre.forward(x)?;
        if let (Some(cond), Some(g)) = (&self.cond, g) {
            h = h.broadcast_add(&cond.forward(g)?)?;
        }
        let h = self.convs.forward(&h, mask, None)?;
        let h = self.proj.forward(&h)?.broadcast_mul(mask)?;

        // Reverse of [Affine, ConvFlow, Flip, ConvFlow, Flip, …] without the unused first
        // ConvFlow: (Flip, ConvFlow)* then Flip, then the affine.
        let mut z = noise.clone();
        for flow in &self.conv_flows {
            z = flow.reverse(&flip_channels(&z)?, mask, &h)?;
        }
        let z = flip_channels(&z)?;
        // Affine reverse: (z − m)·exp(−logs)·mask.
        let z = z
            .broadcast_sub(&self.affine_m)?
            .broadcast_mul(&self.affine_logs.neg()?.exp()?)?
            .broadcast_mul(mask)?;
        z.narrow(1, 0, 1)
    }
}

/// `dp` as `models.DurationPredictor`: two conv + ReLU + LayerNorm layers and a projection.
#[derive(Debug, Clone)]
pub struct DeterministicDurationPredictor {
    conv_1: Conv1d,
    norm_1: ChannelNorm,
    conv_2: Conv1d,
    norm_2: ChannelNorm,
    proj: Conv1d,
    cond: Option<Conv1d>,
}

impl DeterministicDurationPredictor {
    pub fn forward(&self, x: &Tensor, mask: &Tensor, g: Option<&Tensor>) -> Result<Tensor> {
        let mut x = x.clone();
        if let (Some(cond), Some(g)) = (&self.cond, g) {
            x = x.broadcast_add(&cond.forward(g)?)?;
        }
        let x = self.conv_1.forward(&x.broadcast_mul(mask)?)?.relu()?;
        let x = self.norm_1.forward(&x)?;
        let x = self.conv_2.forward(&x.broadcast_mul(mask)?)?.relu()?;
        let x = self.norm_2.forward(&x)?;
        self.proj
            .forward(&x.broadcast_mul(mask)?)?
            .broadcast_mul(mask)
    }
}

/// Whichever predictor the voice was trained with (`use_sdp` in Piper's `SynthesizerTrn`).
#[derive(Debug, Clone)]
pub enum DurationPredictor {
    Stochastic(StochasticDurationPredictor),
    Deterministic(DeterministicDurationPredictor),
}

impl DurationPredictor {
    pub fn load(vb: VarBuilder, cfg: &VitsConfig) -> Result<Self> {
        let h = cfg.hidden_channels;
        let cond = |filter: usize| -> Result<Option<Conv1d>> {
            if cfg.gin_channels == 0 {
                return Ok(None);
            }
            Conv1d::load(vb.pp("cond"), ConvSpec::pointwise(cfg.gin_channels, filter)).map(Some)
        };
        match &cfg.duration_predictor {
            DurationPredictorConfig::Stochastic {
                filter_channels: f,
                kernel_size: k,
                dds_layers,
                conv_flows,
                num_bins,
                tail_bound,
            } => {
                let (f, k) = (*f, *k);
                let flows = conv_flows
                    .iter()
                    .rev()
                    .filter(|&&i| i != 1) // the first ConvFlow is unused in reverse
                    .map(|i| {
                        let vb = vb.pp(format!("flows.{i}"));
                        Ok(ConvFlow {
                            pre: Conv1d::load(vb.pp("pre"), ConvSpec::pointwise(1, f))?,
                            convs: DdsConv::load(vb.pp("convs"), f, k, *dds_layers)?,
                            proj: Conv1d::load(
                                vb.pp("proj"),
                                ConvSpec::pointwise(f, 3 * num_bins - 1),
                            )?,
                            num_bins: *num_bins,
                            tail_bound: *tail_bound,
                            filter_channels: f,
                        })
                    })
                    .collect::<Result<_>>()?;
                Ok(Self::Stochastic(StochasticDurationPredictor {
                    pre: Conv1d::load(vb.pp("pre"), ConvSpec::pointwise(h, f))?,
                    convs: DdsConv::load(vb.pp("convs"), f, k, *dds_layers)?,
                    proj: Conv1d::load(vb.pp("proj"), ConvSpec::pointwise(f, f))?,
                    cond: cond(f)?,
                    conv_flows: flows,
                    affine_m: vb.get((2, 1), "flows.0.m")?,
                    affine_logs: vb.get((2, 1), "flows.0.logs")?,
                }))
            }
            DurationPredictorConfig::Deterministic {
                filter_channels: f,
                kernel_size: k,
            } => Ok(Self::Deterministic(DeterministicDurationPredictor {
                conv_1: Conv1d::load(vb.pp("conv_1"), ConvSpec::same(h, *f, *k, 1))?,
                norm_1: ChannelNorm::load(vb.pp("norm_1"), *f)?,
                conv_2: Conv1d::load(vb.pp("conv_2"), ConvSpec::same(*f, *f, *k, 1))?,
                norm_2: ChannelNorm::load(vb.pp("norm_2"), *f)?,
                proj: Conv1d::load(vb.pp("proj"), ConvSpec::pointwise(*f, 1))?,
                cond: cond(h)?,
            })),
        }
    }

    /// Log-durations `[B, 1, T]` from encoder states `x` [B, H, T]. `noise` [B, 2, T]
    /// (already × noise_w) is only used by the stochastic predictor.
    pub fn log_durations(
        &self,
        x: &Tensor,
        mask: &Tensor,
        g: Option<&Tensor>,
        noise: &Tensor,
    ) -> Result<Tensor> {
        match self {
            Self::Stochastic(dp) => dp.reverse(x, mask, g, noise),
            Self::Deterministic(dp) => dp.forward(x, mask, g),
        }
    }
}
