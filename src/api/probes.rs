//! Probes for orchestrators and load balancers: `GET /health/live`, `GET /health/ready` and
//! `GET /health` (readiness with live numbers).
//!
//! They answer without a key, and keep answering while the server drains, so a load balancer
//! can learn that it should stop sending.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::admin::CacheNumbers;
use super::AppState;
use crate::config::{BatchSettings, CacheSettings};

#[derive(Serialize, ToSchema)]
pub struct BatchConfig {
    enabled: bool,
    max_size: usize,
    timeout_ms: u64,
    queue_size: usize,
}

impl From<BatchSettings> for BatchConfig {
    fn from(s: BatchSettings) -> Self {
        Self {
            enabled: s.enabled,
            max_size: s.max_size,
            timeout_ms: s.timeout_ms,
            queue_size: s.queue_size,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct CacheConfig {
    enabled: bool,
    max_mb: u64,
    ttl_s: u64,
}

impl From<&CacheSettings> for CacheConfig {
    fn from(s: &CacheSettings) -> Self {
        Self {
            enabled: s.enabled,
            max_mb: s.max_mb,
            ttl_s: s.ttl_s,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct BatchHealth {
    /// Effective settings: disabled batching shows as batch size 1 without waiting.
    settings: BatchConfig,
    /// Inference workers.
    workers: usize,
    /// Requests admitted and not finished (what `--batch-queue-size` bounds).
    requests_in_progress: usize,
    /// Utterances waiting for a worker.
    queue_depth: usize,
    batches_in_flight: usize,
}

#[derive(Serialize, ToSchema)]
pub struct CacheHealth {
    settings: CacheConfig,
    stats: CacheNumbers,
}

/// A ready server's state.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    status: &'static str,
    version: &'static str,
    uptime_s: f64,
    /// Compute device of the neural engines.
    device: String,
    engines: Vec<String>,
    default_engine: String,
    /// Resident voices as `engine/voice`.
    voices_loaded: Vec<String>,
    batch: BatchHealth,
    cache: CacheHealth,
}

/// A one-word state: `starting` or `draining` (503), `ready` or `alive` (200).
#[derive(Serialize, ToSchema)]
pub struct Status {
    #[schema(example = "ready")]
    status: &'static str,
}

/// 503 `draining` once shutdown has begun, 503 `starting` until preloads finish, else `None`.
fn not_ready(state: &AppState) -> Option<Response> {
    let status = if state.is_draining() {
        "draining"
    } else if !state.is_ready() {
        "starting"
    } else {
        return None;
    };
    Some((StatusCode::SERVICE_UNAVAILABLE, Json(Status { status })).into_response())
}

/// Liveness
///
/// For a Kubernetes `livenessProbe`: 200 while the process runs and answers.
#[utoipa::path(get, path = "/health/live", tag = "operations",
    responses((status = 200, description = "Alive", body = Status)))]
pub async fn live() -> Json<Status> {
    Json(Status { status: "alive" })
}

/// Readiness
///
/// For a `readinessProbe`: 200 only while requests are welcome (voices preloaded, not
/// draining).
#[utoipa::path(get, path = "/health/ready", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Status),
        (status = 503, description = "Still loading voices, or draining for shutdown", body = Status),
    ))]
pub async fn ready(State(state): State<Arc<AppState>>) -> Response {
    not_ready(&state).unwrap_or_else(|| Json(Status { status: "ready" }).into_response())
}

/// Health and readiness
///
/// 503 until the `--preload` voices are loaded and again once shutdown has begun, else 200
/// with live numbers.
#[utoipa::path(get, path = "/health", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "Still loading voices (`starting`) or shutting down (`draining`)", body = Status),
    ))]
pub async fn health(State(state): State<Arc<AppState>>) -> Response {
    if let Some(response) = not_ready(&state) {
        return response;
    }
    let stats = state.speech.stats().await;
    let settings = &state.settings;
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        uptime_s: state.started.elapsed().as_secs_f64(),
        device: state.device.clone(),
        engines: stats.engines,
        default_engine: stats.default_engine,
        voices_loaded: stats.voices_loaded,
        batch: BatchHealth {
            settings: settings.effective_batch().into(),
            workers: settings.max_concurrent,
            requests_in_progress: stats.requests_in_progress,
            queue_depth: stats.queue_depth,
            batches_in_flight: stats.batches_in_flight,
        },
        cache: CacheHealth {
            settings: (&settings.cache).into(),
            stats: stats.cache.into(),
        },
    })
    .into_response()
}
