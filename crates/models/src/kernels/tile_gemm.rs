//! Linear layers on AMX tiles, as the row-major matrix product they are: `y[n, m] = x[n, k] ·
//! w[m, k]ᵀ` with positions as the tiles' rows.
//!
//! The first AMX linear layers ran as 1-tap convolutions on the convolutions' tile block
//! ([`super::bf16`]): the activations transposed to channels-major, packed into pair rows on
//! every call, the product, and the output transposed back. At OmniVoice's shapes that reached
//! 105–195 G multiply-adds a second per core, against ≈ 700 for the tiles themselves. Here the
//! roles suit a transformer: a tile's 16 rows are 16 positions' activations, which row-major
//! `x` in bf16 already is (a tile load with the row stride, no packing), and the weights are
//! packed once into the pair-interleaved tiles `tdpbf16ps` multiplies by.
//!
//! Each call converts `x` to bf16 once, then walks panels of 128 output features, every
//! 32-position block of `x` over each panel, so the weights come from memory once per call.
//! Within a panel the sum is cut into pieces of 256 inputs, so that a block's piece of `x` and
//! the panel's sums are read from L1 by every step and only the weights come from L2. Every
//! buffer the tiles read starts on a cache line, and no two rows of one are a power of two
//! apart: either doubled the time of a tile load (measured: 240 → 450 G multiply-adds a
//! second at OmniVoice's shapes). The panels are what a spare core shares
//! ([`crate::spare`]), each thread with its own tile configuration.

use std::cell::Cell;
use std::mem::MaybeUninit;

use super::aligned::Aligned;
use super::amx::{self, TILE_WORDS};
use super::bf16::{pair, to_bf16};
use super::fast_math::swiglu;
use super::isa::avx512_bf16;
use crate::spare::{self, SharedOut};

/// Positions (tile rows) and output features (tile columns) of one block: 2 × 2 tiles.
const BLOCK: usize = 32;
/// Input features of one tile step: 16 pairs.
const STEP: usize = 32;
/// Output features of one panel: its blocks' sums (4 × 4 KiB) and a cut of `x` (16 KiB) stay
/// in L1 while the panel's weights (≤ 800 KiB at 3,072 inputs) stay in L2.
const PANEL: usize = 128;
/// Tile steps of one cut of the sum: 32 positions × 256 inputs of `x` (16 KiB) stay in L1
/// while the panel's weights for those inputs stream past them from L2.
const SUM_STEPS: usize = 8;

/// What a linear layer does with its sums `y = x · wᵀ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// `out = y`, `[n, m]`.
    Store,
    /// `out += y` (a residual stream taking the layer's output).
    Add,
    /// `out[i, c·g + j] = silu(y[i, 2c·g + j]) · y[i, (2c + 1)·g + j]` for `g = group`,
    /// `[n, m / 2]`: SwiGLU of a joint gate/up layer whose features alternate `group` gate
    /// and `group` up features ([`super::transformer::swiglu_rows`]), applied while the sums
    /// are in cache instead of in a pass of its own.
    SwiGlu { group: usize },
}

impl Output {
    /// Output values per row of `m` sums.
    pub(crate) fn width(self, m: usize) -> usize {
        match self {
            Output::SwiGlu { .. } => m / 2,
            _ => m,
        }
    }
}

/// A linear layer's `[m, k]` weights as AMX tiles of 16 input pairs × 16 features (features
/// past `m` and inputs past `k` zero), in the order the product reads them ([`Self::offset`]).
pub(super) struct TileWeights {
    words: Aligned<u32>,
    in_features: usize,
    out_features: usize,
    k_tiles: usize,
}

