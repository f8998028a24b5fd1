//! `POST /v1/audio/speech`: OpenAI's request, validated; the answer as one body, a chunked
//! audio stream, or server-sent events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use futures::stream::{Stream, StreamExt};
use serde::Deserialize;

use super::extract::ApiJson;
use super::{ApiError, AppState};
use crate::audio::AudioFormat;
use crate::metrics as m;
use crate::speech::{Request, SpeechError, SpeechStream};

/// OpenAI's speech request. Fields OpenAI clients send that we don't use are ignored.
#[derive(Debug, Deserialize)]
pub struct SpeechRequest {
    pub model: String,
    pub input: String,
    pub voice: VoiceField,
    #[serde(default)]
    pub response_format: Option<String>,
    #[serde(default)]
    pub speed: Option<f64>,
    /// Accepted for compatibility; engines here cannot follow style instructions.
    #[serde(default)]
    pub instructions: Option<String>,
    /// `audio` (default) or `sse`.
    #[serde(default)]
    pub stream_format: Option<String>,
    /// `false` returns one whole body instead of a chunked stream.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Fixed seed: the same request gives the same audio.
    #[serde(default)]
    pub seed: Option<u64>,
    /// `false` bypasses the audio cache.
    #[serde(default)]
    pub cache: Option<bool>,
    #[serde(default)]
    pub noise_scale: Option<f32>,
    #[serde(default)]
    pub noise_w: Option<f32>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Whole,
    Chunked,
    Sse,
}

const X_CACHE: HeaderName = HeaderName::from_static("x-cache");
const X_CACHE_LAYER: HeaderName = HeaderName::from_static("x-cache-layer");
const X_DURATION: HeaderName = HeaderName::from_static("x-audio-duration-s");
const X_LATENCY: HeaderName = HeaderName::from_static("x-synthesis-latency-s");
const X_SAMPLE_RATE: HeaderName = HeaderName::from_static("x-audio-sample-rate");

pub async fn create_speech(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SpeechRequest>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let delivery = delivery(&state, &request)?;
    let job = state.speech.prepare(domain_request(&headers, request))?;
    let timeout = Duration::from_secs(state.settings.request_timeout_s);
    let speech = state.speech.clone();
    let format = job.format();
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
            let stream = tokio::time::timeout_at(deadline, speech.stream(job))
                .await
                .map_err(|_| timed_out(state.settings.request_timeout_s))??;
            let SpeechStream {
                sample_rate,
                cache,
                layer,
                chunks,
                samples,
            } = stream;
            let seconds = state.settings.request_timeout_s;
            let chunks = chunks_until(chunks, deadline, seconds);
            let mut response = if delivery == Delivery::Sse {
                sse(chunks, input_chars, samples).into_response()
            } else {
                Response::new(Body::from_stream(chunks))
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
fn delivery(state: &AppState, request: &SpeechRequest) -> Result<Delivery, ApiError> {
    match request.stream_format.as_deref() {
        Some("sse") => Ok(Delivery::Sse),
        None | Some("audio") => Ok(if request.stream.unwrap_or(state.settings.stream) {
            Delivery::Chunked
        } else {
            Delivery::Whole
        }),
        Some(other) => Err(ApiError::invalid(
            "stream_format",
            format!("Unsupported stream_format '{other}'. Supported: audio, sse."),
        )),
    }
}

/// The pipeline's request: OpenAI's fields, plus `Cache-Control: no-cache` as a cache bypass.
fn domain_request(headers: &HeaderMap, request: SpeechRequest) -> Request {
    let no_cache_header = headers
        .get(header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|d| matches!(d.trim(), "no-cache" | "no-store"))
        });
    Request {
        model: request.model,
        voice: request.voice.0,
        input: request.input,
        response_format: request.response_format,
        speed: request.speed,
        seed: request.seed,
        noise_scale: request.noise_scale,
        noise_w: request.noise_w,
        use_cache: request.cache != Some(false) && !no_cache_header,
        native_pcm: false,
    }
}

fn timed_out(seconds: u64) -> ApiError {
    metrics::counter!(m::REJECTED, "reason" => "timeout").increment(1);
    ApiError::timeout(seconds)
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: String) {
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(name, value);
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
fn chunks_until(
    chunks: futures::stream::BoxStream<'static, Result<bytes::Bytes, SpeechError>>,
    deadline: tokio::time::Instant,
    seconds: u64,
) -> impl Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    futures::stream::unfold(Some(chunks), move |state| async move {
        let mut chunks = state?;
        match tokio::time::timeout_at(deadline, chunks.next()).await {
            Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some(chunks))),
            Ok(None) => None,
            Ok(Some(Err(e))) => {
                tracing::error!(error = %e, "speech stream failed after the first byte");
                metrics::counter!(m::STREAM_ERRORS).increment(1);
                Some((Err(std::io::Error::other(e.to_string())), None))
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

/// OpenAI's SSE framing: `speech.audio.delta` events with base64 audio, then one
/// `speech.audio.done` with usage. These engines have no tokens, so usage counts what they do
/// have: `input_tokens` is the number of characters of `input`, `output_tokens` the number of
/// audio samples sent (at `X-Audio-Sample-Rate`), and `total_tokens` their sum.
fn sse(
    chunks: impl Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
    input_chars: usize,
    samples: Arc<std::sync::atomic::AtomicU64>,
) -> Sse<impl Stream<Item = Result<Event, std::io::Error>>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let deltas = chunks.map(move |chunk| {
        chunk.map(|bytes| {
            let data =
                serde_json::json!({"type": "speech.audio.delta", "audio": b64.encode(&bytes)});
            Event::default().data(data.to_string())
        })
    });
    let done = futures::stream::once(async move {
        let output = samples.load(std::sync::atomic::Ordering::Relaxed);
        let input = input_chars as u64;
        let usage = serde_json::json!({
            "type": "speech.audio.done",
            "usage": {"input_tokens": input, "output_tokens": output, "total_tokens": input + output}
        });
        Ok(Event::default().data(usage.to_string()))
    });
    Sse::new(deltas.chain(done))
}
