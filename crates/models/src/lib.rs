//! The neural text-to-speech models behind omnivoice-server, in candle.
//!
//! A crate of its own, as candle-transformers stands apart from any server: it knows nothing of
//! HTTP, requests, engines or async runtimes, and the server depends on it, never the reverse.
//! One module per model ([`vits`], the model behind Piper voices; [`kokoro`], Kokoro-82M;
//! [`omnivoice`], OmniVoice's network; [`hubert`], the semantic model of OmniVoice's codec),
//! the CPU arithmetic they all share ([`kernels`]), and the scheduler that lends idle cores
//! to a computation ([`spare`]).

mod error;
pub mod hubert;
pub mod kernels;
pub mod kokoro;
mod layers;
pub mod omnivoice;
mod onnx;
pub mod spare;
pub mod vits;

pub use error::ModelError;

/// What the model tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use candle_core::Tensor;

    /// The largest absolute difference between two tensors of one shape.
    pub(crate) fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
        assert_eq!(a.dims(), b.dims());
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }
}
