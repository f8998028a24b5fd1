//! The instruction sets the kernels may use: what this CPU has, capped by
//! `OMNIVOICE_KERNEL_ISA`.
//!
//! Each kernel picks its widest code path at run time, so on a CPU with AMX the AVX-512, AVX2
//! and portable paths would never run, in tests or anywhere else. Setting
//! `OMNIVOICE_KERNEL_ISA` to `portable`, `avx2`, `avx512` or `amx` means "use at most this":
//! every run-time choice in the kernels asks here, so one machine can test every path below its
//! best. The variable is read once per process. The `gemm` crate's matrix products (the
//! pointwise and grouped convolutions, the attention) pick their own instructions and cannot be
//! capped.

use std::sync::OnceLock;

/// The environment variable that caps the instruction sets.
pub(super) const VARIABLE: &str = "OMNIVOICE_KERNEL_ISA";

/// The kernels' instruction-set levels, lowest first; each includes what the ones below need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Level {
    /// Plain Rust.
    Portable,
    /// AVX2 with FMA.
    Avx2,
    /// AVX-512 (with its bf16 and VNNI dot products where the CPU has them).
    Avx512,
    /// AMX tiles.
    Amx,
}

impl Level {
    pub(super) fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
            Level::Amx => "amx",
        }
    }

    /// A value of [`VARIABLE`] (any case, surrounding spaces ignored).
    pub(super) fn parse(value: &str) -> Option<Level> {
        let value = value.trim().to_ascii_lowercase();
        [Level::Portable, Level::Avx2, Level::Avx512, Level::Amx]
            .into_iter()
            .find(|level| level.name() == value)
    }
}

/// The highest level the kernels may use: [`VARIABLE`]'s, or [`Level::Amx`] (no cap) when it
/// is unset, empty or not understood (then a warning says so; the kernels still run).
pub(super) fn cap() -> Level {
    static CAP: OnceLock<Level> = OnceLock::new();
    *CAP.get_or_init(|| match std::env::var(VARIABLE) {
        Ok(value) if !value.trim().is_empty() => Level::parse(&value).unwrap_or_else(|| {
            tracing::warn!(
                "{VARIABLE}={value:?} is none of portable, avx2, avx512, amx: not capping the \
                 kernels' instruction sets"
            );
            Level::Amx
        }),
        _ => Level::Amx,
    })
}

/// Whether the cap lets the kernels use `level`.
pub(super) fn allows(level: Level) -> bool {
    level <= cap()
}

/// AVX2 and FMA, if this CPU has them and the cap allows.
pub(super) fn avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        allows(Level::Avx2) && is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// AVX-512 Foundation, if this CPU has it and the cap allows.
pub(super) fn avx512f() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        allows(Level::Avx512) && is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// AVX-512 Foundation and its byte/word instructions (BW), if this CPU has them and the cap
/// allows.
pub(super) fn avx512_bw() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512f() && is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// AVX-512 with the bf16 dot product (and the byte/word ops the bf16 input packing uses), if
/// this CPU has them and the cap allows.
pub(super) fn avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512f() && is_x86_feature_detected!("avx512bw") && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// AVX-512 with the VNNI int8 dot product, if this CPU has them and the cap allows.
pub(super) fn avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512f() && is_x86_feature_detected!("avx512bw") && is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The VEX-encoded (256-bit) VNNI int8 dot product, AVX-VNNI, beside AVX2, if this CPU has
/// them and the cap allows (AVX-VNNI belongs to the AVX2 level: CPUs without AVX-512 have it).
pub(super) fn avx_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx2_fma() && is_x86_feature_detected!("avxvnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_values() {
        assert_eq!(Level::parse("portable"), Some(Level::Portable));
        assert_eq!(Level::parse(" AVX2 "), Some(Level::Avx2));
        assert_eq!(Level::parse("avx512"), Some(Level::Avx512));
        assert_eq!(Level::parse("amx"), Some(Level::Amx));
        assert_eq!(Level::parse("sse2"), None);
        assert!(Level::Portable < Level::Avx2 && Level::Avx512 < Level::Amx);
    }
}
