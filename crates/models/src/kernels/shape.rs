//! The validated dimensions of the convolutions the CPU paths take.
//!
//! Built by the routing ([`super::dispatch`]) and read by every path below it
//! ([`super::cpu`], [`super::gemm`]), so it sits under all of them.

use candle_core::Tensor;

use super::tensor::is_cpu_f32;

/// True when all operands are `f32` tensors in CPU memory, the only case with a fast path.
fn operands_cpu_f32(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> bool {
    is_cpu_f32(x) && is_cpu_f32(weight) && bias.is_none_or(is_cpu_f32)
}

/// Validated dimensions of a stride-1 grouped convolution. Inputs that fail validation are left to
/// candle, so its error messages (and any of its edge-case behaviour) stay the reference.
#[derive(Debug, Clone, Copy)]
pub(super) struct Conv1dShape {
    pub(super) batch: usize,
    pub(super) c_in: usize,
    pub(super) c_out: usize,
    pub(super) l_in: usize,
    pub(super) l_out: usize,
    pub(super) taps: usize,
    pub(super) padding: usize,
    pub(super) dilation: usize,
    pub(super) groups: usize,
}

impl Conv1dShape {
    pub(super) fn for_fast_path(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Option<Self> {
        if !operands_cpu_f32(x, weight, bias) || dilation == 0 || groups == 0 {
            return None;
        }
        let (batch, c_in, l_in) = x.dims3().ok()?;
        let (c_out, c_in_per_group, taps) = weight.dims3().ok()?;
        let span = dilation.checked_mul(taps.checked_sub(1)?)?;
        let l_out = (l_in + 2 * padding).checked_sub(span)?;
        let valid = c_in_per_group * groups == c_in
            && c_out % groups == 0
            && l_out > 0
            && batch > 0
            && c_in_per_group > 0
            && bias.is_none_or(|b| b.elem_count() == c_out);
        valid.then_some(Self {
            batch,
            c_in,
            c_out,
            l_in,
            l_out,
            taps,
            padding,
            dilation,
            groups,
        })
    }
}

impl Conv1dShape {
    /// Whether the direct kernel beats per-tap matrix products. Measured on one core (AVX2,
    /// thread CPU time; `benches/conv.rs`, group `routes`): from 3 taps it is faster at every model shape (192→384 k5 over 251
    /// columns 4.0 → 3.0 ms, 768→192 k3 over 103 columns 2.2 → 1.8 ms, 64→64 k5 over 16064
    /// columns 14.1 → 9.3 ms); pointwise convolutions tie or lose (192→192 over 103 columns
    /// 0.15 → 0.20 ms), so they stay with gemm.
    pub(super) fn prefers_direct(&self) -> bool {
        self.groups == 1 && self.taps >= 3
    }
}

/// Validated dimensions of a transposed convolution (groups 1, dilation 1, no output padding).
#[derive(Debug, Clone, Copy)]
pub(super) struct ConvTranspose1dShape {
    pub(super) batch: usize,
    pub(super) c_in: usize,
    pub(super) c_out: usize,
    pub(super) l_in: usize,
    pub(super) l_out: usize,
    pub(super) taps: usize,
    pub(super) stride: usize,
    pub(super) padding: usize,
}

impl ConvTranspose1dShape {
    pub(super) fn for_fast_path(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Option<Self> {
        if !operands_cpu_f32(x, weight, bias) || stride == 0 {
            return None;
        }
        let (batch, c_in, l_in) = x.dims3().ok()?;
        let (w_c_in, c_out, taps) = weight.dims3().ok()?;
        let l_out = ((l_in.checked_sub(1)? * stride) + taps).checked_sub(2 * padding)?;
        let valid = w_c_in == c_in
            && c_in > 0
            && c_out > 0
            && taps > 0
            && l_out > 0
            && batch > 0
            && bias.is_none_or(|b| b.elem_count() == c_out);
        valid.then_some(Self {
            batch,
            c_in,
            c_out,
            l_in,
            l_out,
            taps,
            stride,
            padding,
        })
    }
}
