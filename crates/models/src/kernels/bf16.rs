//! The direct convolution in bfloat16: bf16 products, `f32` sums.
//!
//! Same definition and tiling as the `f32` kernel ([`super::direct`]), with two changes that
//! every bf16 multiply instruction dictates: it multiplies *pairs* of bf16 values and adds both
//! products into one `f32` lane, so the reduction runs over pairs of input channels (the input
//! tile is packed with channels 2p and 2p+1 interleaved in one `u32` per column; an odd last
//! channel pairs with zero), and the weights are converted to bf16 once, when packed. The
//! input map (scale, LeakyReLU, mask) is applied in `f32` while the tile is packed, just before
//! rounding; a block's sums land in a small `f32` buffer and the epilogue adds bias, residuals
//! and (when accumulating) the output's value in `f32`, so only the products are rounded.
//!
//! Three blocks, one picked per CPU ([`bf16_isa`]): AMX tiles (32 × 32 per
//! call, [`super::amx`]), AVX-512 `vdpbf16ps` (8 rows × 32 columns in 16 registers) and a
//! portable loop with the same roundings, which is how the bf16 arithmetic is tested on any CPU.

use std::ops::Range;
use std::sync::OnceLock;

use super::aligned::Aligned;
use super::amx;
use super::fast_math;
use super::isa::{self, avx512_bf16};
use super::rows::{Rows, RowsMut, SampleMap};
use crate::spare::{self, SharedOut};

/// How bf16 products run on this CPU, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bf16Isa {
    /// AMX tiles (`tdpbf16ps`), 32 × 32 output blocks.
    Amx,
    /// AVX-512 `vdpbf16ps`, 8 × 32 register blocks.
    Avx512,
    /// Plain Rust with the same roundings: correct anywhere, slower than `f32`.
    Portable,
}

impl Bf16Isa {
    /// The instruction-set level this block kind needs.
    pub(super) fn level(self) -> isa::Level {
        match self {
            Bf16Isa::Amx => isa::Level::Amx,
            Bf16Isa::Avx512 => isa::Level::Avx512,
            Bf16Isa::Portable => isa::Level::Portable,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Bf16Isa::Amx => "AMX",
            Bf16Isa::Avx512 => "AVX-512",
            Bf16Isa::Portable => "portable",
        }
    }
}

/// The best bf16 implementation this CPU (and OS) supports under the instruction-set cap
/// ([`super::isa`]), decided once.
pub(super) fn bf16_isa() -> Bf16Isa {
    static ISA: OnceLock<Bf16Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        if amx::usable() {
            Bf16Isa::Amx
        } else if avx512_bf16() {
            Bf16Isa::Avx512
        } else {
            Bf16Isa::Portable
        }
    })
}

/// `u32`s of packed input tile (~256 KiB, inside L2), as in the `f32` kernel.
const TILE_WORDS: usize = 64 * 1024;
/// Rows of the AVX-512 and portable blocks.
pub(super) const BLOCK_ROWS: usize = 8;

/// `v` rounded to the nearest bfloat16 (ties to even), as its bits.
pub(super) fn to_bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    if v.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) as u16
}

/// The `f32` a bfloat16 stands for (exact).
pub(super) fn from_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// Two values as one pair word: `lo` in the low half.
pub(super) fn pair(lo: f32, hi: f32) -> u32 {
    to_bf16(lo) as u32 | (to_bf16(hi) as u32) << 16
}

/// Whether a layer with `c_out` output channels is worth bf16: below one block of rows most of
/// a block's work would be padding (the decoder's single-channel `conv_post` stays `f32`).
pub(super) fn worth_it(c_out: usize, isa: Bf16Isa) -> bool {
    match isa {
        Bf16Isa::Amx => c_out >= amx::ROWS / 2,
        _ => c_out >= BLOCK_ROWS,
    }
}

