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
pub use crate::text::Pronunciation;
use omnivoice_models::kernels::Precision;

pub mod espeak;
pub mod kokoro;
pub mod omnivoice;
pub mod piper;
pub mod registry;

/// The language tag of voices that speak whatever language they are given (ISO 639's code
/// for multiple languages): a request's `language`, or an SSML `<lang>`, is then read by the
/// same voice instead of choosing another.
pub const MULTILINGUAL: &str = "mul";

/// The error behind a failure, shared: one failed load is reported to every request that
/// waited for it, so the failure must be `Clone`.
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// The precision an engine's model convolutions run in on `device`, for `requested` (`None`:
/// `auto`, the engine's own rule for this CPU). Reduced precisions are CPU kernels: other devices run
/// `f32`, with a warning when something else was asked for. `models` names the engine's
/// models in the log.
pub(crate) fn cpu_precision(
    device: &candle_core::Device,
    requested: Option<Precision>,
    auto: fn() -> Precision,
    models: &str,
) -> Precision {
    let precision = match (device, requested) {
        (candle_core::Device::Cpu, Some(p)) => p,
        (candle_core::Device::Cpu, None) => auto(),
        (_, _) => Precision::F32,
    };
    if requested.is_some_and(|r| r != precision) {
        tracing::warn!(requested = %requested.unwrap_or_default(), "reduced precision is a CPU feature; this device runs f32");
    } else if !precision.has_hardware() {
        tracing::warn!(%precision, "this CPU has no hardware for it: emulated, slower than f32");
    }
    // Debug only: startup may still fail on another setting, and that must stay its one
    // line; each model's load logs the precision it runs at info.
    tracing::debug!(precision = %precision.describe(), requested = %requested.map_or("auto", Precision::as_str), "precision of the {models}");
    precision
}

/// A model fingerprint's suffix for `precision`: another precision is other audio (`f32`
/// keeps the plain hash, so caches from before precisions existed stay valid).
pub(crate) fn precision_suffix(precision: Precision) -> String {
    match precision {
        Precision::F32 => String::new(),
        p => format!("+{p}"),
    }
}

/// The engine and voice behind OpenAI's names (`tts-1`, `alloy`) for the settings' `engine`
/// and `voice`: where they name none, Kokoro once its model is installed (the voice people
/// came for), else Piper; and the engine's own default voice.
pub fn defaults(
    engines: &[Arc<dyn Engine>],
    engine: Option<&str>,
    voice: Option<&str>,
) -> (String, String) {
    let find = |id: &str| engines.iter().find(|e| e.id() == id);
    let engine = engine.map(str::to_string).unwrap_or_else(|| {
        let kokoro_installed = find(kokoro::ID).is_some_and(|kokoro| kokoro.is_installed());
        match kokoro_installed {
            true => kokoro::ID,
            false => piper::ID,
        }
        .to_string()
    });
    let voice = voice.map(str::to_string).unwrap_or_else(|| {
        find(&engine)
            .and_then(|e| e.default_voice())
            .unwrap_or(piper::DEFAULT_VOICE)
            .to_string()
    });
    (engine, voice)
}

/// Why an engine could not produce audio. The messages read as a whole sentence with their
/// cause (what clients are told), and `source()` is the cause itself, for logs and for callers
/// that look inside.
#[derive(Debug, Clone)]
pub enum EngineError {
    UnknownVoice(String),
    Load { voice: String, source: Cause },
    Synthesis(Cause),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownVoice(voice) => write!(f, "unknown voice '{voice}'"),
            Self::Load { voice, source } => write!(f, "failed to load voice '{voice}': {source}"),
            Self::Synthesis(source) => write!(f, "synthesis failed: {source}"),
        }
    }
}

/// Written out rather than derived: a derived `source()` would hand out the `Arc` (which no
/// caller can downcast to the error inside) instead of the error it shares.
impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::UnknownVoice(_) => None,
            Self::Load { source, .. } | Self::Synthesis(source) => Some(source.as_ref()),
        }
    }
}

