//! The speech pipeline: from a validated request to encoded audio, for every front door.
//!
//! `validate → cache lookup → (miss) load voice → split into sentences → batcher → join →
//! encode → store`. Front doors (HTTP, Wyoming, the WebSocket stream) only translate their
//! wire format into a [`Request`] and the results back; [`SpeechService`] is all they see, so
//! batching, the cache, the registry and the limits are shared by all of them.

mod dialogue;
mod encoder;
mod error;
mod join;
mod lexicon;
mod live;
mod one_voice;
mod phonemes;
mod phrase_first;
pub mod profiles;
mod request;
mod script;
mod stream;
mod subtitles;
mod synthesis;
#[cfg(test)]
mod testing;
mod time_limit;
mod timed;
mod warm_up;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::audio::{self, speech_like::SpeechWindows};
use crate::batch::{Batcher, SubmitError};
use crate::cache::{
    AudioCache, CacheKey, CacheLayer, CacheStats, CacheStatus, CachedAudio, KeyHash,
};
use crate::engine::registry::{ModelInfo, Registry, ReloadReport, ResolvedVoice};
use crate::engine::{Continuation, Continuity, Pcm, Reference, SynthesisItem, Voice, VoiceInfo};
use crate::metrics as m;
use crate::text::lexicon::Entry;

pub use dialogue::{
    Audio as DialogueAudio, Dialogue, DialogueError, Dialogues, Layout, Line, Placed, Reading,
    Skipped, DEFAULT_PAUSE_S, LINES_IN_FLIGHT, PAUSE_S,
};
pub use error::{chain, Failure, InvalidReason, SpeechError};
pub use lexicon::{LexiconStore, LexiconView};
pub use live::{LiveSpeech, LiveText, Sentence, SentenceAudio, SentencePart, SpokenSentence};
pub use phonemes::{Phonemization, PhonemizedSentence};
pub use request::{Job, Request, TextSettings};
pub use script::LanguageSettings;
use script::{Script, Utterance, Voices};
pub use stream::{SpeechStream, TimedChunk};
pub use subtitles::{SubtitleFormat, Subtitles};
pub use timed::{TimedSpeech, WordStamp};
pub use warm_up::WARM_UP_TEXT;

/// Longest piece of text handed to an engine in one utterance; longer sentences are split at
/// clause boundaries. VITS attention cost grows with the square of the length.
pub const MAX_UTTERANCE_CHARS: usize = 400;

/// What a finished synthesis reports besides its bytes.
pub struct Spoken {
    pub audio: Arc<CachedAudio>,
    pub cache: CacheStatus,
    /// The cache the bytes came from; `None` when synthesized for this request.
    pub layer: Option<CacheLayer>,
}

/// A voice as front doors list it.
#[derive(Debug, Clone)]
pub struct VoiceListing {
    pub info: VoiceInfo,
    /// Names that also mean this voice (configured aliases, OpenAI names for the default).
    pub aliases: Vec<String>,
    /// Whether it is resident now.
    pub loaded: bool,
}

/// One of OmniVoice's knobs as front doors list it, so that no client copies its range.
#[derive(Debug, Clone)]
pub struct GenerationKnob {
    pub name: &'static str,
    pub minimum: f32,
    pub maximum: f32,
    /// Whole numbers only.
    pub whole: bool,
    /// The value used when a request sets none, where the model has one.
    pub default: Option<f32>,
}

/// Live numbers for health checks and operators.
#[derive(Debug, Clone)]
pub struct ServiceStats {
    pub engines: Vec<String>,
    pub default_engine: String,
    /// Resident voices as `engine/voice`.
    pub voices_loaded: Vec<String>,
    /// Requests admitted and not finished (what `--batch-queue-size` bounds).
    pub requests_in_progress: usize,
    /// Utterances waiting for a worker.
    pub queue_depth: usize,
    pub batches_in_flight: usize,
    pub cache: CacheStats,
}

/// The pipeline, cheap to clone: every front door holds one.
#[derive(Clone)]
pub struct SpeechService {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Arc<Registry>,
    batcher: Batcher,
    cache: AudioCache<SpeechError>,
    limits: request::Limits,
    lexicon: Arc<LexiconStore>,
    /// Set by [`SpeechService::with_profiles`].
    voice_stores: Option<profiles::VoiceStores>,
    /// Set by [`SpeechService::with_time_limit`].
    time_limit: Option<Duration>,
}

