//! The Wyoming events a text-to-speech server reads and writes, as types.
//!
//! Framing knows nothing of meaning and the session should know nothing of JSON; this is the
//! seam between them. Incoming events are parsed leniently where the reference client is
//! lenient (unknown fields, `null` for absent values, a numeric speaker) and strictly where a
//! wrong guess would speak the wrong thing (missing text, an unsupported text format).

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Value};

use super::frame::RawEvent;

/// Sample width of every audio event: signed 16-bit little-endian PCM.
pub(crate) const SAMPLE_WIDTH: u32 = 2;
const CHANNELS: u32 = 1;

/// What the server advertises about one of its voices in `info`.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceDescription {
    /// The name a client sends back in `synthesize.voice.name`.
    pub name: String,
    /// Human-readable name; Home Assistant shows it in voice pickers.
    pub description: Option<String>,
    /// Language tags, `en_US` or `en-US` (sent as `en_US`, the form Wyoming clients list).
    pub languages: Vec<String>,
    /// Speaker names of a multi-speaker voice; empty for a single speaker.
    pub speakers: Vec<String>,
    pub attribution: Attribution,
    /// Whether the voice can be used now (Home Assistant hides voices that are not).
    pub installed: bool,
    pub version: Option<String>,
}

/// Who made a voice and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attribution {
    pub name: String,
    pub url: String,
}

/// The voice a request asks for, as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RequestedVoice {
    /// No preference: the server's default voice.
    Default,
    Named {
        name: String,
        speaker: Option<String>,
        /// Read by a voice that speaks many languages; others speak their own, as in the
        /// reference server, where a name wins over a language.
        language: Option<String>,
    },
    Language(String),
}

/// An event a client sends to a text-to-speech server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ClientEvent {
    Describe,
    Synthesize { text: String, voice: RequestedVoice },
    SynthesizeStart { voice: RequestedVoice },
    SynthesizeChunk { text: String },
    SynthesizeStop,
    Ping { text: Option<String> },
}

/// Why an incoming event was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EventError {
    #[error("unknown event type '{0}'")]
    Unknown(String),
    #[error("invalid '{kind}' event: {reason}")]
    Invalid { kind: String, reason: String },
}

#[derive(Deserialize)]
struct SynthesizeData {
    text: String,
    #[serde(default)]
    voice: Option<WireVoice>,
    #[serde(default)]
    text_format: Option<String>,
}

#[derive(Deserialize)]
struct StartData {
    #[serde(default)]
    voice: Option<WireVoice>,
    #[serde(default)]
    text_format: Option<String>,
}

#[derive(Deserialize)]
struct ChunkData {
    text: String,
}

#[derive(Deserialize)]
struct PingData {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireVoice {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default, deserialize_with = "string_or_number")]
    speaker: Option<String>,
}

/// Speakers are strings in the protocol; some clients send a speaker id as a number.
fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => {
            return Err(serde::de::Error::custom(format!(
                "speaker must be a string, not {other}"
            )))
        }
    })
}

impl From<Option<WireVoice>> for RequestedVoice {
    /// A name wins over a language, as in the reference client.
    fn from(voice: Option<WireVoice>) -> Self {
        let voice = voice.unwrap_or_default();
        match (voice.name, voice.language) {
            (Some(name), language) => RequestedVoice::Named {
                name,
                speaker: voice.speaker,
                language,
            },
            (None, Some(language)) => RequestedVoice::Language(language),
            (None, None) => RequestedVoice::Default,
        }
    }
}

impl ClientEvent {
    pub fn parse(raw: RawEvent) -> Result<Self, EventError> {
        let kind = raw.kind.as_str();
        let invalid = |reason: String| EventError::Invalid {
            kind: kind.to_string(),
            reason,
        };
        let data = Value::Object(raw.data);
        match kind {
            "describe" => Ok(ClientEvent::Describe),
            "synthesize" => {
                let d: SynthesizeData = from_data(data).map_err(invalid)?;
                plain_text(d.text_format.as_deref()).map_err(invalid)?;
                Ok(ClientEvent::Synthesize {
                    text: d.text,
                    voice: d.voice.into(),
                })
            }
            "synthesize-start" => {
                let d: StartData = from_data(data).map_err(invalid)?;
                plain_text(d.text_format.as_deref()).map_err(invalid)?;
                Ok(ClientEvent::SynthesizeStart {
                    voice: d.voice.into(),
                })
            }
            "synthesize-chunk" => {
                let d: ChunkData = from_data(data).map_err(invalid)?;
                Ok(ClientEvent::SynthesizeChunk { text: d.text })
            }
            "synthesize-stop" => Ok(ClientEvent::SynthesizeStop),
            "ping" => {
                let d: PingData = from_data(data).map_err(invalid)?;
                Ok(ClientEvent::Ping { text: d.text })
            }
            other => Err(EventError::Unknown(other.to_string())),
        }
    }
}

