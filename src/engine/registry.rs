//! Which engine and voice a request means, and the loaded voices themselves.
//!
//! Clients name models and voices the OpenAI way (`tts-1`, `alloy`); the registry maps those
//! names to an engine and one of its voices, and keeps loaded voices so that no request ever
//! constructs one. Loads are single-flight (N concurrent first requests load a voice once), at
//! most `max_loaded` voices stay resident (least recently used goes first), and a voice leaves
//! the registry by dropping the registry's `Arc`: requests still computing with it keep theirs,
//! so memory goes only when the last of them finishes.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use tokio::sync::OnceCell;
// Tokio's clock, so that idle unloading follows the clock the sweeper's timer runs on (and a
// paused clock in tests).
use tokio::time::Instant;

use super::{Engine, EngineError, Reference, Voice, VoiceInfo, VoiceKey, VoiceRequestError};
use crate::metrics as m;

/// OpenAI's model names; they all mean the default engine unless the config says otherwise.
pub const OPENAI_MODELS: [&str; 3] = ["tts-1", "tts-1-hd", "gpt-4o-mini-tts"];

/// OpenAI's voice names; they map to configured voices, by default the default voice.
pub const OPENAI_VOICES: [&str; 13] = [
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
    "marin", "cedar",
];

/// A request's model and voice, resolved to something the engines know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedVoice {
    /// The loaded voice: requests with the same key may share a batch.
    pub key: VoiceKey,
    pub speaker: Option<u32>,
    pub sample_rate: u32,
    /// The voice's language tag, as its engine lists it (`en-US`, `en_GB`, `de`).
    pub language: String,
    /// The language it is asked to read in when that is not its own (a request's `language`
    /// for a voice named outright); `None`: its own.
    pub reads_in: Option<String>,
}

impl ResolvedVoice {
    /// The language its text is read in: [`reads_in`](Self::reads_in), else its own.
    pub fn reading_language(&self) -> &str {
        self.reads_in.as_deref().unwrap_or(&self.language)
    }
}

/// Why a model or voice name could not be resolved; the message lists valid choices.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{0}")]
    UnknownModel(String),
    #[error("{0}")]
    UnknownVoice(String),
    /// A clip to clone that cannot be used (silent, too short once trimmed); the error says
    /// why.
    #[error(transparent)]
    UnusableReference(Box<dyn std::error::Error + Send + Sync>),
    /// `instructions` that the voice's engine cannot follow; the error says why.
    #[error(transparent)]
    InvalidInstructions(Box<dyn std::error::Error + Send + Sync>),
    /// The engine failed while making the voice (its model would not load).
    #[error(transparent)]
    Engine(EngineError),
}

/// A setting that names something no engine offers. Found at startup, so a typo never turns
/// into a server that silently speaks with another voice.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting '{setting}': {message}")]
pub struct InvalidSetting {
    pub setting: String,
    pub message: String,
}

pub struct RegistryConfig {
    pub default_engine: String,
    pub default_voice: String,
    pub model_aliases: BTreeMap<String, String>,
    pub voice_aliases: BTreeMap<String, String>,
    pub max_loaded: usize,
    /// Release every voice of other engines when a request switches engine.
    pub single_engine_resident: bool,
    /// Release voices unused for this long (`None` = never).
    pub idle_unload: Option<Duration>,
}

pub struct Registry {
    engines: BTreeMap<String, Arc<dyn Engine>>,
    config: RegistryConfig,
    /// Taken on async threads, so held only for map updates: never across a load, a rescan
    /// or any engine call.
    loaded: Mutex<Loaded>,
}

#[derive(Default)]
struct Loaded {
    slots: BTreeMap<VoiceKey, Slot>,
}

struct Slot {
    cell: Arc<OnceCell<Arc<dyn Voice>>>,
    last_used: Instant,
}

impl Loaded {
    fn resident(&self) -> impl Iterator<Item = (&VoiceKey, &Slot)> {
        self.slots.iter().filter(|(_, s)| s.cell.initialized())
    }

    /// Drops the registry's reference; requests still holding the voice keep it alive.
    fn unload(&mut self, key: &VoiceKey, reason: &str) {
        if self.slots.remove(key).is_some() {
            let (engine, voice) = (key.engine(), key.voice());
            tracing::info!(engine, voice, reason, "voice unloaded");
            metrics::counter!(m::VOICE_UNLOADS, "engine" => engine.to_string(), "voice" => voice.to_string())
                .increment(1);
        }
        metrics::gauge!(m::VOICES_LOADED).set(self.resident().count() as f64);
    }
}

