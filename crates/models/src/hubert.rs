//! HuBERT (Hsu et al., "HuBERT: Self-Supervised Speech Representation Learning by Masked
//! Prediction of Hidden Units"), the base model without any head, in candle.
//!
//! It exists for OmniVoice's codec: the Higgs-Audio-v2 tokenizer's encoder describes 16 kHz
//! audio by the mean of all of HuBERT-base's hidden states. So this is the inference forward
//! of transformers' `HubertModel` as that checkpoint configures it: a strided convolutional
//! feature encoder (group norm on its first layer), a projection to the model width, a
//! positional embedding made by a grouped, weight-normed convolution, and post-LN transformer
//! layers. Training-only parts (masking, dropout, layer drop) are absent, and so is the
//! attention mask: callers pad explicitly.

use candle_core::{Module, Result, Tensor};
use candle_nn::{group_norm, layer_norm, linear, GroupNorm, LayerNorm, Linear, VarBuilder};

use crate::error::ModelError;
use crate::layers::weight_normed;

/// transformers' `HubertConfig`, the keys the base model's forward reads. A missing key takes
/// transformers' default, so [`HubertConfig::default`] is HuBERT-base.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default)]
pub struct HubertConfig {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub layer_norm_eps: f64,
    /// Where the feature encoder normalizes: `"group"` (its first layer, per channel over
    /// time) is the only one read; `"layer"` is refused.
    pub feat_extract_norm: String,
    pub feat_extract_activation: String,
    /// Per feature-encoder layer: output channels, kernel and stride.
    pub conv_dim: Vec<usize>,
    pub conv_kernel: Vec<usize>,
    pub conv_stride: Vec<usize>,
    pub conv_bias: bool,
    /// The positional convolution's kernel and groups.
    pub num_conv_pos_embeddings: usize,
    pub num_conv_pos_embedding_groups: usize,
    /// Refused when true (a batch norm instead of the weight norm).
    pub conv_pos_batch_norm: bool,
    /// Refused when true (pre-LN layers, HuBERT-large's arrangement).
    pub do_stable_layer_norm: bool,
    pub feat_proj_layer_norm: bool,
}

impl Default for HubertConfig {
    fn default() -> Self {
        Self {
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            hidden_act: "gelu".into(),
            layer_norm_eps: 1e-5,
            feat_extract_norm: "group".into(),
            feat_extract_activation: "gelu".into(),
            conv_dim: vec![512; 7],
            conv_kernel: vec![10, 3, 3, 3, 3, 2, 2],
            conv_stride: vec![5, 2, 2, 2, 2, 2, 2],
            conv_bias: false,
            num_conv_pos_embeddings: 128,
            num_conv_pos_embedding_groups: 16,
            conv_pos_batch_norm: false,
            do_stable_layer_norm: false,
            feat_proj_layer_norm: true,
        }
    }
}

impl HubertConfig {
    /// The number of frames `samples` samples give: each convolution of the feature encoder
    /// keeps ⌊(n − kernel) / stride⌋ + 1 (none once the input is shorter than a kernel).
    pub fn frames(&self, samples: usize) -> usize {
        self.conv_kernel
            .iter()
            .zip(&self.conv_stride)
            .fold(samples, |n, (&kernel, &stride)| {
                if n < kernel {
                    0
                } else {
                    (n - kernel) / stride + 1
                }
            })
    }

