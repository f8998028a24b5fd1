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
        .registry()
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
    let registry = state.speech.registry();
    let engine = registry.engine_for_model(&id).ok_or_else(|| {
        ApiError::not_found(format!("The model '{id}' does not exist.")).with_param("model")
    })?;
    Ok(Json(model_object(&id, &engine)))
}

pub async fn list_voices(State(state): State<Arc<AppState>>) -> Json<Value> {
    let registry = state.speech.registry();
    let voices: Vec<Value> = registry
        .voices()
        .into_iter()
        .map(|v| {
            json!({
                "id": v.id,
                "name": v.id,
                "engine": v.engine,
                "language": v.language,
                "sample_rate": v.sample_rate,
                "speakers": v.speakers,
                "aliases": registry.aliases_of(&v.id),
                "loaded": registry.is_loaded(&v.engine, &v.id),
            })
        })
        .collect();
    Json(json!({"object": "list", "voices": voices}))
}

/// Rescans the voice directories (as SIGHUP does) and reports what changed.
pub async fn reload_voices(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let registry = state.speech.registry().clone();
    let report = tokio::task::spawn_blocking(move || registry.reload())
        .await
        .map_err(|e| ApiError::internal(format!("voice rescan failed: {e}")))?;
    Ok(Json(
        json!({"reloaded": true, "voices": report.voices, "unloaded": report.unloaded}),
    ))
}

pub async fn clear_cache(State(state): State<Arc<AppState>>) -> Json<Value> {
    let stats = state.speech.cache().clear().await;
    Json(json!({"cleared": true, "stats": stats}))
}

pub async fn health(State(state): State<Arc<AppState>>) -> Response {
    if !state.is_ready() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "starting"})),
        )
            .into_response();
    }
    let speech = &state.speech;
    let registry = speech.registry();
    let settings = &state.settings;
    let body = json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": state.started.elapsed().as_secs_f64(),
        "device": state.device,
        "engines": registry.engine_ids(),
        "default_engine": registry.default_engine(),
        "voices_loaded": registry.loaded_voices(),
        "batch": {
            "settings": settings.effective_batch(),
            "workers": settings.max_concurrent,
            "queue_depth": speech.batcher().queue_depth(),
            "batches_in_flight": speech.batcher().batches_in_flight(),
        },
        "cache": {
            "settings": settings.cache,
            "stats": speech.cache().stats().await,
        },
    });
    Json(body).into_response()
}

pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    // Gauges that are cheap to read are refreshed at scrape time rather than on every change.
    state.speech.cache().publish_gauges().await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}
