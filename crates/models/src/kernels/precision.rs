//! The arithmetic a loaded model's convolutions run in, and what this CPU offers for it.
//!
//! `f32` is the reference: it is what onnxruntime computes, and the only precision promised to
//! agree with it bit for bit (within float rounding). `bf16` rounds weights (once, when they
//! are packed) and activations (while each input tile is copied) to bfloat16 and multiplies
//! them with `f32` accumulation; bias, residuals and every nonlinearity stay `f32`. It pays
//! only where the CPU multiplies bf16 faster than it fuses `f32` multiply-adds, which differs
//! by vendor even among CPUs with the same feature flags: Intel's AMX tiles do ≈ 700 bf16
//! GMAC/s on one core where its AVX-512 `f32` FMA peaks at ≈ 128, while the same core's
//! `avx512_bf16` dot product runs at half its `f32` FMA rate, and an AMD EPYC's at about
//! twice its rate (both measured, docs/performance.md §10 and §11a). So a reduced precision
//! is chosen by what the hardware does, not by its flags alone: see [`Precision::auto`].
//!
//! The kernels behind each precision: [`super::direct`] (`f32`), [`super::bf16`] (its
//! AVX-512 and portable blocks, and [`super::amx`]'s tiles) and `int8`. They sit below this
//! module and know nothing of each other: a layer's [`PackedConv`] says which one runs it,
//! and [`conv1d_rows`] here is where that choice is made.

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use super::bf16::{self, bf16_isa, Bf16Isa, Bf16Weights};
use super::direct::{self, PackedWeights};
use super::int8::{self, int8_isa, Int8Weights};
use super::rows::{Rows, RowsMut, SampleMap};
use super::spectral::{self, SpectralWeights};