fn from_data<T: for<'de> Deserialize<'de>>(data: Value) -> Result<T, String> {
    serde_json::from_value(data).map_err(|e| e.to_string())
}

/// Only plain text is spoken; SSML read as text would speak its tags.
fn plain_text(format: Option<&str>) -> Result<(), String> {
    match format {
        None | Some("text") => Ok(()),
        Some(other) => Err(format!("text_format '{other}' is not supported")),
    }
}

/// An event the server sends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ServerEvent {
    Info { voices: Vec<VoiceDescription> },
    AudioStart { rate: u32 },
    AudioChunk { rate: u32, pcm: Bytes },
    AudioStop,
    SynthesizeStopped,
    Error { code: &'static str, text: String },
    Pong { text: Option<String> },
}

impl ServerEvent {
    pub fn into_raw(self) -> RawEvent {
        let (kind, data, payload) = match self {
            ServerEvent::Info { voices } => ("info", info_data(&voices), Bytes::new()),
            ServerEvent::AudioStart { rate } => ("audio-start", format_data(rate), Bytes::new()),
            ServerEvent::AudioChunk { rate, pcm } => ("audio-chunk", format_data(rate), pcm),
            ServerEvent::AudioStop => ("audio-stop", json!({}), Bytes::new()),
            ServerEvent::SynthesizeStopped => ("synthesize-stopped", json!({}), Bytes::new()),
            ServerEvent::Error { code, text } => {
                ("error", json!({"text": text, "code": code}), Bytes::new())
            }
            ServerEvent::Pong { text } => ("pong", json!({"text": text}), Bytes::new()),
        };
        let Value::Object(data) = data else {
            unreachable!("event data is always built as an object")
        };
        RawEvent {
            kind: kind.to_string(),
            data,
            payload,
        }
    }
}

fn format_data(rate: u32) -> Value {
    json!({"rate": rate, "width": SAMPLE_WIDTH, "channels": CHANNELS})
}

/// Wyoming writes languages with an underscore (`en_US`); BCP 47 with a hyphen.
pub(crate) fn wyoming_language(tag: &str) -> String {
    tag.replace('-', "_")
}

/// The `info` data: one text-to-speech program listing every voice, and nothing else.
fn info_data(voices: &[VoiceDescription]) -> Value {
    let voices: Vec<Value> = voices
        .iter()
        .map(|v| {
            let mut voice = json!({
                "name": v.name,
                "description": v.description,
                "attribution": v.attribution,
                "installed": v.installed,
                "version": v.version,
                "languages": v.languages.iter().map(|l| wyoming_language(l)).collect::<Vec<_>>(),
            });
            if !v.speakers.is_empty() {
                voice["speakers"] = v
                    .speakers
                    .iter()
                    .map(|name| json!({"name": name}))
                    .collect();
            }
            voice
        })
        .collect();
    json!({
        "asr": [],
        "tts": [{
            "name": "omnivoice",
            "description": "omnivoice-server text to speech",
            "attribution": {
                "name": "omnivoice-server",
                "url": env!("CARGO_PKG_REPOSITORY"),
            },
            "installed": true,
            "version": env!("CARGO_PKG_VERSION"),
            "voices": voices,
            "supports_synthesize_streaming": true,
        }],
        "handle": [],
        "intent": [],
        "wake": [],
        "mic": [],
        "snd": [],
    })
}

