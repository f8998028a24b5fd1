//! Which code path each kernel runs on this CPU, for logs and tests.
//!
//! The kernels choose their instruction sets at run time (capped by `OMNIVOICE_KERNEL_ISA`,
//! see [`super::isa`]), so a log line or a test failure means little without knowing which
//! ones ran: [`isa_report`] says.

use super::isa::{self, Level};
use super::{bf16, block, fast_math};

/// The level of each run-time choice in the kernels.
#[derive(Debug, Clone, Copy)]
pub(super) struct Paths {
    pub cap: Level,
    /// The `f32` direct convolution's register blocks.
    pub direct: Level,
    /// `tanh`, the WaveNet gate, softmax and GELU.
    pub elementwise: Level,
    /// The bf16 direct convolution's blocks.
    pub bf16: Level,
    /// The int8 direct convolution's blocks.
    pub int8: Level,
}

impl Paths {
    pub(super) fn in_use() -> Self {
        Self {
            cap: isa::cap(),
            direct: block::level(),
            elementwise: fast_math::level(),
            bf16: bf16::bf16_isa().level(),
            int8: super::int8::int8_isa().level(),
        }
    }

    /// Every path's level, named.
    pub(super) fn levels(&self) -> Vec<(&'static str, Level)> {
        vec![
            ("f32 convolutions", self.direct),
            ("elementwise", self.elementwise),
            ("bf16 convolutions", self.bf16),
            ("int8 convolutions", self.int8),
        ]
    }
}

/// How a path at `level` runs.
fn describe(level: Level) -> &'static str {
    match level {
        Level::Portable => "portable",
        Level::Avx2 => "AVX2+FMA",
        Level::Avx512 => "AVX-512",
        Level::Amx => "AMX",
    }
}

/// One line naming the code path each kernel runs on this CPU, and the cap that applies:
/// `kernel paths (OMNIVOICE_KERNEL_ISA unset): f32 convolutions AVX-512, elementwise AVX2+FMA,
/// bf16 convolutions AMX; matrix products: the gemm crate's own choice (not capped)`.
pub fn isa_report() -> String {
    let paths = Paths::in_use();
    let cap = match std::env::var(isa::VARIABLE) {
        Ok(value) if !value.trim().is_empty() => {
            format!("{}={value} → at most {}", isa::VARIABLE, paths.cap.name())
        }
        _ => format!("{} unset", isa::VARIABLE),
    };
    let each: Vec<String> = paths
        .levels()
        .into_iter()
        .map(|(name, level)| format!("{name} {}", describe(level)))
        .collect();
    format!(
        "kernel paths ({cap}): {}; matrix products: the gemm crate's own choice (not capped)",
        each.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Precision;

    /// Every path stays at or below the cap, and a cap of `portable` leaves no hardware path
    /// at all (run under each cap by `scripts/test.sh`, and under `portable` by the test
    /// below).
    #[test]
    fn paths_stay_under_the_cap() {
        let report = isa_report();
        eprintln!("{report}");
        let paths = Paths::in_use();
        if let Ok(value) = std::env::var(isa::VARIABLE) {
            if let Some(level) = Level::parse(&value) {
                assert_eq!(paths.cap, level, "{} not honoured", isa::VARIABLE);
            }
        }
        for (name, level) in paths.levels() {
            assert!(level <= paths.cap, "{name} runs {level:?} above the cap");
            assert!(report.contains(&format!("{name} {}", describe(level))));
        }
        if paths.cap == Level::Portable {
            assert!(paths.levels().iter().all(|(_, l)| *l == Level::Portable));
            assert!(!Precision::Bf16.has_hardware());
            assert_eq!(Precision::auto(), Precision::F32);
            assert!(Precision::Bf16.describe().contains("portable"));
        }
    }

    /// `OMNIVOICE_KERNEL_ISA=portable` really moves every path: the test above, run again in a
    /// child process of this test binary with the cap set.
    #[test]
    fn forcing_portable_changes_every_path() {
        let module = module_path!().split_once("::").expect("crate::module").1;
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([&format!("{module}::paths_stay_under_the_cap"), "--exact"])
            .args(["--nocapture", "--test-threads=1"])
            .env(isa::VARIABLE, "portable")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("1 passed"),
            "the child ran no test: {stdout}"
        );
        assert!(
            stderr.contains("at most portable): f32 convolutions portable, elementwise portable"),
            "{stderr}"
        );
    }
}
