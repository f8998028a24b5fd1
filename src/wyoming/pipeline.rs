//! The Wyoming front door's one contact with the pipeline: [`Synthesizer`] on top of
//! [`SpeechService`], so Wyoming shares batching, the audio cache, the registry, the limits
//! and the metrics with HTTP.

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use futures::FutureExt;
use tracing::Instrument;

use super::{Attribution, SpeakError, Speech, Synthesizer, VoiceChoice, VoiceDescription};
use crate::metrics as m;
use crate::speech::{
    LiveSpeech, Request, Sentence, SentenceAudio, SpeechError, SpeechService, VoiceListing,
};

/// OpenAI's names for "the default engine" and "the default voice", which the registry
/// resolves to whatever the server is configured with.
const DEFAULT_MODEL: &str = "tts-1";
const DEFAULT_VOICE: &str = "alloy";

impl Synthesizer for SpeechService {
    fn voices(&self) -> BoxFuture<'_, Vec<VoiceDescription>> {
        count("describe", "ok");
        async move {
            let voices = SpeechService::voices(self).await;
            voices.iter().map(describe).collect()
        }
        .boxed()
    }

    /// The voice the server's settings choose for the language (`[voices.by_language]`, or
    /// the default voice when it speaks it), as HTTP's `language` field chooses; else any
    /// voice that speaks it.
    fn voice_for_language<'a>(&'a self, language: &'a str) -> BoxFuture<'a, Option<VoiceChoice>> {
        async move {
            let tag = language.replace('_', "-");
            if self
                .finds_voice_for(DEFAULT_MODEL, DEFAULT_VOICE, &tag)
                .await
            {
                return Some(VoiceChoice {
                    name: None,
                    speaker: None,
                    language: Some(language.to_string()),
                });
            }
            let voices: Vec<_> = SpeechService::voices(self)
                .await
                .iter()
                .map(describe)
                .collect();
            super::first_voice_speaking(&voices, language).map(|voice| VoiceChoice {
                name: Some(voice.name.clone()),
                speaker: None,
                language: Some(language.to_string()),
            })
        }
        .boxed()
    }

    fn speak(&self, text: String, voice: VoiceChoice) -> BoxFuture<'_, Result<Speech, SpeakError>> {
        let span = tracing::info_span!(
            "wyoming_synthesize",
            voice = voice.name.as_deref().unwrap_or("default"),
            chars = text.chars().count()
        );
        counted(self.start_speaking(text, voice))
            .instrument(span)
            .boxed()
    }

    fn speak_sentence(
        &self,
        sentence: Sentence,
        voice: VoiceChoice,
    ) -> BoxFuture<'_, Result<Speech, SpeakError>> {
        let span = tracing::info_span!(
            "wyoming_synthesize",
            voice = voice.name.as_deref().unwrap_or("default"),
            chars = sentence.text().chars().count()
        );
        counted(self.start_speaking_sentence(sentence, voice))
            .instrument(span)
            .boxed()
    }
}

/// Counts a request by how it started.
async fn counted(
    start: impl std::future::Future<Output = Result<Speech, SpeakError>>,
) -> Result<Speech, SpeakError> {
    let result = start.await;
    match &result {
        Ok(_) => count("synthesize", "ok"),
        Err(e) => {
            tracing::debug!(error = %e, "wyoming synthesis refused");
            count("synthesize", error_code(e));
        }
    }
    result
}

impl SpeechService {
    /// The whole text as one request, cached like HTTP's.
    async fn start_speaking(&self, text: String, voice: VoiceChoice) -> Result<Speech, SpeakError> {
        let job = self
            .prepare(Request {
                input: text,
                use_cache: true,
                ..self.wyoming_request(voice).await?
            })
            .await
            .map_err(speak_error)?;
        let stream = self.stream(job).await.map_err(speak_error)?;
        // Native-rate `pcm` is already what an `audio-chunk` carries.
        let pcm = stream
            .chunks
            .map(|chunk| chunk.map_err(speak_error))
            .boxed();
        Ok(Speech {
            sample_rate: stream.sample_rate,
            pcm,
        })
    }

    /// One sentence of a stream, as it is: a stream of the pipeline's own with this one
    /// sentence in it. Resolves once its first audio (or its failure) is there, so that a
    /// voice that fails to load is refused before `audio-start`.
    async fn start_speaking_sentence(
        &self,
        sentence: Sentence,
        voice: VoiceChoice,
    ) -> Result<Speech, SpeakError> {
        let mut live = self
            .live(self.wyoming_request(voice).await?)
            .await
            .map_err(speak_error)?;
        let sample_rate = live.sample_rate();
        let mut audio = live.sentence(sentence);
        let first = match audio.next_part().await {
            Some(part) => Some(live.encode(part).await.map_err(speak_error)?),
            None => None,
        };
        let rest = stream::unfold(Some((live, audio)), |state| async move {
            let (mut live, mut audio) = state?;
            Some(match next_bytes(&mut live, &mut audio).await {
                Ok(Some(bytes)) => (Ok(bytes), Some((live, audio))),
                Ok(None) => (finish(live, audio).await, None),
                Err(e) => (Err(e), None),
            })
        });
        let first = first.filter(|bytes| !bytes.is_empty());
        let pcm = stream::iter(first.map(Ok)).chain(rest).boxed();
        Ok(Speech { sample_rate, pcm })
    }

