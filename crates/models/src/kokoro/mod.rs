//! Kokoro-82M (StyleTTS 2 with an iSTFTNet decoder, v1.0) in candle.
//!
//! The model loads in the crate's one shape: its [`Weights`] read straight from kokoro-onnx's
//! `.onnx` files ([`Weights::from_onnx`]: f32, fp16 or int8, all restored to `f32`), then
//! [`Kokoro::load`]`(&Config::v1_0(), weights)`. It runs the inference path of one utterance:
//!
//! 1. PL-BERT ([`albert`]) over the phoneme ids, projected to 512 (`bert_encoder`);
//! 2. the prosody predictor ([`prosody`]): duration encoder → frames per token, then the
//!    F0 and energy curves of the frames;
//! 3. the text encoder ([`text_encoder`]) aligned to the frames;
//! 4. the decoder ([`decoder`]) and iSTFTNet generator ([`generator`]) → 24 kHz audio, 600
//!    samples per frame.
//!
//! The voice vector (256 floats, one row of a voice pack) is split in two: `[..128]`
//! conditions the decoder, `[128..]` the prosody predictor. The layers the predictor and the
//! decoder share (AdaIN, AdainResBlk1d) are in [`blocks`].

pub(crate) mod albert;
pub(crate) mod blocks;
pub mod config;
pub(crate) mod decoder;
mod dequantize;
pub(crate) mod generator;
pub(crate) mod prosody;
mod signal;
#[cfg(test)]
mod tests;
pub(crate) mod text_encoder;
pub(crate) mod weights;

use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};

use crate::error::ModelError;
use crate::kernels::Precision;
use crate::spare;
use albert::Albert;
use blocks::Linear;
pub use config::{Config, DecoderConfig};
use decoder::Decoder;
use prosody::Prosody;
use text_encoder::TextEncoder;
pub use weights::Weights;

/// The precision `auto` gives Kokoro on this CPU. int8 passed the gate set by the peer's
/// quality (DNSMOS, DistillMOS and Whisper against kokoro-onnx on 3 voices × 20 sentences:
/// scripts/kokoro-gate.sh, docs/performance.md §11a′), and every int8 block computes the same
/// integer sums, so the gate holds on every CPU: int8 where it is the fastest (AVX-512 VNNI
/// without AMX), else [`Precision::auto`]'s choice.
pub fn auto_precision() -> Precision {
    Precision::auto_allowing_int8()
}

/// One utterance's audio and its timing.
#[derive(Debug, Clone, PartialEq)]
pub struct Synthesis {
    /// Mono samples at [`Config::sample_rate`] (24 kHz).
    pub audio: Vec<f32>,
    /// Frames (of [`Config::samples_per_frame`] samples) per input id, including the pad the
    /// model adds before and after the tokens: `tokens.len() + 2` entries.
    pub durations: Vec<u32>,
}

/// The prosody stage's results, kept for the tests of each stage.
pub(crate) struct Predicted {
    /// Frames per id, pads included.
    pub durations: Vec<u32>,
    /// F0 and energy at twice the frame rate, `[2F]` each.
    pub f0: Tensor,
    pub n: Tensor,
    /// Text-encoder features per frame, `[1, 512, F]`.
    pub asr: Tensor,
}

/// A loaded Kokoro v1.0 model. Clones share the weights.
#[derive(Clone)]
pub struct Kokoro {
    config: Config,
    albert: Albert,
    bert_encoder: Linear,
    prosody: Prosody,
    text_encoder: TextEncoder,
    decoder: Decoder,
    precision: Precision,
    device: Device,
    file: PathBuf,
}

impl Kokoro {
    /// The model of `weights` ([`Weights::from_onnx`]) as `config` describes it (the
    /// release's, [`Config::v1_0`]: the ONNX files hold no config, and every convolution the
    /// graph describes is checked against it), on the weights' device, in `f32` (see
    /// [`Kokoro::with_precision`]).
    pub fn load(config: &Config, weights: Weights) -> Result<Self, ModelError> {
        let w = &weights;
        let config = config.clone();
        Ok(Self {
            albert: Albert::load(w, &config.albert, config.n_token)?,
            bert_encoder: Linear::load(w, "bert_encoder", config.albert.hidden, config.hidden)?,
            prosody: Prosody::load(w, &config)?,
            text_encoder: TextEncoder::load(w, &config)?,
            decoder: Decoder::load(w, &config.decoder)?,
            precision: Precision::F32,
            config,
            device: w.device().clone(),
            file: w.file().to_path_buf(),
        })
    }