    /// What this port computes, checked before any weight is read.
    fn check(&self) -> std::result::Result<(), ModelError> {
        let refuse = |what: String| Err(ModelError::Config(format!("HuBERT config: {what}")));
        if self.feat_extract_norm != "group" {
            return refuse(format!(
                "feat_extract_norm {:?} is not supported (only \"group\")",
                self.feat_extract_norm
            ));
        }
        for (key, act) in [
            ("hidden_act", &self.hidden_act),
            ("feat_extract_activation", &self.feat_extract_activation),
        ] {
            if act != "gelu" {
                return refuse(format!("{key} {act:?} is not supported (only \"gelu\")"));
            }
        }
        if self.conv_pos_batch_norm {
            return refuse("conv_pos_batch_norm is not supported".into());
        }
        if self.do_stable_layer_norm {
            return refuse("do_stable_layer_norm (pre-LN layers) is not supported".into());
        }
        let layers = self.conv_dim.len();
        if layers == 0 || self.conv_kernel.len() != layers || self.conv_stride.len() != layers {
            return refuse(format!(
                "conv_dim, conv_kernel and conv_stride must be non-empty and of one length \
                 (have {}, {}, {})",
                layers,
                self.conv_kernel.len(),
                self.conv_stride.len()
            ));
        }
        let sizes = [
            ("hidden_size", self.hidden_size),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("num_conv_pos_embeddings", self.num_conv_pos_embeddings),
            (
                "num_conv_pos_embedding_groups",
                self.num_conv_pos_embedding_groups,
            ),
        ];
        if let Some((key, _)) = sizes.iter().find(|(_, n)| *n == 0) {
            return refuse(format!("{key} must be positive"));
        }
        let conv = self.conv_dim.iter().chain(&self.conv_kernel);
        if conv.chain(&self.conv_stride).any(|&n| n == 0) {
            return refuse("conv_dim, conv_kernel and conv_stride must be positive".into());
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return refuse(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if !self
            .hidden_size
            .is_multiple_of(self.num_conv_pos_embedding_groups)
        {
            return refuse(format!(
                "hidden_size {} is not a multiple of num_conv_pos_embedding_groups {}",
                self.hidden_size, self.num_conv_pos_embedding_groups
            ));
        }
        Ok(())
    }
}

/// HuBERT's base model, its weights named as in `HubertModel` (`feature_extractor.*`,
/// `feature_projection.*`, `encoder.*`).
pub struct Hubert {
    config: HubertConfig,
    feature_encoder: FeatureEncoder,
    feature_projection: FeatureProjection,
    positional_embedding: PositionalConvEmbedding,
    encoder_norm: LayerNorm,
    layers: Vec<EncoderLayer>,
}

impl Hubert {
    /// The model of `config` from `vb` (rooted at the model: `semantic_model` in OmniVoice's
    /// codec checkpoint), on the VarBuilder's device and dtype.
    pub fn load(config: &HubertConfig, vb: VarBuilder) -> std::result::Result<Self, ModelError> {
        config.check()?;
        let c = config;
        let encoder = vb.pp("encoder");
        Ok(Self {
            feature_encoder: FeatureEncoder::load(c, vb.pp("feature_extractor"))?,
            feature_projection: FeatureProjection::load(c, vb.pp("feature_projection"))?,
            positional_embedding: PositionalConvEmbedding::load(c, encoder.pp("pos_conv_embed"))?,
            encoder_norm: layer_norm(c.hidden_size, c.layer_norm_eps, encoder.pp("layer_norm"))?,
            layers: (0..c.num_hidden_layers)
                .map(|i| EncoderLayer::load(c, encoder.pp(format!("layers.{i}"))))
                .collect::<Result<_>>()?,
            config: config.clone(),
        })
    }

    /// input [B, samples] f32 → hidden states as HF `output_hidden_states=True` returns them:
    /// 1 + num_hidden_layers tensors, each [B, frames, hidden_size]: the input of the first
    /// transformer layer, then every layer's output.
    pub fn hidden_states(&self, input: &Tensor) -> Result<Vec<Tensor>> {
        let (_, samples) = input.dims2()?;
        if self.config.frames(samples) == 0 {
            candle_core::bail!(
                "HuBERT: {samples} samples make no frame (its feature encoder needs {})",
                self.shortest_input()
            );
        }
        // [B, samples] → [B, conv_dim[-1], frames] → [B, frames, conv_dim[-1]]
        let features = self.feature_encoder.forward(input)?.transpose(1, 2)?;
        // [B, frames, hidden]
        let x = self.feature_projection.forward(&features)?;
        let x = (&x + self.positional_embedding.forward(&x)?)?;
        let mut x = self.encoder_norm.forward(&x)?;
        let mut states = Vec::with_capacity(self.layers.len() + 1);
        for layer in &self.layers {
            let next = layer.forward(&x)?;
            states.push(x);
            x = next;
        }
        states.push(x);
        Ok(states)
    }

    /// The fewest samples that make a frame: the feature encoder's receptive field.
    fn shortest_input(&self) -> usize {
        let c = &self.config;
        c.conv_kernel
            .iter()
            .zip(&c.conv_stride)
            .rev()
            .fold(1, |n, (&kernel, &stride)| (n - 1) * stride + kernel)
    }

    /// The mean of all hidden states, [B, frames, hidden_size]: what the Higgs-Audio-v2
    /// tokenizer takes as its semantic features (before keeping every n-th frame).
    pub fn mean_hidden_state(&self, input: &Tensor) -> Result<Tensor> {
        let states = self.hidden_states(input)?;
        // [1 + layers, B, frames, hidden] → [B, frames, hidden]
        Tensor::stack(&states, 0)?.mean(0)
    }
}

/// Strided convolutions from the waveform to feature frames, each followed by GELU; the first
/// also normalizes each channel over time (group norm with one group per channel).
struct FeatureEncoder {
    layers: Vec<FeatureConv>,
}

struct FeatureConv {
    weight: Tensor,
    bias: Option<Tensor>,
    stride: usize,
    norm: Option<GroupNorm>,
}

impl FeatureEncoder {
    fn load(c: &HubertConfig, vb: VarBuilder) -> Result<Self> {
        let mut c_in = 1;
        let mut layers = Vec::with_capacity(c.conv_dim.len());
        for (i, ((&c_out, &kernel), &stride)) in c
            .conv_dim
            .iter()
            .zip(&c.conv_kernel)
            .zip(&c.conv_stride)
            .enumerate()
        {
            let vb = vb.pp(format!("conv_layers.{i}"));
            let conv = vb.pp("conv");
            layers.push(FeatureConv {
                weight: conv.get((c_out, c_in, kernel), "weight")?,
                bias: if c.conv_bias {
                    Some(conv.get(c_out, "bias")?)
                } else {
                    None
                },
                stride,
                // torch's GroupNorm default eps, not the config's.
                norm: if i == 0 {
                    Some(group_norm(c_out, c_out, 1e-5, vb.pp("layer_norm"))?)
                } else {
                    None
                },
            });
            c_in = c_out;
        }
        Ok(Self { layers })
    }

    /// [B, samples] → [B, conv_dim[-1], frames]
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        let mut x = input.unsqueeze(1)?;
        for layer in &self.layers {
            x = x.conv1d(&layer.weight, 0, layer.stride, 1, 1)?;
            if let Some(bias) = &layer.bias {
                x = x.broadcast_add(&bias.reshape((1, (), 1))?)?;
            }
            if let Some(norm) = &layer.norm {
                x = norm.forward(&x)?;
            }
            x = x.gelu_erf()?;
        }
        Ok(x)
    }
}

/// Layer norm (when configured) and a linear map from the last convolution's channels to the
/// model width.
struct FeatureProjection {
    norm: Option<LayerNorm>,
    projection: Linear,
}

impl FeatureProjection {
    fn load(c: &HubertConfig, vb: VarBuilder) -> Result<Self> {
        let features = *c.conv_dim.last().expect("checked non-empty");
        Ok(Self {
            norm: if c.feat_proj_layer_norm {
                Some(layer_norm(features, c.layer_norm_eps, vb.pp("layer_norm"))?)
            } else {
                None
            },
            projection: linear(features, c.hidden_size, vb.pp("projection"))?,
        })
    }

