//! The stream's wire format: the JSON a client sends, the JSON the server answers, and every
//! refusal with its close code.
//!
//! The shapes follow ElevenLabs' `stream-input` WebSocket, so clients written for it need
//! little change: the first message carries the settings (and usually `"text": " "`), later
//! ones carry `text` pieces, `"flush": true` speaks what is buffered, and `"text": ""` ends
//! the stream. Audio travels in binary messages; everything else is a JSON text message with
//! a `type`. Fields a client sends that are not ours (ElevenLabs' `voice_settings`,
//! `generation_config`, …) are ignored, as the HTTP API ignores OpenAI fields it has no use for.

use axum::extract::ws::close_code;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::api::speech::VoiceField;
use crate::api::ApiError;

/// One message from the client.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ClientMessage {
    /// Optional: `text` (the default), `flush` or `end`.
    #[serde(rename = "type", default)]
    pub kind: Option<Kind>,
    /// A piece of text, cut anywhere. `""` ends the stream.
    #[serde(default)]
    pub text: Option<String>,
    /// `true` speaks everything buffered, even an unfinished sentence.
    #[serde(default)]
    pub flush: Option<bool>,
    /// Only in the first message.
    #[serde(flatten)]
    pub settings: StreamSettings,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Kind {
    Text,
    Flush,
    End,
}

/// How the stream should sound: the fields of `POST /v1/audio/speech` that apply to it.
#[derive(Debug, Default, Deserialize)]
pub(super) struct StreamSettings {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub voice: Option<VoiceField>,
    /// Any format of the HTTP API; `pcm` (16-bit mono at 24 kHz) when absent.
    #[serde(default)]
    pub response_format: Option<String>,
    #[serde(default)]
    pub speed: Option<f64>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub noise_scale: Option<f32>,
    #[serde(default)]
    pub noise_w: Option<f32>,
    /// How long text may wait for its sentence to end before it is spoken up to its last
    /// clause mark; 0 waits for the sentence (or a flush).
    #[serde(default)]
    pub max_wait_ms: Option<u64>,
    /// `ssml`: the text is a series of `<speak>` documents, each spoken once it is complete.
    #[serde(default)]
    pub input_format: Option<String>,
}

impl StreamSettings {
    pub fn is_empty(&self) -> bool {
        self.model.is_none()
            && self.voice.is_none()
            && self.response_format.is_none()
            && self.speed.is_none()
            && self.seed.is_none()
            && self.noise_scale.is_none()
            && self.noise_w.is_none()
            && self.max_wait_ms.is_none()
            && self.input_format.is_none()
    }
}

/// One JSON message from the server.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ServerMessage<'a> {
    /// After the first message: what the audio will be.
    Start {
        voice: String,
        response_format: &'static str,
        sample_rate: u32,
    },
    /// After a sentence's audio: its text (as spoken: normalized, markup gone) and how much
    /// audio it got.
    Sentence {
        index: usize,
        text: &'a str,
        audio_bytes: usize,
        start_s: f64,
        duration_s: f64,
    },
    /// All audio of the text before a flush has been sent.
    Flushed { sentences: usize },
    /// The last message of a stream that ended well, before the close.
    Done {
        sentences: usize,
        audio_bytes: u64,
        duration_s: f64,
    },
    /// Why the server closes the stream; the same `error` object as the HTTP API's.
    Error {
        close_code: u16,
        error: ErrorBody<'a>,
    },
}

#[derive(Debug, Serialize)]
pub(super) struct ErrorBody<'a> {
    pub message: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub param: Option<&'a str>,
    pub code: &'a str,
}

/// Why the server ends a stream early.
#[derive(Debug, Clone)]
pub(super) struct Refusal {
    pub close_code: u16,
    pub kind: &'static str,
    pub code: &'static str,
    pub param: Option<String>,
    pub message: String,
}

/// Close reasons are at most 123 bytes (RFC 6455 §5.5); the whole message goes in the
/// `error` message before the close.
const MAX_REASON_BYTES: usize = 123;

