//! Assembles the server from its parts and runs it until a shutdown signal.
//!
//! Order matters: engines, registry, batcher and cache exist before the listener accepts a
//! connection; voices named by `--preload` load afterwards while `/health` says "starting".
//! On shutdown the server drains: `/health` says "draining" at once (so load balancers stop
//! sending, which they can only learn while the port still answers), new speech requests get
//! 503, and requests in flight get up to `--shutdown-timeout-s` to finish. Then the listener
//! closes and `run` returns; whatever is still computing is abandoned to the process exit.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::api::{self, AppState};
use crate::batch::Batcher;
use crate::cache::AudioCache;
use crate::config::{Preload, Settings};
use crate::engine::registry::{InvalidSetting, Registry, RegistryConfig};
use crate::engine::Engine;
use crate::profiles::voice_files::VoiceFiles;
use crate::profiles::ProfileStore;
use crate::speech::{LanguageSettings, LexiconStore, SpeechService, TextSettings};
use crate::text::english::{DateOrder, ReadingOptions};

/// How long closing idle connections may take once every request has finished.
const CLOSE_IDLE_CONNECTIONS: Duration = Duration::from_secs(1);

/// Runs the server built by [`build`] on `listener` (HTTP) and, when given, `wyoming` until
/// `shutdown` resolves, then drains both.
pub async fn run(
    state: Arc<AppState>,
    listener: TcpListener,
    wyoming: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = api::router(state.clone());
    let stop_wyoming = tokio_util::sync::CancellationToken::new();
    let wyoming = wyoming.map(|listener| {
        let limits = wyoming_limits(&state.settings);
        let speech = Arc::new(state.speech.clone());
        tokio::spawn(crate::wyoming::serve(
            listener,
            speech,
            limits,
            stop_wyoming.clone().cancelled_owned(),
        ))
    });
    tokio::spawn(preload(state.clone()));
    tokio::spawn(reload_on_sighup(state.clone()));
    if state.settings.idle_unload_s > 0 {
        tokio::spawn(unload_idle_voices(state.clone()));
    }

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Streamed audio goes out as it is made: with Nagle's algorithm on, a first chunk written
    // right after the headers waited for the client's delayed ACK (≈ 17 ms on loopback).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    let server = axum::serve(listener, app).with_graceful_shutdown(async {
        let _ = stop_rx.await;
    });
    let mut server = tokio::spawn(async move { server.await });
    tokio::select! {
        result = &mut server => return result.unwrap_or_else(|e| Err(std::io::Error::other(e))),
        _ = shutdown => {}
    }
    state.set_draining();
    // Wyoming stops accepting now and gives its sessions the same grace.
    stop_wyoming.cancel();
    let grace = Duration::from_secs(state.settings.shutdown_timeout_s);
    tracing::info!(
        grace_s = grace.as_secs(),
        "shutting down: draining, finishing in-flight requests"
    );
    let finished = tokio::time::timeout(grace, state.requests_finished())
        .await
        .is_ok();
    let _ = stop_tx.send(());
    if finished {
        // Only idle keep-alive connections are left; they close at once.
        let _ = tokio::time::timeout(CLOSE_IDLE_CONNECTIONS, server).await;
        tracing::info!("all requests finished; bye");
    } else {
        tracing::warn!("shutdown timeout reached; cancelling the requests still in flight");
    }
    if let Some(wyoming) = wyoming {
        let _ = tokio::time::timeout(CLOSE_IDLE_CONNECTIONS, wyoming).await;
    }
    Ok(())
}

/// The Wyoming front door's bounds, from the same settings as HTTP's.
fn wyoming_limits(settings: &Settings) -> crate::wyoming::Limits {
    crate::wyoming::Limits {
        max_text_chars: settings.max_input_chars,
        shutdown_grace: Duration::from_secs(settings.shutdown_timeout_s),
        ..crate::wyoming::Limits::default()
    }
}

