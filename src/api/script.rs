//! `POST /v1/audio/script`: a multi-speaker script in the Python omnivoice-server's request
//! shape, answered as one audio file (`single_track`) or as JSON with one base64 track per
//! speaker (`multi_track`), with that server's headers and field names.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{KnownFormat, Object, ObjectBuilder, SchemaFormat, SchemaType};
use utoipa::openapi::{Content, RefOr, Response as ApiResponse, ResponseBuilder, Type};
use utoipa::{IntoResponses, PartialSchema, ToSchema};

use super::extract::ApiJson;
use super::headers::{X_DURATION, X_LATENCY, X_SAMPLE_RATE};
use super::schema::{self, required_header, SpeechErrors};
use super::speech::timed_out;
use super::{ApiError, AppState};
use crate::audio::AudioFormat;
use crate::metrics as m;
use crate::speech::{
    Dialogue, DialogueAudio, Line, Reading, DEFAULT_PAUSE_S, LINES_IN_FLIGHT, PAUSE_S,
};

const X_SPEAKERS: HeaderName = HeaderName::from_static("x-speakers-unique");
const X_SEGMENTS: HeaderName = HeaderName::from_static("x-segment-count");
const X_SKIPPED: HeaderName = HeaderName::from_static("x-skipped-segments");

/// A multi-speaker script: the Python omnivoice-server's request, plus `model`, `seed` and
/// `cache`.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"script": [
    {"speaker": "host", "text": "Welcome to the show.", "voice": "alloy"},
    {"speaker": "guest", "text": "Thanks for having me.", "voice": "en_US-joe-medium"},
    {"speaker": "host", "text": "Let's begin."}], "output_format": "single_track"}))]
pub struct ScriptRequest {
    /// The engine of voices that name none (`piper`, `kokoro`, `omnivoice`, an OpenAI model
    /// name or an alias); the default engine when absent. A voice may name its own engine
    /// (`piper/en_US-joe-medium`), and a voice id of another engine is that engine's.
    #[serde(default)]
    #[schema(example = "tts-1")]
    pub model: Option<String>,
    /// The lines in order (`segments` is taken too); at most 100, 50,000 characters in all,
    /// 10 distinct speakers.
    #[serde(alias = "segments")]
    #[schema(min_items = 1, max_items = 100)]
    pub script: Vec<ScriptSegment>,
    /// The voice of speakers whose first line names none; the server's default otherwise.
    #[serde(default)]
    pub default_voice: Option<String>,
    /// Speed of lines that state none; 1.0 when absent.
    #[serde(default)]
    #[schema(schema_with = schema::speed_schema)]
    pub speed: Option<f64>,
    #[serde(default)]
    #[schema(schema_with = response_format_schema)]
    pub response_format: Option<String>,
    #[serde(default)]
    #[schema(schema_with = output_format_schema)]
    pub output_format: Option<String>,
    #[serde(default)]
    #[schema(schema_with = pause_schema)]
    pub pause_between_speakers: Option<f64>,
    #[serde(default)]
    #[schema(schema_with = on_error_schema)]
    pub on_error: Option<String>,
    #[serde(default)]
    #[schema(schema_with = schema::seed_schema)]
    pub seed: Option<u64>,
    /// `false` bypasses the audio cache for every line.
    #[serde(default)]
    pub cache: Option<bool>,
}

/// One line of a script.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ScriptSegment {
    /// 1 to 64 ASCII letters, digits, `_` or `-`.
    #[schema(example = "host", pattern = "^[a-zA-Z0-9_-]{1,64}$")]
    pub speaker: String,
    /// The line: up to 10,000 characters (or the server's `max_input_chars`), not only
    /// whitespace.
    #[schema(min_length = 1, max_length = 10000, pattern = r"\S")]
    pub text: String,
    /// The speaker's voice, read from the speaker's first line (later lines keep it).
    #[serde(default)]
    pub voice: Option<String>,
    #[serde(default)]
    #[schema(schema_with = schema::speed_schema)]
    pub speed: Option<f64>,
}

/// The success answer: audio, or JSON for `multi_track`.
struct ScriptResponses;

