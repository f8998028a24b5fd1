//! OmniVoice (k2-fsa, "Towards Omnilingual Zero-Shot Text-to-Speech with Diffusion Language
//! Models") in candle: so far its network, the forward of masked iterative decoding, and its
//! codec's decoder ([`CodecDecoder`], the Higgs-Audio-v2 tokenizer's ids to 24 kHz audio).
//!
//! Generation ([`OmniVoice::generate`], [`generate`]) fills T masked audio frames × 8 codebooks
//! over 32 steps; each step is one [`OmniVoice::forward`] over a batch of conditional rows
//! (language, instruct and text tokens, an optional reference, then the frames) and
//! unconditional rows (the frames alone) for classifier-free guidance. How many frames a text
//! gets is [`target_frames`]; the prompt's tokens (the tokenizer) are not here yet. The batch is packed ([`backbone`]): the rows lie one
//! after another, without the padding the official code carries.
//!
//! On the CPU, [`OmniVoice::with_precision`] puts the backbone's linear layers and the audio
//! head in bf16 ([`crate::kernels::Precision`]): nearly all of a forward's work.
//!
//! The checkpoint directory is the official one: `config.json` ([`Config`]) and
//! `model.safetensors`, and the codec's `audio_tokenizer/{config.json, model.safetensors}`
//! ([`CodecConfig`]).

mod backbone;
mod codec;
mod config;
mod duration;
mod generate;
mod model;
mod post;
#[cfg(test)]
mod tests;

pub use codec::{CodecConfig, CodecDecoder};
pub use config::{BackboneConfig, Config, ConfigError};
pub use duration::target_frames;
pub use generate::{schedule, Decoding, Prompt};
pub use model::OmniVoice;
pub use post::PostProcess;
