//! The direct kernel's register blocks, one per instruction set, and the choice between them.
//!
//! A block keeps `rows` output channels × `cols` samples in registers while it streams over
//! every input channel and tap of a packed input tile ([`super::direct`] does the tiling and
//! packing). Picked at run time: AVX-512 (8 rows × 32 samples in 16 of its 32 registers),
//! AVX2 + FMA (6 × 16 in 12 of 16), and a portable loop with the same sums; each also has a
//! one-row block for layers with fewer output channels than the tall block has rows.

/// Most residual signals one block adds (the decoder adds the step input and a running sum).
pub(super) const MAX_RESIDUALS: usize = 2;

/// The block's inputs: `weights` holds c_in·taps·rows values, `x` is read at
/// `ci·x_stride + k·dilation + 0..cols` for ci < c_in, k < taps.
pub(super) struct Args<'a> {
    pub weights: &'a [f32],
    pub x: &'a [f32],
    pub x_stride: usize,
    pub c_in: usize,
    pub taps: usize,
    pub dilation: usize,
}

/// The block's starting value: `out` (if `load_out`) + `bias[r]` + Σ residual rows.
pub(super) struct Init<'a> {
    pub bias: Option<*const f32>,
    /// (first value, row stride) of each residual.
    pub residuals: &'a [(*const f32, usize)],
    pub load_out: bool,
}

type BlockFn = unsafe fn(&Args, *mut f32, usize, &Init);

#[derive(Clone, Copy)]
pub(super) struct Kernel {
    pub rows: usize,
    pub cols: usize,
    block: BlockFn,
}

impl Kernel {
    /// # Safety
    /// `out` must be valid for reads and writes of `rows` rows of `cols` values, `out_stride`
    /// apart, initialized when `init.load_out`; `init.bias` (when given) valid for `rows`
    /// reads, and each residual for reads of `rows` rows of `cols` values at its stride; and
    /// `out`'s rows must overlap neither `args`' slices nor the `init` values. (The bounds of
    /// `args` are checked here.)
    pub(super) unsafe fn run(&self, args: &Args, out: *mut f32, out_stride: usize, init: &Init) {
        // Checked here, once per block, so the pointer arithmetic of the loops stays in
        // bounds whatever the caller computed.
        assert!(args.c_in > 0 && args.taps > 0);
        assert!(args.weights.len() >= args.c_in * args.taps * self.rows);
        assert!(
            args.x.len()
                >= (args.c_in - 1) * args.x_stride + (args.taps - 1) * args.dilation + self.cols
        );
        // SAFETY: a `Kernel` is made only by `Isa::kernels`, and only for an ISA whose
        // `supported()` holds, so `block` runs on a CPU with its features; the bounds of
        // `args` it relies on are asserted above, and the pointers are the caller's promise.
        unsafe { (self.block)(args, out, out_stride, init) }
    }
}

#[derive(Clone, Copy, PartialEq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum Isa {
    Avx512,
    Avx2,
    Portable,
}

impl Isa {
    /// Best first.
    const ALL: [Isa; 3] = [Isa::Avx512, Isa::Avx2, Isa::Portable];

    fn supported(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => super::isa::avx512f(),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => super::isa::avx2_fma(),
            Isa::Portable => true,
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Its kernels: the tall block, then the one-row block for layers with fewer output
    /// channels than the tall block has rows. (An AVX-512 block of 8 × 48 in 24 registers
    /// measured 2–8 % faster in isolation but twice as slow once built with its start-value
    /// code: the compiler spilled its accumulators.)
    fn kernels(self) -> [Kernel; 2] {
        let kernel = |rows, cols, block| Kernel { rows, cols, block };
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => [
                kernel(8, 32, x86::zmm::<8, 2>),
                kernel(1, 64, x86::zmm::<1, 4>),
            ],
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => [
                kernel(6, 16, x86::ymm::<6, 2>),
                kernel(1, 32, x86::ymm::<1, 4>),
            ],
            _ => [
                kernel(6, 16, portable::<6, 2>),
                kernel(1, 32, portable::<1, 4>),
            ],
        }
    }
}

