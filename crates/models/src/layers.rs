//! The layers more than one model loads, so that each is written once: a convolution's weight
//! stored weight-normed ([`weight_normed`]: HuBERT's positional convolution and every
//! convolution of OmniVoice's codec) and a stride-1 "same" convolution that keeps its packed
//! weights and runs through the fused kernel ([`FusedConv1d`]: VITS' and Kokoro's).
//!
//! Only what is the same computation is here. What differs stays with its model: VITS'
//! convolutions may be grouped (they fall back to the plain kernel then) and Kokoro's
//! convolutions are checked against the ONNX graph's attributes at load, so each model wraps
//! [`FusedConv1d`] in its own loader.

use candle_core::{DType, Result, Tensor};
use candle_nn::VarBuilder;

use crate::kernels::{self, InputMap, PackedWeightCache, StackConv};

/// A 3-d convolution weight as stored: weight-normed by either torch API
/// (`parametrizations.weight.original0/1`, or `weight_g`/`weight_v` in checkpoints saved
/// before it), or plain (`weight`). `dim` is torch's `weight_norm(dim=…)`: the axis with one
/// magnitude `g` per index (0 for a convolution's outputs, 2 for HuBERT's taps); the direction
/// `v` is normalized over the other two axes.
pub(crate) fn weight_normed(
    vb: &VarBuilder,
    shape: (usize, usize, usize),
    dim: usize,
) -> Result<Tensor> {
    let pairs = [
        (
            "parametrizations.weight.original0",
            "parametrizations.weight.original1",
        ),
        ("weight_g", "weight_v"),
    ];
    for (g, v) in pairs {
        if vb.contains_tensor(g) && vb.contains_tensor(v) {
            let dims = [shape.0, shape.1, shape.2];
            let mut g_shape = [1; 3];
            g_shape[dim] = dims[dim];
            let g = vb.get(g_shape.to_vec(), g)?;
            let v = vb.get(shape, v)?;
            return direction_times_magnitude(&v, &g, dim);
        }
    }
    vb.get(shape, "weight")
}

/// `g · v / ‖v‖` for a 3-d `v`, the norm over the axes other than `dim`, the one farther from
/// `dim` summed first (the order both ports were checked in).
fn direction_times_magnitude(v: &Tensor, g: &Tensor, dim: usize) -> Result<Tensor> {
    let mut others: Vec<usize> = (0..3).filter(|&a| a != dim).collect();
    others.sort_by_key(|&a| std::cmp::Reverse(a.abs_diff(dim)));
    let mut squares = v.to_dtype(DType::F32)?.sqr()?;
    for axis in others {
        squares = squares.sum_keepdim(axis)?;
    }
    let norm = squares.sqrt()?.to_dtype(v.dtype())?;
    v.broadcast_div(&norm)?.broadcast_mul(g)
}

/// A stride-1 convolution with "same" padding, ungrouped, whose weights the kernels pack once
/// (in the cache's precision) and keep: `Σ residuals + conv(map(x))` in one pass
/// ([`kernels::conv1d_fused`]).
#[derive(Debug, Clone)]
pub(crate) struct FusedConv1d {
    /// [C_out, C_in, K]
    weight: Tensor,
    bias: Option<Tensor>,
    padding: usize,
    dilation: usize,
    cache: PackedWeightCache,
}

impl FusedConv1d {
    /// `weight` [C_out, C_in, K] at `dilation`, padded to keep the length, its packed copy
    /// kept in `cache` (which also says the precision).
    pub(crate) fn new(
        weight: Tensor,
        bias: Option<Tensor>,
        dilation: usize,
        cache: PackedWeightCache,
    ) -> Result<Self> {
        let taps = weight.dim(2)?;
        Ok(Self {
            weight,
            bias,
            padding: dilation * (taps - 1) / 2,
            dilation,
            cache,
        })
    }

    /// The same convolution, its weights packed into `cache` (on first use).
    pub(crate) fn with_cache(self, cache: PackedWeightCache) -> Self {
        Self { cache, ..self }
    }

    /// Packs the weights now and keeps only the packed copy (see
    /// [`kernels::packed_and_released`]): every call of this layer goes through the fused
    /// kernel with its cache. The precision is fixed from here on.
    pub(crate) fn release_unpacked(&mut self) -> Result<()> {
        self.weight = kernels::packed_and_released(&self.weight, &self.cache)?;
        Ok(())
    }

    /// `Σ residuals + conv(map(x))`: [B, C_in, L] → [B, C_out, L].
    pub(crate) fn forward_fused(
        &self,
        x: &Tensor,
        map: &InputMap<'_>,
        residuals: &[&Tensor],
    ) -> Result<Tensor> {
        kernels::conv1d_fused(
            x,
            &self.weight,
            self.bias.as_ref(),
            self.padding,
            self.dilation,
            map,
            residuals,
            Some(&self.cache),
        )
    }

    /// This convolution as one of a residual stack's.
    pub(crate) fn as_stack_conv(&self) -> StackConv<'_> {
        StackConv {
            weight: &self.weight,
            bias: self.bias.as_ref(),
            padding: self.padding,
            dilation: self.dilation,
            cache: &self.cache,
        }
    }

    /// [C_out, C_in, K]
    pub(crate) fn weight(&self) -> &Tensor {
        &self.weight
    }

    pub(crate) fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    pub(crate) fn padding(&self) -> usize {
        self.padding
    }

    pub(crate) fn dilation(&self) -> usize {
        self.dilation
    }

    pub(crate) fn cache(&self) -> &PackedWeightCache {
        &self.cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn weight_norm_scales_each_output_to_its_magnitude() {
        let v = Tensor::new(&[[[3f32, 4.]], [[0., 2.]]], &Device::Cpu).unwrap();
        let g = Tensor::new(&[[[2f32]], [[5.]]], &Device::Cpu).unwrap();
        let w = direction_times_magnitude(&v, &g, 0).unwrap();
        let w: Vec<Vec<Vec<f32>>> = w.to_vec3().unwrap();
        assert_eq!(w, [[[1.2, 1.6]], [[0., 5.]]]);
    }

    #[test]
    fn weight_norm_over_taps_scales_each_tap() {
        // v [2, 1, 2]: tap 0 is (3, 4), tap 1 is (0, 2).
        let v = Tensor::new(&[[[3f32, 0.]], [[4., 2.]]], &Device::Cpu).unwrap();
        let g = Tensor::new(&[[[10f32, 3.]]], &Device::Cpu).unwrap();
        let w = direction_times_magnitude(&v, &g, 2).unwrap();
        let w: Vec<Vec<Vec<f32>>> = w.to_vec3().unwrap();
        assert_eq!(w, [[[6., 0.]], [[8., 3.]]]);
    }
}