/// What a rescan of the voice directories did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadReport {
    /// Voices offered after the rescan, all engines together.
    pub voices: usize,
    /// Loaded voices released because their files disappeared or changed.
    pub unloaded: Vec<String>,
}

/// What the server can tell about a model id.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub id: String,
    pub engine: String,
}

impl Registry {
    /// Fails when the default engine or voice, or the target of an alias, does not exist.
    pub fn new(
        engines: Vec<Arc<dyn Engine>>,
        config: RegistryConfig,
    ) -> Result<Self, InvalidSetting> {
        let engines = engines
            .into_iter()
            .map(|e| (e.id().to_string(), e))
            .collect();
        let registry = Self {
            engines,
            config,
            loaded: Mutex::new(Loaded::default()),
        };
        registry.check_names()?;
        Ok(registry)
    }

    fn check_names(&self) -> Result<(), InvalidSetting> {
        let invalid = |setting: &str, message: String| InvalidSetting {
            setting: setting.to_string(),
            message,
        };
        let ids = self.engine_ids().join(", ");
        let default = self
            .engines
            .get(&self.config.default_engine)
            .ok_or_else(|| {
                invalid(
                    "default-engine",
                    format!(
                        "'{}' is not an engine (engines: {ids})",
                        self.config.default_engine
                    ),
                )
            })?;
        if default.find_voice(&self.config.default_voice).is_none() {
            let some: Vec<String> = default
                .voices()
                .into_iter()
                .take(12)
                .map(|v| v.id)
                .collect();
            return Err(invalid(
                "default-voice",
                format!(
                    "'{}' is not a voice of engine '{}' (voices: {})",
                    self.config.default_voice,
                    self.config.default_engine,
                    if some.is_empty() {
                        "none found".into()
                    } else {
                        some.join(", ")
                    }
                ),
            ));
        }
        for (alias, engine) in &self.config.model_aliases {
            if !self.engines.contains_key(engine) {
                return Err(invalid(
                    &format!("models.aliases.{alias}"),
                    format!("'{engine}' is not an engine (engines: {ids})"),
                ));
            }
        }
        for (alias, target) in &self.config.voice_aliases {
            let (name, _) = split_speaker(target);
            if !self.engines.values().any(|e| e.find_voice(name).is_some()) {
                return Err(invalid(
                    &format!("voices.aliases.{alias}"),
                    format!("'{target}' is not a voice of any engine"),
                ));
            }
        }
        Ok(())
    }

    pub fn default_engine(&self) -> &str {
        &self.config.default_engine
    }

    /// The default engine's voice behind OpenAI's voice names.
    pub fn default_voice(&self) -> &str {
        &self.config.default_voice
    }

    /// The engine that has a voice of exactly this id: the default engine if it has one, else
    /// the first other engine that does.
    pub fn engine_of_voice(&self, voice: &str) -> Option<String> {
        let default = self.config.default_engine.as_str();
        let has = |id: &str| {
            self.engines
                .get(id)
                .is_some_and(|e| e.find_voice(voice).is_some())
        };
        if has(default) {
            return Some(default.to_string());
        }
        self.engines.keys().find(|id| has(id)).cloned()
    }

    pub fn engine_ids(&self) -> Vec<String> {
        self.engines.keys().cloned().collect()
    }

    /// Every model id a client may send: engines, built-in and configured aliases.
    pub fn models(&self) -> Vec<ModelInfo> {
        let mut models: Vec<ModelInfo> = self
            .engines
            .keys()
            .map(|id| ModelInfo {
                id: id.clone(),
                engine: id.clone(),
            })
            .collect();
        for alias in OPENAI_MODELS
            .iter()
            .map(|s| s.to_string())
            .chain(self.config.model_aliases.keys().cloned())
        {
            if let Some(engine) = self.engine_for_model(&alias) {
                if !models.iter().any(|m| m.id == alias) {
                    models.push(ModelInfo { id: alias, engine });
                }
            }
        }
        models
    }

