//! `GET /metrics`: the Prometheus scrape of every `omnivoice_*` series ([`crate::metrics`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::AppState;

/// Prometheus metrics
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition (`omnivoice_*`)",
        body = String, content_type = "text/plain")))]
pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    // Gauges that are cheap to read are refreshed at scrape time rather than on every change.
    let _ = state.speech.stats().await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}
