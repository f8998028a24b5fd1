//! Linear layers (`y = x Wᵀ` over row-major `[N, in]` activations) in bfloat16, for the
//! transformer bodies: bf16 products, `f32` sums, like the convolutions of [`super::bf16`].
//!
//! A linear layer is a 1-tap convolution, but the convolution kernel wants its input
//! channel-major (`[in, N]`) and writes its output so, while a transformer keeps positions
//! row-major: two transposes per call would cost a few percent of the product. So this runs
//! the same `vdpbf16ps` register block with the roles swapped: the block's broadcast operand
//! (a convolution's weights) is 8 *positions*' activations, and its vector operand (a
//! convolution's input tile) is 32 *output features*' weights. Its sums are then an
//! `[8 positions × 32 features]` piece of the row-major output, and the activations need no
//! transpose: a row's consecutive bf16 pairs are already the words the block broadcasts.
//!
//! The weights are packed once, as strips of 32 output features, each `[in / 2][32]` words
//! (a pair of input channels per word), contiguous so that one strip (64 KiB for 1024 inputs)
//! stays in L2 while every block of positions passes over it. The strips are what a spare
//! core shares ([`crate::spare`]): each part computes whole strips for all positions.
//!
//! On CPUs with AMX the layer runs on the tiles instead ([`super::tile_gemm`]), positions as
//! the tiles' rows.

use std::mem::MaybeUninit;

use candle_core::{Result, Tensor};

use super::bf16::{bf16_isa, pair, run_block, worth_it, Bf16Isa, BlockArgs, Epilogue, BLOCK_ROWS};
use super::isa::avx512_bf16;
use super::rows::as_uninit;
use super::tensor::with_contiguous_f32;
use super::tile_gemm::{Output, TileWeights};
use crate::spare::{self, SharedOut};

/// Output features per strip: the AVX-512 block's 2 vectors of 16.
const STRIP: usize = 32;

/// A linear layer's weights (no bias) packed for the bf16 block.
pub struct Bf16Linear {
    packed: Packed,
    in_features: usize,
    out_features: usize,
}

/// The one packing a layer keeps, for the block this CPU runs.
enum Packed {
    /// [out / STRIP][in / 2][STRIP] pair words, features past `out` zero, for the register
    /// block of `isa`.
    Strips { words: Vec<u32>, isa: Bf16Isa },
    /// On CPUs with AMX, the weights as the tiles of a row-major product: its 32 × 32 blocks
    /// outrun the `vdpbf16ps` block several times over.
    Tiles(TileWeights),
}

impl std::fmt::Debug for Bf16Linear {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bf16Linear")
            .field("in_features", &self.in_features)
            .field("out_features", &self.out_features)
            .finish_non_exhaustive()
    }
}

impl Bf16Linear {
    /// `weight`: [out, in] as candle's `Linear` holds it (any float dtype; rounded to bf16
    /// here, once).
    pub fn new(weight: &Tensor) -> Result<Self> {
        let (out_features, in_features) = weight.dims2()?;
        let w = weight.to_dtype(candle_core::DType::F32)?;
        let isa = if avx512_bf16() {
            Bf16Isa::Avx512
        } else {
            Bf16Isa::Portable
        };
        let packed = if bf16_isa() == Bf16Isa::Amx && worth_it(out_features, Bf16Isa::Amx) {
            Packed::Tiles(with_contiguous_f32(&w, |w| {
                TileWeights::new(w, out_features, in_features)
            })?)
        } else {
            Packed::Strips {
                words: with_contiguous_f32(&w, |w| pack_weights(w, out_features, in_features))?,
                isa,
            }
        };
        Ok(Self {
            packed,
            in_features,
            out_features,
        })
    }

