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
use super::layers::{sequence_mask, ChannelNorm, Conv1d, ConvSpec};
use crate::kernels::{self, InputMap};

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

    /// `x` [B, H, T]; item b fills its first `lengths[b]` positions → [B, H, T].
    fn forward(&self, x: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let (_, h, t) = x.dims3()?;
        let head_dim = h / self.n_heads;
        let q = (self.conv_q.forward(x)? / (head_dim as f64).sqrt())?;
        let k = self.conv_k.forward(x)?;
        let v = self.conv_v.forward(x)?;

        // Only offsets within the window have embeddings: −r..=r (r < window once the
        // sequence is shorter than the window).
        let r = self.window.min(t - 1);
        let band_k = self.emb_rel_k.narrow(0, self.window - r, 2 * r + 1)?;
        let band_v = self.emb_rel_v.narrow(0, self.window - r, 2 * r + 1)?;
        let out =
            match kernels::relative_attention(&q, &k, &v, &band_k, &band_v, self.n_heads, lengths)?
            {
                Some(out) => out,
                None => attend(&q, &k, &v, &band_k, &band_v, self.n_heads, lengths)?,
            };
        self.conv_o.forward(&out)
    }
}

/// The attention itself as tensor ops, where [`kernels::relative_attention`] does not run
/// (other devices): `q`, `k`, `v` [B, H, T] (q scaled), bands [2r + 1, head_dim].
fn attend(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    band_k: &Tensor,
    band_v: &Tensor,
    n_heads: usize,
    lengths: &[usize],
) -> Result<Tensor> {
    let (b, h, t) = q.dims3()?;
    let head_dim = h / n_heads;
    // [B, H, T] → [B, heads, T, head_dim]
    let heads = |y: &Tensor| -> Result<Tensor> {
        y.reshape((b, n_heads, head_dim, t))?
            .transpose(2, 3)?
            .contiguous()
    };
    let (q, k, v) = (heads(q)?, heads(k)?, heads(v)?);
    let r = (band_k.dim(0)? - 1) / 2;

    // logits_ij = q_i·k_j + q_i·e^K_(j−i)
    let rel_logits = q.broadcast_matmul(&band_k.t()?)?; // [B, heads, T, 2r + 1]
    let scores = (q.matmul(&k.t()?)? + band_to_absolute(&rel_logits)?)?;
    // Query i may attend key j when both are inside the item; a single item (or a batch of
    // equal lengths) needs no mask.
    let scores = if lengths.iter().all(|&l| l >= t) {
        scores
    } else {
        let mask = sequence_mask(lengths, t, q.device())?;
        let attn_mask = mask.transpose(1, 2)?.broadcast_mul(&mask)?.unsqueeze(1)?;
        let masked = Tensor::full(MASKED_LOGIT as f32, scores.shape(), q.device())?;
        attn_mask
            .broadcast_as(scores.shape())?
            .ne(0f32)?
            .where_cond(&scores, &masked)?
    };
    let p = candle_nn::ops::softmax_last_dim(&scores)?;

    // out_i = Σ_j p_ij (v_j + e^V_(j−i))
    let out = (p.matmul(&v)? + absolute_to_band(&p, r)?.broadcast_matmul(band_v)?)?;
    out.transpose(2, 3)?.reshape((b, h, t))
}

/// `[B, heads, T, 2r + 1]` indexed by offset −r..=r → `[B, heads, T, T]` indexed by key, zero
/// outside the band: rows padded to T + 2r + 1 and re-read T + 2r wide shift row i right by i,
/// without a gather.
fn band_to_absolute(x: &Tensor) -> Result<Tensor> {
    let (b, nh, t, width) = x.dims4()?;
    let r = (width - 1) / 2;
    x.pad_with_zeros(3, 0, t)?
        .reshape((b, nh, t * (t + 2 * r + 1)))?
        .narrow(2, 0, t * (t + 2 * r))?
        .reshape((b, nh, t, t + 2 * r))?
        .narrow(3, r, t)
}

