//! JSON body and query extractors whose every rejection is an OpenAI-shaped error.
//!
//! axum's `Json` answers bad bodies with plain text that OpenAI clients cannot parse. This one
//! checks the content type, reads the body under the router's size limit and deserializes with
//! the path of the offending field, so a client learns which `param` was wrong.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;

use super::ApiError;

pub struct ApiJson<T>(pub T);

/// A query string, as axum's `Query` reads it, refused in OpenAI's shape.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|query| ApiQuery(query.0))
            .map_err(|rejection| ApiError::invalid("query", rejection.body_text()))
    }
}

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let body = json_body(req, state).await?;
        parse(&body).map(ApiJson)
    }
}

/// One JSON body read as two types: the request a route shares with others (`T`) and the
/// fields only that route has (`E`); each ignores the other's fields. serde's `flatten` would
/// make one type of the two, but it reports a bad field inside the shared part without its
/// path, so the error could no longer name its `param`.
pub struct ApiJsonWith<T, E>(pub T, pub E);

impl<S, T, E> FromRequest<S> for ApiJsonWith<T, E>
where
    S: Send + Sync,
    T: DeserializeOwned,
    E: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let body = json_body(req, state).await?;
        Ok(ApiJsonWith(parse(&body)?, parse(&body)?))
    }
}

/// The body of a JSON request, under the router's size limit.
async fn json_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json"
                || (mime.starts_with("application/") && mime.ends_with("+json"))
        })
        .unwrap_or(false);
    if !is_json {
        return Err(ApiError::unsupported_media_type());
    }
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::payload_too_large(super::MAX_BODY_BYTES)
        } else {
            ApiError::invalid(
                "body",
                format!("Could not read the request body: {rejection}"),
            )
            .with_code("invalid_body")
        }
    })
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    // serde would also read a struct from an array of its fields in order; no client means that.
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(ApiError::invalid(
            "body",
            "The request body must be a JSON object, as in {\"model\": ..., \"input\": ...}.",
        )
        .with_code("invalid_type"));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() || inner.is_io() {
            return ApiError::invalid(
                "body",
                format!("We could not parse the JSON body of your request: {inner}"),
            )
            .with_code("invalid_json");
        }
        let message = inner.to_string();
        let param = match (missing_field(&message), path.as_str()) {
            (Some(field), ".") => field.to_string(),
            (Some(field), _) => format!("{path}.{field}"),
            // The body itself is not an object.
            (None, ".") => "body".to_string(),
            (None, _) => path,
        };
        let code = if message.starts_with("missing field") {
            "missing_required_parameter"
        } else if message.starts_with("unknown variant") {
            "invalid_value"
        } else {
            "invalid_type"
        };
        ApiError::invalid(
            &param,
            format!("Invalid value for '{param}': {}", strip_position(&message)),
        )
        .with_code(code)
    })?;
    deserializer.end().map_err(|e| {
        ApiError::invalid("body", format!("Unexpected data after the JSON body: {e}"))
            .with_code("invalid_json")
    })?;
    Ok(value)
}

fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// serde_json appends "at line 1 column 20": noise for a client that sent one line of JSON.
fn strip_position(message: &str) -> &str {
    message
        .rsplit_once(" at line ")
        .map_or(message, |(head, _)| head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Body {
        model: String,
        speed: Option<f32>,
    }

    #[test]
    fn errors_name_the_parameter() {
        let missing = parse::<Body>(br#"{"speed": 1.0}"#).unwrap_err();
        assert_eq!(missing.param.as_deref(), Some("model"));
        assert_eq!(missing.code, Some("missing_required_parameter"));
        let wrong = parse::<Body>(br#"{"model": "m", "speed": "fast"}"#).unwrap_err();
        assert_eq!(wrong.param.as_deref(), Some("speed"));
        assert!(!wrong.message.contains("line 1"), "{}", wrong.message);
        for not_an_object in [&br#"["m", 1.0]"#[..], b"42", b""] {
            let error = parse::<Body>(not_an_object).unwrap_err();
            assert_eq!(error.param.as_deref(), Some("body"));
        }
        let broken = parse::<Body>(br#"{"model": "#).unwrap_err();
        assert_eq!(broken.code, Some("invalid_json"));
        assert!(
            parse::<Body>(br#"{"model": "m", "extra": [1, 2]}"#).is_ok(),
            "unknown fields are ignored"
        );
    }
}
