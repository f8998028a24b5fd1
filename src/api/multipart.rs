//! Form bodies: `multipart/form-data` with one audio file (a reference clip) and a few text
//! fields, or `application/x-www-form-urlencoded` text fields alone (what FastAPI's `Form`
//! also reads, and what clients send when a form has no file), read within bounds, every
//! refusal OpenAI-shaped and naming its field.
//!
//! The clip is the one large part: it may be `--max-upload-bytes` long and no more, counted
//! while it arrives. Text fields are small; fields the route does not know are skipped unread.
//!
//! A refusal is answered only after the rest of the body has been read and thrown away (up to
//! [`route_body_limit`], for at most [`DRAIN_TIME`]). A server that answers while its client
//! is still writing and then closes makes the client's kernel see a reset: most clients then
//! report a broken pipe instead of the 413 they were sent.
//!
//! A route names its form as a struct ([`Form`]) and reads it with [`read`]: the struct is
//! what the route's schema is generated from, so the document cannot list a field the route
//! does not read.

use std::collections::BTreeMap;
use std::time::Duration;

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::multipart::{Field, MultipartError};
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{header, HeaderMap, StatusCode};
use futures::StreamExt;

use super::{ApiError, AppState};
use crate::audio::upload::{decode_upload, Clip};

/// Room for the text fields and the part headers beside the clip.
const FORM_OVERHEAD_BYTES: usize = 1024 * 1024;

/// Longest text field; a transcript of a minute of speech is a few hundred characters.
const MAX_TEXT_BYTES: usize = 64 * 1024;

/// How long a refused body is read before the connection is closed on a slow client.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// A form's body, as the client sent it. It never refuses the request itself: a route checks
/// its path first, and [`read`] answers for a body that is no form.
pub enum FormBody {
    Multipart(Multipart),
    /// The whole body, read up to [`FORM_OVERHEAD_BYTES`].
    UrlEncoded(Result<Bytes, ApiError>),
    /// Neither kind of form; why, in axum's words.
    NotAForm(String),
}

impl<S: Send + Sync> FromRequest<S> for FormBody {
    type Rejection = Infallible;

    async fn from_request(req: Request, state: &S) -> Result<Self, Infallible> {
        if is_urlencoded(req.headers()) {
            return Ok(Self::UrlEncoded(read_text_body(req).await));
        }
        Ok(match Multipart::from_request(req, state).await {
            Ok(multipart) => Self::Multipart(multipart),
            Err(rejection) => Self::NotAForm(rejection.body_text()),
        })
    }
}

/// An urlencoded body: text fields only, so at most as much as the text beside a clip may be.
/// One that is longer is still read to its end (within the route's body limit and
/// [`DRAIN_TIME`]) before it is refused, so that the client hears the 413.
async fn read_text_body(req: Request) -> Result<Bytes, ApiError> {
    let mut stream = req.into_body().into_data_stream();
    let mut body = Vec::new();
    let too_large = || ApiError::payload_too_large(FORM_OVERHEAD_BYTES).with_param("body");
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| too_large())?;
        if body.len() + chunk.len() > FORM_OVERHEAD_BYTES {
            let drain = async { while let Some(Ok(_)) = stream.next().await {} };
            let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.into())
}

fn is_urlencoded(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| {
            mime.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// Which text fields a route reads.
pub enum TextFields<'a> {
    /// These, and no others (the rest are skipped unread).
    Named(&'a [&'a str]),
    /// Every field but the clip (a route that maps any field onto a speech request).
    All,
}

