//! Vectorizable `tanh` and the WaveNet gate `tanh(a)·σ(b)` for CPU `f32` tensors.
//!
//! candle maps `tanh` and `exp` over a tensor one libm call per value (≈ 10 ns each); the flow's
//! gates and the decoder's output take about 0.8 million of them per second of audio, 4 % of a
//! forward pass. These versions compute `exp` from a range reduction and a short polynomial in
//! plain arithmetic that the compiler vectorizes (AVX2 + FMA when the CPU has them), with an
//! error below 2e-7 — far under the 1e-3 the model is held to against onnxruntime.
//! Hand-written rather than a crate: the few math crates with vector `exp` bring whole SIMD
//! abstraction layers for these twenty lines.

use super::rows::{AdainSnake, ChannelSnake, SampleMap};
use super::tensor::{is_cpu_f32, with_contiguous_f32};
use candle_core::{Device, Result, Tensor};

/// `e^x` for x in [−87, 88] (inputs are clamped there), relative error < 2e-7.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n · LN2_HI is exact for |n| < 2^9.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding 1.5 · 2^23 rounds to an integer in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO; // |r| ≤ ln 2 / 2
                                         // Taylor series of e^r to degree 6: truncation error ≤ (ln 2 / 2)^7 / 7! ≈ 1.2e-7.
    let p = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let n_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    p * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let e = exp(-2.0 * x.abs());
    ((1.0 - e) / (1.0 + e)).copysign(x)
}

#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

#[inline(always)]
fn gate_slices(out: &mut [f32], t: &[f32], s: &[f32]) {
    for ((o, &t), &s) in out.iter_mut().zip(t).zip(s) {
        *o = tanh_f32(t) * sigmoid(s);
    }
}

#[inline(always)]
fn tanh_slice(xs: &mut [f32]) {
    for x in xs {
        *x = tanh_f32(*x);
    }
}

/// Folds `row` with `f` over 16 independent lanes, so that the reduction vectorizes (a single
/// running float accumulator cannot be reordered).
#[inline(always)]
fn fold_lanes(row: &[f32], init: f32, f: impl Fn(f32, f32) -> f32 + Copy) -> f32 {
    const LANES: usize = 16;
    let mut acc = [init; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a = f(*a, x);
        }
    }
    let tail = chunks.remainder().iter().fold(init, |a, &x| f(a, x));
    acc.iter().fold(tail, |a, &x| f(a, x))
}

/// `Σ f(x)` over `row` in 16 independent lanes, so that it vectorizes (and each partial sum
/// stays short: f32 error ~1e-7 relative for a few thousand terms).
#[inline(always)]
fn sum_lanes(row: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0f32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += f(x);
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    acc.iter().sum::<f32>() + tail
}

/// `row ← softmax(row)`, the maximum subtracted first.
#[inline(always)]
fn softmax_slice(row: &mut [f32]) {
    let max = fold_lanes(row, f32::NEG_INFINITY, |a, x| if x > a { x } else { a });
    for x in row.iter_mut() {
        *x = exp(*x - max);
    }
    let scale = 1.0 / fold_lanes(row, 0.0, |a, x| a + x);
    for x in row {
        *x *= scale;
    }
}

/// `erf(x)`, absolute error < 2e-7 (Abramowitz and Stegun 7.1.26, with this module's `exp`).
#[inline(always)]
fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_8,
        -1.453_152,
        1.061_405_4,
    ];
    let z = x.abs();
    let t = 1.0 / (1.0 + P * z);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    (1.0 - poly * exp(-z * z)).copysign(x)
}