impl EngineError {
    /// Loading `voice` failed because of `cause`.
    pub fn load(voice: &str, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Load {
            voice: voice.to_string(),
            source: Arc::from(cause.into()),
        }
    }

    /// Synthesis failed because of `cause`.
    pub fn synthesis(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Synthesis(Arc::from(cause.into()))
    }
}

/// Why an engine makes no voice of what a request gave it (`instructions`, a clip to clone).
#[derive(Debug, thiserror::Error)]
pub enum VoiceRequestError {
    /// What the client gave cannot be followed; the error says why, in words for the client.
    #[error(transparent)]
    Refused(Box<dyn std::error::Error + Send + Sync>),
    /// The engine itself failed (its model would not load): no fault of the request.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl VoiceRequestError {
    /// The request's `cause` cannot be followed.
    pub fn refused(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Refused(cause.into())
    }
}

/// What a client can learn about a voice before using it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VoiceInfo {
    /// The name clients send as `voice`.
    pub id: String,
    /// The engine that serves it (`piper`, `espeak`, `kokoro`).
    pub engine: String,
    /// BCP-47-ish language tag, e.g. `en-US`.
    pub language: String,
    /// Native output rate of the voice in Hz.
    pub sample_rate: u32,
    /// Speaker names of a multi-speaker voice (empty for single-speaker voices).
    pub speakers: Vec<String>,
    /// `female` or `male` where the voice's name says (Kokoro's second letter); `None` where
    /// the engine does not know.
    pub gender: Option<String>,
    /// Why the voice is listed but cannot be spoken (a Kokoro pack of a language this server
    /// cannot phonemize); `None` for every voice a request may use.
    pub unsupported: Option<String>,
    /// The voice design it speaks with (OmniVoice's presets and designs:
    /// `female, young adult, moderate pitch, american accent`); `None` elsewhere.
    pub design: Option<String>,
}

/// Whether anybody still waits for a batch's audio. Asked from whichever thread computes it,
/// so it is shared and cheap: the batcher's answer looks at its reply channels.
#[derive(Clone)]
pub struct Wanted(Arc<dyn Fn() -> bool + Send + Sync>);

impl Wanted {
    pub fn new(still: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(still))
    }

    /// A batch that is never given up (a self-test, a caller of its own).
    pub fn always() -> Self {
        Self::new(|| true)
    }

    pub fn still(&self) -> bool {
        (self.0)()
    }
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
    /// Stretches of `text` said with given phonemes rather than as spelt, in order and
    /// apart (a lexicon entry, inline phonemes).
    pub pronunciations: Vec<Pronunciation>,
    /// The language to read `text` in when it is not the voice's own (a request's `language`
    /// for a voice named outright): the voice says it with that language's phonemizer, in its
    /// own timbre. Only languages [`Voice::reads_language`] accepts come here.
    pub language: Option<String>,
    /// Where it stands in a conversation that keeps one voice (a WebSocket stream).
    pub continuation: Continuation,
    /// For an item computed [`in_pieces`](Self::in_pieces) that opens a stream: where the
    /// rest of `text` starts after its first phrase (a byte offset,
    /// [`crate::text::phrase::first_phrase_end`]). An engine that needs a whole utterance
    /// before any of its audio exists may speak that phrase as an utterance of its own, so
    /// that the first audio comes sooner ([`Engine::speaks_first_phrase_apart`]); the others
    /// ignore it.
    pub phrase_end: Option<usize>,
}

/// An utterance's place in a conversation that keeps one voice throughout: the first leaves
/// its voice behind for the later ones. Engines whose voices never drift ignore it.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Continuation {
    /// On its own.
    #[default]
    Alone,
    /// The first: its audio brings what the later ones continue from ([`Pcm::continuity`]).
    Leads,
    /// A later one: it continues from what the first left.
    Follows(Continuity),
}

/// What an engine keeps of an utterance so that later ones speak on in its voice (OmniVoice:
/// its text and frames, their reference). Opaque outside the engine that made it.
#[derive(Clone)]
pub struct Continuity(pub Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Continuity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Continuity")
    }
}

