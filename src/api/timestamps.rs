//! `POST /v1/audio/speech/timestamps` and Kokoro-FastAPI's `POST /dev/captioned_speech`: the
//! whole audio as base64 in JSON, with when each word of the input is heard.
//!
//! Both take the speech request of `POST /v1/audio/speech` (its streaming fields aside: the
//! timings are known only once all audio is) and differ only in the answer's shape: ours has
//! character offsets into the input, Kokoro's is what its clients parse.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use base64::Engine as _;
use serde::Serialize;
use utoipa::ToSchema;

use super::extract::ApiJson;
use super::openapi::SpeechErrors;
use super::speech::{domain_request, timed_out, SpeechRequest};
use super::{ApiError, AppState};
use crate::speech::TimedSpeech;

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

/// A word of the input and when it is heard.
#[derive(Debug, Serialize, ToSchema)]
pub struct TimedWord {
    /// The word as written in the input, surrounding punctuation aside (`"$100"`, `"U.S"`).
    word: String,
    start: f64,
    end: f64,
    /// Where the word is in `input`, in Unicode characters (code points): `[char_start,
    /// char_end)`.
    char_start: usize,
    char_end: usize,
}

/// Kokoro-FastAPI's answer to `/dev/captioned_speech` with `"stream": false`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CaptionedSpeech {
    /// The audio file, base64.
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
/// The request of `POST /v1/audio/speech` (`stream` and `stream_format` are ignored); the
/// answer is the whole audio, as `"stream": false` would give it with the same seed, base64
/// in JSON, with every spoken word's start and end and its place in `input`.
#[utoipa::path(post, path = "/v1/audio/speech/timestamps", tag = "speech",
    request_body = SpeechRequest,
    responses((status = 200, description = "The audio and its words", body = TimestampedSpeech),
        SpeechErrors))]
pub async fn create_timestamped_speech(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SpeechRequest>,
) -> Result<Json<TimestampedSpeech>, ApiError> {
    let (timed, format) = speak(&state, &headers, request).await?;
    Ok(Json(TimestampedSpeech {
        audio: base64(&timed),
        format,
        sample_rate: timed.sample_rate,
        duration_s: timed.duration_s,
        words: timed
            .words
            .into_iter()
            .map(|w| TimedWord {
                word: w.word,
                start: w.start_s,
                end: w.end_s,
                char_start: w.char_start,
                char_end: w.char_end,
            })
            .collect(),
    }))
}

/// Create captioned speech (Kokoro-FastAPI)
///
/// Kokoro-FastAPI's `/dev/captioned_speech` for its clients: the same as
/// `POST /v1/audio/speech/timestamps` in Kokoro's shape. Its extra fields (`return_timestamps`,
/// `lang_code`, …) are ignored; the answer is always one JSON document.
#[utoipa::path(post, path = "/dev/captioned_speech", tag = "speech",
    request_body = SpeechRequest,
    responses((status = 200, description = "The audio and its words", body = CaptionedSpeech),
        SpeechErrors))]
pub async fn create_captioned_speech(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<SpeechRequest>,
) -> Result<Json<CaptionedSpeech>, ApiError> {
    let (timed, format) = speak(&state, &headers, request).await?;
    Ok(Json(CaptionedSpeech {
        audio: base64(&timed),
        audio_format: format,
        timestamps: timed
            .words
            .into_iter()
            .map(|w| CaptionedWord {
                word: w.word,
                start_time: w.start_s,
                end_time: w.end_s,
            })
            .collect(),
    }))
}

async fn speak(
    state: &AppState,
    headers: &HeaderMap,
    request: SpeechRequest,
) -> Result<(TimedSpeech, &'static str), ApiError> {
    let job = state.speech.prepare(domain_request(headers, request))?;
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

fn base64(timed: &TimedSpeech) -> String {
    base64::engine::general_purpose::STANDARD.encode(&timed.audio)
}
