//! VITS inference in candle (the model behind Piper voices).
//!
//! A voice loads in the crate's one shape: its [`Weights`] read from Piper's `.onnx` file
//! ([`Weights::from_onnx`]) or from the safetensors this module writes
//! ([`Weights::from_safetensors`]), its [`VitsConfig`] read off those weights and the voice's
//! `.onnx.json` ([`VitsConfig::from_weights`]), then [`Vits::load`]`(&config, weights)`.
//! It runs the VITS inference path: text encoder → duration predictor → monotonic
//! expansion → prior sample → reverse flow → HiFi-GAN decoder. Batches of different lengths
//! are padded and masked so that each item's audio matches its single-item run, and every item
//! draws its noise from its own seeded generator so a seed reproduces the same audio.
//! [`Vits::synthesize_windowed`] (in `streaming`) computes one item's flow and decoder window
//! by window instead, so its first audio is ready long before the rest.

pub mod config;
mod duration;
mod flow;
mod generator;
mod layers;
mod model;
mod onnx;
mod spline;
mod streaming;
mod text_encoder;
mod weights;

pub use config::{DecoderConfig, DurationPredictorConfig, FlowConfig, ResBlockKind, VitsConfig};
pub use layers::Reach;
pub use model::{frames_for_speed, Sampling, TimedAudio, Vits, VitsInput};
pub use streaming::{ReceptiveField, Windowed};
pub use weights::Weights;

#[cfg(test)]
mod tests;
