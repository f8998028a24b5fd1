//! The direct convolution in int8 (AVX-512 VNNI): measured against bf16, not used by the model.
//!
//! The issue behind the reduced precisions asked for int8 to be measured beside bf16 on the
//! decoder's dominant convolutions, and shipped if it were faster at equal quality. It is
//! neither on the machines measured (docs/performance.md): AMX's bf16 tiles outrun VNNI's
//! int8 dot products on the decoder's shapes, and 8-bit activations lose far more than
//! bf16's 8-bit mantissas. It stays as a benchmark route (`routes::conv1d_direct_at`, with
//! its error against `f32` in a test) so the comparison can be re-run on other CPUs.
//!
//! Scheme: weights per output channel scaled to ±127 (`s_w[co] = max |w[co]| / 127`); each
//! input tile, after the input map, scaled as a whole to ±127 (`s_x = max |x| / 127`, a
//! dynamic per-tile scale) and offset by 128, because `vpdpbusd` multiplies unsigned by
//! signed bytes. A block sums 4 input channels per instruction in `i32`; the epilogue removes
//! the offset (`128 · Σ w_q[co]`), rescales by `s_w[co] · s_x` and adds bias and residuals in
//! `f32`.

use super::rows::{Rows, RowsMut, SampleMap};

/// Floats of mapped input tile.
const TILE_FLOATS: usize = 64 * 1024;
/// Output channels and columns of one block.
const ROWS: usize = 8;
const COLS: usize = 32;

/// Whether this CPU has the AVX-512 VNNI dot product (and the cap allows it).
pub(super) fn available() -> bool {
    super::isa::avx512_vnni()
}

/// Weights [C_out, C_in, K] quantized per output channel, laid out [C_out / 8][quads][K][8],
/// each `u32` four signed bytes of consecutive input channels.
pub(super) struct Int8Weights {
    data: Vec<u32>,
    /// Per output channel (padded to whole blocks): the scale, and 128 · Σ w_q.
    scales: Vec<f32>,
    offsets: Vec<i32>,
    c_out: usize,
    c_in: usize,
    taps: usize,
}

impl std::fmt::Debug for Int8Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Int8Weights")
            .field("c_out", &self.c_out)
            .field("c_in", &self.c_in)
            .field("taps", &self.taps)
            .finish_non_exhaustive()
    }
}

impl Int8Weights {
    pub fn new(w: &[f32], c_out: usize, c_in: usize, taps: usize) -> Self {
        assert_eq!(w.len(), c_out * c_in * taps);
        let blocks = c_out.div_ceil(ROWS);
        let quads = c_in.div_ceil(4);
        let mut scales = vec![0f32; blocks * ROWS];
        let mut offsets = vec![0i32; blocks * ROWS];
        let mut q = vec![0i8; blocks * ROWS * quads * 4 * taps];
        for co in 0..c_out {
            let row = &w[co * c_in * taps..(co + 1) * c_in * taps];
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            scales[co] = scale;
            for ci in 0..c_in {
                for k in 0..taps {
                    let v = (row[ci * taps + k] / scale).round().clamp(-127.0, 127.0) as i8;
                    q[(co * quads * 4 + ci) * taps + k] = v;
                    offsets[co] += 128 * v as i32;
                }
            }
        }
        let mut data = vec![0u32; blocks * quads * taps * ROWS];
        for (i, word) in data.iter_mut().enumerate() {
            let r = i % ROWS;
            let k = (i / ROWS) % taps;
            let g = (i / ROWS / taps) % quads;
            let co = (i / ROWS / taps / quads) * ROWS + r;
            let bytes: [u8; 4] =
                std::array::from_fn(|e| q[(co * quads * 4 + 4 * g + e) * taps + k] as u8);
            *word = u32::from_le_bytes(bytes);
        }
        Self {
            data,
            scales,
            offsets,
            c_out,
            c_in,
            taps,
        }
    }

    pub fn has_shape(&self, c_out: usize, c_in: usize, taps: usize) -> bool {
        (self.c_out, self.c_in, self.taps) == (c_out, c_in, taps)
    }
}

