//! The neural text-to-speech models behind omnivoice-server, in candle.
//!
//! A crate of its own, as candle-transformers stands apart from any server: it knows nothing of
//! HTTP, requests, engines or async runtimes, and the server depends on it, never the reverse.
//! One module per model ([`vits`], the model behind Piper voices; [`kokoro`], Kokoro-82M;
//! [`omnivoice`], OmniVoice's network and codec; [`hubert`], the semantic model of
//! OmniVoice's codec), the CPU arithmetic they all share ([`kernels`]), and the scheduler that
//! lends idle cores to a computation ([`spare`]).
//!
//! # One shape
//!
//! Every model is loaded the same way, in the manner of candle-transformers:
//!
//! 1. its config, read from the checkpoint: [`omnivoice::Config::from_file`] (`config.json`),
//!    [`omnivoice::CodecConfig::from_file`], a [`hubert::HubertConfig`] deserialized from its
//!    JSON, [`vits::VitsConfig::from_weights`] (a Piper export holds no config: the sizes are
//!    read off the tensors and the `.onnx.json`), [`kokoro::Config::v1_0`] (the ONNX files
//!    hold none either; every convolution the graph describes is checked against it);
//! 2. its weights, built by a named function from a file, carrying the device (and dtype):
//!    a `candle_nn::VarBuilder` for the safetensors checkpoints
//!    (`VarBuilder::from_mmaped_safetensors`), the model's own `Weights` for the ONNX ones
//!    ([`vits::Weights::from_onnx`], [`vits::Weights::from_safetensors`],
//!    [`kokoro::Weights::from_onnx`]), which restore the state-dict names;
//! 3. `Model::load(&config, weights)`: [`vits::Vits::load`], [`kokoro::Kokoro::load`],
//!    [`omnivoice::OmniVoice::load`] (and the codec's [`omnivoice::CodecDecoder::load`]),
//!    [`hubert::Hubert::load`].
//!
//! Every load, and every config read, fails with the one [`ModelError`], which names the file
//! and the tensor; errors about what a request asks for (an OmniVoice instruct, a reference
//! clip) stay with their model. Each model then runs by `forward`-style methods whose doc
//! comments give the tensors' shapes, and most can move their heavy layers to a reduced
//! precision on the CPU (`with_precision`). [`omnivoice::Tts`] is not a model but the whole
//! OmniVoice pipeline over a checkpoint directory (network, codec, tokenizer), loaded by
//! [`omnivoice::Tts::load`]`(dir, dtype, device)`.
//!
//! What more than one model loads is written once: the weight-norm loader and the fused
//! same-padding convolution (`layers`), the ONNX reader (`onnx`), and the error (`error`).

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