    pub fn engine_for_model(&self, model: &str) -> Option<String> {
        let id = if let Some(target) = self.config.model_aliases.get(model) {
            target.as_str()
        } else if OPENAI_MODELS.contains(&model) {
            self.config.default_engine.as_str()
        } else {
            model
        };
        self.engines.contains_key(id).then(|| id.to_string())
    }

    /// Every voice of every engine.
    pub fn voices(&self) -> Vec<VoiceInfo> {
        self.engines.values().flat_map(|e| e.voices()).collect()
    }

    /// Whether a voice is resident now.
    pub fn is_loaded(&self, engine: &str, voice: &str) -> bool {
        let loaded = self.loaded.lock();
        loaded
            .slots
            .get(&VoiceKey::new(engine, voice))
            .is_some_and(|s| s.cell.initialized())
    }

    /// Aliases that point at `voice` (OpenAI names included).
    pub fn aliases_of(&self, voice: &str) -> Vec<String> {
        let mut aliases: Vec<String> = self
            .config
            .voice_aliases
            .iter()
            .filter(|(_, target)| target.as_str() == voice)
            .map(|(alias, _)| alias.clone())
            .collect();
        if voice == self.config.default_voice {
            for name in OPENAI_VOICES {
                if !self.config.voice_aliases.contains_key(name) {
                    aliases.push(name.to_string());
                }
            }
        }
        aliases
    }

    /// The engine a request's `model` names, or why none does (the valid ones listed).
    fn engine_of_model(&self, model: &str) -> Result<String, ResolveError> {
        self.engine_for_model(model).ok_or_else(|| {
            let valid: Vec<String> = self.models().into_iter().map(|m| m.id).collect();
            ResolveError::UnknownModel(format!(
                "Unknown model '{model}'. Valid models: {}.",
                valid.join(", ")
            ))
        })
    }

    /// Maps a request's `model` and `voice` to an engine voice (and speaker).
    pub fn resolve(&self, model: &str, voice: &str) -> Result<ResolvedVoice, ResolveError> {
        let engine_id = self.engine_of_model(model)?;
        let engine = &self.engines[&engine_id];

        let requested = voice.trim();
        let configured = self.config.voice_aliases.get(requested).map(String::as_str);
        // An engine that gives OpenAI's names voices of its own (Kokoro: alloy is af_alloy)
        // answers them itself; for the others they mean the default voice.
        let own = configured
            .is_none()
            .then(|| engine.find_voice(requested))
            .flatten();
        // No voice at all means the default, as an OpenAI name does.
        let aliased = configured.or_else(|| {
            (own.is_none() && (requested.is_empty() || OPENAI_VOICES.contains(&requested)))
                .then_some(self.config.default_voice.as_str())
        });
        let (name, speaker) = match (&own, aliased) {
            (Some(_), _) => (requested, None),
            (None, target) => split_speaker(target.unwrap_or(requested)),
        };
        let info = own.or_else(|| engine.find_voice(name)).or_else(|| {
            // An alias whose target belongs to another engine (startup checked that it exists
            // somewhere): use this engine's first voice, so `model=espeak, voice=alloy` speaks.
            aliased.and_then(|_| {
                engine
                    .voices()
                    .into_iter()
                    .find(|v| v.unsupported.is_none())
            })
        });
        let unknown = || {
            // Voices listed but refused (a language or phoneme type this server cannot
            // read) are no valid choice.
            let some: Vec<String> = engine
                .voices()
                .into_iter()
                .filter(|v| v.unsupported.is_none())
                .take(12)
                .map(|v| v.id)
                .collect();
            let why = engine
                .why_unknown(name)
                .map_or(String::new(), |why| format!(" {why}"));
            ResolveError::UnknownVoice(format!(
                "Unknown voice '{voice}' for model '{model}'.{why} Valid voices include: {}.",
                some.join(", ")
            ))
        };
        let info = info.ok_or_else(unknown)?;
        let speaker = match speaker {
            None => None,
            Some(s) => Some(speaker_index(&info, s).ok_or_else(|| {
                ResolveError::UnknownVoice(format!(
                    "Voice '{}' has no speaker '{s}'. Speakers: {}.",
                    info.id,
                    if info.speakers.is_empty() {
                        "none (single-speaker voice)".to_string()
                    } else {
                        info.speakers.join(", ")
                    }
                ))
            })?),
        };
        Ok(ResolvedVoice {
            key: VoiceKey::new(&engine_id, &info.id),
            speaker,
            sample_rate: info.sample_rate,
            language: info.language.clone(),
            reads_in: None,
        })
    }