/// Weights [C_out, C_in, K] as bf16 channel pairs, laid out for one block kind:
/// - AVX-512 / portable: [C_out / 8][pairs][K][8] (rows past C_out zero);
/// - AMX: [C_out / 16][K][chunks][16 rows][16 pairs], one 1 KiB tile per (half block, tap,
///   chunk of 16 pairs), C_out padded to whole 32-row blocks and pairs to whole chunks.
pub(super) struct Bf16Weights {
    /// On a cache line, so that no AMX tile row straddles two ([`super::aligned`]).
    data: Aligned<u32>,
    c_out: usize,
    c_in: usize,
    taps: usize,
    isa: Bf16Isa,
}

impl std::fmt::Debug for Bf16Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bf16Weights")
            .field("c_out", &self.c_out)
            .field("c_in", &self.c_in)
            .field("taps", &self.taps)
            .field("isa", &self.isa)
            .finish_non_exhaustive()
    }
}

impl Bf16Weights {
    /// `w` is row-major [c_out, c_in, taps].
    pub fn new(w: &[f32], c_out: usize, c_in: usize, taps: usize, isa: Bf16Isa) -> Self {
        assert_eq!(w.len(), c_out * c_in * taps);
        let at = |co: usize, ci: usize, k: usize| -> f32 {
            if co < c_out && ci < c_in {
                w[(co * c_in + ci) * taps + k]
            } else {
                0.0
            }
        };
        let pairs = c_in.div_ceil(2);
        let data = match isa {
            Bf16Isa::Amx => {
                let chunks = pairs.div_ceil(amx::PAIRS_PER_TILE);
                let halves = c_out.div_ceil(amx::ROWS) * 2;
                let mut data = vec![0u32; halves * taps * chunks * amx::TILE_WORDS];
                for (i, word) in data.iter_mut().enumerate() {
                    let (p, m) = (i % 16, (i / 16) % 16);
                    let tile = i / amx::TILE_WORDS;
                    let (c, k, half) =
                        (tile % chunks, (tile / chunks) % taps, tile / chunks / taps);
                    let (co, ci) = (half * 16 + m, 2 * (c * 16 + p));
                    *word = pair(at(co, ci, k), at(co, ci + 1, k));
                }
                data
            }
            Bf16Isa::Avx512 | Bf16Isa::Portable => {
                let blocks = c_out.div_ceil(BLOCK_ROWS);
                let mut data = vec![0u32; blocks * pairs * taps * BLOCK_ROWS];
                for (i, word) in data.iter_mut().enumerate() {
                    let r = i % BLOCK_ROWS;
                    let k = (i / BLOCK_ROWS) % taps;
                    let p = (i / BLOCK_ROWS / taps) % pairs;
                    let block = i / BLOCK_ROWS / taps / pairs;
                    let co = block * BLOCK_ROWS + r;
                    *word = pair(at(co, 2 * p, k), at(co, 2 * p + 1, k));
                }
                data
            }
        };
        Self {
            data: Aligned::copy(&data),
            c_out,
            c_in,
            taps,
            isa,
        }
    }

    pub fn has_shape(&self, c_out: usize, c_in: usize, taps: usize) -> bool {
        (self.c_out, self.c_in, self.taps) == (c_out, c_in, taps)
    }

    /// (rows, columns) of one output block.
    fn block_shape(&self) -> (usize, usize) {
        match self.isa {
            Bf16Isa::Amx => (amx::ROWS, amx::COLS),
            Bf16Isa::Avx512 => (BLOCK_ROWS, 32),
            Bf16Isa::Portable => (BLOCK_ROWS, 16),
        }
    }

    /// Rows of the packed input tile: the channel pairs, padded to whole tiles for AMX.
    fn pair_rows(&self) -> usize {
        let pairs = self.c_in.div_ceil(2);
        match self.isa {
            Bf16Isa::Amx => pairs.div_ceil(amx::PAIRS_PER_TILE) * amx::PAIRS_PER_TILE,
            _ => pairs,
        }
    }
}

