//! `POST /v1/audio/speech`: OpenAI's request, validated; the answer as one body, a chunked
//! audio stream, or server-sent events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures::stream::{Stream, StreamExt};
use serde::Deserialize;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::extract::ApiJson;
use super::headers::{
    X_CACHE, X_CACHE_LAYER, X_DURATION, X_LATENCY, X_NO_SPEECH_DETECTED, X_SAMPLE_RATE,
    X_UNKNOWN_NONVERBAL_TAGS,
};
use super::schema::{self, SpeechResponses};
use super::sse::sse;
use super::{ApiError, AppState};
use crate::audio::AudioFormat;
use crate::metrics as m;
use crate::speech::{Request, SpeechError, SpeechStream, TimedChunk};

// This type is also the request schema of `/openapi.json`: numbers and names that have their
// source elsewhere (ranges, formats, the input limit) come from there through `schema_with`.
/// OpenAI's speech request. Fields OpenAI clients send that we don't use are ignored.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"model": "tts-1", "voice": "alloy", "input": "Hello from my own server!", "response_format": "mp3"}))]
pub struct SpeechRequest {
    /// An engine (`piper`, `espeak`, `kokoro`, `omnivoice`), an OpenAI model name (`tts-1`,
    /// `tts-1-hd`, `gpt-4o-mini-tts`: the default engine) or a configured alias.
    /// `GET /v1/models` lists them. The default engine when absent (OpenAI requires it; the
    /// Python omnivoice-server does not).
    #[serde(default = "default_model")]
    #[schema(example = "tts-1")]
    pub model: String,
    /// The text to speak.
    #[schema(schema_with = schema::input_schema)]
    pub input: String,
    /// `alloy` when absent (OpenAI requires it; the Python omnivoice-server does not).
    #[serde(default = "default_voice")]
    pub voice: VoiceField,
    /// The Python omnivoice-server's other name for `voice` (a preset or `clone:<profile>`);
    /// it wins over `voice`, and naming two different voices is refused.
    #[serde(default)]
    #[schema(example = "clone:my-voice")]
    pub speaker: Option<String>,
    /// Audio format of the answer; `mp3` when absent.
    #[serde(default)]
    #[schema(schema_with = schema::response_format_schema)]
    pub response_format: Option<String>,
    /// Speaking rate; 1.0 when absent. The audio's length scales by exactly 1/speed.
    #[serde(default)]
    #[schema(schema_with = schema::speed_schema)]
    pub speed: Option<f64>,
    /// A voice design for OmniVoice (`female, low pitch, british accent`): it then decides
    /// the voice. Other engines accept it and have no use for it.
    #[serde(default)]
    #[schema(example = "female, low pitch, british accent")]
    pub instructions: Option<String>,
    // OmniVoice's generation fields (the Python omnivoice-server's); refused for other
    // engines. Written out rather than flattened from a struct of their own: serde's flatten
    // would make the request schema a composition that OpenAPI tools read less well.
    #[serde(default)]
    #[schema(schema_with = schema::generation::num_step)]
    pub num_step: Option<u32>,
    #[serde(default)]
    #[schema(schema_with = schema::generation::guidance_scale)]
    pub guidance_scale: Option<f32>,
    #[serde(default)]
    #[schema(schema_with = schema::generation::t_shift)]
    pub t_shift: Option<f32>,
    #[serde(default)]
    #[schema(schema_with = schema::generation::position_temperature)]
    pub position_temperature: Option<f32>,
    #[serde(default)]
    #[schema(schema_with = schema::generation::class_temperature)]
    pub class_temperature: Option<f32>,
    #[serde(default)]
    #[schema(schema_with = schema::generation::layer_penalty_factor)]
    pub layer_penalty_factor: Option<f32>,
    /// Whether the model is told to denoise a reference (OmniVoice); true when absent.
    #[serde(default)]
    pub denoise: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = schema::generation::duration)]
    pub duration: Option<f32>,
    /// Whether a reference is preprocessed (OmniVoice); true when absent.
    #[serde(default)]
    pub preprocess_prompt: Option<bool>,
    /// Whether long silences are trimmed and the edges faded (OmniVoice); true when absent.
    #[serde(default)]
    pub postprocess_output: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = schema::generation::audio_chunk_duration)]
    pub audio_chunk_duration: Option<f32>,
    #[serde(default)]
    #[schema(schema_with = schema::generation::audio_chunk_threshold)]
    pub audio_chunk_threshold: Option<f32>,
    /// `audio` (the default: audio bytes) or `sse` (server-sent events).
    #[serde(default)]
    pub stream_format: Option<StreamFormat>,
    /// `false` returns one whole body (with `Content-Length`) instead of a chunked stream;
    /// absent means the server's `--stream` setting (on by default).
    #[serde(default)]
    pub stream: Option<bool>,
    /// Fixed seed: the same request gives the same audio.
    #[serde(default)]
    #[schema(schema_with = schema::seed_schema)]
    pub seed: Option<u64>,
    /// `false` bypasses the audio cache (as `Cache-Control: no-cache` does).
    #[serde(default)]
    pub cache: Option<bool>,
    /// VITS prior noise; the voice's own value when absent.
    #[serde(default)]
    #[schema(schema_with = schema::noise_schema)]
    pub noise_scale: Option<f32>,
    /// VITS duration noise; the voice's own value when absent.
    #[serde(default)]
    #[schema(schema_with = schema::noise_schema)]
    pub noise_w: Option<f32>,
    /// With `"stream_format": "sse"`: also send `speech.audio.timestamps` events with the
    /// words each piece of audio completes. On `/v1/audio/speech/timestamps` words always
    /// come; there `"stream": true` sends them as NDJSON.
    #[serde(default)]
    pub timestamps: Option<bool>,
    /// How English text is written out before it is spoken (Kokoro-FastAPI's field; the
    /// server's settings when absent).
    #[serde(default)]
    pub normalization_options: Option<NormalizationOptions>,
    /// The language the input is written in (`en`, `de`, `pt-BR`; Kokoro-FastAPI's
    /// `lang_code` is taken too). With a voice alias (an OpenAI voice name) it chooses the
    /// voice that speaks it (`[voices.by_language]`); a voice named outright reads the input
    /// with that language's phonemizer, in its own timbre.
    #[serde(default, alias = "lang_code")]
    #[schema(example = "en")]
    pub language: Option<String>,
    /// `text` or `ssml`; when absent, input that starts with `<speak>` is SSML.
    #[serde(default)]
    #[schema(example = "ssml")]
    pub input_format: Option<String>,
}