    /// [B, frames, conv_dim[-1]] → [B, frames, hidden]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match &self.norm {
            Some(norm) => self.projection.forward(&norm.forward(x)?),
            None => self.projection.forward(x),
        }
    }
}

/// HuBERT's relative positions: a wide grouped convolution over time, padded to keep the
/// length, then GELU. Its weight is stored weight-normed over the kernel axis (torch's
/// `weight_norm(dim=2)`): one magnitude per tap.
struct PositionalConvEmbedding {
    weight: Tensor,
    bias: Tensor,
    kernel: usize,
    groups: usize,
}

impl PositionalConvEmbedding {
    fn load(c: &HubertConfig, vb: VarBuilder) -> Result<Self> {
        let vb = vb.pp("conv");
        let (kernel, groups) = (c.num_conv_pos_embeddings, c.num_conv_pos_embedding_groups);
        let shape = (c.hidden_size, c.hidden_size / groups, kernel);
        Ok(Self {
            weight: weight_normed(&vb, shape, 2)?,
            bias: vb.get(c.hidden_size, "bias")?,
            kernel,
            groups,
        })
    }

    /// [B, frames, hidden] → [B, frames, hidden]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let frames = x.dim(1)?;
        // [B, hidden, frames + 1] for an even kernel: its padding of kernel / 2 on each side
        // gives one frame too many, the last, which is dropped.
        let y = x
            .transpose(1, 2)?
            .conv1d(&self.weight, self.kernel / 2, 1, 1, self.groups)?
            .narrow(2, 0, frames)?
            .broadcast_add(&self.bias.reshape((1, (), 1))?)?;
        y.gelu_erf()?.transpose(1, 2)
    }
}