impl TextFields<'_> {
    fn takes(&self, name: &str) -> bool {
        match self {
            Self::Named(names) => names.contains(&name),
            Self::All => true,
        }
    }
}

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

    /// Takes a text field out of the form.
    pub fn take_text(&mut self, name: &str) -> Option<String> {
        self.texts.remove(name)
    }

    /// The text fields left, by name.
    pub fn into_texts(self) -> BTreeMap<String, String> {
        self.texts
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

/// A form a route takes, as the struct it is read into: the struct the route's schema is
/// generated from, so that the document and the reader cannot name different fields.
pub trait Form: Sized {
    /// The file field: the clip.
    const AUDIO_FIELD: &'static str;
    /// The text fields read beside it.
    const TEXT_FIELDS: TextFields<'static>;

    /// The struct, from what the form held; a refusal names its field.
    fn from_upload(form: UploadForm) -> Result<Self, ApiError>;
}

/// Reads a form `F` whose clip is at most `max_audio_bytes`.
pub async fn read<F: Form>(
    headers: &HeaderMap,
    body: FormBody,
    max_audio_bytes: usize,
) -> Result<F, ApiError> {
    let form = match body {
        FormBody::Multipart(multipart) => {
            read_form(
                headers,
                multipart,
                F::AUDIO_FIELD,
                F::TEXT_FIELDS,
                max_audio_bytes,
            )
            .await?
        }
        FormBody::UrlEncoded(body) => read_urlencoded(&body?, F::AUDIO_FIELD, F::TEXT_FIELDS)?,
        FormBody::NotAForm(why) => return Err(ApiError::not_multipart(why)),
    };
    F::from_upload(form)
}

/// The text fields of an urlencoded body; a clip cannot be one of them.
fn read_urlencoded(
    body: &[u8],
    audio_field: &str,
    text_fields: TextFields<'_>,
) -> Result<UploadForm, ApiError> {
    let mut form = UploadForm::default();
    for (name, value) in form_urlencoded::parse(body) {
        if name == audio_field {
            return Err(ApiError::invalid(
                audio_field,
                format!(
                    "'{audio_field}' is a file: send the form as multipart/form-data to upload \
                     one."
                ),
            ));
        }
        if !text_fields.takes(&name) {
            continue;
        }
        if value.len() > MAX_TEXT_BYTES {
            return Err(ApiError::invalid(
                &name,
                format!("'{name}' is longer than {MAX_TEXT_BYTES} bytes."),
            )
            .with_code("string_above_max_length"));
        }
        if form.texts.contains_key(name.as_ref()) {
            return Err(ApiError::invalid(
                &name,
                format!("'{name}' was sent twice."),
            ));
        }
        form.texts.insert(name.into_owned(), value.into_owned());
    }
    Ok(form)
}

/// `--max-upload-bytes` as a length in memory (on 32-bit targets at most what fits).
pub fn upload_limit(state: &AppState) -> usize {
    usize::try_from(state.settings.max_upload_bytes).unwrap_or(usize::MAX)
}

/// Decodes an uploaded clip off the async threads (a minute of MP3 takes a while).
pub async fn decode_clip(bytes: Vec<u8>) -> Result<Clip, ApiError> {
    Ok(crate::blocking::run(move || decode_upload(&bytes)).await?)
}

/// The most a form with a clip of `max_audio_bytes` may be.
fn form_limit(max_audio_bytes: usize) -> usize {
    max_audio_bytes.saturating_add(FORM_OVERHEAD_BYTES)
}

/// The most an upload route reads of a body: twice what a form may be, so that a form that is
/// refused for its size can still be read to its end (and the refusal be heard), up to a bound.
pub fn route_body_limit(max_audio_bytes: usize) -> usize {
    form_limit(max_audio_bytes).saturating_mul(2)
}

/// Reads the form: `audio_field` as bytes (at most `max_audio_bytes`), `text_fields` as text.
/// A body that declares a length over the form's limit is refused without being parsed.
async fn read_form(
    headers: &HeaderMap,
    mut multipart: Multipart,
    audio_field: &str,
    text_fields: TextFields<'_>,
    max_audio_bytes: usize,
) -> Result<UploadForm, ApiError> {
    let limit = form_limit(max_audio_bytes);
    let declared = declared_length(headers);
    let read = match declared {
        Some(length) if length > limit as u64 => {
            Err(ApiError::payload_too_large(limit).with_param(audio_field))
        }
        _ => {
            read_fields(
                &mut multipart,
                audio_field,
                &text_fields,
                max_audio_bytes,
                limit,
            )
            .await
        }
    };
    if read.is_err()
        && declared.is_none_or(|length| length <= route_body_limit(max_audio_bytes) as u64)
    {
        discard_rest(&mut multipart).await;
    }
    read
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

async fn read_fields(
    multipart: &mut Multipart,
    audio_field: &str,
    text_fields: &TextFields<'_>,
    max_audio_bytes: usize,
    form_limit: usize,
) -> Result<UploadForm, ApiError> {
    let body_error = |error| body_error(error, audio_field, form_limit);
    let mut form = UploadForm::default();
    let mut total = 0usize;
    while let Some(field) = multipart.next_field().await.map_err(body_error)? {
        let Some(name) = field.name().map(str::to_string) else {
            continue;
        };
        let twice = || ApiError::invalid(&name, format!("'{name}' was sent twice."));
        if name == audio_field {
            if form.audio.is_some() {
                return Err(twice());
            }
            let bytes =
                read_bounded(field, &name, max_audio_bytes, audio_field, form_limit).await?;
            total += bytes.len();
            form.audio = Some(bytes);
        } else if text_fields.takes(&name) {
            if form.texts.contains_key(&name) {
                return Err(twice());
            }
            let bytes = read_bounded(field, &name, MAX_TEXT_BYTES, audio_field, form_limit).await?;
            total += bytes.len();
            let text = String::from_utf8(bytes)
                .map_err(|_| ApiError::invalid(&name, format!("'{name}' is not UTF-8 text.")))?;
            form.texts.insert(name, text);
        }
        // Other fields are dropped unread: `next_field` skips what is left of them.
        if total > form_limit {
            // Many text fields, each under its own limit, that together are not a form.
            return Err(ApiError::payload_too_large(form_limit).with_param(audio_field));
        }
    }
    Ok(form)
}

/// A field's bytes, refused once they pass `limit`, before more is buffered.
async fn read_bounded(
    mut field: Field<'_>,
    name: &str,
    limit: usize,
    audio_field: &str,
    form_limit: usize,
) -> Result<Vec<u8>, ApiError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|error| body_error(error, audio_field, form_limit))?
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

/// Reads what is left of a refused body and throws it away, within the route's body limit and
/// [`DRAIN_TIME`]; a body that passes either is left to the connection's close.
async fn discard_rest(multipart: &mut Multipart) {
    let drain = async {
        while let Ok(Some(mut field)) = multipart.next_field().await {
            while let Ok(Some(_)) = field.chunk().await {}
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
}

/// A body that cannot be read as a form, or (past the route's limit) is too large.
fn body_error(error: MultipartError, audio_field: &str, form_limit: usize) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::payload_too_large(form_limit).with_param(audio_field)
    } else {
        ApiError::invalid(
            "body",
            format!("The form could not be read: {}", error.body_text()),
        )
        .with_code("invalid_body")
    }
}
