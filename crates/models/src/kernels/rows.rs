//! The slice views every direct kernel reads and writes, and the input map they fuse.
//!
//! The `f32`, bf16 and int8 kernels, the strip-wise stage and the routing over them all speak
//! in these types, so they live below all of them: a kernel imports them, never another
//! kernel or the routing that sits on top.

use std::mem::MaybeUninit;

/// What happens to each input value before the convolution sees it:
/// `v ↦ LeakyReLU(v · scale) · mask[t]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct SampleMap<'a> {
    pub scale: f32,
    /// Negative-side slope of a LeakyReLU, if any (0 ≤ slope ≤ 1).
    pub leaky_slope: Option<f32>,
    /// One weight per input sample, indexed like the input's columns, shared by all channels.
    pub mask: Option<&'a [f32]>,
    /// Kokoro's `Snake(AdaIN(·))` per input channel, applied last, its statistics taken
    /// beforehand (`channels[ci]` for channel `ci`). The int8 and bf16 kernels apply it as
    /// they read their input; the routing ([`super::cpu`]) applies it to the tensor first
    /// for the `f32` ones.
    pub channels: Option<&'a [ChannelSnake]>,
}

impl SampleMap<'_> {
    /// The map that leaves every value as it is.
    pub const IDENTITY: SampleMap<'static> = SampleMap {
        scale: 1.0,
        leaky_slope: None,
        mask: None,
        channels: None,
    };

    /// Whether everything before the channel map leaves a value as it is.
    pub(super) fn is_identity_before_channels(&self) -> bool {
        self.scale == 1.0 && self.leaky_slope.is_none() && self.mask.is_none()
    }

    /// `dst[j] = map(src[j])` for the samples starting at `t0`, one loop per case so each
    /// vectorizes.
    pub(super) fn apply_slice(&self, dst: &mut [f32], src: &[f32], t0: usize) {
        let scale = self.scale;
        match (self.leaky_slope, self.mask) {
            (None, None) => dst.iter_mut().zip(src).for_each(|(d, &v)| *d = v * scale),
            (Some(s), None) => dst.iter_mut().zip(src).for_each(|(d, &v)| {
                let v = v * scale;
                *d = v.max(v * s);
            }),
            (None, Some(m)) => {
                for ((d, &v), &m) in dst.iter_mut().zip(src).zip(&m[t0..]) {
                    *d = v * scale * m;
                }
            }
            (Some(s), Some(m)) => {
                for ((d, &v), &m) in dst.iter_mut().zip(src).zip(&m[t0..]) {
                    let v = v * scale;
                    *d = v.max(v * s) * m;
                }
            }
        }
    }

    #[cfg(test)]
    pub(super) fn apply(&self, v: f32, t: usize) -> f32 {
        let v = v * self.scale;
        let v = match self.leaky_slope {
            Some(s) => v.max(v * s),
            None => v,
        };
        match self.mask {
            Some(m) => v * m[t],
            None => v,
        }
    }
}

/// A [channels, len] signal in row-major storage whose rows are `stride` floats apart.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rows<'a> {
    pub data: &'a [f32],
    pub stride: usize,
    pub len: usize,
}

impl<'a> Rows<'a> {
    /// A contiguous [channels, len] signal.
    pub fn contiguous(data: &'a [f32], len: usize) -> Self {
        Self {
            data,
            stride: len,
            len,
        }
    }

    /// Columns `from..from + len` of every row.
    pub fn window(&self, from: usize, len: usize) -> Rows<'a> {
        assert!(from + len <= self.len && self.len <= self.stride);
        Rows {
            data: &self.data[from.min(self.data.len())..],
            stride: self.stride,
            len,
        }
    }

    /// Whether `channels` rows of `len` values fit in `data`.
    pub(super) fn holds(&self, channels: usize) -> bool {
        channels == 0 || self.data.len() >= (channels - 1) * self.stride + self.len
    }
}

/// The output of a convolution: [channels, len] with rows `stride` floats apart. Values may be
/// uninitialized unless the convolution accumulates into them.
pub(super) struct RowsMut<'a> {
    pub(super) data: &'a mut [MaybeUninit<f32>],
    pub(super) stride: usize,
    pub(super) len: usize,
}

impl<'a> RowsMut<'a> {
    pub fn new(data: &'a mut [f32], stride: usize, len: usize) -> Self {
        // SAFETY: f32 and MaybeUninit<f32> share layout, and every value the slice holds is
        // initialized; writes through the result only ever store initialized f32s.
        let data = unsafe { &mut *(data as *mut [f32] as *mut [MaybeUninit<f32>]) };
        Self::uninit(data, stride, len)
    }

    /// For a fresh buffer: a convolution that does not accumulate writes every value of it.
    pub fn uninit(data: &'a mut [MaybeUninit<f32>], stride: usize, len: usize) -> Self {
        assert!(len <= stride);
        Self { data, stride, len }
    }

    pub(super) fn holds(&self, channels: usize) -> bool {
        channels == 0 || self.data.len() >= (channels - 1) * self.stride + self.len
    }
}

/// Row-major values whose rows (one per position) are `stride` apart: a view of some columns
/// of a wider matrix (a head within q, or q, k or v within a joint projection's output)
/// without a copy. Row `i`'s values start at `data[i · stride]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub data: &'a [f32],
    pub stride: usize,
}

impl<'a> Strided<'a> {
    /// Whether `n` rows of `width` values lie inside.
    pub(super) fn holds(&self, n: usize, width: usize) -> bool {
        width <= self.stride && (n == 0 || (n - 1) * self.stride + width <= self.data.len())
    }

    /// Row `i`'s first `width` values.
    pub(super) fn row(&self, i: usize, width: usize) -> &'a [f32] {
        &self.data[i * self.stride..][..width]
    }

    /// The same rows from row `first` on, from column `column` on.
    pub(super) fn from(self, first: usize, column: usize) -> Self {
        Self {
            data: &self.data[first * self.stride + column..],
            stride: self.stride,
        }
    }
}

/// `out` as the `MaybeUninit` slice an output pointer is made from: the same memory (the
/// layouts are the same), into which a kernel writes only initialised values.
pub(super) fn as_uninit(out: &mut [f32]) -> &mut [MaybeUninit<f32>] {
    // SAFETY: `MaybeUninit<f32>` has `f32`'s layout, and every value of `out` is initialised;
    // the kernels given the result write only initialised values into it.
    unsafe { &mut *(out as *mut [f32] as *mut [MaybeUninit<f32>]) }
}

/// A per-channel affine map `x ↦ scale·x + shift`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Affine {
    pub scale: f32,
    pub shift: f32,
}

/// One channel's parameters of Kokoro's `Snake(AdaIN(x))`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AdainSnake {
    pub affine: Affine,
    pub alpha: f32,
    pub inv_alpha: f32,
}

/// One channel's `Snake(AdaIN(x))` with the instance norm's statistics of its input taken
/// ([`super::fast_math::channel_snakes`]): what is left is elementwise, so a convolution applies it to its input
/// as it reads it ([`super::InputMap::channel_snakes`]) instead of a pass of its own that
/// writes the whole signal once more.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChannelSnake {
    pub(super) mean: f32,
    pub(super) inv_std: f32,
    pub(super) params: AdainSnake,
}