/// `direct::conv1d_rows` for bf16 weights: the same definition, `out[co, j] = (out if
/// accumulate) + bias[co] + Σ residuals[co, j] + Σ_ci Σ_k w[co, ci, k] · map(x[ci, j + offset
/// + k·dilation])`, with weights and mapped inputs rounded to bf16.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv1d_rows(
    out: RowsMut<'_>,
    accumulate: bool,
    x: Rows<'_>,
    offset: isize,
    w: &Bf16Weights,
    bias: &[f32],
    dilation: usize,
    map: &SampleMap<'_>,
    residuals: &[Rows<'_>],
) {
    let (c_in, c_out, taps) = (w.c_in, w.c_out, w.taps);
    let (l_in, l_out) = (x.len, out.len);
    assert!(x.holds(c_in) && x.len <= x.stride);
    assert!(out.holds(c_out));
    assert_eq!(bias.len(), c_out);
    assert!(residuals
        .iter()
        .all(|r| r.holds(c_out) && r.len == l_out && r.len <= r.stride));
    assert!(map.mask.is_none_or(|m| m.len() >= l_in));
    assert!(taps > 0 && dilation > 0);
    if l_out == 0 || c_out == 0 {
        return;
    }
    let (rows, cols) = w.block_shape();
    let pair_rows = w.pair_rows();
    let pairs = c_in.div_ceil(2);
    let span = dilation * (taps - 1);
    let max_tile = ((TILE_WORDS / pair_rows).saturating_sub(span) / cols * cols).max(cols);
    // No wider than the output needs: strips call this for a few thousand columns at a time.
    let tile = max_tile.min(l_out.div_ceil(cols) * cols);
    let vector = avx512_bf16();
    if w.isa == Bf16Isa::Amx {
        assert!(amx::usable(), "weights packed for AMX on a CPU without it");
    }
    let blocks = c_out.div_ceil(rows);
    let chunks = pair_rows / amx::PAIRS_PER_TILE;
    let per_half = taps * chunks * amx::TILE_WORDS;
    assert!(residuals.len() <= MAX_RESIDUALS);
    let (out_len, out_stride) = (out.data.len(), out.stride);
    let out_ptr = SharedOut::new(out.data);
    // Each output column is computed from the input alone, so column ranges are independent:
    // with a spare core, some of them are computed there (each thread with its own scratch
    // and, for AMX, its own tile configuration).
    let columns = |range: Range<usize>| {
        // A part narrower than a tile packs only its own columns.
        let tile = tile.min(range.len().div_ceil(cols) * cols);
        let row_len = tile + span;
        let out_ptr = out_ptr.get();
        let tiles = (w.isa == Bf16Isa::Amx).then(|| {
            // SAFETY: AMX is usable, asserted above.
            unsafe { amx::Tiles::configure() }
        });
        SCRATCH.with_borrow_mut(|scratch| {
            let (packed, sums) = scratch.take(pair_rows * row_len, rows * cols);
            // Rows past the last pair (AMX padding) are never written below: zero them.
            packed[pairs * row_len..].fill(0);
            for t0 in range.clone().step_by(tile) {
                let width = tile.min(range.end - t0);
                let padded_width = width.div_ceil(cols) * cols;
                // Packed column j holds input column t0 + j + offset; outside the signal, zeros.
                let first = t0 as isize + offset;
                let j_lo = (-first).clamp(0, (padded_width + span) as isize) as usize;
                let j_hi = (l_in as isize - first)
                    .clamp(j_lo as isize, (padded_width + span) as isize)
                    as usize;
                let i_lo = (first + j_lo as isize) as usize;
                let i_hi = i_lo + (j_hi - j_lo);
                for (p, row) in packed.chunks_exact_mut(row_len).take(pairs).enumerate() {
                    let row = &mut row[..padded_width + span];
                    row[..j_lo].fill(0);
                    row[j_hi..].fill(0);
                    let lo = &x.data[2 * p * x.stride..][i_lo..i_hi];
                    let hi =
                        (2 * p + 1 < c_in).then(|| &x.data[(2 * p + 1) * x.stride..][i_lo..i_hi]);
                    pack_pairs(&mut row[j_lo..j_hi], lo, hi, map, i_lo, 2 * p, vector);
                }
                for j0 in (0..width).step_by(cols) {
                    let n_cols = cols.min(width - j0);
                    let xs = &packed[j0..];
                    for block in 0..blocks {
                        let co0 = block * rows;
                        let n_rows = rows.min(c_out - co0);
                        match &tiles {
                            Some(tiles) => {
                                let w0 = &w.data[2 * block * per_half..][..2 * per_half];
                                assert!(xs.len() >= (pair_rows - 1) * row_len + cols + span);
                                assert!(sums.len() >= amx::ROWS * amx::COLS);
                                // SAFETY: `w0` holds both halves' taps · chunks tiles, `xs` the
                                // tile rows and columns the block reads (asserted), `sums`
                                // ROWS × COLS values.
                                unsafe {
                                    tiles.block(
                                        w0.as_ptr(),
                                        w0[per_half..].as_ptr(),
                                        xs.as_ptr(),
                                        row_len,
                                        chunks,
                                        taps,
                                        dilation,
                                        sums.as_mut_ptr(),
                                    )
                                };
                            }
                            None => {
                                let per_block = pairs * taps * BLOCK_ROWS;
                                let args = BlockArgs {
                                    weights: &w.data[block * per_block..][..per_block],
                                    x: xs,
                                    x_stride: row_len,
                                    pairs,
                                    taps,
                                    dilation,
                                };
                                run_block(w.isa, &args, sums);
                            }
                        }
                        let at = |stride: usize| co0 * stride + t0 + j0;
                        let mut res = [(std::ptr::null(), 0); MAX_RESIDUALS];
                        for (dst, r) in res.iter_mut().zip(residuals) {
                            let start = at(r.stride);
                            assert!(start + (n_rows - 1) * r.stride + n_cols <= r.data.len());
                            *dst = (r.data[start..].as_ptr(), r.stride);
                        }
                        let start = at(out_stride);
                        assert!(start + (n_rows - 1) * out_stride + n_cols <= out_len);
                        let block = Epilogue {
                            // SAFETY: in bounds (asserted above).
                            out: unsafe { out_ptr.add(start) },
                            out_stride,
                            residuals: &res[..residuals.len()],
                            bias: &bias[co0..co0 + n_rows],
                            sums: &sums[..n_rows * cols],
                            sums_stride: cols,
                            n_cols,
                            accumulate,
                        };
                        // SAFETY: the output and residual rows are in bounds (asserted above), and
                        // the parts write disjoint columns of `out`, which nothing else reads;
                        // with `accumulate` the caller initialized every output value; `vector`
                        // is `avx512_bf16()`.
                        unsafe { block.run(vector) };
                    }
                }
            }
        });
        drop(tiles);
    };
    let work = c_out * c_in * taps * l_out;
    spare::in_parts(l_out, cols, work, columns);
}