/// The arithmetic of a model's convolutions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// `f32` everywhere: the reference, and the fallback on every CPU.
    #[default]
    F32,
    /// bfloat16 weights and activations, `f32` accumulation, bias, residuals and activations.
    Bf16,
    /// 8-bit weights (per output channel) and activations (per input tile), `i32` sums, as
    /// kokoro-onnx's int8 file computes its convolutions.
    Int8,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
        }
    }

    /// The reduced precision worth using on this CPU, else `F32`. bf16 is worth it where AMX
    /// tiles are usable (several times `f32`'s speed on every convolution shape of the model);
    /// with only AVX-512's bf16 dot product it is timed against `f32` once per process on a
    /// decoder-sized convolution and kept only if clearly faster.
    pub fn auto() -> Precision {
        static CHOICE: OnceLock<Precision> = OnceLock::new();
        *CHOICE.get_or_init(|| choose(bf16_isa(), || avx512_timing().bf16_wins()))
    }

    /// [`Precision::auto`] for a model whose int8 passed its quality gate: int8 where its best
    /// block is AVX-512 VNNI (measured 1.7× `f32` and 2.6× bf16 per Kokoro sentence on an
    /// Intel core, docs/performance.md §11a′), else `auto`'s choice. With AMX, bf16 stays:
    /// int8 on AMX-INT8 was measured slower than bf16 on AMX per sentence (its input passes and
    /// epilogue outweigh the faster products). On plain AVX2 `f32` stays: there int8's
    /// `vpmaddubsw` block was measured slower than `f32` with its spectra (1.96 against 1.59 s
    /// per Kokoro sentence on one AMD Zen 3 core, §11h). AVX-VNNI was not measured.
    pub fn auto_allowing_int8() -> Precision {
        choose_allowing_int8(bf16_isa(), int8_isa(), Precision::auto)
    }

    /// Whether this CPU has hardware for it (bf16 without it runs a portable emulation, slower
    /// than `f32`).
    pub fn has_hardware(self) -> bool {
        match self {
            Precision::F32 => true,
            Precision::Bf16 => bf16_isa() != Bf16Isa::Portable,
            Precision::Int8 => int8::has_hardware(),
        }
    }

    /// How this precision runs on this CPU, for logs: `f32`, `bf16 (AMX)`, …
    pub fn describe(self) -> String {
        match self {
            Precision::F32 => "f32".into(),
            Precision::Bf16 => format!("bf16 ({})", bf16_isa().name()),
            Precision::Int8 => format!("int8 ({})", int8_isa().name()),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A layer's weights as the kernel for its precision reads them, packed once.
#[derive(Debug)]
pub(super) enum PackedConv {
    F32(PackedWeights),
    /// `f32` through the layer's spectra ([`super::spectral`]).
    Spectral(SpectralWeights),
    Bf16(Bf16Weights),
    Int8(Int8Weights),
}

impl PackedConv {
    /// `w` is row-major [c_out, c_in, taps]. A layer too narrow for the bf16 blocks (fewer
    /// output channels than one block has rows) keeps `f32`.
    pub(super) fn new(w: &[f32], c_out: usize, c_in: usize, taps: usize, p: Precision) -> Self {
        match p {
            Precision::Bf16 if bf16::worth_it(c_out, bf16_isa()) => {
                PackedConv::Bf16(Bf16Weights::new(w, c_out, c_in, taps, bf16_isa()))
            }
            Precision::Int8 if int8::worth_it(c_out, int8_isa()) => {
                PackedConv::Int8(Int8Weights::new(w, c_out, c_in, taps, int8_isa()))
            }
            _ => PackedConv::F32(PackedWeights::new(w, c_out, c_in, taps)),
        }
    }

    /// [`PackedConv::new`] for a layer whose `f32` sums may go through its spectra, which they
    /// do where that is faster ([`spectral::worth_it`]).
    pub(super) fn allowing_spectra(
        w: &[f32],
        c_out: usize,
        c_in: usize,
        taps: usize,
        p: Precision,
    ) -> Self {
        if p == Precision::F32 && spectral::worth_it(c_out, c_in, taps) {
            PackedConv::Spectral(SpectralWeights::new(w, c_out, c_in, taps))
        } else {
            Self::new(w, c_out, c_in, taps, p)
        }
    }

    pub(super) fn has_shape(&self, c_out: usize, c_in: usize, taps: usize) -> bool {
        match self {
            PackedConv::F32(w) => w.has_shape(c_out, c_in, taps),
            PackedConv::Spectral(w) => w.has_shape(c_out, c_in, taps),
            PackedConv::Bf16(w) => w.has_shape(c_out, c_in, taps),
            PackedConv::Int8(w) => w.has_shape(c_out, c_in, taps),
        }
    }
}

/// A convolution layer as the kernel runs it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Conv<'a> {
    pub weights: &'a PackedConv,
    pub bias: &'a [f32],
    pub dilation: usize,
    pub map: SampleMap<'a>,
}

/// One batch item: `out[co, t] = bias[co] + Σ residuals[co, t] + Σ_ci Σ_k w[co, ci, k] ·
/// map(x[ci, t + k·dilation − padding])`, with `x` outside `0..l_in` read as zero. A negative
/// `padding` starts the output inside the signal (used by the transposed convolution's phases).
/// `x` is [C_in, l_in], `out` and each residual are [C_out, l_out], all row-major.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv1d(
    out: &mut [MaybeUninit<f32>],
    l_out: usize,
    x: &[f32],
    l_in: usize,
    w: &PackedConv,
    bias: &[f32],
    residuals: &[&[f32]],
    padding: isize,
    dilation: usize,
    map: &SampleMap<'_>,
) {
    let residuals: Vec<Rows> = residuals
        .iter()
        .map(|r| Rows::contiguous(r, l_out))
        .collect();
    conv1d_rows(
        RowsMut::uninit(out, l_out, l_out),
        false,
        Rows::contiguous(x, l_in),
        -padding,
        &Conv {
            weights: w,
            bias,
            dilation,
            map: *map,
        },
        &residuals,
    );
}

