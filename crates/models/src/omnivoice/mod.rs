//! OmniVoice (k2-fsa, "Towards Omnilingual Zero-Shot Text-to-Speech with Diffusion Language
//! Models") in candle: so far its network, the forward of masked iterative decoding, and its
//! codec's decoder ([`CodecDecoder`], the Higgs-Audio-v2 tokenizer's ids to 24 kHz audio).
//!
//! [`Tts`] is the whole official `generate` (voice design, auto voice, and cloning from a
//! [`Reference`]) over a checkpoint directory: the text handling ([`combine_text`],
//! [`chunk_text`], [`cross_fade`]), the instruct and language rules ([`resolve_instruct`],
//! [`resolve_language`]), the tokenizer's prompt, chunking of long texts, decoding and
//! post-processing. [`prepare_reference`] readies a clip for the codec's encoder as the
//! official `create_voice_clone_prompt` does.
//!
//! Generation ([`OmniVoice::generate`], [`generate`]) fills T masked audio frames × 8 codebooks
//! over 32 steps; each step is one [`OmniVoice::forward`] over a batch of conditional rows
//! (language, instruct and text tokens, an optional reference, then the frames) and
//! unconditional rows (the frames alone) for classifier-free guidance. How many frames a text
//! gets is [`target_frames`]. The batch is packed ([`backbone`]): the rows lie one
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
mod encoder;
mod generate;
mod instruct;
mod manifest;
mod model;
mod packed_layer;
mod post;
mod reference;
#[cfg(test)]
mod reference_tests;
mod resample;
mod stream;
#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;
mod text;
#[cfg(test)]
mod text_tests;
mod tts;

pub use codec::{CodecConfig, CodecDecoder};
pub use config::{BackboneConfig, Config};
pub use duration::target_frames;
pub use encoder::{CodecEncoder, EncoderConfig};
pub use generate::{schedule, Decoder, Decoding, Draw, Noise, Prompt, Utterance};
pub use instruct::{
    instruct_categories, is_none_literal, languages, resolve_instruct, resolve_language,
    InstructCategory, InstructError, LanguageError, UnknownItem,
};
pub use model::OmniVoice;
pub use post::{PostProcess, Streamed};
pub use reference::{prepare_reference, PreparedReference, ReferenceError};
pub use resample::resample;
pub use stream::{FIRST_PIECE_MAX_CHARS, FIRST_PIECE_MIN_CHARS};
pub use text::{
    chunk_text, combine_text, cross_fade, first_piece, unknown_nonverbal_tags, NONVERBAL_TAGS,
};
pub use tts::{Generation, Prepared, Reference, Request, RequestError, Spoken, Tts};