/// [`super::direct::conv1d_rows`] for int8 weights (same definition, quantized operands).
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
    assert!(map.mask.is_none_or(|m| m.len() >= l_in));
    assert!(taps > 0 && dilation > 0);
    if l_out == 0 || c_out == 0 {
        return;
    }
    let quads = c_in.div_ceil(4);
    let span = dilation * (taps - 1);
    let tile = ((TILE_FLOATS / c_in).saturating_sub(span) / COLS * COLS)
        .max(COLS)
        .min(l_out.div_ceil(COLS) * COLS);
    let row_len = tile + span;
    let mut mapped = vec![0f32; c_in * row_len];
    let mut packed = vec![0u32; quads * row_len];
    let mut sums = [0i32; ROWS * COLS];
    let vnni = available();
    let out_ptr = out.data.as_mut_ptr().cast::<f32>();
    for t0 in (0..l_out).step_by(tile) {
        let width = tile.min(l_out - t0);
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
            map.apply_slice(&mut row[j_lo..j_hi], src, i_lo);
            max = row.iter().fold(max, |m, v| m.max(v.abs()));
        }
        let s_x = if max > 0.0 { max / 127.0 } else { 1.0 };
        for g in 0..quads {
            let rows: [&[f32]; 4] = std::array::from_fn(|e| {
                let ci = (4 * g + e).min(c_in - 1);
                &mapped[ci * row_len..][..n]
            });
            // Channels past C_in (the last quad's padding) quantize as zero.
            let live = (c_in - 4 * g).min(4);
            quantize_quads(&mut packed[g * row_len..][..n], rows, live, 1.0 / s_x, vnni);
        }
        for j0 in (0..width).step_by(COLS) {
            let n_cols = COLS.min(width - j0);
            for block in 0..c_out.div_ceil(ROWS) {
                let per_block = quads * taps * ROWS;
                let weights = &w.data[block * per_block..][..per_block];
                let xs = &packed[j0..];
                assert!(xs.len() >= (quads - 1) * row_len + span + COLS);
                #[cfg(target_arch = "x86_64")]
                if vnni {
                    // SAFETY: `vnni` is `available()` (AVX-512F, BW and VNNI); `weights` is
                    // exactly quads · taps · ROWS words and the input bound is asserted above.
                    unsafe { x86::block(weights, xs, row_len, quads, taps, dilation, &mut sums) };
                }
                if !vnni {
                    portable_block(weights, xs, row_len, quads, taps, dilation, &mut sums);
                }
                let co0 = block * ROWS;
                for r in 0..ROWS.min(c_out - co0) {
                    let co = co0 + r;
                    let at = |stride: usize| co * stride + t0 + j0;
                    let i = at(out.stride);
                    assert!(i + n_cols <= out.data.len());
                    let mut res = [&[][..]; 2];
                    assert!(residuals.len() <= res.len());
                    for (dst, r) in res.iter_mut().zip(residuals) {
                        *dst = &r.data[at(r.stride)..][..n_cols];
                    }
                    let end = Epilogue {
                        sums: &sums[r * COLS..][..n_cols],
                        offset: w.offsets[co],
                        scale: w.scales[co] * s_x,
                        bias: bias[co],
                        residuals: &res[..residuals.len()],
                    };
                    // SAFETY: `n_cols` values from `i` are in bounds (asserted), in the output's
                    // exclusive borrow, apart from `sums` and the residuals; with `accumulate`
                    // the caller initialized them; `vnni` implies AVX-512F.
                    unsafe { end.write(out_ptr.add(i), accumulate, vnni) };
                }
            }
        }
    }
}

/// `u32` quads of `rows[0..4][j]` quantized (`round(v · inv_scale) + 128`), rows from `live`
/// on as zero.
fn quantize_quads(dst: &mut [u32], rows: [&[f32]; 4], live: usize, inv_scale: f32, vector: bool) {
    assert!(rows.iter().all(|r| r.len() >= dst.len()));
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: `vector` is `available()` from the one caller, which includes AVX-512F and
        // BW, all that `x86::quantize_quads` enables; the row lengths are asserted above.
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

/// One output row of a block: `out[j] = (out[j]) + bias + Σ residuals[j] + (sums[j] −
/// offset) · scale`.
struct Epilogue<'a> {
    sums: &'a [i32],
    offset: i32,
    scale: f32,
    bias: f32,
    residuals: &'a [&'a [f32]],
}

impl Epilogue<'_> {
    /// # Safety
    /// `out` must be valid for reads and writes of `sums.len()` values, initialized when
    /// `accumulate`, and overlap neither `sums` nor the residuals. `vector` only where
    /// AVX-512F exists.
    unsafe fn write(&self, out: *mut f32, accumulate: bool, vector: bool) {
        assert!(self.residuals.iter().all(|r| r.len() == self.sums.len()));
        #[cfg(target_arch = "x86_64")]
        if vector {
            // SAFETY: `vector` means AVX-512F and `out` is valid (the caller's promise); the
            // residual lengths `x86::epilogue` relies on are asserted above.
            return unsafe { x86::epilogue(self, out, accumulate) };
        }
        let _ = vector;
        for (j, &s) in self.sums.iter().enumerate() {
            let mut v = self.bias + (s - self.offset) as f32 * self.scale;
            for r in self.residuals {
                v += r[j];
            }
            // SAFETY: j < sums.len(), the values the caller made valid; `out` is read only
            // when `accumulate`, when it is initialized.
            unsafe {
                if accumulate {
                    v += out.add(j).read();
                }
                out.add(j).write(v);
            }
        }
    }
}

