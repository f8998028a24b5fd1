//! The one error type every HTTP answer goes through, in OpenAI's shape.
//!
//! OpenAI clients parse `{"error":{"message","type","param","code"}}`; anything else (axum's
//! plain-text rejections included) makes them throw unhelpful exceptions. Handlers and
//! extractors return [`ApiError`]; nothing else builds an error response. The pipeline's
//! [`SpeechError`] becomes a status code here, in one `From`, and nowhere else.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::audio::upload::UploadError;
use crate::profiles::ProfileError;
use crate::speech::{chain, DialogueError, InvalidReason, SpeechError};

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    retry_after: Option<Duration>,
}

/// The body of every error answer; also its schema in `/openapi.json`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"error": {"message": "'speed' must be between 0.25 and 4, got 9.", "type": "invalid_request_error", "param": "speed", "code": "invalid_value"}}))]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Serialize, ToSchema)]
struct ErrorDetail {
    /// What went wrong, for a person to read.
    message: String,
    /// OpenAI's error class: `invalid_request_error`, `rate_limit_error`, `timeout_error` or
    /// `server_error`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// The request field at fault, as the client sent it (`voice`, `speed`, ...), if one is.
    param: Option<String>,
    /// A machine-readable reason (`invalid_value`, `voice_not_found`, `invalid_api_key`, ...).
    code: Option<&'static str>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
        }
    }

    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// 400 for a request the client must change.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
            .with_param(param)
            .with_code("invalid_value")
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "Incorrect or missing API key. Send it as 'Authorization: Bearer <key>'.",
        )
        .with_code("invalid_api_key")
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "invalid_request_error", message).with_code("not_found")
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "Method not allowed on this route.",
        )
        .with_code("method_not_allowed")
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("Request body is larger than the limit of {limit} bytes."),
        )
        .with_code("payload_too_large")
    }

    /// A plain HTTP request to a WebSocket route (`status` is the handshake's complaint).
    pub fn not_a_websocket(status: StatusCode, message: impl Into<String>) -> Self {
        Self::new(status, "invalid_request_error", message).with_code("websocket_required")
    }

    pub fn unsupported_media_type() -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            "Expected a JSON body with 'Content-Type: application/json'.",
        )
        .with_code("unsupported_media_type")
    }

    /// 415 for an upload route sent something other than a form.
    pub fn not_multipart(detail: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            format!(
                "Expected a form: 'multipart/form-data' (with a file) or \
                 'application/x-www-form-urlencoded' (text fields only): {detail}"
            ),
        )
        .with_code("unsupported_media_type")
    }

    /// 429: the queue is full; the client should come back later.
    pub fn overloaded(retry_after: Duration) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "The server is at capacity: too many requests are waiting. Retry shortly.",
        )
        .with_code("rate_limit_exceeded");
        e.retry_after = Some(retry_after);
        e
    }

    pub fn timeout(seconds: u64) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout_error",
            format!("Speech synthesis did not finish within {seconds} s."),
        )
        .with_code("timeout")
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message).with_code("unavailable")
    }

    /// 500 for a fault of the server's own, `cause`. Its words may name files and internals,
    /// so they go to the log, with every cause below them; the client reads "internal error"
    /// and the request's id, which finds that log line.
    pub fn internal(cause: &(dyn std::error::Error + 'static)) -> Self {
        tracing::error!(error = %chain(cause), "internal error");
        Self::internal_unexplained()
    }

    /// 500 for a handler that panicked; the panic was logged where it was caught.
    pub fn panicked() -> Self {
        Self::internal_unexplained()
    }

    fn internal_unexplained() -> Self {
        let message = match REQUEST_ID.try_with(Clone::clone) {
            Ok(id) => format!("internal error (request id {id}); the cause has been logged."),
            Err(_) => "internal error; the cause has been logged.".to_string(),
        };
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
            .with_code("internal_error")
    }
}

tokio::task_local! {
    /// The id of the request being answered (`x-request-id`), for the 500s that name it.
    static REQUEST_ID: String;
}