fn default_model() -> String {
    "tts-1".into()
}

fn default_voice() -> VoiceField {
    VoiceField(DEFAULT_VOICE.into())
}

const DEFAULT_VOICE: &str = "alloy";

/// Kokoro-FastAPI's `normalization_options`; its other fields are accepted and ignored.
// Through a JSON object: serde alone would also take a struct from an array (`[null, null]`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(try_from = "serde_json::Map<String, serde_json::Value>")]
pub struct NormalizationOptions {
    /// `false` speaks the text as written: numbers, money, dates and symbols are left to the
    /// phonemizer.
    #[serde(default)]
    pub normalize: Option<bool>,
    /// How slashed dates like `12/01/2026` are read when both numbers could be the month:
    /// `mdy` (December first) or `dmy` (the twelfth of January).
    #[serde(default)]
    #[schema(example = "mdy")]
    pub date_order: Option<String>,
}

/// How the answer is framed: audio bytes, or OpenAI's server-sent events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StreamFormat {
    Audio,
    Sse,
}

impl TryFrom<serde_json::Map<String, serde_json::Value>> for NormalizationOptions {
    type Error = serde_json::Error;

    fn try_from(object: serde_json::Map<String, serde_json::Value>) -> Result<Self, Self::Error> {
        #[derive(Deserialize)]
        struct Fields {
            #[serde(default)]
            normalize: Option<bool>,
            #[serde(default)]
            date_order: Option<String>,
        }
        let fields: Fields = serde_json::from_value(serde_json::Value::Object(object))?;
        Ok(Self {
            normalize: fields.normalize,
            date_order: fields.date_order,
        })
    }
}

/// OpenAI accepts a voice as a name (`"alloy"`) or as an object (`{"id": "voice_1234"}`).
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceField(pub String);

impl<'de> Deserialize<'de> for VoiceField {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Through a JSON value, so that a missing field stays serde's own "missing field" error.
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(name) => Ok(Self(name)),
            serde_json::Value::Object(object) => match object.get("id") {
                Some(serde_json::Value::String(id)) => Ok(Self(id.clone())),
                _ => Err(serde::de::Error::custom(
                    "a voice object needs a string 'id', as in {\"id\": \"<voice id>\"}",
                )),
            },
            _ => Err(serde::de::Error::custom(
                "expected a voice id string or an object {\"id\": \"<voice id>\"}",
            )),
        }
    }
}

/// The two shapes [`VoiceField`]'s deserializer accepts.
impl PartialSchema for VoiceField {
    fn schema() -> RefOr<Schema> {
        schema::voice_schema()
    }
}

impl ToSchema for VoiceField {
    fn name() -> std::borrow::Cow<'static, str> {
        // Not "Voice": that is a listed voice (`GET /v1/audio/voices`).
        "SpeechVoice".into()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Whole,
    Chunked,
    Sse,
}