impl Refusal {
    pub fn new(close_code: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            close_code,
            kind: if close_code == close_code::ERROR || close_code == close_code::AGAIN {
                "server_error"
            } else {
                "invalid_request_error"
            },
            code,
            param: None,
            message: message.into(),
        }
    }

    /// The message, cut to fit a close frame.
    pub fn reason(&self) -> String {
        let mut end = self.message.len().min(MAX_REASON_BYTES);
        while !self.message.is_char_boundary(end) {
            end -= 1;
        }
        self.message[..end].to_string()
    }

    pub fn to_message(&self) -> ServerMessage<'_> {
        ServerMessage::Error {
            close_code: self.close_code,
            error: ErrorBody {
                message: &self.message,
                kind: self.kind,
                param: self.param.as_deref(),
                code: self.code,
            },
        }
    }
}

/// The pipeline's errors reach the stream through the HTTP mapping, so a refusal names the
/// same code and parameter as the HTTP answer would; the status picks the close code.
impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        let close_code = match e.status {
            _ if e.code == Some("shutting_down") => close_code::AWAY,
            StatusCode::PAYLOAD_TOO_LARGE => close_code::SIZE,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => close_code::AGAIN,
            status if status.is_client_error() => close_code::POLICY,
            _ => close_code::ERROR,
        };
        Self {
            close_code,
            kind: e.kind,
            code: e.code.unwrap_or("error"),
            param: e.param,
            message: e.message,
        }
    }
}

impl From<crate::speech::SpeechError> for Refusal {
    fn from(e: crate::speech::SpeechError) -> Self {
        ApiError::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::speech::SpeechError;
    use std::time::Duration;

    #[test]
    fn elevenlabs_style_messages_parse() {
        let first: ClientMessage = serde_json::from_str(
            r#"{"text": " ", "voice": "alloy", "speed": 1.5, "voice_settings": {"stability": 0.5},
                "generation_config": {"chunk_length_schedule": [50]}, "xi_api_key": "x"}"#,
        )
        .unwrap();
        assert_eq!(first.text.as_deref(), Some(" "));
        assert_eq!(first.settings.voice, Some(VoiceField("alloy".into())));
        assert_eq!(first.settings.speed, Some(1.5));
        assert!(!first.settings.is_empty());

        let piece: ClientMessage =
            serde_json::from_str(r#"{"text": "Hel", "flush": true}"#).unwrap();
        assert!(piece.settings.is_empty());
        assert_eq!(piece.flush, Some(true));
        let end: ClientMessage = serde_json::from_str(r#"{"type": "end"}"#).unwrap();
        assert_eq!(end.kind, Some(Kind::End));
        assert!(serde_json::from_str::<ClientMessage>(r#"{"type": "stop"}"#).is_err());
        assert!(serde_json::from_str::<ClientMessage>(r#"{"text": 5}"#).is_err());
        assert!(serde_json::from_str::<ClientMessage>(r#"["text"]"#).is_err());
    }

    #[test]
    fn pipeline_errors_close_with_the_code_of_their_http_status() {
        let unknown = Refusal::from(SpeechError::UnknownVoice("no such voice".into()));
        assert_eq!(unknown.close_code, close_code::POLICY);
        assert_eq!(unknown.code, "voice_not_found");
        assert_eq!(unknown.param.as_deref(), Some("voice"));
        let busy = Refusal::from(SpeechError::Overloaded {
            retry_after: Duration::from_secs(1),
        });
        assert_eq!(busy.close_code, close_code::AGAIN);
        let failed = Refusal::from(SpeechError::Engine(crate::speech::Failure::of(
            std::io::Error::other("/srv/voices/secret.onnx is gone"),
        )));
        assert_eq!(failed.close_code, close_code::ERROR);
        assert!(
            failed.message.starts_with("internal error"),
            "{}",
            failed.message
        );
        assert!(!failed.message.contains("/srv"), "{}", failed.message);
        assert_eq!(
            Refusal::from(SpeechError::ShuttingDown).close_code,
            close_code::AWAY
        );
    }

    #[test]
    fn close_reasons_fit_a_close_frame_on_a_char_boundary() {
        let refusal = Refusal::new(close_code::POLICY, "x", "é".repeat(100));
        let reason = refusal.reason();
        assert!(reason.len() <= MAX_REASON_BYTES && reason.len() >= MAX_REASON_BYTES - 1);
        assert!(reason.chars().all(|c| c == 'é'));
        let json = serde_json::to_value(refusal.to_message()).unwrap();
        assert_eq!(json["type"], "error");
        assert_eq!(json["close_code"], 1008);
        assert_eq!(
            json["error"]["message"].as_str().unwrap().chars().count(),
            100
        );
    }
}
