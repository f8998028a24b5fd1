//! A linear layer (no bias) over row-major host rows in the precision its model runs: `f32`
//! through `gemm`, bf16 through [`Bf16Linear`]. The host-row transformer layers
//! (`omnivoice::packed_layer`) hold their products as these, so that one layer serves both
//! precisions: on CPUs where `f32` is the faster arithmetic (AVX2 only, or AVX-512 where bf16
//! was timed slower), the steps between the products then run as the same row kernels,
//! not as candle tensor ops.

use candle_core::{DType, Result, Tensor};

use super::gemm::product;
use super::rows::as_uninit;
use super::tensor::with_contiguous_f32;
use super::tile_gemm::Output;
use super::transformer::swiglu_rows;
use super::{Bf16Linear, Precision};
use crate::spare::{self, SharedOut};

/// Output features per part when a spare core shares an `f32` product.
const F32_ALIGN: usize = 16;

impl std::fmt::Debug for RowLinear {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let precision = match self {
            RowLinear::F32(_) => "f32",
            RowLinear::Bf16(_) => "bf16",
        };
        f.debug_struct("RowLinear")
            .field("precision", &precision)
            .field("out_features", &self.out_features())
            .finish_non_exhaustive()
    }
}

pub(crate) enum RowLinear {
    /// The `f32` weights transposed once, `[in, out]`: gemm then packs each part's columns
    /// from contiguous rows. Read as `[out, in]` in place, its strided gathers made ALBERT's
    /// products 1.3× slower (Kokoro, docs/performance.md §11).
    F32(Tensor),
    Bf16(Bf16Linear),
}

impl RowLinear {
    /// `weight` `[out, in]`, in `precision` (int8 is not offered for these layers: `f32`).
    pub(crate) fn new(weight: &Tensor, precision: Precision) -> Result<Self> {
        Ok(match precision {
            Precision::Bf16 => RowLinear::Bf16(Bf16Linear::new(weight)?),
            _ => RowLinear::F32(weight.to_dtype(DType::F32)?.t()?.contiguous()?),
        })
    }

    /// The same layer in bf16 (its `f32` weights dropped); a bf16 layer as it is.
    pub(crate) fn into_bf16(self) -> Result<Self> {
        match self {
            RowLinear::F32(w) => Ok(RowLinear::Bf16(Bf16Linear::new(&w.t()?)?)),
            bf16 => Ok(bf16),
        }
    }

    pub(crate) fn out_features(&self) -> usize {
        match self {
            RowLinear::F32(w) => w.dims()[1],
            RowLinear::Bf16(l) => l.out_features(),
        }
    }

