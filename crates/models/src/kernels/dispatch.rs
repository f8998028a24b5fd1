//! Where each convolution runs: the kernels' tensor-level entry points.
//!
//! Every model convolution comes through here. An input that is not a valid CPU `f32`
//! convolution goes to candle unchanged, so candle's errors and edge cases stay the reference;
//! the rest is routed by shape to the direct kernel ([`super::cpu`] → [`super::direct`]), the
//! per-tap products ([`super::gemm`]) or the strip-wise stage ([`super::strips`]). The routing
//! thresholds come from side-by-side timings in `benches/conv.rs` (group `routes`).

use candle_core::{Result, Tensor};

use super::layer::{InputMap, PackedPhaseCache, PackedWeightCache, StackConv};
use super::precision::Precision;
use super::shape::{Conv1dShape, ConvTranspose1dShape};
use super::{cpu, gemm, strips, tensor};

/// Packs `weight` [C_out, C_in, K] into `cache` now, as the first CPU call would, and returns
/// what the layer keeps in its place: a stand-in of the same shape with no values. The packed
/// copy is all the direct kernel reads, and the tensor beside it was as large again (Kokoro's
/// convolutions: about 200 MB of `f32`). Only for a layer every call of which goes through
/// [`conv1d_fused`] or [`residual_stack_sum`] with this cache: a call that would need the
/// values (a path of candle's, another cache) is an error, never a convolution of zeros. A
/// weight the CPU kernels do not take (another device or type) is returned as it is.
pub(crate) fn packed_and_released(weight: &Tensor, cache: &PackedWeightCache) -> Result<Tensor> {
    if !tensor::is_cpu_f32(weight) || weight.elem_count() <= 1 {
        return Ok(weight.clone());
    }
    let (c_out, c_in, taps) = weight.dims3()?;
    cpu::cached_pack(weight, cache, c_out, c_in, taps)?;
    tensor::stand_in(weight.shape())
}

/// `x` [B, C_in, L], `weight` [C_out, C_in / groups, K], `bias` [C_out]; stride 1.
/// Returns [B, C_out, L + 2·padding − dilation·(K − 1)].
pub fn conv1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    padding: usize,
    dilation: usize,
    groups: usize,
) -> Result<Tensor> {
    tensor::has_values(weight)?;
    if let Some(shape) = Conv1dShape::for_fast_path(x, weight, bias, padding, dilation, groups) {
        if shape.prefers_direct() {
            return cpu::conv1d_direct(x, weight, bias, &shape, &InputMap::IDENTITY, &[], None);
        }
        return gemm::conv1d(x, weight, bias, &shape);
    }
    let y = x.conv1d(weight, padding, 1, dilation, groups)?;
    add_bias(y, bias)
}

/// `x` [B, C_in, L], `weight` [C_in, C_out, K] (PyTorch's ConvTranspose1d layout), `bias` [C_out].
/// Returns [B, C_out, (L − 1)·stride − 2·padding + K].
pub fn conv_transpose1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: usize,
    padding: usize,
) -> Result<Tensor> {
    tensor::has_values(weight)?;
    if let Some(shape) = ConvTranspose1dShape::for_fast_path(x, weight, bias, stride, padding) {
        return gemm::conv_transpose1d(x, weight, bias, &shape);
    }
    let y = x.conv_transpose1d(weight, padding, 0, stride, 1, 1)?;
    add_bias(y, bias)
}

/// `Σ residuals + conv1d(map(x))` (stride 1, groups 1): the decoder's residual step, which can
/// also add a running sum. On the CPU in `f32` the map, bias and residuals are fused into one
/// pass of the direct kernel; elsewhere it runs as separate tensor ops. `cache`, if given,
/// must only ever be used with this `weight`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv1d_fused(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    padding: usize,
    dilation: usize,
    map: &InputMap<'_>,
    residuals: &[&Tensor],
    cache: Option<&PackedWeightCache>,
) -> Result<Tensor> {
    if cache.is_none() {
        tensor::has_values(weight)?;
    }
    if let Some(shape) = Conv1dShape::for_fast_path(x, weight, bias, padding, dilation, 1) {
        let (b, c, l) = (shape.batch, shape.c_out, shape.l_out);
        let residuals_ok = residuals
            .iter()
            .all(|r| is_cpu_f32(r, r, None) && r.dims() == [b, c, l]);
        let mask_ok = map
            .mask
            .is_none_or(|m| is_cpu_f32(m, m, None) && m.dims() == [shape.batch, 1, shape.l_in]);
        if residuals_ok && mask_ok {
            return cpu::conv1d_direct(x, weight, bias, &shape, map, residuals, cache);
        }
    }
    let mut y = conv1d(&map.apply(x)?, weight, bias, padding, dilation, 1)?;
    for r in residuals {
        y = (*r + y)?;
    }
    Ok(y)
}

