//! One segment's attention for one key/value head on AMX tiles, in bf16: the two products
//! `q kᵀ` and `p v` with `f32` sums, the softmax between them in `f32`.
//!
//! A bf16 OmniVoice forward spent a fifth of its time in attention's `f32` products (`gemm`
//! at a few hundred positions and 128 dimensions: ≈ 45 G multiply-adds a second per core),
//! for 4 % of its multiply-adds. The official code in bf16 runs them in bf16 too (SDPA).
//!
//! Both products are [`Tiles::gemm_block`]s: the left operand as bf16 rows (the queries, then
//! the probabilities), the right one packed as the tiles' pair words. The keys' pair words are
//! a key's consecutive dimensions, so packing them is a transpose of 32-bit words; the values'
//! pair two consecutive keys' values of one dimension. Each key/value head is packed once per
//! segment and serves its group of query heads.

use super::aligned::Aligned;
use super::amx::{Tiles, TILE_WORDS};
use super::fast_math::softmax_in_place;
use super::rows::Strided;
use super::tile_gemm::round_row;

/// Rows and columns of one block of either product.
const BLOCK: usize = 32;
/// Values past a bf16 row's tiles: rows a power of two apart share L1's sets and halve a tile
/// load's rate (see [`super::tile_gemm`]).
const ROW_PAD: usize = 32;
/// Floats past an `f32` row's blocks, for the same reason.
const SUMS_PAD: usize = 16;

/// A key/value head of one segment packed as the two products' right operands.
pub(super) struct PackedKv {
    /// Per block of 32 keys: `d / 32` steps of two tiles (keys 0–15, 16–31).
    keys: Aligned<u32>,
    /// Per block of 32 dimensions: one step per 32 keys, two tiles (dimensions 0–15, 16–31).
    values: Aligned<u32>,
    len: usize,
    head_dim: usize,
    /// A row in bf16, the next one, and the two as pair words: packing's own rows, kept.
    row: Vec<u16>,
    next_row: Vec<u16>,
    words: Vec<u32>,
}

/// Whether heads of `head_dim` fit the tiles' steps.
pub(super) fn fits(head_dim: usize) -> bool {
    head_dim > 0 && head_dim.is_multiple_of(BLOCK)
}

impl PackedKv {
    /// Nothing packed yet.
    pub(super) const fn new() -> Self {
        Self {
            keys: Aligned::new(),
            values: Aligned::new(),
            len: 0,
            head_dim: 0,
            row: Vec::new(),
            next_row: Vec::new(),
            words: Vec::new(),
        }
    }

    /// Packs `len` positions' keys and values of one head (`head_dim` values each), in the
    /// buffers of what was packed before. The padding past `len` in the last block may hold
    /// an earlier head's finite values: scores against padding keys are never read, and
    /// padding values are weighed by probabilities of exactly 0.
    pub(super) fn pack(&mut self, k: Strided, v: Strided, len: usize, head_dim: usize) {
        assert!(fits(head_dim));
        let d = head_dim;
        let key_blocks = len.div_ceil(BLOCK);
        let (d_steps, d_blocks) = (d / BLOCK, d / BLOCK);
        self.len = len;
        self.head_dim = d;
        let keys = self.keys.at_least(key_blocks * d_steps * 2 * TILE_WORDS);
        let (half, second, joined) = (&mut self.row, &mut self.next_row, &mut self.words);
        half.resize(d, 0);
        second.resize(d, 0);
        joined.resize(d, 0);
        let word = |lo: u16, hi: u16| lo as u32 | (hi as u32) << 16;
        // Tile row q of step t holds dimensions t·32 + 2q and + 1 of the tile's 16 keys: a
        // key's pair words, transposed.
        for key in 0..len {
            let (block, lane) = (key / BLOCK, key % BLOCK);
            let (h, j) = (lane / 16, lane % 16);
            round_row(k.row(key, d), half);
            for (p, two) in half.chunks_exact(2).enumerate() {
                let (t, q) = (p / 16, p % 16);
                let tile = (block * d_steps + t) * 2 + h;
                keys[tile * TILE_WORDS + q * 16 + j] = word(two[0], two[1]);
            }
        }
        let values = self.values.at_least(d_blocks * key_blocks * 2 * TILE_WORDS);
        // Tile row q of step t holds keys t·32 + 2q and + 1 of the tile's 16 dimensions: two
        // keys' rows interleaved, 16 dimensions at a time.
        for key_pair in 0..len.div_ceil(2) {
            let (first, next) = (2 * key_pair, 2 * key_pair + 1);
            let (t, q) = (key_pair / 16, key_pair % 16);
            round_row(v.row(first, d), half);
            if next < len {
                round_row(v.row(next, d), second);
            } else {
                second.fill(0);
            }
            for ((w, &a), &b) in joined.iter_mut().zip(half.iter()).zip(second.iter()) {
                *w = word(a, b);
            }
            for (c, sixteen) in joined.chunks_exact(16).enumerate() {
                let (block, h) = (c / 2, c % 2);
                let tile = (block * key_blocks + t) * 2 + h;
                values[tile * TILE_WORDS + q * 16..][..16].copy_from_slice(sixteen);
            }
        }
    }
}

