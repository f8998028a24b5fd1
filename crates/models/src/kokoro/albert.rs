//! PL-BERT: the phoneme-level ALBERT whose output the prosody predictor reads.
//!
//! ALBERT (Lan et al. 2019) factorizes the embeddings (128 wide, projected to the 768-wide
//! hidden size) and shares one transformer layer across all 12 applications, which is why
//! Kokoro's 12-layer text model costs one layer's weights. One utterance at a time: every
//! position attends to every other (the attention mask of a single unpadded sequence is all
//! ones), token types are all 0, positions count from 0. The feed-forward activation is
//! HF's `gelu_new`, the tanh approximation, which is what the export's `FastGelu` computes.

use std::sync::Arc;

use candle_core::{Device, Result, Tensor, D};

use super::blocks::{layer_norm_rows, Linear};
use super::config::AlbertConfig;
use super::weights::Weights;
use crate::error::ModelError;
use crate::kernels::packed_attention::{packed_attention, Heads, Strided};
use crate::kernels::{self, LinearOutput, Precision, RowLinear};

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
    /// The layer under `prefix` (`…albert_layers.0`).
    fn load(
        w: &Weights,
        prefix: &str,
        config: &AlbertConfig,
    ) -> std::result::Result<Self, ModelError> {
        let (hidden, inner, eps) = (config.hidden, config.intermediate, config.layer_norm_eps);
        let linear =
            |name: &str, i: usize, o: usize| Linear::load(w, &format!("{prefix}.{name}"), i, o);
        let norm = |name: &str| LayerNorm::load(w, &format!("{prefix}.{name}"), hidden, eps);
        Ok(Self {
            query: linear("attention.query", hidden, hidden)?,
            key: linear("attention.key", hidden, hidden)?,
            value: linear("attention.value", hidden, hidden)?,
            dense: linear("attention.dense", hidden, hidden)?,
            attention_norm: norm("attention.LayerNorm")?,
            ffn: linear("ffn", hidden, inner)?,
            ffn_output: linear("ffn_output", inner, hidden)?,
            output_norm: norm("full_layer_layer_norm")?,
            heads: config.heads,
        })
    }

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

/// The shared layer in the form its device runs it.
#[derive(Debug, Clone)]
enum Layer {
    /// candle's tensor ops, on devices other than the CPU.
    Tensors(SharedLayer),
    /// Host rows, on the CPU.
    Rows(Arc<RowLayer>),
}

/// ALBERT's layer over host rows `[T, hidden]`: q, k and v as one product, every product
/// shared with a spare core ([`RowLinear`], `f32`), attention as two products per head
/// around a vectorized softmax ([`packed_attention`]), the norms and GELU as row loops.
/// Through candle's tensor ops, the dozen small ops between the products cost as much as the
/// products at a first phrase's length (10 tokens: 15–18 ms of ALBERT, ≈ 7 of them products).
struct RowLayer {
    qkv: RowLinear,
    qkv_bias: Vec<f32>,
    dense: RowLinear,
    dense_bias: Vec<f32>,
    attention_norm: RowNorm,
    ffn: RowLinear,
    ffn_bias: Vec<f32>,
    ffn_output: RowLinear,
    ffn_output_bias: Vec<f32>,
    output_norm: RowNorm,
    heads: Heads,
}

impl std::fmt::Debug for RowLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowLayer")
            .field("heads", &self.heads)
            .finish_non_exhaustive()
    }
}

/// A LayerNorm over rows of host values.
struct RowNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

impl RowNorm {
    fn new(norm: &LayerNorm) -> Result<Self> {
        Ok(Self {
            weight: norm.weight.to_vec1()?,
            bias: norm.bias.to_vec1()?,
            eps: norm.eps as f32,
        })
    }

