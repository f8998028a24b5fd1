//! AMX tiles for the bf16 and int8 convolutions: a 32 × 32 block of outputs per call.
//!
//! Intel's Advanced Matrix Extensions multiply whole 16 × 32 bf16 tiles into 16 × 16 `f32`
//! accumulators in one instruction (`tdpbf16ps`, 8192 multiply-adds); measured on one core of
//! the build machine at ≈ 700 GMAC/s, against ≈ 128 for AVX-512 `f32` FMA and ≈ 50 for the
//! `f32` direct kernel on the decoder's shapes. A convolution maps onto it as the bf16
//! kernel's other blocks do ([`super::bf16`]): output channels are the tile rows, output
//! columns the tile columns, and the reduction runs over pairs of input channels at one tap,
//! which is exactly the pair-interleaved layout of the packed input tile, so each tap's input
//! tile is a strided load at a shifted column.
//!
//! Rust exposes no stable AMX intrinsics, so the few instructions are inline assembly. The
//! tile registers are not known to the compiler, which never emits AMX code itself: the tile
//! state lives from [`Tiles::configure`] to its drop (which releases it, so the OS need not
//! save 8 KiB of tiles on every context switch) on one thread, and only this module touches it.

/// Output rows (channels) of one block.
pub(super) const ROWS: usize = 32;
/// Output columns of one block.
pub(super) const COLS: usize = 32;
/// Input channel pairs one tile holds (its 16 rows of 64 bytes).
pub(super) const PAIRS_PER_TILE: usize = 16;
/// `u32`s (channel pairs) of one 16 × 16 weight tile.
pub(super) const TILE_WORDS: usize = 16 * 16;

/// Whether this CPU has AMX-BF16, the instruction-set cap ([`super::isa`]) allows it and the
/// OS lets this process use its tiles (Linux asks each process to request them first).
/// Decided once.
pub(super) fn usable() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        use super::isa::{allows, Level};
        static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *USABLE.get_or_init(|| allows(Level::Amx) && x86::has_amx_bf16() && x86::request_tiles())
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        false
    }
}

/// Whether this CPU also has AMX-INT8 (`tdpbsud`), with the tiles [`usable`] at all. Decided
/// once.
pub(super) fn usable_int8() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *USABLE.get_or_init(|| usable() && x86::has_amx_int8())
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        false
    }
}

/// The tile configuration, loaded for the lifetime of the value on the current thread.
pub(super) struct Tiles {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Tiles {
    /// Configures the eight tiles as 16 rows × 64 bytes.
    ///
    /// # Safety
    /// [`usable`] must have returned true.
    pub(super) unsafe fn configure() -> Self {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        // SAFETY: `usable` returned true (the caller's promise): the CPU has AMX and Linux
        // granted this process the tile state.
        unsafe {
            x86::configure()
        };
        Tiles {
            _not_send: std::marker::PhantomData,
        }
    }

    /// `out[r·COLS + j] = Σ_k Σ_c Σ_p A(k, c)[r][p] · B(k, c)[p][j]` for a [`ROWS`] × [`COLS`]
    /// block: `w0` and `w1` are the packed weights of the two 16-channel halves (for each tap
    /// `k < taps`, then each chunk `c < chunks` of 16 channel pairs, one 16 × 16 tile of `u32`
    /// pairs), `x` the packed input at the block's first column, rows of channel pairs
    /// `x_stride` `u32`s apart, tap `k` read `k·dilation` columns further.
    ///
    /// # Safety
    /// `w0` and `w1` must each be readable for `taps · chunks` tiles of [`TILE_WORDS`] values;
    /// `x` must be readable for `16·chunks` rows, `x_stride` apart, of
    /// `COLS + (taps − 1)·dilation` values; `out` must be writable for `ROWS·COLS` values and
    /// overlap none of the inputs. (That the tiles are configured on this thread, `&self`
    /// proves.)
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block(
        &self,
        w0: *const u32,
        w1: *const u32,
        x: *const u32,
        x_stride: usize,
        chunks: usize,
        taps: usize,
        dilation: usize,
        out: *mut f32,
    ) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        // SAFETY: `self` exists only after `configure` on this thread (it is not `Send`) and
        // until its drop releases the tiles; the pointers are the caller's promise.
        unsafe {
            x86::block(w0, w1, x, x_stride, chunks, taps, dilation, out)
        };
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        {
            let _ = (w0, w1, x, x_stride, chunks, taps, dilation, out);
            unreachable!("AMX is never usable here");
        }
    }
}