    /// Resolves a voice named the way settings name one: `engine/voice`, or a voice id of any
    /// engine (the default engine's first), or a name the default engine resolves (OpenAI
    /// names, aliases).
    pub fn resolve_name(&self, name: &str) -> Result<ResolvedVoice, ResolveError> {
        let owner = self.engine_of_voice(name);
        let (model, voice) = name
            .split_once('/')
            .unwrap_or((owner.as_deref().unwrap_or(self.default_engine()), name));
        self.resolve(model, voice)
    }

    /// Whether `voice` names no voice of its own but stands for one: an OpenAI voice name or
    /// a configured alias, which a request's language may then choose for.
    pub fn is_alias(&self, voice: &str) -> bool {
        let voice = voice.trim();
        self.config.voice_aliases.contains_key(voice) || OPENAI_VOICES.contains(&voice)
    }

    /// The voice of `voice`'s engine that follows `instructions`; `Ok(None)` when that
    /// engine takes no instructions. The voice it names must exist: when it does not, the
    /// error is the voice's, not the instructions'.
    pub fn instructed(
        &self,
        voice: &ResolvedVoice,
        instructions: &str,
    ) -> Result<Option<ResolvedVoice>, ResolveError> {
        let engine = voice.key.engine();
        match self.engines[engine].instructed_voice(voice.key.voice(), instructions) {
            None => Ok(None),
            Some(Err(VoiceRequestError::Refused(why))) => {
                Err(ResolveError::InvalidInstructions(why))
            }
            Some(Err(VoiceRequestError::Engine(e))) => Err(ResolveError::Engine(e)),
            Some(Ok(id)) => self.resolve(engine, &id).map(Some),
        }
    }

    /// The settings `voice` brings, which the request's own outrank.
    pub fn defaults_of(&self, voice: &ResolvedVoice) -> Option<crate::params::VoiceDefaults> {
        self.engines[voice.key.engine()].voice_defaults(voice.key.voice())
    }

    /// The voice of `model`'s engine cloned from `reference`; `Ok(None)` when that engine
    /// cannot clone, `Err` (words for the client) when the clip cannot be used.
    pub fn cloned(
        &self,
        model: &str,
        reference: &Reference,
    ) -> Result<Option<ResolvedVoice>, ResolveError> {
        let engine_id = self.engine_of_model(model)?;
        match self.engines[&engine_id].cloned_voice(reference) {
            None => Ok(None),
            Some(Err(VoiceRequestError::Refused(why))) => Err(ResolveError::UnusableReference(why)),
            Some(Err(VoiceRequestError::Engine(e))) => Err(ResolveError::Engine(e)),
            Some(Ok(id)) => self.resolve(&engine_id, &id).map(Some),
        }
    }

    /// Tags in `text` that look like sound cues but that `voice`'s engine reads as words.
    pub fn unknown_cues(&self, voice: &ResolvedVoice, text: &str) -> Vec<String> {
        self.engines[voice.key.engine()].unknown_cues(text)
    }

    /// Whether `voice`'s engine decodes with OmniVoice's generation fields.
    pub fn takes_generation(&self, voice: &ResolvedVoice) -> bool {
        self.engines[voice.key.engine()].takes_generation()
    }

    /// Whether `voice`'s engine is given texts whole, not sentence by sentence.
    pub fn speaks_whole_texts(&self, voice: &ResolvedVoice) -> bool {
        self.engines[voice.key.engine()].speaks_whole_texts()
    }

    /// Whether `voice`'s engine speaks a stream's first phrase apart, so that a stream sounds
    /// otherwise than the whole body.
    pub fn speaks_first_phrase_apart(&self, voice: &ResolvedVoice) -> bool {
        self.engines[voice.key.engine()].speaks_first_phrase_apart()
    }

    /// Whether `voice` could sound otherwise from one utterance to the next unless each
    /// continues from the first.
    pub fn drifts(&self, voice: &ResolvedVoice) -> bool {
        self.engines[voice.key.engine()].drifts(voice.key.voice())
    }

    /// A content fingerprint of the voice (changes when its model file changes).
    pub fn fingerprint(&self, voice: &ResolvedVoice) -> String {
        self.engines[voice.key.engine()].fingerprint(voice.key.voice())
    }

