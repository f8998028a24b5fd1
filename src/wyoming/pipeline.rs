//! The Wyoming front door's one contact with the pipeline: [`Synthesizer`] on top of
//! [`SpeechService`], so Wyoming shares batching, the audio cache, the registry, the limits
//! and the metrics with HTTP.

use futures::future::BoxFuture;
use futures::stream::StreamExt;
use futures::FutureExt;
use tracing::Instrument;

use super::{Attribution, SpeakError, Speech, Synthesizer, VoiceChoice, VoiceDescription};
use crate::metrics as m;
use crate::speech::{Request, SpeechError, SpeechService, VoiceListing};

/// OpenAI's names for "the default engine" and "the default voice", which the registry
/// resolves to whatever the server is configured with.
const DEFAULT_MODEL: &str = "tts-1";
const DEFAULT_VOICE: &str = "alloy";

impl Synthesizer for SpeechService {
    fn voices(&self) -> BoxFuture<'_, Vec<VoiceDescription>> {
        count("describe", "ok");
        let voices = SpeechService::voices(self).iter().map(describe).collect();
        futures::future::ready(voices).boxed()
    }

    fn speak(&self, text: String, voice: VoiceChoice) -> BoxFuture<'_, Result<Speech, SpeakError>> {
        let span = tracing::info_span!(
            "wyoming_synthesize",
            voice = voice.name.as_deref().unwrap_or("default"),
            chars = text.chars().count()
        );
        async move {
            let result = self.start_speaking(text, voice).await;
            match &result {
                Ok(_) => count("synthesize", "ok"),
                Err(e) => {
                    tracing::debug!(error = %e, "wyoming synthesis refused");
                    count("synthesize", error_code(e));
                }
            }
            result
        }
        .instrument(span)
        .boxed()
    }
}

impl SpeechService {
    async fn start_speaking(&self, text: String, voice: VoiceChoice) -> Result<Speech, SpeakError> {
        let (model, name) = match &voice.name {
            None => (DEFAULT_MODEL.to_string(), DEFAULT_VOICE.to_string()),
            Some(name) => {
                // A Wyoming voice name is a voice id; its engine is the model.
                let engine = SpeechService::voices(self)
                    .into_iter()
                    .find(|v| &v.info.id == name)
                    .map(|v| v.info.engine)
                    .ok_or_else(|| SpeakError::UnknownVoice(name.clone()))?;
                (engine, name.clone())
            }
        };
        let voice = match voice.speaker {
            Some(speaker) => format!("{name}:{speaker}"),
            None => name,
        };
        let job = self
            .prepare(Request {
                model,
                voice,
                input: text,
                use_cache: true,
                native_pcm: true,
                ..Request::default()
            })
            .map_err(speak_error)?;
        let stream = self.stream(job).await.map_err(speak_error)?;
        let samples = stream
            .chunks
            .map(|chunk| {
                chunk.map_err(speak_error).map(|bytes| {
                    bytes
                        .chunks_exact(2)
                        .map(|pair| i16::from_le_bytes([pair[0], pair[1]]))
                        .collect()
                })
            })
            .boxed();
        Ok(Speech {
            sample_rate: stream.sample_rate,
            samples,
        })
    }
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
        installed: true,
        version: Some(env!("CARGO_PKG_VERSION").into()),
    }
}

fn speak_error(e: SpeechError) -> SpeakError {
    let message = e.to_string();
    match e {
        SpeechError::UnknownVoice(_) | SpeechError::UnknownModel(_) => {
            SpeakError::UnknownVoice(message)
        }
        SpeechError::Invalid { .. } => SpeakError::InvalidRequest(message),
        SpeechError::Overloaded { .. } | SpeechError::ShuttingDown => SpeakError::Busy(message),
        SpeechError::BatcherStopped
        | SpeechError::VoiceLoad(_)
        | SpeechError::Engine(_)
        | SpeechError::Encoding(_) => SpeakError::Failed(message),
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