impl IntoResponses for ScriptResponses {
    fn responses() -> BTreeMap<String, RefOr<ApiResponse>> {
        let binary = || {
            Content::new(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary))),
            ))
        };
        let mut ok = ResponseBuilder::new().description(
            "`single_track`: the audio in `response_format`, with `X-Audio-Duration-S`. \
             `multi_track`: JSON, a base64 track per speaker and where each line sits.",
        );
        for format in AudioFormat::ALL {
            ok = ok.content(format.content_type(), binary());
        }
        let count =
            |description: &str| required_header(Object::with_type(Type::Integer), description);
        let ok = ok
            .content(
                "application/json",
                Content::new(Some(MultiTrackResponse::schema())),
            )
            .header(
                X_SPEAKERS.as_str(),
                count("Distinct speakers among the lines spoken."),
            )
            .header(X_SEGMENTS.as_str(), count("Lines spoken."))
            .header(
                X_SKIPPED.as_str(),
                required_header(
                    Object::with_type(Type::String),
                    "Indices of the lines left out (`on_error: skip`), comma-separated; empty \
                     when none.",
                ),
            )
            .header(
                X_SAMPLE_RATE.as_str(),
                count("Sample rate of the audio (every track's) in Hz."),
            )
            .header(
                X_LATENCY.as_str(),
                required_header(
                    Object::with_type(Type::Number),
                    "Seconds from the request to the answer.",
                ),
            )
            .build();
        BTreeMap::from([("200".to_string(), ok.into())])
    }
}

fn nullable(kind: Type) -> SchemaType {
    [kind, Type::Null].into_iter().collect()
}

fn choice_schema(names: &[&str], default: &str, description: &str) -> Object {
    let mut values: Vec<serde_json::Value> = names.iter().map(|&n| n.into()).collect();
    values.push(serde_json::Value::Null);
    ObjectBuilder::new()
        .schema_type(nullable(Type::String))
        .enum_values(Some(values))
        .default(Some(default.into()))
        .description(Some(description))
        .build()
}

fn response_format_schema() -> Object {
    let names: Vec<&str> = AudioFormat::ALL.iter().map(|f| f.as_str()).collect();
    choice_schema(
        &names,
        "wav",
        "Audio format of the answer (of every track with `multi_track`); `wav` when absent.",
    )
}

fn output_format_schema() -> Object {
    choice_schema(
        &["single_track", "multi_track"],
        "single_track",
        "`single_track`: one file. `multi_track`: JSON with a track per speaker.",
    )
}

fn on_error_schema() -> Object {
    choice_schema(
        &["abort", "skip"],
        "abort",
        "`abort`: the first failed line fails the request, naming it. `skip`: failed lines \
         are left out and listed.",
    )
}

fn pause_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(nullable(Type::Number))
        .minimum(Some(*PAUSE_S.start()))
        .maximum(Some(*PAUSE_S.end()))
        .default(Some(DEFAULT_PAUSE_S.into()))
        .description(Some(
            "Seconds of silence where the speaker changes; none between lines of one speaker.",
        ))
        .build()
}

/// `multi_track`'s answer (the Python server's fields, plus ours in `metadata`).
#[derive(Debug, Serialize, ToSchema)]
pub struct MultiTrackResponse {
    /// Speaker id → base64 audio in `response_format`; every track lasts the whole script,
    /// silent where others speak.
    #[schema(value_type = BTreeMap<String, String>)]
    tracks: serde_json::Map<String, serde_json::Value>,
    #[schema(inline)]
    metadata: ScriptMetadata,
}

#[derive(Debug, Serialize, ToSchema)]
struct ScriptMetadata {
    total_duration_s: f64,
    speakers_unique: usize,
    segment_count: usize,
    /// The indices of the lines left out (`on_error: skip`).
    skipped_segments: Vec<usize>,
    #[schema(inline)]
    segments: Vec<SegmentPlacement>,
    /// Rate of every track.
    sample_rate: u32,
    /// Why each line was left out.
    #[schema(inline)]
    skipped_errors: Vec<SkippedError>,
}

#[derive(Debug, Serialize, ToSchema)]
struct SegmentPlacement {
    /// The line's position in `script`.
    index: usize,
    speaker: String,
    offset_s: f64,
    duration_s: f64,
    /// The same, exactly, in samples of `sample_rate`.
    offset_samples: usize,
    duration_samples: usize,
}

#[derive(Debug, Serialize, ToSchema)]
struct SkippedError {
    index: usize,
    param: String,
    message: String,
}