/// The same when it is the same utterance's.
impl PartialEq for Continuity {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl SynthesisItem {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            params: SynthesisParams::default(),
            word_timings: false,
            in_pieces: false,
            pronunciations: Vec::new(),
            language: None,
            continuation: Continuation::Alone,
            phrase_end: None,
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
    /// For an item that [leads](Continuation::Leads) a conversation, what the later ones
    /// continue from (on its first piece); `None` otherwise.
    pub continuity: Option<Continuity>,
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
            continuity: None,
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

    /// [`synthesize_each`](Self::synthesize_each) for a batch whose callers may all leave
    /// before it is done, after which `wanted` says so. An engine whose work comes in many
    /// steps (OmniVoice's decoding) stops between two then, with an error nobody reads; the
    /// default computes to the end.
    fn synthesize_each_while(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
        wanted: &Wanted,
    ) -> Result<(), EngineError> {
        let _ = wanted;
        self.synthesize_each(batch, done)
    }

    /// Synthesizes one item and hands its audio to `piece` in consecutive pieces as they are
    /// computed, so that a listener hears the start of a long utterance before its end
    /// exists. The pieces joined are the audio [`synthesize_each`](Self::synthesize_each)
    /// gives; one of them, as early as they are known, carries the item's [`Pcm::words`]
    /// (sample positions from the item's start). An engine that [speaks the first phrase
    /// apart](Engine::speaks_first_phrase_apart) gives the audio of two utterances joined
    /// instead, each piece with its own words. `piece` returns false once nobody listens any more: the engine may
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

    /// [`synthesize_in_pieces`](Self::synthesize_in_pieces) for an item whose listener may
    /// leave before it is done, after which `wanted` says so. An engine whose work comes in
    /// many steps stops between two then; the default computes to the end (or until `piece`
    /// says nobody listens).
    fn synthesize_in_pieces_while(
        &self,
        item: &SynthesisItem,
        piece: &mut dyn FnMut(Pcm) -> bool,
        wanted: &Wanted,
    ) -> Result<(), EngineError> {
        let _ = wanted;
        self.synthesize_in_pieces(item, piece)
    }

    /// Whether streamed items are computed in pieces, each on a thread of its own, even
    /// though the voice computes batches at once: it still computes them together (OmniVoice's
    /// scheduler steps every utterance in flight in one forward), and each piece is heard as
    /// soon as it exists.
    fn streams_items_apart(&self) -> bool {
        false
    }

    /// Whether a batch costs about as much as its longest item (one padded pass on a GPU), so
    /// that full batches pay; `false` for engines that compute items one after another, where
    /// batching only adds waiting.
    fn computes_batches_at_once(&self) -> bool {
        false
    }

    /// The phonemes this voice says `text` with (its `pronunciations` as given, in
    /// `language` when that is not its own, as [`SynthesisItem::language`]) and the
    /// model's ids for them, so that users can see what will be spoken
    /// (`/v1/audio/phonemize`). A voice that reads text as it is (a test tone) has the text
    /// itself, and no ids.
    fn phonemes(
        &self,
        text: &str,
        _pronunciations: &[Pronunciation],
        _language: Option<&str>,
    ) -> Result<Phonemes, EngineError> {
        Ok(Phonemes {
            phonemes: text.to_string(),
            ids: Vec::new(),
        })
    }

    /// The first symbol of `ipa` (a [`Pronunciation::ipa`]) that this voice cannot say (in
    /// `language`, as [`SynthesisItem::language`]), so
    /// that a request asking for it is refused by name instead of heard wrong; `None` when it
    /// can say them all. Voices that read text as it is say anything.
    fn unsayable(&self, _ipa: &str, _language: Option<&str>) -> Option<char> {
        None
    }

    /// Whether the voice can read text in `language` (a BCP 47 tag) that is not its own, as
    /// [`SynthesisItem::language`] asks: with that language's phonemizer, in its own timbre.
    fn reads_language(&self, _language: &str) -> bool {
        false
    }

