//! OmniVoice's body: Qwen3's decoder layers used as an encoder. Every position attends to every
//! position of its own segment, with no causal mask and no KV cache (candle-transformers'
//! `qwen3` is causal, takes ids only and keeps a cache, so this is our own).
//!
//! A batch is packed: the segments (a conditional row, an unconditional row, …) lie one after
//! another in one `[N, hidden]` tensor without padding, positions restart at 0 in each, and
//! attention stays within a segment. That is what the official code computes with its padded
//! batch and block mask, minus the padding. On the CPU in `f32` activations (every precision:
//! bf16 is the linear layers only), the q/k norms, RoPE and attention run as the kernels of
//! [`kernels::packed_attention`]; elsewhere as tensor products over segments padded in
//! groups of like length (one batched product per group, not one per segment).
//!
//! The linear layers are [`Proj`]s: candle's `f32` product, or in bf16 the shared kernel
//! ([`kernels::Bf16Linear`]) once [`Backbone::in_precision`] has packed them. They are nearly
//! all of the work (≈ 15.7 M multiply-adds per position and layer at the real size, against
//! ≈ 0.2 M for attention over 165 positions); norms, RoPE and attention stay `f32`.

use candle_core::{DType, Module, Result, Tensor, D};
use candle_nn::{linear_no_bias, rms_norm, Linear, RmsNorm, VarBuilder};

use super::config::BackboneConfig;
use super::packed_layer::{LayerWeights, PackedLayer, Positions, Scratch};
use crate::kernels::transformer::rms_norm_rows;
use crate::kernels::{self, Precision};

/// A linear layer without bias, in the precision its model was put in.
pub(crate) enum Proj {
    F32(Linear),
    /// Packed bf16 weights; the `f32` ones are dropped (they would double the memory).
    Bf16(kernels::Bf16Linear),
}

impl Proj {
    pub fn load(in_dim: usize, out_dim: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Proj::F32(linear_no_bias(in_dim, out_dim, vb)?))
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Proj::F32(l) => l.forward(x),
            Proj::Bf16(l) => l.forward(x),
        }
    }

    /// Repacks an `f32` layer for `precision` (only `f32` → bf16 is a change; see
    /// [`super::OmniVoice::with_precision`]).
    pub fn in_precision(&mut self, precision: Precision) -> Result<()> {
        if let (Precision::Bf16, Proj::F32(l)) = (precision, &*self) {
            *self = Proj::Bf16(kernels::Bf16Linear::new(l.weight())?);
        }
        Ok(())
    }
}

pub(crate) struct Backbone {
    layers: Layers,
    norm: RmsNorm,
    rope: Rope,
    /// Whether the q/k norms, RoPE and attention run as CPU kernels (`f32` on the CPU) rather
    /// than tensor products over padded segments (other devices and types, and tests).
    fused: bool,
}

impl Backbone {
    /// The body under `llm.` (`layers.N.*`, `norm`).
    pub fn load(vb: VarBuilder, c: &BackboneConfig) -> Result<Self> {
        let layers = (0..c.num_hidden_layers)
            .map(|i| Layer::load(vb.pp(format!("layers.{i}")), c))
            .collect::<Result<_>>()?;
        Ok(Self {
            layers: Layers::Tensors(layers),
            norm: rms_norm(c.hidden_size, c.rms_norm_eps, vb.pp("norm"))?,
            rope: Rope::new(c.head_dim, c.rope_theta),
            fused: vb.device().is_cpu() && vb.dtype() == DType::F32,
        })
    }

    /// Readies every linear layer for `precision` (`f32` or bf16). With the CPU kernels each
    /// layer becomes a [`PackedLayer`] with its products in `precision` (the tensor layer
    /// dropped as each is packed, so that two copies of the weights never coexist for more
    /// than one layer); `f32` packed layers can still go to bf16, not back.
    pub fn in_precision(&mut self, precision: Precision) -> Result<()> {
        let precision = match precision {
            Precision::Bf16 => Precision::Bf16,
            _ => Precision::F32,
        };
        let layers = match &mut self.layers {
            Layers::Tensors(layers) if self.fused => std::mem::take(layers),
            Layers::Tensors(layers) if precision == Precision::Bf16 => {
                return Self::pack_projections(layers, precision)
            }
            Layers::Tensors(_) => return Ok(()),
            Layers::Packed(layers) => {
                if precision == Precision::Bf16 {
                    *layers = std::mem::take(layers)
                        .into_iter()
                        .map(PackedLayer::into_bf16)
                        .collect::<Result<_>>()?;
                }
                return Ok(());
            }
        };
        let mut packed = Vec::with_capacity(layers.len());
        for layer in layers {
            packed.push(layer.packed(precision)?);
        }
        self.layers = Layers::Packed(packed);
        Ok(())
    }