/// Data as a map, for tests that build raw events by hand.
#[cfg(test)]
pub(crate) fn data(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("event data must be an object, not {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(kind: &str, value: Value) -> Result<ClientEvent, EventError> {
        ClientEvent::parse(RawEvent::new(kind, data(value)))
    }

    #[test]
    fn synthesize_voices_parse_in_every_shape() {
        let voice = |v: Value| match parse("synthesize", json!({"text": "Hi", "voice": v})) {
            Ok(ClientEvent::Synthesize { text, voice }) => {
                assert_eq!(text, "Hi");
                voice
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            voice(json!({"name": "joe", "speaker": "p1"})),
            RequestedVoice::Named {
                name: "joe".into(),
                speaker: Some("p1".into()),
                language: None,
            }
        );
        assert_eq!(
            voice(json!({"name": "joe", "speaker": 3, "language": "de_DE"})),
            RequestedVoice::Named {
                name: "joe".into(),
                speaker: Some("3".into()),
                language: Some("de_DE".into()),
            },
            "a name with its language; a numeric speaker becomes its string"
        );
        assert_eq!(
            voice(json!({"language": "de_DE", "speaker": "x"})),
            RequestedVoice::Language("de_DE".into())
        );
        assert_eq!(voice(json!({})), RequestedVoice::Default);
        assert_eq!(voice(Value::Null), RequestedVoice::Default);
        assert_eq!(
            voice(json!({"name": null, "language": null})),
            RequestedVoice::Default
        );
        assert_eq!(
            parse("synthesize", json!({"text": "Hi"})),
            Ok(ClientEvent::Synthesize {
                text: "Hi".into(),
                voice: RequestedVoice::Default
            })
        );
    }

    #[test]
    fn streaming_events_parse() {
        assert_eq!(
            parse(
                "synthesize-start",
                json!({"voice": {"name": "joe"}, "context": {"a": 1}})
            ),
            Ok(ClientEvent::SynthesizeStart {
                voice: RequestedVoice::Named {
                    name: "joe".into(),
                    speaker: None,
                    language: None,
                }
            })
        );
        assert_eq!(
            parse("synthesize-start", json!({})),
            Ok(ClientEvent::SynthesizeStart {
                voice: RequestedVoice::Default
            })
        );
        assert_eq!(
            parse("synthesize-chunk", json!({"text": "Hel"})),
            Ok(ClientEvent::SynthesizeChunk { text: "Hel".into() })
        );
        assert_eq!(
            parse("synthesize-stop", json!({})),
            Ok(ClientEvent::SynthesizeStop)
        );
        assert_eq!(parse("describe", json!({})), Ok(ClientEvent::Describe));
        assert_eq!(
            parse("ping", json!({"text": "x"})),
            Ok(ClientEvent::Ping {
                text: Some("x".into())
            })
        );
    }

    #[test]
    fn bad_events_are_told_apart_from_unknown_ones() {
        assert_eq!(
            parse("transcribe", json!({})),
            Err(EventError::Unknown("transcribe".into()))
        );
        for (kind, value) in [
            ("synthesize", json!({})),
            ("synthesize", json!({"text": 5})),
            ("synthesize", json!({"text": "x", "voice": "joe"})),
            (
                "synthesize",
                json!({"text": "x", "voice": {"speaker": [1]}}),
            ),
            (
                "synthesize",
                json!({"text": "<speak/>", "text_format": "ssml"}),
            ),
            ("synthesize-start", json!({"text_format": "ssml"})),
            ("synthesize-chunk", json!({})),
        ] {
            assert!(
                matches!(parse(kind, value.clone()), Err(EventError::Invalid { .. })),
                "{kind} {value}"
            );
        }
        assert!(parse("synthesize", json!({"text": "x", "text_format": "text"})).is_ok());
    }

    #[test]
    fn info_lists_every_voice_in_one_streaming_program() {
        let voices = vec![
            VoiceDescription {
                name: "en_US-joe-medium".into(),
                description: Some("Joe".into()),
                languages: vec!["en-US".into()],
                speakers: vec![],
                attribution: Attribution {
                    name: "rhasspy".into(),
                    url: "https://example.invalid/piper".into(),
                },
                installed: true,
                version: None,
            },
            VoiceDescription {
                name: "multi".into(),
                description: None,
                languages: vec!["de_DE".into(), "en".into()],
                speakers: vec!["a".into(), "b".into()],
                attribution: Attribution {
                    name: "x".into(),
                    url: String::new(),
                },
                installed: false,
                version: Some("2".into()),
            },
        ];
        let raw = ServerEvent::Info { voices }.into_raw();
        assert_eq!(raw.kind, "info");
        let tts = raw.data["tts"].as_array().unwrap();
        assert_eq!(tts.len(), 1);
        assert_eq!(tts[0]["supports_synthesize_streaming"], true);
        assert_eq!(tts[0]["installed"], true);
        let listed = tts[0]["voices"].as_array().unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0]["name"], "en_US-joe-medium");
        assert_eq!(listed[0]["languages"], json!(["en_US"]));
        assert_eq!(listed[0]["description"], "Joe");
        assert_eq!(listed[0]["attribution"]["name"], "rhasspy");
        assert!(listed[0].get("speakers").is_none());
        assert_eq!(listed[1]["languages"], json!(["de_DE", "en"]));
        assert_eq!(listed[1]["speakers"], json!([{"name": "a"}, {"name": "b"}]));
        assert_eq!(listed[1]["installed"], false);
        assert_eq!(listed[1]["version"], "2");
        assert!(raw.payload.is_empty());
    }

    #[test]
    fn audio_chunks_carry_little_endian_pcm() {
        let pcm: Vec<u8> = [1i16, -2, 0x1234]
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let raw = ServerEvent::AudioChunk {
            rate: 16000,
            pcm: Bytes::from(pcm),
        }
        .into_raw();
        assert_eq!(raw.kind, "audio-chunk");
        assert_eq!(
            raw.data,
            data(json!({"rate": 16000, "width": 2, "channels": 1}))
        );
        assert_eq!(&raw.payload[..], &[1, 0, 0xfe, 0xff, 0x34, 0x12]);
        let raw = ServerEvent::Error {
            code: "unknown-voice",
            text: "no".into(),
        }
        .into_raw();
        assert_eq!(
            raw.data,
            data(json!({"text": "no", "code": "unknown-voice"}))
        );
    }
}