/// Most residual signals one convolution adds (the decoder adds the step input and a running
/// sum).
const MAX_RESIDUALS: usize = 2;

/// The packed input tile and a block's sums, kept per thread: strips call the kernel
/// hundreds of times per utterance, and allocating (and zeroing) a fresh tile each time cost
/// more than the AMX products of a narrow layer.
struct Scratch {
    packed: Aligned<u32>,
    sums: Aligned<f32>,
}

impl Scratch {
    /// Buffers of at least these lengths; their contents are whatever the last call left.
    fn take(&mut self, packed: usize, sums: usize) -> (&mut [u32], &mut [f32]) {
        if self.packed.len() < packed {
            self.packed = Aligned::zeroed(packed);
        }
        if self.sums.len() < sums {
            self.sums = Aligned::zeroed(sums);
        }
        // A block writes every sum it is read for; in debug builds (tests) a block that missed
        // one would otherwise pass on the last call's value unnoticed.
        #[cfg(debug_assertions)]
        self.sums[..sums].fill(f32::NAN);
        (&mut self.packed[..packed], &mut self.sums[..sums])
    }
}

thread_local! {
    /// Two input rows with a channel map applied ([`pack_pairs`]).
    static MAPPED: std::cell::RefCell<Aligned<f32>> = const { std::cell::RefCell::new(Aligned::new()) };
    static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch { packed: Aligned::new(), sums: Aligned::new() })
    };
}