    /// `y = x · wᵀ` for `x` [n, in], written to `out` as `output` says ([`Output`]); SwiGLU
    /// applied to the sums in cache where the bf16 tiles can, after the product elsewhere.
    pub(crate) fn run_into(&self, x: &[f32], n: usize, out: &mut [f32], output: Output) {
        let m = self.out_features();
        if let Output::SwiGlu { group } = output {
            let fused = matches!(self, RowLinear::Bf16(l) if l.fuses_swiglu(group));
            if !fused {
                assert!(group > 0 && m.is_multiple_of(2 * group));
                assert_eq!(out.len(), n * m / 2);
                let mut y = vec![0f32; n * m];
                self.run_into(x, n, &mut y, Output::Store);
                return swiglu_rows(&y, m / 2, group, out);
            }
        }
        let w = match self {
            RowLinear::Bf16(l) => return l.run_into(x, n, out, output),
            RowLinear::F32(w) => w,
        };
        let k = w.dims()[0];
        assert_eq!(x.len(), n * k);
        assert_eq!(out.len(), n * m);
        if n == 0 || m == 0 {
            return;
        }
        let out_ptr = SharedOut::new(as_uninit(out));
        let accumulate = output == Output::Add;
        with_contiguous_f32(w, |w| {
            spare::in_parts(m, F32_ALIGN, n * k * m, |features| {
                let cols = features.len();
                // SAFETY: `out` [n, m] row-major, this part's columns (disjoint from the other
                // parts'); `x` [n, k] row-major; `w` is wᵀ [k, m] row-major, read in the same
                // columns: every view lies inside its slice, and `out` overlaps neither.
                unsafe {
                    product(
                        (n, cols, k),
                        (out_ptr.get().add(features.start), 1, m),
                        accumulate,
                        (x.as_ptr(), 1, k),
                        (w.as_ptr().add(features.start), 1, m),
                    )
                }
            })
        })
        .expect("a contiguous CPU f32 tensor");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::values;
    use candle_core::Device;

    /// `f32` against the plain sums in `f64`, stored, added and through SwiGLU, with and
    /// without a spare core.
    #[test]
    fn f32_products_store_add_and_gate() {
        let (n, k, m, group) = (29, 70, 96, 16);
        let x = values(n * k, 1);
        let w = values(m * k, 2);
        let linear = RowLinear::new(
            &Tensor::from_vec(w.clone(), (m, k), &Device::Cpu).unwrap(),
            Precision::F32,
        )
        .unwrap();
        assert_eq!(linear.out_features(), m);
        let y: Vec<f64> = (0..n * m)
            .map(|at| {
                let (i, o) = (at / m, at % m);
                (0..k)
                    .map(|j| x[i * k + j] as f64 * w[o * k + j] as f64)
                    .sum()
            })
            .collect();
        let close = |a: f32, b: f64| (a as f64 - b).abs() <= 1e-5 * (1.0 + b.abs());
        let run = || {
            let mut out = vec![f32::NAN; n * m];
            linear.run_into(&x, n, &mut out, Output::Store);
            assert!(out.iter().zip(&y).all(|(&a, &b)| close(a, b)));
            let residual = values(n * m, 3);
            let mut out = residual.clone();
            linear.run_into(&x, n, &mut out, Output::Add);
            assert!(out
                .iter()
                .zip(&y)
                .zip(&residual)
                .all(|((&a, &b), &r)| close(a, b + r as f64)));
            let mut gated = vec![f32::NAN; n * m / 2];
            linear.run_into(&x, n, &mut gated, Output::SwiGlu { group });
            for (at, &g) in gated.iter().enumerate() {
                let (i, f) = (at / (m / 2), at % (m / 2));
                let (c, j) = (f / group, f % group);
                let gate = y[i * m + 2 * c * group + j];
                let up = y[i * m + (2 * c + 1) * group + j];
                assert!(close(g, gate / (1.0 + (-gate).exp()) * up), "{at}");
            }
        };
        run();
        let _lending = crate::spare::lending_always();
        run();
    }

    /// bf16 SwiGLU applied to the sums (fused on AMX tiles where the groups fit a panel, after
    /// the product elsewhere) against the stored product put through SwiGLU, with groups that
    /// fuse and one that does not, with and without a spare core.
    #[test]
    fn swiglu_output_is_swiglu_of_the_product() {
        for (n, k, m, group) in [(37, 96, 256, 64), (70, 64, 128, 16), (9, 40, 48, 8)] {
            let x = values(n * k, 4);
            let w = values(m * k, 5);
            let weight = Tensor::from_vec(w, (m, k), &Device::Cpu).unwrap();
            let linear = RowLinear::new(&weight, Precision::Bf16).unwrap();
            let mut y = vec![0f32; n * m];
            linear.run_into(&x, n, &mut y, Output::Store);
            let mut expected = vec![0f32; n * m / 2];
            swiglu_rows(&y, m / 2, group, &mut expected);
            let run = || {
                let mut out = vec![f32::NAN; n * m / 2];
                linear.run_into(&x, n, &mut out, Output::SwiGlu { group });
                for (i, (a, b)) in out.iter().zip(&expected).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                        "{n}×{k}×{m}/{group} at {i}"
                    );
                }
            };
            run();
            let _lending = crate::spare::lending_always();
            run();
        }
    }
}
