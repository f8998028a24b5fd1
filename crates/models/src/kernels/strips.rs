//! The decoder's multi-receptive-field fusion, strip by strip, on the CPU.
//!
//! After each upsampling, HiFi-GAN sums several residual blocks over the same long signal
//! (32 channels × 64 k samples = 8 MiB at the last stage). Run layer by layer, each of a stage's
//! convolutions streams its input, residual and output through main memory, and the narrow late
//! stages become memory-bound: the direct kernel reaches ≈ 30 GMAC/s there against ≈ 48 on the
//! same shapes once they fit in cache. Here a stage runs on strips of a few thousand samples:
//! every block's convolutions run on one strip (plus the halo its later convolutions read) while
//! it is in L2, and the block adds its result straight into the stage's output. Halos are
//! recomputed — a few percent of extra arithmetic for the last stages.

use super::precision::{conv1d_rows, Conv};
use super::rows::{Rows, RowsMut, SampleMap};

/// Floats of one strip buffer (a block's running signal over strip + halo): ~256 KiB, so the
/// three a block uses stay in a 1 MiB L2.
const STRIP_FLOATS: usize = 64 * 1024;

/// One convolution of a residual unit: LeakyReLU(slope) and the mask apply to its input;
/// `padding` keeps the length.
#[derive(Debug, Clone, Copy)]
pub(super) struct UnitConv<'a> {
    pub conv: Conv<'a>,
    pub padding: usize,
}

/// A residual unit `x ← x + convs(x)`: its convolutions in order.
pub(super) type Unit<'a> = Vec<UnitConv<'a>>;

/// Whether strips pay off for a stage of `channels` × `len`: only once its signals outgrow L2.
pub(super) fn worth_it(channels: usize, len: usize) -> bool {
    channels * len > 4 * STRIP_FLOATS
}

/// A block's running signal: columns `start..start + len`, in `y` or a strip buffer.
#[derive(Debug, Clone, Copy)]
struct Signal {
    /// Index of the strip buffer, or `None` for the stage input.
    buf: Option<usize>,
    start: usize,
    len: usize,
}

/// `out = Σ_blocks block(y)` for one batch item, where each block is a chain of residual units.
/// `y` and `out` are [channels, len]; `mask` (one value per column) applies to every
/// convolution's input. The first block writes every value of `out` (which may start
/// uninitialized), later blocks add to it.
pub(super) fn stage_sum(
    out: &mut [std::mem::MaybeUninit<f32>],
    y: &[f32],
    channels: usize,
    len: usize,
    blocks: &[Vec<Unit<'_>>],
    mask: Option<&[f32]>,
) {
    assert_eq!(y.len(), channels * len);
    assert_eq!(out.len(), channels * len);
    // The first block's last convolution is what initializes `out`.
    assert!(blocks
        .first()
        .is_some_and(|b| b.last().is_some_and(|u| !u.is_empty())));
    let halo_of = |block: &Vec<Unit>| -> usize { block.iter().flatten().map(|l| l.padding).sum() };
    let halo = blocks.iter().map(halo_of).max().unwrap_or(0);
    let strip = (STRIP_FLOATS / channels).saturating_sub(2 * halo).max(256);
    let capacity = strip + 2 * halo;
    let mut bufs: [Vec<f32>; 3] = std::array::from_fn(|_| vec![0f32; channels * capacity]);
    let y_rows = Rows::contiguous(y, len);
    for s0 in (0..len).step_by(strip) {
        let s1 = (s0 + strip).min(len);
        for (j, block) in blocks.iter().enumerate() {
            // What the convolutions after the current one still read beyond the strip.
            let mut later = halo_of(block);
            let mut cur = Signal {
                buf: None,
                start: s0.saturating_sub(later),
                len: (s1 + later).min(len) - s0.saturating_sub(later),
            };
            for (u, unit) in block.iter().enumerate() {
                let unit_in = cur;
                for (v, layer) in unit.iter().enumerate() {
                    later -= layer.padding;
                    let r0 = s0.saturating_sub(later);
                    let r1 = (s1 + later).min(len);
                    let closes_unit = v + 1 == unit.len();
                    let closes_block = closes_unit && u + 1 == block.len();
                    let target = (0..3)
                        .find(|&b| Some(b) != cur.buf && Some(b) != unit_in.buf)
                        .expect("three buffers, at most two in use");
                    let [b0, b1, b2] = &mut bufs;
                    let (write, others): (&mut Vec<f32>, [(usize, &Vec<f32>); 2]) = match target {
                        0 => (b0, [(1, b1), (2, b2)]),
                        1 => (b1, [(0, b0), (2, b2)]),
                        _ => (b2, [(0, b0), (1, b1)]),
                    };
                    let rows_of = |s: Signal| -> Rows {
                        match s.buf {
                            None => y_rows.window(s.start, s.len),
                            Some(b) => {
                                let data = others.iter().find(|(i, _)| *i == b).expect("in use").1;
                                Rows {
                                    data,
                                    stride: capacity,
                                    len: s.len,
                                }
                            }
                        }
                    };
                    let input = rows_of(cur);
                    let residual =
                        closes_unit.then(|| rows_of(unit_in).window(r0 - unit_in.start, r1 - r0));
                    let conv = Conv {
                        map: SampleMap {
                            mask: mask.map(|m| &m[cur.start..cur.start + cur.len]),
                            ..layer.conv.map
                        },
                        ..layer.conv
                    };
                    let offset = r0 as isize - layer.padding as isize - cur.start as isize;
                    let residuals = residual.as_slice();
                    if closes_block {
                        debug_assert_eq!((r0, r1), (s0, s1));
                        let target = RowsMut::uninit(&mut out[s0..], len, s1 - s0);
                        conv1d_rows(target, j > 0, input, offset, &conv, residuals);
                    } else {
                        let rows = RowsMut::new(write, capacity, r1 - r0);
                        conv1d_rows(rows, false, input, offset, &conv, residuals);
                        cur = Signal {
                            buf: Some(target),
                            start: r0,
                            len: r1 - r0,
                        };
                    }
                }
            }
        }
    }
}