impl Tiles {
    /// [`Tiles::block`] in int8: `i32` sums of signed weight bytes times unsigned input bytes,
    /// each `u32` four consecutive input channels instead of a bf16 pair (the same tile
    /// shapes: 16 rows of 16 quads). `out` receives the raw sums.
    ///
    /// # Safety
    /// As [`Tiles::block`], with quads for pairs; the CPU must also have AMX-INT8
    /// ([`usable_int8`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block_int8(
        &self,
        w0: *const u32,
        w1: *const u32,
        x: *const u32,
        x_stride: usize,
        chunks: usize,
        taps: usize,
        dilation: usize,
        out: *mut i32,
    ) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        // SAFETY: `self` proves the tiles are configured on this thread; the pointers and
        // AMX-INT8 are the caller's promise.
        unsafe {
            x86::block_int8(w0, w1, x, x_stride, chunks, taps, dilation, out)
        };
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        {
            let _ = (w0, w1, x, x_stride, chunks, taps, dilation, out);
            unreachable!("AMX is never usable here");
        }
    }
}

impl Tiles {
    /// A 32 × 32 block of a row-major matrix product: `out[r][j] = Σ_t Σ_q A[r][t·32 + q] ·
    /// B(t)[q / 2][j]` for `t < k_tiles`, where `a` is 32 rows of bf16 values `a_stride`
    /// bytes apart (each tile step reads the next 64 bytes of every row) and `b` the packed
    /// weights: for each step, two 16 × 16 tiles of bf16 pair words, of output columns 0–15
    /// then 16–31, all `2 · k_tiles` contiguous. The sums go to `out`, rows `out_stride` bytes apart, added to what
    /// it holds when `accumulate` (a product cut along its sum, part by part).
    ///
    /// # Safety
    /// `a` must be readable for 32 rows of `64 · k_tiles` bytes, `a_stride` apart; `b` for
    /// `2 · k_tiles` tiles of [`TILE_WORDS`] words; `out` writable (and, when `accumulate`,
    /// initialised) for 32 rows of 32 `f32`s, `out_stride` bytes apart, overlapping none of
    /// the inputs.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gemm_block(
        &self,
        a: *const u16,
        a_stride: usize,
        b: *const u32,
        k_tiles: usize,
        out: *mut f32,
        out_stride: usize,
        accumulate: bool,
    ) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        // SAFETY: `self` proves the tiles are configured on this thread; the pointers are the
        // caller's promise.
        unsafe {
            x86::gemm_block(a, a_stride, b, k_tiles, out, out_stride, accumulate)
        };
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        {
            let _ = (a, a_stride, b, k_tiles, out, out_stride, accumulate);
            unreachable!("AMX is never usable here");
        }
    }
}