/// A thread's buffers for [`attend`], grown to the longest segment seen.
pub(super) struct Scratch {
    queries: Aligned<u16>,
    scores: Aligned<f32>,
    probabilities: Aligned<u16>,
    out: Aligned<f32>,
}

impl Scratch {
    pub(super) const fn new() -> Self {
        Self {
            queries: Aligned::new(),
            scores: Aligned::new(),
            probabilities: Aligned::new(),
            out: Aligned::new(),
        }
    }
}

/// `out[i] = softmax(q[i] · kᵀ · scale) · v` for the segment's `kv.len` query rows of one
/// head: `q`'s rows read, `out`'s written (`head_dim` values each).
///
/// # Safety
/// `out.0` must be valid for writes of `kv.len` rows of `head_dim` floats, `out.1` apart, that
/// no other thread touches meanwhile.
pub(super) unsafe fn attend(
    tiles: &Tiles,
    q: Strided,
    kv: &PackedKv,
    scale: f32,
    out: (*mut f32, usize),
    s: &mut Scratch,
) {
    let (len, d) = (kv.len, kv.head_dim);
    if len == 0 {
        return;
    }
    let blocks = len.div_ceil(BLOCK);
    let padded = blocks * BLOCK;
    let (q_stride, s_stride, p_stride, o_stride) = (
        d + ROW_PAD,
        padded + SUMS_PAD,
        padded + ROW_PAD,
        d + SUMS_PAD,
    );
    s.queries.at_least(padded * q_stride);
    s.scores.at_least(padded * s_stride);
    s.probabilities.at_least(padded * p_stride);
    s.out.at_least(BLOCK * o_stride);
    for i in 0..len {
        round_row(q.row(i, d), &mut s.queries[i * q_stride..][..d]);
    }
    let (d_steps, key_steps) = (d / BLOCK, blocks);
    for m in 0..blocks {
        for n in 0..blocks {
            // SAFETY: 32 query rows of `d` bf16 values `q_stride` apart from row m·32 (rows
            // past `len` hold zeros or an earlier head's finite values, whose scores are not
            // read); the keys' block n of `d_steps` steps; 32 rows of 32 sums from column n·32.
            unsafe {
                tiles.gemm_block(
                    s.queries[m * BLOCK * q_stride..].as_ptr(),
                    q_stride * 2,
                    kv.keys[n * d_steps * 2 * TILE_WORDS..].as_ptr(),
                    d_steps,
                    s.scores[m * BLOCK * s_stride + n * BLOCK..].as_mut_ptr(),
                    s_stride * 4,
                    false,
                )
            };
        }
    }
    for i in 0..len {
        let row = &mut s.scores[i * s_stride..][..len];
        row.iter_mut().for_each(|x| *x *= scale);
        softmax_in_place(row);
        let p = &mut s.probabilities[i * p_stride..][..padded];
        round_row(row, &mut p[..len]);
        // Keys past the segment's end weigh nothing.
        p[len..].fill(0);
    }
    for m in 0..blocks {
        let rows = BLOCK.min(len - m * BLOCK);
        for b in 0..d / BLOCK {
            // SAFETY: 32 probability rows of `padded` bf16 values `p_stride` apart from row
            // m·32; the values' block b of `key_steps` steps; 32 rows of 32 sums.
            unsafe {
                tiles.gemm_block(
                    s.probabilities[m * BLOCK * p_stride..].as_ptr(),
                    p_stride * 2,
                    kv.values[b * key_steps * 2 * TILE_WORDS..].as_ptr(),
                    key_steps,
                    s.out[b * BLOCK..].as_mut_ptr(),
                    o_stride * 4,
                    false,
                )
            };
        }
        for r in 0..rows {
            let src = &s.out[r * o_stride..][..d];
            // SAFETY: row m·32 + r < len of `out`, valid for writes of `d` floats (the caller's
            // promise); `s.out` is this thread's own.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), out.0.add((m * BLOCK + r) * out.1), d)
            };
        }
    }
}
