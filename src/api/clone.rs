//! `POST /v1/audio/speech/clone`: the Python omnivoice-server's one-shot cloning route, as a
//! multipart form: the text, a reference clip (`ref_audio`), its transcript (`ref_text`) and
//! every field of a speech request. The clip becomes a voice of its own
//! ([`SpeechService::clone_voice`](crate::speech::SpeechService::clone_voice)); from there the
//! request is a speech request like any other, answered the same way.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::multipart::{self, decode_clip, upload_limit, Form, FormBody, TextFields, UploadForm};
use super::schema::SpeechResponses;
use super::speech::{answer, SpeechRequest, VoiceField};
use super::{ApiError, AppState};
use crate::engine::omnivoice;
use crate::engine::Reference;

/// The form, as read: its own fields, and the speech request that all its other fields make
/// (its `input`, `model` and `voice` are placeholders until the clip is a voice).
#[derive(Debug)]
pub struct CloneForm {
    own: CloneFields,
    request: SpeechRequest,
}

/// The form's own fields, as the Python server takes them.
#[derive(Debug, ToSchema)]
struct CloneFields {
    /// The text to speak.
    text: String,
    /// The clip to clone: WAV, FLAC, MP3 or Ogg, recognised by its bytes.
    #[schema(value_type = String, format = Binary)]
    ref_audio: Vec<u8>,
    /// What is said in the clip. Required: this server runs no speech recognition.
    ref_text: Option<String>,
    /// `omnivoice` when absent.
    model: Option<String>,
}

/// Speech-request fields a form does not set: the form's own fields stand for `input` and
/// `model`, the clip is the voice, and a form cannot carry an object.
const NOT_FROM_A_FORM: [&str; 5] = [
    "input",
    "model",
    "voice",
    "speaker",
    "normalization_options",
];

impl Form for CloneForm {
    const AUDIO_FIELD: &'static str = "ref_audio";
    const TEXT_FIELDS: TextFields<'static> = TextFields::All;

    fn from_upload(mut form: UploadForm) -> Result<Self, ApiError> {
        let ref_audio = form.audio.take().ok_or_else(|| {
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
        // The placeholders are replaced once the clip is a voice.
        fields.insert("input".into(), "".into());
        fields.insert("model".into(), omnivoice::ID.into());
        fields.insert("voice".into(), "".into());
        let request: SpeechRequest =
            serde_path_to_error::deserialize(serde_json::Value::Object(fields)).map_err(|e| {
                let param = e.path().to_string();
                ApiError::invalid(&param, format!("'{param}': {}", e.inner()))
            })?;
        Ok(Self {
            own: CloneFields {
                text,
                ref_audio,
                ref_text,
                model,
            },
            request,
        })
    }
}

impl PartialSchema for CloneForm {
    /// One object: the form's own fields, then those of [`SpeechRequest`] that a form sets, each
    /// with the speech request's own schema.
    fn schema() -> RefOr<Schema> {
        let RefOr::T(Schema::Object(mut form)) = CloneFields::schema() else {
            unreachable!("a struct's schema is an object");
        };
        let RefOr::T(Schema::Object(request)) = SpeechRequest::schema() else {
            unreachable!("a struct's schema is an object");
        };
        let taken = |name: &String| !NOT_FROM_A_FORM.contains(&name.as_str());
        form.required
            .extend(request.required.into_iter().filter(|name| taken(name)));
        form.properties.extend(
            request
                .properties
                .into_iter()
                .filter(|(name, _)| taken(name)),
        );
        form.description = Some(
            "The Python omnivoice-server's fields, and every field of a speech request that a \
             form can carry, as text."
                .into(),
        );
        Schema::Object(form).into()
    }
}

impl ToSchema for CloneForm {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        CloneFields::schemas(schemas);
        SpeechRequest::schemas(schemas);
    }
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
    body: FormBody,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let CloneForm { own, mut request } =
        multipart::read(&headers, body, upload_limit(&state)).await?;
    let clip = decode_clip(own.ref_audio).await?;
    let Some(ref_text) = own.ref_text.filter(|t| !t.trim().is_empty()) else {
        return Err(ApiError::invalid(
            "ref_text",
            "'ref_text' is required: the transcript of the clip. This server runs no speech \
             recognition.",
        ));
    };
    let model = own.model.unwrap_or_else(|| omnivoice::ID.into());
    let reference = Reference {
        samples: clip.samples,
        sample_rate: clip.sample_rate,
        text: Some(ref_text),
        preprocess: request.preprocess_prompt.unwrap_or(true),
    };
    let voice = state.speech.clone_voice(&model, reference).await?;
    request.input = own.text;
    request.model = model;
    request.voice = VoiceField(voice);
    request.speaker = None;
    answer(&state, &headers, request, started).await
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The form's own fields first, then the speech request's that a form sets, each as the
    /// speech request documents it.
    #[test]
    fn the_form_documents_its_own_fields_and_the_speech_fields_it_takes() {
        let RefOr::T(Schema::Object(form)) = CloneForm::schema() else {
            panic!("the form is an object");
        };
        let names: Vec<&str> = form.properties.keys().map(String::as_str).collect();
        assert_eq!(names[..4], ["text", "ref_audio", "ref_text", "model"]);
        for speech in ["speed", "seed", "num_step", "instructions", "stream_format"] {
            assert!(names.contains(&speech), "{speech} in {names:?}");
        }
        for absent in NOT_FROM_A_FORM.iter().filter(|name| **name != "model") {
            assert!(!names.contains(absent), "{absent} in {names:?}");
        }
        assert_eq!(form.required, ["text", "ref_audio"]);
        let RefOr::T(Schema::Object(request)) = SpeechRequest::schema() else {
            panic!("the request is an object");
        };
        assert_eq!(
            serde_json::to_value(&form.properties["speed"]).unwrap(),
            serde_json::to_value(&request.properties["speed"]).unwrap()
        );
    }
}