impl Tiles {
    /// Runs `steps` × 4 `tdpbf16ps` on tiles already in registers, without a load: the
    /// instruction's own rate on this core, against which the kernels' rates are judged.
    #[cfg(test)]
    pub(super) fn register_peak(&self, steps: usize) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        // SAFETY: `self` proves the tiles are configured on this thread; the loop touches
        // tiles only.
        unsafe {
            std::arch::asm!(
                "tilezero tmm4",
                "tilezero tmm5",
                "tilezero tmm6",
                "tilezero tmm7"
            );
            for _ in 0..steps {
                std::arch::asm!(
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    options(nostack, nomem)
                );
            }
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        let _ = steps;
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        // SAFETY: a `Tiles` exists only after `configure` succeeded on this thread (it is not
        // `Send`), so the CPU has AMX and the tile state is loaded here; releasing it is then
        // always allowed, and nothing uses the tiles after this drop.
        unsafe {
            x86::release()
        };
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod x86 {
    use super::{COLS, TILE_WORDS};
    use std::arch::asm;
    use std::arch::x86_64::{__cpuid_count, _xgetbv};

    /// CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE; XCR0 bits 17–18 tile state.
    pub(super) fn has_amx_bf16() -> bool {
        // SAFETY: CPUID leaf 0 exists on every x86-64 CPU; higher leaves only after checking
        // the maximum, and XGETBV only when CPUID reports OSXSAVE.
        unsafe {
            if __cpuid_count(0, 0).eax < 7 {
                return false;
            }
            let leaf7 = __cpuid_count(7, 0);
            let amx = leaf7.edx & (1 << 22) != 0 && leaf7.edx & (1 << 24) != 0;
            let osxsave = __cpuid_count(1, 0).ecx & (1 << 27) != 0;
            amx && osxsave && {
                let xcr0 = xgetbv0();
                xcr0 & (0b11 << 17) == (0b11 << 17)
            }
        }
    }

    /// CPUID leaf 7: EDX bit 25 AMX-INT8 (asked only once [`has_amx_bf16`] said yes).
    pub(super) fn has_amx_int8() -> bool {
        __cpuid_count(7, 0).edx & (1 << 25) != 0
    }

    /// XCR0, the state components the OS saves (and so lets programs use).
    ///
    /// # Safety
    /// The CPU must support XSAVE and the OS must have enabled it: CPUID reports OSXSAVE.
    #[target_feature(enable = "xsave")]
    unsafe fn xgetbv0() -> u64 {
        // SAFETY: OSXSAVE is set (the caller's promise), so XGETBV does not fault, and XCR0
        // (register 0) exists on every CPU with XSAVE.
        unsafe { _xgetbv(0) }
    }

    /// Linux hands out the tile state only on request (`arch_prctl(ARCH_REQ_XCOMP_PERM,
    /// XFEATURE_XTILEDATA)`), once per process.
    pub(super) fn request_tiles() -> bool {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: a plain system call with integer arguments.
        unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            ) == 0
        }
    }

    /// `ldtilecfg`'s 64-byte operand: palette 1, then bytes per row and rows of each tile.
    #[repr(C, align(64))]
    struct Config {
        palette: u8,
        start_row: u8,
        reserved: [u8; 14],
        bytes_per_row: [u16; 16],
        rows: [u8; 16],
    }

    /// Loads the tile configuration on this thread.
    ///
    /// # Safety
    /// The CPU must have AMX-TILE ([`has_amx_bf16`]) and the process must hold the tile state
    /// ([`request_tiles`] returned true), or `ldtilecfg` faults.
    pub(super) unsafe fn configure() {
        let mut config = Config {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            bytes_per_row: [0; 16],
            rows: [0; 16],
        };
        for t in 0..8 {
            config.bytes_per_row[t] = 64;
            config.rows[t] = 16;
        }
        // SAFETY: AMX is present and granted (the caller's promise); `config` is a live,
        // 64-byte aligned `Config` in the layout `ldtilecfg` reads (palette 1, every field
        // in range), and the instruction only reads it.
        unsafe { asm!("ldtilecfg [{}]", in(reg) &config, options(nostack, readonly)) };
    }