/// `conv_transpose1d(map(x))`, with the map fused into the CPU kernel's input packing.
/// `cache`, if given, must only ever be used with this `weight`; its precision applies.
pub(crate) fn conv_transpose1d_fused(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: usize,
    padding: usize,
    map: &InputMap<'_>,
    cache: Option<&PackedPhaseCache>,
) -> Result<Tensor> {
    // Transposed convolutions keep their tensors: their short inputs go through candle's
    // products.
    tensor::has_values(weight)?;
    if map.channels.is_some() {
        // No phase kernel applies the channels' `Snake(AdaIN(·))`: the tensor takes it first.
        let x = map.apply(x)?;
        return conv_transpose1d_fused(
            &x,
            weight,
            bias,
            stride,
            padding,
            &InputMap::IDENTITY,
            cache,
        );
    }
    if let Some(shape) = ConvTranspose1dShape::for_fast_path(x, weight, bias, stride, padding) {
        let mask_ok = map
            .mask
            .is_none_or(|m| is_cpu_f32(m, m, None) && m.dims() == [shape.batch, 1, shape.l_in]);
        // Measured on one core (`benches/conv.rs`, group `routes`): 128→64 k16 s8 over 2008 columns 14.0 → 11.3 ms,
        // 64→32 k8 s4 over 16064 columns 16.4 → 14.0 ms, but 256→128 k16 s8 over 251 columns
        // 6.1–6.4 → 6.1–7.3 ms, so short inputs keep the per-tap products in f32. Reduced
        // precisions exist only in the direct kernel.
        let reduced = cache.is_some_and(|c| c.precision != Precision::F32);
        if mask_ok && (shape.l_in >= 1024 || reduced) {
            return cpu::conv_transpose1d_direct(x, weight, bias, &shape, map, cache);
        }
    }
    conv_transpose1d(&map.apply(x)?, weight, bias, stride, padding)
}