/// `sums[r·COLS + j] = Σ_g Σ_k Σ_e w[g][k][r].e · x[g, k·dilation + j].e` over byte quads.
fn portable_block(
    w: &[u32],
    x: &[u32],
    x_stride: usize,
    quads: usize,
    taps: usize,
    dilation: usize,
    sums: &mut [i32; ROWS * COLS],
) {
    sums.fill(0);
    for g in 0..quads {
        for k in 0..taps {
            let xs = &x[g * x_stride + k * dilation..][..COLS];
            let wk = &w[(g * taps + k) * ROWS..][..ROWS];
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

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Epilogue, COLS, ROWS};
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

    /// [`super::Epilogue::write`] in 16-column vectors, the last one masked.
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `out` must meet [`super::Epilogue::write`]'s contract, and
    /// every residual hold `e.sums.len()` values (which `write` asserts).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn epilogue(e: &Epilogue, out: *mut f32, accumulate: bool) {
        let n = e.sums.len();
        let (offset, scale, bias) = (
            _mm512_set1_epi32(e.offset),
            _mm512_set1_ps(e.scale),
            _mm512_set1_ps(e.bias),
        );
        // SAFETY: every lane read or written is at j + i < n = sums.len() (the mask clears
        // the rest, and masked-off lanes are never accessed, so they cannot fault), inside
        // `sums`, each residual and the values of `out` the caller made valid; `out` is read
        // only when `accumulate`, when it is initialized.
        unsafe {
            for j in (0..n).step_by(16) {
                let mask: __mmask16 = if n - j >= 16 {
                    0xFFFF
                } else {
                    (1u16 << (n - j)) - 1
                };
                let sums = _mm512_maskz_loadu_epi32(mask, e.sums.as_ptr().add(j));
                let sums = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, offset));
                let mut v = _mm512_fmadd_ps(sums, scale, bias);
                for r in e.residuals {
                    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, r.as_ptr().add(j)));
                }
                if accumulate {
                    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, out.add(j)));
                }
                _mm512_mask_storeu_ps(out.add(j), mask, v);
            }
        }
    }

    /// 8 rows × 2 vectors of 16 columns, one `vpdpbusd` per quad, tap and row.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and VNNI; `w` must hold at least `quads · taps · ROWS`
    /// words and `x` at least `(quads − 1)·x_stride + (taps − 1)·dilation + COLS`.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn block(
        w: &[u32],
        x: &[u32],
        x_stride: usize,
        quads: usize,
        taps: usize,
        dilation: usize,
        sums: &mut [i32; ROWS * COLS],
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
        for (r, acc_r) in acc.iter().enumerate() {
            // SAFETY: r < ROWS, so both 16-value stores lie in `sums`' row r of COLS = 32.
            unsafe {
                _mm512_storeu_si512(sums.as_mut_ptr().add(r * COLS).cast(), acc_r[0]);
                _mm512_storeu_si512(sums.as_mut_ptr().add(r * COLS + 16).cast(), acc_r[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Against the `f32` definition: the error is what 8-bit operands allow (relative RMS
    /// around 1 %, several times bf16's), through the block this CPU has.
    #[test]
    fn int8_stays_within_quantization_error_of_f32() {
        let mut rng = StdRng::seed_from_u64(47);
        let (c_in, c_out, l_in, taps, dilation) = (32, 32, 700, 7, 3);
        let padding = dilation * (taps - 1) / 2;
        let x: Vec<f32> = (0..c_in * l_in)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let w: Vec<f32> = (0..c_out * c_in * taps)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let bias = vec![0f32; c_out];
        let mut want = vec![0f64; c_out * l_in];
        for co in 0..c_out {
            for t in 0..l_in {
                for ci in 0..c_in {
                    for k in 0..taps {
                        let i = (t + k * dilation) as isize - padding as isize;
                        if i >= 0 && (i as usize) < l_in {
                            want[co * l_in + t] +=
                                (w[(co * c_in + ci) * taps + k] * x[ci * l_in + i as usize]) as f64;
                        }
                    }
                }
            }
        }
        let packed = Int8Weights::new(&w, c_out, c_in, taps);
        let mut got = vec![0f32; c_out * l_in];
        conv1d_rows(
            RowsMut::new(&mut got, l_in, l_in),
            false,
            Rows::contiguous(&x, l_in),
            -(padding as isize),
            &packed,
            &bias,
            dilation,
            &SampleMap::IDENTITY,
            &[],
        );
        let err: f64 = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - w).powi(2))
            .sum();
        let power: f64 = want.iter().map(|w| w * w).sum();
        let relative = (err / power).sqrt();
        assert!(relative < 0.02, "relative RMS error {relative}");
        assert!(relative > 1e-4, "int8 must actually quantize: {relative}");
    }
}