    /// Returns the tiles to their initial state, so the OS need not save them.
    ///
    /// # Safety
    /// The CPU must have AMX-TILE (`tilerelease` faults otherwise) and the process must hold
    /// the tile state.
    pub(super) unsafe fn release() {
        // SAFETY: AMX is present and granted (the caller's promise); `tilerelease` touches no
        // memory and no register the compiler allocates.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }

    /// tmm0..3 accumulate the four 16 × 16 quarters (rows 0–15 / 16–31 × columns 0–15 /
    /// 16–31), tmm4–5 hold the two weight tiles and tmm6–7 the two input tiles of a step.
    ///
    /// # Safety
    /// [`configure`] must have run on this thread (tiles of 16 rows × 64 bytes) with no
    /// [`release`] since; the pointers must satisfy [`super::Tiles::block`]'s contract.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block(
        w0: *const u32,
        w1: *const u32,
        x: *const u32,
        x_stride: usize,
        chunks: usize,
        taps: usize,
        dilation: usize,
        out: *mut f32,
    ) {
        // SAFETY: the tiles are configured on this thread (the caller's promise); zeroing
        // them touches no memory.
        unsafe {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                options(nostack, nomem)
            )
        };
        let x_bytes = x_stride * 4;
        // SAFETY: for tap k < taps and chunk c < chunks, the two weight tiles at `step` (16
        // rows of 64 bytes, contiguous) lie inside `w0`'s and `w1`'s taps · chunks tiles, and
        // the two input tiles at `b` (rows 16c..16c + 16, `x_stride` apart, columns
        // k·dilation..k·dilation + COLS) inside `x`'s readable rows, as the caller promised;
        // the loads only read memory, and the tiles are configured (the caller's promise).
        unsafe {
            for k in 0..taps {
                let xk = x.add(k * dilation);
                for c in 0..chunks {
                    let step = (k * chunks + c) * TILE_WORDS;
                    let b = xk.add(c * 16 * x_stride);
                    asm!(
                        "tileloadd tmm4, [{a0} + {s64}*1]",
                        "tileloadd tmm5, [{a1} + {s64}*1]",
                        "tileloadd tmm6, [{b} + {xs}*1]",
                        "tileloadd tmm7, [{b} + {xs}*1 + 64]",
                        "tdpbf16ps tmm0, tmm4, tmm6",
                        "tdpbf16ps tmm1, tmm4, tmm7",
                        "tdpbf16ps tmm2, tmm5, tmm6",
                        "tdpbf16ps tmm3, tmm5, tmm7",
                        a0 = in(reg) w0.add(step),
                        a1 = in(reg) w1.add(step),
                        b = in(reg) b,
                        s64 = in(reg) 64usize,
                        xs = in(reg) x_bytes,
                        options(nostack, readonly)
                    );
                }
            }
        }
        let row = COLS * 4;
        // SAFETY: with the tiles configured, the four stores write rows 0..16 and 16..32 of
        // `out`, `COLS` floats apart, columns 0..16 and 16..32: exactly the ROWS × COLS
        // values the caller made writable.
        unsafe {
            asm!(
                "tilestored [{o} + {s}*1], tmm0",
                "tilestored [{o} + {s}*1 + 64], tmm1",
                "tilestored [{h} + {s}*1], tmm2",
                "tilestored [{h} + {s}*1 + 64], tmm3",
                o = in(reg) out,
                h = in(reg) out.add(16 * COLS),
                s = in(reg) row,
                options(nostack)
            )
        };
    }

    /// [`block`] with `tdpbsud` (signed weight bytes × unsigned input bytes, `i32` sums).
    ///
    /// # Safety
    /// As [`block`], and the CPU must have AMX-INT8.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block_int8(
        w0: *const u32,
        w1: *const u32,
        x: *const u32,
        x_stride: usize,
        chunks: usize,
        taps: usize,
        dilation: usize,
        out: *mut i32,
    ) {
        // SAFETY: as in `block`: the tiles are configured on this thread.
        unsafe {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                options(nostack, nomem)
            )
        };
        let x_bytes = x_stride * 4;
        // SAFETY: the same tile loads as `block`'s, inside the buffers the caller promised;
        // `tdpbsud` only reads tiles.
        unsafe {
            for k in 0..taps {
                let xk = x.add(k * dilation);
                for c in 0..chunks {
                    let step = (k * chunks + c) * TILE_WORDS;
                    let b = xk.add(c * 16 * x_stride);
                    asm!(
                        "tileloadd tmm4, [{a0} + {s64}*1]",
                        "tileloadd tmm5, [{a1} + {s64}*1]",
                        "tileloadd tmm6, [{b} + {xs}*1]",
                        "tileloadd tmm7, [{b} + {xs}*1 + 64]",
                        "tdpbsud tmm0, tmm4, tmm6",
                        "tdpbsud tmm1, tmm4, tmm7",
                        "tdpbsud tmm2, tmm5, tmm6",
                        "tdpbsud tmm3, tmm5, tmm7",
                        a0 = in(reg) w0.add(step),
                        a1 = in(reg) w1.add(step),
                        b = in(reg) b,
                        s64 = in(reg) 64usize,
                        xs = in(reg) x_bytes,
                        options(nostack, readonly)
                    );
                }
            }
        }
        let row = COLS * 4;
        // SAFETY: as in `block`: ROWS × COLS `i32`s of `out`, which the caller made writable.
        unsafe {
            asm!(
                "tilestored [{o} + {s}*1], tmm0",
                "tilestored [{o} + {s}*1 + 64], tmm1",
                "tilestored [{h} + {s}*1], tmm2",
                "tilestored [{h} + {s}*1 + 64], tmm3",
                o = in(reg) out,
                h = in(reg) out.add(16 * COLS),
                s = in(reg) row,
                options(nostack)
            )
        };
    }

    /// tmm0..3 accumulate rows 0–15 / 16–31 × columns 0–15 / 16–31; tmm4–5 hold the two
    /// 16-row halves of `a`'s tile step, tmm6–7 the two column halves of the weights.
    ///
    /// # Safety
    /// [`configure`] must have run on this thread with no [`release`] since; the pointers must
    /// satisfy [`super::Tiles::gemm_block`]'s contract.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gemm_block(
        a: *const u16,
        a_stride: usize,
        b: *const u32,
        k_tiles: usize,
        out: *mut f32,
        out_stride: usize,
        accumulate: bool,
    ) {
        // SAFETY: the tiles are configured on this thread (the caller's promise); the loads
        // read the 32 × 32 floats of `out`, initialised when accumulating (its promise).
        unsafe {
            let high = out.cast::<u8>().add(16 * out_stride);
            if accumulate {
                asm!(
                    "tileloadd tmm0, [{o} + {s}*1]",
                    "tileloadd tmm1, [{o} + {s}*1 + 64]",
                    "tileloadd tmm2, [{h} + {s}*1]",
                    "tileloadd tmm3, [{h} + {s}*1 + 64]",
                    o = in(reg) out,
                    h = in(reg) high,
                    s = in(reg) out_stride,
                    options(nostack, readonly)
                )
            } else {
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3",
                    options(nostack, nomem)
                )
            }
        };
        // SAFETY: step t reads bytes 64t..64t + 64 of `a`'s 32 rows and tiles 2t and 2t + 1 of
        // `b`, inside what the caller made readable; the loads only read memory.
        unsafe {
            let a_low = a.cast::<u8>();
            let a_high = a_low.add(16 * a_stride);
            for t in 0..k_tiles {
                asm!(
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm5, [{a1} + {sa}*1]",
                    "tileloadd tmm6, [{b} + {s64}*1]",
                    "tileloadd tmm7, [{b} + {s64}*1 + 1024]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    a0 = in(reg) a_low.add(64 * t),
                    a1 = in(reg) a_high.add(64 * t),
                    b = in(reg) b.add(2 * t * TILE_WORDS),
                    sa = in(reg) a_stride,
                    s64 = in(reg) 64usize,
                    options(nostack, readonly)
                );
            }
        }
        // SAFETY: the four stores write 32 rows × 32 floats of `out`, `out_stride` bytes
        // apart, which the caller made writable.
        unsafe {
            let high = out.cast::<u8>().add(16 * out_stride);
            asm!(
                "tilestored [{o} + {s}*1], tmm0",
                "tilestored [{o} + {s}*1 + 64], tmm1",
                "tilestored [{h} + {s}*1], tmm2",
                "tilestored [{h} + {s}*1 + 64], tmm3",
                o = in(reg) out,
                h = in(reg) high,
                s = in(reg) out_stride,
                options(nostack)
            )
        };
    }
}