    /// The loaded voice, loading it first if needed (once, however many ask at the same time).
    pub async fn voice(&self, voice: &ResolvedVoice) -> Result<Arc<dyn Voice>, EngineError> {
        let key = voice.key.clone();
        let cell = {
            let mut loaded = self.loaded.lock();
            let now = Instant::now();
            if self.config.single_engine_resident {
                let others: Vec<VoiceKey> = loaded
                    .slots
                    .keys()
                    .filter(|k| k.engine() != key.engine())
                    .cloned()
                    .collect();
                for other in others {
                    loaded.unload(&other, "another engine is in use");
                }
            }
            let slot = loaded.slots.entry(key.clone()).or_insert_with(|| Slot {
                cell: Arc::new(OnceCell::new()),
                last_used: now,
            });
            slot.last_used = now;
            slot.cell.clone()
        };
        let engine = self.engines[key.engine()].clone();
        let (engine_id, voice_id) = (key.engine().to_string(), key.voice().to_string());
        let loaded = cell
            .get_or_try_init(|| async move {
                let started = std::time::Instant::now();
                let name = voice_id.clone();
                let result = on_loader_thread(move || engine.load_voice(&name))
                    .await
                    .map_err(|reason| EngineError::load(&voice_id, reason))??;
                let seconds = started.elapsed().as_secs_f64();
                tracing::info!(engine = %engine_id, voice = %voice_id, seconds, "voice loaded");
                metrics::counter!(m::VOICE_LOADS, "engine" => engine_id.clone(), "voice" => voice_id.clone()).increment(1);
                metrics::histogram!(m::VOICE_LOAD_SECONDS).record(seconds);
                Ok::<_, EngineError>(result)
            })
            .await;
        let voice_arc = match loaded {
            Ok(v) => v.clone(),
            Err(e) => {
                // Forget the failed slot so that a later request tries again.
                let mut loaded = self.loaded.lock();
                if loaded
                    .slots
                    .get(&key)
                    .is_some_and(|s| Arc::ptr_eq(&s.cell, &cell))
                {
                    loaded.slots.remove(&key);
                }
                return Err(e);
            }
        };
        self.evict_beyond_limit();
        Ok(voice_arc)
    }

    /// Drops the registry's reference to the least recently used voices beyond the limit.
    fn evict_beyond_limit(&self) {
        let mut loaded = self.loaded.lock();
        while loaded.resident().count() > self.config.max_loaded {
            let victim = loaded
                .resident()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
                .expect("more resident voices than the limit");
            loaded.unload(&victim, "least recently used");
        }
        metrics::gauge!(m::VOICES_LOADED).set(loaded.resident().count() as f64);
    }

    /// Releases voices unused for `--idle-unload-s`; returns their keys.
    pub fn unload_idle(&self) -> Vec<VoiceKey> {
        let Some(idle) = self.config.idle_unload else {
            return Vec::new();
        };
        let mut loaded = self.loaded.lock();
        let stale: Vec<VoiceKey> = loaded
            .resident()
            .filter(|(_, s)| s.last_used.elapsed() >= idle)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &stale {
            loaded.unload(key, "idle");
        }
        stale
    }

    /// Rescans every engine's voices: new voices become available, and loaded voices whose
    /// files disappeared or changed are released (requests using them finish first).
    pub fn reload(&self) -> ReloadReport {
        let mut unloaded = Vec::new();
        for (id, engine) in &self.engines {
            for voice in engine.rescan() {
                let key = VoiceKey::new(id, &voice);
                let mut loaded = self.loaded.lock();
                if loaded.slots.contains_key(&key) {
                    loaded.unload(&key, "voice files changed or removed");
                    unloaded.push(key.to_string());
                }
            }
        }
        let voices = self.engines.values().map(|e| e.voices().len()).sum();
        tracing::info!(voices, unloaded = unloaded.len(), "voices rescanned");
        ReloadReport { voices, unloaded }
    }

    /// Voices resident now, as `engine/voice` keys.
    pub fn loaded_voices(&self) -> Vec<String> {
        let loaded = self.loaded.lock();
        loaded
            .slots
            .iter()
            .filter(|(_, s)| s.cell.initialized())
            .map(|(k, _)| k.to_string())
            .collect()
    }
}

/// A voice load waiting for the loader thread.
type LoadJob = Box<dyn FnOnce() + Send>;

