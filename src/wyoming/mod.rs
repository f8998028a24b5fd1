//! Home Assistant's Wyoming protocol: a second way in to the speech pipeline, for voice
//! assistants that speak Wyoming over TCP instead of HTTP.
//!
//! The protocol is a stream of events, each a JSON header line with optional JSON data and a
//! binary payload. A client asks `describe` and learns the voices from `info`; it asks for
//! speech with one `synthesize`, or streams text with `synthesize-start`, `synthesize-chunk`s
//! and `synthesize-stop`, and gets `audio-start`, `audio-chunk`s and `audio-stop` back.
//!
//! The layers run one way: `frame` (bytes ↔ raw events, all size limits) → `event` (raw ↔
//! typed events) → `session` (one connection's state machine) → `accept` (the listener and its
//! connection bound). The pipeline is reached only through the [`Synthesizer`] trait, which
//! `pipeline` implements on [`crate::speech::SpeechService`]; the rest of this module knows
//! nothing of engines, caches or HTTP.

use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use futures::stream::BoxStream;

use crate::speech::Sentence;

mod accept;
mod event;
mod frame;
mod pipeline;
mod session;
#[cfg(test)]
mod tests;

pub use accept::serve;
use event::wyoming_language;
pub use event::{Attribution, VoiceDescription};
pub use session::serve_connection;

/// What the protocol needs from the speech pipeline.
pub trait Synthesizer: Send + Sync {
    /// Every voice the server offers, for `info`. Asked on each `describe` (and to resolve a
    /// voice requested by language), so voices added at run time show up.
    fn voices(&self) -> BoxFuture<'_, Vec<VoiceDescription>>;

    /// The voice for a client that names only a language (`de_DE`); `None` when no voice
    /// speaks it. By default the first installed voice of [`voices`](Self::voices) that does.
    fn voice_for_language<'a>(&'a self, language: &'a str) -> BoxFuture<'a, Option<VoiceChoice>> {
        async move {
            let voices = self.voices().await;
            first_voice_speaking(&voices, language).map(|voice| VoiceChoice {
                name: Some(voice.name.clone()),
                speaker: None,
                language: Some(language.to_string()),
            })
        }
        .boxed()
    }

    /// Starts speaking `text`, which may hold many sentences. Resolves once the voice is
    /// known (its errors come back here, before any audio is sent) and then streams mono
    /// samples at `sample_rate` as they are synthesized; one call becomes one
    /// `audio-start` … `audio-stop` on the wire.
    fn speak(&self, text: String, voice: VoiceChoice) -> BoxFuture<'_, Result<Speech, SpeakError>>;

    /// Starts speaking one sentence of a text stream exactly as the pipeline's
    /// [`LiveText`](crate::speech::LiveText) cut it (it is not normalized or split again);
    /// otherwise as [`speak`](Self::speak).
    fn speak_sentence(
        &self,
        sentence: Sentence,
        voice: VoiceChoice,
    ) -> BoxFuture<'_, Result<Speech, SpeakError>>;
}

/// The voice a request settled on: `name` as listed in [`VoiceDescription::name`] (or an alias
/// the pipeline knows), `None` for the server's default voice.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VoiceChoice {
    pub name: Option<String>,
    /// Speaker of a multi-speaker voice, by name (or id, as the client sent it).
    pub speaker: Option<String>,
    /// The language asked for (`de_DE`), for a voice that speaks many; other voices speak
    /// their own.
    pub language: Option<String>,
}

/// Audio on its way: the sample rate, and mono 16-bit little-endian samples (what an
/// `audio-chunk` carries) in pieces of any whole number of samples.
pub struct Speech {
    pub sample_rate: u32,
    pub pcm: BoxStream<'static, Result<Bytes, SpeakError>>,
}

/// Why the pipeline could not speak; each becomes an `error` event with its own code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpeakError {
    #[error("unknown voice '{0}'")]
    UnknownVoice(String),
    /// The request itself cannot be spoken (unknown speaker, text the pipeline refuses).
    #[error("{0}")]
    InvalidRequest(String),
    /// The pipeline is at capacity; a later request may succeed.
    #[error("{0}")]
    Busy(String),
    #[error("synthesis failed: {0}")]
    Failed(String),
}

/// Everything that bounds what one client can make the server do.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Connections served at once; one more is answered `error` (code `busy`) and closed.
    pub max_connections: usize,
    /// How long a connection may go without sending a whole event while the server waits
    /// for one (this also ends a peer that sends an event byte by byte).
    pub idle_timeout: Duration,
    /// How long one event may take to write; a client that stops reading is dropped.
    pub write_timeout: Duration,
    /// Longest header line, newline included.
    pub max_header_bytes: usize,
    /// Largest data block an event may announce.
    pub max_data_bytes: usize,
    /// Largest binary payload an event may announce (a TTS client sends none).
    pub max_payload_bytes: usize,
    /// Most characters of text in one `synthesize`, or in all chunks of one stream together.
    pub max_text_chars: usize,
    /// Samples per `audio-chunk`.
    pub samples_per_chunk: usize,
    /// How long streamed text may wait for its sentence to end before it is spoken up to its
    /// last clause; `None` waits for the sentence (or the end of the stream).
    pub sentence_max_wait: Option<Duration>,
    /// After shutdown is asked, how long connections may finish what they are doing.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
            max_header_bytes: 64 * 1024,
            max_data_bytes: 1 << 20,
            max_payload_bytes: 1 << 20,
            max_text_chars: 20_000,
            samples_per_chunk: 1024,
            sentence_max_wait: Some(Duration::from_millis(1500)),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl Limits {
    fn frame(&self) -> frame::FrameLimits {
        frame::FrameLimits {
            max_header_bytes: self.max_header_bytes,
            max_data_bytes: self.max_data_bytes,
            max_payload_bytes: self.max_payload_bytes,
        }
    }
}

/// The first installed voice listing `language` (`en_US`, `en-us`), or else the first whose
/// language has the same primary subtag (`en` for `en_GB`).
fn first_voice_speaking<'v>(
    voices: &'v [VoiceDescription],
    language: &str,
) -> Option<&'v VoiceDescription> {
    let canonical = |tag: &str| wyoming_language(tag).to_lowercase();
    let wanted = canonical(language);
    let primary = |tag: &str| tag.split('_').next().unwrap_or_default().to_string();
    let installed = || voices.iter().filter(|v| v.installed);
    installed()
        .find(|v| v.languages.iter().any(|l| canonical(l) == wanted))
        .or_else(|| {
            installed().find(|v| {
                v.languages
                    .iter()
                    .any(|l| primary(&canonical(l)) == primary(&wanted))
            })
        })
}