    /// `x`: [..., in] `f32` on the CPU; returns [..., out].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let Some((&k, lead)) = dims.split_last() else {
            candle_core::bail!("a linear layer's input needs a feature dimension");
        };
        if k != self.in_features {
            candle_core::bail!(
                "linear layer of {} inputs given {:?}",
                self.in_features,
                x.shape()
            );
        }
        let n: usize = lead.iter().product();
        let mut out = Vec::with_capacity(n * self.out_features);
        with_contiguous_f32(x, |x| {
            self.run(
                x,
                n,
                &mut out.spare_capacity_mut()[..n * self.out_features],
                Output::Store,
            )
        })?;
        // SAFETY: `run` wrote every one of the n · out values.
        unsafe { out.set_len(n * self.out_features) };
        let mut shape = lead.to_vec();
        shape.push(self.out_features);
        Tensor::from_vec(out, shape, x.device())
    }

    /// The layer over host rows: `y[i, m] = Σ_k x[i, k] · w[m, k]` for `x` row-major
    /// [n, in], written to `out` ([n, output.width(out)]) as `output` says: stored or added
    /// to a residual stream, and through SwiGLU only where [`Bf16Linear::fuses_swiglu`]
    /// (elsewhere [`super::row_linear::RowLinear`] applies it after the product).
    pub(crate) fn run_into(&self, x: &[f32], n: usize, out: &mut [f32], output: Output) {
        self.run(x, n, as_uninit(out), output)
    }

    /// Whether [`Output::SwiGlu`] of `group` is applied to the sums in cache: on AMX tiles
    /// whose panels hold whole groups.
    pub(crate) fn fuses_swiglu(&self, group: usize) -> bool {
        matches!(&self.packed, Packed::Tiles(t) if t.fuses_swiglu(group))
    }

    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// `y[i, m] = Σ_k x[i, k] · w[m, k]` for `x` row-major [n, in], written to `out` as
    /// `output` says (`out` initialised unless stored; SwiGLU only on tiles that fuse it).
    fn run(&self, x: &[f32], n: usize, out: &mut [MaybeUninit<f32>], output: Output) {
        let (k, m) = (self.in_features, self.out_features);
        assert_eq!(x.len(), n * k);
        assert_eq!(out.len(), n * output.width(m));
        if n == 0 || m == 0 {
            return;
        }
        let (strips, isa) = match &self.packed {
            Packed::Tiles(tiles) => return tiles.run(x, n, out, output),
            Packed::Strips { words, isa } => (words, *isa),
        };
        assert!(
            !matches!(output, Output::SwiGlu { .. }),
            "SwiGLU is applied after the strips' product"
        );
        let pairs = k.div_ceil(2);
        let acts = pack_activations(x, n, k);
        let out_ptr = SharedOut::new(out);
        let zeros = [0f32; BLOCK_ROWS];
        let vector = avx512_bf16();
        let strip_words = pairs * STRIP;
        let features = |range: std::ops::Range<usize>| {
            let out_ptr = out_ptr.get();
            let mut sums = [0f32; BLOCK_ROWS * STRIP];
            for m0 in range.step_by(STRIP) {
                let strip = &strips[m0 / STRIP * strip_words..][..strip_words];
                let n_cols = STRIP.min(m - m0);
                for (block, block_acts) in acts.chunks_exact(pairs * BLOCK_ROWS).enumerate() {
                    let i0 = block * BLOCK_ROWS;
                    let n_rows = BLOCK_ROWS.min(n - i0);
                    let args = BlockArgs {
                        weights: block_acts,
                        x: strip,
                        x_stride: STRIP,
                        pairs,
                        taps: 1,
                        dilation: 1,
                    };
                    run_block(isa, &args, &mut sums);
                    let start = i0 * m + m0;
                    assert!(start + (n_rows - 1) * m + n_cols <= n * m);
                    let epilogue = Epilogue {
                        // SAFETY: in bounds (asserted above).
                        out: unsafe { out_ptr.add(start) },
                        out_stride: m,
                        residuals: &[],
                        bias: &zeros[..n_rows],
                        sums: &sums,
                        sums_stride: STRIP,
                        n_cols,
                        accumulate: output == Output::Add,
                    };
                    // SAFETY: the rows written are in bounds (asserted above) and the parts
                    // write disjoint feature columns of `out`, which nothing else reads
                    // meanwhile; with `add` they are initialised (the caller's promise);
                    // `vector` is `avx512_bf16()`.
                    unsafe { epilogue.run(vector) };
                }
            }
        };
        spare::in_parts(m, STRIP, n * k * m, features);
    }
}

/// [out, in] `f32` weights as [out / STRIP][in / 2][STRIP] bf16 pair words.
fn pack_weights(w: &[f32], out_features: usize, in_features: usize) -> Vec<u32> {
    let pairs = in_features.div_ceil(2);
    let strips = out_features.div_ceil(STRIP);
    let mut packed = vec![0u32; strips * pairs * STRIP];
    let at = |o: usize, i: usize| {
        if i < in_features {
            w[o * in_features + i]
        } else {
            0.0
        }
    };
    for o in 0..out_features {
        let (s, lane) = (o / STRIP, o % STRIP);
        for p in 0..pairs {
            packed[(s * pairs + p) * STRIP + lane] = pair(at(o, 2 * p), at(o, 2 * p + 1));
        }
    }
    packed
}

