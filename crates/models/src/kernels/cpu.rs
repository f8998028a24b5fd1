//! The direct kernel and the strip-wise stages behind tensor arguments.
//!
//! Unpacks CPU `f32` tensors into the slices the direct kernels ([`super::precision`] routes
//! them) and [`super::strips`] work on,
//! one batch item at a time, keeps each layer's packed weights in its
//! [`PackedWeightCache`], and runs a transposed convolution as `stride` direct phases.

use super::layer::{InputMap, PackedPhaseCache, PackedWeightCache, StackConv};
use super::precision::{self, PackedConv, Precision};
use super::rows::SampleMap;
use super::shape::{Conv1dShape, ConvTranspose1dShape};
use super::strips;
use super::tensor::{bias_or_zero, has_values, with_contiguous_f32};
use candle_core::{Result, Storage, Tensor};
use std::mem::MaybeUninit;

/// A vector of `n` values, all written by `write`, without zeroing them first: the decoder's
/// outputs are megabytes each, and clearing them cost a few percent of a forward pass. Debug
/// builds (tests) fill them with NaN first, so a kernel path that misses a value fails the
/// tests that read it instead of passing on whatever the allocator left there.
///
/// # Safety
/// `write` must initialize every element of the slice it gets.
unsafe fn written_by(
    n: usize,
    write: impl FnOnce(&mut [MaybeUninit<f32>]) -> Result<()>,
) -> Result<Vec<f32>> {
    let mut v = Vec::with_capacity(n);
    let out = &mut v.spare_capacity_mut()[..n];
    #[cfg(debug_assertions)]
    out.fill(MaybeUninit::new(f32::NAN));
    write(out)?;
    // SAFETY: `write` initialized the first n elements (the caller's promise).
    unsafe { v.set_len(n) };
    Ok(v)
}

