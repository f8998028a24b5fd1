//! API-key authentication for `/v1/*`.
//!
//! When keys are configured, a request must carry `Authorization: Bearer <key>`. Keys are
//! compared in constant time, and every configured key is compared, so response timing tells
//! an attacker nothing about how much of a guess was right or which key it was close to.

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
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .unwrap_or("");
    if key_matches(keys, presented) {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
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
    use super::key_matches;

    #[test]
    fn only_exact_keys_match() {
        let keys = vec!["secret-one".to_string(), "secret-two".to_string()];
        assert!(key_matches(&keys, "secret-two"));
        assert!(!key_matches(&keys, "secret"));
        assert!(!key_matches(&keys, "secret-one "));
        assert!(!key_matches(&keys, ""));
    }
}
