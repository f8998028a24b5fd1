//! The direct convolution in int8: 8-bit weights and activations, `i32` sums, on AMX-INT8
//! tiles, AVX-512 VNNI, AVX-VNNI, AVX2 (`vpmaddubsw`) or portable code.
//!
//! int8 exists because the model people actually run as Kokoro, kokoro-onnx's int8 file, is
//! itself int8 with dynamic activations: its quality, not our own `f32`, is the bar a reduced
//! precision has to meet (docs/performance.md §11a), and 8-bit products are the fastest the
//! CPUs have (AMX-INT8 does twice bf16's multiply-adds per instruction, VNNI four times
//! `f32`'s). Whether `auto` picks it is decided by that gate, per model, in [`super::precision`].
//!
//! Scheme: weights per output channel scaled to ±127 (`s_w[co] = max |w[co]| / 127`); each
//! input tile, after the input map, scaled as a whole to ±127 (`s_x = max |x| / 127`, a
//! dynamic per-tile scale) and offset by 128, because `vpdpbusd` and `tdpbsud` multiply
//! unsigned by signed bytes. A block sums 4 input channels per instruction in `i32`; the
//! epilogue removes the offset (`128 · Σ w_q[co]`), rescales by `s_w[co] · s_x` and adds bias
//! and residuals in `f32`. The sums are exact integers, so every block kind computes the same
//! ones: the instruction set changes the speed, never the audio (up to the epilogue's `f32`
//! rounding).

use std::ops::Range;
use std::sync::OnceLock;

use super::aligned::Aligned;
use super::amx;
use super::fast_math;
use super::isa::{self, Level};
use super::rows::{Rows, RowsMut, SampleMap};
use crate::spare::{self, SharedOut};

#[cfg(target_arch = "x86_64")]
mod x86;

/// Floats of mapped input tile.
const TILE_FLOATS: usize = 64 * 1024;
/// Output channels of one block (AVX and portable; AMX blocks have [`amx::ROWS`]).
const ROWS: usize = 8;
/// Output columns of one block, every kind.
const COLS: usize = 32;
/// The most residuals a layer adds in the epilogue.
const MAX_RESIDUALS: usize = 2;

/// The int8 block kinds, fastest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Int8Isa {
    /// AMX-INT8 tiles (`tdpbsud`), 32 × 32 outputs per call.
    Amx,
    /// AVX-512 VNNI (`vpdpbusd` on 512 bits).
    Avx512Vnni,
    /// AVX-VNNI (`vpdpbusd` on 256 bits, VEX-encoded): CPUs with VNNI but no AVX-512.
    AvxVnni,
    /// Plain AVX2: `vpmaddubsw` on |w| and the input with w's sign, then `vpmaddwd`.
    Avx2,
    Portable,
}

impl Int8Isa {
    pub(super) const ALL: [Int8Isa; 5] = [
        Int8Isa::Amx,
        Int8Isa::Avx512Vnni,
        Int8Isa::AvxVnni,
        Int8Isa::Avx2,
        Int8Isa::Portable,
    ];

    /// Whether this CPU has it and the instruction-set cap ([`super::isa`]) allows it.
    pub(super) fn available(self) -> bool {
        match self {
            Int8Isa::Amx => amx::usable_int8(),
            Int8Isa::Avx512Vnni => isa::avx512_vnni(),
            Int8Isa::AvxVnni => isa::avx_vnni(),
            Int8Isa::Avx2 => isa::avx2_fma(),
            Int8Isa::Portable => true,
        }
    }

    pub(super) fn level(self) -> Level {
        match self {
            Int8Isa::Amx => Level::Amx,
            Int8Isa::Avx512Vnni => Level::Avx512,
            Int8Isa::AvxVnni | Int8Isa::Avx2 => Level::Avx2,
            Int8Isa::Portable => Level::Portable,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Int8Isa::Amx => "AMX",
            Int8Isa::Avx512Vnni => "AVX-512 VNNI",
            Int8Isa::AvxVnni => "AVX-VNNI",
            Int8Isa::Avx2 => "AVX2",
            Int8Isa::Portable => "portable",
        }
    }

    /// Output rows of one block.
    fn rows(self) -> usize {
        match self {
            Int8Isa::Amx => amx::ROWS,
            _ => ROWS,
        }
    }