impl SpeechService {
    pub fn new(
        registry: Arc<Registry>,
        batcher: Batcher,
        cache: AudioCache<SpeechError>,
        max_input_chars: usize,
        default_seed: Option<u64>,
        text: TextSettings,
        lexicon: Arc<LexiconStore>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                registry,
                batcher,
                cache,
                limits: request::Limits {
                    max_input_chars,
                    default_seed,
                    text,
                },
                lexicon,
                voice_stores: None,
                time_limit: None,
            }),
        }
    }

    /// Refuses, before any work, a job whose compute is expected to take longer than `limit`
    /// (the front doors' request timeout), instead of cutting it off there.
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("the limit is set before the service is shared")
            .time_limit = Some(limit);
        self
    }

    /// Validates a request: the only way to get a [`Job`]. The job keeps the pronunciation
    /// dictionary as it is now, so a change never reaches a request half way. Choosing its
    /// voices may read voice files, so it runs on a blocking thread.
    pub async fn prepare(&self, request: Request) -> Result<Job, SpeechError> {
        let this = self.clone();
        crate::blocking::run(move || this.prepare_here(request)).await
    }

    /// [`prepare`](Self::prepare) on the caller's thread, for callers off the async threads.
    pub(crate) fn prepare_here(&self, request: Request) -> Result<Job, SpeechError> {
        let job = request::validate(
            request,
            &self.inner.registry,
            &self.inner.limits,
            self.inner.lexicon.current(),
        )?;
        if let Some(limit) = self.inner.time_limit {
            let batcher = &self.inner.batcher;
            time_limit::check(&job, limit, |engine| batcher.real_time_factor(engine))?;
        }
        Ok(job)
    }

    /// Whether a request for `voice` of `model` (an alias, say) in language `tag` finds a voice
    /// that reads it: the one `[voices.by_language]` names, the voice itself, or another of its
    /// engine's, as [`prepare`](Self::prepare) would choose (on a blocking thread, as it).
    pub async fn finds_voice_for(&self, model: &str, voice: &str, tag: &str) -> bool {
        let this = self.clone();
        let (model, voice, tag) = (model.to_string(), voice.to_string(), tag.to_string());
        crate::blocking::run(move || {
            let registry = &this.inner.registry;
            let Ok(voice) = registry.resolve(&model, &voice) else {
                return false;
            };
            Voices {
                registry,
                voice: &voice,
                languages: &this.inner.limits.text.languages,
                outright: false,
            }
            .voice_for(&tag)
            .is_some()
        })
        .await
    }

    /// The voice id of `model`'s engine that speaks like `reference`; a request then names it
    /// as its `voice`. The clip is prepared (resampled, trimmed) on a blocking thread; its
    /// encoding waits for the first sentence, in the batch.
    pub async fn clone_voice(
        &self,
        model: &str,
        reference: Reference,
    ) -> Result<String, SpeechError> {
        let registry = self.inner.registry.clone();
        let model_name = model.to_string();
        let cloned = crate::blocking::run(move || registry.cloned(&model_name, &reference)).await;
        match cloned {
            Ok(Some(voice)) => Ok(voice.key.voice().to_string()),
            Ok(None) => Err(SpeechError::invalid(
                "model",
                InvalidReason::Unsupported,
                format!("Model '{model}' cannot clone a voice; OmniVoice can (\"model\": \"omnivoice\")."),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// The pronunciation dictionary (read again from its file when another replica changed
    /// it, hence on a blocking thread).
    pub async fn lexicon(&self) -> LexiconView {
        let this = self.clone();
        crate::blocking::run(move || this.inner.lexicon.view()).await
    }

    /// Puts `entries` into the pronunciation dictionary (or, with `replace`, makes them the
    /// whole of it), saved before the next request hears them.
    pub async fn put_lexicon(
        &self,
        entries: Vec<Entry>,
        replace: bool,
    ) -> Result<LexiconView, SpeechError> {
        self.inner.lexicon.put(entries, replace).await
    }

    /// Removes `word`'s entries (of `language` only, when given) from the dictionary.
    pub async fn remove_from_lexicon(
        &self,
        word: &str,
        language: Option<&str>,
    ) -> Result<LexiconView, SpeechError> {
        self.inner.lexicon.remove(word, language).await
    }

    /// Empties the pronunciation dictionary.
    pub async fn clear_lexicon(&self) -> Result<LexiconView, SpeechError> {
        self.inner.lexicon.clear().await
    }

    /// Every voice of every engine. Engines list their directories (OmniVoice reads its
    /// voice files), so the listing runs on a blocking thread.
    pub async fn voices(&self) -> Vec<VoiceListing> {
        let registry = self.inner.registry.clone();
        crate::blocking::run(move || {
            registry
                .voices()
                .into_iter()
                .map(|info| VoiceListing {
                    aliases: registry.aliases_of(&info.id),
                    loaded: registry.is_loaded(&info.engine, &info.id),
                    info,
                })
                .collect()
        })
        .await
    }

    /// The attributes an OmniVoice design may combine, by category, when OmniVoice is served.
    pub fn design_attributes(&self) -> Option<std::collections::BTreeMap<String, Vec<String>>> {
        let id = crate::engine::omnivoice::ID.to_string();
        self.inner
            .registry
            .engine_ids()
            .contains(&id)
            .then(crate::engine::omnivoice::design_attributes)
    }

    /// OmniVoice's knobs, when OmniVoice is served: each name with its range, whether it takes
    /// whole numbers only, and its default where the model has one.
    pub fn generation_knobs(&self) -> Option<Vec<GenerationKnob>> {
        self.design_attributes()?;
        let defaults = crate::engine::omnivoice::generation_defaults();
        let knobs = crate::params::generation::KNOBS
            .iter()
            .map(|(name, range, whole)| GenerationKnob {
                name,
                minimum: *range.start(),
                maximum: *range.end(),
                whole: *whole,
                default: defaults.iter().find(|(n, _)| n == name).map(|(_, v)| *v),
            });
        Some(knobs.collect())
    }

    /// Every model id a client may send: engines, OpenAI names and configured aliases.
    pub fn models(&self) -> Vec<ModelInfo> {
        self.inner.registry.models()
    }

    /// The model with this id, if a client may send it.
    pub fn model(&self, id: &str) -> Option<ModelInfo> {
        let engine = self.inner.registry.engine_for_model(id)?;
        Some(ModelInfo {
            id: id.to_string(),
            engine,
        })
    }

    pub async fn stats(&self) -> ServiceStats {
        let registry = &self.inner.registry;
        ServiceStats {
            engines: registry.engine_ids(),
            default_engine: registry.default_engine().to_string(),
            voices_loaded: registry.loaded_voices(),
            requests_in_progress: self.inner.batcher.requests_in_progress(),
            queue_depth: self.inner.batcher.queue_depth(),
            batches_in_flight: self.inner.batcher.batches_in_flight(),
            cache: self.inner.cache.stats().await,
        }
    }

    /// Empties the audio cache; returns what it held.
    pub async fn clear_cache(&self) -> CacheStats {
        self.inner.cache.clear().await
    }

    /// Rescans the voice directories: new voices appear, changed or removed ones are released.
    pub async fn reload_voices(&self) -> Result<ReloadReport, SpeechError> {
        let registry = self.inner.registry.clone();
        // Not `blocking::run`: a rescan that panics is reported as an error, so that the
        // SIGHUP listener, which has no panic catcher, keeps listening.
        tokio::task::spawn_blocking(move || registry.reload())
            .await
            .map_err(|e| SpeechError::VoiceLoad(Failure::new("voice rescan failed", e)))
    }

    /// The engine behind OpenAI's model names.
    pub fn default_engine(&self) -> String {
        self.inner.registry.default_engine().to_string()
    }

    /// The voice behind OpenAI's voice names.
    pub fn default_voice(&self) -> String {
        self.inner.registry.default_voice().to_string()
    }

    /// Releases voices idle for longer than the registry's limit.
    pub fn unload_idle_voices(&self) {
        self.inner.registry.unload_idle();
    }

    /// The cache key of `job`'s audio, whole or `streamed`.
    async fn key(&self, job: &Job, streamed: bool) -> Result<KeyHash, SpeechError> {
        let voice = job.voice();
        let registry = &self.inner.registry;
        let streams_otherwise = (registry.speaks_whole_texts(voice)
            && !job.params().generation.sets_chunking())
            || registry.speaks_first_phrase_apart(voice);
        let delivery = match streamed && streams_otherwise {
            true => "stream",
            false => "",
        };
        let reading = job
            .reading()
            .map_or("verbatim", |options| options.date_order.as_str());
        let script = job.script();
        // The voice, and those that read parts of it (another language's), each as its files
        // are now. A model's first fingerprint hashes its file (hundreds of MB), and every
        // later one looks at the files: not on an async thread.
        let voices: Vec<ResolvedVoice> = std::iter::once(voice)
            .chain(&script.voices[1..])
            .cloned()
            .collect();
        let fingerprints = {
            let registry = registry.clone();
            crate::blocking::run(move || {
                voices
                    .iter()
                    .map(|v| (v.key.to_string(), registry.fingerprint(v)))
                    .collect::<Vec<_>>()
            })
            .await
        };
        let fingerprint = &fingerprints[0].1;
        let other_voices: Vec<String> = fingerprints[1..]
            .iter()
            .map(|(key, fingerprint)| format!("{key}:{fingerprint}"))
            .collect();
        Ok(CacheKey {
            engine: voice.key.engine(),
            voice: voice.key.voice(),
            voice_fingerprint: fingerprint,
            reads_in: voice.reads_in.as_deref().unwrap_or_default(),
            other_voices: &other_voices.join(","),
            input: job.input(),
            response_format: job.format().as_str(),
            sample_rate: job.format().output_sample_rate(voice.sample_rate),
            params: job.params(),
            reading,
            lexicon: &script.lexicon_digest(job.lexicon()),
            delivery,
            server_version: env!("CARGO_PKG_VERSION"),
        }
        .hash())
    }

    /// Synthesizes (or finds) the whole response body.
    pub async fn speak(&self, job: Job) -> Result<Spoken, SpeechError> {
        let key = self.key(&job, false).await?;
        let this = self.clone();
        let bypass = !job.use_cache();
        let work = async move { this.synthesize_whole(job).await };
        let (result, outcome) = self.inner.cache.get_or_synthesize(key, bypass, work).await;
        result.map(|audio| Spoken {
            audio,
            cache: outcome.status,
            layer: outcome.layer,
        })
    }

    /// Whether `job`'s voice keeps one voice through several utterances only when each
    /// continues from the first ([`Continuation`]: OmniVoice without a clone).
    pub(crate) fn drifts(&self, job: &Job) -> bool {
        self.inner.registry.drifts(job.voice())
    }

    /// The whole body of `job` as a `continuation` of a conversation's voice, and what it
    /// leaves for the later utterances when it leads. Not cached: a later utterance depends on
    /// the frames its leader was generated with, which a cached body does not keep.
    pub(crate) async fn speak_continuing(
        &self,
        job: &Job,
        continuation: Continuation,
    ) -> Result<(CachedAudio, Option<Continuity>), SpeechError> {
        metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
        let utterances = Utterances {
            continuation,
            ..Utterances::of_input(job, false)
        };
        let pieces = self
            .start_utterances(job, utterances, false)
            .await?
            .collect()
            .await?;
        let left = pieces.iter().find_map(|p| p.continuity.clone());
        let audio = encode_joined(job, &pieces, &job.script().pauses()).await?;
        Ok((audio, left))
    }

    async fn synthesize_whole(&self, job: Job) -> Result<CachedAudio, SpeechError> {
        metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
        let pieces = self.start(&job, false).await?.collect().await?;
        encode_joined(&job, &pieces, &job.script().pauses()).await
    }

    /// Admits the job's utterances as one request; they then go through the batcher a few at
    /// a time as they are taken from the returned [`Synthesis`](synthesis::Synthesis).
    /// `listening`: someone plays the audio as it comes (a stream), so the first sentence
    /// starts on its own and sentences are computed in pieces.
    async fn start(&self, job: &Job, listening: bool) -> Result<synthesis::Synthesis, SpeechError> {
        let utterances = Utterances::of_input(job, false);
        self.start_utterances(job, utterances, listening).await
    }

    /// The engines' voices for `voices`, loaded where they are not yet.
    async fn load_voices(
        &self,
        voices: Vec<ResolvedVoice>,
    ) -> Result<Vec<(ResolvedVoice, Arc<dyn Voice>)>, SpeechError> {
        let mut loaded = Vec::with_capacity(voices.len());
        for resolved in voices {
            let voice = self
                .inner
                .registry
                .voice(&resolved)
                .await
                .map_err(|e| SpeechError::VoiceLoad(Failure::of(e)))?;
            loaded.push((resolved, voice));
        }
        Ok(loaded)
    }

    /// Admits `utterances` as one request (`listening` as for [`start`](Self::start)).
    async fn start_utterances(
        &self,
        job: &Job,
        utterances: Utterances,
        listening: bool,
    ) -> Result<synthesis::Synthesis, SpeechError> {
        let Utterances {
            script,
            base_seed,
            first_index,
            word_timings,
            continuation,
        } = utterances;
        let voices = self.load_voices(script.voices).await?;
        check_sayable(&voices, &script.utterances)?;
        if word_timings {
            if let Some((resolved, _)) = voices.iter().find(|(_, v)| !v.times_words()) {
                return Err(no_word_timings(resolved.key.engine()));
            }
        }
        let rate = job.voice().sample_rate;
        let params = job.params();
        // A duration asked for the whole input is shared among its utterances by length.
        let chars: usize = script
            .utterances
            .iter()
            .map(|u| u.spoken.text.chars().count().max(1))
            .sum();
        let items = script
            .utterances
            .into_iter()
            .enumerate()
            .map(|(i, utterance)| {
                let (resolved, _) = &voices[utterance.voice];
                let mut params = params.for_item(base_seed, first_index + i);
                params.speed = (params.speed * utterance.rate)
                    .clamp(*crate::params::SPEED.start(), *crate::params::SPEED.end());
                params.speaker = resolved.speaker;
                if let Some(seconds) = params.generation.duration {
                    let share = utterance.spoken.text.chars().count().max(1) as f32 / chars as f32;
                    params.generation.duration = Some(seconds * share);
                }
                // Only the stream's very first utterance: later ones are computed while
                // earlier audio plays.
                let phrase_end = (listening && first_index + i == 0)
                    .then(|| phrase_first::first_phrase_end(&utterance.spoken))
                    .flatten();
                let item = SynthesisItem {
                    text: utterance.spoken.text,
                    params,
                    word_timings,
                    // Audio at another rate is resampled whole.
                    in_pieces: listening && resolved.sample_rate == rate,
                    pronunciations: utterance.spoken.pronunciations,
                    language: resolved.reads_in.clone(),
                    // One leads: the first.
                    continuation: match (&continuation, i) {
                        (Continuation::Leads, 0) | (Continuation::Follows(_), _) => {
                            continuation.clone()
                        }
                        _ => Continuation::Alone,
                    },
                    phrase_end,
                };
                (utterance.voice, item)
            })
            .collect::<std::collections::VecDeque<_>>();
        let ticket = self.inner.batcher.admit(items.len()).map_err(|e| {
            if matches!(e, SubmitError::Full { .. }) {
                metrics::counter!(m::REJECTED, "reason" => "queue_full").increment(1);
            }
            submit_error(e)
        })?;
        let voices = voices
            .into_iter()
            .map(|(resolved, voice)| (resolved.key, voice))
            .collect();
        synthesis::Synthesis::start(
            self.inner.batcher.clone(),
            ticket,
            voices,
            items,
            rate,
            listening,
        )
    }
}

/// Utterances to synthesize as one request: the `i`-th is utterance `first_index + i` of a
/// synthesis seeded with `base_seed` (so that its noise does not depend on how the text was
/// cut into requests).
struct Utterances {
    script: Script,
    base_seed: u64,
    first_index: usize,
    word_timings: bool,
    /// Their place in a stream that keeps one voice (a live stream's sentences).
    continuation: Continuation,
}

impl Utterances {
    /// The whole input of `job` as one request, seeded by the job.
    fn of_input(job: &Job, word_timings: bool) -> Self {
        Self {
            script: job.script().clone(),
            base_seed: job.params().seed.unwrap_or_else(rand::random),
            first_index: 0,
            word_timings,
            continuation: Continuation::Alone,
        }
    }
}

/// The sentences of `input`: normalized, split, long sentences cut at clauses.
#[cfg(test)]
fn sentences(input: &str) -> Vec<String> {
    crate::text::split_sentences(&crate::text::normalize(input), MAX_UTTERANCE_CHARS)
}

/// The refusal of a request for word timings from an engine that cannot tell them.
fn no_word_timings(engine: &str) -> SpeechError {
    SpeechError::invalid(
        "model",
        InvalidReason::Unsupported,
        format!("The {engine} engine does not report word timings."),
    )
}

/// Refuses a voice asked to read a language it cannot, and utterances whose given phonemes
/// hold a symbol their voice cannot say, naming it: heard wrong, they would be worse than
/// refused.
fn check_sayable(
    voices: &[(ResolvedVoice, Arc<dyn Voice>)],
    utterances: &[Utterance],
) -> Result<(), SpeechError> {
    for (resolved, voice) in voices {
        if let Some(tag) = resolved.reads_in.as_deref() {
            if !voice.reads_language(tag) {
                // A voice that speaks every language it knows (OmniVoice) does not know this
                // one at all; any other voice could be swapped for one that speaks it.
                let message = if resolved.language == crate::engine::MULTILINGUAL {
                    format!(
                        "The {} engine does not know the language '{tag}': send a language id such as 'en' or a name such as 'English'.",
                        resolved.key.engine()
                    )
                } else {
                    format!(
                        "The voice '{}' speaks {} and cannot read '{tag}': name a voice that speaks it, or send a voice alias (such as an OpenAI voice name) to have one chosen.",
                        voice.info().id,
                        resolved.language
                    )
                };
                return Err(SpeechError::invalid(
                    "language",
                    InvalidReason::Unsupported,
                    message,
                ));
            }
        }
    }
    for utterance in utterances {
        let (resolved, voice) = &voices[utterance.voice];
        let language = resolved.reads_in.as_deref();
        let spoken = &utterance.spoken;
        for pronunciation in &spoken.pronunciations {
            if !voice.says_given_phonemes(language) {
                return Err(SpeechError::invalid(
                    "input",
                    InvalidReason::Unsupported,
                    format!(
                        "The voice '{}' cannot say given phonemes (/{}/ for '{}'): use an alias for it, or a Piper or Kokoro voice.",
                        voice.info().id,
                        pronunciation.ipa,
                        &spoken.text[pronunciation.text.clone()],
                    ),
                ));
            }
            if let Some(symbol) = voice.unsayable(&pronunciation.ipa, language) {
                return Err(SpeechError::invalid(
                    "input",
                    InvalidReason::Unsupported,
                    format!(
                        "The voice '{}' cannot say '{symbol}' (U+{:04X}) in /{}/, the phonemes given for '{}'.",
                        voice.info().id,
                        symbol as u32,
                        pronunciation.ipa,
                        &spoken.text[pronunciation.text.clone()],
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The sentences joined behind their pauses as one body in the job's format.
async fn encode_joined(
    job: &Job,
    pieces: &[Pcm],
    pauses: &join::Pauses,
) -> Result<CachedAudio, SpeechError> {
    let rate = job.voice().sample_rate;
    let (samples, duration_s) = join::join_sentences(pieces, pauses, rate);
    let mut heard = SpeechWindows::new(rate);
    heard.push(&samples);
    let no_speech = warn_if_no_speech(&heard, job.input());
    let format = job.format();
    let bytes = crate::blocking::run(move || audio::encode(format, &samples, rate))
        .await
        .map_err(|e| {
            SpeechError::Encoding(Failure::new(
                format_args!("encoding {} failed", format.as_str()),
                e,
            ))
        })?;
    Ok(CachedAudio {
        bytes: Bytes::from(bytes),
        sample_rate: format.output_sample_rate(rate),
        duration_s,
        no_speech,
    })
}

/// Characters of the input a no-speech warning quotes.
const TEXT_IN_LOG: usize = 120;

/// Whether `heard` is no speech, said in the log with the text, since only a whole response's
/// header can tell the client (the Python omnivoice-server's check, and its advice).
fn warn_if_no_speech(heard: &SpeechWindows, text: &str) -> bool {
    let no_speech = heard.no_speech();
    if no_speech {
        let text: String = text.chars().take(TEXT_IN_LOG).collect();
        tracing::warn!(
            ratio = heard.ratio(),
            text,
            "the audio sounds like no speech (a steady drone, not a voice); several sound \
             cues in one short sentence can cause it: spread them over sentences"
        );
    }
    no_speech
}

fn submit_error(e: SubmitError) -> SpeechError {
    match e {
        SubmitError::Full { retry_after } => SpeechError::Overloaded { retry_after },
        SubmitError::Stopped => SpeechError::BatcherStopped,
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{on_one_thread, request, service};
    use super::*;
    use metrics_util::debugging::DebuggingRecorder;

    /// Cache gauges are set at scrape time; the request path never runs moka's maintenance
    /// for them (it did on every miss).
    #[test]
    fn a_cache_miss_leaves_the_gauges_to_the_scrape() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let gauge_set = || {
            snapshotter
                .snapshot()
                .into_vec()
                .iter()
                .any(|(key, ..)| key.key().name() == m::CACHE_ENTRIES)
        };
        metrics::with_local_recorder(&recorder, || {
            on_one_thread(async {
                let speech = service();
                let job = speech.prepare(request("Hello there.")).await.unwrap();
                let spoken = speech.speak(job).await.unwrap();
                assert_eq!(spoken.cache, CacheStatus::Miss);
                assert!(!gauge_set(), "a miss set the cache gauges");
                let stats = speech.stats().await;
                assert_eq!(stats.cache.entries, 1);
                assert!(gauge_set(), "stats() sets them");
            });
        });
    }

    #[test]
    fn validation_names_the_parameter_and_resolves_the_voice() {
        on_one_thread(async {
            let speech = service();
            let too_long = speech.prepare(request(&"a".repeat(101))).await.unwrap_err();
            assert!(matches!(
                too_long,
                SpeechError::Invalid {
                    param: "input",
                    reason: InvalidReason::TooLong,
                    ..
                }
            ));
            let mut fast = request("hi");
            fast.speed = Some(9.0);
            assert!(matches!(
                speech.prepare(fast).await,
                Err(SpeechError::Invalid { param: "speed", .. })
            ));
            let mut unknown = request("hi");
            unknown.voice = "klingon".into();
            assert!(matches!(
                speech.prepare(unknown).await,
                Err(SpeechError::UnknownVoice(_))
            ));
            let job = speech.prepare(request("hi")).await.unwrap();
            assert_eq!(job.voice().key.to_string(), "espeak/en-us");
            assert_eq!(job.params().speed, 1.0);
        });
    }

    #[test]
    fn live_sentences_are_encoded_in_order_behind_pauses() {
        on_one_thread(async {
            let speech = service();
            let mut live = speech
                .live(Request {
                    input: String::new(),
                    ..request("")
                })
                .await
                .unwrap();
            assert_eq!(live.sample_rate(), 22_050);
            let mut sentences = live.push_text("Hello there. Fine. How are you?").unwrap();
            sentences.extend(live.flush().unwrap());
            let [hello, fine, how] = <[_; 3]>::try_from(sentences).expect("three sentences");
            let mut hello = live.sentence(hello);
            let mut fine = live.sentence(fine);
            let mut how = live.sentence(how);
            let early = how.next_part().await.expect("audio");
            assert!(
                matches!(live.encode(early).await, Err(SpeechError::Encoding(_))),
                "out of order"
            );
            let mut bytes = 0;
            while let Some(part) = hello.next_part().await {
                bytes += live.encode(part).await.unwrap().len();
            }
            let hello = live.end_sentence(hello).unwrap();
            assert_eq!(hello.start_s, 0.0);
            assert!(hello.duration_s > 0.3, "{}", hello.duration_s);
            assert!(
                matches!(live.end_sentence(how), Err(SpeechError::Encoding(_))),
                "ended out of order"
            );
            while let Some(part) = fine.next_part().await {
                bytes += live.encode(part).await.unwrap().len();
            }
            let fine = live.end_sentence(fine).unwrap();
            let pause = fine.start_s - (hello.start_s + hello.duration_s);
            assert!((pause - 0.2).abs() < 1e-3, "pause of {pause} s");
            let bytes = bytes + live.finish().await.unwrap().len();
            let header = 44;
            let samples = (bytes - header) as f64 / 2.0;
            assert!(
                (samples / 22_050.0 - live.duration_s()).abs() < 1e-3,
                "{samples} samples in {} s",
                live.duration_s()
            );
        });
    }
}
