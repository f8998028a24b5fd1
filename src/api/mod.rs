//! The HTTP surface: OpenAI's audio routes plus health and metrics.
//!
//! This module wires routes to thin handlers and wraps them in the cross-cutting layers:
//! request ids, tracing, CORS, body limits, per-route metrics, API-key auth on `/v1/*`
//! (except the model and voice lists with `--public-discovery`) and the count of requests in
//! flight that shutdown waits for. Routes are registered with
//! their OpenAPI description (`GET /openapi.json`), so the document lists exactly what is
//! served. Handlers parse and format; validation and the work happen in [`crate::speech`].
//!
//! What the handlers and the document both need (the answers' descriptions, the request
//! fields' schemas, header names) lives in `schema` and `headers`, which import no handler:
//! imports among these files run one way, from handlers and document builder down to them.

mod admin;
mod auth;
mod clone;
mod discovery;
mod error;
mod extract;
mod headers;
mod lexicon;
mod multipart;
mod openapi;
mod phonemize;
mod playground;
mod probes;
mod profiles;
mod schema;
mod scrape;
mod script;
mod shutdown;
mod speech;
mod sse;
mod stream;
mod subtitles;
mod timestamps;
mod words;

use std::any::Any as PanicPayload;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Extension, MatchedPath, Request};
use axum::http::{HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::task::TaskTracker;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, Any, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::ApiError;
pub use speech::SpeechRequest;

use headers::REQUEST_ID;

use crate::config::Settings;
use crate::metrics as m;
use crate::speech::{Dialogues, SpeechService};

/// Largest accepted request body. Inputs are at most a few thousand characters; a megabyte
/// leaves room for any JSON escaping while stopping abuse early.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler can reach.
pub struct AppState {
    pub settings: Settings,
    pub speech: SpeechService,
    /// Multi-speaker scripts, read through `speech` a bounded number at once.
    pub dialogues: Dialogues,
    pub metrics: PrometheusHandle,
    pub started: Instant,
    pub device: String,
    ready: AtomicBool,
    draining: AtomicBool,
    /// One token per request, held until its response body is finished or dropped.
    in_flight: TaskTracker,
    streams: stream::Streams,
}

impl AppState {
    pub fn new(
        settings: Settings,
        speech: SpeechService,
        metrics: PrometheusHandle,
        device: String,
    ) -> Self {
        Self {
            streams: stream::Streams::new(&settings),
            dialogues: Dialogues::new(
                speech.clone(),
                settings.max_scripts,
                settings.max_input_chars,
            ),
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
        // WebSocket streams speak what they have received and close (they count as in flight).
        self.streams.close_all();
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
    let (routes, api) = documented_routes(&state).split_for_parts();
    let document = openapi::Document::new(api, &state.settings);

    let request_id_span = |request: &Request| {
        let id = request
            .headers()
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-");
        tracing::info_span!("request", id = %id, method = %request.method(), uri = %request.uri())
    };

    routes
        .fallback(|| async { ApiError::not_found("Unknown route.") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        // Innermost, so that a panic becomes a response before the layers around it: its 500
        // is counted by `record_metrics` and its in-flight token is released as usual.
        .layer(CatchPanicLayer::custom(answer_panic))
        // Around the panic's answer too, so that every 500 names the request's id.
        .layer(middleware::from_fn(error::keep_request_id))
        .layer(Extension(document))
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

/// Every route, with its documentation. The key check is put in front of whole groups by
/// [`guarded`], which also writes it into the document, so the two cannot disagree.
fn documented_routes(state: &Arc<AppState>) -> OpenApiRouter<Arc<AppState>> {
    // New speech is refused once shutdown has begun; everything else answers to the end.
    // A clip to clone is larger than any JSON body; its own limit is checked as it arrives.
    let uploads = OpenApiRouter::default()
        .routes(routes!(clone::create_cloned_speech))
        .route_layer(DefaultBodyLimit::max(multipart::route_body_limit(
            multipart::upload_limit(state),
        )));
    let speech = OpenApiRouter::default()
        .routes(routes!(speech::create_speech))
        .merge(uploads)
        .routes(routes!(script::create_script))
        .routes(routes!(stream::open))
        .routes(routes!(timestamps::create_timestamped_speech))
        .routes(routes!(timestamps::create_captioned_speech))
        .routes(routes!(subtitles::create_subtitles))
        .routes(routes!(phonemize::phonemize))
        .routes(routes!(phonemize::dev_phonemize))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            shutdown::refuse_while_draining,
        ));
    let work = speech
        .routes(routes!(
            lexicon::get_lexicon,
            lexicon::put_lexicon,
            lexicon::delete_lexicon
        ))
        .routes(routes!(admin::clear_cache))
        .routes(routes!(admin::reload_voices))
        .merge(profile_routes(state));
    // What a client lists before it speaks; Open WebUI asks for these without a key.
    let discovery = OpenApiRouter::default()
        .routes(routes!(discovery::list_models))
        .routes(routes!(discovery::get_model))
        .routes(routes!(discovery::list_audio_models))
        .routes(routes!(discovery::list_voices));
    let discovery = if state.settings.public_discovery {
        discovery
    } else {
        guarded(discovery, state)
    };
    let open = OpenApiRouter::default()
        .routes(routes!(probes::health))
        .routes(routes!(probes::live))
        .routes(routes!(probes::ready))
        .routes(routes!(scrape::metrics))
        .routes(routes!(openapi::document))
        .merge(playground::routes());
    guarded(work, state).merge(discovery).merge(open)
}

/// The voice profile routes, whose forms carry a clip of up to `--max-upload-bytes`.
fn profile_routes(state: &Arc<AppState>) -> OpenApiRouter<Arc<AppState>> {
    let body_limit = multipart::route_body_limit(multipart::upload_limit(state));
    OpenApiRouter::default()
        .routes(routes!(profiles::list_voices))
        .routes(routes!(profiles::create_profile))
        .routes(routes!(
            profiles::get_profile,
            profiles::update_profile,
            profiles::delete_profile
        ))
        .routes(routes!(profiles::get_profile_audio))
        .route_layer(DefaultBodyLimit::max(body_limit))
}

/// `group` behind the API-key check, documented as needing the key. Without configured keys
/// there is no check, and the document says no key is needed.
fn guarded(
    group: OpenApiRouter<Arc<AppState>>,
    state: &Arc<AppState>,
) -> OpenApiRouter<Arc<AppState>> {
    if state.settings.api_keys.is_empty() {
        return group;
    }
    let mut group = group.route_layer(middleware::from_fn_with_state(
        state.clone(),
        auth::require_api_key,
    ));
    openapi::require_key(group.get_openapi_mut());
    group
}

fn cors(origins: &[String]) -> CorsLayer {
    let layer = CorsLayer::new()
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::OPTIONS,
        ])
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

/// A handler's panic as an OpenAI-shaped 500, instead of a dropped connection that a client
/// cannot tell from a network fault. Counted and logged: a panic is a bug to fix.
fn answer_panic(panic: Box<dyn PanicPayload + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)");
    tracing::error!(panic = %message, "a handler panicked");
    metrics::counter!(m::PANICS).increment(1);
    ApiError::panicked().into_response()
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
