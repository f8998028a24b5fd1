//! 1-D convolutions used by every VITS block.
//!
//! All model code calls convolutions through these functions so that one place decides how
//! they run: this is where the decoder spends most of its time. candle's CPU convolution unfolds
//! the whole input (im2col) before one big matrix product, which for the decoder's long signals
//! (tens of thousands of samples) streams hundreds of megabytes through memory, and it runs
//! grouped convolutions as one tiny convolution per group. For `f32` on the CPU we instead:
//!
//! - run convolutions with 3 or more taps through [`super::direct_conv`], a register-blocked
//!   kernel that writes each output once; [`conv1d_fused`] and [`conv_transpose1d_fused`] also
//!   fold an elementwise input map (scale, LeakyReLU, mask) and residual adds into it, which is
//!   how the decoder's `x + conv(LeakyReLU(x))` steps run in one pass;
//! - write pointwise convolutions as a matrix product (`gemm`), and grouped ones with several
//!   input channels per group as one product per tap, over column tiles that stay in cache,
//!   with zero padding handled by clipping each tap's column range (no padded copy);
//! - run depthwise convolutions (one input channel per group) as a direct loop;
//! - split transposed convolutions into `stride` phases, each an ordinary small convolution.
//!
//! Other devices and dtypes keep candle's implementation (the fused entry points then run the
//! map and adds as tensor ops). Everything runs on the caller's thread
//! (`gemm::Parallelism::None`), whatever `RAYON_NUM_THREADS` says: the server runs several
//! inference workers side by side, so each convolution must not also fan out over all cores.

use std::sync::{Arc, OnceLock};

use candle_core::{DType, Device, Result, Tensor};

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
    if let Some(shape) = Conv1dShape::for_fast_path(x, weight, bias, padding, dilation, groups) {
        if shape.prefers_direct() {
            return cpu_f32::conv1d_direct(x, weight, bias, &shape, &InputMap::IDENTITY, &[], None);
        }
        return cpu_f32::conv1d(x, weight, bias, &shape);
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
    if let Some(shape) = ConvTranspose1dShape::for_fast_path(x, weight, bias, stride, padding) {
        return cpu_f32::conv_transpose1d(x, weight, bias, &shape);
    }
    let y = x.conv_transpose1d(weight, padding, 0, stride, 1, 1)?;
    add_bias(y, bias)
}

/// An elementwise map fused into a convolution's input: `x ↦ LeakyReLU(x · scale) · mask`.
#[derive(Debug, Clone, Copy)]
pub struct InputMap<'a> {
    pub scale: f64,
    /// Negative-side slope of a LeakyReLU applied after scaling (0 ≤ slope ≤ 1), if any.
    pub leaky_slope: Option<f64>,
    /// `[B, 1, L_in]` sequence mask, if any.
    pub mask: Option<&'a Tensor>,
}

impl InputMap<'_> {
    /// Leaves the input as it is.
    pub const IDENTITY: InputMap<'static> = InputMap {
        scale: 1.0,
        leaky_slope: None,
        mask: None,
    };

    /// The map as tensor ops, for the paths that do not fuse it.
    pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = if self.scale == 1.0 {
            x.clone()
        } else {
            (x * self.scale)?
        };
        if let Some(slope) = self.leaky_slope {
            x = x.maximum(&(&x * slope)?)?;
        }
        match self.mask {
            Some(m) => x.broadcast_mul(m),
            None => Ok(x),
        }
    }
}

/// The direct kernel's copy of a layer's convolution weights, made on first CPU use and kept
/// with the layer: the weights never change after loading, so repacking them on every call
/// (megabytes per utterance in the flow) is wasted work. Clones share the copy.
#[derive(Debug, Clone, Default)]
pub struct PackedWeightCache(Arc<OnceLock<super::direct_conv::PackedWeights>>);

/// `Σ residuals + conv1d(map(x))` (stride 1, groups 1): the decoder's residual step, which can
/// also add a running sum. On the CPU in `f32` the map, bias and residuals are fused into one
/// pass of the direct kernel; elsewhere it runs as separate tensor ops. `cache`, if given,
/// must only ever be used with this `weight`.
#[allow(clippy::too_many_arguments)]
pub fn conv1d_fused(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    padding: usize,
    dilation: usize,
    map: &InputMap<'_>,
    residuals: &[&Tensor],
    cache: Option<&PackedWeightCache>,
) -> Result<Tensor> {
    if let Some(shape) = Conv1dShape::for_fast_path(x, weight, bias, padding, dilation, 1) {
        let (b, c, l) = (shape.batch, shape.c_out, shape.l_out);
        let residuals_ok = residuals
            .iter()
            .all(|r| is_cpu_f32(r, r, None) && r.dims() == [b, c, l]);
        let mask_ok = map
            .mask
            .is_none_or(|m| is_cpu_f32(m, m, None) && m.dims() == [shape.batch, 1, shape.l_in]);
        if residuals_ok && mask_ok {
            return cpu_f32::conv1d_direct(x, weight, bias, &shape, map, residuals, cache);
        }
    }
    let mut y = conv1d(&map.apply(x)?, weight, bias, padding, dilation, 1)?;
    for r in residuals {
        y = (*r + y)?;
    }
    Ok(y)
}

/// `conv_transpose1d(map(x))`, with the map fused into the CPU kernel's input packing.
pub fn conv_transpose1d_fused(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: usize,
    padding: usize,
    map: &InputMap<'_>,
) -> Result<Tensor> {
    if let Some(shape) = ConvTranspose1dShape::for_fast_path(x, weight, bias, stride, padding) {
        let mask_ok = map
            .mask
            .is_none_or(|m| is_cpu_f32(m, m, None) && m.dims() == [shape.batch, 1, shape.l_in]);
        // Measured on one core (`timing` below): 128→64 k16 s8 over 2008 columns 14.0 → 11.3 ms,
        // 64→32 k8 s4 over 16064 columns 16.4 → 14.0 ms, but 256→128 k16 s8 over 251 columns
        // 6.1–6.4 → 6.1–7.3 ms, so short inputs keep the per-tap products.
        if mask_ok && shape.l_in >= 1024 {
            return cpu_f32::conv_transpose1d_direct(x, weight, bias, &shape, map);
        }
    }
    conv_transpose1d(&map.apply(x)?, weight, bias, stride, padding)
}

/// One convolution of a residual stack (see [`residual_stack_sum`]), borrowed from its layer.
#[derive(Debug, Clone, Copy)]
pub struct StackConv<'a> {
    /// [C, C, K]
    pub weight: &'a Tensor,
    pub bias: Option<&'a Tensor>,
    pub padding: usize,
    pub dilation: usize,
    pub cache: &'a PackedWeightCache,
}

