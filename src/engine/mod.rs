//! Speech engines behind one small interface, so the batcher and the HTTP layer never care
//! whether audio comes from a neural network or from a formant synthesizer.
//!
//! An [`Engine`] knows which voices it can offer and loads one on request; a loaded [`Voice`]
//! synthesizes a whole batch of utterances in one call. Voices are handed out as `Arc`s: whoever
//! is computing with a voice holds a reference, so a voice can be dropped from the registry while
//! a request still uses it and its memory goes only when the last user finishes.

use std::sync::Arc;

use serde::Serialize;

use crate::params::SynthesisParams;

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
    /// Speed, speaker and noise of the request; `params.seed` is this item's own seed, so the
    /// same seed gives the same audio whatever else is in the batch.
    pub params: SynthesisParams,
    /// Whether the audio should come with [`Pcm::words`]; only asked when needed, since it
    /// costs an engine extra work.
    pub word_timings: bool,
    /// Whether a listener is waiting to play the audio as it is computed (a streamed
    /// response): engines that can then hand it over in pieces, through
    /// [`Voice::synthesize_in_pieces`].
    pub in_pieces: bool,
}

impl SynthesisItem {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            params: SynthesisParams::default(),
            word_timings: false,
            in_pieces: false,
        }
    }
}

/// Names one voice of one engine: the unit that is loaded, released and batched together.
/// Cheap to clone (two reference counts), so queue entries carry it without copying strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VoiceKey {
    engine: Arc<str>,
    voice: Arc<str>,
}

impl VoiceKey {
    pub fn new(engine: &str, voice: &str) -> Self {
        Self {
            engine: engine.into(),
            voice: voice.into(),
        }
    }

    pub fn engine(&self) -> &str {
        &self.engine
    }

    pub fn voice(&self) -> &str {
        &self.voice
    }
}

impl std::fmt::Display for VoiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.engine, self.voice)
    }
}

/// Mono audio as produced by an engine, samples in [-1, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct Pcm {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
    /// When the item asked for [`SynthesisItem::word_timings`] and the engine can tell: where
    /// each spoken word of the item's text lies in `samples`, in order. `None` otherwise.
    pub words: Option<Vec<WordTiming>>,
}

/// A word of an utterance's text and when it is spoken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordTiming {
    /// Byte range of the word in the item's text.
    pub text: std::ops::Range<usize>,
    /// First sample and one past the last, `start <= end <= samples.len()`.
    pub start: usize,
    pub end: usize,
}

impl Pcm {
    /// Audio without word timings.
    pub fn new(samples: Vec<f32>, sample_rate: u32) -> Self {
        Self {
            samples,
            sample_rate,
            words: None,
        }
    }

    pub fn duration_s(&self) -> f64 {
        self.samples.len() as f64 / self.sample_rate as f64
    }
}

/// A loaded voice, ready to synthesize. Implementations are called from blocking worker
/// threads, never from the async runtime.
pub trait Voice: Send + Sync {
    fn info(&self) -> &VoiceInfo;

    /// Synthesizes every item of `batch` and hands each item's audio (its own length, no
    /// padding) to `done` with the item's index as soon as it exists, so early items are
    /// answered before late ones are computed. An item never handed over gets the returned
    /// error, or an "engine returned no audio" error if the call returned `Ok`: nothing is
    /// dropped silently.
    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError>;

    /// Synthesizes one item and hands its audio to `piece` in consecutive pieces as they are
    /// computed, so that a listener hears the start of a long utterance before its end
    /// exists. The pieces joined are the audio [`synthesize_each`](Self::synthesize_each)
    /// gives; one of them, as early as they are known, carries the item's [`Pcm::words`]
    /// (sample positions from the item's start). `piece` returns false once nobody listens any more: the engine may
    /// stop there. Engines that cannot do better hand the whole audio over as one piece.
    fn synthesize_in_pieces(
        &self,
        item: &SynthesisItem,
        piece: &mut dyn FnMut(Pcm) -> bool,
    ) -> Result<(), EngineError> {
        self.synthesize_each(std::slice::from_ref(item), &mut |_, pcm| {
            piece(pcm);
        })
    }

    /// Whether a batch costs about as much as its longest item (one padded pass on a GPU), so
    /// that full batches pay; `false` for engines that compute items one after another, where
    /// batching only adds waiting.
    fn computes_batches_at_once(&self) -> bool {
        false
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