    /// Whether the block's sums include the inputs' +128 offset (all but AVX2's, which
    /// multiplies the signed inputs).
    fn sums_offset_inputs(self) -> bool {
        self != Int8Isa::Avx2
    }
}

/// The best int8 block this CPU (and OS) supports under the instruction-set cap, decided once.
pub(super) fn int8_isa() -> Int8Isa {
    static ISA: OnceLock<Int8Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        Int8Isa::ALL
            .into_iter()
            .find(|isa| isa.available())
            .unwrap_or(Int8Isa::Portable)
    })
}

/// Whether int8 has a vector block on this CPU (without one it is slower than `f32`).
pub(super) fn has_hardware() -> bool {
    int8_isa() != Int8Isa::Portable
}

/// Whether a layer with `c_out` output channels is worth int8: below one block of rows most of
/// a block's work would be padding.
pub(super) fn worth_it(c_out: usize, isa: Int8Isa) -> bool {
    c_out >= isa.rows() / 2
}

/// Weights [C_out, C_in, K] quantized per output channel, each `u32` four signed bytes of
/// consecutive input channels, laid out for one block kind:
/// - AVX and portable: [C_out / 8][quads][K][8];
/// - AMX: [C_out / 16][K][chunks][16 rows][16 quads], one 1 KiB tile per (half block, tap,
///   chunk of 16 quads), C_out padded to whole 32-row blocks and quads to whole chunks.
pub(super) struct Int8Weights {
    data: Vec<u32>,
    /// Per output channel (padded to whole blocks): the scale, and 128 · Σ w_q.
    scales: Vec<f32>,
    offsets: Vec<i32>,
    c_out: usize,
    c_in: usize,
    taps: usize,
    isa: Int8Isa,
}

impl std::fmt::Debug for Int8Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Int8Weights")
            .field("c_out", &self.c_out)
            .field("c_in", &self.c_in)
            .field("taps", &self.taps)
            .field("isa", &self.isa)
            .finish_non_exhaustive()
    }
}

impl Int8Weights {
    /// `w` is row-major [c_out, c_in, taps].
    pub fn new(w: &[f32], c_out: usize, c_in: usize, taps: usize, isa: Int8Isa) -> Self {
        assert_eq!(w.len(), c_out * c_in * taps);
        let padded_rows = c_out.div_ceil(isa.rows()) * isa.rows();
        let mut scales = vec![0f32; padded_rows];
        let mut offsets = vec![0i32; padded_rows];
        let mut q = vec![0i8; c_out * c_in * taps];
        for co in 0..c_out {
            let row = &w[co * c_in * taps..(co + 1) * c_in * taps];
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            scales[co] = scale;
            for (dst, v) in q[co * c_in * taps..].iter_mut().zip(row) {
                *dst = (v / scale).round().clamp(-127.0, 127.0) as i8;
                offsets[co] += 128 * *dst as i32;
            }
        }
        let byte = |co: usize, ci: usize, k: usize| -> u8 {
            if co < c_out && ci < c_in {
                q[(co * c_in + ci) * taps + k] as u8
            } else {
                0
            }
        };
        let quad = |co: usize, g: usize, k: usize| -> u32 {
            u32::from_le_bytes(std::array::from_fn(|e| byte(co, 4 * g + e, k)))
        };
        let quads = c_in.div_ceil(4);
        let data = match isa {
            Int8Isa::Amx => {
                let chunks = quads.div_ceil(amx::PAIRS_PER_TILE);
                let halves = padded_rows / 16;
                let mut data = vec![0u32; halves * taps * chunks * amx::TILE_WORDS];
                for (i, word) in data.iter_mut().enumerate() {
                    let (p, m) = (i % 16, (i / 16) % 16);
                    let tile = i / amx::TILE_WORDS;
                    let (c, k, half) =
                        (tile % chunks, (tile / chunks) % taps, tile / chunks / taps);
                    *word = quad(half * 16 + m, c * 16 + p, k);
                }
                data
            }
            _ => {
                let mut data = vec![0u32; padded_rows * quads * taps];
                for (i, word) in data.iter_mut().enumerate() {
                    let r = i % ROWS;
                    let k = (i / ROWS) % taps;
                    let g = (i / ROWS / taps) % quads;
                    let block = i / ROWS / taps / quads;
                    *word = quad(block * ROWS + r, g, k);
                }
                data
            }
        };
        Self {
            data,
            scales,
            offsets,
            c_out,
            c_in,
            taps,
            isa,
        }
    }

