//! Speech engines behind one small interface, so the batcher and the HTTP layer never care
//! whether audio comes from a neural network or from a formant synthesizer.
//!
//! An [`Engine`] knows which voices it can offer and loads one on request; a loaded [`Voice`]
//! synthesizes a whole batch of utterances in one call. Voices are handed out as `Arc`s: whoever
//! is computing with a voice holds a reference, so a voice can be dropped from the registry while
//! a request still uses it and its memory goes only when the last user finishes.

use std::sync::Arc;

use serde::Serialize;

pub mod espeak;
pub mod piper;
pub mod registry;

/// Why an engine could not produce audio.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("unknown voice '{0}'")]
    UnknownVoice(String),
    #[error("failed to load voice '{voice}': {reason}")]
    Load { voice: String, reason: String },
    #[error("synthesis failed: {0}")]
    Synthesis(String),
}

/// What a client can learn about a voice before using it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VoiceInfo {
    /// The name clients send as `voice`.
    pub id: String,
    /// The engine that serves it (`piper`, `espeak`).
    pub engine: String,
    /// BCP-47-ish language tag, e.g. `en-US`.
    pub language: String,
    /// Native output rate of the voice in Hz.
    pub sample_rate: u32,
    /// Speaker names of a multi-speaker voice (empty for single-speaker voices).
    pub speakers: Vec<String>,
}

/// One utterance of a batch: usually one sentence of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthesisItem {
    /// Normalized text of the utterance.
    pub text: String,
    /// Speaking rate, 0.25..=4.0; 1.0 is the voice's natural rate.
    pub speed: f32,
    /// Seed for every random draw of this item: the same seed gives the same audio whatever
    /// else is in the batch.
    pub seed: u64,
    /// Speaker id for multi-speaker voices.
    pub speaker: Option<u32>,
    /// Override of the voice's noise scale (VITS prior noise); `None` = the voice's default.
    pub noise_scale: Option<f32>,
    /// Override of the voice's duration noise; `None` = the voice's default.
    pub noise_w: Option<f32>,
}

impl SynthesisItem {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            speed: 1.0,
            seed: 0,
            speaker: None,
            noise_scale: None,
            noise_w: None,
        }
    }
}

/// Mono audio as produced by an engine, samples in [-1, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct Pcm {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
}

impl Pcm {
    pub fn duration_s(&self) -> f64 {
        self.samples.len() as f64 / self.sample_rate as f64
    }
}

/// A loaded voice, ready to synthesize. Implementations are called from blocking worker
/// threads, never from the async runtime.
pub trait Voice: Send + Sync {
    fn info(&self) -> &VoiceInfo;

    /// Synthesizes every item; returns exactly one [`Pcm`] per item, in order, each with its
    /// own length (no padding).
    fn synthesize(&self, batch: &[SynthesisItem]) -> Result<Vec<Pcm>, EngineError>;

    /// Like [`Voice::synthesize`], but hands each item's audio to `done` as soon as it exists,
    /// so a caller can answer early items before late ones are computed. Engines that compute
    /// items one after another override it; the default delivers all at the end.
    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        for (index, pcm) in self.synthesize(batch)?.into_iter().enumerate() {
            done(index, pcm);
        }
        Ok(())
    }
}

/// A family of voices that share one implementation.
pub trait Engine: Send + Sync {
    /// The id clients send as `model` (`piper`, `espeak`).
    fn id(&self) -> &str;

    /// Every voice this engine can offer now.
    fn voices(&self) -> Vec<VoiceInfo>;

    /// Loads a voice. Expensive: callers cache the result.
    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError>;

    /// The voice with this exact id, if the engine offers it.
    fn find_voice(&self, voice: &str) -> Option<VoiceInfo> {
        self.voices().into_iter().find(|v| v.id == voice)
    }

    /// Looks for added, changed and removed voices; returns the ids of voices that were
    /// removed or whose files changed (so loaded copies can be released).
    fn rescan(&self) -> Vec<String> {
        Vec::new()
    }

    /// Identifies the voice's model content, so cached audio never outlives a changed model.
    fn fingerprint(&self, _voice: &str) -> String {
        String::new()
    }
}