/// [`super::dispatch::conv1d_fused`] through the direct kernel (groups 1).
pub(super) fn conv1d_direct(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    s: &Conv1dShape,
    map: &InputMap<'_>,
    residuals: &[&Tensor],
    cache: Option<&PackedWeightCache>,
) -> Result<Tensor> {
    let bias = bias_or_zero(bias, s.c_out)?;
    let fresh;
    let packed = match cache {
        Some(cache) => cached_pack(weight, cache, s.c_out, s.c_in, s.taps)?,
        None => {
            fresh = with_contiguous_f32(weight, |w| {
                PackedConv::new(w, s.c_out, s.c_in, s.taps, Precision::F32)
            })?;
            &fresh
        }
    };
    // The int8 and bf16 kernels apply the channels' `Snake(AdaIN(·))` as they read their
    // input; for the `f32` ones the whole map is applied to the tensor first.
    let applied;
    let (x, map) = match map.channels {
        Some(_) if matches!(packed, PackedConv::F32(_) | PackedConv::Spectral(_)) => {
            applied = map.apply(x)?;
            (&applied, &InputMap::IDENTITY)
        }
        _ => (x, map),
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
    let (in_len, out_len) = (s.c_in * s.l_in, s.c_out * s.l_out);
    // SAFETY: a convolution that does not accumulate writes every output value.
    let out = unsafe {
        written_by(s.batch * out_len, |out| {
            with_contiguous_f32(x, |x| {
                for (b, out_b) in out.chunks_exact_mut(out_len).enumerate() {
                    let item_map = SampleMap {
                        scale: map.scale as f32,
                        leaky_slope: map.leaky_slope.map(|v| v as f32),
                        mask: mask.as_ref().map(|m| &m[b * s.l_in..(b + 1) * s.l_in]),
                        channels: map.channels,
                    };
                    let item_residuals: Vec<&[f32]> = residuals
                        .iter()
                        .map(|r| &r[b * out_len..(b + 1) * out_len])
                        .collect();
                    precision::conv1d(
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
            })
        })?
    };
    Tensor::from_vec(out, (s.batch, s.c_out, s.l_out), x.device())
}

/// The layer's packed weights, packed on first use in the cache's precision.
pub(super) fn cached_pack<'c>(
    weight: &Tensor,
    cache: &'c PackedWeightCache,
    c_out: usize,
    c_in: usize,
    taps: usize,
) -> Result<&'c PackedConv> {
    let cell = &cache.packed;
    if cell.get().is_none() {
        // A released layer's cache in another precision has nothing to pack from.
        has_values(weight)?;
        let packed = with_contiguous_f32(weight, |w| {
            if cache.spectral {
                PackedConv::allowing_spectra(w, c_out, c_in, taps, cache.precision)
            } else {
                PackedConv::new(w, c_out, c_in, taps, cache.precision)
            }
        })?;
        let _ = cell.set(packed);
    }
    let packed = cell.get().expect("just set");
    if !packed.has_shape(c_out, c_in, taps) {
        candle_core::bail!("packed weight cache used with a differently shaped weight");
    }
    Ok(packed)
}

/// [`super::dispatch::residual_stack_sum`] through [`strips::stage_sum`], one batch item at a
/// time; every convolution applies LeakyReLU(`slope`) and `mask` to its input.
pub(super) fn residual_stack_sum(
    y: &Tensor,
    blocks: &[Vec<Vec<StackConv<'_>>>],
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
                unit_layers.push(strips::UnitConv {
                    conv: precision::Conv {
                        weights: cached_pack(c.weight, c.cache, channels, channels, taps)?,
                        bias,
                        dilation: c.dilation,
                        map: SampleMap {
                            scale: 1.0,
                            leaky_slope: Some(slope),
                            mask: None,
                            channels: None,
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
    // SAFETY: the stage's first block writes every value (later ones add to it).
    let out = unsafe {
        written_by(batch * item, |out| {
            with_contiguous_f32(y, |y| {
                for (b, out_b) in out.chunks_exact_mut(item).enumerate() {
                    strips::stage_sum(
                        out_b,
                        &y[b * item..(b + 1) * item],
                        channels,
                        len,
                        &layers,
                        mask.as_ref().map(|m| &m[b * len..(b + 1) * len]),
                    );
                }
            })
        })?
    };
    Tensor::from_vec(out, (batch, channels, len), y.device())
}

/// [`super::dispatch::conv_transpose1d_fused`]: each phase (see
/// [`super::gemm::conv_transpose1d`]) as a direct convolution with the phase's taps reversed,
/// so the input map is fused into its packing. The phases' weights come from `cache` (packed
/// on first use in its precision) or are packed in `f32` for this call.
pub(super) fn conv_transpose1d_direct(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    s: &ConvTranspose1dShape,
    map: &InputMap<'_>,
    cache: Option<&PackedPhaseCache>,
) -> Result<Tensor> {
    let bias = bias_or_zero(bias, s.c_out)?;
    let mask = map
        .mask
        .map(|m| m.flatten_all()?.to_vec1::<f32>())
        .transpose()?;
    let fresh;
    let phases = match cache {
        Some(cache) => {
            if cache.phases.get().is_none() {
                let _ = cache.phases.set(pack_phases(weight, s, cache.precision)?);
            }
            cache.phases.get().expect("just set")
        }
        None => {
            fresh = pack_phases(weight, s, Precision::F32)?;
            &fresh
        }
    };
    if phases.len() != s.stride
        || phases.iter().enumerate().any(|(r, p)| {
            p.as_ref()
                .is_some_and(|p| !p.has_shape(s.c_out, s.c_in, phase_taps(s, r)))
        })
    {
        candle_core::bail!("packed phase cache used with a differently shaped weight");
    }
    let (stride, padding) = (s.stride as isize, s.padding as isize);
    // Phase r: output j = q·stride + r − padding for q in q_lo..q_hi, fed by taps
    // k = r + m·stride from input i = q − m. With m = M − 1 − k' this is a convolution over
    // t = q − q_lo with taps k' reading i = t + k' − (M − 1 − q_lo).
    let q_range = |r: usize| {
        let q_lo = (padding - r as isize).div_euclid(stride)
            + ((padding - r as isize).rem_euclid(stride) != 0) as isize;
        let q_hi = (s.l_out as isize + padding - r as isize + stride - 1).div_euclid(stride);
        (q_lo, (q_hi - q_lo).max(0) as usize)
    };
    let out_len = s.c_out * s.l_out;
    // SAFETY: every output column j belongs to exactly one phase, r = (j + padding) mod
    // stride, whose q range covers it; each phase writes all of its columns.
    let out = unsafe {
        written_by(s.batch * out_len, |out| {
            with_contiguous_f32(x, |x| {
                for (b, out_b) in out.chunks_exact_mut(out_len).enumerate() {
                    let x_b = &x[b * s.c_in * s.l_in..(b + 1) * s.c_in * s.l_in];
                    let item_map = SampleMap {
                        scale: map.scale as f32,
                        leaky_slope: map.leaky_slope.map(|v| v as f32),
                        mask: mask.as_ref().map(|m| &m[b * s.l_in..(b + 1) * s.l_in]),
                        channels: None,
                    };
                    let results: Vec<Vec<f32>> = phases
                        .iter()
                        .enumerate()
                        .map(|(r, packed)| {
                            let (q_lo, n_q) = q_range(r);
                            match packed {
                                _ if n_q == 0 => Ok(Vec::new()),
                                None => Ok(bias
                                    .iter()
                                    .flat_map(|&b| std::iter::repeat_n(b, n_q))
                                    .collect()),
                                // SAFETY: the phase convolution writes all its values.
                                Some(packed) => written_by(s.c_out * n_q, |phase| {
                                    precision::conv1d(
                                        phase,
                                        n_q,
                                        x_b,
                                        s.l_in,
                                        packed,
                                        &bias,
                                        &[],
                                        phase_taps(s, r) as isize - 1 - q_lo,
                                        1,
                                        &item_map,
                                    );
                                    Ok(())
                                }),
                            }
                        })
                        .collect::<Result<_>>()?;
                    interleave(out_b, &results, s, &q_range);
                }
                Ok(())
            })?
        })?
    };
    Tensor::from_vec(out, (s.batch, s.c_out, s.l_out), x.device())
}

/// Writes each phase's [C_out, n_q] result into its columns j = q·stride + r − padding of
/// `out` [C_out, L_out], row by row and left to right, so the output is written once in order.
fn interleave(
    out: &mut [MaybeUninit<f32>],
    phases: &[Vec<f32>],
    s: &ConvTranspose1dShape,
    q_range: &dyn Fn(usize) -> (isize, usize),
) {
    let (stride, padding) = (s.stride as isize, s.padding as isize);
    let ranges: Vec<(isize, usize)> = (0..s.stride).map(q_range).collect();
    let q_first = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let q_last = ranges
        .iter()
        .map(|&(lo, n)| lo + n as isize)
        .max()
        .unwrap_or(0);
    // Columns q where every phase has a value: no range checks there.
    let q_all_lo = ranges.iter().map(|r| r.0).max().unwrap_or(0);
    let q_all_hi = ranges
        .iter()
        .map(|&(lo, n)| lo + n as isize)
        .min()
        .unwrap_or(0)
        .max(q_all_lo);
    for (co, row) in out.chunks_exact_mut(s.l_out).enumerate() {
        let checked = |row: &mut [MaybeUninit<f32>], q: isize| {
            for (r, &(q_lo, n_q)) in ranges.iter().enumerate() {
                if q >= q_lo && q < q_lo + n_q as isize {
                    let j = (q * stride + r as isize - padding) as usize;
                    row[j].write(phases[r][co * n_q + (q - q_lo) as usize]);
                }
            }
        };
        (q_first..q_all_lo).for_each(|q| checked(row, q));
        if q_all_hi > q_all_lo {
            let j0 = (q_all_lo * stride - padding) as usize;
            let n = (q_all_hi - q_all_lo) as usize;
            let sources: Vec<&[f32]> = ranges
                .iter()
                .zip(phases)
                .map(|(&(q_lo, n_q), p)| &p[co * n_q + (q_all_lo - q_lo) as usize..][..n])
                .collect();
            let dst = &mut row[j0..j0 + n * s.stride];
            for (t, group) in dst.chunks_exact_mut(s.stride).enumerate() {
                for (d, src) in group.iter_mut().zip(&sources) {
                    d.write(src[t]);
                }
            }
        }
        (q_all_hi..q_last).for_each(|q| checked(row, q));
    }
}

/// Taps of phase `r`: k = r, r + stride, … below K.
fn phase_taps(s: &ConvTranspose1dShape, r: usize) -> usize {
    (r..s.taps).step_by(s.stride).count()
}

/// Each phase's weights [C_out, C_in, M] with tap k' = tap r + (M − 1 − k')·stride of the
/// transposed convolution's [C_in, C_out, K], packed for `precision`.
fn pack_phases(
    weight: &Tensor,
    s: &ConvTranspose1dShape,
    precision: Precision,
) -> Result<Vec<Option<PackedConv>>> {
    with_contiguous_f32(weight, |raw| {
        (0..s.stride)
            .map(|r| {
                let m_taps = phase_taps(s, r);
                (m_taps > 0).then(|| {
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
                    PackedConv::new(&w, s.c_out, s.c_in, m_taps, precision)
                })
            })
            .collect()
    })
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    /// A writer that skips a value leaves NaN there (debug builds only: release pays for no
    /// fill), so a kernel path that misses a column cannot pass a test by luck.
    #[test]
    fn a_value_the_writer_skips_reads_as_nan() {
        let skipped = 37;
        // SAFETY: this writer breaks `written_by`'s promise on purpose, which is sound only
        // because debug builds (the only ones this test exists in) initialize every value.
        let v = unsafe {
            written_by(100, |out| {
                for (i, value) in out.iter_mut().enumerate() {
                    if i != skipped {
                        value.write(i as f32);
                    }
                }
                Ok(())
            })
        }
        .unwrap();
        assert!(v[skipped].is_nan(), "skipped value reads {}", v[skipped]);
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| i == skipped || x == i as f32));
    }
}