/// `Σ_blocks block(y)` for `y` [B, C, L], where a block is a chain of residual units
/// `x ← x + convs(x)` and every convolution applies LeakyReLU(`slope`) and `mask` [B, 1, L] to
/// its input: a decoder stage's multi-receptive-field sum. On the CPU in `f32`, for signals that
/// outgrow the cache, it runs strip by strip (`super::mrf`); otherwise it returns `None` and the
/// caller runs the layers one by one.
pub fn residual_stack_sum(
    y: &Tensor,
    blocks: &[Vec<Vec<StackConv<'_>>>],
    slope: f64,
    mask: Option<&Tensor>,
) -> Result<Option<Tensor>> {
    let Ok((batch, channels, len)) = y.dims3() else {
        return Ok(None);
    };
    if !is_cpu_f32(y, y, None) || !super::mrf::worth_it(channels, len) {
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
    cpu_f32::residual_stack_sum(y, blocks, slope as f32, mask).map(Some)
}

fn add_bias(y: Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    match bias {
        Some(b) => y.broadcast_add(&b.reshape((1, (), 1))?),
        None => Ok(y),
    }
}

/// True when all operands are `f32` tensors in CPU memory, the only case with a fast path.
fn is_cpu_f32(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> bool {
    let cpu_f32 = |t: &Tensor| matches!(t.device(), Device::Cpu) && t.dtype() == DType::F32;
    cpu_f32(x) && cpu_f32(weight) && bias.is_none_or(cpu_f32)
}

/// Validated dimensions of a stride-1 grouped convolution. Inputs that fail validation are left to
/// candle, so its error messages (and any of its edge-case behaviour) stay the reference.
#[derive(Debug, Clone, Copy)]
struct Conv1dShape {
    batch: usize,
    c_in: usize,
    c_out: usize,
    l_in: usize,
    l_out: usize,
    taps: usize,
    padding: usize,
    dilation: usize,
    groups: usize,
}

impl Conv1dShape {
    fn for_fast_path(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Option<Self> {
        if !is_cpu_f32(x, weight, bias) || dilation == 0 || groups == 0 {
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
    /// thread CPU time): from 3 taps it is faster at every model shape (192→384 k5 over 251
    /// columns 4.0 → 3.0 ms, 768→192 k3 over 103 columns 2.2 → 1.8 ms, 64→64 k5 over 16064
    /// columns 14.1 → 9.3 ms); pointwise convolutions tie or lose (192→192 over 103 columns
    /// 0.15 → 0.20 ms), so they stay with gemm.
    fn prefers_direct(&self) -> bool {
        self.groups == 1 && self.taps >= 3
    }
}

/// Validated dimensions of a transposed convolution (groups 1, dilation 1, no output padding).
#[derive(Debug, Clone, Copy)]
struct ConvTranspose1dShape {
    batch: usize,
    c_in: usize,
    c_out: usize,
    l_in: usize,
    l_out: usize,
    taps: usize,
    stride: usize,
    padding: usize,
}

impl ConvTranspose1dShape {
    fn for_fast_path(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Option<Self> {
        if !is_cpu_f32(x, weight, bias) || stride == 0 {
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

mod cpu_f32 {
    use super::{Conv1dShape, ConvTranspose1dShape};
    use crate::vits::direct_conv::{self, InputMap, PackedWeights};
    use crate::vits::mrf;
    use candle_core::{Result, Storage, Tensor};
    use gemm::{gemm, Parallelism};

    /// Floats of output tile plus input slab worked on at once: about 256 KiB, so both stay in
    /// L2 while every kernel tap passes over them.
    const TILE_FLOATS: usize = 64 * 1024;

    /// Output columns per tile for a product with `rows` output and `cols` input channels.
    fn tile_columns(rows: usize, cols: usize) -> usize {
        (TILE_FLOATS / (rows + cols)).clamp(64, 8192)
    }

    /// Runs `f` on the tensor's elements in row-major order, without a copy when the tensor is
    /// already contiguous.
    fn with_contiguous_f32<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
        let t = t.contiguous()?;
        let (storage, layout) = t.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            candle_core::bail!("fast conv path needs a CPU tensor");
        };
        let data = cpu.as_slice::<f32>()?;
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("tensor is not contiguous after `contiguous()`");
        };
        Ok(f(&data[start..end]))
    }

    /// Reorders a row-major [A, B, K] weight tensor so each tap k is one row-major matrix:
    /// [K, A, B], or [K, B, A] when `swap` (for the transposed convolution's [C_in, C_out, K]).
    /// One pass over the weights; small next to the convolution itself.
    fn taps_first(w: &[f32], a: usize, b: usize, taps: usize, swap: bool) -> Vec<f32> {
        let mut out = vec![0f32; w.len()];
        for (ia, rows) in w.chunks_exact(b * taps).enumerate() {
            for (ib, row) in rows.chunks_exact(taps).enumerate() {
                let at = if swap { ib * a + ia } else { ia * b + ib };
                for (k, &v) in row.iter().enumerate() {
                    out[k * a * b + at] = v;
                }
            }
        }
        out
    }

    fn bias_or_zero(bias: Option<&Tensor>, c_out: usize) -> Result<Vec<f32>> {
        match bias {
            Some(b) => b.flatten_all()?.to_vec1::<f32>(),
            None => Ok(vec![0.0; c_out]),
        }
    }

    /// One kernel tap of a convolution written as a matrix product: output column `t` receives
    /// `weights · x[:, t + shift]` where the input column exists.
    struct Tap<'a> {
        /// A (output channel × input channel) matrix starting at `weights[0]`, element (r, c) at
        /// `r · row_stride + c · col_stride` (see [`TapWeights`] for the two layouts used).
        weights: &'a [f32],
        row_stride: usize,
        col_stride: usize,
        shift: isize,
    }

    /// `dst[:, t - t0] += Σ_taps tap.weights · x[:, t + tap.shift]` for `t` in `t0..t1`, where
    /// `x` has `cols` rows of `x_len` columns (stride `x_len`) and `dst` has `rows` rows of stride
    /// `dst_stride`. Input columns outside `0..x_len` count as zero (the convolution's padding).
    #[allow(clippy::too_many_arguments)]
    fn accumulate_taps(
        dst: &mut [f32],
        dst_stride: usize,
        t0: usize,
        t1: usize,
        x: &[f32],
        x_len: usize,
        rows: usize,
        cols: usize,
        taps: &[Tap<'_>],
    ) {
        assert!(rows > 0 && cols > 0 && t0 <= t1);
        assert!(dst.len() >= (rows - 1) * dst_stride + (t1 - t0));
        assert!(x.len() >= cols * x_len);
        for tap in taps {
            assert!(tap.weights.len() > (rows - 1) * tap.row_stride + (cols - 1) * tap.col_stride);
            // Output columns whose input column t + shift lies inside 0..x_len.
            let lo = (t0 as isize).max(-tap.shift);
            let hi = (t1 as isize).min(x_len as isize - tap.shift);
            if lo >= hi {
                continue;
            }
            let (lo, n) = (lo as usize, (hi - lo) as usize);
            let x_start = (lo as isize + tap.shift) as usize;
            // SAFETY: gemm reads the `rows × cols` weight view (its last element is in bounds,
            // checked above), the input block of `cols` rows × columns x_start..x_start + n
            // (x_start + n ≤ x_len by the clipping above, and x holds cols · x_len values), and
            // reads/writes the `rows × n` destination block at column lo − t0
            // (lo − t0 + n ≤ t1 − t0, checked against dst.len() above). The three
            // regions come from distinct borrows, so the destination aliases neither input.
            unsafe {
                gemm(
                    rows,
                    n,
                    cols,
                    dst.as_mut_ptr().add(lo - t0),
                    1,
                    dst_stride as isize,
                    true,
                    tap.weights.as_ptr(),
                    tap.col_stride as isize,
                    tap.row_stride as isize,
                    x.as_ptr().add(x_start),
                    1,
                    x_len as isize,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    Parallelism::None,
                );
            }
        }
    }

    /// Below this many output columns per call, gemm reads the weights in the caller's layout
    /// (packing them itself, once per call); above it, repacking every tap into one contiguous
    /// matrix once per call is cheaper than gemm re-packing strided taps for every column tile.
    const REPACK_MIN_COLUMNS: usize = 1024;

    /// Where each tap's (output × input channel) matrix lives: the caller's weight layout read
    /// with strides, or a `taps_first` copy.
    enum TapWeights<'a> {
        Original(&'a [f32]),
        Packed(Vec<f32>),
    }

    pub(super) fn conv1d(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        s: &Conv1dShape,
    ) -> Result<Tensor> {
        let c_in_g = s.c_in / s.groups;
        let bias = bias_or_zero(bias, s.c_out)?;
        let mut out = vec![0f32; s.batch * s.c_out * s.l_out];
        // weights: [C_out, C_in/groups, K] row-major.
        with_contiguous_f32(weight, |raw| {
            let weights = if c_in_g > 1 && s.l_out >= REPACK_MIN_COLUMNS {
                TapWeights::Packed(taps_first(raw, s.c_out, c_in_g, s.taps, false))
            } else {
                TapWeights::Original(raw)
            };
            with_contiguous_f32(x, |x| {
                for b in 0..s.batch {
                    let x_b = &x[b * s.c_in * s.l_in..(b + 1) * s.c_in * s.l_in];
                    let out_b = &mut out[b * s.c_out * s.l_out..(b + 1) * s.c_out * s.l_out];
                    if c_in_g == 1 {
                        depthwise(out_b, x_b, raw, &bias, s);
                    } else {
                        grouped_gemm(out_b, x_b, &weights, &bias, s);
                    }
                }
            })
        })??;
        Tensor::from_vec(out, (s.batch, s.c_out, s.l_out), x.device())
    }

    /// [`super::conv1d_fused`] through [`direct_conv`] (groups 1).
    pub(super) fn conv1d_direct(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        s: &Conv1dShape,
        map: &super::InputMap<'_>,
        residuals: &[&Tensor],
        cache: Option<&super::PackedWeightCache>,
    ) -> Result<Tensor> {
        let bias = bias_or_zero(bias, s.c_out)?;
        let fresh;
        let packed = match cache {
            Some(cache) => cached_pack(weight, cache, s.c_out, s.c_in, s.taps)?,
            None => {
                fresh = with_contiguous_f32(weight, |w| {
                    PackedWeights::new(w, s.c_out, s.c_in, s.taps)
                })?;
                &fresh
            }
        };
        let mask = map
            .mask
            .map(|m| m.flatten_all()?.to_vec1::<f32>())
            .transpose()?;
        let residuals: Vec<Tensor> = residuals
            .iter()
            .map(|r| r.contiguous())
            .collect::<Result<_>>()?;
        let guards: Vec<_> = residuals.iter().map(|r| r.storage_and_layout()).collect();
        let residuals: Vec<&[f32]> = guards
            .iter()
            .map(|(storage, layout)| {
                let Storage::Cpu(cpu) = &**storage else {
                    candle_core::bail!("fast conv path needs a CPU tensor");
                };
                let Some((start, end)) = layout.contiguous_offsets() else {
                    candle_core::bail!("tensor is not contiguous after `contiguous()`");
                };
                Ok(&cpu.as_slice::<f32>()?[start..end])
            })
            .collect::<Result<_>>()?;
        let mut out = vec![0f32; s.batch * s.c_out * s.l_out];
        let (in_len, out_len) = (s.c_in * s.l_in, s.c_out * s.l_out);
        with_contiguous_f32(x, |x| {
            for (b, out_b) in out.chunks_exact_mut(out_len).enumerate() {
                let item_map = InputMap {
                    scale: map.scale as f32,
                    leaky_slope: map.leaky_slope.map(|v| v as f32),
                    mask: mask.as_ref().map(|m| &m[b * s.l_in..(b + 1) * s.l_in]),
                };
                let item_residuals: Vec<&[f32]> = residuals
                    .iter()
                    .map(|r| &r[b * out_len..(b + 1) * out_len])
                    .collect();
                direct_conv::conv1d(
                    out_b,
                    s.l_out,
                    &x[b * in_len..(b + 1) * in_len],
                    s.l_in,
                    packed,
                    &bias,
                    &item_residuals,
                    s.padding as isize,
                    s.dilation,
                    &item_map,
                );
            }
        })?;
        Tensor::from_vec(out, (s.batch, s.c_out, s.l_out), x.device())
    }

    /// The layer's packed weights, packed on first use.
    fn cached_pack<'c>(
        weight: &Tensor,
        cache: &'c super::PackedWeightCache,
        c_out: usize,
        c_in: usize,
        taps: usize,
    ) -> Result<&'c PackedWeights> {
        let cell = &cache.0;
        if cell.get().is_none() {
            let packed = with_contiguous_f32(weight, |w| PackedWeights::new(w, c_out, c_in, taps))?;
            let _ = cell.set(packed);
        }
        let packed = cell.get().expect("just set");
        if !packed.has_shape(c_out, c_in, taps) {
            candle_core::bail!("packed weight cache used with a differently shaped weight");
        }
        Ok(packed)
    }

    pub(super) fn residual_stack_sum(
        y: &Tensor,
        blocks: &[Vec<Vec<super::StackConv<'_>>>],
        slope: f32,
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let (batch, channels, len) = y.dims3()?;
        // Every convolution's bias, in the order the loops below visit them.
        let biases: Vec<Vec<f32>> = blocks
            .iter()
            .flatten()
            .flatten()
            .map(|c| bias_or_zero(c.bias, channels))
            .collect::<Result<_>>()?;
        let mut biases = biases.iter();
        let mut layers = Vec::with_capacity(blocks.len());
        for block in blocks {
            let mut units = Vec::with_capacity(block.len());
            for unit in block {
                let mut unit_layers = Vec::with_capacity(unit.len());
                for c in unit {
                    let bias = biases.next().expect("one bias per convolution");
                    let taps = c.weight.dim(2)?;
                    unit_layers.push(mrf::Layer {
                        conv: direct_conv::Conv {
                            weights: cached_pack(c.weight, c.cache, channels, channels, taps)?,
                            bias,
                            dilation: c.dilation,
                            map: InputMap {
                                scale: 1.0,
                                leaky_slope: Some(slope),
                                mask: None,
                            },
                        },
                        padding: c.padding,
                    });
                }
                units.push(unit_layers);
            }
            layers.push(units);
        }
        let mask = mask
            .map(|m| m.flatten_all()?.to_vec1::<f32>())
            .transpose()?;
        let item = channels * len;
        let mut out = vec![0f32; batch * item];
        with_contiguous_f32(y, |y| {
            for (b, out_b) in out.chunks_exact_mut(item).enumerate() {
                mrf::stage_sum(
                    out_b,
                    &y[b * item..(b + 1) * item],
                    channels,
                    len,
                    &layers,
                    mask.as_ref().map(|m| &m[b * len..(b + 1) * len]),
                );
            }
        })?;
        Tensor::from_vec(out, (batch, channels, len), y.device())
    }

    /// One batch item of a convolution with several input channels per group.
    fn grouped_gemm(
        out: &mut [f32],
        x: &[f32],
        weights: &TapWeights<'_>,
        bias: &[f32],
        s: &Conv1dShape,
    ) {
        let c_in_g = s.c_in / s.groups;
        let c_out_g = s.c_out / s.groups;
        let tile = tile_columns(c_out_g, c_in_g);
        let group_weights = c_out_g * c_in_g;
        for g in 0..s.groups {
            let x_g = &x[g * c_in_g * s.l_in..(g + 1) * c_in_g * s.l_in];
            let out_g = &mut out[g * c_out_g * s.l_out..(g + 1) * c_out_g * s.l_out];
            let taps: Vec<Tap> = (0..s.taps)
                .map(|k| {
                    let shift = (k * s.dilation) as isize - s.padding as isize;
                    match weights {
                        // [C_out, C_in/groups, K]
                        TapWeights::Original(w) => Tap {
                            weights: &w[g * group_weights * s.taps + k..],
                            row_stride: c_in_g * s.taps,
                            col_stride: s.taps,
                            shift,
                        },
                        // [K, C_out, C_in/groups]
                        TapWeights::Packed(w) => {
                            let start = (k * s.groups + g) * group_weights;
                            Tap {
                                weights: &w[start..start + group_weights],
                                row_stride: c_in_g,
                                col_stride: 1,
                                shift,
                            }
                        }
                    }
                })
                .collect();
            for t0 in (0..s.l_out).step_by(tile) {
                let t1 = (t0 + tile).min(s.l_out);
                for (row, &b) in out_g.chunks_exact_mut(s.l_out).zip(&bias[g * c_out_g..]) {
                    row[t0..t1].fill(b);
                }
                accumulate_taps(
                    &mut out_g[t0..],
                    s.l_out,
                    t0,
                    t1,
                    x_g,
                    s.l_in,
                    c_out_g,
                    c_in_g,
                    &taps,
                );
            }
        }
    }

    /// One batch item of a convolution with one input channel per group: each output channel is
    /// a short filter over one input row, too little work for a matrix product. `weights` is
    /// [C_out, 1, K].
    fn depthwise(out: &mut [f32], x: &[f32], weights: &[f32], bias: &[f32], s: &Conv1dShape) {
        let c_out_g = s.c_out / s.groups;
        for (co, row) in out.chunks_exact_mut(s.l_out).enumerate() {
            let x_row = &x[(co / c_out_g) * s.l_in..][..s.l_in];
            row.fill(bias[co]);
            for k in 0..s.taps {
                let w = weights[co * s.taps + k];
                let shift = (k * s.dilation) as isize - s.padding as isize;
                let lo = 0isize.max(-shift);
                let hi = (s.l_out as isize).min(s.l_in as isize - shift);
                if lo >= hi {
                    continue;
                }
                let (lo, hi) = (lo as usize, hi as usize);
                let x_lo = (lo as isize + shift) as usize;
                for (y, &v) in row[lo..hi].iter_mut().zip(&x_row[x_lo..]) {
                    *y += w * v;
                }
            }
        }
    }

    /// [`super::conv_transpose1d_fused`]: each phase (see [`conv_transpose1d`]) as a direct
    /// convolution with the phase's taps reversed, so the input map is fused into its packing.
    pub(super) fn conv_transpose1d_direct(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        s: &ConvTranspose1dShape,
        map: &super::InputMap<'_>,
    ) -> Result<Tensor> {
        let bias = bias_or_zero(bias, s.c_out)?;
        let mask = map
            .mask
            .map(|m| m.flatten_all()?.to_vec1::<f32>())
            .transpose()?;
        let (stride, padding) = (s.stride as isize, s.padding as isize);
        let mut out = vec![0f32; s.batch * s.c_out * s.l_out];
        with_contiguous_f32(weight, |raw| {
            with_contiguous_f32(x, |x| {
                for r in 0..s.stride {
                    // Phase r: output j = q·stride + r − padding for q in q_lo..q_hi, fed by
                    // taps k = r + m·stride from input i = q − m. With m = M − 1 − k' this is a
                    // convolution over t = q − q_lo with taps k' reading i = t + k' − (M − 1 − q_lo).
                    let q_lo = (padding - r as isize).div_euclid(stride)
                        + ((padding - r as isize).rem_euclid(stride) != 0) as isize;
                    let q_hi =
                        (s.l_out as isize + padding - r as isize + stride - 1).div_euclid(stride);
                    let n_q = (q_hi - q_lo).max(0) as usize;
                    if n_q == 0 {
                        continue;
                    }
                    let m_taps = (r..s.taps).step_by(s.stride).count();
                    let mut phase = vec![0f32; s.c_out * n_q];
                    if m_taps == 0 {
                        for (row, &b) in phase.chunks_exact_mut(n_q).zip(&bias) {
                            row.fill(b);
                        }
                    }
                    // [C_out, C_in, M] with tap k' = tap r + (M − 1 − k')·stride of [C_in, C_out, K].
                    let mut w = vec![0f32; s.c_out * s.c_in * m_taps];
                    for co in 0..s.c_out {
                        for ci in 0..s.c_in {
                            for kk in 0..m_taps {
                                let k = r + (m_taps - 1 - kk) * s.stride;
                                w[(co * s.c_in + ci) * m_taps + kk] =
                                    raw[(ci * s.c_out + co) * s.taps + k];
                            }
                        }
                    }
                    let packed =
                        (m_taps > 0).then(|| PackedWeights::new(&w, s.c_out, s.c_in, m_taps));
                    for b in 0..s.batch {
                        let x_b = &x[b * s.c_in * s.l_in..(b + 1) * s.c_in * s.l_in];
                        if let Some(packed) = &packed {
                            let item_map = InputMap {
                                scale: map.scale as f32,
                                leaky_slope: map.leaky_slope.map(|v| v as f32),
                                mask: mask.as_ref().map(|m| &m[b * s.l_in..(b + 1) * s.l_in]),
                            };
                            direct_conv::conv1d(
                                &mut phase,
                                n_q,
                                x_b,
                                s.l_in,
                                packed,
                                &bias,
                                &[],
                                m_taps as isize - 1 - q_lo,
                                1,
                                &item_map,
                            );
                        }
                        let out_b = &mut out[b * s.c_out * s.l_out..(b + 1) * s.c_out * s.l_out];
                        let j0 = (q_lo * stride + r as isize - padding) as usize;
                        for (out_row, row) in
                            out_b.chunks_exact_mut(s.l_out).zip(phase.chunks_exact(n_q))
                        {
                            for (y, &v) in out_row[j0..].iter_mut().step_by(s.stride).zip(row) {
                                *y = v;
                            }
                        }
                    }
                }
            })
        })??;
        Tensor::from_vec(out, (s.batch, s.c_out, s.l_out), x.device())
    }

    /// Output position j = q·stride + r − padding (phase r) collects the taps k = r + m·stride
    /// from input i = q − m, so each phase is an ordinary convolution over q with kernel taps
    /// m = 0, 1, …; phases are computed into a tile and interleaved into the output.
    pub(super) fn conv_transpose1d(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        s: &ConvTranspose1dShape,
    ) -> Result<Tensor> {
        let bias = bias_or_zero(bias, s.c_out)?;
        // [C_in, C_out, K] → [K, C_out, C_in]: each tap's (output × input channel) matrix
        // contiguous.
        let tap_len = s.c_out * s.c_in;
        let tile = tile_columns(s.c_out, s.c_in);
        let mut out = vec![0f32; s.batch * s.c_out * s.l_out];
        let mut phase_tile = vec![0f32; s.c_out * tile];
        let (stride, padding) = (s.stride as isize, s.padding as isize);
        // weights: [C_in, C_out, K] row-major.
        with_contiguous_f32(weight, |raw| {
            let weights = if s.l_in >= REPACK_MIN_COLUMNS {
                TapWeights::Packed(taps_first(raw, s.c_in, s.c_out, s.taps, true))
            } else {
                TapWeights::Original(raw)
            };
            with_contiguous_f32(x, |x| {
                for b in 0..s.batch {
                    let x_b = &x[b * s.c_in * s.l_in..(b + 1) * s.c_in * s.l_in];
                    let out_b = &mut out[b * s.c_out * s.l_out..(b + 1) * s.c_out * s.l_out];
                    for r in 0..s.stride {
                        // q range with 0 ≤ q·stride + r − padding < l_out.
                        let q_lo = (padding - r as isize).div_euclid(stride)
                            + ((padding - r as isize).rem_euclid(stride) != 0) as isize;
                        let q_hi = (s.l_out as isize + padding - r as isize + stride - 1)
                            .div_euclid(stride);
                        // Columns are indexed phase-locally, t = q − q_lo, so tap m reads input
                        // i = q − m = t + q_lo − m.
                        let taps: Vec<Tap> = (r..s.taps)
                            .step_by(s.stride)
                            .enumerate()
                            .map(|(m, k)| {
                                let shift = q_lo - m as isize;
                                match &weights {
                                    // [C_in, C_out, K]
                                    TapWeights::Original(w) => Tap {
                                        weights: &w[k..],
                                        row_stride: s.taps,
                                        col_stride: s.c_out * s.taps,
                                        shift,
                                    },
                                    // [K, C_out, C_in]
                                    TapWeights::Packed(w) => Tap {
                                        weights: &w[k * tap_len..(k + 1) * tap_len],
                                        row_stride: s.c_in,
                                        col_stride: 1,
                                        shift,
                                    },
                                }
                            })
                            .collect();
                        let n_q = (q_hi - q_lo).max(0) as usize;
                        for t0 in (0..n_q).step_by(tile) {
                            let t1 = (t0 + tile).min(n_q);
                            let width = t1 - t0;
                            for (row, &bv) in phase_tile.chunks_exact_mut(tile).zip(&bias) {
                                row[..width].fill(bv);
                            }
                            accumulate_taps(
                                &mut phase_tile,
                                tile,
                                t0,
                                t1,
                                x_b,
                                s.l_in,
                                s.c_out,
                                s.c_in,
                                &taps,
                            );
                            let j0 =
                                ((t0 as isize + q_lo) * stride + r as isize - padding) as usize;
                            for (out_row, row) in out_b
                                .chunks_exact_mut(s.l_out)
                                .zip(phase_tile.chunks_exact(tile))
                            {
                                let out_phase = out_row[j0..].iter_mut().step_by(s.stride);
                                for (y, &v) in out_phase.zip(&row[..width]) {
                                    *y = v;
                                }
                            }
                        }
                    }
                }
            })
        })??;
        Tensor::from_vec(out, (s.batch, s.c_out, s.l_out), x.device())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn random(rng: &mut StdRng, dims: &[usize]) -> Tensor {
        let n = dims.iter().product();
        let data: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        Tensor::from_vec(data, dims, &Device::Cpu).unwrap()
    }

    /// The strip-by-strip stage sum equals running its layers one by one over the whole signal:
    /// one block of single-conv units (HiFi-GAN type 2), one of two-conv units (type 1), a
    /// signal several strips long, a batch of two with a mask cutting the second item short.
    #[test]
    fn residual_stack_sum_matches_layer_by_layer() {
        let mut rng = StdRng::seed_from_u64(21);
        let (batch, c, len) = (2, 8, 40_000);
        // (kernel, dilations, convs per unit)
        let shapes = [(3usize, vec![1usize, 2], 1usize), (5, vec![3, 1], 2)];
        // Per block, per unit, per conv: weight, bias, dilation and its packing cache.
        type Layer = (Tensor, Tensor, usize, PackedWeightCache);
        let weights: Vec<Vec<Vec<Layer>>> = shapes
            .iter()
            .map(|(k, dilations, per_unit)| {
                dilations
                    .iter()
                    .map(|&d| {
                        (0..*per_unit)
                            .map(|n| {
                                let d = if n == 0 { d } else { 1 };
                                let w = (random(&mut rng, &[c, c, *k]) * 0.3).unwrap();
                                let b = random(&mut rng, &[c]);
                                (w, b, d, PackedWeightCache::default())
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let blocks: Vec<Vec<Vec<StackConv>>> = weights
            .iter()
            .map(|block| {
                block
                    .iter()
                    .map(|unit| {
                        unit.iter()
                            .map(|(w, b, d, cache)| StackConv {
                                weight: w,
                                bias: Some(b),
                                padding: d * (w.dim(2).unwrap() - 1) / 2,
                                dilation: *d,
                                cache,
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let y = random(&mut rng, &[batch, c, len]);
        let lengths = [len, len - 12_345];
        let mask: Vec<f32> = lengths
            .iter()
            .flat_map(|&l| (0..len).map(move |t| (t < l) as u8 as f32))
            .collect();
        let mask = Tensor::from_vec(mask, (batch, 1, len), &Device::Cpu).unwrap();
        let got = residual_stack_sum(&y, &blocks, 0.1, Some(&mask))
            .unwrap()
            .expect("a CPU f32 signal this long takes the strip path");
        let map = InputMap {
            scale: 1.0,
            leaky_slope: Some(0.1),
            mask: Some(&mask),
        };
        let mut want: Option<Tensor> = None;
        for block in &blocks {
            let mut x = y.clone();
            for unit in block {
                let mut h = x.clone();
                for (n, conv) in unit.iter().enumerate() {
                    let residuals: Vec<&Tensor> = if n + 1 == unit.len() {
                        vec![&x]
                    } else {
                        vec![]
                    };
                    h = conv1d_fused(
                        &h,
                        conv.weight,
                        conv.bias,
                        conv.padding,
                        conv.dilation,
                        &map,
                        &residuals,
                        None,
                    )
                    .unwrap();
                }
                x = h;
            }
            want = Some(match want {
                Some(w) => (w + x).unwrap(),
                None => x,
            });
        }
        let err = relative_error(&got, &want.unwrap());
        assert!(err < 1e-5, "relative error {err}");
    }

    /// Largest difference relative to the reference output's largest magnitude.
    fn relative_error(got: &Tensor, reference: &Tensor) -> f32 {
        assert_eq!(got.dims(), reference.dims());
        let scale = reference.abs().unwrap().max_all().unwrap();
        let scale = scale.to_scalar::<f32>().unwrap().max(1e-6);
        let diff = (got - reference).unwrap().abs().unwrap().max_all().unwrap();
        diff.to_scalar::<f32>().unwrap() / scale
    }

    /// Our CPU kernel, called directly so a routing change cannot turn a test into candle vs candle.
    fn fast_conv1d(
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Tensor {
        let shape = Conv1dShape::for_fast_path(x, w, b, padding, dilation, groups)
            .expect("test shapes are valid CPU f32 convolutions");
        cpu_f32::conv1d(x, w, b, &shape).unwrap()
    }

    fn candle_conv1d(
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Tensor {
        let y = x.conv1d(w, padding, 1, dilation, groups).unwrap();
        add_bias(y, b).unwrap()
    }

    fn candle_conv_transpose1d(
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        stride: usize,
        padding: usize,
    ) -> Tensor {
        let y = x.conv_transpose1d(w, padding, 0, stride, 1, 1).unwrap();
        add_bias(y, b).unwrap()
    }

    /// (batch, c_in, c_out, length, kernel, padding, dilation, groups, bias)
    type ConvCase = (usize, usize, usize, usize, usize, usize, usize, usize, bool);

    fn check_conv1d(rng: &mut StdRng, case: ConvCase) {
        let (batch, c_in, c_out, len, k, padding, dilation, groups, with_bias) = case;
        let x = random(rng, &[batch, c_in, len]);
        let w = random(rng, &[c_out, c_in / groups, k]);
        let b = with_bias.then(|| random(rng, &[c_out]));
        let got = fast_conv1d(&x, &w, b.as_ref(), padding, dilation, groups);
        let want = candle_conv1d(&x, &w, b.as_ref(), padding, dilation, groups);
        let err = relative_error(&got, &want);
        assert!(err <= 1e-4, "conv1d {case:?}: relative error {err}");
        // The public entry point (which may route to candle) agrees too.
        let public = conv1d(&x, &w, b.as_ref(), padding, dilation, groups).unwrap();
        assert!(relative_error(&public, &want) <= 1e-4);
    }

    #[test]
    fn conv1d_matches_candle_on_model_shapes() {
        let mut rng = StdRng::seed_from_u64(7);
        let cases: &[ConvCase] = &[
            // Lengths ≥ REPACK_MIN_COLUMNS exercise the repacked weight layout, shorter ones the
            // in-place one.
            // decoder resblocks (kernels 3/5/7, dilations 1..12, "same" padding), spanning tiles
            (1, 32, 32, 2500, 3, 1, 1, 1, true),
            (1, 32, 32, 2500, 7, 36, 12, 1, true),
            (1, 64, 64, 1200, 5, 6, 3, 1, true),
            (1, 128, 128, 700, 7, 18, 6, 1, true),
            (1, 128, 128, 300, 3, 2, 2, 1, false),
            // conv_pre, conv_post (one output channel)
            (1, 192, 256, 251, 7, 3, 1, 1, true),
            (1, 32, 1, 3000, 7, 3, 1, 1, false),
            // flow WaveNet and 1×1 projections, text encoder FFN
            (1, 192, 384, 251, 5, 2, 1, 1, true),
            (1, 192, 384, 251, 1, 0, 1, 1, true),
            (1, 384, 192, 251, 1, 0, 1, 1, false),
            (1, 192, 768, 103, 3, 1, 1, 1, true),
            // batches
            (4, 64, 64, 333, 3, 1, 1, 1, true),
            (8, 192, 192, 57, 5, 2, 1, 1, false),
        ];
        for &case in cases {
            check_conv1d(&mut rng, case);
        }
    }

    #[test]
    fn conv1d_matches_candle_on_grouped_and_depthwise() {
        let mut rng = StdRng::seed_from_u64(11);
        let cases: &[ConvCase] = &[
            // duration predictor's depthwise convs
            (1, 192, 192, 100, 3, 1, 1, 192, true),
            (1, 192, 192, 100, 3, 3, 3, 192, true),
            (1, 192, 192, 100, 3, 9, 9, 192, false),
            (4, 192, 192, 37, 3, 9, 9, 192, true),
            // depthwise with a channel multiplier, and groups with several input channels
            (2, 4, 8, 50, 3, 1, 1, 4, true),
            (2, 8, 12, 50, 3, 2, 2, 2, true),
            (1, 1, 3, 40, 5, 2, 1, 1, true),
        ];
        for &case in cases {
            check_conv1d(&mut rng, case);
        }
    }

    #[test]
    fn conv1d_matches_candle_on_padding_edge_cases() {
        let mut rng = StdRng::seed_from_u64(13);
        let cases: &[ConvCase] = &[
            // no padding: output shorter than input
            (2, 16, 24, 90, 3, 0, 1, 1, true),
            (1, 192, 192, 20, 3, 0, 4, 192, true),
            // padding wider than the kernel: border columns see no input at all
            (1, 16, 16, 30, 3, 5, 1, 1, true),
            (1, 8, 8, 30, 3, 5, 1, 8, true),
            // input shorter than the dilated kernel
            (1, 16, 16, 3, 7, 6, 2, 1, true),
            (1, 16, 16, 3, 7, 6, 2, 16, false),
        ];
        for &case in cases {
            check_conv1d(&mut rng, case);
        }
    }

    #[test]
    fn conv1d_accepts_non_contiguous_inputs() {
        let mut rng = StdRng::seed_from_u64(17);
        let w = random(&mut rng, &[48, 32, 5]);
        let b = random(&mut rng, &[48]);
        // A window of a longer signal: rows are strided.
        let long = random(&mut rng, &[2, 32, 400]);
        let narrowed = long.narrow(2, 13, 300).unwrap();
        // A [B, L, C] tensor viewed as [B, C, L].
        let transposed = random(&mut rng, &[2, 300, 32]).transpose(1, 2).unwrap();
        for x in [&narrowed, &transposed] {
            assert!(!x.is_contiguous());
            let got = fast_conv1d(x, &w, Some(&b), 4, 2, 1);
            let want = candle_conv1d(x, &w, Some(&b), 4, 2, 1);
            assert!(relative_error(&got, &want) <= 1e-4);
        }
        let dw = random(&mut rng, &[32, 1, 3]);
        let got = fast_conv1d(&transposed, &dw, None, 3, 3, 32);
        let want = candle_conv1d(&transposed, &dw, None, 3, 3, 32);
        assert!(relative_error(&got, &want) <= 1e-4);
    }

    /// (batch, c_in, c_out, length, kernel, stride, padding, bias)
    type TransposeCase = (usize, usize, usize, usize, usize, usize, usize, bool);

    fn check_conv_transpose1d(rng: &mut StdRng, x: &Tensor, case: TransposeCase) {
        let (_, c_in, c_out, _, k, stride, padding, with_bias) = case;
        let w = random(rng, &[c_in, c_out, k]);
        let b = with_bias.then(|| random(rng, &[c_out]));
        let got = conv_transpose1d(x, &w, b.as_ref(), stride, padding).unwrap();
        let want = candle_conv_transpose1d(x, &w, b.as_ref(), stride, padding);
        let err = relative_error(&got, &want);
        assert!(
            err <= 1e-4,
            "conv_transpose1d {case:?}: relative error {err}"
        );
    }

    #[test]
    fn conv_transpose1d_matches_candle() {
        let mut rng = StdRng::seed_from_u64(19);
        let cases: &[TransposeCase] = &[
            // decoder upsamplers (the last one spans several tiles per phase and, being longer
            // than REPACK_MIN_COLUMNS, uses the repacked weights)
            (1, 256, 128, 40, 16, 8, 4, true),
            (1, 128, 64, 100, 16, 8, 4, true),
            (1, 64, 32, 1500, 8, 4, 2, true),
            (3, 64, 32, 70, 8, 4, 2, false),
            // no padding; padding beyond a stride; stride larger than the kernel
            (1, 16, 8, 30, 4, 2, 0, true),
            (2, 16, 8, 30, 9, 2, 3, true),
            (1, 16, 8, 30, 3, 4, 0, true),
            (1, 16, 8, 30, 3, 4, 1, false),
            // stride 1 and a single input column
            (1, 16, 8, 30, 3, 1, 1, true),
            (1, 16, 8, 1, 8, 4, 0, true),
        ];
        for &case in cases {
            let (batch, c_in, _, len, ..) = case;
            let x = random(&mut rng, &[batch, c_in, len]);
            check_conv_transpose1d(&mut rng, &x, case);
        }
        // Non-contiguous input.
        let case = (2, 32, 16, 50, 8, 4, 2, true);
        let x = random(&mut rng, &[2, 50, 32]).transpose(1, 2).unwrap();
        check_conv_transpose1d(&mut rng, &x, case);
    }

    #[test]
    fn input_map_scales_then_leaks_then_masks() {
        let x = Tensor::new(&[[[-2f32, 0., 3., 6.]]], &Device::Cpu).unwrap();
        let mask = Tensor::new(&[[[1f32, 1., 1., 0.]]], &Device::Cpu).unwrap();
        let map = InputMap {
            scale: 0.5,
            leaky_slope: Some(0.1),
            mask: Some(&mask),
        };
        let y = map.apply(&x).unwrap().flatten_all().unwrap();
        assert_eq!(y.to_vec1::<f32>().unwrap(), vec![-0.1, 0., 1.5, 0.]);
    }

    #[test]
    fn conv1d_fused_matches_separate_ops() {
        let mut rng = StdRng::seed_from_u64(29);
        // (batch, c_in, c_out, length, kernel, padding, dilation)
        let cases = [
            (1, 32, 32, 3000, 7, 36, 12),
            (3, 16, 16, 200, 5, 6, 3),
            (2, 32, 1, 500, 7, 3, 1),
            (1, 8, 12, 5, 3, 4, 1),
        ];
        for (batch, c_in, c_out, len, k, padding, dilation) in cases {
            let x = random(&mut rng, &[batch, c_in, len]);
            let w = random(&mut rng, &[c_out, c_in, k]);
            let b = random(&mut rng, &[c_out]);
            let lengths: Vec<usize> = (0..batch).map(|i| len - i * len / 4).collect();
            let mask = crate::vits::layers::sequence_mask(&lengths, len, &Device::Cpu).unwrap();
            let map = InputMap {
                scale: 1.0 / 3.0,
                leaky_slope: Some(0.1),
                mask: Some(&mask),
            };
            let l_out = len + 2 * padding - dilation * (k - 1);
            let residual = random(&mut rng, &[batch, c_out, l_out]);
            let sum = random(&mut rng, &[batch, c_out, l_out]);
            for res in [&[][..], &[&residual], &[&residual, &sum]] {
                let cache = PackedWeightCache::default();
                let got =
                    conv1d_fused(&x, &w, Some(&b), padding, dilation, &map, res, Some(&cache))
                        .unwrap();
                let again =
                    conv1d_fused(&x, &w, Some(&b), padding, dilation, &map, res, Some(&cache))
                        .unwrap();
                assert_eq!(relative_error(&again, &got), 0.0);
                let mut want =
                    candle_conv1d(&map.apply(&x).unwrap(), &w, Some(&b), padding, dilation, 1);
                for r in res {
                    want = (want + *r).unwrap();
                }
                let err = relative_error(&got, &want);
                assert!(err <= 1e-4, "fused conv relative error {err}");
            }
        }
        // Non-contiguous input takes the same path.
        let x = random(&mut rng, &[1, 40, 16]).transpose(1, 2).unwrap();
        let w = random(&mut rng, &[16, 16, 3]);
        let map = InputMap {
            scale: 1.0,
            leaky_slope: Some(0.01),
            mask: None,
        };
        let got = conv1d_fused(&x, &w, None, 1, 1, &map, &[], None).unwrap();
        let want = candle_conv1d(&map.apply(&x).unwrap(), &w, None, 1, 1, 1);
        assert!(relative_error(&got, &want) <= 1e-4);
    }

    #[test]
    fn conv_transpose1d_fused_matches_separate_ops() {
        let mut rng = StdRng::seed_from_u64(31);
        // Long inputs take the direct phases; the short ones are called on them directly too.
        let cases: &[TransposeCase] = &[
            (1, 16, 8, 1100, 8, 4, 2, true),
            (2, 8, 4, 1030, 16, 8, 4, true),
            (1, 16, 8, 30, 9, 2, 3, true),
            (1, 16, 8, 30, 3, 4, 0, false),
            (2, 16, 8, 1, 8, 4, 0, true),
            (1, 6, 5, 40, 4, 2, 5, true),
        ];
        for &(batch, c_in, c_out, len, k, stride, padding, with_bias) in cases {
            let x = random(&mut rng, &[batch, c_in, len]);
            let w = random(&mut rng, &[c_in, c_out, k]);
            let b = with_bias.then(|| random(&mut rng, &[c_out]));
            let lengths: Vec<usize> = (0..batch).map(|i| len - i * len / 3).collect();
            let mask = crate::vits::layers::sequence_mask(&lengths, len, &Device::Cpu).unwrap();
            let map = InputMap {
                scale: 0.5,
                leaky_slope: Some(0.1),
                mask: Some(&mask),
            };
            // candle's reference one item at a time: for a batch of one-column inputs its own
            // batched transposed convolution mixes items up.
            let mapped = map.apply(&x).unwrap();
            let items: Vec<Tensor> = (0..batch)
                .map(|i| {
                    let item = mapped.narrow(0, i, 1).unwrap();
                    candle_conv_transpose1d(&item, &w, b.as_ref(), stride, padding)
                })
                .collect();
            let want = Tensor::cat(&items, 0).unwrap();
            let got = conv_transpose1d_fused(&x, &w, b.as_ref(), stride, padding, &map).unwrap();
            let err = relative_error(&got, &want);
            assert!(
                err <= 1e-4,
                "{batch} {c_in} {c_out} {len} {k} {stride} {padding}: {err}"
            );
            let shape =
                ConvTranspose1dShape::for_fast_path(&x, &w, b.as_ref(), stride, padding).unwrap();
            let direct =
                cpu_f32::conv_transpose1d_direct(&x, &w, b.as_ref(), &shape, &map).unwrap();
            let err = relative_error(&direct, &want);
            assert!(
                err <= 1e-4,
                "direct {batch} {c_in} {c_out} {len} {k} {stride} {padding}: {err}"
            );
        }
    }

    #[test]
    fn other_dtypes_use_candle_and_bad_shapes_are_errors() {
        let mut rng = StdRng::seed_from_u64(23);
        let x = random(&mut rng, &[1, 8, 20]);
        let w = random(&mut rng, &[4, 8, 3]);
        let want = conv1d(&x, &w, None, 1, 1, 1).unwrap();
        let x64 = x.to_dtype(DType::F64).unwrap();
        let w64 = w.to_dtype(DType::F64).unwrap();
        let got = conv1d(&x64, &w64, None, 1, 1, 1).unwrap();
        assert_eq!(got.dtype(), DType::F64);
        let got = got.to_dtype(DType::F32).unwrap();
        assert!(relative_error(&got, &want) <= 1e-5);

        let wrong_channels = random(&mut rng, &[4, 5, 3]);
        assert!(conv1d(&x, &wrong_channels, None, 1, 1, 1).is_err());
        let wrong_transposed = random(&mut rng, &[5, 4, 3]);
        assert!(conv_transpose1d(&x, &wrong_transposed, None, 2, 0).is_err());
    }
}

/// Side-by-side timings of the direct kernel and the per-tap gemm path on the model's shapes,
/// in this thread's CPU time (less skewed by a busy machine than wall time); they back the
/// routing choices above. `cargo test --lib vits::conv::timing -- --ignored --nocapture`
#[cfg(test)]
mod timing {
    use super::*;

    fn thread_cpu_ms() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec through a valid pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
    }

    /// Best of five runs, in milliseconds.
    fn best(mut f: impl FnMut()) -> f64 {
        (0..5)
            .map(|_| {
                let start = thread_cpu_ms();
                f();
                thread_cpu_ms() - start
            })
            .fold(f64::MAX, f64::min)
    }

    #[test]
    #[ignore = "timing report, run by hand"]
    fn conv1d_direct_vs_per_tap_gemm() {
        let dev = Device::Cpu;
        // (c_in, c_out, length, kernel, dilation): decoder resblocks, flow, text encoder.
        for &(c_in, c_out, len, k, d) in &[
            (32usize, 32usize, 64256usize, 3usize, 1usize),
            (32, 32, 64256, 7, 12),
            (64, 64, 16064, 5, 6),
            (128, 128, 2008, 7, 12),
            (192, 384, 251, 5, 1),
            (192, 384, 251, 1, 1),
            (192, 256, 251, 7, 1),
            (192, 768, 103, 3, 1),
            (192, 192, 103, 1, 1),
        ] {
            let x = Tensor::randn(0f32, 1., (1, c_in, len), &dev).unwrap();
            let w = Tensor::randn(0f32, 1., (c_out, c_in, k), &dev).unwrap();
            let b = Tensor::randn(0f32, 1., c_out, &dev).unwrap();
            let p = d * (k - 1) / 2;
            let shape = Conv1dShape::for_fast_path(&x, &w, Some(&b), p, d, 1).unwrap();
            let gemm = best(|| {
                cpu_f32::conv1d(&x, &w, Some(&b), &shape).unwrap();
            });
            let direct = best(|| {
                cpu_f32::conv1d_direct(&x, &w, Some(&b), &shape, &InputMap::IDENTITY, &[], None)
                    .unwrap();
            });
            let gmac = (c_in * c_out * k * len) as f64 / 1e9;
            println!(
                "{c_in}→{c_out} k{k} d{d} × {len}: per-tap gemm {gemm:.2} ms ({:.1} GMAC/s), \
                 direct {direct:.2} ms ({:.1} GMAC/s)",
                gmac / gemm * 1e3,
                gmac / direct * 1e3
            );
        }
    }

    #[test]
    #[ignore = "timing report, run by hand"]
    fn conv_transpose1d_direct_vs_per_tap_gemm() {
        let dev = Device::Cpu;
        // (c_in, c_out, length, kernel, stride): the decoder's upsamplers.
        for &(c_in, c_out, len, k, stride) in &[
            (256usize, 128usize, 251usize, 16usize, 8usize),
            (128, 64, 2008, 16, 8),
            (64, 32, 16064, 8, 4),
        ] {
            let x = Tensor::randn(0f32, 1., (1, c_in, len), &dev).unwrap();
            let w = Tensor::randn(0f32, 1., (c_in, c_out, k), &dev).unwrap();
            let b = Tensor::randn(0f32, 1., c_out, &dev).unwrap();
            let p = (k - stride) / 2;
            let shape = ConvTranspose1dShape::for_fast_path(&x, &w, Some(&b), stride, p).unwrap();
            let gemm = best(|| {
                cpu_f32::conv_transpose1d(&x, &w, Some(&b), &shape).unwrap();
            });
            let direct = best(|| {
                cpu_f32::conv_transpose1d_direct(&x, &w, Some(&b), &shape, &InputMap::IDENTITY)
                    .unwrap();
            });
            println!(
                "transposed {c_in}→{c_out} k{k} s{stride} × {len}: per-tap gemm {gemm:.2} ms, \
                 direct {direct:.2} ms"
            );
        }
    }
}
