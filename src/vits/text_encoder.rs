//! The text encoder `enc_p`: phoneme ids → hidden states and the prior's mean / log-std.
//!
//! A Transformer encoder whose self-attention adds relative-position terms (Shaw et al.) within
//! a small window instead of absolute position embeddings, with post-norm LayerNorms and a
//! convolutional feed-forward block: the text encoder of the prior encoder in the VITS paper
//! (Kim et al. 2021, arXiv:2106.06103, §2.5.2 "Prior Encoder"). In Piper's reference code
//! (`src/python/piper_train/vits/` in rhasspy/piper) it is `TextEncoder` in `models.py`, built
//! from `Encoder`, `MultiHeadAttention` and `FFN` in `attentions.py`.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::config::VitsConfig;
use super::layers::{ChannelNorm, Conv1d, ConvSpec};

/// Fill value for masked attention logits (VITS uses -1e4, not -inf).
const MASKED_LOGIT: f64 = -1e4;

/// Multi-head self-attention with relative key/value embeddings shared by all heads
/// (`attentions.MultiHeadAttention` with `window_size` set).
#[derive(Debug, Clone)]
struct RelativeAttention {
    conv_q: Conv1d,
    conv_k: Conv1d,
    conv_v: Conv1d,
    conv_o: Conv1d,
    /// `[2·window + 1, head_dim]`, index `window + (j − i)` for key j seen from query i.
    emb_rel_k: Tensor,
    emb_rel_v: Tensor,
    n_heads: usize,
    window: usize,
}

impl RelativeAttention {
    fn load(vb: VarBuilder, cfg: &VitsConfig) -> Result<Self> {
        let h = cfg.hidden_channels;
        let head_dim = h / cfg.n_heads;
        let rel = (1, 2 * cfg.window_size + 1, head_dim);
        Ok(Self {
            conv_q: Conv1d::load(vb.pp("conv_q"), ConvSpec::pointwise(h, h))?,
            conv_k: Conv1d::load(vb.pp("conv_k"), ConvSpec::pointwise(h, h))?,
            conv_v: Conv1d::load(vb.pp("conv_v"), ConvSpec::pointwise(h, h))?,
            conv_o: Conv1d::load(vb.pp("conv_o"), ConvSpec::pointwise(h, h))?,
            emb_rel_k: vb.get(rel, "emb_rel_k")?.squeeze(0)?,
            emb_rel_v: vb.get(rel, "emb_rel_v")?.squeeze(0)?,
            n_heads: cfg.n_heads,
            window: cfg.window_size,
        })
    }

    /// Relative embeddings for every offset −(T−1)..=T−1: `[2T − 1, head_dim]`, zero outside
    /// the window.
    fn relative_embeddings(&self, emb: &Tensor, t: usize) -> Result<Tensor> {
        let w = self.window;
        let pad = t.saturating_sub(w + 1);
        let start = (w + 1).saturating_sub(t);
        emb.pad_with_zeros(0, pad, pad)?.narrow(0, start, 2 * t - 1)
    }

    /// `x` [B, H, T], `attn_mask` [B, 1, T, T] (1 = may attend) → [B, H, T].
    fn forward(&self, x: &Tensor, attn_mask: &Tensor) -> Result<Tensor> {
        let (b, h, t) = x.dims3()?;
        let head_dim = h / self.n_heads;
        // [B, H, T] → [B, heads, T, head_dim]
        let heads = |y: Tensor| -> Result<Tensor> {
            y.reshape((b, self.n_heads, head_dim, t))?
                .transpose(2, 3)?
                .contiguous()
        };
        let q = (heads(self.conv_q.forward(x)?)? / (head_dim as f64).sqrt())?;
        let k = heads(self.conv_k.forward(x)?)?;
        let v = heads(self.conv_v.forward(x)?)?;

        // logits_ij = q_i·k_j + q_i·e^K_(j−i)
        let scores = q.matmul(&k.t()?)?;
        let rel_k = self.relative_embeddings(&self.emb_rel_k, t)?;
        let rel_logits = q.broadcast_matmul(&rel_k.t()?)?; // [B, heads, T, 2T−1]
        let scores = (scores + relative_to_absolute(&rel_logits)?)?;
        let masked = Tensor::full(MASKED_LOGIT as f32, scores.shape(), x.device())?;
        let scores = attn_mask
            .broadcast_as(scores.shape())?
            .ne(0f32)?
            .where_cond(&scores, &masked)?;
        let p = candle_nn::ops::softmax_last_dim(&scores)?;

        // out_i = Σ_j p_ij (v_j + e^V_(j−i))
        let rel_v = self.relative_embeddings(&self.emb_rel_v, t)?;
        let out = (p.matmul(&v)? + absolute_to_relative(&p)?.broadcast_matmul(&rel_v)?)?;
        let out = out.transpose(2, 3)?.reshape((b, h, t))?;
        self.conv_o.forward(&out)
    }
}

/// `[B, heads, T, 2T − 1]` indexed by relative offset → `[B, heads, T, T]` indexed by key.
/// Padding and reshaping shifts row i left by T − 1 − i without a gather.
fn relative_to_absolute(x: &Tensor) -> Result<Tensor> {
    let (b, nh, t, _) = x.dims4()?;
    let x = x.pad_with_zeros(3, 0, 1)?.reshape((b, nh, t * 2 * t))?;
    x.pad_with_zeros(2, 0, t - 1)?
        .reshape((b, nh, t + 1, 2 * t - 1))?
        .narrow(2, 0, t)?
        .narrow(3, t - 1, t)
}

