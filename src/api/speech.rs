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
use crate::engine::registry::ResolveError;
use crate::metrics as m;
use crate::speech::{SpeechJob, SpeechStream};

/// OpenAI's speech request. Fields OpenAI clients send that we don't use are ignored.
#[derive(Debug, Deserialize)]
pub struct SpeechRequest {
    pub model: String,
    pub input: String,
    pub voice: String,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Whole,
    Chunked,
    Sse,
}

const X_CACHE: HeaderName = HeaderName::from_static("x-cache");
const X_DURATION: HeaderName = HeaderName::from_static("x-audio-duration-s");
const X_LATENCY: HeaderName = HeaderName::from_static("x-synthesis-latency-s");
const X_SAMPLE_RATE: HeaderName = HeaderName::from_static("x-audio-sample-rate");

pub async fn create_speech(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SpeechRequest>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let (job, delivery) = validate(&state, &headers, request)?;
    let timeout = Duration::from_secs(state.settings.request_timeout_s);
    let speech = state.speech.clone();
    match delivery {
        Delivery::Whole => {
            let spoken = tokio::time::timeout(timeout, speech.speak(job.clone()))
                .await
                .map_err(|_| timed_out(state.settings.request_timeout_s))??;
            let audio = spoken.audio;
            m::add_audio_seconds(audio.duration_s);
            let mut response = Response::new(Body::from(audio.bytes.clone()));
            let headers = response.headers_mut();
            set_common_headers(
                headers,
                job.format,
                audio.sample_rate,
                spoken.cache.as_str(),
            );
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
            let stream = tokio::time::timeout_at(deadline, speech.speak_streaming(job.clone()))
                .await
                .map_err(|_| timed_out(state.settings.request_timeout_s))??;
            let SpeechStream {
                sample_rate,
                cache,
                chunks,
            } = stream;
            let seconds = state.settings.request_timeout_s;
            let chunks = chunks_until(chunks, deadline, seconds);
            let mut response = if delivery == Delivery::Sse {
                let input_chars = job.input.chars().count();
                sse(chunks, input_chars).into_response()
            } else {
                Response::new(Body::from_stream(chunks))
            };
            let headers = response.headers_mut();
            if delivery == Delivery::Chunked {
                set_common_headers(headers, job.format, sample_rate, cache.as_str());
            } else {
                set(headers, X_CACHE, cache.as_str().to_string());
                set(headers, X_SAMPLE_RATE, sample_rate.to_string());
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

fn validate(
    state: &AppState,
    headers: &HeaderMap,
    request: SpeechRequest,
) -> Result<(SpeechJob, Delivery), ApiError> {
    let limit = state.settings.max_input_chars;
    let chars = request.input.chars().count();
    if request.input.trim().is_empty() {
        return Err(
            ApiError::invalid("input", "'input' must contain text to speak.")
                .with_code("empty_input"),
        );
    }
    if chars > limit {
        return Err(ApiError::invalid(
            "input",
            format!("'input' is {chars} characters long; the limit is {limit}."),
        )
        .with_code("string_above_max_length"));
    }
    let format = match request.response_format.as_deref() {
        None => AudioFormat::Mp3,
        Some(name) => AudioFormat::parse(name).ok_or_else(|| {
            let valid: Vec<&str> = AudioFormat::ALL.iter().map(|f| f.as_str()).collect();
            ApiError::invalid(
                "response_format",
                format!(
                    "Unsupported response_format '{name}'. Supported: {}.",
                    valid.join(", ")
                ),
            )
        })?,
    };
    let speed = request.speed.unwrap_or(1.0);
    if !(0.25..=4.0).contains(&speed) {
        return Err(ApiError::invalid(
            "speed",
            format!("'speed' must be between 0.25 and 4.0, got {speed}."),
        ));
    }
    for (param, value) in [
        ("noise_scale", request.noise_scale),
        ("noise_w", request.noise_w),
    ] {
        if value.is_some_and(|v| !(0.0..=2.0).contains(&v)) {
            return Err(ApiError::invalid(
                param,
                format!("'{param}' must be between 0 and 2."),
            ));
        }
    }
    let delivery = match request.stream_format.as_deref() {
        Some("sse") => Delivery::Sse,
        None | Some("audio") => {
            if request.stream.unwrap_or(state.settings.stream) {
                Delivery::Chunked
            } else {
                Delivery::Whole
            }
        }
        Some(other) => {
            return Err(ApiError::invalid(
                "stream_format",
                format!("Unsupported stream_format '{other}'. Supported: audio, sse."),
            ))
        }
    };
    let voice = state
        .speech
        .registry()
        .resolve(&request.model, &request.voice)
        .map_err(|e| match e {
            ResolveError::UnknownModel(message) => {
                ApiError::invalid("model", message).with_code("model_not_found")
            }
            ResolveError::UnknownVoice(message) => {
                ApiError::invalid("voice", message).with_code("voice_not_found")
            }
        })?;
    let no_cache_header = headers
        .get(header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|d| matches!(d.trim(), "no-cache" | "no-store"))
        });
    let job = SpeechJob {
        voice,
        input: request.input,
        format,
        speed: speed as f32,
        seed: request.seed,
        noise_scale: request.noise_scale,
        noise_w: request.noise_w,
        bypass_cache: request.cache == Some(false) || no_cache_header,
    };
    Ok((job, delivery))
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
    chunks: futures::stream::BoxStream<'static, Result<bytes::Bytes, ApiError>>,
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
                Some((Err(std::io::Error::other(e.message)), None))
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
/// `speech.audio.done` with usage.
fn sse(
    chunks: impl Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
    input_chars: usize,
) -> Sse<impl Stream<Item = Result<Event, std::io::Error>>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let deltas = chunks.map(move |chunk| {
        chunk.map(|bytes| {
            let data =
                serde_json::json!({"type": "speech.audio.delta", "audio": b64.encode(&bytes)});
            Event::default().data(data.to_string())
        })
    });
    // Tokens are not meaningful for these engines; characters are the honest unit of input.
    let done = futures::stream::once(async move {
        let usage = serde_json::json!({
            "type": "speech.audio.done",
            "usage": {"input_tokens": input_chars, "output_tokens": 0, "total_tokens": input_chars}
        });
        Ok(Event::default().data(usage.to_string()))
    });
    Sse::new(deltas.chain(done))
}
