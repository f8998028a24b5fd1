//! Voice profiles over HTTP, as the Python omnivoice-server serves them: `POST
//! /v1/voices/profiles` (a form with the clip), `GET`/`PATCH`/`DELETE
//! /v1/voices/profiles/{id}`, and `GET /v1/voices`, its list of every voice OmniVoice answers
//! to (`auto`, designs, presets, and each profile as `clone:<id>`).
//!
//! Field names, answer shapes and success statuses are the Python server's; its refusals
//! (422 with `detail`) become OpenAI-shaped errors naming the field. The forms are read into
//! the structs their schemas are generated from; uploads are decoded here (any common format,
//! told by the bytes). The profiles and voice files themselves are
//! [`SpeechService`](crate::speech::SpeechService)'s, which reaches their files off the async
//! threads.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ErrorBody;
use super::multipart::{self, decode_clip, upload_limit, Form, FormBody, TextFields, UploadForm};
use super::{ApiError, AppState};
use crate::speech::profiles::{check_id, CatalogVoice, NewProfile, ProfileChange, ProfileMeta};

/// A voice profile, as the Python server answers with one.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"profile_id": "anna", "name": "anna", "ref_text": "Hello, this is Anna.", "created_at": "2026-12-03T10:42:15.123456+00:00"}))]
pub struct Profile {
    /// What a speech request names it by: `voice: "clone:<profile_id>"`.
    profile_id: String,
    /// A display name; the id unless the form gave one.
    name: String,
    /// What the clip says; `null` when not given.
    ref_text: Option<String>,
    /// When the profile was created (ISO 8601, UTC, as Python's `isoformat()` writes it).
    created_at: Option<String>,
}

impl From<ProfileMeta> for Profile {
    fn from(meta: ProfileMeta) -> Self {
        Self {
            profile_id: meta.id,
            name: meta.name,
            ref_text: meta.ref_text,
            created_at: meta.created_at,
        }
    }
}

/// The form that creates a profile.
#[derive(Debug, ToSchema)]
pub struct NewProfileForm {
    /// 1 to 64 letters, digits, `-` or `_`.
    #[schema(pattern = "^[a-zA-Z0-9_-]{1,64}$", example = "anna")]
    profile_id: String,
    /// The reference clip: WAV, FLAC, MP3, Ogg Vorbis or M4A (told by its bytes), 0.5 to 60
    /// seconds, at least 8000 Hz, at most `--max-upload-bytes`.
    #[schema(value_type = String, format = Binary)]
    ref_audio: Vec<u8>,
    /// What the clip says.
    ref_text: Option<String>,
    /// A display name; the id when absent.
    name: Option<String>,
    /// `true` replaces a profile of that id instead of answering 409.
    #[schema(value_type = Option<bool>)]
    overwrite: bool,
}

impl Form for NewProfileForm {
    const AUDIO_FIELD: &'static str = "ref_audio";
    const TEXT_FIELDS: TextFields<'static> =
        TextFields::Named(&["profile_id", "ref_text", "name", "overwrite"]);

    /// The id is checked first: the clip is decoded only for a form that can be saved.
    fn from_upload(form: UploadForm) -> Result<Self, ApiError> {
        let profile_id = form.text("profile_id").map(str::to_string).ok_or_else(|| {
            ApiError::invalid("profile_id", "The form must have a 'profile_id' field.")
                .with_code("missing_required_parameter")
        })?;
        check_id(&profile_id)?;
        let overwrite = form.flag("overwrite")?;
        let name = non_empty(&form, "name");
        let ref_text = form.text("ref_text").map(str::to_string);
        let Some(ref_audio) = form.audio else {
            return Err(
                ApiError::invalid("ref_audio", "The form must have a 'ref_audio' file.")
                    .with_code("missing_required_parameter"),
            );
        };
        Ok(Self {
            profile_id,
            ref_audio,
            ref_text,
            name,
            overwrite,
        })
    }
}