/// `[B, heads, T, T]` indexed by key → `[B, heads, T, 2T − 1]` indexed by relative offset.
fn absolute_to_relative(x: &Tensor) -> Result<Tensor> {
    let (b, nh, t, _) = x.dims4()?;
    let x = x
        .pad_with_zeros(3, 0, t - 1)?
        .reshape((b, nh, t * (2 * t - 1)))?;
    x.pad_with_zeros(2, t, 0)?
        .reshape((b, nh, t, 2 * t))?
        .narrow(3, 1, 2 * t - 1)
}

/// Two "same" convolutions with ReLU between them, masked before each (`attentions.FFN`).
#[derive(Debug, Clone)]
struct FeedForward {
    conv_1: Conv1d,
    conv_2: Conv1d,
}

impl FeedForward {
    fn load(vb: VarBuilder, cfg: &VitsConfig) -> Result<Self> {
        let (h, f, k) = (
            cfg.hidden_channels,
            cfg.filter_channels,
            cfg.ffn_kernel_size,
        );
        Ok(Self {
            conv_1: Conv1d::load(vb.pp("conv_1"), ConvSpec::same(h, f, k, 1))?,
            conv_2: Conv1d::load(vb.pp("conv_2"), ConvSpec::same(f, h, k, 1))?,
        })
    }

    fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let y = self.conv_1.forward(&x.broadcast_mul(mask)?)?.relu()?;
        self.conv_2
            .forward(&y.broadcast_mul(mask)?)?
            .broadcast_mul(mask)
    }
}

/// One layer of `attentions.Encoder`: attention, then the feed-forward block, each added to
/// its input and followed by a channel LayerNorm (post-norm).
#[derive(Debug, Clone)]
struct EncoderLayer {
    attention: RelativeAttention,
    norm_1: ChannelNorm,
    ffn: FeedForward,
    norm_2: ChannelNorm,
}

/// Output of the text encoder, all `[B, C, T]` and masked.
pub struct EncodedText {
    /// Hidden states (input of the duration predictor).
    pub hidden: Tensor,
    /// Prior mean and log-std per token.
    pub m_p: Tensor,
    pub logs_p: Tensor,
}

/// `enc_p`: `models.TextEncoder` — embedding × √H, the encoder layers, and a pointwise
/// projection to the prior's mean and log-std.
#[derive(Debug, Clone)]
pub struct TextEncoder {
    embedding: Tensor,
    layers: Vec<EncoderLayer>,
    proj: Conv1d,
    hidden_channels: usize,
    inter_channels: usize,
}

impl TextEncoder {
    pub fn load(vb: VarBuilder, cfg: &VitsConfig) -> Result<Self> {
        let h = cfg.hidden_channels;
        let enc = vb.pp("encoder");
        let layers = (0..cfg.n_layers)
            .map(|i| {
                Ok(EncoderLayer {
                    attention: RelativeAttention::load(enc.pp(format!("attn_layers.{i}")), cfg)?,
                    norm_1: ChannelNorm::load(enc.pp(format!("norm_layers_1.{i}")), h)?,
                    ffn: FeedForward::load(enc.pp(format!("ffn_layers.{i}")), cfg)?,
                    norm_2: ChannelNorm::load(enc.pp(format!("norm_layers_2.{i}")), h)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embedding: vb.get((cfg.n_vocab, h), "emb.weight")?,
            layers,
            proj: Conv1d::load(
                vb.pp("proj"),
                ConvSpec::pointwise(h, 2 * cfg.inter_channels),
            )?,
            hidden_channels: h,
            inter_channels: cfg.inter_channels,
        })
    }

    /// `ids` [B, T] (u32), `mask` [B, 1, T].
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<EncodedText> {
        let (b, t) = ids.dims2()?;
        // x = emb(ids)·√H, as [B, H, T]
        let x = self
            .embedding
            .index_select(&ids.flatten_all()?, 0)?
            .reshape((b, t, self.hidden_channels))?
            .transpose(1, 2)?;
        let mut x = (x * (self.hidden_channels as f64).sqrt())?.broadcast_mul(mask)?;

        // [B, 1, T, T]: query i may attend key j when both are inside the item.
        let attn_mask = mask.transpose(1, 2)?.broadcast_mul(mask)?.unsqueeze(1)?;
        for layer in &self.layers {
            let y = layer.attention.forward(&x, &attn_mask)?;
            x = layer.norm_1.forward(&(x + y)?)?;
            let y = layer.ffn.forward(&x, mask)?;
            x = layer.norm_2.forward(&(x + y)?)?;
        }
        let hidden = x.broadcast_mul(mask)?;
        let stats = self.proj.forward(&hidden)?.broadcast_mul(mask)?;
        let c = self.inter_channels;
        Ok(EncodedText {
            m_p: stats.narrow(1, 0, c)?,
            logs_p: stats.narrow(1, c, c)?,
            hidden,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, IndexOp};

    #[test]
    fn relative_to_absolute_picks_offset_j_minus_i() -> Result<()> {
        let t = 3;
        // rel[i][r] = 10·i + r; absolute[i][j] must be rel[i][j − i + T − 1].
        let data: Vec<f32> = (0..t)
            .flat_map(|i| (0..2 * t - 1).map(move |r| (10 * i + r) as f32))
            .collect();
        let rel = Tensor::from_vec(data, (1, 1, t, 2 * t - 1), &Device::Cpu)?;
        let abs = relative_to_absolute(&rel)?.i((0, 0))?.to_vec2::<f32>()?;
        for (i, row) in abs.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                assert_eq!(*v, (10 * i + j + t - 1 - i) as f32);
            }
        }
        // And back: offsets that point outside the sequence come back as zeros.
        let back = absolute_to_relative(&relative_to_absolute(&rel)?)?;
        assert_eq!(
            back.i((0, 0, 1))?.to_vec1::<f32>()?,
            vec![0., 11., 12., 13., 0.]
        );
        Ok(())
    }
}