/// Read a multi-speaker script
///
/// The Python omnivoice-server's `/v1/audio/script`. Each speaker keeps the voice of its
/// first line (or `default_voice`); voices of different engines may meet in one script, and
/// are resampled to one rate. Lines are synthesized a few at a time alongside other
/// requests. `single_track` answers one file with `pause_between_speakers` of silence where
/// the speaker changes; `multi_track` answers JSON with a track per speaker and where each
/// line sits. A server reads `--max-scripts` scripts at once; one more is a 429.
#[utoipa::path(post, path = "/v1/audio/script", tag = "speech",
    request_body = ScriptRequest,
    responses(
        ScriptResponses, SpeechErrors))]
pub async fn create_script(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<ScriptRequest>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let no_cache_header = headers
        .get(header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|d| matches!(d.trim(), "no-cache" | "no-store"))
        });
    // Each round of lines in flight gets the time of one speech request.
    let rounds = request.script.len().div_ceil(LINES_IN_FLIGHT).max(1) as u64;
    let seconds = state.settings.request_timeout_s.saturating_mul(rounds);
    let dialogue = Dialogue {
        model: request.model,
        lines: request
            .script
            .into_iter()
            .map(|segment| Line {
                speaker: segment.speaker,
                text: segment.text,
                voice: segment.voice,
                speed: segment.speed,
            })
            .collect(),
        default_voice: request.default_voice,
        speed: request.speed,
        response_format: request.response_format,
        output_format: request.output_format,
        pause_between_speakers: request.pause_between_speakers,
        on_error: request.on_error,
        seed: request.seed,
        use_cache: request.cache != Some(false) && !no_cache_header,
    };
    let reading =
        tokio::time::timeout(Duration::from_secs(seconds), state.dialogues.read(dialogue))
            .await
            .map_err(|_| timed_out(seconds))??;
    m::add_audio_seconds(reading.duration_s);
    let latency = format!("{:.3}", started.elapsed().as_secs_f64());
    let mut response = answer(reading);
    set(response.headers_mut(), X_LATENCY, latency);
    Ok(response)
}

fn answer(reading: Reading) -> Response {
    let speakers = reading.speakers();
    let skipped = reading
        .skipped
        .iter()
        .map(|s| s.index.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let segments = reading.placed.len();
    let rate = reading.sample_rate;
    let seconds = |samples: usize| round6(samples as f64 / f64::from(rate));
    let mut response = match reading.audio {
        DialogueAudio::Single(bytes) => {
            let length = bytes.len();
            let mut response = Response::new(Body::from(bytes));
            let headers = response.headers_mut();
            set(
                headers,
                header::CONTENT_TYPE,
                reading.format.content_type().to_string(),
            );
            set(
                headers,
                header::CONTENT_DISPOSITION,
                format!("inline; filename=\"script.{}\"", reading.format.extension()),
            );
            set(headers, header::CONTENT_LENGTH, length.to_string());
            set(headers, X_DURATION, format!("{:.3}", reading.duration_s));
            response
        }
        DialogueAudio::Tracks(tracks) => {
            let b64 = base64::engine::general_purpose::STANDARD;
            let tracks = tracks
                .into_iter()
                .map(|(speaker, bytes)| (speaker, b64.encode(&bytes).into()))
                .collect();
            let metadata = ScriptMetadata {
                total_duration_s: round6(reading.duration_s),
                speakers_unique: speakers,
                segment_count: segments,
                skipped_segments: reading.skipped.iter().map(|s| s.index).collect(),
                segments: reading
                    .placed
                    .iter()
                    .map(|p| SegmentPlacement {
                        index: p.index,
                        speaker: p.speaker.clone(),
                        offset_s: seconds(p.offset),
                        duration_s: seconds(p.length),
                        offset_samples: p.offset,
                        duration_samples: p.length,
                    })
                    .collect(),
                sample_rate: rate,
                skipped_errors: reading
                    .skipped
                    .iter()
                    .map(|s| SkippedError {
                        index: s.index,
                        param: s.param.clone(),
                        message: s.error.for_clients(),
                    })
                    .collect(),
            };
            Json(MultiTrackResponse { tracks, metadata }).into_response()
        }
    };
    let headers = response.headers_mut();
    set(headers, X_SAMPLE_RATE, rate.to_string());
    set(headers, X_SPEAKERS, speakers.to_string());
    set(headers, X_SEGMENTS, segments.to_string());
    set(headers, X_SKIPPED, skipped);
    response
}

/// Seconds to a microsecond: finer than a sample at any rate served, without float noise.
fn round6(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e6
}

fn set(headers: &mut HeaderMap, name: HeaderName, value: String) {
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(name, value);
    }
}