    /// The same model with the decoder's and generator's convolutions in `precision`: they
    /// are nearly all of the work (about 25 G multiply-adds per second of audio). ALBERT, the prosody
    /// predictor and the text encoder stay `f32`, so durations, F0 and word timings do not
    /// change with the precision. Reduced precisions are CPU kernels: on other devices the
    /// model stays `f32`. Which precision pays on a CPU is [`Precision::auto`]'s question.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        let precision = if matches!(self.device, Device::Cpu) {
            precision
        } else {
            Precision::F32
        };
        if precision != self.precision {
            self.decoder.in_precision(precision);
            self.precision = precision;
        }
        self
    }

    /// The same model with every convolution the direct kernel runs packed now, in the
    /// model's precision, and their unpacked tensors let go: from the first call on, the
    /// packed copies are all those layers read, and the tensors beside them were as large
    /// again (≈ 200 MB of `f32` here: the decoder, the generator, the text encoder and the
    /// F0/N branches). A server calls it once the precision is chosen; the precision is fixed
    /// from here on ([`Kokoro::with_precision`] after it fails at the first call, never
    /// computing with missing weights). On other devices nothing changes.
    pub fn with_unpacked_released(mut self) -> Result<Self, ModelError> {
        if !matches!(self.device, Device::Cpu) {
            return Ok(self);
        }
        let file = self.file.clone();
        let load = |source| ModelError::Load {
            file: file.clone(),
            source,
        };
        self.text_encoder.release_unpacked().map_err(load)?;
        self.prosody.release_unpacked().map_err(load)?;
        self.decoder.release_unpacked().map_err(load)?;
        Ok(self)
    }

    /// What the decoder's and generator's convolutions run in.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The file the weights came from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Speaks `tokens` (phoneme ids, without the pads the model adds at both ends) in
    /// `style` (one 256-float row of a voice pack) at `speed` (> 1 is faster).
    pub fn synthesize(
        &self,
        tokens: &[u32],
        style: &[f32],
        speed: f32,
    ) -> Result<Synthesis, ModelError> {
        // The caller waits for the whole utterance: its kernels may borrow idle cores.
        let _lending = self.device.is_cpu().then(spare::lending);
        let (ids, style) = self.inputs(tokens, style, speed)?;
        let predicted = self.predict(&ids, &style, speed)?;
        let s = style.narrow(1, 0, self.config.style_dim)?; // the decoder half
        let audio = self
            .decoder
            .forward(&predicted.asr, &predicted.f0, &predicted.n, &s)?
            .to_vec1::<f32>()?;
        Ok(Synthesis {
            audio,
            durations: predicted.durations,
        })
    }

    /// Checks the inputs and adds the pads: ids `[T]` (u32), style `[1, 256]`.
    pub(crate) fn inputs(
        &self,
        tokens: &[u32],
        style: &[f32],
        speed: f32,
    ) -> Result<(Tensor, Tensor), ModelError> {
        let c = &self.config;
        if tokens.len() + 2 > c.albert.max_positions {
            return Err(ModelError::Input(format!(
                "{} tokens; Kokoro takes at most {} (its context is {} with the two pads)",
                tokens.len(),
                c.albert.max_positions - 2,
                c.albert.max_positions
            )));
        }
        if let Some(bad) = tokens.iter().find(|&&t| t as usize >= c.n_token) {
            return Err(ModelError::Input(format!(
                "token id {bad} is outside the vocabulary of {}",
                c.n_token
            )));
        }
        if style.len() != c.voice_dim() {
            return Err(ModelError::Input(format!(
                "the style has {} values, Kokoro takes {}",
                style.len(),
                c.voice_dim()
            )));
        }
        if !(speed.is_finite() && speed > 0.0) {
            return Err(ModelError::Input(format!(
                "speed {speed} is not a positive number"
            )));
        }
        let ids: Vec<u32> = std::iter::once(0)
            .chain(tokens.iter().copied())
            .chain(std::iter::once(0))
            .collect();
        let n = ids.len();
        Ok((
            Tensor::from_vec(ids, n, &self.device)?,
            Tensor::from_slice(style, (1, style.len()), &self.device)?,
        ))
    }

    /// PL-BERT projected to the predictor's width: ids `[T]` → `d_en` `[T, 512]`.
    pub(crate) fn bert(&self, ids: &Tensor) -> Result<Tensor, ModelError> {
        Ok(self.bert_encoder.forward(&self.albert.forward(ids)?)?)
    }

    /// Durations, F0/N and the aligned text features of padded `ids` in `style` `[1, 256]`.
    pub(crate) fn predict(
        &self,
        ids: &Tensor,
        style: &Tensor,
        speed: f32,
    ) -> Result<Predicted, ModelError> {
        let sd = self.config.style_dim;
        let s = style.narrow(1, sd, sd)?; // the prosody half
        let d = self.prosody.encode(&self.bert(ids)?, &s)?; // [T, 640]
        let durations = prosody::durations(&self.prosody.duration_logits(&d)?, speed)?;
        let en = prosody::expand(&d.t()?, &durations)?; // [640, F]
        let (f0, n) = self.prosody.curves(&en, &s)?;
        let t_en = self.text_encoder.forward(ids)?.squeeze(0)?; // [512, T]
        let asr = prosody::expand(&t_en, &durations)?.unsqueeze(0)?; // [1, 512, F]
        Ok(Predicted {
            durations,
            f0,
            n,
            asr,
        })
    }
}

/// Where the tests find the real model: `OMNIVOICE_KOKORO_DIR`, or `<repo>/voices/kokoro`
/// (what `scripts/kokoro-assets.sh` installs). A missing file fails the test, naming the script.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::PathBuf;

    pub const MODEL_FILE: &str = "kokoro-v1.0.int8.onnx";

    pub fn model_dir() -> PathBuf {
        match std::env::var_os("OMNIVOICE_KOKORO_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../voices/kokoro"),
        }
    }

    pub fn model_path() -> PathBuf {
        let path = model_dir().join(MODEL_FILE);
        assert!(
            path.is_file(),
            "{} is missing: run scripts/kokoro-assets.sh (or point OMNIVOICE_KOKORO_DIR at a \
             directory holding {MODEL_FILE})",
            path.display()
        );
        path
    }
}