    /// The request of a Wyoming voice choice, without its input. A language goes with the
    /// default voice (which then reads it, or gives way to the voice that does) and with a
    /// named voice that speaks many languages; a voice of one language speaks its own.
    async fn wyoming_request(&self, voice: VoiceChoice) -> Result<Request, SpeakError> {
        let language = voice.language.map(|l| l.replace('_', "-"));
        let (model, name, language) = match voice.name {
            None => (
                DEFAULT_MODEL.to_string(),
                DEFAULT_VOICE.to_string(),
                language,
            ),
            Some(name) => {
                // A Wyoming voice name is a voice id; its engine is the model.
                let info = SpeechService::voices(self)
                    .await
                    .into_iter()
                    .find(|v| v.info.id == name)
                    .map(|v| v.info)
                    .ok_or_else(|| SpeakError::UnknownVoice(name.clone()))?;
                let language = language.filter(|_| info.language == crate::engine::MULTILINGUAL);
                (info.engine, name, language)
            }
        };
        let voice = match voice.speaker {
            Some(speaker) => format!("{name}:{speaker}"),
            None => name,
        };
        Ok(Request {
            model,
            voice,
            language,
            native_pcm: true,
            ..Request::default()
        })
    }
}

/// The sentence's next non-empty bytes; `None` once it is complete.
async fn next_bytes(
    live: &mut LiveSpeech,
    audio: &mut SentenceAudio,
) -> Result<Option<Bytes>, SpeakError> {
    while let Some(part) = audio.next_part().await {
        let bytes = live.encode(part).await.map_err(speak_error)?;
        if !bytes.is_empty() {
            return Ok(Some(bytes));
        }
    }
    Ok(None)
}

/// The sentence is complete: the stream's last bytes.
async fn finish(mut live: LiveSpeech, audio: SentenceAudio) -> Result<Bytes, SpeakError> {
    live.end_sentence(audio).map_err(speak_error)?;
    live.finish().await.map_err(speak_error)
}

fn describe(voice: &VoiceListing) -> VoiceDescription {
    let info = &voice.info;
    let attribution = match info.engine.as_str() {
        "piper" => Attribution {
            name: "rhasspy".into(),
            url: "https://github.com/rhasspy/piper".into(),
        },
        "espeak" => Attribution {
            name: "eSpeak NG".into(),
            url: "https://github.com/espeak-ng/espeak-ng".into(),
        },
        "kokoro" => Attribution {
            name: "hexgrad".into(),
            url: "https://github.com/hexgrad/kokoro".into(),
        },
        other => Attribution {
            name: other.into(),
            url: String::new(),
        },
    };
    VoiceDescription {
        name: info.id.clone(),
        description: Some(format!("{} ({})", info.id, info.engine)),
        languages: vec![info.language.clone()],
        speakers: info.speakers.clone(),
        attribution,
        // A voice this server lists but cannot speak (Kokoro's ja and zh packs) is not one a
        // satellite should pick, nor the one a language falls back to.
        installed: info.unsupported.is_none(),
        version: Some(env!("CARGO_PKG_VERSION").into()),
    }
}

fn speak_error(e: SpeechError) -> SpeakError {
    let message = e.for_clients();
    match e {
        SpeechError::UnknownVoice(_) | SpeechError::UnknownModel(_) => {
            SpeakError::UnknownVoice(message)
        }
        SpeechError::Invalid { .. }
        | SpeechError::InvalidLexicon(_)
        | SpeechError::LexiconEntryNotFound(_) => SpeakError::InvalidRequest(message),
        SpeechError::Overloaded { .. } | SpeechError::ShuttingDown => SpeakError::Busy(message),
        SpeechError::BatcherStopped
        | SpeechError::VoiceLoad(_)
        | SpeechError::Engine(_)
        | SpeechError::Encoding(_)
        | SpeechError::LexiconStorage(_) => SpeakError::Failed(message),
    }
}

fn error_code(e: &SpeakError) -> &'static str {
    match e {
        SpeakError::UnknownVoice(_) => "unknown_voice",
        SpeakError::InvalidRequest(_) => "invalid_request",
        SpeakError::Busy(_) => "busy",
        SpeakError::Failed(_) => "failed",
    }
}

/// Requests per front door: the same counter as HTTP's, with `protocol="wyoming"`.
fn count(route: &'static str, status: &'static str) {
    metrics::counter!(m::REQUESTS_TOTAL, "protocol" => "wyoming", "route" => route, "status" => status)
        .increment(1);
}