/// Create speech
///
/// OpenAI's `POST /v1/audio/speech`. The answer is audio in `response_format`: chunked,
/// sentence by sentence (the default; OmniVoice: its first sentence, then the rest in its
/// voice), one whole body (`"stream": false`), or server-sent
/// events (`"stream_format": "sse"`) carrying base64 audio in `speech.audio.delta` events and
/// usage in a final `speech.audio.done`.
#[utoipa::path(post, path = "/v1/audio/speech", tag = "speech",
    request_body = SpeechRequest,
    responses(SpeechResponses))]
pub async fn create_speech(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SpeechRequest>,
) -> Result<Response, ApiError> {
    answer(&state, &headers, request, Instant::now()).await
}

/// Speaks a validated speech request and frames the answer as it asks; shared with the clone
/// route, whose request becomes one of these once its clip is a voice.
pub(super) async fn answer(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    request: SpeechRequest,
    started: Instant,
) -> Result<Response, ApiError> {
    let state = state.clone();
    let delivery = delivery(&state, &request);
    let with_words = request.timestamps == Some(true);
    if with_words && delivery != Delivery::Sse {
        return Err(ApiError::invalid(
            "timestamps",
            "Word timestamps come as server-sent events: set \"stream_format\": \"sse\", or \
             use POST /v1/audio/speech/timestamps.",
        ));
    }
    let job = state
        .speech
        .prepare(domain_request(headers, request)?)
        .await?;
    let timeout = Duration::from_secs(state.settings.request_timeout_s);
    let speech = state.speech.clone();
    let format = job.format();
    let languages = job.languages().join(", ");
    let unknown_cues = job.unknown_cues().join(",");
    match delivery {
        Delivery::Whole => {
            let spoken = tokio::time::timeout(timeout, speech.speak(job))
                .await
                .map_err(|_| timed_out(state.settings.request_timeout_s))??;
            let audio = spoken.audio;
            m::add_audio_seconds(audio.duration_s);
            let mut response = Response::new(Body::from(audio.bytes.clone()));
            let headers = response.headers_mut();
            set_common_headers(headers, format, audio.sample_rate, spoken.cache.as_str());
            if let Some(layer) = spoken.layer {
                set(headers, X_CACHE_LAYER, layer.as_str().to_string());
            }
            set(
                headers,
                header::CONTENT_LENGTH,
                audio.bytes.len().to_string(),
            );
            set(headers, X_DURATION, format!("{:.3}", audio.duration_s));
            set(headers, header::CONTENT_LANGUAGE, languages);
            set_unknown_cues(headers, unknown_cues);
            if audio.no_speech {
                set(headers, X_NO_SPEECH_DETECTED, "true".to_string());
            }
            set(
                headers,
                X_LATENCY,
                format!("{:.3}", started.elapsed().as_secs_f64()),
            );
            Ok(response)
        }
        Delivery::Chunked | Delivery::Sse => {
            let deadline = tokio::time::Instant::now() + timeout;
            let input_chars = job.input().chars().count();
            // Both streams as timed chunks; without timestamps their word lists stay empty.
            let opened = async {
                if with_words {
                    speech.stream_with_words(job).await
                } else {
                    let stream = speech.stream(job).await?;
                    Ok(stream.map_chunks(|audio| TimedChunk {
                        audio,
                        words: Vec::new(),
                    }))
                }
            };
            let SpeechStream {
                sample_rate,
                cache,
                layer,
                chunks,
                samples,
            } = tokio::time::timeout_at(deadline, opened)
                .await
                .map_err(|_| timed_out(state.settings.request_timeout_s))??;
            let seconds = state.settings.request_timeout_s;
            let chunks = chunks_until(chunks, deadline, seconds);
            let mut response = if delivery == Delivery::Sse {
                sse(chunks, input_chars, samples).into_response()
            } else {
                let audio = chunks.map(|chunk| chunk.map(|chunk| chunk.audio));
                Response::new(Body::from_stream(audio))
            };
            let headers = response.headers_mut();
            if delivery == Delivery::Chunked {
                set_common_headers(headers, format, sample_rate, cache.as_str());
            } else {
                set(headers, X_CACHE, cache.as_str().to_string());
                set(headers, X_SAMPLE_RATE, sample_rate.to_string());
            }
            if let Some(layer) = layer {
                set(headers, X_CACHE_LAYER, layer.as_str().to_string());
            }
            set(headers, header::CONTENT_LANGUAGE, languages);
            set_unknown_cues(headers, unknown_cues);
            set(
                headers,
                X_LATENCY,
                format!("{:.3}", started.elapsed().as_secs_f64()),
            );
            Ok(response)
        }
    }
}

/// How the answer is delivered: an HTTP concern, so it is decided here, not in the pipeline.
fn delivery(state: &AppState, request: &SpeechRequest) -> Delivery {
    match request.stream_format {
        Some(StreamFormat::Sse) => Delivery::Sse,
        None | Some(StreamFormat::Audio) => {
            if request.stream.unwrap_or(state.settings.stream) {
                Delivery::Chunked
            } else {
                Delivery::Whole
            }
        }
    }
}

