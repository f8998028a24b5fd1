//! What shutdown needs from the HTTP layer: a count of requests in flight, and refusing new
//! speech while the server drains.
//!
//! A request is in flight until its response body is finished or dropped, so a streamed answer
//! counts until its last chunk is sent: shutdown waits for exactly the work clients are still
//! receiving, and no longer than `--shutdown-timeout-s`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::{ApiError, AppState};

/// Counts the request as in flight until its response body is done.
pub async fn track_in_flight(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let token = state.in_flight.token();
    next.run(request).await.map(|body| {
        Body::new(Tracked {
            body,
            _token: token,
        })
    })
}

/// New speech requests get 503 once shutdown has begun; requests already running finish.
pub async fn refuse_while_draining(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if state.is_draining() {
        return ApiError::unavailable("The server is shutting down; send the request elsewhere.")
            .into_response();
    }
    next.run(request).await
}

/// A response body that holds an in-flight token until it is finished or dropped. It passes
/// the size hint through, so a whole body keeps its Content-Length.
struct Tracked {
    body: Body,
    _token: TaskTrackerToken,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
