//! API-key authentication for `/v1/*`.
//!
//! When keys are configured, a request must carry `Authorization: Bearer <key>`. Keys are
//! compared in constant time, and every configured key is compared, so response timing tells
//! an attacker nothing about how much of a guess was right or which key it was close to.
//! The scheme name is case-insensitive (RFC 7235): `bearer`, `Bearer` and `BEARER` all work.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::{ApiError, AppState};

pub async fn require_api_key(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let keys = &state.settings.api_keys;
    if keys.is_empty() {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .unwrap_or("");
    if key_matches(keys, presented) {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

/// The token of an `Authorization: Bearer <token>` value, whatever the scheme's case.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

fn key_matches(keys: &[String], presented: &str) -> bool {
    let mut matched = subtle::Choice::from(0u8);
    for key in keys {
        matched |= key.as_bytes().ct_eq(presented.as_bytes());
    }
    !presented.is_empty() && bool::from(matched)
}

#[cfg(test)]
mod tests {
    use super::{bearer_token, key_matches};

    #[test]
    fn the_scheme_is_case_insensitive() {
        for value in ["Bearer k", "bearer k", "BEARER k", "BeArEr   k "] {
            assert_eq!(bearer_token(value), Some("k"), "{value}");
        }
        assert_eq!(bearer_token("Basic k"), None);
        assert_eq!(bearer_token("Bearerk"), None);
    }

    #[test]
    fn only_exact_keys_match() {
        let keys = vec!["secret-one".to_string(), "secret-two".to_string()];
        assert!(key_matches(&keys, "secret-two"));
        assert!(!key_matches(&keys, "secret"));
        assert!(!key_matches(&keys, "secret-one "));
        assert!(!key_matches(&keys, ""));
    }
}
