//! A decoder layer of the body on the CPU, run as one pass over host rows.
//!
//! The products run in the model's precision ([`RowLinear`]: `f32`, or bf16 on packed
//! weights) and everything between them is a few passes over `[N, ·]` rows. Written with candle tensors, those passes
//! (the norms, the residual adds, SiLU and its product, the copies in and out of each kernel)
//! were each an allocation and, for candle's binary maps, a hand-off to candle's own thread
//! pool, which on two cores competed with the products' spare-core helper: a profile of one
//! forward on AMX found the products in only 35 % of its samples (docs/performance.md §13c).
//!
//! Here a layer is the same computation on buffers that live for the whole forward:
//!
//! ```text
//! x = rms_norm(h)                     [N, hidden]
//! y = x · [W_q | W_k | W_v]ᵀ          [N, (heads + 2 kv_heads) · D]   one product, not three
//! q, k = rotate(norm(q)), rotate(norm(k))   in place, inside y's rows
//! h += attention(q, k, v) · W_oᵀ      the residual add in the product's write
//! x = rms_norm(h)
//! g = silu(x · W_gateᵀ) · (x · W_upᵀ)  [N, mlp]   one product, gate and up interleaved
//!                                     by GATE_GROUP, SwiGLU applied to its sums in cache
//! h += g · W_downᵀ
//! ```
//!
//! It is exactly what [`super::backbone`]'s tensor layer computes: in `f32` up to the order
//! of sums, in bf16 with each product's activations rounded once and `f32` sums, norms and
//! softmax (attention's products are bf16 too where AMX runs them).

use candle_core::{DType, Result, Tensor};

use crate::kernels::packed_attention::{packed_attention, Heads, Strided};
use crate::kernels::row_linear::RowLinear;
use crate::kernels::transformer::{norm_rotate, rms_norm_rows, HeadRun};
use crate::kernels::{LinearOutput, Precision};

/// At most this many gate features, then as many up features, in turn in the joint gate/up
/// product: each part of the product's output then holds both halves of what SwiGLU
/// combines.
const GATE_GROUP: usize = 64;

/// The `f32` weights of one layer, as the tensor layer holds them ([out, in] for products).
pub(super) struct LayerWeights<'a> {
    pub input_norm: &'a Tensor,
    pub post_norm: &'a Tensor,
    pub q_norm: &'a Tensor,
    pub k_norm: &'a Tensor,
    pub eps: f64,
    pub q: &'a Tensor,
    pub k: &'a Tensor,
    pub v: &'a Tensor,
    pub o: &'a Tensor,
    pub gate: &'a Tensor,
    pub up: &'a Tensor,
    pub down: &'a Tensor,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

pub(super) struct PackedLayer {
    input_norm: Vec<f32>,
    post_norm: Vec<f32>,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    eps: f32,
    qkv: RowLinear,
    o: RowLinear,
    gate_up: RowLinear,
    down: RowLinear,
    precision: Precision,
    heads: Heads,
    mlp: usize,
    /// Gate features per group of the joint product: [`GATE_GROUP`], or the largest power of
    /// two below it that divides `mlp`.
    group: usize,
}

/// Where a forward's positions lie and what they rotate by, shared by its layers.
pub(super) struct Positions<'a> {
    pub segments: &'a [usize],
    /// [N, head_dim / 2] each.
    pub cos: &'a [f32],
    pub sin: &'a [f32],
}

/// The buffers one forward reuses in every layer.
#[derive(Default)]
pub(super) struct Scratch {
    normed: Vec<f32>,
    qkv: Vec<f32>,
    attended: Vec<f32>,
    gated: Vec<f32>,
}

thread_local! {
    /// The buffers of this thread's last forward: at several megabytes, fresh ones are fresh
    /// pages to fault in and zero on every forward.
    static KEPT: std::cell::Cell<Scratch> = std::cell::Cell::default();
}

impl Scratch {
    /// This thread's buffers, as its last forward left them.
    pub fn kept() -> Self {
        KEPT.take()
    }

    /// Keeps the buffers for this thread's next forward.
    pub fn keep(self) {
        KEPT.set(self);
    }
}

