//! The whole of the official `OmniVoice.generate` for voice design, auto voice and voice
//! cloning, as one value a server holds: a checkpoint directory loaded once, requests checked
//! up front (so that a bad one is refused before any model work), and batches synthesized as
//! the official code does them.
//!
//! A voice to clone comes as a [`Reference`]: the codes the codec made of a clip prepared by
//! [`super::prepare_reference`], its transcript and its RMS, as the official
//! `VoiceClonePrompt`. Its text goes before the item's, its frames before the generated ones,
//! it sets the length estimate, and a quiet one scales the output down.
//!
//! A batch runs as the official one: items whose estimate fits `audio_chunk_threshold` are
//! generated whole; longer ones are cut into chunks at punctuation and their audio
//! cross-faded. With a reference every chunk is generated with it; without one the first chunk
//! is generated alone and every later one with the first's text and frames as its reference.
//! Each round (whole items and first chunks, then each later chunk index) is one batched
//! decoding, whatever each item's reference and settings, by the model itself or by a
//! [`Decoder`] that steps them with other work. Every item draws its noise from a generator of
//! its own seed, so its audio does not depend on what else is in the batch.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;

use super::instruct::{resolve_instruct, resolve_language, InstructError, LanguageError};
use super::manifest::Manifest;
use super::text::{chunk_text, combine_text, cross_fade, is_cjk, py_strip, split_nonverbal};
use crate::error::{read_text, ModelError};
use crate::kernels::Precision;

use super::codec::{CodecConfig, CodecDecoder};
use super::config::Config;
use super::duration::target_frames;
use super::encoder::{CodecEncoder, EncoderConfig};
use super::generate::{Decoder, Decoding, Prompt};
use super::model::OmniVoice;
use super::post::PostProcess;
use super::reference::{prepare_reference, PreparedReference, ReferenceError};
use super::resample::resample;

/// The network, its codec and its tokenizer, from one checkpoint directory.
pub struct Tts {
    model: OmniVoice,
    codec: CodecDecoder,
    tokenizer: tokenizers::Tokenizer,
    pub(super) sample_rate: u32,
    pub(super) frame_rate: u32,
    /// The codec's weights file and device, for its encoder: loaded with the first clip to
    /// clone (HuBERT alone is 95 M parameters a server without clones never needs).
    encoder_source: Option<(PathBuf, EncoderConfig, Device)>,
    encoder: std::sync::Mutex<Option<std::sync::Arc<CodecEncoder>>>,
}

/// A voice to clone: the reference's codes, its transcript and its loudness (the official
/// `VoiceClonePrompt`).
#[derive(Debug, Clone)]
pub struct Reference {
    /// [C, R] integer codes of the codec, C the model's codebooks.
    pub codes: Tensor,
    /// What the reference says, as prepared ([`super::prepare_reference`]).
    pub text: String,
    /// The RMS of the clip before preparation.
    pub rms: f32,
}

/// One utterance to synthesize.
#[derive(Debug, Clone)]
pub struct Request {
    pub text: String,
    /// A language id (`en`) or name (`English`); `None` or the literal `None`: no language.
    pub language: Option<String>,
    /// Voice-design attributes (`female, british accent` or `女，四川话`); `None`: auto voice.
    pub instruct: Option<String>,
    /// Above 1 speaks faster (ignored under a `duration`).
    pub speed: f32,
    /// The length of the speech in seconds, instead of the estimate.
    pub duration: Option<f32>,
    pub generation: Generation,
    /// A voice to clone; `None`: the instruct's voice, or an auto one.
    pub reference: Option<Arc<Reference>>,
    /// An utterance of the same voice spoken before, which this one continues from (its
    /// reference, as the official chunked path makes the first chunk every later one's); a
    /// clone's own reference outranks it.
    pub follows: Option<Arc<Spoken>>,
}