    pub fn has_shape(&self, c_out: usize, c_in: usize, taps: usize) -> bool {
        (self.c_out, self.c_in, self.taps) == (c_out, c_in, taps)
    }

    /// Rows of the packed input tile: the quads, padded to whole tiles for AMX.
    fn quad_rows(&self) -> usize {
        let quads = self.c_in.div_ceil(4);
        match self.isa {
            Int8Isa::Amx => quads.div_ceil(amx::PAIRS_PER_TILE) * amx::PAIRS_PER_TILE,
            _ => quads,
        }
    }
}

/// `super::direct::conv1d_rows` for int8 weights (same definition, quantized operands).
#[allow(clippy::too_many_arguments)]
pub(super) fn conv1d_rows(
    out: RowsMut<'_>,
    accumulate: bool,
    x: Rows<'_>,
    offset: isize,
    w: &Int8Weights,
    bias: &[f32],
    dilation: usize,
    map: &SampleMap<'_>,
    residuals: &[Rows<'_>],
) {
    let (c_in, c_out, taps) = (w.c_in, w.c_out, w.taps);
    let (l_in, l_out) = (x.len, out.len);
    assert!(x.holds(c_in) && out.holds(c_out) && bias.len() == c_out);
    assert!(residuals.iter().all(|r| r.holds(c_out) && r.len == l_out));
    assert!(residuals.len() <= MAX_RESIDUALS);
    assert!(map.mask.is_none_or(|m| m.len() >= l_in));
    assert!(taps > 0 && dilation > 0);
    assert!(
        w.isa.available(),
        "int8 weights packed for blocks this CPU lacks"
    );
    if l_out == 0 || c_out == 0 {
        return;
    }
    let quads = c_in.div_ceil(4);
    let quad_rows = w.quad_rows();
    let rows = w.isa.rows();
    let span = dilation * (taps - 1);
    let tile = ((TILE_FLOATS / c_in).saturating_sub(span) / COLS * COLS)
        .max(COLS)
        .min(l_out.div_ceil(COLS) * COLS);
    let row_len = tile + span;
    let vector = avx512_vectors();
    let chunks = quad_rows / amx::PAIRS_PER_TILE;
    let per_half = taps * chunks * amx::TILE_WORDS;
    let (out_len, out_stride) = (out.data.len(), out.stride);
    let out_ptr = SharedOut::new(out.data);
    // Each tile of output columns is computed, scale included, from its own input columns:
    // with a spare core some tiles are computed there (parts cut at whole tiles, so every
    // tile and its scale are what one thread computes), each thread with its own scratch
    // and, for AMX, its own tile configuration.
    let columns = |range: Range<usize>| {
        let out_ptr = out_ptr.get();
        let tiles = (w.isa == Int8Isa::Amx).then(|| {
            // SAFETY: AMX-INT8 is usable: the weights' isa is available (asserted above).
            unsafe { amx::Tiles::configure() }
        });
        SCRATCH.with_borrow_mut(|scratch| {
            // Rows past the last quad (AMX padding) meet zero weights: any value is fine.
            let (mapped, packed, sums) =
                scratch.take(c_in * row_len, quad_rows * row_len, rows * COLS);
            for t0 in range.clone().step_by(tile) {
                let width = tile.min(range.end - t0);
                let n = width.div_ceil(COLS) * COLS + span;
                // The mapped tile in f32 (zeros outside the signal), then its scale.
                let first = t0 as isize + offset;
                let j_lo = (-first).clamp(0, n as isize) as usize;
                let j_hi = (l_in as isize - first).clamp(j_lo as isize, n as isize) as usize;
                let i_lo = (first + j_lo as isize) as usize;
                let mut max = 0f32;
                for ci in 0..c_in {
                    let row = &mut mapped[ci * row_len..][..n];
                    row[..j_lo].fill(0.0);
                    row[j_hi..].fill(0.0);
                    let src = &x.data[ci * x.stride + i_lo..][..j_hi - j_lo];
                    max = map_with_max(map, &mut row[j_lo..j_hi], src, i_lo, ci, max, vector);
                }
                let s_x = if max > 0.0 { max / 127.0 } else { 1.0 };
                for g in 0..quads {
                    let rows: [&[f32]; 4] = std::array::from_fn(|e| {
                        let ci = (4 * g + e).min(c_in - 1);
                        &mapped[ci * row_len..][..n]
                    });
                    // Channels past C_in (the last quad's padding) quantize as zero.
                    let live = (c_in - 4 * g).min(4);
                    quantize_quads(
                        &mut packed[g * row_len..][..n],
                        rows,
                        live,
                        1.0 / s_x,
                        vector,
                    );
                }
                for j0 in (0..width).step_by(COLS) {
                    let n_cols = COLS.min(width - j0);
                    let xs = &packed[j0..];
                    assert!(xs.len() >= (quad_rows - 1) * row_len + span + COLS);
                    for block in 0..c_out.div_ceil(rows) {
                        let co0 = block * rows;
                        let n_rows = rows.min(c_out - co0);
                        let at = |stride: usize| co0 * stride + t0 + j0;
                        // The block's last row and column lie inside each buffer.
                        let last = |stride: usize| at(stride) + (n_rows - 1) * stride + n_cols;
                        assert!(last(out_stride) <= out_len);
                        let mut res = [(std::ptr::null(), 0); MAX_RESIDUALS];
                        for (dst, r) in res.iter_mut().zip(residuals) {
                            assert!(last(r.stride) <= r.data.len());
                            *dst = (r.data[at(r.stride)..].as_ptr(), r.stride);
                        }
                        let end = BlockEnd {
                            // SAFETY: in bounds of the output (asserted above).
                            out: unsafe { out_ptr.add(at(out_stride)) },
                            out_stride,
                            residuals: &res[..residuals.len()],
                            offsets: w
                                .isa
                                .sums_offset_inputs()
                                .then(|| &w.offsets[co0..][..n_rows]),
                            scales: &w.scales[co0..][..n_rows],
                            s_x,
                            bias: &bias[co0..][..n_rows],
                            cols: n_cols,
                            accumulate,
                            vector,
                        };
                        match &tiles {
                            Some(tiles) => {
                                let w0 = &w.data[2 * block * per_half..][..2 * per_half];
                                // SAFETY: `w0` holds both halves' taps · chunks tiles, `xs` the
                                // quad rows and columns the block reads (asserted above), `sums`
                                // ROWS × COLS values.
                                unsafe {
                                    tiles.block_int8(
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
                                // SAFETY: the block's rows and columns lie in this part's
                                // columns of the output's exclusive borrow (asserted above),
                                // apart from `sums` and the residuals; with `accumulate` the
                                // caller initialized them.
                                unsafe { end.write(sums) };
                            }
                            None => {
                                let per_block = quads * taps * ROWS;
                                let args = BlockArgs {
                                    weights: &w.data[block * per_block..][..per_block],
                                    x: xs,
                                    x_stride: row_len,
                                    quads,
                                    taps,
                                    dilation,
                                };
                                let sums = (&mut sums[..]).try_into().unwrap();
                                // SAFETY: as for the AMX block's `end.write` above.
                                unsafe { run_block(w.isa, &args, sums, &end) };
                            }
                        }
                    }
                }
            }
        })
    };
    let work = c_out * c_in * taps * l_out;
    spare::in_parts(l_out, tile, work, columns);
}

/// Whether the input packing and the epilogue may use AVX-512 (F and BW), whichever block
/// kind sums.
pub(super) fn avx512_vectors() -> bool {
    isa::avx512_bw()
}

/// One block's operands: the weights of its rows, and the packed input at its first column,
/// quad rows `x_stride` words apart.
struct BlockArgs<'a> {
    weights: &'a [u32],
    x: &'a [u32],
    x_stride: usize,
    quads: usize,
    taps: usize,
    dilation: usize,
}

/// One block through the vector block of `isa`, its outputs written by `end`: from the
/// accumulators for AVX-512 VNNI, from `sums[r·COLS + j]` for the others.
///
/// # Safety
/// `end` must meet [`BlockEnd::write`]'s contract.
unsafe fn run_block(isa: Int8Isa, a: &BlockArgs, sums: &mut [i32; ROWS * COLS], end: &BlockEnd) {
    assert!(a.weights.len() >= a.quads * a.taps * ROWS);
    assert!(a.x.len() >= (a.quads - 1) * a.x_stride + (a.taps - 1) * a.dilation + COLS);
    assert!(end.rows() <= ROWS && end.cols <= COLS);
    #[cfg(target_arch = "x86_64")]
    let (w, x, stride, quads, taps, d) = (a.weights, a.x, a.x_stride, a.quads, a.taps, a.dilation);
    // Each block's instruction set is `available()` (the caller's weights were packed for an
    // available one, asserted in `conv1d_rows`); the operand bounds each block relies on are
    // asserted above.
    match isa {
        #[cfg(target_arch = "x86_64")]
        Int8Isa::Avx512Vnni => {
            // SAFETY: AVX-512 VNNI is available and the bounds hold (see above); `end` meets
            // `write`'s contract (the caller's promise).
            return unsafe { x86::block_avx512_vnni(w, x, stride, quads, taps, d, end) };
        }
        // SAFETY: AVX-VNNI is available and the bounds hold (see above).
        #[cfg(target_arch = "x86_64")]
        Int8Isa::AvxVnni => unsafe { x86::block_avx_vnni(w, x, stride, quads, taps, d, sums) },
        // SAFETY: AVX2 is available and the bounds hold (see above).
        #[cfg(target_arch = "x86_64")]
        Int8Isa::Avx2 => unsafe { x86::block_avx2(w, x, stride, quads, taps, d, sums) },
        Int8Isa::Portable => portable_block(a, sums),
        _ => panic!("{isa:?} blocks go through their own path"),
    }
    // SAFETY: the caller's promise.
    unsafe { end.write(sums) };
}

/// The packed input tile, its `f32` rows before quantizing and a block's sums, kept per
/// thread: the generator calls the kernel hundreds of times per utterance, and allocating
/// (and zeroing) fresh buffers each time was 2 % of a synthesis.
struct Scratch {
    mapped: Aligned<f32>,
    packed: Aligned<u32>,
    sums: Aligned<i32>,
}

impl Scratch {
    /// Buffers of at least these lengths; their contents are whatever the last call left.
    fn take(
        &mut self,
        mapped: usize,
        packed: usize,
        sums: usize,
    ) -> (&mut [f32], &mut [u32], &mut [i32]) {
        (
            self.mapped.at_least(mapped),
            self.packed.at_least(packed),
            self.sums.at_least(sums),
        )
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch {
            mapped: Aligned::new(),
            packed: Aligned::new(),
            sums: Aligned::new(),
        })
    };
}

/// `dst = map(src)` for channel `ci`'s samples from `t0`; returns the larger of `max` and
/// max |dst|. Without a channel map in one pass.
#[allow(clippy::too_many_arguments)]
pub(super) fn map_with_max(
    map: &SampleMap<'_>,
    dst: &mut [f32],
    src: &[f32],
    t0: usize,
    ci: usize,
    max: f32,
    vector: bool,
) -> f32 {
    assert_eq!(dst.len(), src.len());
    assert!(map.mask.is_none_or(|m| m.len() >= t0 + src.len()));
    if map.channels.is_none() {
        return sample_map_with_max(map, dst, src, t0, max, vector);
    }
    fast_math::apply_sample_map(map, dst, src, t0, ci);
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: `vector` is `avx512_vectors()`: AVX-512F, all `x86::max_abs` enables.
        return unsafe { x86::max_abs(dst, max) };
    }
    dst.iter().fold(max, |m, v| m.max(v.abs()))
}

