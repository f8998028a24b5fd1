//! `multipart/form-data` bodies with one audio file (a reference clip) and a few text fields,
//! read within bounds, every refusal OpenAI-shaped and naming its field.
//!
//! The clip is the one large part: it may be `--max-upload-bytes` long and no more, counted
//! while it arrives (a client that claims a larger `Content-Length` is refused before a byte
//! is read). Text fields are small; fields the route does not know are skipped unread.

use std::collections::BTreeMap;

use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::Multipart;
use axum::http::{header, HeaderMap, StatusCode};

use super::ApiError;

/// Room for the text fields and the part headers beside the clip.
pub const FORM_OVERHEAD_BYTES: usize = 1024 * 1024;

/// Longest text field; a transcript of a minute of speech is a few hundred characters.
const MAX_TEXT_BYTES: usize = 64 * 1024;

/// What a form held: its text fields by name, and the clip's bytes.
#[derive(Debug, Default)]
pub struct UploadForm {
    texts: BTreeMap<String, String>,
    pub audio: Option<Vec<u8>>,
}

impl UploadForm {
    pub fn text(&self, name: &str) -> Option<&str> {
        self.texts.get(name).map(String::as_str)
    }

    /// A form boolean as FastAPI reads one (`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`).
    pub fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.text(name).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(false),
            Some(v) if matches!(v.as_str(), "true" | "1" | "yes" | "on") => Ok(true),
            Some(v) if matches!(v.as_str(), "false" | "0" | "no" | "off" | "") => Ok(false),
            Some(v) => Err(ApiError::invalid(
                name,
                format!("'{name}' must be true or false, got '{v}'."),
            )),
        }
    }
}

/// Refuses a body whose declared length is over what the form may be, before reading it.
pub fn check_declared_length(headers: &HeaderMap, max_audio_bytes: usize) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let limit = max_audio_bytes.saturating_add(FORM_OVERHEAD_BYTES);
    match declared {
        Some(length) if length > limit as u64 => {
            Err(ApiError::payload_too_large(limit).with_param("ref_audio"))
        }
        _ => Ok(()),
    }
}

/// Reads the form: `audio_field` as bytes (at most `max_audio_bytes`), `text_fields` as text.
pub async fn read_form(
    multipart: Result<Multipart, MultipartRejection>,
    audio_field: &str,
    text_fields: &[&str],
    max_audio_bytes: usize,
) -> Result<UploadForm, ApiError> {
    let mut multipart =
        multipart.map_err(|rejection| ApiError::not_multipart(rejection.body_text()))?;
    let body_limit = max_audio_bytes.saturating_add(FORM_OVERHEAD_BYTES);
    let body_error = |error| body_error(error, body_limit);
    let mut form = UploadForm::default();
    while let Some(field) = multipart.next_field().await.map_err(body_error)? {
        let Some(name) = field.name().map(str::to_string) else {
            continue;
        };
        let twice = || ApiError::invalid(&name, format!("'{name}' was sent twice."));
        if name == audio_field {
            if form.audio.is_some() {
                return Err(twice());
            }
            form.audio = Some(read_bounded(field, &name, max_audio_bytes, body_limit).await?);
        } else if text_fields.contains(&name.as_str()) {
            if form.texts.contains_key(&name) {
                return Err(twice());
            }
            let bytes = read_bounded(field, &name, MAX_TEXT_BYTES, body_limit).await?;
            let text = String::from_utf8(bytes)
                .map_err(|_| ApiError::invalid(&name, format!("'{name}' is not UTF-8 text.")))?;
            form.texts.insert(name, text);
        }
        // Other fields are dropped unread: `next_field` skips what is left of them.
    }
    Ok(form)
}

/// A field's bytes, refused once they pass `limit`, before more is buffered.
async fn read_bounded(
    mut field: Field<'_>,
    name: &str,
    limit: usize,
    body_limit: usize,
) -> Result<Vec<u8>, ApiError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|error| body_error(error, body_limit))?
    {
        if bytes.len() + chunk.len() > limit {
            return Err(if limit == MAX_TEXT_BYTES {
                ApiError::invalid(name, format!("'{name}' is longer than {limit} bytes."))
                    .with_code("string_above_max_length")
            } else {
                ApiError::payload_too_large(limit).with_param(name)
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// `body_limit`: the route's, the clip's limit plus the form's room.
fn body_error(error: MultipartError, body_limit: usize) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::payload_too_large(body_limit).with_param("ref_audio")
    } else {
        ApiError::invalid(
            "body",
            format!("The form could not be read: {}", error.body_text()),
        )
        .with_code("invalid_body")
    }
}