impl TileWeights {
    /// `w`: row-major `[m, k]` `f32`, rounded to bf16 here, once.
    pub(super) fn new(w: &[f32], m: usize, k: usize) -> Self {
        assert_eq!(w.len(), m * k);
        let k_tiles = k.div_ceil(STEP);
        let blocks = m.div_ceil(BLOCK);
        let mut aligned = Aligned::zeroed(blocks * k_tiles * 2 * TILE_WORDS);
        let words = &mut aligned[..];
        let at = |o: usize, i: usize| if o < m && i < k { w[o * k + i] } else { 0.0 };
        for t0 in (0..k_tiles).step_by(SUM_STEPS) {
            let steps = SUM_STEPS.min(k_tiles - t0);
            for block in 0..blocks {
                let start = Self::offset(t0, block, blocks, k_tiles);
                let run = &mut words[start..][..steps * 2 * TILE_WORDS];
                for (tile, words) in run.chunks_exact_mut(TILE_WORDS).enumerate() {
                    let (t, half) = (t0 + tile / 2, tile % 2);
                    for (q, row) in words.chunks_exact_mut(16).enumerate() {
                        let i = t * STEP + 2 * q;
                        for (j, word) in row.iter_mut().enumerate() {
                            let o = block * BLOCK + half * 16 + j;
                            *word = pair(at(o, i), at(o, i + 1));
                        }
                    }
                }
            }
        }
        Self {
            words: aligned,
            in_features: k,
            out_features: m,
            k_tiles,
        }
    }

    /// Where the tiles of feature block `block` (of `blocks`) for the cut of the sum from
    /// step `t0` begin: the cuts one after another, each holding every block's steps (two
    /// tiles each) in turn, so that a panel's walk over its blocks reads one stream.
    fn offset(t0: usize, block: usize, blocks: usize, k_tiles: usize) -> usize {
        debug_assert_eq!(t0 % SUM_STEPS, 0);
        // Every cut before t0's is whole; only the last one may have fewer steps.
        let steps = SUM_STEPS.min(k_tiles - t0);
        (t0 * blocks + block * steps) * 2 * TILE_WORDS
    }

    /// Whether [`Output::SwiGlu`] of `group` can be applied per panel: each panel (and each
    /// part a spare core takes) then holds whole groups of gate and up features.
    pub(super) fn fuses_swiglu(&self, group: usize) -> bool {
        group > 0
            && (2 * group).is_multiple_of(BLOCK)
            && PANEL.is_multiple_of(2 * group)
            && self.out_features.is_multiple_of(2 * group)
    }