    /// Each projection of the tensor layers packed on its own (no CPU kernels around them).
    fn pack_projections(layers: &mut [Layer], precision: Precision) -> Result<()> {
        for layer in layers {
            let (a, m) = (&mut layer.self_attn, &mut layer.mlp);
            for proj in [
                &mut a.q_proj,
                &mut a.k_proj,
                &mut a.v_proj,
                &mut a.o_proj,
                &mut m.gate_proj,
                &mut m.up_proj,
                &mut m.down_proj,
            ] {
                proj.in_precision(precision)?;
            }
        }
        Ok(())
    }

    /// The same body computing attention with tensor products, as off the CPU (before any
    /// packing: packed layers run on the CPU kernels only).
    #[cfg(test)]
    pub fn with_plain_attention(mut self) -> Self {
        assert!(matches!(self.layers, Layers::Tensors(_)), "packed already");
        self.fused = false;
        self
    }

    /// `x`: [N, hidden], the segments of `segments` (their lengths, summing to N) one after
    /// another. Returns the final hidden states, [N, hidden].
    pub fn forward(&self, x: &Tensor, segments: &[usize]) -> Result<Tensor> {
        let (cos, sin) = self.rope.tables(segments);
        let layers = match &self.layers {
            Layers::Tensors(layers) => layers,
            Layers::Packed(layers) => {
                let (n, hidden) = x.dims2()?;
                let mut h = x.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
                let at = Positions {
                    segments,
                    cos: &cos,
                    sin: &sin,
                };
                let mut scratch = Scratch::kept();
                for layer in layers {
                    layer.forward(&mut h, &at, &mut scratch);
                }
                scratch.keep();
                let weight = self.norm.weight().to_dtype(DType::F32)?.to_vec1::<f32>()?;
                let mut out = vec![0f32; h.len()];
                rms_norm_rows(&h, &weight, self.norm.eps() as f32, &mut out);
                return Tensor::from_vec(out, (n, hidden), x.device());
            }
        };
        let segments = Segments {
            fused: self.fused,
            sizes: segments.to_vec(),
            cos: cos.clone(),
            sin: sin.clone(),
        };
        let n = x.dim(0)?;
        let half = cos.len() / n.max(1);
        let cos = Tensor::from_vec(cos, (n, 1, half), x.device())?;
        let sin = Tensor::from_vec(sin, (n, 1, half), x.device())?;
        let mut h = x.clone();
        for layer in layers {
            h = layer.forward(&h, &cos, &sin, &segments)?;
        }
        self.norm.forward(&h)
    }
}

/// The layers as loaded (tensor operations, any device), or packed for the CPU kernels.
enum Layers {
    Tensors(Vec<Layer>),
    Packed(Vec<PackedLayer>),
}

/// Pre-norm attention and MLP, each added to the residual stream.
struct Layer {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

impl Layer {
    fn load(vb: VarBuilder, c: &BackboneConfig) -> Result<Self> {
        Ok(Self {
            input_layernorm: rms_norm(c.hidden_size, c.rms_norm_eps, vb.pp("input_layernorm"))?,
            self_attn: Attention::load(vb.pp("self_attn"), c)?,
            post_attention_layernorm: rms_norm(
                c.hidden_size,
                c.rms_norm_eps,
                vb.pp("post_attention_layernorm"),
            )?,
            mlp: Mlp::load(vb.pp("mlp"), c)?,
        })
    }