/// The form that changes a profile; at least one field.
#[derive(Debug, ToSchema)]
pub struct ProfileChangeForm {
    /// A new reference clip (as for creating one). Without `ref_text`, the old transcript is
    /// removed with the old clip.
    #[schema(value_type = Option<String>, format = Binary)]
    ref_audio: Option<Vec<u8>>,
    /// A new transcript; empty removes it.
    ref_text: Option<String>,
    /// A new display name.
    name: Option<String>,
}

impl Form for ProfileChangeForm {
    const AUDIO_FIELD: &'static str = "ref_audio";
    const TEXT_FIELDS: TextFields<'static> = TextFields::Named(&["ref_text", "name"]);

    fn from_upload(form: UploadForm) -> Result<Self, ApiError> {
        let name = non_empty(&form, "name");
        let ref_text = form.text("ref_text").map(str::to_string);
        if form.audio.is_none() && ref_text.is_none() && name.is_none() {
            return Err(ApiError::invalid(
                "ref_audio",
                "Provide at least one of: ref_audio, ref_text, name.",
            )
            .with_code("missing_required_parameter"));
        }
        Ok(Self {
            ref_audio: form.audio,
            ref_text,
            name,
        })
    }
}

/// One voice of `GET /v1/voices`.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum ListedVoice {
    /// `auto`, the design pattern and the presets.
    BuiltIn {
        id: String,
        /// `auto`, `design` or `preset`.
        #[serde(rename = "type")]
        kind: &'static str,
        description: String,
    },
    /// A voice file, spoken with `voice: "<name>"`.
    File {
        /// The file's name without `.txt`.
        id: String,
        /// Always `file`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The file's `description`, else its design.
        description: String,
        /// The design, in canonical form.
        instructions: String,
        /// The settings the file gives the voice (`seed`, `speed`, `num_step`, …).
        #[schema(value_type = Object)]
        params: serde_json::Map<String, serde_json::Value>,
    },
    /// A profile, spoken with `voice: "clone:<profile_id>"`.
    Clone {
        /// `clone:<profile_id>`.
        id: String,
        /// Always `clone`.
        #[serde(rename = "type")]
        kind: &'static str,
        profile_id: String,
        name: String,
        created_at: Option<String>,
        ref_text: Option<String>,
    },
}

/// The Python omnivoice-server's voice list.
#[derive(Serialize, ToSchema)]
pub struct VoiceCatalog {
    voices: Vec<ListedVoice>,
    /// The attributes a design may combine, by category, at most one of each.
    #[schema(value_type = Object, example = json!({"gender": ["male", "female"], "pitch": ["low pitch", "high pitch"]}))]
    design_attributes: BTreeMap<String, Vec<String>>,
    /// How many voices are listed.
    total: usize,
}

/// List every OmniVoice voice
///
/// The Python omnivoice-server's list: `auto`, the design pattern, OpenAI's preset names (each
/// a design), and every voice profile as `clone:<profile_id>`, with the attributes designs
/// combine.
#[utoipa::path(get, path = "/v1/voices", tag = "profiles", operation_id = "list_voice_catalog",
    responses(
        (status = 200, description = "Every voice", body = VoiceCatalog),
        (status = 500, description = "The profile directory could not be read", body = ErrorBody),
    ))]
pub async fn list_voices(
    State(state): State<Arc<AppState>>,
) -> Result<Json<VoiceCatalog>, ApiError> {
    let catalog = state.speech.voice_catalog().await?;
    let voices: Vec<ListedVoice> = catalog.voices.into_iter().map(ListedVoice::from).collect();
    Ok(Json(VoiceCatalog {
        total: voices.len(),
        voices,
        design_attributes: catalog.design_attributes,
    }))
}

