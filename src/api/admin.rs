//! Administration: `POST /v1/voices/reload` (as `SIGHUP` does) and `DELETE /v1/audio/cache`.
//!
//! Both change what the server holds, so they sit behind the API key with the speech routes
//! even under `--public-discovery`.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ErrorBody;
use super::{ApiError, AppState};
use crate::cache::CacheStats;

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