impl PackedLayer {
    /// The layer with its products in `precision` (`f32` or bf16, as [`super::backbone`]
    /// asks).
    pub fn new(w: LayerWeights, precision: Precision) -> Result<Self> {
        let host = |t: &Tensor| t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>();
        let mlp = w.gate.dim(0)?;
        if w.up.dim(0)? != mlp {
            candle_core::bail!("gate and up products of different widths");
        }
        let group = 1 << mlp.trailing_zeros().min(GATE_GROUP.trailing_zeros());
        // [mlp, in] twice → [mlp / G, 2, G, in] → [2 · mlp, in], gate and up in turn.
        let grouped = |t: &Tensor| t.reshape((mlp / group, 1, group, t.dim(1)?));
        let gate_up = Tensor::cat(&[grouped(w.gate)?, grouped(w.up)?], 1)?
            .reshape((2 * mlp, w.gate.dim(1)?))?;
        let d = w.head_dim;
        Ok(Self {
            input_norm: host(w.input_norm)?,
            post_norm: host(w.post_norm)?,
            q_norm: host(w.q_norm)?,
            k_norm: host(w.k_norm)?,
            eps: w.eps as f32,
            qkv: RowLinear::new(&Tensor::cat(&[w.q, w.k, w.v], 0)?, precision)?,
            o: RowLinear::new(w.o, precision)?,
            gate_up: RowLinear::new(&gate_up, precision)?,
            down: RowLinear::new(w.down, precision)?,
            precision,
            heads: Heads {
                heads: w.heads,
                kv_heads: w.kv_heads,
                head_dim: d,
                scale: 1.0 / (d as f32).sqrt(),
            },
            mlp,
            group,
        })
    }

    /// The same layer with its products in bf16 (`f32` ones converted and dropped; bf16 ones
    /// as they are).
    pub fn into_bf16(self) -> Result<Self> {
        Ok(Self {
            qkv: self.qkv.into_bf16()?,
            o: self.o.into_bf16()?,
            gate_up: self.gate_up.into_bf16()?,
            down: self.down.into_bf16()?,
            precision: Precision::Bf16,
            ..self
        })
    }

    /// `h` [N, hidden] ← the layer's output, the residual stream updated in place.
    pub fn forward(&self, h: &mut [f32], at: &Positions, s: &mut Scratch) {
        let hidden = self.input_norm.len();
        let n = h.len() / hidden;
        let Heads {
            heads,
            kv_heads,
            head_dim: d,
            ..
        } = self.heads;
        let width = self.qkv.out_features();
        let fit = |buf: &mut Vec<f32>, len: usize| buf.resize(len, 0.0);
        fit(&mut s.normed, n * hidden);
        fit(&mut s.qkv, n * width);
        fit(&mut s.attended, n * heads * d);
        fit(&mut s.gated, n * self.mlp);

        rms_norm_rows(h, &self.input_norm, self.eps, &mut s.normed);
        self.qkv
            .run_into(&s.normed, n, &mut s.qkv, LinearOutput::Store);
        let (q_cols, kv_cols) = (heads * d, kv_heads * d);
        let runs = [
            HeadRun {
                offset: 0,
                heads,
                weight: &self.q_norm,
            },
            HeadRun {
                offset: q_cols,
                heads: kv_heads,
                weight: &self.k_norm,
            },
        ];
        norm_rotate(&mut s.qkv, width, &runs, self.eps, at.cos, at.sin);
        let view = |from: usize| Strided {
            data: &s.qkv[from..],
            stride: width,
        };
        packed_attention(
            view(0),
            view(q_cols),
            view(q_cols + kv_cols),
            at.segments,
            self.heads,
            self.precision,
            &mut s.attended,
        );
        self.o.run_into(&s.attended, n, h, LinearOutput::Add);

        rms_norm_rows(h, &self.post_norm, self.eps, &mut s.normed);
        let swiglu = LinearOutput::SwiGlu { group: self.group };
        self.gate_up.run_into(&s.normed, n, &mut s.gated, swiglu);
        self.down.run_into(&s.gated, n, h, LinearOutput::Add);
    }
}
