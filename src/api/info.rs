//! Read-only routes (models, voices, health, metrics) and cache administration.
//!
//! Every body is a typed struct, so `/openapi.json` documents exactly what these handlers send:
//! the schemas are derived from the same types the handlers serialize.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ErrorBody;
use super::{ApiError, AppState};
use crate::cache::CacheStats;
use crate::config::{BatchSettings, CacheSettings};
use crate::engine::registry::ModelInfo;
use crate::speech::VoiceListing;

/// Models are static for the life of the process; OpenAI requires a creation time, so use a
/// fixed one rather than pretend each model was created at startup.
const MODEL_CREATED: u64 = 1_700_000_000;

/// One model in OpenAI's shape, plus the engine it runs on.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"id": "tts-1", "object": "model", "created": 1_700_000_000, "owned_by": "omnivoice", "engine": "piper"}))]
pub struct Model {
    /// What a speech request sends as `model`.
    id: String,
    /// Always `model`.
    object: &'static str,
    /// A fixed creation time (Unix seconds), as OpenAI's shape requires one.
    created: u64,
    /// Always `omnivoice`.
    owned_by: &'static str,
    /// The engine behind this id (`piper`, `espeak`).
    engine: String,
}

impl From<ModelInfo> for Model {
    fn from(model: ModelInfo) -> Self {
        Self {
            id: model.id,
            object: "model",
            created: MODEL_CREATED,
            owned_by: "omnivoice",
            engine: model.engine,
        }
    }
}

/// OpenAI's model list.
#[derive(Serialize, ToSchema)]
pub struct ModelList {
    /// Always `list`.
    object: &'static str,
    data: Vec<Model>,
}

/// A speech model as Open WebUI lists them (`GET /v1/audio/models`).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"id": "tts-1", "name": "tts-1", "engine": "piper"}))]
pub struct AudioModel {
    /// What a speech request sends as `model`.
    id: String,
    /// Display name; the id itself.
    name: String,
    /// The engine behind this id.
    engine: String,
}

/// Every model id a speech request may send: engines, OpenAI names and configured aliases.
#[derive(Serialize, ToSchema)]
pub struct AudioModelList {
    models: Vec<AudioModel>,
}

/// One voice of one engine.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"id": "en_US-joe-medium", "name": "en_US-joe-medium", "engine": "piper", "language": "en_US", "sample_rate": 22050, "speakers": [], "aliases": ["alloy", "nova"], "loaded": true}))]
pub struct Voice {
    /// What a speech request sends as `voice` (with a model of this engine).
    id: String,
    /// Display name; the id itself.
    name: String,
    engine: String,
    /// Language tag, e.g. `en_US` or `en-us`.
    language: String,
    /// Native output rate in Hz.
    sample_rate: u32,
    /// Speaker names of a multi-speaker voice, sent as `voice: "<id>:<speaker>"`; empty otherwise.
    speakers: Vec<String>,
    /// Other names that mean this voice (OpenAI voice names for the default voice, aliases).
    aliases: Vec<String>,
    /// Whether the voice is in memory now.
    loaded: bool,
}