/// [n, in] activations as [n / 8][in / 2][8] bf16 pair words (positions past n zero): each
/// block of 8 positions is what the register block broadcasts, one word per position and pair.
fn pack_activations(x: &[f32], n: usize, k: usize) -> Vec<u32> {
    let pairs = k.div_ceil(2);
    let blocks = n.div_ceil(BLOCK_ROWS);
    let mut packed = vec![0u32; blocks * pairs * BLOCK_ROWS];
    for (i, row) in x.chunks_exact(k).enumerate() {
        let (block, r) = (i / BLOCK_ROWS, i % BLOCK_ROWS);
        let dst = &mut packed[block * pairs * BLOCK_ROWS..][..pairs * BLOCK_ROWS];
        let mut chunks = row.chunks_exact(2);
        for (p, two) in (&mut chunks).enumerate() {
            dst[p * BLOCK_ROWS + r] = pair(two[0], two[1]);
        }
        if let [last] = chunks.remainder() {
            dst[(pairs - 1) * BLOCK_ROWS + r] = pair(*last, 0.0);
        }
    }
    packed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::bf16::{from_bf16, to_bf16};
    use crate::kernels::testing::values;
    use candle_core::Device;

    /// Against the same products of bf16-rounded values summed in `f64`, on odd sizes (a
    /// partial block of positions, a partial strip, an odd input width), with and without a
    /// spare core.
    #[test]
    fn products_are_those_of_the_rounded_values() {
        for (n, k, m) in [(1, 1, 1), (13, 37, 45), (29, 256, 96), (64, 512, 200)] {
            let x = values(n * k, 1);
            let w = values(m * k, 2);
            let linear =
                Bf16Linear::new(&Tensor::from_vec(w.clone(), (m, k), &Device::Cpu).unwrap())
                    .unwrap();
            let round = |v: f32| from_bf16(to_bf16(v)) as f64;
            let check = |y: Vec<f32>| {
                for i in 0..n {
                    for o in 0..m {
                        let expected: f64 = (0..k)
                            .map(|j| round(x[i * k + j]) * round(w[o * k + j]))
                            .sum();
                        let got = y[i * m + o] as f64;
                        assert!(
                            (got - expected).abs() <= 1e-5 * (1.0 + expected.abs()) * k as f64,
                            "{n}×{k}×{m} at ({i}, {o}): {got} vs {expected}"
                        );
                    }
                }
            };
            let xt = Tensor::from_vec(x.clone(), (n, k), &Device::Cpu).unwrap();
            let forward = || -> Vec<f32> {
                let y = linear.forward(&xt).unwrap();
                y.flatten_all().unwrap().to_vec1().unwrap()
            };
            // Added to a residual stream: the same products on top of what `out` held.
            let residual = values(n * m, 3);
            let added = || -> Vec<f32> {
                let mut out = residual.clone();
                linear.run_into(&x, n, &mut out, Output::Add);
                out.iter().zip(&residual).map(|(o, r)| o - r).collect()
            };
            check(forward());
            check(added());
            // And with the spare core taking a share of the features.
            let _lending = crate::spare::lending_always();
            check(forward());
            check(added());
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::kernels::testing::thread_secs;
    use candle_core::Device;

    #[test]
    #[ignore = "timing, by hand"]
    fn rates() {
        for (n, k, m) in [
            (290, 1024, 3072),
            (290, 3072, 1024),
            (290, 1024, 2048),
            (290, 1024, 8200),
            (2320, 1024, 3072),
        ] {
            let x = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu).unwrap();
            let w = Tensor::randn(0f32, 0.03, (m, k), &Device::Cpu).unwrap();
            let lin = Bf16Linear::new(&w).unwrap();
            let f32_lin = candle_nn::Linear::new(w.clone(), None);
            use candle_core::Module;
            let best = |f: &dyn Fn()| {
                (0..5)
                    .map(|_| {
                        let t = thread_secs();
                        f();
                        thread_secs() - t
                    })
                    .fold(f64::INFINITY, f64::min)
            };
            let b = best(&|| drop(lin.forward(&x).unwrap()));
            let p = best(&|| {
                drop(pack_activations(
                    &x.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                    n,
                    k,
                ))
            });
            let f = best(&|| drop(f32_lin.forward(&x).unwrap()));
            let gmac = (n * k * m) as f64 * 1e-9;
            eprintln!("{n}×{k}×{m}: bf16 {:.1} GMAC/s (pack {:.2} ms of {:.2} ms), f32 candle {:.1} GMAC/s (thread time, its rayon helpers not counted)", gmac / b, p * 1e3, b * 1e3, gmac / f);
        }
    }
}