/// The end of a block, `out[r, j] = (out[r, j] if accumulate) + bias[r] + Σ residuals[r, j] +
/// sums[r, j]` for `r < bias.len()`, `j < n_cols`, in `f32`.
pub(super) struct Epilogue<'a> {
    pub out: *mut f32,
    pub out_stride: usize,
    /// (first value, row stride) of each residual.
    pub residuals: &'a [(*const f32, usize)],
    pub bias: &'a [f32],
    pub sums: &'a [f32],
    pub sums_stride: usize,
    pub n_cols: usize,
    pub accumulate: bool,
}

impl Epilogue<'_> {
    /// # Safety
    /// `out` must be valid for writes, and each residual for reads, of `bias.len()` rows of
    /// `n_cols` values (`out_stride` or the residual's stride apart); `out`'s rows must
    /// overlap neither the residuals nor `sums`, and must be initialized when `accumulate`.
    /// `vector` only where AVX-512F exists.
    pub(super) unsafe fn run(&self, vector: bool) {
        assert!(self.n_cols <= self.sums_stride);
        assert!(self.sums.len() >= self.bias.len() * self.sums_stride);
        #[cfg(target_arch = "x86_64")]
        if vector {
            // SAFETY: `vector` means AVX-512F (the caller's promise), the pointers are valid as
            // the caller promised, and the two sums bounds `x86::epilogue` relies on are
            // asserted above.
            return unsafe { x86::epilogue(self) };
        }
        let _ = vector;
        // SAFETY: r < bias.len() and j < n_cols, so every read and write lies in the rows the
        // caller made valid, and `out` is read only when `accumulate`, when it is initialized.
        unsafe {
            for (r, &b) in self.bias.iter().enumerate() {
                let out = self.out.add(r * self.out_stride);
                let sums = &self.sums[r * self.sums_stride..];
                for (j, &s) in sums[..self.n_cols].iter().enumerate() {
                    let mut v = b + s;
                    for &(p, stride) in self.residuals {
                        v += *p.add(r * stride + j);
                    }
                    if self.accumulate {
                        v += *out.add(j);
                    }
                    *out.add(j) = v;
                }
            }
        }
    }
}