impl From<VoiceListing> for Voice {
    fn from(v: VoiceListing) -> Self {
        Self {
            name: v.info.id.clone(),
            id: v.info.id,
            engine: v.info.engine,
            language: v.info.language,
            sample_rate: v.info.sample_rate,
            speakers: v.info.speakers,
            aliases: v.aliases,
            loaded: v.loaded,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct VoiceList {
    /// Always `list`.
    object: &'static str,
    voices: Vec<Voice>,
}

/// What a voice rescan did.
#[derive(Serialize, ToSchema)]
pub struct Reloaded {
    /// Always `true`.
    reloaded: bool,
    /// Voices offered after the rescan, all engines together.
    voices: usize,
    /// Loaded voices released because their files disappeared or changed, as `engine/voice`.
    unloaded: Vec<String>,
}

/// The audio cache's numbers.
#[derive(Serialize, ToSchema)]
pub struct CacheNumbers {
    enabled: bool,
    entries: u64,
    bytes: u64,
    max_bytes: u64,
    evictions: u64,
    /// The Redis layer shared by replicas; absent without `--redis-url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    redis: Option<RedisNumbers>,
}

/// The Redis layer's state (its URL is never shown).
#[derive(Serialize, ToSchema)]
pub struct RedisNumbers {
    /// Circuit breaker: `closed` (in use), `open` (skipped after failures) or `half_open` (one probe).
    breaker: &'static str,
    /// Key prefix of this server's entries.
    prefix: String,
}

impl From<CacheStats> for CacheNumbers {
    fn from(s: CacheStats) -> Self {
        Self {
            enabled: s.enabled,
            entries: s.entries,
            bytes: s.bytes,
            max_bytes: s.max_bytes,
            evictions: s.evictions,
            redis: s.redis.map(|r| RedisNumbers {
                breaker: r.breaker,
                prefix: r.prefix,
            }),
        }
    }
}

/// What the cache held before it was emptied.
#[derive(Serialize, ToSchema)]
pub struct Cleared {
    /// Always `true`.
    cleared: bool,
    stats: CacheNumbers,
}

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

/// List models
///
/// Engines, OpenAI's model names and configured aliases, in OpenAI's list shape.
#[utoipa::path(get, path = "/v1/models", tag = "discovery",
    responses((status = 200, description = "Every model id a speech request may send", body = ModelList)))]
pub async fn list_models(State(state): State<Arc<AppState>>) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: state.speech.models().into_iter().map(Model::from).collect(),
    })
}

/// Get one model
#[utoipa::path(get, path = "/v1/models/{id}", tag = "discovery",
    params(("id" = String, Path, description = "A model id, e.g. `tts-1` or `espeak`")),
    responses(
        (status = 200, description = "The model", body = Model),
        (status = 404, description = "No such model", body = ErrorBody),
    ))]
pub async fn get_model(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Model>, ApiError> {
    // A path that is not UTF-8 once decoded names no model; axum's own rejection is plain text.
    let Ok(Path(id)) = id else {
        return Err(ApiError::not_found("No model has that id.").with_param("model"));
    };
    let model = state.speech.model(&id).ok_or_else(|| {
        ApiError::not_found(format!("The model '{id}' does not exist.")).with_param("model")
    })?;
    Ok(Json(model.into()))
}

/// List speech models (Open WebUI)
///
/// The same ids as `GET /v1/models`, in the `{"models": [...]}` shape Open WebUI reads.
#[utoipa::path(get, path = "/v1/audio/models", tag = "discovery",
    responses((status = 200, description = "Every model id a speech request may send", body = AudioModelList)))]
pub async fn list_audio_models(State(state): State<Arc<AppState>>) -> Json<AudioModelList> {
    let models = state
        .speech
        .models()
        .into_iter()
        .map(|m| AudioModel {
            name: m.id.clone(),
            id: m.id,
            engine: m.engine,
        })
        .collect();
    Json(AudioModelList { models })
}

/// List voices
///
/// Every voice of every engine. Open WebUI reads `voices[].id` and `voices[].name`.
#[utoipa::path(get, path = "/v1/audio/voices", tag = "discovery",
    responses((status = 200, description = "Every voice", body = VoiceList)))]
pub async fn list_voices(State(state): State<Arc<AppState>>) -> Json<VoiceList> {
    Json(VoiceList {
        object: "list",
        voices: state.speech.voices().into_iter().map(Voice::from).collect(),
    })
}

/// Rescan the voice directories
///
/// As `SIGHUP` does: new voices appear, changed or removed ones are released.
#[utoipa::path(post, path = "/v1/voices/reload", tag = "admin",
    responses(
        (status = 200, description = "What the rescan did", body = Reloaded),
        (status = 500, description = "The rescan failed", body = ErrorBody),
    ))]
pub async fn reload_voices(State(state): State<Arc<AppState>>) -> Result<Json<Reloaded>, ApiError> {
    let report = state.speech.reload_voices().await?;
    Ok(Json(Reloaded {
        reloaded: true,
        voices: report.voices,
        unloaded: report.unloaded,
    }))
}

/// Empty the audio cache
#[utoipa::path(delete, path = "/v1/audio/cache", tag = "admin",
    responses((status = 200, description = "What the cache held", body = Cleared)))]
pub async fn clear_cache(State(state): State<Arc<AppState>>) -> Json<Cleared> {
    let stats = state.speech.clear_cache().await;
    Json(Cleared {
        cleared: true,
        stats: stats.into(),
    })
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
