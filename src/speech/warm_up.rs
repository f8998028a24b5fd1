//! Voices loaded before traffic, each speaking one short sentence outside any request: its
//! first kernel calls and page faults are then not a client's, and its engine's pace is known
//! before the first request is weighed against the time limit ([`super::time_limit`]).

use std::sync::Arc;

use super::SpeechService;
use crate::engine::registry::ResolvedVoice;
use crate::engine::{SynthesisItem, Voice};

/// What a preloaded voice says to warm up (public so that a test engine can tell the warm-up
/// from requests).
pub const WARM_UP_TEXT: &str = "Hello, the server is ready.";

impl SpeechService {
    /// Loads voices ahead of traffic. `name` is `engine/voice`, or a voice id of any engine
    /// (the default engine's first: `en_US-joe-medium` stays Piper's when Kokoro is the
    /// default), or a name the default engine resolves (OpenAI names, blends); a name that
    /// does not resolve or load is logged and skipped.
    pub async fn preload(&self, names: &[String]) {
        let registry = &self.inner.registry;
        for name in names {
            let resolved = match registry.resolve_name(name) {
                Ok(resolved) => resolved,
                Err(e) => {
                    tracing::warn!(voice = %name, error = %e, "preload skipped");
                    continue;
                }
            };
            match registry.voice(&resolved).await {
                Ok(voice) => self.warm_up(&resolved, voice).await,
                Err(e) => tracing::error!(voice = %name, error = %e, "preload failed"),
            }
        }
    }

    /// Speaks one short sentence with a freshly loaded voice, outside any request: its first
    /// kernel calls and page faults are then not a client's, and its engine's pace is known
    /// before the first request is weighed against the time limit ([`super::time_limit`]).
    async fn warm_up(&self, resolved: &ResolvedVoice, voice: Arc<dyn Voice>) {
        let batcher = self.inner.batcher.clone();
        let engine = resolved.key.engine().to_string();
        let id = resolved.key.voice().to_string();
        crate::blocking::run(move || {
            let mut item = SynthesisItem::new(WARM_UP_TEXT);
            item.params.seed = Some(0);
            // How long one synthesis of the item took, and the seconds of audio it made.
            let once = || {
                let (started, mut seconds) = (std::time::Instant::now(), 0.0);
                voice.synthesize_each(std::slice::from_ref(&item), &mut |_, pcm| {
                    seconds += pcm.duration_s();
                })?;
                Ok::<_, crate::engine::EngineError>((started.elapsed(), seconds))
            };
            // Twice: the first call pages the weights in and fills the caches, which no
            // later request pays, so only the second is the engine's pace.
            match once().and_then(|_| once()) {
                Ok((took, seconds)) => {
                    batcher.record_pace(&engine, took, seconds);
                    tracing::info!(
                        voice = %id,
                        ms = took.as_millis() as u64,
                        audio_s = format!("{seconds:.2}"),
                        "warmed up"
                    );
                }
                // A voice that cannot read English (a Japanese one, say) just stays cold.
                Err(e) => tracing::debug!(voice = %id, error = %e, "warm-up skipped"),
            }
        })
        .await;
    }
}