    /// Whether the voice says [`SynthesisItem::pronunciations`] at all; one that cannot has
    /// them refused rather than ignored.
    fn says_given_phonemes(&self, _language: Option<&str>) -> bool {
        true
    }

    /// Whether the voice can tell when each word is spoken ([`Pcm::words`]); requests for
    /// word timestamps are refused up front for one that cannot.
    fn times_words(&self) -> bool {
        true
    }
}

/// What an utterance becomes before the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phonemes {
    /// In the voice's own symbols: espeak-ng's IPA for Piper and espeak voices (a Piper voice
    /// of the `text` phoneme type: the text's own characters, NFD), misaki's symbols for
    /// Kokoro.
    pub phonemes: String,
    /// The model's input ids, framing included; empty for espeak-ng, which takes no ids.
    pub ids: Vec<i64>,
}

/// A family of voices that share one implementation.
pub trait Engine: Send + Sync {
    /// The id clients send as `model` (`piper`, `espeak`).
    fn id(&self) -> &str;

    /// Every voice this engine can offer now.
    fn voices(&self) -> Vec<VoiceInfo>;

    /// The voice that answers OpenAI's voice names when the engine is the default and the
    /// settings name no voice.
    fn default_voice(&self) -> Option<&'static str> {
        None
    }

    /// Whether the engine's shared model files are there (an engine without any: always).
    fn is_installed(&self) -> bool {
        true
    }

    /// Loads a voice. Expensive: callers cache the result.
    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError>;

    /// The voice with this exact id, if the engine offers it.
    fn find_voice(&self, voice: &str) -> Option<VoiceInfo> {
        self.voices().into_iter().find(|v| v.id == voice)
    }

    /// Why `voice` is no voice of this engine, in words for the client, when there is more to
    /// say than "unknown" (a malformed blend, a language the engine cannot speak yet).
    fn why_unknown(&self, _voice: &str) -> Option<String> {
        None
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

    /// Settings `voice` (a resolved id) brings, which a request's own outrank (a voice file's).
    fn voice_defaults(&self, _voice: &str) -> Option<crate::params::VoiceDefaults> {
        None
    }

    /// The voice that follows a request's `instructions` (a voice design) instead of `voice`
    /// (the one the request named), or why they cannot be followed, in words for the client;
    /// `None` for engines that take no instructions (they are then accepted and have no
    /// effect, as OpenAI's older models).
    fn instructed_voice(
        &self,
        _voice: &str,
        _instructions: &str,
    ) -> Option<Result<String, VoiceRequestError>> {
        None
    }

    /// Whether the engine decodes with OmniVoice's generation fields (`num_step`, …); a
    /// request that sets them for another engine is refused rather than heard unchanged.
    fn takes_generation(&self) -> bool {
        false
    }

    /// Whether the engine is given a text whole rather than sentence by sentence: a model
    /// that estimates the length of a whole text and keeps one voice through it (OmniVoice,
    /// as its official `generate` speaks a text) would sound otherwise if cut up.
    fn speaks_whole_texts(&self) -> bool {
        false
    }

    /// Whether a streamed item's first phrase ([`SynthesisItem::phrase_end`]) is spoken as an
    /// utterance of its own, so that a stream's audio differs from the whole body's (and is
    /// cached apart from it).
    fn speaks_first_phrase_apart(&self) -> bool {
        false
    }

    /// Whether `voice` (a resolved id) could sound otherwise from one utterance to the next
    /// unless each continues from the first ([`Continuation`]): one conversation, one voice.
    fn drifts(&self, _voice: &str) -> bool {
        false
    }

    /// The bracketed tags in `text` that look like sound cues (`[laughter]`) but that the
    /// engine will read as words, for a warning to the client; empty for engines without cues.
    fn unknown_cues(&self, _text: &str) -> Vec<String> {
        Vec::new()
    }

    /// The voice cloned from `reference`, or why this clip cannot be cloned, in words for the
    /// client; `None` for engines that cannot clone. Called off the async runtime: preparing
    /// a clip (resampling, trimming) is real work.
    fn cloned_voice(&self, _reference: &Reference) -> Option<Result<String, VoiceRequestError>> {
        None
    }
}