    /// Each row of `rows` normalized in place (mean and biased variance), then scaled and
    /// shifted, in the order [`LayerNorm::forward`] computes it.
    fn apply(&self, rows: &mut [f32]) {
        let n = self.weight.len();
        for row in rows.chunks_exact_mut(n) {
            let mean = row.iter().sum::<f32>() / n as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n as f32;
            let std = (var + self.eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(&self.weight).zip(&self.bias) {
                *v = (*v - mean) / std * w + b;
            }
        }
    }
}

/// `bias` added to every row of `rows`.
fn add_to_rows(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

impl RowLayer {
    /// The layer under `prefix` (`…albert_layers.0`), its q, k and v weights stacked into one
    /// product.
    fn load(
        w: &Weights,
        prefix: &str,
        config: &AlbertConfig,
    ) -> std::result::Result<Self, ModelError> {
        let (hidden, inner) = (config.hidden, config.intermediate);
        let weight = |name: &str, o: usize, i: usize| {
            w.get_shaped(&format!("{prefix}.{name}.weight"), &[o, i])
        };
        let bias = |name: &str, o: usize| -> std::result::Result<Vec<f32>, ModelError> {
            Ok(w.get_shaped(&format!("{prefix}.{name}.bias"), &[o])?
                .to_vec1()?)
        };
        let linear =
            |name: &str, o: usize, i: usize| -> std::result::Result<RowLinear, ModelError> {
                Ok(RowLinear::new(&weight(name, o, i)?, Precision::F32)?)
            };
        let qkv = ["query", "key", "value"].map(|n| format!("attention.{n}"));
        let qkv_weight = qkv
            .iter()
            .map(|n| weight(n, hidden, hidden))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let qkv_bias = qkv
            .iter()
            .map(|n| bias(n, hidden))
            .collect::<std::result::Result<Vec<_>, _>>()?
            .concat();
        let norm = |name: &str| -> std::result::Result<RowNorm, ModelError> {
            let norm = LayerNorm::load(
                w,
                &format!("{prefix}.{name}"),
                hidden,
                config.layer_norm_eps,
            )?;
            Ok(RowNorm::new(&norm)?)
        };
        let head_dim = hidden / config.heads;
        Ok(Self {
            qkv: RowLinear::new(&Tensor::cat(&qkv_weight, 0)?, Precision::F32)?,
            qkv_bias,
            dense: linear("attention.dense", hidden, hidden)?,
            dense_bias: bias("attention.dense", hidden)?,
            attention_norm: norm("attention.LayerNorm")?,
            ffn: linear("ffn", inner, hidden)?,
            ffn_bias: bias("ffn", inner)?,
            ffn_output: linear("ffn_output", hidden, inner)?,
            ffn_output_bias: bias("ffn_output", hidden)?,
            output_norm: norm("full_layer_layer_norm")?,
            heads: Heads {
                heads: config.heads,
                kv_heads: config.heads,
                head_dim,
                scale: 1.0 / (head_dim as f32).sqrt(),
            },
        })
    }

    /// [`SharedLayer::forward`] on `h` `[T, hidden]`, in place.
    fn forward(&self, h: &mut [f32], t: usize) {
        let hidden = self.dense_bias.len();
        let mut qkv = self.qkv_bias.repeat(t); // [T, 3·hidden]
        self.qkv.run_into(h, t, &mut qkv, LinearOutput::Add);
        let view = |from: usize| Strided {
            data: &qkv[from..],
            stride: 3 * hidden,
        };
        let mut context = vec![0f32; t * hidden];
        packed_attention(
            view(0),
            view(hidden),
            view(2 * hidden),
            &[t],
            self.heads,
            Precision::F32,
            &mut context,
        );
        add_to_rows(h, &self.dense_bias);
        self.dense.run_into(&context, t, h, LinearOutput::Add);
        self.attention_norm.apply(h);
        let mut f = self.ffn_bias.repeat(t); // [T, intermediate]
        self.ffn.run_into(h, t, &mut f, LinearOutput::Add);
        kernels::gelu_tanh_in_place(&mut f); // as FastGelu
        add_to_rows(h, &self.ffn_output_bias);
        self.ffn_output.run_into(&f, t, h, LinearOutput::Add);
        self.output_norm.apply(h);
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
    layer: Layer,
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
        let eps = config.layer_norm_eps;
        let layer = if w.device().is_cpu() {
            Layer::Rows(Arc::new(RowLayer::load(w, layer, config)?))
        } else {
            Layer::Tensors(SharedLayer::load(w, layer, config)?)
        };
        Ok(Self {
            word: w.get_shaped("bert.embeddings.word_embeddings.weight", &[n_token, e])?,
            position: w.get_shaped(
                "bert.embeddings.position_embeddings.weight",
                &[config.max_positions, e],
            )?,
            token_type: w.get_shaped("bert.embeddings.token_type_embeddings.weight", &[2, e])?,
            embedding_norm: LayerNorm::load(w, "bert.embeddings.LayerNorm", e, eps)?,
            mapping_in: Linear::load(w, "bert.encoder.embedding_hidden_mapping_in", e, hidden)?,
            layer,
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
        match &self.layer {
            Layer::Tensors(layer) => {
                for _ in 0..self.config.layers {
                    h = layer.forward(&h)?;
                }
            }
            Layer::Rows(layer) => {
                let mut rows = h.flatten_all()?.to_vec1::<f32>()?;
                for _ in 0..self.config.layers {
                    layer.forward(&mut rows, t);
                }
                h = Tensor::from_vec(rows, (t, self.config.hidden), &Device::Cpu)?;
            }
        }
        debug_assert_eq!(h.dim(D::Minus1)?, self.config.hidden);
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::super::generator::tests::weights;
    use super::*;

    /// The host-row layer computes what the tensor layer (the path of other devices) does, on
    /// the real weights and hidden states of a sentence's size: the oracle tests hold the
    /// host rows, this holds the tensors to them.
    #[test]
    fn host_rows_and_tensors_compute_the_same_layer() {
        let config = super::super::Config::v1_0().albert;
        let prefix = "bert.encoder.albert_layer_groups.0.albert_layers.0";
        let tensors = SharedLayer::load(weights(), prefix, &config).unwrap();
        let rows = RowLayer::load(weights(), prefix, &config).unwrap();
        let t = 23;
        let h = Tensor::randn(0f32, 1.0, (t, config.hidden), &Device::Cpu).unwrap();
        let want = tensors.forward(&h).unwrap();
        let mut rows_h = h.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        rows.forward(&mut rows_h, t);
        let got = Tensor::from_vec(rows_h, (t, config.hidden), &Device::Cpu).unwrap();
        let worst = crate::test_support::max_abs_diff(&got, &want);
        eprintln!("ALBERT layer, host rows against tensors: max |Δ| {worst:.2e}");
        // Post-norm outputs are O(1): float rounding in another order, not a wrong term.
        assert!(worst <= 1e-4, "max |Δ| {worst:.2e}");
    }
}
