//! Read-only routes (models, voices, health, metrics) and cache administration.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{ApiError, AppState};

/// Models are static for the life of the process; OpenAI requires a creation time, so use a
/// fixed one rather than pretend each model was created at startup.
const MODEL_CREATED: u64 = 1_700_000_000;

fn model_object(id: &str, engine: &str) -> Value {
    json!({"id": id, "object": "model", "created": MODEL_CREATED, "owned_by": "omnivoice", "engine": engine})
}

pub async fn list_models(State(state): State<Arc<AppState>>) -> Json<Value> {
    let data: Vec<Value> = state
        .speech
        .models()
        .iter()
        .map(|m| model_object(&m.id, &m.engine))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

pub async fn get_model(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let model = state.speech.model(&id).ok_or_else(|| {
        ApiError::not_found(format!("The model '{id}' does not exist.")).with_param("model")
    })?;
    Ok(Json(model_object(&model.id, &model.engine)))
}

pub async fn list_voices(State(state): State<Arc<AppState>>) -> Json<Value> {
    let voices: Vec<Value> = state
        .speech
        .voices()
        .into_iter()
        .map(|v| {
            json!({
                "id": v.info.id,
                "name": v.info.id,
                "engine": v.info.engine,
                "language": v.info.language,
                "sample_rate": v.info.sample_rate,
                "speakers": v.info.speakers,
                "aliases": v.aliases,
                "loaded": v.loaded,
            })
        })
        .collect();
    Json(json!({"object": "list", "voices": voices}))
}

/// Rescans the voice directories (as SIGHUP does) and reports what changed.
pub async fn reload_voices(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let report = state.speech.reload_voices().await?;
    Ok(Json(
        json!({"reloaded": true, "voices": report.voices, "unloaded": report.unloaded}),
    ))
}

pub async fn clear_cache(State(state): State<Arc<AppState>>) -> Json<Value> {
    let stats = state.speech.clear_cache().await;
    Json(json!({"cleared": true, "stats": stats}))
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
    Some(
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": status })),
        )
            .into_response(),
    )
}

/// Liveness (a Kubernetes `livenessProbe`): the process runs and answers.
pub async fn live() -> Json<Value> {
    Json(json!({"status": "alive"}))
}

/// Readiness (a `readinessProbe`): 200 only while requests are welcome.
pub async fn ready(State(state): State<Arc<AppState>>) -> Response {
    not_ready(&state).unwrap_or_else(|| Json(json!({"status": "ready"})).into_response())
}

pub async fn health(State(state): State<Arc<AppState>>) -> Response {
    if let Some(response) = not_ready(&state) {
        return response;
    }
    let stats = state.speech.stats().await;
    let settings = &state.settings;
    let body = json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": state.started.elapsed().as_secs_f64(),
        "device": state.device,
        "engines": stats.engines,
        "default_engine": stats.default_engine,
        "voices_loaded": stats.voices_loaded,
        "batch": {
            "settings": settings.effective_batch(),
            "workers": settings.max_concurrent,
            "requests_in_progress": stats.requests_in_progress,
            "queue_depth": stats.queue_depth,
            "batches_in_flight": stats.batches_in_flight,
        },
        "cache": {
            "settings": settings.cache,
            "stats": stats.cache,
        },
    });
    Json(body).into_response()
}

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
