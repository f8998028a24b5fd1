//! `POST /v1/audio/speech/clone`: the Python omnivoice-server's one-shot cloning route, as a
//! multipart form: the text, a reference clip (`ref_audio`), its transcript (`ref_text`) and
//! every field of a speech request. The clip becomes a voice of its own
//! ([`SpeechService::clone_voice`](crate::speech::SpeechService::clone_voice)); from there the
//! request is a speech request like any other, answered the same way.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use utoipa::ToSchema;

use super::multipart::{self, TextFields};
use super::schema::SpeechResponses;
use super::speech::{answer, SpeechRequest};
use super::{ApiError, AppState};
use crate::audio::upload;
use crate::engine::omnivoice;
use crate::engine::Reference;

/// The form's fields, as the Python server takes them (and ours: `model`, `instructions`,
/// `stream_format` and the rest of a speech request's fields are taken too).
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)] // The document's schema; the handler reads the form field by field.
pub struct CloneForm {
    /// The text to speak.
    text: String,
    /// The clip to clone: WAV, FLAC, MP3 or Ogg, recognised by its bytes.
    #[schema(value_type = String, format = Binary)]
    ref_audio: Vec<u8>,
    /// What is said in the clip. Required: this server runs no speech recognition.
    ref_text: Option<String>,
    /// `omnivoice` when absent.
    model: Option<String>,
    /// `mp3` when absent (the Python server's default is `wav`).
    response_format: Option<String>,
    stream: Option<bool>,
    speed: Option<f64>,
    language: Option<String>,
    seed: Option<u64>,
    num_step: Option<u32>,
    guidance_scale: Option<f32>,
    t_shift: Option<f32>,
    position_temperature: Option<f32>,
    class_temperature: Option<f32>,
    layer_penalty_factor: Option<f32>,
    denoise: Option<bool>,
    duration: Option<f32>,
    /// Whether the clip is trimmed as the official code trims it; true when absent.
    preprocess_prompt: Option<bool>,
    postprocess_output: Option<bool>,
    audio_chunk_duration: Option<f32>,
    audio_chunk_threshold: Option<f32>,
}

/// Clone a voice and speak
///
/// Speaks `text` in the voice of the uploaded `ref_audio`. The clip's codes are kept by its
/// hash, so sending the same clip again encodes nothing.
#[utoipa::path(post, path = "/v1/audio/speech/clone", tag = "speech",
    request_body(content = CloneForm, content_type = "multipart/form-data"),
    responses(SpeechResponses))]
pub async fn create_cloned_speech(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let form = read_form(&headers, multipart, super::profiles::upload_limit(&state)).await?;
    let clip = tokio::task::spawn_blocking(move || upload::decode_upload(&form.clip))
        .await
        .map_err(|e| ApiError::internal(&e))??;
    let Some(ref_text) = form.ref_text.filter(|t| !t.trim().is_empty()) else {
        return Err(ApiError::invalid(
            "ref_text",
            "'ref_text' is required: the transcript of the clip. This server runs no speech \
             recognition.",
        ));
    };
    let model = form.model.clone().unwrap_or_else(|| omnivoice::ID.into());
    let reference = Reference {
        samples: clip.samples,
        sample_rate: clip.sample_rate,
        text: Some(ref_text),
        preprocess: form.request.preprocess_prompt.unwrap_or(true),
    };
    let voice = state.speech.clone_voice(&model, reference).await?;
    let mut request = form.request;
    request.model = model;
    request.voice = super::speech::VoiceField(voice);
    request.speaker = None;
    answer(&state, &headers, request, started).await
}

/// The form, read: the clip's bytes and the speech request its other fields make.
struct Form {
    clip: Vec<u8>,
    ref_text: Option<String>,
    model: Option<String>,
    request: SpeechRequest,
}

async fn read_form(
    headers: &HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
    max_clip_bytes: usize,
) -> Result<Form, ApiError> {
    let mut form = multipart::read_form(
        headers,
        multipart,
        "ref_audio",
        TextFields::All,
        max_clip_bytes,
    )
    .await?;
    let clip = form.audio.take().ok_or_else(|| {
        ApiError::invalid("ref_audio", "'ref_audio' is required: the clip to clone.")
    })?;
    let ref_text = form.take_text("ref_text");
    let model = form.take_text("model");
    let Some(text) = form.take_text("text") else {
        return Err(ApiError::invalid(
            "text",
            "'text' is required: the text to speak.",
        ));
    };
    let mut fields = serde_json::Map::new();
    for (name, value) in form.into_texts() {
        let value = typed(&name, value);
        fields.insert(name, value);
    }
    fields.insert("input".into(), text.into());
    // The placeholders are replaced once the clip is a voice.
    fields.insert("model".into(), omnivoice::ID.into());
    fields.insert("voice".into(), "".into());
    let request: SpeechRequest =
        serde_path_to_error::deserialize(serde_json::Value::Object(fields)).map_err(|e| {
            let param = e.path().to_string();
            ApiError::invalid(&param, format!("'{param}': {}", e.inner()))
        })?;
    Ok(Form {
        clip,
        ref_text,
        model,
        request,
    })
}

/// A form field's text as the JSON value its speech-request field expects: forms carry only
/// text, so numbers and booleans are read here.
fn typed(name: &str, value: String) -> serde_json::Value {
    const TEXT: [&str; 6] = [
        "response_format",
        "language",
        "instructions",
        "stream_format",
        "input_format",
        "lang_code",
    ];
    if TEXT.contains(&name) {
        return value.into();
    }
    let trimmed = value.trim();
    match trimmed.to_ascii_lowercase().as_str() {
        "true" => return true.into(),
        "false" => return false.into(),
        _ => {}
    }
    // Text that is not a number stays text; fields the request does not know are ignored, as
    // in a JSON body.
    serde_json::from_str::<serde_json::Number>(trimmed)
        .map_or_else(|_| value.into(), serde_json::Value::Number)
}