/// GELU in its exact form, `x·Φ(x) = x·(1 + erf(x/√2))/2`.
#[inline(always)]
fn gelu_slice(xs: &mut [f32]) {
    for x in xs {
        *x *= 0.5 * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// GELU in its tanh form (HF's `gelu_new`, onnxruntime's `FastGelu`),
/// `x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2`.
#[inline(always)]
fn gelu_tanh_slice(xs: &mut [f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    for x in xs {
        let inner = SQRT_2_OVER_PI * (*x + 0.044_715 * *x * *x * *x);
        *x *= 0.5 * (1.0 + tanh_f32(inner));
    }
}

/// `sin(x)` in plain f32 arithmetic the compiler vectorizes (the library's is a call per
/// value): x = kπ + r with |r| ≤ π/2 (π in four parts whose products with k are exact for
/// |x| < 5e4), then an odd degree-9 polynomial in r and the sign of (−1)^k. Within 1.2e-7
/// of `f32::sin` on [−100, 100] (see the test), past any Snake input seen; onnxruntime's
/// Sin is an approximation of its own too.
#[inline(always)]
fn sin(x: f32) -> f32 {
    const INV_PI: f32 = std::f32::consts::FRAC_1_PI;
    const PI_A: f32 = 3.140_625;
    const PI_B: f32 = 0.000_967_025_76;
    const PI_C: f32 = 6.277_114e-7;
    const PI_D: f32 = 1.215_420_1e-10;
    // 1.5 · 2^23: adding it rounds to an integer in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let shifted = x * INV_PI + ROUND;
    let k = shifted - ROUND;
    let r = x - k * PI_A - k * PI_B - k * PI_C - k * PI_D;
    let r2 = r * r;
    let p = 2.608_316e-6_f32;
    let p = p * r2 - 1.981_069e-4;
    let p = p * r2 + 8.333_079e-3;
    let p = p * r2 - 0.166_666_6;
    let s = r + r * r2 * p;
    // k's parity is the lowest mantissa bit of `shifted`: flip the sign bit for odd k.
    f32::from_bits(s.to_bits() ^ (shifted.to_bits() << 31))
}

/// `out = x / √(mean(x²) + eps) · weight`, candle's `rms_norm` of one row.
#[inline(always)]
fn rms_norm_slice(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let m = (sum_lanes(x, |v| v * v) / x.len() as f32 + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v / m * w;
    }
}

/// One head's row RMS-normed with `weight`, then rotated by its position's angles: the
/// halves (x₁, x₂) become (x₁ cos − x₂ sin, x₂ cos + x₁ sin).
#[inline(always)]
fn norm_rotate_slice(row: &mut [f32], weight: &[f32], eps: f32, cos: &[f32], sin: &[f32]) {
    let m = (sum_lanes(row, |v| v * v) / row.len() as f32 + eps).sqrt();
    for (v, w) in row.iter_mut().zip(weight) {
        *v = *v / m * w;
    }
    let (x1, x2) = row.split_at_mut(cos.len());
    for ((a, b), (&c, &s)) in x1.iter_mut().zip(x2.iter_mut()).zip(cos.iter().zip(sin)) {
        let (p, q) = (*a, *b);
        *a = p * c - q * s;
        *b = q * c + p * s;
    }
}

/// `out[j] = silu(gate[j]) · up[j]` for `gate_up` = gate then up, each `out.len()` long.
#[inline(always)]
fn swiglu_slice(gate_up: &[f32], out: &mut [f32]) {
    let (gate, up) = gate_up.split_at(out.len());
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + exp(-g)) * u;
    }
}

/// Snake, `x + sin²(αx)/α'` (α' = α + 1e-9, `inv_alpha` = 1/α'), on one channel's row.
/// [`sin`] reduces its argument exactly only below [`SIN_EXACT_BELOW`]; a row that reaches
/// past it (a model's activations running away, as seeded random weights can make them)
/// takes the library's `sin` instead.
#[inline(always)]
fn snake_slice(row: &mut [f32], alpha: f32, inv_alpha: f32) {
    let peak = fold_lanes(row, 0.0, |a, x| a.max(x.abs()));
    // Written so that a NaN peak takes the library's path too.
    if (alpha.abs() * peak).partial_cmp(&SIN_EXACT_BELOW) != Some(std::cmp::Ordering::Less) {
        for v in row {
            let s = (alpha * *v).sin();
            *v += inv_alpha * (s * s);
        }
        return;
    }
    for v in row {
        let s = sin(alpha * *v);
        *v += inv_alpha * (s * s);
    }
}

/// Where [`sin`]'s range reduction stops being exact.
const SIN_EXACT_BELOW: f32 = 5e4;

/// The instance norm's statistics of one channel's row: `[mean, 1/√(var + eps)]` (biased
/// variance).
#[inline(always)]
fn instance_stats_slice(row: &[f32], eps: f32, stats: &mut [f32; 2]) {
    let n = row.len() as f32;
    let mean = sum_lanes(row, |v| v) / n;
    let var = sum_lanes(row, |v| (v - mean) * (v - mean)) / n;
    *stats = [mean, 1.0 / (var + eps).sqrt()];
}

#[inline(always)]
fn channel_snake(v: f32, c: ChannelSnake) -> f32 {
    let ChannelSnake {
        mean,
        inv_std,
        params,
    } = c;
    // Centred first: folding μ into the shift would cancel digits when |μ| ≫ σ.
    let y = params.affine.scale * ((v - mean) * inv_std) + params.affine.shift;
    let s = sin(params.alpha * y);
    y + params.inv_alpha * (s * s)
}

#[inline(always)]
fn channel_snake_slice(row: &mut [f32], c: ChannelSnake) {
    for v in row.iter_mut() {
        *v = channel_snake(*v, c);
    }
}

#[inline(always)]
fn channel_snake_copy_slice(dst: &mut [f32], src: &[f32], c: ChannelSnake) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = channel_snake(v, c);
    }
}

