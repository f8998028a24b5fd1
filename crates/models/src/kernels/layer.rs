//! What a model layer hands the kernels besides its tensors: the elementwise map fused into a
//! convolution's input, the caches that keep its weights packed, and a residual stack's
//! convolutions.
//!
//! These are the routing's ([`super::dispatch`]) argument types and also what the paths below
//! it ([`super::cpu`]) read, so they live in neither.

use std::sync::{Arc, OnceLock};

use candle_core::{Result, Tensor};

use super::precision::{PackedConv, Precision};
use super::rows::ChannelSnake;

/// An elementwise map fused into a convolution's input: `x ↦ LeakyReLU(x · scale) · mask`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InputMap<'a> {
    pub scale: f64,
    /// Negative-side slope of a LeakyReLU applied after scaling (0 ≤ slope ≤ 1), if any.
    pub leaky_slope: Option<f64>,
    /// `[B, 1, L_in]` sequence mask, if any.
    pub mask: Option<&'a Tensor>,
    /// Kokoro's `Snake(AdaIN(·))` per input channel, applied last (see
    /// [`super::fast_math::channel_snakes`]): fused into the int8 and bf16 kernels' input,
    /// applied to the tensor first on every other path.
    pub channels: Option<&'a [ChannelSnake]>,
}

impl InputMap<'_> {
    /// Leaves the input as it is.
    pub const IDENTITY: InputMap<'static> = InputMap {
        scale: 1.0,
        leaky_slope: None,
        mask: None,
        channels: None,
    };

    /// The map as tensor ops, for the paths that do not fuse it.
    pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = if self.scale == 1.0 {
            x.clone()
        } else {
            (x * self.scale)?
        };
        if let Some(slope) = self.leaky_slope {
            x = x.maximum(&(&x * slope)?)?;
        }
        if let Some(m) = self.mask {
            x = x.broadcast_mul(m)?;
        }
        match self.channels {
            // A host kernel: on another device the signal makes a round trip.
            Some(channels) => {
                let host = x.to_device(&candle_core::Device::Cpu)?;
                super::fast_math::apply_channel_snakes(&host, channels)?.to_device(x.device())
            }
            None => Ok(x),
        }
    }

    /// Only the channels' `Snake(AdaIN(·))`.
    pub(crate) fn channel_snakes(channels: &[ChannelSnake]) -> InputMap<'_> {
        InputMap {
            channels: Some(channels),
            ..InputMap::IDENTITY
        }
    }
}

/// The direct kernel's copy of a layer's convolution weights in the layer's precision, made
/// on first CPU use and kept with the layer: the weights never change after loading, so
/// repacking (and for bf16, converting) them on every call (megabytes per utterance in the
/// flow) is wasted work. Clones share the copy.
#[derive(Debug, Clone, Default)]
pub(crate) struct PackedWeightCache {
    pub(super) packed: Arc<OnceLock<PackedConv>>,
    pub(super) precision: Precision,
    /// Whether `f32` sums may go through the layer's spectra where faster (at several times
    /// the weights' memory: see [`super::spectral`]).
    pub(super) spectral: bool,
}

impl PackedWeightCache {
    /// An empty cache whose weights will be packed for `precision`.
    pub(crate) fn new(precision: Precision) -> Self {
        Self {
            packed: Arc::default(),
            precision,
            spectral: false,
        }
    }

    /// [`PackedWeightCache::new`] for a layer whose `f32` sums may run through its spectra.
    pub(crate) fn spectral(precision: Precision) -> Self {
        Self {
            spectral: true,
            ..Self::new(precision)
        }
    }

    pub(crate) fn precision(&self) -> Precision {
        self.precision
    }
}

/// [`PackedWeightCache`] for a transposed convolution: one packed weight per phase (`None` for
/// a phase without taps).
#[derive(Debug, Clone, Default)]
pub(crate) struct PackedPhaseCache {
    pub(super) phases: Arc<OnceLock<Vec<Option<PackedConv>>>>,
    pub(super) precision: Precision,
}

impl PackedPhaseCache {
    pub(crate) fn new(precision: Precision) -> Self {
        Self {
            phases: Arc::default(),
            precision,
        }
    }
}

/// One convolution of a residual stack (see [`super::dispatch::residual_stack_sum`]), borrowed from its layer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackConv<'a> {
    /// [C, C, K]
    pub weight: &'a Tensor,
    pub bias: Option<&'a Tensor>,
    pub padding: usize,
    pub dilation: usize,
    pub cache: &'a PackedWeightCache,
}
