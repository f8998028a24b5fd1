//! The int8 blocks and the input packing in x86 vector code: AVX-512 VNNI, AVX-VNNI and AVX2.

use super::{BlockEnd, COLS, ROWS};
use crate::kernels::rows::SampleMap;
use std::arch::x86_64::*;

/// [`super::quantize_quads`] for whole groups of 16 columns; returns how many it packed.
///
/// # Safety
/// The CPU must have AVX-512F and BW; `rows[..live]` must each hold at least `dst.len()`
/// values (the rows from `live` on are not read).
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn quantize_quads(
    dst: &mut [u32],
    rows: [&[f32]; 4],
    live: usize,
    inv_scale: f32,
) -> usize {
    let n = dst.len() / 16 * 16;
    let s = _mm512_set1_ps(inv_scale);
    let offset = _mm512_set1_epi32(128);
    for j in (0..n).step_by(16) {
        // Each row's 16 values as bytes (round to nearest even, +128), then byte e of
        // word j from row e.
        let bytes: [__m128i; 4] = std::array::from_fn(|e| {
            let v = if e < live {
                // SAFETY: j + 16 ≤ n ≤ dst.len(), and row e < live holds dst.len() values
                // (the caller's promise).
                let v = unsafe { _mm512_loadu_ps(rows[e].as_ptr().add(j)) };
                _mm512_mul_ps(v, s)
            } else {
                _mm512_setzero_ps()
            };
            _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), offset))
        });
        let ab = [
            _mm_unpacklo_epi8(bytes[0], bytes[1]),
            _mm_unpackhi_epi8(bytes[0], bytes[1]),
        ];
        let cd = [
            _mm_unpacklo_epi8(bytes[2], bytes[3]),
            _mm_unpackhi_epi8(bytes[2], bytes[3]),
        ];
        // SAFETY: the four 16-byte stores write words j..j + 16 of `dst`, and
        // j + 16 ≤ n ≤ dst.len().
        unsafe {
            let out = dst.as_mut_ptr().add(j).cast::<__m128i>();
            _mm_storeu_si128(out, _mm_unpacklo_epi16(ab[0], cd[0]));
            _mm_storeu_si128(out.add(1), _mm_unpackhi_epi16(ab[0], cd[0]));
            _mm_storeu_si128(out.add(2), _mm_unpacklo_epi16(ab[1], cd[1]));
            _mm_storeu_si128(out.add(3), _mm_unpackhi_epi16(ab[1], cd[1]));
        }
    }
    n
}

/// [`super::map_with_max`] in 16-value vectors, the last one masked: the same operations in
/// the same order as [`SampleMap::apply_slice`], so the same values.
///
/// # Safety
/// The CPU must have AVX-512F; `dst` and `src` must have one length, and a mask hold at
/// least `t0 + src.len()` values (which the caller asserts).
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn map_with_max(
    map: &SampleMap<'_>,
    dst: &mut [f32],
    src: &[f32],
    t0: usize,
    max: f32,
) -> f32 {
    let n = dst.len();
    let scale = _mm512_set1_ps(map.scale);
    // max(v, v · 1) = v: no LeakyReLU is a slope of one.
    let slope = _mm512_set1_ps(map.leaky_slope.unwrap_or(1.0));
    let mask = map.mask.map(|m| m[t0..].as_ptr());
    let mut m = _mm512_set1_ps(max);
    // SAFETY: every lane read or written is at j + i < n: inside `dst`, `src` and the mask
    // (the caller's promise); masked-off lanes are never accessed, so they cannot fault.
    unsafe {
        for j in (0..n).step_by(16) {
            let k = lanes(n - j);
            let v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, src.as_ptr().add(j)), scale);
            let mut v = _mm512_max_ps(v, _mm512_mul_ps(v, slope));
            if let Some(mask) = mask {
                v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, mask.add(j)));
            }
            _mm512_mask_storeu_ps(dst.as_mut_ptr().add(j), k, v);
            m = _mm512_max_ps(m, _mm512_abs_ps(v));
        }
    }
    _mm512_reduce_max_ps(m)
}

/// The larger of `max` and max |v| over `values`.
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn max_abs(values: &[f32], max: f32) -> f32 {
    let mut m = _mm512_set1_ps(max);
    for j in (0..values.len()).step_by(16) {
        // SAFETY: the lanes of `k` lie inside `values`; masked-off lanes are never accessed.
        let v = unsafe { _mm512_maskz_loadu_ps(lanes(values.len() - j), values.as_ptr().add(j)) };
        m = _mm512_max_ps(m, _mm512_abs_ps(v));
    }
    _mm512_reduce_max_ps(m)
}

/// The lanes of a 16-value vector that hold the first `left` values.
#[target_feature(enable = "avx512f")]
fn lanes(left: usize) -> __mmask16 {
    if left >= 16 {
        0xFFFF
    } else {
        (1u16 << left) - 1
    }
}