/// [`direct::conv1d_rows`] for a layer in any precision: the same definition, run by the kernel
/// its weights were packed for.
pub(super) fn conv1d_rows(
    out: RowsMut<'_>,
    accumulate: bool,
    x: Rows<'_>,
    offset: isize,
    conv: &Conv<'_>,
    residuals: &[Rows<'_>],
) {
    let (bias, dilation, map) = (conv.bias, conv.dilation, &conv.map);
    match conv.weights {
        PackedConv::F32(w) => direct::conv1d_rows(
            out, accumulate, x, offset, w, bias, dilation, map, residuals,
        ),
        PackedConv::Spectral(w) => spectral::conv1d_rows(
            out, accumulate, x, offset, w, bias, dilation, map, residuals,
        ),
        PackedConv::Bf16(w) => bf16::conv1d_rows(
            out, accumulate, x, offset, w, bias, dilation, map, residuals,
        ),
        PackedConv::Int8(w) => int8::conv1d_rows(
            out, accumulate, x, offset, w, bias, dilation, map, residuals,
        ),
    }
}

/// [`Precision::auto`]'s rule: bf16 with AMX, never without bf16 hardware, and with only
/// AVX-512's bf16 dot product when `avx512_wins` (asked only then: it times both kernels).
pub(super) fn choose(isa: Bf16Isa, avx512_wins: impl FnOnce() -> bool) -> Precision {
    match isa {
        Bf16Isa::Amx => Precision::Bf16,
        Bf16Isa::Avx512 if avx512_wins() => Precision::Bf16,
        Bf16Isa::Avx512 | Bf16Isa::Portable => Precision::F32,
    }
}

/// [`Precision::auto_allowing_int8`]'s rule: bf16 with AMX, int8 where AVX-512 VNNI is the
/// best int8 block, else `otherwise` (asked only then: it may time kernels).
pub(super) fn choose_allowing_int8(
    bf16: Bf16Isa,
    int8: int8::Int8Isa,
    otherwise: impl FnOnce() -> Precision,
) -> Precision {
    match (bf16, int8) {
        (Bf16Isa::Amx, _) => Precision::Bf16,
        (_, int8::Int8Isa::Avx512Vnni) => Precision::Int8,
        _ => otherwise(),
    }
}

/// The best of 5 runs of each kernel on the same convolution, in seconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bf16Timing {
    pub f32_secs: f64,
    pub bf16_secs: f64,
}

impl Bf16Timing {
    /// bf16 must be 20 % faster to count, so timing noise cannot flip a tie.
    pub(super) fn bf16_wins(&self) -> bool {
        self.bf16_secs * 1.2 < self.f32_secs
    }
}

/// The AVX-512 bf16 block against the `f32` kernel on this CPU, measured once per process
/// (the first call pays for it): each timed on a 64-channel, 5-tap convolution over 4096
/// columns, like the decoder's middle stage.
pub(super) fn avx512_timing() -> Bf16Timing {
    static TIMING: OnceLock<Bf16Timing> = OnceLock::new();
    *TIMING.get_or_init(time_avx512_against_f32)
}

fn time_avx512_against_f32() -> Bf16Timing {
    use std::time::Instant;
    let (c, len, taps) = (64, 4096, 5);
    let values = |n: usize, seed: usize| -> Vec<f32> {
        (0..n)
            .map(|i| (((i * 7919 + seed) % 1000) as f32 / 500.0) - 1.0)
            .collect()
    };
    let (x, w, bias) = (values(c * len, 1), values(c * c * taps, 2), vec![0.0; c]);
    let f32_weights = PackedConv::F32(PackedWeights::new(&w, c, c, taps));
    let bf16_weights = PackedConv::Bf16(Bf16Weights::new(&w, c, c, taps, Bf16Isa::Avx512));
    let mut out = vec![0f32; c * len];
    let mut best = |weights: &PackedConv| -> f64 {
        (0..5)
            .map(|_| {
                let started = Instant::now();
                conv1d_rows(
                    RowsMut::new(&mut out, len, len),
                    false,
                    Rows::contiguous(&x, len),
                    -2,
                    &Conv {
                        weights,
                        bias: &bias,
                        dilation: 1,
                        map: SampleMap {
                            scale: 1.0,
                            leaky_slope: Some(0.1),
                            mask: None,
                            channels: None,
                        },
                    },
                    &[],
                );
                started.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let timing = Bf16Timing {
        f32_secs: best(&f32_weights),
        bf16_secs: best(&bf16_weights),
    };
    tracing::debug!(
        f32_time = timing.f32_secs,
        bf16_time = timing.bf16_secs,
        "AVX-512 bf16 against f32"
    );
    timing
}