    /// The same layer on host rows ([`PackedLayer`]), its products in `precision`, from its
    /// `f32` weights.
    fn packed(self, precision: Precision) -> Result<PackedLayer> {
        let f32_weight = |p: &Proj| match p {
            Proj::F32(l) => Ok(l.weight().clone()),
            Proj::Bf16(_) => Err(candle_core::Error::Msg("packed already".into())),
        };
        let (a, m) = (&self.self_attn, &self.mlp);
        PackedLayer::new(
            LayerWeights {
                input_norm: self.input_layernorm.weight(),
                post_norm: self.post_attention_layernorm.weight(),
                q_norm: a.q_norm.weight(),
                k_norm: a.k_norm.weight(),
                eps: a.eps as f64,
                q: &f32_weight(&a.q_proj)?,
                k: &f32_weight(&a.k_proj)?,
                v: &f32_weight(&a.v_proj)?,
                o: &f32_weight(&a.o_proj)?,
                gate: &f32_weight(&m.gate_proj)?,
                up: &f32_weight(&m.up_proj)?,
                down: &f32_weight(&m.down_proj)?,
                heads: a.heads,
                kv_heads: a.kv_heads,
                head_dim: a.head_dim,
            },
            precision,
        )
    }

    fn forward(&self, x: &Tensor, cos: &Tensor, sin: &Tensor, s: &Segments) -> Result<Tensor> {
        let h = (x + self
            .self_attn
            .forward(&self.input_layernorm.forward(x)?, cos, sin, s)?)?;
        &h + self
            .mlp
            .forward(&self.post_attention_layernorm.forward(&h)?)?
    }
}

/// Grouped-query attention with RMS-normed queries and keys (Qwen3's q/k norms) and RoPE.
struct Attention {
    q_proj: Proj,
    k_proj: Proj,
    v_proj: Proj,
    o_proj: Proj,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    /// The norms' scales and epsilon for the fused path.
    q_scale: Vec<f32>,
    k_scale: Vec<f32>,
    eps: f32,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl Attention {
    fn load(vb: VarBuilder, c: &BackboneConfig) -> Result<Self> {
        let (h, d) = (c.hidden_size, c.head_dim);
        Ok(Self {
            q_proj: Proj::load(h, c.num_attention_heads * d, vb.pp("q_proj"))?,
            k_proj: Proj::load(h, c.num_key_value_heads * d, vb.pp("k_proj"))?,
            v_proj: Proj::load(h, c.num_key_value_heads * d, vb.pp("v_proj"))?,
            o_proj: Proj::load(c.num_attention_heads * d, h, vb.pp("o_proj"))?,
            q_norm: rms_norm(d, c.rms_norm_eps, vb.pp("q_norm"))?,
            k_norm: rms_norm(d, c.rms_norm_eps, vb.pp("k_norm"))?,
            q_scale: vb
                .pp("q_norm")
                .get(d, "weight")?
                .to_dtype(DType::F32)?
                .to_vec1()?,
            k_scale: vb
                .pp("k_norm")
                .get(d, "weight")?
                .to_dtype(DType::F32)?
                .to_vec1()?,
            eps: c.rms_norm_eps as f32,
            heads: c.num_attention_heads,
            kv_heads: c.num_key_value_heads,
            head_dim: d,
        })
    }

    fn forward(&self, x: &Tensor, cos: &Tensor, sin: &Tensor, s: &Segments) -> Result<Tensor> {
        let n = x.dim(0)?;
        let d = self.head_dim;
        let scale = 1.0 / (d as f64).sqrt();
        if s.fused {
            use kernels::packed_attention::{packed_attention, Heads, Strided};
            use kernels::transformer::{norm_rotate, HeadRun};
            let host = |t: Tensor| t.flatten_all()?.to_vec1::<f32>();
            let mut q = host(self.q_proj.forward(x)?)?;
            let mut k = host(self.k_proj.forward(x)?)?;
            let v = host(self.v_proj.forward(x)?)?;
            let (q_cols, kv_cols) = (self.heads * d, self.kv_heads * d);
            let run = |heads, weight| {
                [HeadRun {
                    offset: 0,
                    heads,
                    weight,
                }]
            };
            let (q_run, k_run) = (
                run(self.heads, &self.q_scale),
                run(self.kv_heads, &self.k_scale),
            );
            norm_rotate(&mut q, q_cols, &q_run, self.eps, &s.cos, &s.sin);
            norm_rotate(&mut k, kv_cols, &k_run, self.eps, &s.cos, &s.sin);
            let heads = Heads {
                heads: self.heads,
                kv_heads: self.kv_heads,
                head_dim: d,
                scale: scale as f32,
            };
            let view = |data, stride| Strided { data, stride };
            let mut out = vec![0f32; n * q_cols];
            let (q, k, v) = (view(&q, q_cols), view(&k, kv_cols), view(&v, kv_cols));
            packed_attention(q, k, v, &s.sizes, heads, Precision::F32, &mut out);
            let out = Tensor::from_vec(out, (n, q_cols), x.device())?;
            return self.o_proj.forward(&out);
        }
        // [N, heads, head_dim], each head normed, then rotated by its position.
        let q = self
            .q_norm
            .forward(&self.q_proj.forward(x)?.reshape((n, self.heads, d))?)?;
        let k = self
            .k_norm
            .forward(&self.k_proj.forward(x)?.reshape((n, self.kv_heads, d))?)?;
        let v = self.v_proj.forward(x)?.reshape((n, self.kv_heads, d))?;
        let (q, k) = (rotate(&q, cos, sin)?, rotate(&k, cos, sin)?);
        let out = self.segmented(&q, &k, &v, scale, s)?;
        self.o_proj.forward(&out.reshape((n, self.heads * d))?)
    }

    /// Plain attention within each segment: softmax(q kᵀ · scale) v, each query head on its
    /// group's key/value head. [N, heads, head_dim].
    ///
    /// Segments of like length are padded to their longest and computed as one batch, the
    /// padding masked out of every softmax: on a GPU a loop over segments would cost a kernel
    /// launch per operation per segment, which for a step of many utterances is most of its
    /// time. Padding is bounded by [`padded_groups`], so one long segment among short ones
    /// does not make every short one as long.
    fn segmented(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        scale: f64,
        s: &Segments,
    ) -> Result<Tensor> {
        let (n, device) = (q.dim(0)?, q.device());
        let (heads, kv_heads, d) = (self.heads, self.kv_heads, self.head_dim);
        let group = heads / kv_heads;
        let starts: Vec<usize> = s
            .sizes
            .iter()
            .scan(0, |at, &len| {
                let start = *at;
                *at += len;
                Some(start)
            })
            .collect();
        let mut outs = Vec::new();
        // Where each packed position's row lies in the concatenated padded outputs.
        let mut back = vec![0u32; n];
        let mut slots = 0;
        for members in padded_groups(&s.sizes) {
            let (count, longest) = (members.len(), s.sizes[members[0]]);
            // Slot (member, i) reads packed position start + i; padding reads position 0
            // and is masked as a key (its own output row is never read).
            let mut gather = Vec::with_capacity(count * longest);
            let mut mask = Vec::with_capacity(count * longest);
            for (m, &segment) in members.iter().enumerate() {
                let (start, len) = (starts[segment], s.sizes[segment]);
                for i in 0..len {
                    back[start + i] = (slots + m * longest + i) as u32;
                }
                gather.extend((start..start + len).map(|p| p as u32));
                gather.extend(std::iter::repeat_n(0, longest - len));
                mask.extend(std::iter::repeat_n(0f32, len));
                mask.extend(std::iter::repeat_n(f32::NEG_INFINITY, longest - len));
            }
            slots += count * longest;
            let gather = Tensor::from_vec(gather, count * longest, device)?;
            let mask =
                Tensor::from_vec(mask, (count, 1, 1, longest), device)?.to_dtype(q.dtype())?;
            // [N, h, D] → [count, h, longest, D]
            let pad = |x: &Tensor, h: usize| -> Result<Tensor> {
                x.index_select(&gather, 0)?
                    .reshape((count, longest, h, d))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            // Each key/value head serves its group of query heads.
            let shared = |x: &Tensor| -> Result<Tensor> {
                pad(x, kv_heads)?
                    .unsqueeze(2)?
                    .expand((count, kv_heads, group, longest, d))?
                    .reshape((count, heads, longest, d))
            };
            let (q, k, v) = (pad(q, heads)?, shared(k)?, shared(v)?);
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&mask)?;
            let p = candle_nn::ops::softmax_last_dim(&scores)?;
            // [count, h, longest, D] → [count · longest, h, D]
            outs.push(
                p.matmul(&v)?
                    .transpose(1, 2)?
                    .reshape((count * longest, heads, d))?,
            );
        }
        Tensor::cat(&outs, 0)?.index_select(&Tensor::from_vec(back, n, device)?, 0)
    }
}

/// The segments (indices into `sizes`) in groups to pad to their longest: longest first, a
/// group taking the next segment while its padded size stays within 1.5× its real positions.
/// Memory then stays within 1.5× that of unpadded attention's scores plus one segment's.
fn padded_groups(sizes: &[usize]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut real = 0;
    for i in order {
        match groups.last_mut() {
            Some(g) if 2 * (g.len() + 1) * sizes[g[0]] <= 3 * (real + sizes[i]) => {
                g.push(i);
                real += sizes[i];
            }
            _ => {
                groups.push(vec![i]);
                real = sizes[i];
            }
        }
    }
    groups
}

/// `down(silu(gate(x)) · up(x))`.
struct Mlp {
    gate_proj: Proj,
    up_proj: Proj,
    down_proj: Proj,
}

impl Mlp {
    fn load(vb: VarBuilder, c: &BackboneConfig) -> Result<Self> {
        let (h, i) = (c.hidden_size, c.intermediate_size);
        Ok(Self {
            gate_proj: Proj::load(h, i, vb.pp("gate_proj"))?,
            up_proj: Proj::load(h, i, vb.pp("up_proj"))?,
            down_proj: Proj::load(i, h, vb.pp("down_proj"))?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = candle_nn::ops::silu(&self.gate_proj.forward(x)?)?;
        self.down_proj.forward(&(gate * self.up_proj.forward(x)?)?)
    }
}

/// Where the segments of a packed batch lie, and their positions' RoPE angles.
struct Segments {
    fused: bool,
    sizes: Vec<usize>,
    /// [N, head_dim / 2] each.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

/// Rotary position embedding as transformers computes it: frequencies `θ^(−2i/D)` in `f32`,
/// angles `position · frequency` in `f32`, the two halves of each head rotated together.
struct Rope {
    inv_freq: Vec<f32>,
}

impl Rope {
    fn new(head_dim: usize, theta: f64) -> Self {
        let inv_freq = (0..head_dim / 2)
            .map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / head_dim as f32))
            .collect();
        Self { inv_freq }
    }

    /// cos and sin of every packed position's angles, [N, D/2] each; positions restart at 0
    /// in each segment.
    fn tables(&self, segments: &[usize]) -> (Vec<f32>, Vec<f32>) {
        let half = self.inv_freq.len();
        let n: usize = segments.iter().sum();
        let (mut cos, mut sin) = (Vec::with_capacity(n * half), Vec::with_capacity(n * half));
        for &len in segments {
            for position in 0..len {
                for &f in &self.inv_freq {
                    let angle = position as f32 * f;
                    cos.push(angle.cos());
                    sin.push(angle.sin());
                }
            }
        }
        (cos, sin)
    }
}

/// `x · cos + rotate_half(x) · sin` for `x` [N, heads, D]: the halves (x₁, x₂) become
/// (x₁ cos − x₂ sin, x₂ cos + x₁ sin).
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let half = x.dim(D::Minus1)? / 2;
    let cos = cos.to_dtype(x.dtype())?;
    let sin = sin.to_dtype(x.dtype())?;
    let x1 = x.narrow(D::Minus1, 0, half)?;
    let x2 = x.narrow(D::Minus1, half, half)?;
    let first = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
    let second = (x2.broadcast_mul(&cos)? + x1.broadcast_mul(&sin)?)?;
    Tensor::cat(&[first, second], D::Minus1)
}

#[cfg(test)]
mod tests {
    use super::padded_groups;

    #[test]
    fn padding_groups_segments_of_like_length_and_bounds_the_waste() {
        // A step of utterances: conditional rows, then their targets alone.
        let sizes = [165, 170, 125, 130, 13, 9, 5, 4, 4000];
        let groups = padded_groups(&sizes);
        let mut seen: Vec<usize> = groups.concat();
        seen.sort();
        assert_eq!(seen, (0..sizes.len()).collect::<Vec<_>>(), "{groups:?}");
        for g in &groups {
            let longest = g.iter().map(|&i| sizes[i]).max().unwrap();
            assert_eq!(sizes[g[0]], longest, "{groups:?}");
            let real: usize = g.iter().map(|&i| sizes[i]).sum();
            assert!(2 * g.len() * longest <= 3 * real, "{g:?} wastes too much");
        }
        // The long segment is alone, and the four of about 150 share one product.
        assert!(groups.contains(&vec![8]), "{groups:?}");
        assert!(
            groups.iter().any(|g| (0..4).all(|i| g.contains(&i))),
            "{groups:?}"
        );
    }
}