/// [`super::BlockEnd::write`] in 16-column vectors.
///
/// # Safety
/// The CPU must have AVX-512F; `end` must meet [`super::BlockEnd::write`]'s contract, and
/// `sums` hold `end.rows()` rows of [`COLS`] (which `write` asserts).
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn block_end(end: &BlockEnd, sums: &[i32]) {
    for r in 0..end.rows() {
        // SAFETY: row r < rows() of `sums` holds COLS values.
        let row = unsafe {
            [
                _mm512_loadu_si512(sums.as_ptr().add(r * COLS).cast()),
                _mm512_loadu_si512(sums.as_ptr().add(r * COLS + 16).cast()),
            ]
        };
        // SAFETY: the caller's promise.
        unsafe { end_row(end, r, row) };
    }
}

/// Row `r` of a block's outputs from its two vectors of sums.
///
/// # Safety
/// As [`block_end`], and r < `end.rows()`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn end_row(end: &BlockEnd, r: usize, sums: [__m512i; 2]) {
    let offset = _mm512_set1_epi32(end.offset(r));
    let scale = _mm512_set1_ps(end.scales[r] * end.s_x);
    let bias = _mm512_set1_ps(end.bias[r]);
    for (half, sums) in sums.into_iter().enumerate() {
        let j = 16 * half;
        if j >= end.cols {
            break;
        }
        let k = lanes(end.cols - j);
        let v = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, offset));
        let mut v = _mm512_fmadd_ps(v, scale, bias);
        // SAFETY: row r and the columns j.. of `k` lie inside each buffer (the caller's
        // promise); masked-off lanes are never accessed; `out` is read only when
        // `accumulate`, when it is initialized.
        unsafe {
            for &(res, stride) in end.residuals {
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, res.add(r * stride + j)));
            }
            let out = end.out.add(r * end.out_stride + j);
            if end.accumulate {
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, out));
            }
            _mm512_mask_storeu_ps(out, k, v);
        }
    }
}

/// 8 rows × 2 vectors of 16 columns, one `vpdpbusd` per quad, tap and row; the outputs
/// written by `end`.
///
/// # Safety
/// The CPU must have AVX-512F and VNNI; `w` must hold at least `quads · taps · ROWS`
/// words and `x` at least `(quads − 1)·x_stride + (taps − 1)·dilation + COLS`; `end` must
/// meet [`super::BlockEnd::write`]'s contract.
#[target_feature(enable = "avx512f,avx512vnni")]
pub(super) unsafe fn block_avx512_vnni(
    w: &[u32],
    x: &[u32],
    x_stride: usize,
    quads: usize,
    taps: usize,
    dilation: usize,
    end: &BlockEnd,
) {
    let mut acc = [[_mm512_setzero_si512(); 2]; ROWS];
    let mut wp = w.as_ptr();
    // SAFETY: for g < quads and k < taps the loads read columns k·dilation..+COLS of quad
    // row g, and the weight reads the g·taps + k'th group of ROWS words: inside `x` and
    // `w` by the caller's bounds.
    unsafe {
        for g in 0..quads {
            let row = x.as_ptr().add(g * x_stride);
            for k in 0..taps {
                let xs = row.add(k * dilation);
                let xv = [
                    _mm512_loadu_si512(xs.cast()),
                    _mm512_loadu_si512(xs.add(16).cast()),
                ];
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let wv = _mm512_set1_epi32(*wp.add(r) as i32);
                    acc_r[0] = _mm512_dpbusd_epi32(acc_r[0], xv[0], wv);
                    acc_r[1] = _mm512_dpbusd_epi32(acc_r[1], xv[1], wv);
                }
                wp = wp.add(ROWS);
            }
        }
    }
    // Through memory once per block: handing the accumulators themselves to `end_row` made
    // the compiler store all 16 of them on every step of the loop above.
    let mut sums = [0i32; ROWS * COLS];
    for (r, acc_r) in acc.iter().enumerate() {
        // SAFETY: r < ROWS, so both 16-value stores lie in `sums`' row r of COLS = 32.
        unsafe {
            _mm512_storeu_si512(sums.as_mut_ptr().add(r * COLS).cast(), acc_r[0]);
            _mm512_storeu_si512(sums.as_mut_ptr().add(r * COLS + 16).cast(), acc_r[1]);
        }
    }
    // SAFETY: `end` meets `write`'s contract (the caller's promise), and `sums` holds ROWS
    // rows.
    unsafe { block_end(end, &sums) };
}