/// `dst[j] = pair(map(lo[j]), map(hi[j]))` for the samples starting at input column `i0`
/// (`hi` absent: zero), `lo` being channel `ci` and `hi` channel `ci + 1`.
#[allow(clippy::too_many_arguments)]
fn pack_pairs(
    dst: &mut [u32],
    lo: &[f32],
    hi: Option<&[f32]>,
    map: &SampleMap<'_>,
    i0: usize,
    ci: usize,
    vector: bool,
) {
    assert_eq!(dst.len(), lo.len());
    assert!(hi.is_none_or(|h| h.len() == lo.len()));
    assert!(map.mask.is_none_or(|m| m.len() >= i0 + lo.len()));
    if map.channels.is_some() {
        // The channels' `Snake(AdaIN(·))` into rows of this thread's own, then packed as
        // they are.
        return MAPPED.with_borrow_mut(|mapped| {
            let (mapped_lo, mapped_hi) = mapped.at_least(2 * lo.len()).split_at_mut(lo.len());
            fast_math::apply_sample_map(map, mapped_lo, lo, i0, ci);
            let hi = hi.map(|hi| {
                fast_math::apply_sample_map(map, mapped_hi, hi, i0, ci + 1);
                &*mapped_hi
            });
            pack_pairs(dst, mapped_lo, hi, &SampleMap::IDENTITY, 0, ci, vector);
        });
    }
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: `vector` is true only where `avx512_bf16()` holds (its two
        // callers pass exactly that), which is every feature `x86::pack_pairs` enables; the
        // lengths it relies on are asserted above.
        let done = unsafe { x86::pack_pairs(dst, lo, hi, map, i0) };
        return pack_pairs_scalar(
            &mut dst[done..],
            &lo[done..],
            hi.map(|h| &h[done..]),
            map,
            i0 + done,
        );
    }
    let _ = vector;
    pack_pairs_scalar(dst, lo, hi, map, i0)
}

fn pack_pairs_scalar(
    dst: &mut [u32],
    lo: &[f32],
    hi: Option<&[f32]>,
    map: &SampleMap<'_>,
    i0: usize,
) {
    let f = |v: f32, t: usize| -> f32 {
        let v = v * map.scale;
        let v = match map.leaky_slope {
            Some(s) => v.max(v * s),
            None => v,
        };
        match map.mask {
            Some(m) => v * m[t],
            None => v,
        }
    };
    for (j, d) in dst.iter_mut().enumerate() {
        let t = i0 + j;
        let h = hi.map_or(0.0, |h| f(h[j], t));
        *d = pair(f(lo[j], t), h);
    }
}

/// One AVX-512 or portable block's inputs: `weights` holds pairs·taps·8 words, `x` is read at
/// `p·x_stride + k·dilation + 0..cols`.
pub(super) struct BlockArgs<'a> {
    pub weights: &'a [u32],
    pub x: &'a [u32],
    pub x_stride: usize,
    pub pairs: usize,
    pub taps: usize,
    pub dilation: usize,
}

/// `sums[r·cols + j] = Σ_p Σ_k w[p][k][r] · x[p, k·dilation + j]` over bf16 pairs.
pub(super) fn run_block(isa: Bf16Isa, a: &BlockArgs, sums: &mut [f32]) {
    let cols = sums.len() / BLOCK_ROWS;
    assert!(a.pairs > 0 && a.taps > 0);
    assert!(a.weights.len() >= a.pairs * a.taps * BLOCK_ROWS);
    assert!(a.x.len() >= (a.pairs - 1) * a.x_stride + (a.taps - 1) * a.dilation + cols);
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512 bf16 (that is how this ISA was chosen); bounds asserted.
        Bf16Isa::Avx512 => unsafe { x86::block::<BLOCK_ROWS, 2>(a, sums.as_mut_ptr()) },
        _ => portable_block(a, sums),
    }
}