/// [`map_with_max`] without the channel map, in one pass.
fn sample_map_with_max(
    map: &SampleMap<'_>,
    dst: &mut [f32],
    src: &[f32],
    t0: usize,
    max: f32,
    vector: bool,
) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: `vector` is `avx512_vectors()` from the one caller: AVX-512F, all that
        // `x86::map_with_max` enables; the lengths are asserted by `map_with_max`.
        return unsafe { x86::map_with_max(map, dst, src, t0, max) };
    }
    let _ = vector;
    map.apply_slice(dst, src, t0);
    dst.iter().fold(max, |m, v| m.max(v.abs()))
}

/// `u32` quads of `rows[0..4][j]` quantized (`round(v · inv_scale) + 128`), rows from `live`
/// on as zero.
fn quantize_quads(dst: &mut [u32], rows: [&[f32]; 4], live: usize, inv_scale: f32, vector: bool) {
    assert!(rows.iter().all(|r| r.len() >= dst.len()));
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: `vector` is `avx512_vectors()` from the one caller: AVX-512F and BW, all
        // that `x86::quantize_quads` enables; the row lengths are asserted above.
        done = unsafe { x86::quantize_quads(dst, rows, live, inv_scale) };
    }
    let _ = vector;
    for j in done..dst.len() {
        let bytes: [u8; 4] = std::array::from_fn(|e| {
            let v = if e < live { rows[e][j] } else { 0.0 };
            ((v * inv_scale).round_ties_even().clamp(-127.0, 127.0) as i32 + 128) as u8
        });
        dst[j] = u32::from_le_bytes(bytes);
    }
}

