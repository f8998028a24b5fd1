//! The arithmetic a loaded model's convolutions run in, and what this CPU offers for it.
//!
//! `f32` is the reference: it is what onnxruntime computes, and the only precision promised to
//! agree with it bit for bit (within float rounding). `bf16` rounds weights (once, when they
//! are packed) and activations (while each input tile is copied) to bfloat16 and multiplies
//! them with `f32` accumulation; bias, residuals and every nonlinearity stay `f32`. It pays
//! only where the CPU multiplies bf16 faster than it fuses `f32` multiply-adds, which differs
//! by vendor even among CPUs with the same feature flags: Intel's AMX tiles do ≈ 700 bf16
//! GMAC/s on one core where its AVX-512 `f32` FMA peaks at ≈ 128, while the same core's
//! `avx512_bf16` dot product runs at half its `f32` FMA rate (measured; AMD's Zen 4 is said
//! to run it at twice the rate). So a reduced precision is chosen by what the hardware does,
//! not by its flags alone: see [`Precision::auto`].
//!
//! The kernels behind each precision: [`super::direct`] (`f32`), [`super::bf16`] (its
//! AVX-512 and portable blocks) and [`super::amx`] (AMX tiles).

use std::sync::OnceLock;

/// The arithmetic of a model's convolutions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// `f32` everywhere: the reference, and the fallback on every CPU.
    #[default]
    F32,
    /// bfloat16 weights and activations, `f32` accumulation, bias, residuals and activations.
    Bf16,
    /// 8-bit weights (per output channel) and activations (per input tile), `i32` sums:
    /// measured against bf16 and found both slower (than AMX) and noisier, so the server does
    /// not offer it; kept to re-measure on other CPUs (the `bench-kernels` feature).
    #[cfg(feature = "bench-kernels")]
    Int8,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            #[cfg(feature = "bench-kernels")]
            Precision::Int8 => "int8",
        }
    }

    /// The reduced precision worth using on this CPU, else `F32`. bf16 is worth it where AMX
    /// tiles are usable (several times `f32`'s speed on every convolution shape of the model);
    /// with only AVX-512's bf16 dot product it is timed against `f32` once per process on a
    /// decoder-sized convolution and kept only if clearly faster.
    pub fn auto() -> Precision {
        static CHOICE: OnceLock<Precision> = OnceLock::new();
        *CHOICE.get_or_init(|| match bf16_isa() {
            Bf16Isa::Amx => Precision::Bf16,
            Bf16Isa::Avx512 if super::bf16::avx512_beats_f32() => Precision::Bf16,
            _ => Precision::F32,
        })
    }

    /// Whether this CPU has hardware for it (bf16 without it runs a portable emulation, slower
    /// than `f32`).
    pub fn has_hardware(self) -> bool {
        match self {
            Precision::F32 => true,
            Precision::Bf16 => bf16_isa() != Bf16Isa::Portable,
            #[cfg(feature = "bench-kernels")]
            Precision::Int8 => super::int8::available(),
        }
    }

    /// How this precision runs on this CPU, for logs: `f32`, `bf16 (AMX)`, …
    pub fn describe(self) -> String {
        match self {
            Precision::F32 => "f32".into(),
            Precision::Bf16 => format!("bf16 ({})", bf16_isa().name()),
            #[cfg(feature = "bench-kernels")]
            Precision::Int8 if super::int8::available() => "int8 (VNNI)".into(),
            #[cfg(feature = "bench-kernels")]
            Precision::Int8 => "int8 (portable)".into(),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    fn name(self) -> &'static str {
        match self {
            Bf16Isa::Amx => "AMX",
            Bf16Isa::Avx512 => "AVX-512",
            Bf16Isa::Portable => "portable",
        }
    }
}

/// The best bf16 implementation this CPU (and OS) supports, decided once.
pub(super) fn bf16_isa() -> Bf16Isa {
    static ISA: OnceLock<Bf16Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        if super::amx::usable() {
            Bf16Isa::Amx
        } else if avx512_bf16() {
            Bf16Isa::Avx512
        } else {
            Bf16Isa::Portable
        }
    })
}

/// Whether the CPU has AVX-512 with the bf16 dot product (and the byte/word ops the input
/// packing uses).
pub(super) fn avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A layer's weights as the kernel for its precision reads them, packed once.
#[derive(Debug)]
pub(super) enum PackedConv {
    F32(super::direct::PackedWeights),
    Bf16(super::bf16::Bf16Weights),
    #[cfg(feature = "bench-kernels")]
    Int8(super::int8::Int8Weights),
}

impl PackedConv {
    /// `w` is row-major [c_out, c_in, taps]. A layer too narrow for the bf16 blocks (fewer
    /// output channels than one block has rows) keeps `f32`.
    pub(super) fn new(w: &[f32], c_out: usize, c_in: usize, taps: usize, p: Precision) -> Self {
        match p {
            Precision::Bf16 if super::bf16::worth_it(c_out, bf16_isa()) => PackedConv::Bf16(
                super::bf16::Bf16Weights::new(w, c_out, c_in, taps, bf16_isa()),
            ),
            #[cfg(feature = "bench-kernels")]
            Precision::Int8 if c_out >= 8 => {
                PackedConv::Int8(super::int8::Int8Weights::new(w, c_out, c_in, taps))
            }
            _ => PackedConv::F32(super::direct::PackedWeights::new(w, c_out, c_in, taps)),
        }
    }

    pub(super) fn has_shape(&self, c_out: usize, c_in: usize, taps: usize) -> bool {
        match self {
            PackedConv::F32(w) => w.has_shape(c_out, c_in, taps),
            PackedConv::Bf16(w) => w.has_shape(c_out, c_in, taps),
            #[cfg(feature = "bench-kernels")]
            PackedConv::Int8(w) => w.has_shape(c_out, c_in, taps),
        }
    }
}
