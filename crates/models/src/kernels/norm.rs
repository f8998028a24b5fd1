//! LayerNorm over the channel axis of `[B, C, T]` for CPU `f32`, with what surrounds it fused.
//!
//! The text encoder and the duration predictor normalize over channels 36 times per
//! utterance, always right after a residual add or right before a GELU. Written with tensor
//! ops, each norm transposes to `[B, T, C]` and back and each add and GELU is another pass
//! (the GELU one libm `erf` call per value); for a long sentence that took a fifth of the
//! time before the first audio. Here the statistics are summed over channels for a strip of
//! positions at a time, in the `[B, C, T]` layout as it is, and the add and the GELU happen in
//! the same passes.

use super::fast_math::gelu_in_place;
use super::tensor::{is_cpu_f32, with_contiguous_f32};
use candle_core::{Device, Result, Tensor};

/// Positions normalized together: their running sums stay in registers while every channel
/// passes.
const STRIP: usize = 64;

/// `LN_C(x + residual)·gamma + beta`, then GELU when `gelu`, for `x` [B, C, T]. `None` when
/// the tensors are not CPU `f32` (the caller then runs the tensor ops).
pub(crate) fn channel_norm(
    x: &Tensor,
    residual: Option<&Tensor>,
    gamma: &Tensor,
    beta: &Tensor,
    eps: f32,
    gelu: bool,
) -> Result<Option<Tensor>> {
    if ![Some(x), residual, Some(gamma), Some(beta)]
        .into_iter()
        .flatten()
        .all(is_cpu_f32)
    {
        return Ok(None);
    }
    let (b, c, t) = x.dims3()?;
    if residual.is_some_and(|r| r.dims() != x.dims()) || gamma.dims1()? != c || beta.dims1()? != c {
        candle_core::bail!("channel norm: mismatched shapes");
    }
    let mut data = x.flatten_all()?.to_vec1::<f32>()?;
    if let Some(residual) = residual {
        with_contiguous_f32(residual, |residual| {
            for (d, r) in data.iter_mut().zip(residual) {
                *d += r;
            }
        })?;
    }
    let gamma = gamma.to_vec1::<f32>()?;
    let beta = beta.to_vec1::<f32>()?;
    for item in data.chunks_exact_mut(c * t) {
        for start in (0..t).step_by(STRIP) {
            normalize_strip(item, t, start..(start + STRIP).min(t), &gamma, &beta, eps);
        }
        if gelu {
            gelu_in_place(item);
        }
    }
    Ok(Some(Tensor::from_vec(data, (b, c, t), &Device::Cpu)?))
}

/// Normalizes positions `strip` of one item `x` ([C, T] row-major) over its C channels.
fn normalize_strip(
    x: &mut [f32],
    t: usize,
    strip: std::ops::Range<usize>,
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    let width = strip.len();
    let channels = gamma.len() as f32;
    let rows = || x.chunks_exact(t).map(|row| &row[strip.clone()]);
    let mut mean = [0f32; STRIP];
    for row in rows() {
        for (m, &v) in mean.iter_mut().zip(row) {
            *m += v;
        }
    }
    mean.iter_mut().for_each(|m| *m /= channels);
    let mut var = [0f32; STRIP];
    for row in rows() {
        for ((s, &v), &m) in var.iter_mut().zip(row).zip(&mean) {
            *s += (v - m) * (v - m);
        }
    }
    let mut inv_std = [0f32; STRIP];
    for (i, &s) in inv_std.iter_mut().zip(&var) {
        *i = 1.0 / (s / channels + eps).sqrt();
    }
    for ((row, &g), &b) in x.chunks_exact_mut(t).zip(gamma).zip(beta) {
        let row = &mut row[strip.clone()];
        for ((v, &m), &i) in row.iter_mut().zip(&mean[..width]).zip(&inv_std[..width]) {
            *v = (*v - m) * i * g + b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against candle's LayerNorm over the transposed tensor, the add and GELU as tensor ops;
    /// 70 positions cross a strip boundary.
    #[test]
    fn matches_layer_norm_with_the_add_and_gelu() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::randn(0.5f32, 2.0, (2, 5, 70), &dev)?;
        let residual = Tensor::randn(0f32, 1.0, (2, 5, 70), &dev)?;
        let gamma = Tensor::randn(1f32, 0.3, 5, &dev)?;
        let beta = Tensor::randn(0f32, 0.3, 5, &dev)?;
        for (with_residual, gelu) in [(false, false), (true, false), (false, true)] {
            let input = if with_residual {
                (&x + &residual)?
            } else {
                x.clone()
            };
            let want = candle_nn::ops::layer_norm(
                &input.transpose(1, 2)?.contiguous()?,
                &gamma,
                &beta,
                1e-5,
            )?
            .transpose(1, 2)?;
            let want = if gelu { want.gelu_erf()? } else { want };
            let got = channel_norm(
                &x,
                with_residual.then_some(&residual),
                &gamma,
                &beta,
                1e-5,
                gelu,
            )?
            .expect("a CPU f32 kernel");
            let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
            // The inputs are random on every run and the sums run in another order than
            // candle's: outputs of up to about 4 differ by a few f32 ulps (1.05e-5 seen once),
            // while a wrong kernel is off by whole tenths.
            assert!(
                diff < 4e-5,
                "residual {with_residual} gelu {gelu}: differs by {diff}"
            );
        }
        Ok(())
    }
}
