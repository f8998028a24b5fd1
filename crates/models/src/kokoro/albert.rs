//! PL-BERT: the phoneme-level ALBERT whose output the prosody predictor reads.
//!
//! ALBERT (Lan et al. 2019) factorizes the embeddings (128 wide, projected to the 768-wide
//! hidden size) and shares one transformer layer across all 12 applications, which is why
//! Kokoro's 12-layer text model costs one layer's weights. One utterance at a time: every
//! position attends to every other (the attention mask of a single unpadded sequence is all
//! ones), token types are all 0, positions count from 0. The feed-forward activation is
//! HF's `gelu_new`, the tanh approximation, which is what the export's `FastGelu` computes.

use candle_core::{Result, Tensor, D};

use super::blocks::{layer_norm_rows, Linear};
use super::config::AlbertConfig;
use super::weights::Weights;
use crate::error::ModelError;
use crate::kernels;

/// A LayerNorm with learned `weight` and `bias` over the last axis.
#[derive(Debug, Clone)]
struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    fn load(
        w: &Weights,
        prefix: &str,
        size: usize,
        eps: f64,
    ) -> std::result::Result<Self, ModelError> {
        Ok(Self {
            weight: w.get_shaped(&format!("{prefix}.weight"), &[size])?,
            bias: w.get_shaped(&format!("{prefix}.bias"), &[size])?,
            eps,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        layer_norm_rows(x, self.eps)?
            .broadcast_mul(&self.weight)?
            .broadcast_add(&self.bias)
    }
}

/// The one layer ALBERT applies `layers` times.
#[derive(Debug, Clone)]
struct SharedLayer {
    query: Linear,
    key: Linear,
    value: Linear,
    dense: Linear,
    attention_norm: LayerNorm,
    ffn: Linear,
    ffn_output: Linear,
    output_norm: LayerNorm,
    heads: usize,
}

impl SharedLayer {
    /// `h` `[T, hidden]` → `[T, hidden]`: self-attention, then the feed-forward block, each
    /// added to its input and normalized (post-norm).
    fn forward(&self, h: &Tensor) -> Result<Tensor> {
        let (t, hidden) = h.dims2()?;
        let head_dim = hidden / self.heads;
        // [T, hidden] → [heads, T, head_dim]
        let split = |x: Tensor| -> Result<Tensor> {
            x.reshape((t, self.heads, head_dim))?
                .transpose(0, 1)?
                .contiguous()
        };
        let q = split(self.query.forward(h)?)?;
        let k = split(self.key.forward(h)?)?;
        let v = split(self.value.forward(h)?)?;
        let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?; // [heads, T, T]
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = weights
            .matmul(&v)? // [heads, T, head_dim]
            .transpose(0, 1)?
            .reshape((t, hidden))?;
        let h = self
            .attention_norm
            .forward(&(self.dense.forward(&context)? + h)?)?;
        let f = kernels::gelu_tanh(&self.ffn.forward(&h)?)?; // as FastGelu
        self.output_norm
            .forward(&(self.ffn_output.forward(&f)? + h)?)
    }
}

/// ALBERT's embeddings, projection and shared layer.
#[derive(Debug, Clone)]
pub(crate) struct Albert {
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    embedding_norm: LayerNorm,
    mapping_in: Linear,
    layer: SharedLayer,
    config: AlbertConfig,
}

impl Albert {
    /// `bert.*` for a vocabulary of `n_token` ids.
    pub fn load(
        w: &Weights,
        config: &AlbertConfig,
        n_token: usize,
    ) -> std::result::Result<Self, ModelError> {
        let (e, hidden) = (config.embedding, config.hidden);
        let layer = "bert.encoder.albert_layer_groups.0.albert_layers.0";
        let lin =
            |name: &str, i: usize, o: usize| Linear::load(w, &format!("{layer}.{name}"), i, o);
        let eps = config.layer_norm_eps;
        Ok(Self {
            word: w.get_shaped("bert.embeddings.word_embeddings.weight", &[n_token, e])?,
            position: w.get_shaped(
                "bert.embeddings.position_embeddings.weight",
                &[config.max_positions, e],
            )?,
            token_type: w.get_shaped("bert.embeddings.token_type_embeddings.weight", &[2, e])?,
            embedding_norm: LayerNorm::load(w, "bert.embeddings.LayerNorm", e, eps)?,
            mapping_in: Linear::load(w, "bert.encoder.embedding_hidden_mapping_in", e, hidden)?,
            layer: SharedLayer {
                query: lin("attention.query", hidden, hidden)?,
                key: lin("attention.key", hidden, hidden)?,
                value: lin("attention.value", hidden, hidden)?,
                dense: lin("attention.dense", hidden, hidden)?,
                attention_norm: LayerNorm::load(
                    w,
                    &format!("{layer}.attention.LayerNorm"),
                    hidden,
                    eps,
                )?,
                ffn: lin("ffn", hidden, config.intermediate)?,
                ffn_output: lin("ffn_output", config.intermediate, hidden)?,
                output_norm: LayerNorm::load(
                    w,
                    &format!("{layer}.full_layer_layer_norm"),
                    hidden,
                    eps,
                )?,
                heads: config.heads,
            },
            config: config.clone(),
        })
    }

    /// `ids` `[T]` (u32, pads included, T ≤ 512) → the last hidden state `[T, 768]`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let t = ids.dim(0)?;
        let embeddings = self
            .word
            .index_select(ids, 0)?
            .broadcast_add(&self.position.narrow(0, 0, t)?)?
            .broadcast_add(&self.token_type.narrow(0, 0, 1)?)?; // [T, 128]
        let mut h = self
            .mapping_in
            .forward(&self.embedding_norm.forward(&embeddings)?)?; // [T, 768]
        for _ in 0..self.config.layers {
            h = self.layer.forward(&h)?;
        }
        debug_assert_eq!(h.dim(D::Minus1)?, self.config.hidden);
        Ok(h)
    }
}