impl From<CatalogVoice> for ListedVoice {
    fn from(voice: CatalogVoice) -> Self {
        match voice {
            CatalogVoice::BuiltIn {
                id,
                kind,
                description,
            } => Self::BuiltIn {
                id,
                kind: kind.as_str(),
                description,
            },
            CatalogVoice::File {
                name,
                description,
                instructions,
                defaults,
            } => Self::File {
                id: name,
                kind: "file",
                description,
                instructions,
                params: listed_settings(&defaults),
            },
            CatalogVoice::Profile(p) => Self::Clone {
                id: format!("clone:{}", p.id),
                kind: "clone",
                profile_id: p.id,
                name: p.name,
                created_at: p.created_at,
                ref_text: p.ref_text,
            },
        }
    }
}

/// A voice file's settings as the Python server lists them: only those it sets.
fn listed_settings(
    defaults: &crate::params::VoiceDefaults,
) -> serde_json::Map<String, serde_json::Value> {
    let mut listed = match serde_json::to_value(defaults.generation) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    listed.insert("seed".into(), defaults.seed.into());
    listed.insert("speed".into(), defaults.speed.into());
    listed.insert("language".into(), defaults.language.clone().into());
    listed.retain(|_, value| !value.is_null());
    listed
}

/// Save a voice profile
///
/// A reference clip and what it says, under an id that speech requests then name as `voice:
/// "clone:<id>"`. The clip may be any common format; it is stored as WAV.
#[utoipa::path(post, path = "/v1/voices/profiles", tag = "profiles",
    request_body(content = NewProfileForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "The profile as saved", body = Profile),
        (status = 400, description = "A missing or bad field, or a clip that cannot be used; `param` names it", body = ErrorBody),
        (status = 409, description = "A profile of that id exists (send `overwrite=true` to replace it)", body = ErrorBody),
        (status = 413, description = "The clip is larger than `--max-upload-bytes`", body = ErrorBody),
        (status = 415, description = "Not a form, or a clip in a format this server cannot decode", body = ErrorBody),
        (status = 500, description = "The profile could not be saved, and was not", body = ErrorBody),
    ))]
pub async fn create_profile(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: FormBody,
) -> Result<(StatusCode, Json<Profile>), ApiError> {
    let form: NewProfileForm = multipart::read(&headers, body, upload_limit(&state)).await?;
    let profile = NewProfile {
        id: form.profile_id,
        name: form.name,
        ref_text: form.ref_text,
        clip: decode_clip(form.ref_audio).await?,
        overwrite: form.overwrite,
    };
    let meta = state.speech.create_profile(profile).await?;
    Ok((StatusCode::CREATED, Json(meta.into())))
}

/// Get a voice profile
#[utoipa::path(get, path = "/v1/voices/profiles/{profile_id}", tag = "profiles",
    params(("profile_id" = String, Path, description = "The profile's id")),
    responses(
        (status = 200, description = "The profile (without its clip)", body = Profile),
        (status = 400, description = "Not a valid id", body = ErrorBody),
        (status = 404, description = "No profile of that id", body = ErrorBody),
    ))]
pub async fn get_profile(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Profile>, ApiError> {
    let id = path_id(id)?;
    Ok(Json(state.speech.profile(&id).await?.into()))
}

/// Get a voice profile's clip
///
/// The reference clip as stored: WAV, as this server writes every clip (a profile the Python
/// server wrote keeps the bytes it was given, sent as `application/octet-stream`).
#[utoipa::path(get, path = "/v1/voices/profiles/{profile_id}/audio", tag = "profiles",
    params(("profile_id" = String, Path, description = "The profile's id")),
    responses(
        (status = 200, description = "The clip", content_type = "audio/wav", body = Vec<u8>),
        (status = 400, description = "Not a valid id", body = ErrorBody),
        (status = 404, description = "No profile of that id", body = ErrorBody),
        (status = 500, description = "The clip could not be read", body = ErrorBody),
    ))]
pub async fn get_profile_audio(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = path_id(id)?;
    let clip = state.speech.profile_clip(&id).await?;
    let content_type = if clip.starts_with(b"RIFF") {
        "audio/wav"
    } else {
        "application/octet-stream"
    };
    Ok(([(header::CONTENT_TYPE, content_type)], clip).into_response())
}