/// The pipeline's request: OpenAI's fields, plus `Cache-Control: no-cache` as a cache bypass.
pub(super) fn domain_request(
    headers: &HeaderMap,
    request: SpeechRequest,
) -> Result<Request, ApiError> {
    let voice = voice_of(request.voice.0, request.speaker)?;
    let no_cache_header = headers
        .get(header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|d| matches!(d.trim(), "no-cache" | "no-store"))
        });
    let options = request.normalization_options.unwrap_or_default();
    Ok(Request {
        model: request.model,
        voice,
        input: request.input,
        response_format: request.response_format,
        speed: request.speed,
        seed: request.seed,
        noise_scale: request.noise_scale,
        noise_w: request.noise_w,
        use_cache: request.cache != Some(false) && !no_cache_header,
        native_pcm: false,
        normalize: options.normalize,
        date_order: options.date_order,
        language: request.language,
        input_format: request.input_format,
        instructions: request.instructions,
        generation: crate::params::Generation {
            num_step: request.num_step,
            guidance_scale: request.guidance_scale,
            t_shift: request.t_shift,
            position_temperature: request.position_temperature,
            class_temperature: request.class_temperature,
            layer_penalty_factor: request.layer_penalty_factor,
            denoise: request.denoise,
            duration: request.duration,
            preprocess_prompt: request.preprocess_prompt,
            postprocess_output: request.postprocess_output,
            audio_chunk_duration: request.audio_chunk_duration,
            audio_chunk_threshold: request.audio_chunk_threshold,
        },
    })
}

/// The voice a request names: `speaker` when given (the Python omnivoice-server's field),
/// unless `voice` names another one.
fn voice_of(voice: String, speaker: Option<String>) -> Result<String, ApiError> {
    let Some(speaker) = speaker.filter(|s| !s.trim().is_empty()) else {
        return Ok(voice);
    };
    let same = |a: &str, b: &str| a.trim().eq_ignore_ascii_case(b.trim());
    if same(&voice, &speaker) || same(&voice, DEFAULT_VOICE) || same(&voice, "auto") {
        Ok(speaker)
    } else {
        Err(ApiError::invalid(
            "speaker",
            format!("'speaker' ('{speaker}') and 'voice' ('{voice}') name different voices: send one of them."),
        ))
    }
}

pub(super) fn timed_out(seconds: u64) -> ApiError {
    metrics::counter!(m::REJECTED, "reason" => "timeout").increment(1);
    ApiError::timeout(seconds)
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: String) {
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(name, value);
    }
}

/// The Python omnivoice-server's warning that bracketed tags will be read as words.
fn set_unknown_cues(headers: &mut HeaderMap, cues: String) {
    if !cues.is_empty() {
        set(headers, X_UNKNOWN_NONVERBAL_TAGS, cues);
    }
}

fn set_common_headers(headers: &mut HeaderMap, format: AudioFormat, sample_rate: u32, cache: &str) {
    set(
        headers,
        header::CONTENT_TYPE,
        format.content_type().to_string(),
    );
    set(
        headers,
        header::CONTENT_DISPOSITION,
        format!("inline; filename=\"speech.{}\"", format.extension()),
    );
    set(headers, X_SAMPLE_RATE, sample_rate.to_string());
    set(headers, X_CACHE, cache.to_string());
}

/// Ends the stream at the request deadline; errors after the first byte cannot change the
/// status any more, so they end the stream and are logged and counted.
pub(super) fn chunks_until<T: Send + 'static>(
    chunks: futures::stream::BoxStream<'static, Result<T, SpeechError>>,
    deadline: tokio::time::Instant,
    seconds: u64,
) -> impl Stream<Item = Result<T, std::io::Error>> + Send + 'static {
    futures::stream::unfold(Some(chunks), move |state| async move {
        let mut chunks = state?;
        match tokio::time::timeout_at(deadline, chunks.next()).await {
            Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some(chunks))),
            Ok(None) => None,
            Ok(Some(Err(e))) => {
                // A fault's whole chain is logged by `for_clients`; other errors say all here.
                let words = e.for_clients();
                tracing::warn!(error = %words, "speech stream failed after the first byte");
                metrics::counter!(m::STREAM_ERRORS).increment(1);
                Some((Err(std::io::Error::other(words)), None))
            }
            Err(_) => {
                tracing::error!(seconds, "speech stream exceeded the request timeout");
                metrics::counter!(m::STREAM_ERRORS).increment(1);
                metrics::counter!(m::REJECTED, "reason" => "timeout").increment(1);
                Some((Err(std::io::Error::other("request timeout")), None))
            }
        }
    })
}
