//! What the speech module's unit tests share: a service on espeak-ng (no model files), a
//! runtime on the calling thread and a plain request.

use std::sync::Arc;

use super::{LexiconStore, Request, SpeechService, TextSettings};
use crate::batch::Batcher;
use crate::cache::AudioCache;
use crate::config::{BatchSettings, CacheSettings};
use crate::engine::espeak::EspeakEngine;
use crate::engine::registry::{Registry, RegistryConfig};

pub(super) fn service() -> SpeechService {
    let registry = Registry::new(
        vec![Arc::new(EspeakEngine::new())],
        RegistryConfig {
            default_engine: "espeak".into(),
            default_voice: "en-us".into(),
            model_aliases: Default::default(),
            voice_aliases: Default::default(),
            max_loaded: 2,
            single_engine_resident: false,
            idle_unload: None,
        },
    )
    .unwrap();
    let batch = BatchSettings {
        enabled: true,
        max_size: 4,
        timeout_ms: 1,
        queue_size: 16,
    };
    let cache = CacheSettings {
        enabled: true,
        max_mb: 8,
        ttl_s: 0,
        redis: None,
    };
    SpeechService::new(
        Arc::new(registry),
        Batcher::start(&batch, 1),
        AudioCache::new(&cache),
        100,
        None,
        TextSettings {
            normalize: true,
            ..TextSettings::default()
        },
        Arc::new(LexiconStore::open(None).unwrap()),
    )
}

/// Runs `work` on a runtime of the calling thread (a thread-local recorder sees it all).
pub(super) fn on_one_thread(work: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(work);
}

pub(super) fn request(input: &str) -> Request {
    Request {
        model: "espeak".into(),
        voice: "en-us".into(),
        input: input.into(),
        response_format: Some("wav".into()),
        use_cache: true,
        ..Request::default()
    }
}