/// Change a voice profile
///
/// Replaces the fields the form has and keeps the others (and the creation date). A new clip
/// without a new `ref_text` removes the old transcript: it describes the old clip. Without a
/// clip the form may be urlencoded, as the Python server's FastAPI `Form` reads it.
#[utoipa::path(patch, path = "/v1/voices/profiles/{profile_id}", tag = "profiles",
    params(("profile_id" = String, Path, description = "The profile's id")),
    request_body(description = "A form: multipart to send a clip, or urlencoded for the text fields alone",
        content(
            (ProfileChangeForm = "multipart/form-data"),
            (ProfileChangeForm = "application/x-www-form-urlencoded"),
        )),
    responses(
        (status = 200, description = "The profile as saved", body = Profile),
        (status = 400, description = "No field to change, a bad field or a clip that cannot be used", body = ErrorBody),
        (status = 404, description = "No profile of that id", body = ErrorBody),
        (status = 413, description = "The clip is larger than `--max-upload-bytes`", body = ErrorBody),
        (status = 415, description = "Not a form, or a clip in a format this server cannot decode", body = ErrorBody),
        (status = 500, description = "The change could not be saved, and was not made", body = ErrorBody),
    ))]
pub async fn update_profile(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: FormBody,
) -> Result<Json<Profile>, ApiError> {
    let id = path_id(id)?;
    let form: ProfileChangeForm = multipart::read(&headers, body, upload_limit(&state)).await?;
    let clip = match form.ref_audio {
        Some(audio) => Some(decode_clip(audio).await?),
        None => None,
    };
    let change = ProfileChange {
        name: form.name,
        ref_text: form.ref_text,
        clip,
    };
    Ok(Json(state.speech.update_profile(&id, change).await?.into()))
}

/// Delete a voice profile
///
/// The clip, its metadata and its cached codes.
#[utoipa::path(delete, path = "/v1/voices/profiles/{profile_id}", tag = "profiles",
    params(("profile_id" = String, Path, description = "The profile's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Not a valid id", body = ErrorBody),
        (status = 404, description = "No profile of that id", body = ErrorBody),
        (status = 500, description = "The profile could not be deleted", body = ErrorBody),
    ))]
pub async fn delete_profile(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let id = path_id(id)?;
    state.speech.delete_profile(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn path_id(id: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    // A path that is not UTF-8 once decoded is no id; axum's own rejection is plain text.
    let Ok(Path(id)) = id else {
        return Err(ApiError::invalid(
            "profile_id",
            "The profile id must be text.",
        ));
    };
    check_id(&id)?;
    Ok(id)
}

fn non_empty(form: &UploadForm, field: &str) -> Option<String> {
    form.text(field)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use utoipa::openapi::{RefOr, Schema};
    use utoipa::PartialSchema;

    use super::*;

    fn documented<T: PartialSchema>() -> Vec<String> {
        let RefOr::T(Schema::Object(object)) = T::schema() else {
            panic!("a form is an object");
        };
        let mut names: Vec<String> = object.properties.keys().cloned().collect();
        names.sort();
        names
    }

    fn read<F: Form>() -> Vec<String> {
        let TextFields::Named(texts) = F::TEXT_FIELDS else {
            panic!("a profile form names its fields");
        };
        let mut names: Vec<String> = texts.iter().map(|name| name.to_string()).collect();
        names.push(F::AUDIO_FIELD.to_string());
        names.sort();
        names
    }

    /// A field added to a form's struct but not read (or read but not in the struct) fails
    /// here, not in a client.
    #[test]
    fn the_fields_documented_are_the_fields_read() {
        assert_eq!(documented::<NewProfileForm>(), read::<NewProfileForm>());
        assert_eq!(
            documented::<ProfileChangeForm>(),
            read::<ProfileChangeForm>()
        );
    }
}
