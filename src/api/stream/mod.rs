//! `GET /v1/audio/speech/stream`: text in over a WebSocket as a language model writes it,
//! audio out as soon as each sentence is complete.
//!
//! An HTTP request needs the whole text up front; an assistant that speaks while its model is
//! still writing would wait for the last token. Here the client sends text pieces cut
//! anywhere, the pipeline's [`LiveText`](crate::speech::LiveText) (as for Wyoming) cuts them
//! into the sentences the whole text would make, and its audio comes back while later pieces
//! are still arriving. `message` is the wire format, `session` one connection; this file is
//! the upgrade, the browser-friendly way to send the API key, and the bound on connections.

mod message;
mod session;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{close_code, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::error::ErrorBody;
use super::{ApiError, AppState, MAX_BODY_BYTES, REQUEST_ID};
use crate::config::Settings;
use crate::metrics as m;
use message::Refusal;

/// The subprotocol the server selects when a client offers it. Browsers cannot set an
/// `Authorization` header on a WebSocket, so they offer this together with
/// [`KEY_PROTOCOL_PREFIX`]`<key>` (as in `new WebSocket(url, ["omnivoice",
/// "omnivoice-api-key.<key>"])`); a browser needs the server to select one of the offered
/// protocols, and the key's is never echoed back.
pub const SUBPROTOCOL: &str = "omnivoice";
/// A subprotocol starting with this carries the API key (see [`SUBPROTOCOL`]).
pub const KEY_PROTOCOL_PREFIX: &str = "omnivoice-api-key.";

/// How long one message may take to reach a client before it counts as gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The open streams of a server: a bound on how many, and a way to end them all.
pub(super) struct Streams {
    permits: Arc<Semaphore>,
    limits: session::Limits,
    closing: CancellationToken,
}

impl Streams {
    pub fn new(settings: &Settings) -> Self {
        let max = settings.ws_max_connections.min(Semaphore::MAX_PERMITS);
        Self {
            permits: Arc::new(Semaphore::new(max)),
            limits: session::Limits {
                idle_timeout: Duration::from_secs(settings.ws_idle_timeout_s),
                max_pending_chars: settings.max_input_chars,
                write_timeout: WRITE_TIMEOUT,
            },
            closing: CancellationToken::new(),
        }
    }

    /// Asks every stream to finish for shutdown: what was received is still spoken, then each
    /// closes with 1001. Each holds an in-flight token meanwhile, so shutdown waits for them.
    pub fn close_all(&self) {
        self.closing.cancel();
    }
}

/// Stream text in, audio out (WebSocket)
///
/// A WebSocket handshake. The client sends JSON text messages: the settings first (`model`,
/// `voice`, `response_format` (default `pcm`), `speed`, `seed`, `noise_scale`, `noise_w`,
/// `max_wait_ms`), then `{"text": "…"}` pieces cut anywhere, `{"flush": true}` to speak what is
/// buffered, `{"text": ""}` to end. The server sends each sentence's audio as binary messages
/// (one continuous file in `response_format`) and JSON `start`, `sentence`, `flushed`, `done`
/// and `error` messages; every refusal closes with a code (1003, 1007, 1008, 1009, 1011,
/// 1013) and a reason. Browsers may send the key as the subprotocol `omnivoice-api-key.<key>`
/// beside `omnivoice`.
#[utoipa::path(get, path = "/v1/audio/speech/stream", tag = "speech",
    responses(
        (status = 101, description = "Switching to the WebSocket protocol (subprotocol `omnivoice` when offered)"),
        (status = 400, description = "Not a WebSocket handshake", body = ErrorBody),
        (status = 426, description = "The connection cannot be upgraded", body = ErrorBody),
        (status = 503, description = "The server is shutting down", body = ErrorBody),
    ))]
// Auth happened before, in the `/v1` middleware (a bearer header or the key subprotocol). A
// connection over the limit is upgraded anyway and closed with 1013 and a reason, which a
// browser can show; an HTTP error would reach browser code only as a nameless failure.
pub(super) async fn open(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|rejection| {
        ApiError::not_a_websocket(
            rejection.status(),
            format!(
                "This route speaks WebSocket only: {}",
                rejection.body_text()
            ),
        )
    })?;
    let streams = &state.streams;
    let permit = if streams.closing.is_cancelled() {
        None
    } else {
        streams.permits.clone().try_acquire_owned().ok()
    };
    let speech = state.speech.clone();
    let limits = streams.limits.clone();
    let closing = streams.closing.clone();
    // Upgraded connections are no longer the HTTP server's: the session holds its own token.
    let in_flight = state.in_flight.token();
    let request_id = headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let span = tracing::info_span!("ws_stream", id = %request_id);
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    Ok(upgrade
        .protocols([SUBPROTOCOL])
        .max_message_size(MAX_BODY_BYTES)
        .max_frame_size(MAX_BODY_BYTES)
        .on_upgrade(move |socket| {
            async move {
                let Some(permit) = permit else {
                    let refusal = if closing.is_cancelled() {
                        Refusal::new(
                            close_code::AWAY,
                            "shutting_down",
                            "The server is shutting down.",
                        )
                    } else {
                        Refusal::new(
                            close_code::AGAIN,
                            "too_many_streams",
                            "Too many streams are open; try again later.",
                        )
                    };
                    count(refusal.close_code);
                    session::turn_away(socket, refusal).await;
                    return;
                };
                tracing::debug!(%origin, "stream opened");
                let code = session::serve(socket, speech, limits, closing).await;
                tracing::debug!(code, "stream closed");
                count(code);
                drop((permit, in_flight));
            }
            .instrument(span)
        }))
}

/// Streams by how they closed: the request counter, `protocol="websocket"`, the close code as
/// the status.
fn count(close_code: u16) {
    metrics::counter!(m::REQUESTS_TOTAL, "protocol" => "websocket",
        "route" => "/v1/audio/speech/stream", "status" => close_code.to_string())
    .increment(1);
}