    /// `y[i, o] = Σ_j x[i, j] · w[o, j]` for `x` row-major `[n, k]`, written to `out` as
    /// `output` says (`[n, output.width(m)]`; initialised unless [`Output::Store`]). SwiGLU
    /// only where [`TileWeights::fuses_swiglu`].
    pub(super) fn run(&self, x: &[f32], n: usize, out: &mut [MaybeUninit<f32>], output: Output) {
        let (k, m) = (self.in_features, self.out_features);
        let width = output.width(m);
        assert_eq!(x.len(), n * k);
        assert_eq!(out.len(), n * width);
        if let Output::SwiGlu { group } = output {
            assert!(self.fuses_swiglu(group));
        }
        assert!(amx::usable(), "weights packed for AMX on a CPU without it");
        if n == 0 || m == 0 {
            return;
        }
        // One cache line past the tiles' width: at a power-of-two stride the 16 rows of a tile
        // would share a few of L1's sets and evict each other.
        let row = self.k_tiles * STEP + STEP;
        // This thread's rows, kept from call to call: at a few hundred kilobytes and up, a
        // fresh buffer is fresh pages, which the kernel faults in and zeroes on every call
        // (7 calls a layer, 28 layers a forward).
        let mut kept = ROWS.replace(Aligned::new());
        let a = to_bf16_rows(x, n, k, row, &mut kept);
        let blocks = m.div_ceil(BLOCK);
        let panel = PANEL;
        let out_ptr = SharedOut::new(out);
        // The sums of one block of positions across a panel, 16 floats wider than the panel:
        // rows a power of two apart would share L1's sets.
        let sums_stride = panel + 16;
        let features = |range: std::ops::Range<usize>| {
            let out_ptr = out_ptr.get();
            // SAFETY: AMX is usable (asserted above); the configuration lives on this thread.
            let tiles = unsafe { amx::Tiles::configure() };
            let mut kept_sums = SUMS.replace(Aligned::new());
            let sums = kept_sums.at_least(BLOCK * sums_stride);
            for p0 in range.clone().step_by(panel) {
                let p1 = (p0 + panel).min(range.end);
                for i0 in (0..n).step_by(BLOCK) {
                    let a_rows = &a[i0 * row..][..BLOCK * row];
                    for t0 in (0..self.k_tiles).step_by(SUM_STEPS) {
                        let steps = SUM_STEPS.min(self.k_tiles - t0);
                        for f0 in (p0..p1).step_by(BLOCK) {
                            let start = Self::offset(t0, f0 / BLOCK, blocks, self.k_tiles);
                            let b = &self.words[start..][..steps * 2 * TILE_WORDS];
                            let dst = &mut sums[f0 - p0..][..(BLOCK - 1) * sums_stride + BLOCK];
                            // SAFETY: `a_rows` holds 32 rows of `row` bf16 values, of which
                            // the steps read 64 · steps bytes from input t0 · 32 on; `b` the
                            // steps' tiles; `dst` 32 rows of 32 floats `sums_stride` apart,
                            // written by the first cut of the sum before a later one adds.
                            unsafe {
                                tiles.gemm_block(
                                    a_rows[t0 * STEP..].as_ptr(),
                                    row * 2,
                                    b.as_ptr(),
                                    steps,
                                    dst.as_mut_ptr(),
                                    sums_stride * 4,
                                    t0 > 0,
                                )
                            };
                        }
                    }
                    let cols = p1.min(m) - p0;
                    for r in 0..BLOCK.min(n - i0) {
                        let sums = &sums[r * sums_stride..][..cols];
                        let (start, len) = match output {
                            Output::SwiGlu { .. } => ((i0 + r) * width + p0 / 2, cols / 2),
                            _ => ((i0 + r) * width + p0, cols),
                        };
                        assert!(start + len <= n * width);
                        // In bounds (asserted), and this part's own features of `out`: the
                        // parts write disjoint features (a SwiGLU part's half of its whole
                        // groups), which nothing reads meanwhile.
                        if output == Output::Store {
                            // SAFETY: as said above.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    sums.as_ptr(),
                                    out_ptr.add(start),
                                    len,
                                )
                            };
                            continue;
                        }
                        // SAFETY: as said above; for `Add` and `SwiGlu` the caller
                        // initialised `out`.
                        let out =
                            unsafe { std::slice::from_raw_parts_mut(out_ptr.add(start), len) };
                        match output {
                            Output::Store => unreachable!("stored above"),
                            Output::Add => out.iter_mut().zip(sums).for_each(|(o, s)| *o += s),
                            Output::SwiGlu { group } => {
                                let gates = sums.chunks_exact(2 * group);
                                for (y, out) in gates.zip(out.chunks_exact_mut(group)) {
                                    swiglu(y, out);
                                }
                            }
                        }
                    }
                }
            }
            SUMS.set(kept_sums);
        };
        let padded = m.div_ceil(BLOCK) * BLOCK;
        let align = match output {
            Output::SwiGlu { group } => 2 * group,
            _ => BLOCK,
        };
        spare::in_parts(padded, align, n * k * m, features);
        ROWS.set(kept);
    }
}

thread_local! {
    /// This thread's bf16 activation rows, kept between calls ([`TileWeights::run`]).
    static ROWS: Cell<Aligned<u16>> = const { Cell::new(Aligned::new()) };
    /// This thread's sums of one block across a panel, kept between calls.
    static SUMS: Cell<Aligned<f32>> = const { Cell::new(Aligned::new()) };
}