/// `[B, heads, T, T]` indexed by key → `[B, heads, T, 2r + 1]` indexed by offset −r..=r, zero
/// where the offset leaves the sequence: the inverse shift of [`band_to_absolute`].
fn absolute_to_band(x: &Tensor, r: usize) -> Result<Tensor> {
    let (b, nh, t, _) = x.dims4()?;
    x.pad_with_zeros(3, r, r)?
        .reshape((b, nh, t * (t + 2 * r)))?
        .pad_with_zeros(2, 0, t)?
        .reshape((b, nh, t, t + 2 * r + 1))?
        .narrow(3, 0, 2 * r + 1)
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
        // conv_2(ReLU(conv_1(x·mask))·mask)·mask, the masks and the ReLU fused into the
        // convolutions' input (a LeakyReLU of slope 0 is the ReLU).
        let masked = |leaky_slope| InputMap {
            scale: 1.0,
            leaky_slope,
            mask: Some(mask),
            channels: None,
        };
        let y = self.conv_1.forward_fused(x, &masked(None), &[])?;
        self.conv_2
            .forward_fused(&y, &masked(Some(0.0)), &[])?
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

    /// `ids` [B, T] (u32), `mask` [B, 1, T] with ones before each item's length.
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<EncodedText> {
        let (b, t) = ids.dims2()?;
        // x = emb(ids)·√H, as [B, H, T]
        let x = self
            .embedding
            .index_select(&ids.flatten_all()?, 0)?
            .reshape((b, t, self.hidden_channels))?
            .transpose(1, 2)?;
        let mut x = (x * (self.hidden_channels as f64).sqrt())?.broadcast_mul(mask)?;

        let lengths: Vec<usize> = mask
            .sum((1, 2))?
            .to_vec1::<f32>()?
            .into_iter()
            .map(|l| l as usize)
            .collect();
        for layer in &self.layers {
            let y = layer.attention.forward(&x, &lengths)?;
            x = layer.norm_1.forward_sum(&x, &y)?;
            let y = layer.ffn.forward(&x, mask)?;
            x = layer.norm_2.forward_sum(&x, &y)?;
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
    fn band_to_absolute_puts_offset_j_minus_i_on_row_i_and_back() -> Result<()> {
        for (t, r) in [(1, 0), (3, 1), (3, 2), (7, 4)] {
            let width = 2 * r + 1;
            // band[i][c] = 100 + 10·i + c stands for offset c − r.
            let data: Vec<f32> = (0..t)
                .flat_map(|i| (0..width).map(move |c| (100 + 10 * i + c) as f32))
                .collect();
            let band = Tensor::from_vec(data, (1, 1, t, width), &Device::Cpu)?;
            let abs = band_to_absolute(&band)?.i((0, 0))?.to_vec2::<f32>()?;
            for (i, row) in abs.iter().enumerate() {
                for (j, v) in row.iter().enumerate() {
                    let offset = j as i64 - i as i64;
                    let expected = if offset.unsigned_abs() as usize <= r {
                        (100 + 10 * i as i64 + offset + r as i64) as f32
                    } else {
                        0.0
                    };
                    assert_eq!(*v, expected, "t {t} r {r} at ({i}, {j})");
                }
            }
            // And back: offsets that point outside the sequence come back as zeros.
            let back = absolute_to_band(&band_to_absolute(&band)?, r)?
                .i((0, 0))?
                .to_vec2::<f32>()?;
            for (i, row) in back.iter().enumerate() {
                for (c, v) in row.iter().enumerate() {
                    let j = i as i64 + c as i64 - r as i64;
                    let inside = (0..t as i64).contains(&j);
                    let expected = if inside {
                        (100 + 10 * i + c) as f32
                    } else {
                        0.0
                    };
                    assert_eq!(*v, expected, "t {t} r {r} back at ({i}, {c})");
                }
            }
        }
        Ok(())
    }

    /// The CPU kernel and the tensor formulation agree, masked batches included.
    #[test]
    fn attention_kernel_matches_the_tensor_ops() -> Result<()> {
        let dev = Device::Cpu;
        // (lengths, T, heads, head_dim, r)
        for (lengths, t, n_heads, head_dim, r) in [
            (vec![1], 1, 2, 3, 0),
            (vec![7, 4], 7, 2, 3, 2),
            (vec![20], 20, 2, 8, 4),
            (vec![3, 37, 30], 37, 1, 5, 4),
        ] {
            let b = lengths.len();
            let h = n_heads * head_dim;
            let rand = |dims: &[usize]| Tensor::randn(0f32, 1.0, dims, &dev);
            let (q, k, v) = (rand(&[b, h, t])?, rand(&[b, h, t])?, rand(&[b, h, t])?);
            let (band_k, band_v) = (rand(&[2 * r + 1, head_dim])?, rand(&[2 * r + 1, head_dim])?);
            let want = attend(&q, &k, &v, &band_k, &band_v, n_heads, &lengths)?;
            let got = kernels::relative_attention(&q, &k, &v, &band_k, &band_v, n_heads, &lengths)?
                .expect("a CPU f32 kernel");
            let diff = (got - &want)?.abs()?.max_all()?.to_scalar::<f32>()?;
            let scale = want.abs()?.max_all()?.to_scalar::<f32>()?;
            assert!(
                diff <= 1e-5 * scale.max(1.0),
                "lengths {lengths:?} r {r}: differs by {diff} (values up to {scale})"
            );
        }
        Ok(())
    }
}