/// Where a block's outputs go, and what turns its sums into them: `out[r][j] = (out[r][j]) +
/// bias[r] + Σ residuals[r][j] + (sums[r][j] − offsets[r]) · scales[r] · s_x`.
struct BlockEnd<'a> {
    /// The block's first output (row, column); rows `out_stride` values apart.
    out: *mut f32,
    out_stride: usize,
    /// (first value, row stride) of each residual, at the same row and column.
    residuals: &'a [(*const f32, usize)],
    /// `128 · Σ w_q` per row, where the sums include the inputs' offset.
    offsets: Option<&'a [i32]>,
    /// The weights' scales; one per live row.
    scales: &'a [f32],
    /// The input tile's scale.
    s_x: f32,
    bias: &'a [f32],
    cols: usize,
    accumulate: bool,
    /// Whether AVX-512F may write it (`avx512_vectors()`).
    vector: bool,
}

impl BlockEnd<'_> {
    /// Live rows of the block (the last block of a layer may have fewer than the block's).
    fn rows(&self) -> usize {
        self.scales.len()
    }

    fn offset(&self, r: usize) -> i32 {
        self.offsets.map_or(0, |o| o[r])
    }

    /// Writes the outputs from `sums[r·COLS + j]`.
    ///
    /// # Safety
    /// `out` and each residual must be valid for `rows()` rows of `cols` values at their
    /// strides (`out` for reads and writes, initialized when `accumulate`), and `out` overlap
    /// neither `sums` nor the residuals. `vector` only where AVX-512F exists.
    unsafe fn write(&self, sums: &[i32]) {
        assert!(sums.len() >= self.rows() * COLS && self.cols <= COLS);
        assert_eq!(self.bias.len(), self.rows());
        #[cfg(target_arch = "x86_64")]
        if self.vector {
            // SAFETY: `vector` means AVX-512F, and the buffers are valid (the caller's
            // promise); `sums` holds the rows read (asserted above).
            return unsafe { x86::block_end(self, sums) };
        }
        for r in 0..self.rows() {
            let scale = self.scales[r] * self.s_x;
            for (j, &s) in sums[r * COLS..][..self.cols].iter().enumerate() {
                let mut v = self.bias[r] + (s - self.offset(r)) as f32 * scale;
                // SAFETY: row r < rows() and column j < cols of each buffer, valid by the
                // caller's promise; `out` is read only when `accumulate`, when it is
                // initialized.
                unsafe {
                    for &(res, stride) in self.residuals {
                        v += res.add(r * stride + j).read();
                    }
                    let out = self.out.add(r * self.out_stride + j);
                    if self.accumulate {
                        v += out.read();
                    }
                    out.write(v);
                }
            }
        }
    }
}

/// `sums[r·COLS + j] = Σ_g Σ_k Σ_e w[g][k][r].e · x[g, k·dilation + j].e` over byte quads
/// (weights signed, inputs unsigned, as `vpdpbusd` reads them).
fn portable_block(a: &BlockArgs, sums: &mut [i32; ROWS * COLS]) {
    sums.fill(0);
    for g in 0..a.quads {
        for k in 0..a.taps {
            let xs = &a.x[g * a.x_stride + k * a.dilation..][..COLS];
            let wk = &a.weights[(g * a.taps + k) * ROWS..][..ROWS];
            for (r, &wr) in wk.iter().enumerate() {
                let wb = wr.to_le_bytes().map(|b| b as i8 as i32);
                for (s, &xv) in sums[r * COLS..(r + 1) * COLS].iter_mut().zip(xs) {
                    let xb = xv.to_le_bytes();
                    *s += (0..4).map(|e| xb[e] as i32 * wb[e]).sum::<i32>();
                }
            }
        }
    }
}