/// `x` `[n, k]` as bf16 rows of `row` values (zeros past `k`), and zero rows up to a multiple
/// of [`BLOCK`] positions (the tiles read whole blocks), in `buffer`.
fn to_bf16_rows<'a>(
    x: &[f32],
    n: usize,
    k: usize,
    row: usize,
    buffer: &'a mut Aligned<u16>,
) -> &'a [u16] {
    let rows = buffer.at_least(n.div_ceil(BLOCK) * BLOCK * row);
    let (real, padding) = rows.split_at_mut(n * row);
    for (src, dst) in x.chunks_exact(k).zip(real.chunks_exact_mut(row)) {
        let (values, past) = dst.split_at_mut(k);
        round_row(src, values);
        past.fill(0);
    }
    padding.fill(0);
    rows
}

/// `dst` ← `src` rounded to bf16 (to nearest, ties to even), 32 at a time with AVX-512 BF16
/// where the CPU has it.
pub(super) fn round_row(src: &[f32], dst: &mut [u16]) {
    assert_eq!(src.len(), dst.len());
    let done = if avx512_bf16() {
        // SAFETY: `avx512_bf16` said the CPU has AVX-512 BF16; `dst` holds `src.len()` values.
        unsafe { x86::convert(src, dst) }
    } else {
        0
    };
    for (d, &v) in dst[done..].iter_mut().zip(&src[done..]) {
        *d = to_bf16(v);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Rounds the leading multiple of 32 values of `src` to bf16 (to nearest, ties to even,
    /// as [`super::to_bf16`]) into `dst`, and returns how many it did.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and BF16; `dst` must hold at least `src.len()` values.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn convert(src: &[f32], dst: &mut [u16]) -> usize {
        let n = src.len() / 32 * 32;
        for j in (0..n).step_by(32) {
            // SAFETY: j + 32 ≤ n ≤ src.len() ≤ dst.len(); the transmute reinterprets 32 bf16
            // values as 64 bytes of integers, any bits valid.
            unsafe {
                let lo = _mm512_loadu_ps(src.as_ptr().add(j));
                let hi = _mm512_loadu_ps(src.as_ptr().add(j + 16));
                let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
                _mm512_storeu_si512(dst.as_mut_ptr().add(j).cast(), both);
            }
        }
        n
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    pub(super) unsafe fn convert(_: &[f32], _: &mut [u16]) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::bf16::from_bf16;
    use crate::kernels::testing::values;

    /// Against the products of the bf16-rounded values summed in `f64`, on shapes with edge
    /// blocks in both directions, an input width off the tile step, and several panels, with
    /// and without a spare core. Skipped (with a note) where AMX is not usable.
    #[test]
    fn products_are_those_of_the_rounded_values() {
        if !amx::usable() {
            eprintln!("no usable AMX here (or OMNIVOICE_KERNEL_ISA caps it): nothing to test");
            return;
        }
        let shapes = [
            (1, 1, 1),
            (13, 37, 45),
            (32, 64, 32),
            (33, 100, 70),
            (77, 1024, 600),
            (40, 3000, 200),
        ];
        for (n, k, m) in shapes {
            let x = values(n * k, 1);
            let w = values(m * k, 2);
            let weights = TileWeights::new(&w, m, k);
            let round = |v: f32| from_bf16(to_bf16(v)) as f64;
            let run = || {
                let mut out = vec![MaybeUninit::new(f32::NAN); n * m];
                weights.run(&x, n, &mut out, Output::Store);
                // SAFETY: initialised above (and overwritten by `run`).
                out.into_iter()
                    .map(|v| unsafe { v.assume_init() })
                    .collect::<Vec<_>>()
            };
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
            check(run());
            let _lending = crate::spare::lending_always();
            check(run());
        }
    }

    /// The conversion's vector and scalar roundings agree, ties and all.
    #[test]
    fn vector_rounding_matches_scalar() {
        if !avx512_bf16() {
            return;
        }
        let mut x = values(96, 7);
        x[3] = f32::from_bits(0x3f80_8000); // a tie, to even
        x[4] = f32::from_bits(0x3f81_8000); // a tie, up
        let mut buffer = Aligned::new();
        let rows = to_bf16_rows(&x, 1, 96, 96, &mut buffer);
        for (j, (&v, &h)) in x.iter().zip(rows.iter()).enumerate() {
            assert_eq!(h, to_bf16(v), "value {j}: {v}");
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::kernels::testing::thread_secs;

    /// Prints each OmniVoice shape's rate on one thread against the tiles' own rate measured
    /// just before it (`cargo test --release -p omnivoice-models --lib tile_gemm::speed --
    /// --ignored --nocapture`).
    #[test]
    #[ignore = "timing, by hand"]
    fn rates_against_the_register_peak() {
        if !amx::usable() {
            return;
        }
        let peak = || {
            // SAFETY: AMX is usable (checked above).
            let tiles = unsafe { amx::Tiles::configure() };
            let steps = 200_000;
            let start = thread_secs();
            tiles.register_peak(steps);
            (steps * 4 * 16 * 16 * 32) as f64 / (thread_secs() - start) * 1e-9
        };
        {
            // The block alone, on random operands in L1 (the tiles draw more power, and run
            // slower, on real values than on the register peak's zeros): what the product
            // could reach.
            let a: Vec<u16> = (0..32 * 288)
                .map(|i| to_bf16(((i * 7919) % 1000) as f32 * 1e-3))
                .collect();
            let b: Vec<u32> = (0..16 * TILE_WORDS)
                .map(|i| {
                    pair(
                        ((i * 31) % 777) as f32 * 1e-3,
                        ((i * 17) % 555) as f32 * 1e-3,
                    )
                })
                .collect();
            let (a, b) = (Aligned::copy(&a), Aligned::copy(&b));
            let mut c = Aligned::<f32>::zeroed(32 * 32);
            // SAFETY: AMX is usable (checked above).
            let tiles = unsafe { amx::Tiles::configure() };
            let calls = 20_000usize;
            let start = thread_secs();
            for _ in 0..calls {
                // SAFETY: `a` holds 32 rows of 288 values, `b` 16 tiles, `c` 32 × 32 floats.
                unsafe {
                    tiles.gemm_block(
                        a.as_ptr(),
                        288 * 2,
                        b.as_ptr(),
                        8,
                        c.as_mut_ptr(),
                        128,
                        false,
                    )
                };
            }
            let rate = calls as f64 * (8 * 4 * 8192) as f64 / (thread_secs() - start) * 1e-9;
            eprintln!("the block alone, operands in L1: {rate:.0} GMAC/s");
        }
        for (n, k, m) in [
            (290, 1024, 4096),
            (290, 1024, 3072),
            (290, 3072, 1024),
            (290, 1024, 2048),
            (290, 1024, 8200),
            (2320, 1024, 3072),
        ] {
            let x: Vec<f32> = (0..n * k)
                .map(|i| ((i * 7919) % 1000) as f32 * 1e-3)
                .collect();
            let w: Vec<f32> = (0..m * k)
                .map(|i| ((i * 104_729) % 1000) as f32 * 1e-3)
                .collect();
            let weights = TileWeights::new(&w, m, k);
            let mut out = vec![MaybeUninit::new(0f32); n * m];
            weights.run(&x, n, &mut out, Output::Store);
            let best = (0..7)
                .map(|_| {
                    let start = thread_secs();
                    weights.run(&x, n, &mut out, Output::Store);
                    thread_secs() - start
                })
                .fold(f64::INFINITY, f64::min);
            let rate = (n * k * m) as f64 / best * 1e-9;
            let peak = peak();
            eprintln!(
                "{n}×{k}×{m}: {rate:.0} GMAC/s, {:.0} % of the register peak ({peak:.0})",
                100.0 * rate / peak
            );
        }
    }
}