/// A post-LN transformer layer: `x = norm(x + attention(x))`, then
/// `x = final_norm(x + feed_forward(x))`.
struct EncoderLayer {
    attention: SelfAttention,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    final_norm: LayerNorm,
}

impl EncoderLayer {
    fn load(c: &HubertConfig, vb: VarBuilder) -> Result<Self> {
        let (hidden, eps) = (c.hidden_size, c.layer_norm_eps);
        let ff = vb.pp("feed_forward");
        Ok(Self {
            attention: SelfAttention::load(c, vb.pp("attention"))?,
            attention_norm: layer_norm(hidden, eps, vb.pp("layer_norm"))?,
            intermediate: linear(hidden, c.intermediate_size, ff.pp("intermediate_dense"))?,
            output: linear(c.intermediate_size, hidden, ff.pp("output_dense"))?,
            final_norm: layer_norm(hidden, eps, vb.pp("final_layer_norm"))?,
        })
    }

    /// [B, frames, hidden] → [B, frames, hidden]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self
            .attention_norm
            .forward(&(x + self.attention.forward(x)?)?)?;
        let ff = self
            .output
            .forward(&self.intermediate.forward(&x)?.gelu_erf()?)?;
        self.final_norm.forward(&(x + ff)?)
    }
}

/// Multi-head self-attention over all frames, with biased projections.
struct SelfAttention {
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    heads: usize,
}

impl SelfAttention {
    fn load(c: &HubertConfig, vb: VarBuilder) -> Result<Self> {
        let h = c.hidden_size;
        Ok(Self {
            q: linear(h, h, vb.pp("q_proj"))?,
            k: linear(h, h, vb.pp("k_proj"))?,
            v: linear(h, h, vb.pp("v_proj"))?,
            out: linear(h, h, vb.pp("out_proj"))?,
            heads: c.num_attention_heads,
        })
    }

    /// [B, frames, hidden] → [B, frames, hidden]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t, hidden) = x.dims3()?;
        let head_dim = hidden / self.heads;
        // [B, frames, hidden] → [B, heads, frames, head_dim]
        let split = |p: &Linear| -> Result<Tensor> {
            p.forward(x)?
                .reshape((b, t, self.heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let (q, k, v) = (split(&self.q)?, split(&self.k)?, split(&self.v)?);
        // [B, heads, frames, frames]
        let scores = (q.matmul(&k.t()?)? * (head_dim as f64).powf(-0.5))?;
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        // [B, heads, frames, head_dim] → [B, frames, hidden]
        let y = weights
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((b, t, hidden))?;
        self.out.forward(&y)
    }
}

#[cfg(test)]
mod tests;
