//! `POST /v1/audio/speech/timestamps` and Kokoro-FastAPI's `POST /dev/captioned_speech`: the
//! whole audio as base64 in JSON, with when each word of the input is heard.
//!
//! Both take the speech request of `POST /v1/audio/speech` and differ only in the answer's
//! shape: ours has character offsets into the input, Kokoro's is what its clients parse. With
//! `"stream": true` the answer is NDJSON instead: one line per piece of audio as it is
//! computed, with the words that piece completes, and an `error` line if the stream fails.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use futures::StreamExt;
use serde::Serialize;
use utoipa::ToSchema;

use super::extract::ApiJson;
use super::headers::X_SAMPLE_RATE;
use super::schema::SpeechErrors;
use super::speech::{chunks_until, domain_request, timed_out, SpeechRequest};
use super::words::TimedWord;
use super::{ApiError, AppState};
use crate::speech::{TimedChunk, TimedSpeech, WordStamp};

/// Audio and the timestamps of its words.
#[derive(Debug, Serialize, ToSchema)]
pub struct TimestampedSpeech {
    /// The audio file in `format`, base64 (standard alphabet, padded).
    audio: String,
    /// The request's `response_format`.
    #[schema(example = "mp3")]
    format: &'static str,
    /// Sample rate of the audio in Hz.
    sample_rate: u32,
    /// Length of the audio in seconds.
    duration_s: f64,
    /// Every spoken word in order. Times are seconds from the start of the audio and include
    /// the pauses between sentences; they never go back and never overlap.
    words: Vec<TimedWord>,
}

/// Kokoro-FastAPI's answer to `/dev/captioned_speech` with `"stream": false`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CaptionedSpeech {
    /// The audio file, base64.
    audio: String,
    audio_format: &'static str,
    timestamps: Vec<CaptionedWord>,
}

/// One line of a streamed answer (`"stream": true`, NDJSON).
#[derive(Debug, Serialize, ToSchema)]
pub struct TimestampedChunk {
    /// The next bytes of the audio in `response_format`, base64; joined, the lines' audio is
    /// one file.
    audio: String,
    /// The words this piece of audio completes.
    words: Vec<TimedWord>,
}

/// One line of Kokoro's streamed `/dev/captioned_speech` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct CaptionedChunk {
    audio: String,
    audio_format: &'static str,
    timestamps: Vec<CaptionedWord>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CaptionedWord {
    word: String,
    start_time: f64,
    end_time: f64,
}

/// Create speech with word timestamps
///
/// The request of `POST /v1/audio/speech` (`stream_format` is ignored); the answer is the
/// whole audio, as `"stream": false` would give it with the same seed, base64 in JSON, with
/// every spoken word's start and end and its place in `input`. With `"stream": true`: NDJSON,
/// one line per piece of audio as it is computed (the lines' audio joined is one file), each
/// with the words it completes; a failure mid-stream ends it with an `{"error": …}` line.
#[utoipa::path(post, path = "/v1/audio/speech/timestamps", tag = "speech",
    request_body = SpeechRequest,
    responses((status = 200, description = "The audio and its words", content(
            (TimestampedSpeech = "application/json"),
            (TimestampedChunk = "application/x-ndjson"))),
        SpeechErrors))]
pub async fn create_timestamped_speech(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SpeechRequest>,
) -> Result<Response, ApiError> {
    if request.stream == Some(true) {
        return stream(&state, &headers, request, |chunk, _| TimestampedChunk {
            audio: base64(&chunk.audio),
            words: chunk.words.into_iter().map(TimedWord::from).collect(),
        })
        .await;
    }
    let (timed, format) = speak(&state, &headers, request).await?;
    Ok(Json(TimestampedSpeech {
        audio: base64(&timed.audio),
        format,
        sample_rate: timed.sample_rate,
        duration_s: timed.duration_s,
        words: timed.words.into_iter().map(TimedWord::from).collect(),
    })
    .into_response())
}

/// Create captioned speech (Kokoro-FastAPI)
///
/// Kokoro-FastAPI's `/dev/captioned_speech` for its clients: the same as
/// `POST /v1/audio/speech/timestamps` in Kokoro's shape. Its extra fields (`return_timestamps`,
/// `lang_code`, …) are ignored; `"stream": true` answers NDJSON lines in Kokoro's shape.
#[utoipa::path(post, path = "/dev/captioned_speech", tag = "speech",
    request_body = SpeechRequest,
    responses((status = 200, description = "The audio and its words", content(
            (CaptionedSpeech = "application/json"),
            (CaptionedChunk = "application/x-ndjson"))),
        SpeechErrors))]
pub async fn create_captioned_speech(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SpeechRequest>,
) -> Result<Response, ApiError> {
    if request.stream == Some(true) {
        return stream(&state, &headers, request, |chunk, format| CaptionedChunk {
            audio: base64(&chunk.audio),
            audio_format: format,
            timestamps: chunk.words.into_iter().map(CaptionedWord::from).collect(),
        })
        .await;
    }
    let (timed, format) = speak(&state, &headers, request).await?;
    Ok(Json(CaptionedSpeech {
        audio: base64(&timed.audio),
        audio_format: format,
        timestamps: timed.words.into_iter().map(CaptionedWord::from).collect(),
    })
    .into_response())
}

/// NDJSON: each chunk of the stream as a line in the shape `line` gives it; a failure after
/// the first line becomes an OpenAI-shaped `{"error": …}` line, so a client never mistakes
/// a cut-off answer for a complete one.
async fn stream<L: Serialize>(
    state: &AppState,
    headers: &HeaderMap,
    request: SpeechRequest,
    line: impl Fn(TimedChunk, &'static str) -> L + Send + 'static,
) -> Result<Response, ApiError> {
    let job = state
        .speech
        .prepare(domain_request(headers, request)?)
        .await?;
    let format = job.format().as_str();
    let seconds = state.settings.request_timeout_s;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let stream = tokio::time::timeout_at(deadline, state.speech.stream_with_words(job))
        .await
        .map_err(|_| timed_out(seconds))??;
    let lines = chunks_until(stream.chunks, deadline, seconds).map(move |chunk| {
        let mut text = match chunk {
            Ok(chunk) => serde_json::to_string(&line(chunk, format)),
            Err(e) => serde_json::to_string(&ApiError::stream_failed(e.to_string()).body()),
        }
        .map_err(std::io::Error::other)?;
        text.push('\n');
        Ok::<_, std::io::Error>(text)
    });
    let mut response = Response::new(Body::from_stream(lines));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    if let Ok(rate) = HeaderValue::from_str(&stream.sample_rate.to_string()) {
        headers.insert(X_SAMPLE_RATE, rate);
    }
    Ok(response)
}

async fn speak(
    state: &AppState,
    headers: &HeaderMap,
    request: SpeechRequest,
) -> Result<(TimedSpeech, &'static str), ApiError> {
    let job = state
        .speech
        .prepare(domain_request(headers, request)?)
        .await?;
    let format = job.format().as_str();
    let seconds = state.settings.request_timeout_s;
    let timed = tokio::time::timeout(
        Duration::from_secs(seconds),
        state.speech.speak_with_words(job),
    )
    .await
    .map_err(|_| timed_out(seconds))??;
    Ok((timed, format))
}

fn base64(audio: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(audio)
}

impl From<WordStamp> for CaptionedWord {
    fn from(w: WordStamp) -> Self {
        Self {
            word: w.word,
            start_time: w.start_s,
            end_time: w.end_s,
        }
    }
}
