//! The HTTP surface: OpenAI's audio routes plus health and metrics.
//!
//! This module wires routes to thin handlers and wraps them in the cross-cutting layers:
//! request ids, tracing, CORS, body limits, per-route metrics, API-key auth on `/v1/*` and the
//! count of requests in flight that shutdown waits for. Handlers parse and format; validation
//! and the work happen in [`crate::speech`].

mod auth;
mod error;
mod extract;
mod info;
mod playground;
mod shutdown;
mod speech;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio_util::task::TaskTracker;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::cors::{AllowOrigin, Any, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnFailure, TraceLayer};

pub use error::ApiError;
pub use speech::SpeechRequest;

use crate::config::Settings;
use crate::metrics as m;
use crate::speech::SpeechService;

/// Largest accepted request body. Inputs are at most a few thousand characters; a megabyte
/// leaves room for any JSON escaping while stopping abuse early.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// What every handler can reach.
pub struct AppState {
    pub settings: Settings,
    pub speech: SpeechService,
    pub metrics: PrometheusHandle,
    pub started: Instant,
    pub device: String,
    ready: AtomicBool,
    draining: AtomicBool,
    /// One token per request, held until its response body is finished or dropped.
    in_flight: TaskTracker,
}

impl AppState {
    pub fn new(
        settings: Settings,
        speech: SpeechService,
        metrics: PrometheusHandle,
        device: String,
    ) -> Self {
        Self {
            settings,
            speech,
            metrics,
            started: Instant::now(),
            device,
            ready: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            in_flight: TaskTracker::new(),
        }
    }

    /// Marks the server ready: `/health` answers 200 from now on.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Marks the server as shutting down: from now on `/health` and `/health/ready` answer 503
    /// `draining` (load balancers stop sending) and new speech requests are refused.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Resolves once no request is in flight any more, response bodies (streams) included.
    pub async fn requests_finished(&self) {
        self.in_flight.close();
        self.in_flight.wait().await;
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    let v1 = Router::new()
        .route(
            "/v1/audio/speech",
            post(speech::create_speech).layer(middleware::from_fn_with_state(
                state.clone(),
                shutdown::refuse_while_draining,
            )),
        )
        .route("/v1/audio/voices", get(info::list_voices))
        .route("/v1/audio/cache", delete(info::clear_cache))
        .route("/v1/voices/reload", post(info::reload_voices))
        .route("/v1/models", get(info::list_models))
        .route("/v1/models/{id}", get(info::get_model))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ));

    let request_id_span = |request: &Request| {
        let id = request
            .headers()
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-");
        tracing::info_span!("request", id = %id, method = %request.method(), uri = %request.uri())
    };

    Router::new()
        .merge(v1)
        .merge(playground::routes())
        .route("/health", get(info::health))
        .route("/health/live", get(info::live))
        .route("/health/ready", get(info::ready))
        .route("/metrics", get(info::metrics))
        .fallback(|| async { ApiError::not_found("Unknown route.") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(middleware::from_fn(record_metrics))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            shutdown::track_in_flight,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(cors(&state.settings.cors_origins))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_id_span)
                // Expected 5xx answers (503 while starting, 504 on timeouts) are not faults;
                // real internal errors are logged by `record_metrics`.
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .with_state(state)
}

fn cors(origins: &[String]) -> CorsLayer {
    let layer = CorsLayer::new()
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers(Any)
        .expose_headers(Any);
    if origins.iter().any(|o| o == "*") {
        layer.allow_origin(Any)
    } else {
        let list: Vec<HeaderValue> = origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        layer.allow_origin(AllowOrigin::list(list))
    }
}

/// Counts every request by route template (never the raw path: unbounded label values would
/// grow the metrics without limit) and status.
async fn record_metrics(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched".to_string(), |p| p.as_str().to_string());
    let started = Instant::now();
    let response = next.run(request).await;
    if response.status() == axum::http::StatusCode::INTERNAL_SERVER_ERROR {
        tracing::error!(route = %route, "request failed with an internal error");
    }
    let status = response.status().as_u16().to_string();
    metrics::counter!(m::REQUESTS_TOTAL, "protocol" => "http", "route" => route.clone(), "status" => status).increment(1);
    metrics::histogram!(m::REQUEST_DURATION_SECONDS, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}
