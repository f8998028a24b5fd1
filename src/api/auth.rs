//! API-key authentication for `/v1/*`.
//!
//! When keys are configured, a request must carry `Authorization: Bearer <key>`. Keys are
//! compared in constant time, and every configured key is compared, so response timing tells
//! an attacker nothing about how much of a guess was right or which key it was close to.
//! The scheme name is case-insensitive (RFC 7235): `bearer`, `Bearer` and `BEARER` all work.
//! Browsers cannot set headers on a WebSocket, so a WebSocket handshake may instead offer the
//! key as a subprotocol, `omnivoice-api-key.<key>` (see [`super::stream::SUBPROTOCOL`]);
//! unlike a query parameter, it never shows up in URLs, logs or proxies' access lines.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::stream::KEY_PROTOCOL_PREFIX;
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
    let headers = request.headers();
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .or_else(|| websocket_key(headers))
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

/// The key a WebSocket handshake offers as the subprotocol `omnivoice-api-key.<key>`.
fn websocket_key(headers: &HeaderMap) -> Option<&str> {
    let upgrade = headers.get(header::UPGRADE)?.to_str().ok()?;
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return None;
    }
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|protocol| protocol.trim().strip_prefix(KEY_PROTOCOL_PREFIX))
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
    use super::{bearer_token, key_matches, websocket_key};
    use axum::http::{header, HeaderMap, HeaderValue};

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

    #[test]
    fn a_websocket_handshake_may_offer_the_key_as_a_subprotocol() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("omnivoice, omnivoice-api-key.k-1"),
        );
        assert_eq!(websocket_key(&headers), None, "only on an upgrade");
        headers.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        assert_eq!(websocket_key(&headers), Some("k-1"));
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("omnivoice"),
        );
        assert_eq!(websocket_key(&headers), None);
    }
}