/// Middleware that lets an internal error name its request's id (set by the layer outside).
pub(super) async fn keep_request_id(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let id = request
        .headers()
        .get(super::headers::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    REQUEST_ID.scope(id, next.run(request)).await
}

impl From<SpeechError> for ApiError {
    fn from(e: SpeechError) -> Self {
        let message = e.to_string();
        match e {
            SpeechError::Invalid { param, reason, .. } => {
                Self::invalid(param, message).with_code(match reason {
                    InvalidReason::Empty => "empty_input",
                    InvalidReason::TooLong => "string_above_max_length",
                    InvalidReason::Unsupported | InvalidReason::OutOfRange => "invalid_value",
                    InvalidReason::Malformed => "invalid_ssml",
                })
            }
            SpeechError::UnknownModel(_) => {
                Self::invalid("model", message).with_code("model_not_found")
            }
            SpeechError::UnknownVoice(_) => {
                Self::invalid("voice", message).with_code("voice_not_found")
            }
            SpeechError::Overloaded { retry_after } => Self::overloaded(retry_after),
            SpeechError::BatcherStopped => Self::unavailable(message).with_code("batcher_stopped"),
            SpeechError::ShuttingDown => Self::unavailable(message).with_code("shutting_down"),
            SpeechError::InvalidLexicon(e) => Self::invalid(&e.field, e.message),
            SpeechError::LexiconEntryNotFound(_) => Self::not_found(message),
            SpeechError::VoiceLoad(_)
            | SpeechError::Engine(_)
            | SpeechError::Encoding(_)
            | SpeechError::LexiconStorage(_) => Self::internal(&e),
        }
    }
}

impl From<DialogueError> for ApiError {
    fn from(e: DialogueError) -> Self {
        let message = e.to_string();
        match e {
            DialogueError::Invalid { param, .. } => Self::invalid(&param, message),
            DialogueError::Busy { retry_after, .. } => {
                let mut busy = Self::overloaded(retry_after);
                busy.message = message;
                busy
            }
            // The line's own failure decides the status; the answer names the line, unless
            // the server failed: then it says no more than any internal error.
            DialogueError::Line { param, source, .. } => {
                let fault = source.is_fault();
                let mut line = Self::from(source);
                if !fault {
                    line.message = message;
                }
                line.with_param(param)
            }
            DialogueError::Speech(e) => Self::from(e),
        }
    }
}

/// An uploaded reference clip that cannot be used; always the form's `ref_audio` field.
impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> Self {
        let message = format!("Invalid 'ref_audio': {}", chain(&e));
        let refused = |code| Self::invalid("ref_audio", message.clone()).with_code(code);
        match e {
            UploadError::UnknownFormat | UploadError::UnsupportedCodec { .. } => Self::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_request_error",
                message.clone(),
            )
            .with_param("ref_audio")
            .with_code("unsupported_audio_format"),
            UploadError::Empty => refused("empty_file"),
            UploadError::Undecodable(_) | UploadError::Corrupt(_) => refused("invalid_audio"),
            UploadError::SampleRateTooLow { .. } | UploadError::SampleRateTooHigh { .. } => {
                refused("invalid_sample_rate")
            }
            UploadError::TooManyChannels { .. } => refused("too_many_channels"),
            UploadError::TooShort { .. } => refused("audio_too_short"),
            UploadError::TooLong => refused("audio_too_long"),
        }
    }
}

impl From<ProfileError> for ApiError {
    fn from(e: ProfileError) -> Self {
        let message = e.to_string();
        match e {
            ProfileError::InvalidId(_) => Self::invalid("profile_id", message),
            ProfileError::Exists(_) => {
                Self::new(StatusCode::CONFLICT, "invalid_request_error", message)
                    .with_param("profile_id")
                    .with_code("profile_exists")
            }
            ProfileError::NotFound(_) => Self::not_found(message)
                .with_param("profile_id")
                .with_code("profile_not_found"),
            ProfileError::InvalidFingerprint(_) | ProfileError::Storage { .. } => {
                Self::internal(&e)
            }
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl ApiError {
    /// A stream that failed after its first bytes: the status is sent already, so only the
    /// body can tell (an NDJSON line).
    pub fn stream_failed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
            .with_code("stream_failed")
    }

    /// The `{"error": …}` body this error is answered with.
    pub fn body(self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                message: self.message,
                kind: self.kind,
                param: self.param,
                code: self.code,
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = self.retry_after;
        let status = self.status;
        let mut response = (status, Json(self.body())).into_response();
        if let Some(after) = retry_after {
            let secs = after.as_secs().max(1).to_string();
            if let Ok(value) = HeaderValue::from_str(&secs) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_batcher_is_unavailable_not_overloaded() {
        let e = ApiError::from(SpeechError::BatcherStopped);
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.code, Some("batcher_stopped"));
        assert!(e.message.contains("stopped"), "{}", e.message);
    }

    #[test]
    fn overload_carries_its_retry_after() {
        let response = ApiError::from(SpeechError::Overloaded {
            retry_after: Duration::from_secs(7),
        })
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "7");
    }

    #[test]
    fn invalid_requests_name_their_parameter() {
        let e = ApiError::from(SpeechError::Invalid {
            param: "speed",
            reason: InvalidReason::OutOfRange,
            message: "bad".into(),
        });
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.param.as_deref(), Some("speed"));
        assert_eq!(e.code, Some("invalid_value"));
    }
}