/// The AVX-VNNI block: [`block_avx512_vnni`]'s sums with 256-bit `vpdpbusd`, as four
/// sub-blocks of 4 rows × 16 columns (16 registers hold no more accumulators).
///
/// # Safety
/// The CPU must have AVX2 and AVX-VNNI; the bounds are [`block_avx512_vnni`]'s.
#[target_feature(enable = "avx2,avxvnni")]
pub(super) unsafe fn block_avx_vnni(
    w: &[u32],
    x: &[u32],
    x_stride: usize,
    quads: usize,
    taps: usize,
    dilation: usize,
    sums: &mut [i32; ROWS * COLS],
) {
    for r0 in (0..ROWS).step_by(4) {
        for c0 in (0..COLS).step_by(16) {
            let mut acc = [[_mm256_setzero_si256(); 2]; 4];
            // SAFETY: for g < quads and k < taps the loads read columns
            // c0 + k·dilation..+16 of quad row g, within the COLS the caller's bound covers,
            // and the weight reads words r0..r0 + 4 of group g·taps + k: inside `x` and `w`.
            unsafe {
                for g in 0..quads {
                    let row = x.as_ptr().add(g * x_stride + c0);
                    for k in 0..taps {
                        let xs = row.add(k * dilation);
                        let xv = [
                            _mm256_loadu_si256(xs.cast()),
                            _mm256_loadu_si256(xs.add(8).cast()),
                        ];
                        let wp = w.as_ptr().add((g * taps + k) * ROWS + r0);
                        for (r, acc_r) in acc.iter_mut().enumerate() {
                            let wv = _mm256_set1_epi32(*wp.add(r) as i32);
                            acc_r[0] = _mm256_dpbusd_avx_epi32(acc_r[0], xv[0], wv);
                            acc_r[1] = _mm256_dpbusd_avx_epi32(acc_r[1], xv[1], wv);
                        }
                    }
                }
            }
            store_sub_block(sums, r0, c0, &acc);
        }
    }
}

/// The plain AVX2 block: the same sums without a byte dot product. `vpmaddubsw` multiplies
/// unsigned by signed bytes into saturating `i16` pairs, and 255 · 127 · 2 overflows them, so
/// it multiplies |w| (≤ 127) by the signed input with w's sign (|x| ≤ 127, the offset removed
/// by flipping the top bit): a pair stays within ±32,258. `vpmaddwd` by ones then adds the
/// pairs into `i32`. The sums therefore lack the inputs' offset (see
/// [`super::Int8Isa::sums_offset_inputs`]).
///
/// # Safety
/// The CPU must have AVX2; the bounds are [`block_avx512_vnni`]'s.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn block_avx2(
    w: &[u32],
    x: &[u32],
    x_stride: usize,
    quads: usize,
    taps: usize,
    dilation: usize,
    sums: &mut [i32; ROWS * COLS],
) {
    let flip = _mm256_set1_epi8(-128);
    let ones = _mm256_set1_epi16(1);
    for r0 in (0..ROWS).step_by(4) {
        for c0 in (0..COLS).step_by(16) {
            let mut acc = [[_mm256_setzero_si256(); 2]; 4];
            // SAFETY: the same reads as `block_avx_vnni`'s, inside `x` and `w`.
            unsafe {
                for g in 0..quads {
                    let row = x.as_ptr().add(g * x_stride + c0);
                    for k in 0..taps {
                        let xs = row.add(k * dilation);
                        let xv = [
                            _mm256_xor_si256(_mm256_loadu_si256(xs.cast()), flip),
                            _mm256_xor_si256(_mm256_loadu_si256(xs.add(8).cast()), flip),
                        ];
                        let wp = w.as_ptr().add((g * taps + k) * ROWS + r0);
                        for (r, acc_r) in acc.iter_mut().enumerate() {
                            let wv = _mm256_set1_epi32(*wp.add(r) as i32);
                            let magnitude = _mm256_abs_epi8(wv);
                            for (a, &xv) in acc_r.iter_mut().zip(&xv) {
                                let pairs =
                                    _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xv, wv));
                                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(pairs, ones));
                            }
                        }
                    }
                }
            }
            store_sub_block(sums, r0, c0, &acc);
        }
    }
}

/// Stores a 4-row × 16-column sub-block's accumulators at (r0, c0) of `sums`.
#[target_feature(enable = "avx2")]
fn store_sub_block(sums: &mut [i32; ROWS * COLS], r0: usize, c0: usize, acc: &[[__m256i; 2]; 4]) {
    for (r, acc_r) in acc.iter().enumerate() {
        for (half, a) in acc_r.iter().enumerate() {
            let at = (r0 + r) * COLS + c0 + 8 * half;
            // SAFETY: r0 + r < ROWS and c0 + 8·half + 8 ≤ COLS (the callers' loops), so the
            // 8 values stored lie in `sums`.
            unsafe { _mm256_storeu_si256(sums[at..at + 8].as_mut_ptr().cast(), *a) };
        }
    }
}