/// The block in plain Rust: both products of a pair added to the `f32` sum.
fn portable_block(a: &BlockArgs, sums: &mut [f32]) {
    let cols = sums.len() / BLOCK_ROWS;
    sums.fill(0.0);
    let halves = |v: u32| (from_bf16(v as u16), from_bf16((v >> 16) as u16));
    let mut w = a.weights.chunks_exact(BLOCK_ROWS);
    for p in 0..a.pairs {
        for k in 0..a.taps {
            let wk = w.next().expect("weights hold pairs · taps blocks");
            let xs = &a.x[p * a.x_stride + k * a.dilation..][..cols];
            for (sums_r, &wr) in sums.chunks_exact_mut(cols).zip(wk) {
                let (w_lo, w_hi) = halves(wr);
                for (s, &xv) in sums_r.iter_mut().zip(xs) {
                    let (x_lo, x_hi) = halves(xv);
                    *s += w_lo * x_lo + w_hi * x_hi;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{BlockArgs, Epilogue};
    use crate::kernels::rows::SampleMap;
    use std::arch::x86_64::*;

    /// The vector part of [`super::pack_pairs`]: whole groups of 16 columns; returns how many
    /// columns it packed.
    ///
    /// # Safety
    /// The CPU must have AVX-512F, BW and BF16 ([`super::avx512_bf16`]).
    /// `lo` and `hi` (when given) must hold at least `dst.len()` values, and `map.mask` (when
    /// given) at least `i0 + dst.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn pack_pairs(
        dst: &mut [u32],
        lo: &[f32],
        hi: Option<&[f32]>,
        map: &SampleMap<'_>,
        i0: usize,
    ) -> usize {
        // Word 2i takes bf16 i (from `lo`), word 2i + 1 takes bf16 16 + i (from `hi`).
        let interleave = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20,
            4, 19, 3, 18, 2, 17, 1, 16, 0,
        );
        let scale = _mm512_set1_ps(map.scale);
        let n = dst.len() / 16 * 16;
        let f = |v: __m512, j: usize| -> __m512 {
            let v = _mm512_mul_ps(v, scale);
            let v = match map.leaky_slope {
                Some(s) => _mm512_max_ps(v, _mm512_mul_ps(v, _mm512_set1_ps(s))),
                None => v,
            };
            match map.mask {
                Some(m) => {
                    // SAFETY: j + 16 ≤ n ≤ dst.len(), and the mask holds i0 + dst.len() values
                    // (the caller's promise).
                    let m = unsafe { _mm512_loadu_ps(m.as_ptr().add(i0 + j)) };
                    _mm512_mul_ps(v, m)
                }
                None => v,
            }
        };
        for j in (0..n).step_by(16) {
            // SAFETY: j + 16 ≤ n ≤ dst.len(), and `lo` and `hi` hold dst.len() values (the
            // caller's promise), so the loads and the store stay in bounds; the transmute
            // reinterprets 64 bytes of bf16 pairs as 64 bytes of integers, any bits valid.
            unsafe {
                let a = f(_mm512_loadu_ps(lo.as_ptr().add(j)), j);
                let b = match hi {
                    Some(h) => f(_mm512_loadu_ps(h.as_ptr().add(j)), j),
                    None => _mm512_setzero_ps(),
                };
                let halves: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(b, a));
                let words = _mm512_permutexvar_epi16(interleave, halves);
                _mm512_storeu_si512(dst.as_mut_ptr().add(j).cast(), words);
            }
        }
        n
    }

    /// [`super::Epilogue::run`] in 16-column vectors, the last of each row masked.
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `e` must meet [`super::Epilogue::run`]'s contract, and
    /// `e.n_cols ≤ e.sums_stride`, `e.sums.len() ≥ e.bias.len() · e.sums_stride` (which `run`
    /// asserts).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn epilogue(e: &Epilogue) {
        let n = e.n_cols;
        // SAFETY: r < bias.len() and every lane read or written is at a column j + i < n_cols
        // (the mask clears the rest, and masked-off lanes are never accessed, so they cannot
        // fault), inside the rows the caller made valid and inside `sums` (bounds above);
        // `out` is read only when `accumulate`, when it is initialized.
        unsafe {
            for (r, &bias) in e.bias.iter().enumerate() {
                let b = _mm512_set1_ps(bias);
                let out = e.out.add(r * e.out_stride);
                let sums = e.sums.as_ptr().add(r * e.sums_stride);
                for j in (0..n).step_by(16) {
                    let mask: __mmask16 = if n - j >= 16 {
                        0xFFFF
                    } else {
                        (1u16 << (n - j)) - 1
                    };
                    let mut v = _mm512_add_ps(b, _mm512_maskz_loadu_ps(mask, sums.add(j)));
                    for &(p, stride) in e.residuals {
                        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, p.add(r * stride + j)));
                    }
                    if e.accumulate {
                        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, out.add(j)));
                    }
                    _mm512_mask_storeu_ps(out.add(j), mask, v);
                }
            }
        }
    }

    /// `R` rows × `V` vectors of 16 columns, `vdpbf16ps` per pair and tap.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and BF16. `a.weights` must hold at least
    /// `a.pairs · a.taps · R` words and `a.x` at least `(a.pairs − 1)·a.x_stride +
    /// (a.taps − 1)·a.dilation + 16·V` (as `super::run_block` asserts); `sums` must be valid
    /// for writes of `R · 16·V` values.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn block<const R: usize, const V: usize>(a: &BlockArgs, sums: *mut f32) {
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        let mut wp = a.weights.as_ptr();
        let x = a.x.as_ptr();
        // SAFETY: for p < pairs and k < taps the loads read columns k·dilation..+16·V of pair
        // row p, and the weight reads the p·taps + k'th group of R words: inside `a.x` and
        // `a.weights` by the caller's bounds. The transmutes reinterpret 64 bytes of integers
        // as 64 bytes of bf16 pairs, any bits valid.
        unsafe {
            for p in 0..a.pairs {
                let row = x.add(p * a.x_stride);
                for k in 0..a.taps {
                    let xs = row.add(k * a.dilation);
                    let xv: [__m512bh; V] = std::array::from_fn(|v| {
                        std::mem::transmute(_mm512_loadu_si512(xs.add(16 * v).cast()))
                    });
                    for (r, acc_r) in acc.iter_mut().enumerate() {
                        let w: __m512bh = std::mem::transmute(_mm512_set1_epi32(*wp.add(r) as i32));
                        for v in 0..V {
                            acc_r[v] = _mm512_dpbf16_ps(acc_r[v], w, xv[v]);
                        }
                    }
                    wp = wp.add(R);
                }
            }
        }
        // SAFETY: r < R and v < V, so each store lies in the R · 16·V values the caller made
        // writable.
        unsafe {
            for (r, acc_r) in acc.iter().enumerate() {
                for (v, &s) in acc_r.iter().enumerate() {
                    _mm512_storeu_ps(sums.add(r * 16 * V + 16 * v), s);
                }
            }
        }
    }
}

