//! `POST /v1/audio/speech/subtitles`: the speech request of `POST /v1/audio/speech`, answered
//! with a subtitle file (WebVTT or SubRip) of the words' timings instead of the audio.
//!
//! A route of its own rather than a field of `/v1/audio/speech/timestamps`: a subtitle file
//! is what players, `<track>` elements, ffmpeg and video editors read as it is, so the body is
//! the file itself under its own media type (`curl -o speech.vtt` is all a client needs), not
//! a string to unwrap from JSON beside a base64 audio it may not want. Its audio is
//! `POST /v1/audio/speech` with the same body and a fixed `seed`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, SchemaType, Type};
use utoipa::openapi::{Ref, RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::extract::ApiJsonWith;
use super::headers::X_DURATION;
use super::schema::{SpeechErrors, SubtitleResponses};
use super::speech::{domain_request, timed_out, SpeechRequest};
use super::{ApiError, AppState};
use crate::speech::SubtitleFormat;

/// The fields of a subtitle request besides the speech request's.
#[derive(Debug, Deserialize)]
pub struct SubtitleOptions {
    #[serde(default)]
    subtitle_format: Option<SubtitleFormatName>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum SubtitleFormatName {
    Srt,
    Vtt,
}

impl From<SubtitleFormatName> for SubtitleFormat {
    fn from(name: SubtitleFormatName) -> Self {
        match name {
            SubtitleFormatName::Srt => SubtitleFormat::Srt,
            SubtitleFormatName::Vtt => SubtitleFormat::Vtt,
        }
    }
}

/// The request body as documented: [`SpeechRequest`] and [`SubtitleOptions`] in one object
/// (read as two by [`ApiJsonWith`]).
pub struct SubtitleRequest;

impl PartialSchema for SubtitleRequest {
    /// The speech request by reference, and `subtitle_format` from [`SubtitleFormat`].
    fn schema() -> RefOr<Schema> {
        let mut names: Vec<serde_json::Value> = SubtitleFormat::ALL
            .iter()
            .map(|f| f.as_str().into())
            .collect();
        names.push(serde_json::Value::Null);
        let format = ObjectBuilder::new()
            .schema_type(
                [Type::String, Type::Null]
                    .into_iter()
                    .collect::<SchemaType>(),
            )
            .enum_values(Some(names))
            .default(Some(SubtitleFormat::default().as_str().into()))
            .description(Some("`vtt` (WebVTT) or `srt` (SubRip); `vtt` when absent."));
        AllOfBuilder::new()
            .item(Ref::from_schema_name(SpeechRequest::name()))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("subtitle_format", format),
            )
            .description(Some(
                "The speech request of `POST /v1/audio/speech`, and the subtitle format.",
            ))
            .examples([serde_json::json!({"model": "tts-1", "voice": "alloy",
                "input": "Hello from my own server!", "subtitle_format": "srt", "seed": 7})])
            .into()
    }
}

impl ToSchema for SubtitleRequest {}

/// Create subtitles for speech
///
/// The request of `POST /v1/audio/speech` plus `subtitle_format` (`vtt`, the default, or
/// `srt`; `stream` and `stream_format` are ignored). The answer is a subtitle file of what
/// that request says and when: cues in order, never overlapping, none across sentences, at
/// most 5 s and two lines of 42 characters, their text as written in `input`. Send a `seed`
/// and `POST /v1/audio/speech` with the same body gives the audio they belong to (without
/// one, every synthesis samples its own timing).
#[utoipa::path(post, path = "/v1/audio/speech/subtitles", tag = "speech",
    request_body = SubtitleRequest,
    responses(SubtitleResponses, SpeechErrors))]
pub async fn create_subtitles(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJsonWith(request, options): ApiJsonWith<SpeechRequest, SubtitleOptions>,
) -> Result<Response, ApiError> {
    let job = state
        .speech
        .prepare(domain_request(&headers, request)?)
        .await?;
    let format = options
        .subtitle_format
        .map_or_else(SubtitleFormat::default, SubtitleFormat::from);
    let seconds = state.settings.request_timeout_s;
    let subtitles = tokio::time::timeout(
        Duration::from_secs(seconds),
        state.speech.subtitles(job, format),
    )
    .await
    .map_err(|_| timed_out(seconds))??;
    let content_type = format!("{}; charset=utf-8", format.media_type());
    let disposition = format!("inline; filename=\"speech.{}\"", format.as_str());
    let mut response = subtitles.text.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_DISPOSITION, disposition),
        (X_DURATION, format!("{:.3}", subtitles.duration_s)),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    Ok(response)
}