/// The widest blocks this CPU runs under the instruction-set cap ([`super::isa`]).
pub(super) fn level() -> super::isa::Level {
    match isa() {
        Isa::Avx512 => super::isa::Level::Avx512,
        Isa::Avx2 => super::isa::Level::Avx2,
        Isa::Portable => super::isa::Level::Portable,
    }
}

fn isa() -> Isa {
    Isa::ALL
        .into_iter()
        .find(|isa| isa.supported())
        .expect("the portable kernels run anywhere")
}

/// The register block height for a layer with `c_out` output channels on this CPU.
pub(super) fn rows_for(c_out: usize) -> usize {
    let [tall, single] = isa().kernels();
    if c_out < tall.rows {
        single.rows
    } else {
        tall.rows
    }
}

/// The kernel for weights packed `rows` high on this CPU.
pub(super) fn pick(rows: usize) -> Kernel {
    isa()
        .kernels()
        .into_iter()
        .find(|k| k.rows == rows)
        .unwrap_or_else(|| unreachable!("weights packed for another CPU: {rows} rows"))
}

/// The same sums in plain Rust, 8-float lanes: `V` lanes per row.
///
/// # Safety
/// [`Kernel::run`]'s contract on `out` and `init`, with `R` rows of `8·V` columns (`args` is
/// read with bounds checks).
unsafe fn portable<const R: usize, const V: usize>(
    a: &Args,
    out: *mut f32,
    out_stride: usize,
    init: &Init,
) {
    let mut acc = [[[0f32; 8]; V]; R];
    // SAFETY: r < R and j < 8·V, inside the rows of `out`, the bias and the residuals the
    // caller made valid; `out` is read only when `load_out`, when it is initialized.
    unsafe {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            for (j, v) in acc_r.as_flattened_mut().iter_mut().enumerate() {
                let mut s = if init.load_out {
                    *out.add(r * out_stride + j)
                } else {
                    0.0
                };
                if let Some(b) = init.bias {
                    s += *b.add(r);
                }
                for &(p, stride) in init.residuals {
                    s += *p.add(r * stride + j);
                }
                *v = s;
            }
        }
    }
    let mut w = a.weights.chunks_exact(R);
    for ci in 0..a.c_in {
        for k in 0..a.taps {
            let wk = w.next().expect("weights hold c_in · taps blocks");
            let xs = &a.x[ci * a.x_stride + k * a.dilation..][..8 * V];
            for (acc_r, &wr) in acc.iter_mut().zip(wk) {
                for (s, &v) in acc_r.as_flattened_mut().iter_mut().zip(xs) {
                    *s += wr * v;
                }
            }
        }
    }
    // SAFETY: r < R and j < 8·V, inside the rows of `out` the caller made writable.
    unsafe {
        for (r, acc_r) in acc.iter().enumerate() {
            for (j, &v) in acc_r.as_flattened().iter().enumerate() {
                *out.add(r * out_stride + j) = v;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Args, Init};
    use std::arch::x86_64::*;

    /// One register block of `R` rows × `V` vectors, for one vector width.
    macro_rules! block {
        ($name:ident, $features:literal, $vec:ty, $lanes:literal,
         $load:ident, $store:ident, $set1:ident, $zero:ident, $fma:ident, $add:ident) => {
            /// # Safety
            /// The CPU must have the features this copy is compiled for (its
            /// `target_feature`); `a` must meet the bounds [`super::Kernel::run`] asserts (for
            /// `R` rows of `V` vectors), and `out` and `init` its contract.
            #[target_feature(enable = $features)]
            pub unsafe fn $name<const R: usize, const V: usize>(
                a: &Args,
                out: *mut f32,
                out_stride: usize,
                init: &Init,
            ) {
                let mut acc = [[$zero(); V]; R];
                // SAFETY: r < R and v < V, so every load is inside the rows of `out`, the
                // bias and the residuals the caller made valid; `out` is read only when
                // `load_out`, when it is initialized.
                unsafe {
                    for r in 0..R {
                        for v in 0..V {
                            let at = r * out_stride + $lanes * v;
                            let mut s = if init.load_out {
                                $load(out.add(at))
                            } else {
                                $zero()
                            };
                            if let Some(b) = init.bias {
                                s = $add(s, $set1(*b.add(r)));
                            }
                            for &(p, stride) in init.residuals {
                                s = $add(s, $load(p.add(r * stride + $lanes * v)));
                            }
                            acc[r][v] = s;
                        }
                    }
                }
                let mut wp = a.weights.as_ptr();
                let x = a.x.as_ptr();
                // SAFETY: for ci < c_in and k < taps the loads read the V vectors from column
                // k·dilation of input row ci, and the weight reads the
                // ci·taps + k'th group of R values: inside `a.x` and `a.weights` by the bounds
                // `Kernel::run` asserts.
                unsafe {
                    for ci in 0..a.c_in {
                        let row = x.add(ci * a.x_stride);
                        for k in 0..a.taps {
                            let xs = row.add(k * a.dilation);
                            let xv: [$vec; V] = std::array::from_fn(|v| $load(xs.add($lanes * v)));
                            for r in 0..R {
                                let w = $set1(*wp.add(r));
                                for v in 0..V {
                                    acc[r][v] = $fma(w, xv[v], acc[r][v]);
                                }
                            }
                            wp = wp.add(R);
                        }
                    }
                }
                // SAFETY: r < R and v < V, inside the rows of `out` the caller made writable.
                unsafe {
                    for r in 0..R {
                        for v in 0..V {
                            $store(out.add(r * out_stride + $lanes * v), acc[r][v]);
                        }
                    }
                }
            }
        };
    }

    block!(
        zmm,
        "avx512f",
        __m512,
        16,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_set1_ps,
        _mm512_setzero_ps,
        _mm512_fmadd_ps,
        _mm512_add_ps
    );
    block!(
        ymm,
        "avx2,fma",
        __m256,
        8,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_set1_ps,
        _mm256_setzero_ps,
        _mm256_fmadd_ps,
        _mm256_add_ps
    );
}

#[cfg(test)]
fn all_for_tests() -> Vec<Kernel> {
    Isa::ALL
        .into_iter()
        .filter(|isa| isa.supported())
        .flat_map(Isa::kernels)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    #[test]
    fn every_kernel_agrees_with_the_definition() {
        let mut rng = StdRng::seed_from_u64(5);
        let (c_in, taps, dilation, stride) = (6, 3, 2, 100);
        let x = random(&mut rng, c_in * stride);
        for kernel in all_for_tests() {
            let (rows, cols) = (kernel.rows, kernel.cols);
            let weights = random(&mut rng, c_in * taps * rows);
            let bias = random(&mut rng, rows);
            let residual = random(&mut rng, rows * cols);
            let start = random(&mut rng, rows * cols);
            let mut out = start.clone();
            let res = [(residual.as_ptr(), cols)];
            let init = Init {
                bias: Some(bias.as_ptr()),
                residuals: &res,
                load_out: true,
            };
            let args = Args {
                weights: &weights,
                x: &x,
                x_stride: stride,
                c_in,
                taps,
                dilation,
            };
            // SAFETY: `out`, `residual` and `bias` hold rows × cols values; `run` checks the rest.
            unsafe { kernel.run(&args, out.as_mut_ptr(), cols, &init) };
            for r in 0..rows {
                for j in 0..cols {
                    let mut want = start[r * cols + j] + bias[r] + residual[r * cols + j];
                    for ci in 0..c_in {
                        for k in 0..taps {
                            want += weights[(ci * taps + k) * rows + r]
                                * x[ci * stride + k * dilation + j];
                        }
                    }
                    let got = out[r * cols + j];
                    assert!(
                        (got - want).abs() < 1e-4,
                        "{rows}×{cols} ({r}, {j}): {got} vs {want}"
                    );
                }
            }
        }
    }
}