/// Every block kind this CPU runs, for tests.
#[cfg(test)]
pub(super) fn isas_for_tests() -> Vec<Bf16Isa> {
    let mut isas = vec![Bf16Isa::Portable];
    if avx512_bf16() {
        isas.push(Bf16Isa::Avx512);
    }
    if amx::usable() {
        isas.push(Bf16Isa::Amx);
    }
    isas
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3F80);
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3F80);
        // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: ties go up to even.
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3F82);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        for v in [0.1f32, -3.7, 1e-3, 123.456] {
            let r = from_bf16(to_bf16(v));
            assert!(((r - v) / v).abs() <= 1.0 / 256.0, "{v} → {r}");
        }
    }

    /// The vector packing gives the same words as the scalar one, with every map.
    #[test]
    fn vector_packing_matches_scalar() {
        if !avx512_bf16() {
            return;
        }
        let n = 77;
        let lo: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let hi: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos() - 0.5).collect();
        let mask: Vec<f32> = (0..n + 5).map(|t| (t % 7 != 0) as u8 as f32).collect();
        let maps = [
            SampleMap::IDENTITY,
            SampleMap {
                scale: 1.0 / 3.0,
                leaky_slope: Some(0.1),
                mask: Some(&mask),
                channels: None,
            },
        ];
        for map in &maps {
            for hi in [Some(&hi[..]), None] {
                let mut vector = vec![0u32; n];
                let mut scalar = vec![0u32; n];
                pack_pairs(&mut vector, &lo, hi, map, 5, 0, true);
                pack_pairs(&mut scalar, &lo, hi, map, 5, 0, false);
                assert_eq!(vector, scalar);
            }
        }
    }
}