/// `Σ_blocks block(y)` for `y` [B, C, L], where a block is a chain of residual units
/// `x ← x + convs(x)` and every convolution applies LeakyReLU(`slope`) and `mask` [B, 1, L] to
/// its input: a decoder stage's multi-receptive-field sum. On the CPU in `f32`, for signals that
/// outgrow the cache, it runs strip by strip ([`strips`]); otherwise it returns `None` and the
/// caller runs the layers one by one.
pub(crate) fn residual_stack_sum(
    y: &Tensor,
    blocks: &[Vec<Vec<StackConv<'_>>>],
    slope: f64,
    mask: Option<&Tensor>,
) -> Result<Option<Tensor>> {
    let Ok((batch, channels, len)) = y.dims3() else {
        return Ok(None);
    };
    if !is_cpu_f32(y, y, None) || !strips::worth_it(channels, len) {
        return Ok(None);
    }
    let fits = |c: &StackConv| {
        is_cpu_f32(c.weight, c.weight, c.bias)
            && c.bias.is_none_or(|b| b.dims() == [channels])
            && c.weight.dims3().is_ok_and(|(o, i, k)| {
                o == channels
                    && i == channels
                    && c.dilation > 0
                    && 2 * c.padding == c.dilation * (k - 1)
            })
    };
    let mask_ok = mask.is_none_or(|m| is_cpu_f32(m, m, None) && m.dims() == [batch, 1, len]);
    if !mask_ok || !blocks.iter().flatten().flatten().all(fits) {
        return Ok(None);
    }
    cpu::residual_stack_sum(y, blocks, slope as f32, mask).map(Some)
}

fn add_bias(y: Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    match bias {
        Some(b) => y.broadcast_add(&b.reshape((1, (), 1))?),
        None => Ok(y),
    }
}

/// True when all operands are `f32` tensors in CPU memory, the only case with a fast path.
fn is_cpu_f32(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> bool {
    tensor::is_cpu_f32(x) && tensor::is_cpu_f32(weight) && bias.is_none_or(tensor::is_cpu_f32)
}

/// Each CPU path forced whatever the routing rules say, so that `benches/conv.rs` can time them
/// side by side on the model's shapes (the measurements behind [`Conv1dShape::prefers_direct`]
/// and the transposed convolution's column threshold). Not for model code: every function
/// fails on inputs that are not a valid CPU `f32` convolution instead of falling back.
#[cfg(feature = "bench-kernels")]
pub mod routes {
    use candle_core::{Result, Tensor};

    use super::{
        cpu, gemm, Conv1dShape, ConvTranspose1dShape, InputMap, PackedWeightCache, Precision,
    };

    fn conv1d_shape(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Result<Conv1dShape> {
        match Conv1dShape::for_fast_path(x, weight, bias, padding, dilation, groups) {
            Some(shape) => Ok(shape),
            None => candle_core::bail!("not a CPU f32 convolution the fast paths take"),
        }
    }

    fn conv_transpose1d_shape(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Result<ConvTranspose1dShape> {
        match ConvTranspose1dShape::for_fast_path(x, weight, bias, stride, padding) {
            Some(shape) => Ok(shape),
            None => candle_core::bail!("not a CPU f32 transposed convolution the fast paths take"),
        }
    }

    /// [`super::conv1d`] through per-tap matrix products.
    pub fn conv1d_gemm(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Result<Tensor> {
        let shape = conv1d_shape(x, weight, bias, padding, dilation, groups)?;
        gemm::conv1d(x, weight, bias, &shape)
    }

    /// [`super::conv1d`] (groups 1) through the direct kernel, packing the weights per call.
    pub fn conv1d_direct(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        padding: usize,
        dilation: usize,
    ) -> Result<Tensor> {
        let shape = conv1d_shape(x, weight, bias, padding, dilation, 1)?;
        cpu::conv1d_direct(x, weight, bias, &shape, &InputMap::IDENTITY, &[], None)
    }

    /// [`super::conv_transpose1d`] through per-tap matrix products over each phase.
    pub fn conv_transpose1d_gemm(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Result<Tensor> {
        let shape = conv_transpose1d_shape(x, weight, bias, stride, padding)?;
        gemm::conv_transpose1d(x, weight, bias, &shape)
    }

    /// [`super::conv_transpose1d`] through the direct kernel, one phase at a time.
    pub fn conv_transpose1d_direct(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Result<Tensor> {
        let shape = conv_transpose1d_shape(x, weight, bias, stride, padding)?;
        cpu::conv_transpose1d_direct(x, weight, bias, &shape, &InputMap::IDENTITY, None)
    }

    /// [`conv1d_direct`] with the weights in `precision` (`"f32"`, `"bf16"`, `"int8"`, or
    /// `"spectral"`: `f32` through the layer's spectra where that is worth it), packed on the
    /// first run of the returned closure and reused by the others.
    pub fn conv1d_direct_at<'w>(
        weight: &'w Tensor,
        bias: Option<&'w Tensor>,
        padding: usize,
        dilation: usize,
        precision: &str,
    ) -> Result<impl Fn(&Tensor) -> Result<Tensor> + 'w> {
        let spectral = precision == "spectral";
        let precision = match precision {
            "f32" | "spectral" => Precision::F32,
            "bf16" => Precision::Bf16,
            "int8" => Precision::Int8,
            other => candle_core::bail!("unknown precision {other}"),
        };
        let cache = if spectral {
            PackedWeightCache::spectral(precision)
        } else {
            PackedWeightCache::new(precision)
        };
        Ok(move |x: &Tensor| {
            let shape = conv1d_shape(x, weight, bias, padding, dilation, 1)?;
            cpu::conv1d_direct(
                x,
                weight,
                bias,
                &shape,
                &InputMap::IDENTITY,
                &[],
                Some(&cache),
            )
        })
    }
}