/// A voice to clone, as a client uploaded it: mono samples at their own rate, what is said
/// in them, and whether to clean the clip up first (trim silences, as the official code
/// does) or use it as it is.
#[derive(Debug, Clone)]
pub struct Reference {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
    pub text: Option<String>,
    pub preprocess: bool,
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::piper::PiperEngine;
    use super::*;

    /// Kokoro answers OpenAI's names once its model is installed, else Piper; each with its
    /// own voice, unless the settings name an engine or a voice.
    #[test]
    fn the_default_engine_is_kokoro_once_installed() {
        let voices = tempfile::tempdir().unwrap();
        let kokoro_dir = voices.path().join("kokoro");
        std::fs::create_dir(&kokoro_dir).unwrap();
        let engines = |installed: bool| -> Vec<Arc<dyn Engine>> {
            if installed {
                std::fs::write(kokoro_dir.join("kokoro-v1.0.onnx"), b"weights").unwrap();
            }
            vec![
                Arc::new(espeak::EspeakEngine::new()),
                Arc::new(PiperEngine::new(voices.path(), candle_core::Device::Cpu)),
                Arc::new(kokoro::KokoroEngine::new(
                    &kokoro_dir,
                    candle_core::Device::Cpu,
                )),
            ]
        };
        let named = |engine: &str, voice: &str| (engine.to_string(), voice.to_string());
        let missing = engines(false);
        assert_eq!(
            defaults(&missing, None, None),
            named("piper", "en_US-joe-medium")
        );
        let installed = engines(true);
        assert_eq!(
            defaults(&installed, None, None),
            named("kokoro", "af_heart")
        );
        assert_eq!(
            defaults(&installed, Some("piper"), None),
            named("piper", "en_US-joe-medium")
        );
        assert_eq!(
            defaults(&installed, Some("espeak"), None),
            named("espeak", "en-us")
        );
        assert_eq!(
            defaults(&installed, None, Some("bf_emma")),
            named("kokoro", "bf_emma")
        );
    }

    /// The errors behind `error`, outermost first (`error` itself excluded).
    fn causes<'a>(error: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
        std::iter::successors(error.source(), |e| (*e).source()).collect()
    }

    /// A voice whose config disappeared after the scan: the load error names the voice and
    /// the file, and its source chain reaches the I/O error itself.
    #[test]
    fn a_failed_load_keeps_the_io_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gone.onnx"), b"x").unwrap();
        let json = dir.path().join("gone.onnx.json");
        std::fs::write(&json, br#"{"audio":{"sample_rate":22050}}"#).unwrap();
        let engine = PiperEngine::new(dir.path(), candle_core::Device::Cpu);
        std::fs::remove_file(&json).unwrap();

        let error = match engine.load_voice("gone") {
            Err(e) => e,
            Ok(_) => panic!("a voice without its config loaded"),
        };
        assert!(matches!(&error, EngineError::Load { voice, .. } if voice == "gone"));
        let message = error.to_string();
        assert!(
            message.starts_with("failed to load voice 'gone': ")
                && message.contains(&json.display().to_string()),
            "{message}"
        );
        let io = causes(&error)
            .into_iter()
            .find_map(|e| e.downcast_ref::<std::io::Error>())
            .expect("the I/O error is in the source chain");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn a_failed_synthesis_keeps_the_engine_error_as_its_source() {
        let espeak = crate::espeak::EspeakError::Call {
            call: "espeak_Synth",
            code: 7,
        };
        let error = EngineError::synthesis(espeak.clone());
        assert_eq!(error.to_string(), format!("synthesis failed: {espeak}"));
        let shared = error.clone();
        let found = causes(&shared)
            .into_iter()
            .find_map(|e| e.downcast_ref::<crate::espeak::EspeakError>());
        assert_eq!(found, Some(&espeak));
    }
}