/// The shared state of a server with these engines, this profile store and these voice files
/// (opened before the engines, which may read them). Fails on a setting that names a model or voice no engine
/// offers. Must run inside the Tokio runtime (it starts the batcher).
pub fn build(
    settings: Settings,
    engines: Vec<Arc<dyn Engine>>,
    profiles: Arc<ProfileStore>,
    voice_files: Arc<VoiceFiles>,
    device: String,
) -> Result<Arc<AppState>, InvalidSetting> {
    let (default_engine, default_voice) = crate::engine::defaults(
        &engines,
        settings.default_engine.as_deref(),
        settings.default_voice.as_deref(),
    );
    let registry = Arc::new(Registry::new(
        engines,
        RegistryConfig {
            default_engine,
            default_voice,
            model_aliases: settings.model_aliases.clone(),
            voice_aliases: settings.voice_aliases.clone(),
            max_loaded: settings.max_loaded_voices,
            single_engine_resident: settings.single_engine_resident,
            idle_unload: (settings.idle_unload_s > 0)
                .then(|| Duration::from_secs(settings.idle_unload_s)),
        },
    )?);
    let lexicon = LexiconStore::open(settings.lexicon.clone()).map_err(|e| InvalidSetting {
        setting: "lexicon".into(),
        message: crate::speech::chain(&e),
    })?;
    if settings.lexicon.is_none() {
        tracing::debug!("no --lexicon file: dictionary changes last until the server stops");
    }
    for (language, voice) in &settings.voices_by_language {
        if let Err(e) = registry.resolve_name(voice) {
            return Err(InvalidSetting {
                setting: format!("voices.by_language.{language}"),
                message: e.to_string(),
            });
        }
    }
    let batcher = Batcher::start(&settings.effective_batch(), settings.max_concurrent);
    let cache = AudioCache::new(&settings.cache);
    let speech = SpeechService::new(
        registry,
        batcher,
        cache,
        settings.max_input_chars,
        settings.seed,
        TextSettings {
            normalize: settings.normalize,
            reading: ReadingOptions {
                // The settings refused any other value.
                date_order: DateOrder::parse(&settings.date_order).unwrap_or_default(),
            },
            languages: LanguageSettings {
                by_language: settings.voices_by_language.clone(),
                detect: settings.language_detect,
            },
        },
        Arc::new(lexicon),
    )
    .with_profiles(profiles, voice_files)
    .with_time_limit(Duration::from_secs(settings.request_timeout_s));
    // The engines' limits are bucket boundaries of the metrics, handed down from here.
    let metrics = crate::metrics::install(&[
        crate::engine::piper::MAX_IDS_PER_PASS,
        crate::engine::kokoro::split::PASS_TOKENS,
    ]);
    Ok(Arc::new(AppState::new(settings, speech, metrics, device)))
}

/// Loads the `--preload` voices, then reports ready. A voice that fails to load is logged and
/// skipped: the server still serves every other voice.
async fn preload(state: Arc<AppState>) {
    let voices = match &state.settings.preload {
        Preload::DefaultVoice => vec![state.speech.default_voice()],
        Preload::Voices(voices) => voices.clone(),
    };
    state.speech.preload(&voices).await;
    state.set_ready();
    tracing::info!("ready");
}

/// SIGHUP rescans the voice directories, as daemons conventionally reload on it.
async fn reload_on_sighup(state: Arc<AppState>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; use POST /v1/voices/reload");
            return;
        };
        while hangups.recv().await.is_some() {
            if let Err(e) = state.speech.reload_voices().await {
                tracing::error!(error = %e, "voice rescan failed");
            }
        }
    }
    #[cfg(not(unix))]
    let _ = state;
}

/// Checks for idle voices a few times per `--idle-unload-s` period.
async fn unload_idle_voices(state: Arc<AppState>) {
    let period = Duration::from_secs(state.settings.idle_unload_s)
        .div_f64(4.0)
        .max(Duration::from_millis(250));
    let mut ticks = tokio::time::interval(period);
    loop {
        ticks.tick().await;
        state.speech.unload_idle_voices();
    }
}