/// Runs `load` on the one thread that loads every voice. glibc hands each thread an arena and
/// frees memory back into the arena it came from; with loads on changing pool threads, freed
/// voices were kept by both arenas (`src/allocator.rs` disables trimming) and RSS settled up
/// to two voices higher than it needs to. One loading thread means one arena holds the weights,
/// and the next voice reuses what the last one left.
async fn on_loader_thread<T: Send + 'static>(
    load: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    static LOADER: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<LoadJob>>> =
        std::sync::OnceLock::new();
    let loader = LOADER.get_or_init(|| {
        let (jobs, queue) = std::sync::mpsc::channel::<LoadJob>();
        std::thread::Builder::new()
            .name("voice-loader".into())
            .spawn(move || queue.into_iter().for_each(|job| job()))
            .expect("spawn the voice loader thread");
        Mutex::new(jobs)
    });
    let (done, result) = tokio::sync::oneshot::channel();
    let job: LoadJob = Box::new(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(load));
        let _ = done.send(outcome.map_err(|_| "the voice loader panicked".to_string()));
    });
    loader
        .lock()
        .send(job)
        .map_err(|_| "the voice loader thread is gone".to_string())?;
    result
        .await
        .map_err(|_| "the voice loader dropped the load".to_string())?
}

/// `voice:speaker` → (`voice`, Some(`speaker`)).
fn split_speaker(name: &str) -> (&str, Option<&str>) {
    match name.rsplit_once(':') {
        Some((voice, speaker)) if !voice.is_empty() && !speaker.is_empty() => {
            (voice, Some(speaker))
        }
        _ => (name, None),
    }
}

fn speaker_index(info: &VoiceInfo, speaker: &str) -> Option<u32> {
    if let Some(i) = info.speakers.iter().position(|s| s == speaker) {
        return Some(i as u32);
    }
    let n: u32 = speaker.parse().ok()?;
    ((n as usize) < info.speakers.len()).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Pcm, SynthesisItem};

    struct Silent(VoiceInfo);

    impl Voice for Silent {
        fn info(&self) -> &VoiceInfo {
            &self.0
        }

        fn synthesize_each(
            &self,
            _batch: &[SynthesisItem],
            _done: &mut dyn FnMut(usize, Pcm),
        ) -> Result<(), EngineError> {
            Ok(())
        }
    }

    /// An engine with the one voice `v`.
    struct OneVoice;

    impl OneVoice {
        fn info() -> VoiceInfo {
            VoiceInfo {
                id: "v".into(),
                engine: "one".into(),
                language: "en".into(),
                sample_rate: 16000,
                speakers: Vec::new(),
                gender: None,
                unsupported: None,
                design: None,
            }
        }
    }

    impl Engine for OneVoice {
        fn id(&self) -> &str {
            "one"
        }

        fn voices(&self) -> Vec<VoiceInfo> {
            vec![Self::info()]
        }

        fn load_voice(&self, _voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
            Ok(Arc::new(Silent(Self::info())))
        }
    }

    /// Idle time is measured on tokio's clock (the one the sweeper's timer runs on), so a
    /// paused clock decides exactly when a voice has been idle long enough.
    #[tokio::test(start_paused = true)]
    async fn a_voice_is_released_once_idle_for_the_limit_and_use_restarts_it() {
        let idle = Duration::from_secs(60);
        let registry = Registry::new(
            vec![Arc::new(OneVoice)],
            RegistryConfig {
                default_engine: "one".into(),
                default_voice: "v".into(),
                model_aliases: BTreeMap::new(),
                voice_aliases: BTreeMap::new(),
                max_loaded: 4,
                single_engine_resident: false,
                idle_unload: Some(idle),
            },
        )
        .unwrap();
        let voice = registry.resolve("one", "v").unwrap();
        registry.voice(&voice).await.unwrap();
        let just_short = idle - Duration::from_millis(1);

        tokio::time::advance(just_short).await;
        assert!(registry.unload_idle().is_empty(), "not idle long enough");
        registry.voice(&voice).await.unwrap();
        tokio::time::advance(just_short).await;
        assert!(
            registry.unload_idle().is_empty(),
            "its use restarted the idle time"
        );
        assert!(registry.is_loaded("one", "v"));

        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(registry.unload_idle(), vec![voice.key.clone()]);
        assert!(!registry.is_loaded("one", "v"));
        assert!(registry.unload_idle().is_empty());
    }
}