/// Whether the elementwise functions take their AVX2 + FMA copies (under the instruction-set
/// cap, [`super::isa`]).
fn has_avx2() -> bool {
    super::isa::avx2_fma()
}

/// Whether they take their AVX-512 copies (the same arithmetic in vectors twice as wide).
fn has_avx512() -> bool {
    super::isa::avx512f() && has_avx2()
}

/// The widest vectors the elementwise functions use.
pub(super) fn level() -> super::isa::Level {
    if has_avx512() {
        super::isa::Level::Avx512
    } else if has_avx2() {
        super::isa::Level::Avx2
    } else {
        super::isa::Level::Portable
    }
}

/// `$vis fn $name(args)`: the plain-arithmetic `$body` compiled once more with AVX-512 and
/// once with AVX2 + FMA enabled, which is what vectorizes it, and the widest copy the CPU
/// runs taken. Every copy computes the same values: the arithmetic is the same operations in
/// the same order (no fused multiply-adds are formed), and the reductions fold a fixed number
/// of lanes whatever the vector width.
macro_rules! widest_vectors {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) => $body:ident) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                fn wide512($($arg: $ty),*) {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn wide($($arg: $ty),*) {
                    $body($($arg),*)
                }
                if has_avx512() {
                    // SAFETY: the CPU has AVX-512F, AVX2 and FMA.
                    return unsafe { wide512($($arg),*) };
                }
                if has_avx2() {
                    // SAFETY: the CPU has AVX2 and FMA.
                    return unsafe { wide($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}

widest_vectors! {
    /// [`gate_slices`] with the widest vectors this CPU has.
    fn gate(out: &mut [f32], t: &[f32], s: &[f32]) => gate_slices
}
widest_vectors! {
    /// [`tanh_slice`] with the widest vectors this CPU has.
    fn tanh_in_place(xs: &mut [f32]) => tanh_slice
}
widest_vectors! {
    /// [`softmax_slice`] with the widest vectors this CPU has.
    pub(super) fn softmax_in_place(row: &mut [f32]) => softmax_slice
}
widest_vectors! {
    /// [`gelu_slice`] with the widest vectors this CPU has.
    pub(super) fn gelu_in_place(xs: &mut [f32]) => gelu_slice
}

widest_vectors! {
    /// [`gelu_tanh_slice`] with the widest vectors this CPU has.
    fn gelu_tanh_in_place(xs: &mut [f32]) => gelu_tanh_slice
}

widest_vectors! {
    /// [`instance_stats_slice`] with the widest vectors this CPU has.
    fn instance_stats_row(row: &[f32], eps: f32, stats: &mut [f32; 2]) => instance_stats_slice
}

widest_vectors! {
    /// Kokoro's `Snake(AdaIN(x))` on one channel `row` of a signal, in place, its statistics
    /// taken ([`channel_snakes`]): the instance norm, the style's affine map, then
    /// `y + sin²(α·y)/α` (`inv_alpha` = 1/α, as the graph stores it).
    pub(super) fn channel_snake_row(row: &mut [f32], c: ChannelSnake) => channel_snake_slice
}

widest_vectors! {
    /// [`channel_snake_row`] from `src` into `dst` (of one length).
    pub(super) fn channel_snake_into(dst: &mut [f32], src: &[f32], c: ChannelSnake) => channel_snake_copy_slice
}

/// `dst = map(src)` for channel `ci`'s samples from input column `t0`, the map's channel
/// `Snake(AdaIN(·))` included: what a kernel that applies it as it reads its input calls.
pub(super) fn apply_sample_map(
    map: &SampleMap<'_>,
    dst: &mut [f32],
    src: &[f32],
    t0: usize,
    ci: usize,
) {
    match map.channels {
        Some(channels) if map.is_identity_before_channels() => {
            channel_snake_into(dst, src, channels[ci]);
        }
        Some(channels) => {
            map.apply_slice(dst, src, t0);
            channel_snake_row(dst, channels[ci]);
        }
        None => map.apply_slice(dst, src, t0),
    }
}

/// The statistics of Kokoro's `Snake(AdaIN(x))` for each channel of a CPU `f32` signal `x`
/// [1, C, T], with channel `c`'s parameters `channels[c]`. The channels are shared with a
/// spare core.
pub(crate) fn channel_snakes(
    x: &Tensor,
    channels: &[AdainSnake],
    eps: f32,
) -> Result<Vec<ChannelSnake>> {
    let (batch, c, len) = x.dims3()?;
    if batch != 1 || c != channels.len() || !is_cpu_f32(x) {
        candle_core::bail!(
            "channel_snakes: x {:?} ({:?}) for {} channels",
            x.dims(),
            x.dtype(),
            channels.len()
        );
    }
    let mut out: Vec<ChannelSnake> = channels
        .iter()
        .map(|&params| ChannelSnake {
            mean: 0.0,
            inv_std: 1.0,
            params,
        })
        .collect();
    if len > 0 {
        with_contiguous_f32(x, |x| {
            // Two sums per value, counted as multiply-adds.
            crate::spare::rows_in_parts(&mut out, 1, 1, 2 * c * len, |rows, part| {
                for (ch, snake) in rows.zip(part) {
                    let mut stats = [0f32; 2];
                    instance_stats_row(&x[ch * len..][..len], eps, &mut stats);
                    [snake.mean, snake.inv_std] = stats;
                }
            })
        })?;
    }
    Ok(out)
}

/// `x` [1, C, T] with each channel's `Snake(AdaIN(·))` applied, into a new tensor: for the
/// convolutions that do not apply it as they read. The channels are shared with a spare
/// core, each part reading its own rows of `x`.
pub(crate) fn apply_channel_snakes(x: &Tensor, channels: &[ChannelSnake]) -> Result<Tensor> {
    let (batch, c, len) = x.dims3()?;
    if batch != 1 || c != channels.len() || !is_cpu_f32(x) {
        candle_core::bail!(
            "apply_channel_snakes: x {:?} ({:?}) for {} channels",
            x.dims(),
            x.dtype(),
            channels.len()
        );
    }
    let mut out = vec![0f32; c * len];
    if len > 0 {
        with_contiguous_f32(x, |x| {
            // About 30 operations per value (the norm, sin), counted as multiply-adds.
            crate::spare::rows_in_parts(&mut out, len, 1, 30 * c * len, |rows, part| {
                for (ch, row) in rows.zip(part.chunks_exact_mut(len)) {
                    channel_snake_into(row, &x[ch * len..(ch + 1) * len], channels[ch]);
                }
            })
        })?;
    }
    Tensor::from_vec(out, (1, c, len), &Device::Cpu)
}

widest_vectors! {
    /// [`rms_norm_slice`] with the widest vectors this CPU has.
    pub(super) fn rms_norm_row(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) => rms_norm_slice
}
widest_vectors! {
    /// [`norm_rotate_slice`] with the widest vectors this CPU has.
    pub(super) fn norm_rotate_row(
        row: &mut [f32],
        weight: &[f32],
        eps: f32,
        cos: &[f32],
        sin: &[f32]
    ) => norm_rotate_slice
}
widest_vectors! {
    /// [`swiglu_slice`] with the widest vectors this CPU has.
    pub(super) fn swiglu(gate_up: &[f32], out: &mut [f32]) => swiglu_slice
}

widest_vectors! {
    /// [`snake_slice`] with the widest vectors this CPU has.
    fn snake_row(row: &mut [f32], alpha: f32, inv_alpha: f32) => snake_slice
}

/// DAC's Snake, `x + sin²(αx) / (α + 1e-9)`, for `x` [B, C, T] and `alpha` [1, C, 1], as the
/// official code computes it; `None` unless both are CPU `f32` (the caller then runs the
/// tensor ops). Channels are shared with a spare core.
pub(crate) fn snake(x: &Tensor, alpha: &Tensor) -> Result<Option<Tensor>> {
    if !is_cpu_f32(x) || !is_cpu_f32(alpha) {
        return Ok(None);
    }
    let (b, c, t) = x.dims3()?;
    if alpha.dims() != [1, c, 1] {
        candle_core::bail!("snake: alpha {:?} for {c} channels", alpha.shape());
    }
    let alpha = alpha.flatten_all()?.to_vec1::<f32>()?;
    let mut data = x.flatten_all()?.to_vec1::<f32>()?;
    if t > 0 {
        crate::spare::rows_in_parts(&mut data, t, 1, 16 * b * c * t, |rows, part| {
            for (row, data) in rows.zip(part.chunks_exact_mut(t)) {
                let a = alpha[row % c];
                snake_row(data, a, 1.0 / (a + 1e-9));
            }
        });
    }
    Ok(Some(Tensor::from_vec(data, (b, c, t), &Device::Cpu)?))
}

/// `tanh(a[:, :n]) · sigmoid(a[:, n:])` for `a` [B, 2n, T], the WaveNet gate.
pub(crate) fn gated_tanh(a: &Tensor, n: usize) -> Result<Tensor> {
    let (b, c, t) = a.dims3()?;
    if !is_cpu_f32(a) || c != 2 * n {
        let (t, s) = (a.narrow(1, 0, n)?, a.narrow(1, n, c - n)?);
        return t.tanh()?.mul(&candle_nn::ops::sigmoid(&s)?);
    }
    let a = a.flatten_all()?.to_vec1::<f32>()?;
    let mut out = vec![0f32; b * n * t];
    for (out, a) in out.chunks_exact_mut(n * t).zip(a.chunks_exact(2 * n * t)) {
        let (t_half, s_half) = a.split_at(n * t);
        gate(out, t_half, s_half);
    }
    Tensor::from_vec(out, (b, n, t), &Device::Cpu)
}

/// `f` applied in place to a copy of `x`'s values, for a CPU `f32` tensor; `None` for others
/// (the caller then runs candle's own op).
fn on_host_copy(x: &Tensor, f: fn(&mut [f32])) -> Result<Option<Tensor>> {
    if !is_cpu_f32(x) {
        return Ok(None);
    }
    let mut data = x.flatten_all()?.to_vec1::<f32>()?;
    f(&mut data);
    Ok(Some(Tensor::from_vec(data, x.shape(), &Device::Cpu)?))
}

/// Elementwise `tanh`.
pub(crate) fn tanh(x: &Tensor) -> Result<Tensor> {
    match on_host_copy(x, tanh_in_place)? {
        Some(y) => Ok(y),
        None => x.tanh(),
    }
}

/// GELU in its tanh form for a CPU `f32` tensor (candle's own `gelu` for others): candle
/// maps it one libm `tanh` per value, 16 % of ALBERT's time in Kokoro.
pub(crate) fn gelu_tanh(x: &Tensor) -> Result<Tensor> {
    match on_host_copy(x, gelu_tanh_in_place)? {
        Some(y) => Ok(y),
        None => x.gelu(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::rows::Affine;

    #[test]
    fn scalar_functions_match_libm() {
        let mut worst = (0f32, 0f32, 0f32);
        for i in -200_000..=200_000 {
            let x = i as f32 * 1e-4; // −20 … 20
            worst.0 = worst
                .0
                .max(((exp(x.min(10.0)) / x.min(10.0).exp()) - 1.0).abs());
            worst.1 = worst.1.max((tanh_f32(x) - x.tanh()).abs());
            worst.2 = worst.2.max((sigmoid(x) - 1.0 / (1.0 + (-x).exp())).abs());
        }
        assert!(worst.0 < 3e-7, "exp relative error {}", worst.0);
        assert!(worst.1 < 3e-7, "tanh error {}", worst.1);
        assert!(worst.2 < 3e-7, "sigmoid error {}", worst.2);
        assert_eq!(tanh_f32(0.0), 0.0);
        assert_eq!(tanh_f32(100.0), 1.0);
        assert_eq!(tanh_f32(-100.0), -1.0);
        assert!(sigmoid(-100.0) >= 0.0 && sigmoid(100.0) == 1.0);
    }

    /// The tanh-form GELU against candle's, which computes the same formula with libm's tanh.
    #[test]
    fn gelu_tanh_matches_candle() {
        let x: Vec<f32> = (-4000..=4000).map(|i| i as f32 * 2.5e-3).collect();
        let t = Tensor::from_vec(x, 8001, &Device::Cpu).unwrap();
        let ours = gelu_tanh(&t).unwrap().to_vec1::<f32>().unwrap();
        let theirs = t.gelu().unwrap().to_vec1::<f32>().unwrap();
        let worst = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-6, "max |Δ| {worst:.2e} on [−10, 10]");
    }

    /// The vectorizable sine against the library's, over the range Snake sees and beyond.
    #[test]
    fn fast_sine_matches_the_library() {
        let mut worst = 0f32;
        for i in -2_000_000..=2_000_000 {
            let x = i as f32 * 5e-5; // −100 … 100
            worst = worst.max((sin(x) - x.sin()).abs());
        }
        assert!(worst <= 4e-7, "sin: max |Δ| {worst:.2e} on [−100, 100]");
    }

    /// `Snake(AdaIN(x))` of one row, from its statistics and the channel map.
    fn adain_snake_row(row: &mut [f32], params: AdainSnake, eps: f32) {
        let x = Tensor::from_slice(row, (1, 1, row.len()), &Device::Cpu).unwrap();
        let snakes = channel_snakes(&x, &[params], eps).unwrap();
        channel_snake_row(row, snakes[0]);
    }

    /// The statistics and the channel map against the formula in f64, on rows that are not
    /// a multiple of the lanes.
    #[test]
    fn adain_snake_matches_its_definition() {
        for len in [1, 17, 1000] {
            let x: Vec<f32> = (0..len)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let (affine, alpha, eps) = (
                Affine {
                    scale: 1.3,
                    shift: -0.4,
                },
                0.7f32,
                1e-5f32,
            );
            let mut got = x.clone();
            let params = AdainSnake {
                affine,
                alpha,
                inv_alpha: 1.0 / alpha,
            };
            adain_snake_row(&mut got, params, eps);
            let n = len as f64;
            let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            let var = x
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / n;
            for (&v, &g) in x.iter().zip(&got) {
                let y = f64::from(affine.scale) * (f64::from(v) - mean)
                    / (var + f64::from(eps)).sqrt()
                    + f64::from(affine.shift);
                let want = y + (f64::from(alpha) * y).sin().powi(2) / f64::from(alpha);
                assert!(
                    (f64::from(g) - want).abs() < 2e-5 * want.abs().max(1.0),
                    "{g} vs {want}"
                );
            }
        }
    }

    /// The channels shared with a spare core give each channel exactly what one row alone
    /// gives it, with that channel's parameters and statistics (not a neighbour's), and leave
    /// the input as it was.
    #[test]
    fn channel_snakes_match_one_row_at_a_time_with_a_spare_core() {
        let (channels, len) = (37, 3001);
        let x: Vec<f32> = (0..channels * len)
            .map(|i| ((i * 7919 % 2003) as f32 - 1000.0) / 250.0 + (i / len) as f32)
            .collect();
        let parameters: Vec<AdainSnake> = (0..channels)
            .map(|c| AdainSnake {
                affine: Affine {
                    scale: 0.5 + c as f32 / 20.0,
                    shift: c as f32 / 10.0 - 1.0,
                },
                alpha: 0.3 + c as f32 / 13.0,
                inv_alpha: 1.0 / (0.3 + c as f32 / 13.0),
            })
            .collect();
        let mut want = x.clone();
        for (row, &p) in want.chunks_exact_mut(len).zip(&parameters) {
            adain_snake_row(row, p, 1e-5);
        }
        let input = Tensor::from_vec(x.clone(), (1, channels, len), &Device::Cpu).unwrap();
        let _lending = crate::spare::lending_always();
        let snakes = channel_snakes(&input, &parameters, 1e-5).unwrap();
        let got = apply_channel_snakes(&input, &snakes).unwrap();
        assert_eq!(got.dims(), [1, channels, len]);
        assert_eq!(got.flatten_all().unwrap().to_vec1::<f32>().unwrap(), want);
        assert_eq!(input.flatten_all().unwrap().to_vec1::<f32>().unwrap(), x);
        assert!(channel_snakes(&input, &parameters[1..], 1e-5).is_err());
        assert!(apply_channel_snakes(&input, &snakes[1..]).is_err());
    }

    #[test]
    fn tensor_versions_match_candle() -> Result<()> {
        let a = (Tensor::randn(0f32, 3.0, (2, 8, 37), &Device::Cpu)?).contiguous()?;
        let (t, s) = (a.narrow(1, 0, 4)?, a.narrow(1, 4, 4)?);
        let want = t.tanh()?.mul(&candle_nn::ops::sigmoid(&s)?)?;
        let got = gated_tanh(&a, 4)?;
        let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-6, "gate differs by {diff}");
        let diff = (tanh(&a)? - a.tanh()?)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-6, "tanh differs by {diff}");
        Ok(())
    }

    #[test]
    fn gelu_and_softmax_match_candle() -> Result<()> {
        let x: Vec<f32> = (-60_000..=60_000).map(|i| i as f32 * 1e-4).collect(); // −6 … 6
        let want = Tensor::new(x.as_slice(), &Device::Cpu)?
            .gelu_erf()?
            .to_vec1::<f32>()?;
        let mut got = x.clone();
        gelu_in_place(&mut got);
        for ((&x, &g), &w) in x.iter().zip(&got).zip(&want) {
            assert!(
                (g - w).abs() <= 3e-7 * x.abs().max(1.0),
                "gelu({x}) = {g}, want {w}"
            );
        }
        for len in [1, 15, 16, 17, 100] {
            let row = Tensor::randn(0f32, 4.0, (1, len), &Device::Cpu)?;
            let want = candle_nn::ops::softmax_last_dim(&row)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            let mut got = row.flatten_all()?.to_vec1::<f32>()?;
            softmax_in_place(&mut got);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-6, "softmax of {len} differs by {worst}");
        }
        Ok(())
    }
}