/// An utterance already spoken, which later ones continue from in the same voice: its text
/// and frames. It sets their voice and their pace, not their level (each is leveled as the
/// first was).
#[derive(Debug, Clone)]
pub struct Spoken {
    pub text: String,
    /// [C, T] u32, the frames the model generated for it.
    pub codes: Tensor,
}

/// How an utterance is generated; the defaults are the official ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub decoding: Decoding,
    /// `<|denoise|>` before a reference (here: before the first chunk, for later chunks).
    pub denoise: bool,
    /// What the official code does to a cloning reference ([`super::prepare_reference`]'s
    /// `preprocess`: for whoever prepares the reference; synthesis takes it prepared).
    pub preprocess_prompt: bool,
    /// Shorten long pauses and trim the edges of the output.
    pub postprocess_output: bool,
    /// Seconds of speech per chunk of a long text.
    pub audio_chunk_duration: f32,
    /// Texts estimated longer than this many seconds are chunked.
    pub audio_chunk_threshold: f32,
    /// Silence added at each end, seconds.
    pub pad_duration: f32,
    /// Fade in and out, seconds.
    pub fade_duration: f32,
}

impl Default for Generation {
    fn default() -> Self {
        Self {
            decoding: Decoding::default(),
            denoise: true,
            preprocess_prompt: true,
            postprocess_output: true,
            audio_chunk_duration: 15.0,
            audio_chunk_threshold: 30.0,
            pad_duration: 0.1,
            fade_duration: 0.1,
        }
    }
}

/// A checked request, ready to synthesize.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub(super) text: String,
    language: Option<&'static str>,
    instruct: Option<String>,
    pub(super) reference: Option<Arc<Reference>>,
    follows: Option<Arc<Spoken>>,
    /// Target frames of the whole text.
    frames: usize,
    /// The speed later chunks are estimated at (the official `speed_list`).
    chunk_speed: f64,
    generation: Generation,
}

impl Prepared {
    /// The official language id, if any.
    pub fn language(&self) -> Option<&str> {
        self.language
    }

    /// The instruct as the model reads it.
    pub fn instruct(&self) -> Option<&str> {
        self.instruct.as_deref()
    }

    /// Audio frames the whole text gets (before any chunking).
    pub fn frames(&self) -> usize {
        self.frames
    }
}

/// Why a request cannot be synthesized.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Instruct(#[from] InstructError),
    #[error(transparent)]
    Language(#[from] LanguageError),
    #[error("the text is empty")]
    EmptyText,
    #[error("speed must be a positive number, not {0}")]
    Speed(f32),
    #[error("duration must be a positive number of seconds, not {0}")]
    Duration(f32),
    #[error("the reference's codes must be integers shaped [{codebooks}, frames], not {found}")]
    ReferenceShape { codebooks: usize, found: String },
    #[error("the reference has no frames")]
    ReferenceEmpty,
    #[error("the reference has code {code}, outside the codebook of {size}")]
    ReferenceCode { code: i64, size: u32 },
    #[error("the reference's transcript is empty")]
    ReferenceText,
    #[error("the reference's RMS must be a positive number, not {0}")]
    ReferenceRms(f32),
}

/// A user's `f32` as the decimal they wrote, so that `0.4 · 175` truncates as Python's does.
fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// A tokenizer whose ids all fit the model's text vocabulary.
fn check_tokenizer(
    tokenizer: &tokenizers::Tokenizer,
    model: &OmniVoice,
    file: &Path,
) -> std::result::Result<(), ModelError> {
    let text_vocab = model.config().backbone.vocab_size;
    if tokenizer.get_vocab_size(true) > text_vocab {
        return Err(ModelError::format(
            file,
            format!(
                "{} ids, more than the model's text vocabulary of {text_vocab}",
                tokenizer.get_vocab_size(true)
            ),
        ));
    }
    Ok(())
}

/// A codec with a quantizer for every codebook and an entry for every id.
fn check_codec(
    codec: &CodecConfig,
    model: &OmniVoice,
    file: &Path,
) -> std::result::Result<(), ModelError> {
    let c = model.config();
    if codec.num_quantizers != c.num_audio_codebook
        || codec.codebook_size < c.audio_mask_id as usize
    {
        return Err(ModelError::format(
            file,
            format!(
                "{} quantizers of {} entries cannot decode {} codebooks of {} ids",
                codec.num_quantizers, codec.codebook_size, c.num_audio_codebook, c.audio_mask_id
            ),
        ));
    }
    Ok(())
}

/// The sample rate as the official code takes it (`audio_tokenizer/preprocessor_config.json`,
/// the codec's own when that file is absent) and the official `frame_rate`: ceil(the codec's
/// sample rate / hop), a whole number.
fn rates(dir: &Path, codec: &CodecConfig) -> std::result::Result<(u32, u32), ModelError> {
    let frame_rate = codec.sample_rate.div_ceil(codec.hop_length as u32);
    let file = dir.join("audio_tokenizer").join("preprocessor_config.json");
    if !file.exists() {
        return Ok((codec.sample_rate, frame_rate));
    }
    let json: Value =
        serde_json::from_str(&read_text(&file)?).map_err(|e| ModelError::format(&file, e))?;
    let sample_rate = json
        .get("sampling_rate")
        .and_then(Value::as_u64)
        .filter(|&r| r > 0)
        .ok_or_else(|| ModelError::format(&file, "no sampling_rate"))? as u32;
    Ok((sample_rate, frame_rate))
}

impl Tts {
    /// Loads `dir`: `config.json`, `model.safetensors` (computed in `dtype`), `tokenizer.json`
    /// and `audio_tokenizer/{config.json, model.safetensors}` (the codec, always in f32: it
    /// costs little next to the network, and its output is the audio), and the sample rate
    /// from `audio_tokenizer/preprocessor_config.json` as the official code takes it (the
    /// codec's own when that file is absent).
    pub fn load(
        dir: &Path,
        dtype: DType,
        device: &Device,
    ) -> std::result::Result<Self, ModelError> {
        let mut tts = Self::open(dir, dtype, |file, dtype| {
            // SAFETY: the file is mapped read-only and not changed while the model lives, as
            // for every checkpoint loader.
            unsafe { VarBuilder::from_mmaped_safetensors(&[file], dtype, device) }
        })?;
        let codec_dir = dir.join("audio_tokenizer");
        let encoder = EncoderConfig::from_file(&codec_dir.join("config.json"))?;
        let weights = codec_dir.join("model.safetensors");
        tts.encoder_source = Some((weights, encoder, device.clone()));
        Ok(tts)
    }

    /// A clip to clone, prepared as the official `create_voice_clone_prompt` prepares it:
    /// resampled to the codec's rate as torchaudio does, then the loudness, silence and
    /// length rules ([`prepare_reference`]).
    pub fn prepare_reference(
        &self,
        samples: &[f32],
        sample_rate: u32,
        text: &str,
        preprocess: bool,
    ) -> std::result::Result<PreparedReference, ReferenceError> {
        let wave = resample(samples, sample_rate, self.sample_rate);
        prepare_reference(
            &wave,
            self.sample_rate,
            self.codec.config().hop_length,
            text,
            preprocess,
        )
    }

    /// The codes of a prepared clip ([codebooks, frames] u32), by the codec's encoder.
    pub fn encode_reference(&self, prepared: &PreparedReference) -> Result<Tensor> {
        self.encoder()?.encode(&prepared.wave)
    }

    fn encoder(&self) -> Result<std::sync::Arc<CodecEncoder>> {
        let mut encoder = self.encoder.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(loaded) = encoder.as_ref() {
            return Ok(loaded.clone());
        }
        let (file, config, device) = self
            .encoder_source
            .as_ref()
            .ok_or_else(|| candle_core::Error::Msg("a checked checkpoint has no weights".into()))?;
        // SAFETY: as in `load`.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[file], DType::F32, device)? };
        let loaded = CodecEncoder::load(self.codec.config(), config, vb)
            .map_err(|e| candle_core::Error::wrap(e.in_file(file)))?;
        let loaded = std::sync::Arc::new(loaded);
        *encoder = Some(loaded.clone());
        Ok(loaded)
    }

    /// Checks the checkpoint in `dir` as [`Tts::load`] reads it (the configs, every tensor's
    /// name and shape, the tokenizer against the text vocabulary, the codec against the
    /// codebooks) without reading the weights: a server refuses a wrong or truncated
    /// checkpoint at startup, naming the file and the tensor, in a fraction of a load.
    pub fn check_dir(dir: &Path) -> std::result::Result<(), ModelError> {
        Self::open(dir, DType::F32, |file, _| {
            let manifest = Manifest::read(file).map_err(candle_core::Error::Msg)?;
            Ok(manifest.var_builder())
        })
        .map(drop)
    }

    /// [`Tts::load`] with the safetensors files read by `weights` (a file, the dtype to
    /// compute in): mapped to load, or from their headers alone to check.
    fn open<'a>(
        dir: &Path,
        dtype: DType,
        weights: impl Fn(&Path, DType) -> Result<VarBuilder<'a>>,
    ) -> std::result::Result<Self, ModelError> {
        let config = Config::from_file(&dir.join("config.json"))?;
        let file = dir.join("model.safetensors");
        let model = weights(&file, dtype)
            .map_err(ModelError::from)
            .and_then(|vb| OmniVoice::load(&config, vb))
            .map_err(|e| e.in_file(&file))?;

        let file = dir.join("tokenizer.json");
        let tokenizer =
            tokenizers::Tokenizer::from_file(&file).map_err(|e| ModelError::format(&file, e))?;
        check_tokenizer(&tokenizer, &model, &file)?;

        let codec_dir = dir.join("audio_tokenizer");
        let file = codec_dir.join("config.json");
        let codec_config = CodecConfig::from_file(&file)?;
        check_codec(&codec_config, &model, &file)?;
        let (sample_rate, frame_rate) = rates(dir, &codec_config)?;
        let file = codec_dir.join("model.safetensors");
        let codec = weights(&file, DType::F32)
            .map_err(ModelError::from)
            .and_then(|vb| CodecDecoder::load(&codec_config, vb))
            .map_err(|e| e.in_file(&file))?;
        let mut tts = Self::from_parts(model, codec, tokenizer);
        (tts.sample_rate, tts.frame_rate) = (sample_rate, frame_rate);
        Ok(tts)
    }

    /// A model assembled from parts loaded elsewhere (a benchmark's weights made in memory),
    /// at its codec's rates; it cannot clone (no encoder weights).
    pub fn from_parts(
        model: OmniVoice,
        codec: CodecDecoder,
        tokenizer: tokenizers::Tokenizer,
    ) -> Self {
        let sample_rate = codec.config().sample_rate;
        let frame_rate = sample_rate.div_ceil(codec.config().hop_length as u32);
        Self {
            model,
            codec,
            tokenizer,
            sample_rate,
            frame_rate,
            encoder_source: None,
            encoder: std::sync::Mutex::new(None),
        }
    }

    /// The same model with the body's linear layers in `precision` (bf16 on CPUs that run
    /// it; anything else stays f32), and the codec's convolutions too where bf16 is also
    /// the faster convolution here ([`Precision::auto`]: with AMX, or AVX-512 bf16 timed
    /// faster than `f32`).
    pub fn with_precision(self, precision: Precision) -> std::result::Result<Self, ModelError> {
        let model = self.model.with_precision(precision)?;
        let codec = match model.precision() {
            Precision::Bf16 if Precision::auto() == Precision::Bf16 => {
                self.codec.with_precision(Precision::Bf16)
            }
            _ => self.codec,
        };
        Ok(Self {
            model,
            codec,
            ..self
        })
    }

    /// The precision the body's linear layers run in.
    pub fn precision(&self) -> Precision {
        self.model.precision()
    }

    /// The network, for a scheduler that steps utterances itself ([`OmniVoice::step`]).
    pub fn model(&self) -> &OmniVoice {
        &self.model
    }

    /// The output's samples per second and the codec's frames per second of the checkpoint
    /// in `dir`, read from its small files alone (the model need not be loaded).
    pub fn rates_of(dir: &Path) -> std::result::Result<(u32, u32), ModelError> {
        let file = dir.join("audio_tokenizer").join("config.json");
        let codec = CodecConfig::from_file(&file)?;
        rates(dir, &codec)
    }

    /// Samples per second of the output.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// Audio frames per second (25 for the release).
    pub fn frame_rate(&self) -> f32 {
        self.frame_rate as f32
    }

    /// Checks a request as the official `_preprocess_all` reads it: the language resolved, the
    /// instruct validated and normalized (in Chinese when the text has an ideograph), and the
    /// frames estimated (or taken from the duration). No model work.
    pub fn check(&self, request: &Request) -> std::result::Result<Prepared, RequestError> {
        if py_strip(&request.text).is_empty() {
            return Err(RequestError::EmptyText);
        }
        if !(request.speed.is_finite() && request.speed > 0.0) {
            return Err(RequestError::Speed(request.speed));
        }
        let language = match request.language.as_deref() {
            Some(l) => resolve_language(l)?,
            None => None,
        };
        let use_zh = request.text.chars().any(is_cjk);
        let instruct = match request.instruct.as_deref() {
            Some(i) => resolve_instruct(i, use_zh)?,
            None => None,
        };
        let reference = match &request.reference {
            Some(r) => Some((r.text.as_str(), self.check_reference(r)?)),
            None => None,
        };
        // An utterance this one follows (unless a clone's reference is there) is read at
        // its own pace: it was spoken at the request's speed already.
        let follows = match (&request.reference, &request.follows) {
            (None, Some(f)) => Some(f.clone()),
            _ => None,
        };
        let (reference, speed) = match &follows {
            Some(f) => (
                Some((
                    f.text.as_str(),
                    f.codes.dim(1).map_err(|_| RequestError::ReferenceEmpty)?,
                )),
                1.0,
            ),
            None => (reference, decimal(request.speed)),
        };
        let (frames, chunk_speed) = match request.duration {
            Some(d) if !(d.is_finite() && d > 0.0) => return Err(RequestError::Duration(d)),
            Some(d) => {
                // The estimate at speed 1 sets the later chunks' pace.
                let estimate = target_frames(&request.text, reference, 1.0);
                let frames = ((decimal(d) * f64::from(self.frame_rate)) as usize).max(1);
                (frames, estimate as f64 / frames as f64)
            }
            None => (target_frames(&request.text, reference, speed), speed),
        };
        Ok(Prepared {
            text: request.text.clone(),
            language,
            instruct,
            reference: request.reference.clone(),
            follows,
            frames,
            chunk_speed,
            generation: request.generation.clone(),
        })
    }

    /// A reference the model can read (its codebooks, ids below the mask id, a frame, a
    /// transcript, a level): its frame count.
    fn check_reference(&self, reference: &Reference) -> std::result::Result<usize, RequestError> {
        let c = self.model.config();
        let codes = &reference.codes;
        let shape = || RequestError::ReferenceShape {
            codebooks: c.num_audio_codebook,
            found: format!("{:?} {:?}", codes.dims(), codes.dtype()),
        };
        if codes.dtype().is_float() {
            return Err(shape());
        }
        let (codebooks, frames) = codes.dims2().map_err(|_| shape())?;
        if codebooks != c.num_audio_codebook {
            return Err(shape());
        }
        if frames == 0 {
            return Err(RequestError::ReferenceEmpty);
        }
        let size = c.audio_mask_id;
        let bad = codes
            .to_dtype(DType::I64)
            .and_then(|t| t.flatten_all()?.to_vec1::<i64>())
            .map_err(|_| shape())?
            .into_iter()
            .find(|&code| !(0..i64::from(size)).contains(&code));
        if let Some(code) = bad {
            return Err(RequestError::ReferenceCode { code, size });
        }
        if py_strip(&reference.text).is_empty() {
            return Err(RequestError::ReferenceText);
        }
        if !(reference.rms.is_finite() && reference.rms > 0.0) {
            return Err(RequestError::ReferenceRms(reference.rms));
        }
        Ok(frames)
    }

    /// The prompt `_prepare_inference_inputs` builds: the style tokens (`<|denoise|>` before a
    /// reference when `denoise`, the language, the instruct), the text between
    /// `<|text_start|>` and `<|text_end|>` with each non-verbal tag tokenized alone, then the
    /// reference's frames ([C, R] u32), then `frames` masked frames.
    pub(crate) fn prompt(
        &self,
        text: &str,
        reference: Option<(&str, &Tensor)>,
        language: Option<&str>,
        instruct: Option<&str>,
        denoise: bool,
        frames: usize,
    ) -> Result<Prompt> {
        let c = self.model.config();
        let mut style = String::new();
        if denoise && reference.is_some() {
            style.push_str("<|denoise|>");
        }
        style.push_str(&format!(
            "<|lang_start|>{}<|lang_end|><|instruct_start|>{}<|instruct_end|>",
            language.unwrap_or("None"),
            instruct.unwrap_or("None")
        ));
        let mut ids = self.encode(&style, true)?;
        let wrapped = format!(
            "<|text_start|>{}<|text_end|>",
            combine_text(text, reference.map(|(t, _)| t))
        );
        for (piece, _) in split_nonverbal(&wrapped) {
            ids.extend(self.encode(piece, false)?);
        }
        let text_len = ids.len();
        // [C, text] the same ids in every codebook, then the frames.
        let text = Tensor::new(ids.as_slice(), self.model.device())?
            .unsqueeze(0)?
            .repeat((c.num_audio_codebook, 1))?;
        let mut parts = vec![text];
        if let Some((_, frames)) = reference {
            parts.push(
                frames
                    .to_device(self.model.device())?
                    .to_dtype(DType::U32)?,
            );
        }
        parts.push(Tensor::full(
            c.audio_mask_id,
            (c.num_audio_codebook, frames),
            self.model.device(),
        )?);
        let ids = Tensor::cat(&parts, 1)?;
        let len = ids.dim(1)?;
        let audio: Vec<u8> = (0..len).map(|i| u8::from(i >= text_len)).collect();
        Ok(Prompt {
            ids,
            audio: Tensor::new(audio.as_slice(), self.model.device())?,
            frames,
        })
    }

    fn encode(&self, text: &str, specials: bool) -> Result<Vec<u32>> {
        let encoding = self
            .tokenizer
            .encode(text, specials)
            .map_err(|e| candle_core::Error::Msg(format!("tokenizing {text:?}: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Synthesizes checked requests, `seeds[i]` seeding `items[i]`'s noise: the audio of
    /// each, post-processed, at [`Tts::sample_rate`]. Whole items and first chunks are
    /// decoded together, then every later chunk of every item together (each depends only on
    /// its item's first), one forward a step.
    pub fn synthesize(&self, items: &[Prepared], seeds: &[u64]) -> Result<Vec<Vec<f32>>> {
        self.synthesize_with(items, seeds, &self.model)
    }

    /// [`Tts::synthesize`] with the frames decoded by `decoder` (a server's scheduler, which
    /// steps them together with other requests' utterances).
    pub fn synthesize_with(
        &self,
        items: &[Prepared],
        seeds: &[u64],
        decoder: &dyn Decoder,
    ) -> Result<Vec<Vec<f32>>> {
        let spoken = self.synthesize_spoken(items, seeds, decoder)?;
        Ok(spoken.into_iter().map(|(audio, _)| audio).collect())
    }

    /// [`Tts::synthesize_with`], each item's audio with what a later utterance needs to
    /// continue in its voice: its first chunk's text and frames (the whole item's, when it
    /// is not chunked).
    pub fn synthesize_spoken(
        &self,
        items: &[Prepared],
        seeds: &[u64],
        decoder: &dyn Decoder,
    ) -> Result<Vec<(Vec<f32>, Spoken)>> {
        if items.len() != seeds.len() {
            candle_core::bail!("{} seeds for {} items", seeds.len(), items.len());
        }
        let rate = f64::from(self.frame_rate);
        let long: Vec<bool> = items.iter().map(|item| item.is_long(rate)).collect();
        let chunks: Vec<Vec<String>> = items.iter().map(|item| item.texts(rate)).collect();
        // The first round: whole items and first chunks, each at its own estimate.
        let mut firsts = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let reference = item.reference_prompt();
            let target = if long[i] {
                item.chunk_frames(&chunks[i][0], reference)?
            } else {
                item.frames
            };
            let prompt = self.prompt_for(item, &chunks[i][0], reference, target)?;
            firsts.push(Piece::new(prompt, item, seeds[i], 0));
        }
        let first = self.decode_round(firsts, decoder)?;
        // Then every later chunk, each with its item's reference, or else its first chunk's
        // text and frames.
        let mut later = Vec::new();
        for (i, item) in items.iter().enumerate() {
            for (k, text) in chunks[i].iter().enumerate().skip(1) {
                let reference = item
                    .reference_prompt()
                    .unwrap_or((chunks[i][0].as_str(), &first[i]));
                let target = item.chunk_frames(text, Some(reference))?;
                let prompt = self.prompt_for(item, text, Some(reference), target)?;
                later.push((i, Piece::new(prompt, item, seeds[i], k)));
            }
        }
        let (members, later): (Vec<usize>, Vec<Piece>) = later.into_iter().unzip();
        let later = self.decode_round(later, decoder)?;
        // The codec is this thread's own work (a decoder may have stepped elsewhere).
        let _computing = crate::spare::computing();
        let mut frames: Vec<Vec<Tensor>> = first.into_iter().map(|f| vec![f]).collect();
        for (i, f) in members.into_iter().zip(later) {
            frames[i].push(f);
        }
        frames
            .into_iter()
            .zip(items)
            .zip(chunks)
            .map(|((frames, item), mut texts)| {
                let audio = frames
                    .iter()
                    .map(|f| self.decode(f))
                    .collect::<Result<Vec<_>>>()?;
                let joined = cross_fade(&audio, self.sample_rate);
                let rms = item.reference.as_ref().map(|r| r.rms);
                let spoken = Spoken {
                    text: texts.swap_remove(0),
                    codes: frames.into_iter().next().expect("a first chunk"),
                };
                Ok((item.post().apply(&joined, self.sample_rate, rms), spoken))
            })
            .collect()
    }

    /// The prompt of `text`, a whole item or a piece of it, with `item`'s style.
    pub(super) fn prompt_for(
        &self,
        item: &Prepared,
        text: &str,
        reference: Option<(&str, &Tensor)>,
        frames: usize,
    ) -> Result<Prompt> {
        self.prompt(
            text,
            reference,
            item.language,
            item.instruct(),
            item.generation.denoise,
            frames,
        )
    }

    /// Decodes one round of pieces together, one forward a step: the frames of each,
    /// [C, T] u32, in order.
    pub(super) fn decode_round(
        &self,
        round: Vec<Piece<'_>>,
        decoder: &dyn Decoder,
    ) -> Result<Vec<Tensor>> {
        if round.is_empty() {
            return Ok(Vec::new());
        }
        let count = round.len();
        let utterances = round
            .iter()
            .map(|p| {
                self.model
                    .utterance(&p.prompt, p.decoding, piece_noise(p.seed, p.index))
            })
            .collect::<Result<Vec<_>>>()?;
        let decoded = decoder.finish(utterances)?;
        if decoded.len() != count {
            candle_core::bail!("{} utterances decoded of {count}", decoded.len());
        }
        decoded
            .into_iter()
            .map(|u| Ok(u.into_frames(self.model.device())?.0))
            .collect()
    }

    /// The codec's audio of frames [C, T].
    pub(super) fn decode(&self, frames: &Tensor) -> Result<Vec<f32>> {
        self.codec
            .decode(frames)?
            .to_dtype(DType::F32)?
            .to_vec1::<f32>()
    }
}

/// One utterance of a decoding round: a whole item, or a piece of one (a chunk, a streamed
/// piece).
pub(super) struct Piece<'a> {
    prompt: Prompt,
    decoding: &'a Decoding,
    /// The item's seed, and which of its pieces this is: its noise ([`piece_noise`]).
    seed: u64,
    index: usize,
}

impl<'a> Piece<'a> {
    pub(super) fn new(prompt: Prompt, item: &'a Prepared, seed: u64, index: usize) -> Self {
        Self {
            prompt,
            decoding: &item.generation.decoding,
            seed,
            index,
        }
    }
}

/// The noise of piece `piece` of an item seeded `seed`: the whole item's, or its first
/// chunk's, is the seed's own generator; a later piece's is another of the same seed, so that
/// later pieces can be decoded together and each still gets the noise it would get alone.
fn piece_noise(seed: u64, piece: usize) -> StdRng {
    // Odd and of mixed bits (the golden ratio's), so that no two pieces share a seed.
    const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;
    StdRng::seed_from_u64(seed ^ (piece as u64).wrapping_mul(SPREAD))
}

impl Prepared {
    /// The reference a prompt takes: the user's clip's text and codes, or else the utterance
    /// this one follows.
    pub(super) fn reference_prompt(&self) -> Option<(&str, &Tensor)> {
        match (&self.reference, &self.follows) {
            (Some(r), _) => Some((r.text.as_str(), &r.codes)),
            (None, Some(f)) => Some((f.text.as_str(), &f.codes)),
            (None, None) => None,
        }
    }

    /// Frames of a chunk of a long text, as the official chunked path estimates them: from
    /// `reference` (the user's, or the first chunk), at the chunks' speed.
    pub(super) fn chunk_frames(
        &self,
        text: &str,
        reference: Option<(&str, &Tensor)>,
    ) -> Result<usize> {
        let reference = match reference {
            Some((text, codes)) => Some((text, codes.dim(1)?)),
            None => None,
        };
        Ok(target_frames(text, reference, self.chunk_speed))
    }

    /// The post-processing its settings ask for.
    pub(super) fn post(&self) -> PostProcess {
        let g = &self.generation;
        PostProcess {
            trim_silence: g.postprocess_output,
            pad_duration: g.pad_duration,
            fade_duration: g.fade_duration,
        }
    }

    /// The texts it is generated in: itself, or its chunks when it is long.
    pub(super) fn texts(&self, frame_rate: f64) -> Vec<String> {
        match self.is_long(frame_rate) {
            true => self.chunks(frame_rate),
            false => vec![self.text.clone()],
        }
    }

    /// Whether its estimate is over `audio_chunk_threshold`, so that it is generated in chunks.
    fn is_long(&self, frame_rate: f64) -> bool {
        self.frames > (decimal(self.generation.audio_chunk_threshold) * frame_rate) as usize
    }

    /// A long text's chunks, of about `audio_chunk_duration` each (the whole text if it has
    /// nowhere to cut).
    fn chunks(&self, frame_rate: f64) -> Vec<String> {
        let g = &self.generation;
        let per_char = self.frames as f64 / self.text.chars().count() as f64;
        let chunk_len = (decimal(g.audio_chunk_duration) * frame_rate / per_char) as usize;
        let chunks = chunk_text(&self.text, chunk_len, Some(3));
        if chunks.is_empty() {
            vec![self.text.clone()]
        } else {
            chunks
        }
    }
}
