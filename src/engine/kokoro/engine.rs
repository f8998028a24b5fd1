//! The Kokoro engine and its voices: a request's text through the front end (phonemes, pieces
//! of at most 510 tokens, the pack's style row) into the shared model, and the durations the
//! model predicts back into word timings.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use candle_core::Device;
use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};

use super::blend::{Blend, BlendError};
use super::language::Language;
use super::names;
use super::packs::{Gender, Pack, PackDir, PackFile};
use super::phonemes::{self, phonemize_with};
use super::{phrases, split};
use crate::engine::{
    Engine, EngineError, Pcm, Phonemes, Pronunciation, SynthesisItem, Voice, VoiceInfo, WordTiming,
};
use crate::params::SPEED;
use omnivoice_models::kernels::Precision;
use omnivoice_models::kokoro::{Config, Kokoro, Weights};
use omnivoice_models::spare;

/// The model files of kokoro-onnx a Kokoro directory may hold, in the order they are
/// preferred: the int8 file is the smallest download and loads fastest; all three give the
/// same weights to within their precision.
pub const MODEL_FILES: [&str; 3] = [
    "kokoro-v1.0.int8.onnx",
    "kokoro-v1.0.fp16.onnx",
    "kokoro-v1.0.onnx",
];

/// Kokoro's output rate, fixed by its iSTFTNet generator.
const SAMPLE_RATE: u32 = 24_000;

/// Frames by which Kokoro's audio runs ahead of the durations it predicts: a word's sound
/// starts (and ends) about two frames (50 ms) before the frames its tokens are given. Measured
/// with `af_heart`, `am_michael` and `bf_emma` at speed 1 over 20 sentences with commas: where
/// a word follows a pause, the energy returned a median 55 ms before the token's first frame,
/// the first word of a sentence 52 ms before, and the energy fell a median 65 ms before the end
/// of a word ahead of a pause (hexgrad's pipeline takes 3 frames off its timestamps for the
/// same reason). `tests/kokoro.rs` holds word starts after pauses to their onsets.
const AUDIO_LEAD_FRAMES: usize = 2;

/// Blends remembered between resolving a name and loading it. A blend's voice id is its
/// [`Blend::cache_name`], which is not meant to be parsed again; past this many, the oldest
/// are forgotten (and such an id is then parsed anyway, which gives the same mix to within
/// rounding).
const REMEMBERED_BLENDS: usize = 1024;

/// The folder of a Kokoro directory that scripts/japanese-dictionary.sh fills.
const JAPANESE_DICTIONARY: &str = "japanese";

/// The model file of `dir`, the first of [`MODEL_FILES`] that exists.
pub fn model_file(dir: &Path) -> Option<PathBuf> {
    MODEL_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
}

pub struct KokoroEngine {
    dir: PathBuf,
    device: Device,
    /// What the decoder's and generator's convolutions run in (f32 off the CPU).
    precision: Precision,
    model_path: Option<PathBuf>,
    packs: RwLock<PackDir>,
    /// Loaded on the first voice's load (on a loader thread, never an async one) and kept
    /// for good: every voice shares it.
    model: Mutex<Option<Arc<Kokoro>>>,
    /// Hash of the model file, computed once, when first needed (92 MB take ≈ 0.3 s).
    model_hash: OnceLock<String>,
    blends: Mutex<BTreeMap<String, (u64, Blend)>>,
    blend_counter: Mutex<u64>,
}

impl KokoroEngine {
    /// The engine over `dir`: its packs (`voices/*.bin`, `voices/*.npy`, archives) and its
    /// model file ([`model_file`]); nothing is read yet but the directory listings and, when
    /// `japanese/` holds the Japanese dictionary, that dictionary (mapped, shared by the process).
    pub fn new(dir: impl Into<PathBuf>, device: Device) -> Self {
        let dir = dir.into();
        let japanese = dir.join(JAPANESE_DICTIONARY);
        if japanese.is_dir() {
            if let Err(e) = crate::text::japanese::load(&japanese) {
                tracing::warn!("Japanese voices stay unsupported: {e}");
            }
        }
        let packs = PackDir::scan(&dir);
        let model_path = model_file(&dir);
        Self {
            dir,
            device,
            precision: Precision::F32,
            model_path,
            packs: RwLock::new(packs),
            model: Mutex::new(None),
            model_hash: OnceLock::new(),
            blends: Mutex::new(BTreeMap::new()),
            blend_counter: Mutex::new(0),
        }
    }

    /// Loads the model in `requested` (`None`: the precision this CPU runs fastest). Only the
    /// decoder's and generator's convolutions change; durations and word timings do not.
    pub fn with_precision(self, requested: Option<Precision>) -> Self {
        let precision = crate::engine::cpu_precision(
            &self.device,
            requested,
            omnivoice_models::kokoro::auto_precision,
            "Kokoro model",
        );
        Self { precision, ..self }
    }

    /// The shared model, loading it on the first call.
    fn model(&self, voice: &str) -> Result<Arc<Kokoro>, EngineError> {
        let mut model = self.model.lock();
        if let Some(loaded) = model.as_ref() {
            return Ok(loaded.clone());
        }
        let path = self.model_path.as_ref().ok_or_else(|| {
            EngineError::load(
                voice,
                format!(
                    "{}: no Kokoro model file ({})",
                    self.dir.display(),
                    MODEL_FILES.join(", ")
                ),
            )
        })?;
        let started = std::time::Instant::now();
        // Hashed here, on the loader's thread, while the file is read anyway: the cache key
        // needs it, and it is the one part of a key that costs.
        self.model_hash();
        // ModelError names the file in every load error.
        let loaded = Weights::from_onnx(path, &self.device)
            .and_then(|weights| Kokoro::load(&Config::v1_0(), weights))
            .map(|model| model.with_precision(self.precision))
            .and_then(Kokoro::with_unpacked_released)
            .map_err(|e| EngineError::load(voice, e))?;
        let loaded = Arc::new(loaded);
        // The Japanese dictionary opened with the engine, before the settings were all checked
        // (when a bad one must be the only line on stderr); its size is reported here.
        let japanese_mib = crate::text::japanese::loaded().map(|g| g.dictionary_bytes() >> 20);
        tracing::info!(file = %path.display(), precision = %loaded.precision().describe(), seconds = started.elapsed().as_secs_f64(), japanese_dictionary_mib = ?japanese_mib, "Kokoro model loaded");
        *model = Some(loaded.clone());
        Ok(loaded)
    }

    /// The model file's hash: computed once, by whoever needs it first (the model's load, or
    /// the first cache key), always on a blocking thread.
    fn model_hash(&self) -> &str {
        self.model_hash.get_or_init(|| {
            let mut hasher = Sha256::new();
            match self.model_path.as_ref().map(std::fs::File::open) {
                Some(Ok(mut file)) => {
                    let _ = std::io::copy(&mut file, &mut hasher);
                }
                Some(Err(e)) => hasher.update(e.to_string().as_bytes()),
                None => hasher.update(b"no model"),
            }
            format!("{:x}", hasher.finalize())
        })
    }

    fn pack_file(&self, id: &str) -> Option<PackFile> {
        self.packs.read().get(id).cloned()
    }

    /// A client's name (pack id, OpenAI name, blend) as a blend of packs that can be spoken.
    fn parse(&self, name: &str) -> Result<Blend, BlendError> {
        let packs = self.packs.read();
        Blend::parse(name, |term| {
            let id = match packs.get(term) {
                Some(_) => term,
                None => names::openai_voice(term).filter(|id| packs.get(id).is_some())?,
            };
            packs
                .get(id)
                .filter(|p| p.traits.language.is_supported())
                .map(|p| p.id.clone())
        })
    }

    /// The language a blend is spoken in: that of its largest share.
    fn language(&self, blend: &Blend) -> Option<Language> {
        let packs = self.packs.read();
        blend
            .terms()
            .iter()
            .max_by(|a, b| a.coefficient.total_cmp(&b.coefficient))
            .and_then(|t| packs.get(&t.voice))
            .map(|p| p.traits.language)
    }

    /// The gender of a blend whose packs all have one; `None` for a mix of both.
    fn gender(&self, blend: &Blend) -> Option<Gender> {
        let packs = self.packs.read();
        let mut genders = blend
            .terms()
            .iter()
            .map(|t| packs.get(&t.voice).map(|p| p.traits.gender));
        let first = genders.next()??;
        genders.all(|g| g == Some(first)).then_some(first)
    }

    fn info(&self, id: &str, language: Language, gender: Option<Gender>) -> VoiceInfo {
        VoiceInfo {
            id: id.to_string(),
            engine: "kokoro".into(),
            language: language.tag().to_string(),
            sample_rate: SAMPLE_RATE,
            speakers: Vec::new(),
            gender: gender.map(|g| g.as_str().to_string()),
            unsupported: language.unsupported_reason(),
            design: None,
        }
    }

    /// Remembers `blend` under its voice id, so that loading that id finds it.
    fn remember(&self, id: &str, blend: Blend) {
        let mut counter = self.blend_counter.lock();
        *counter += 1;
        let mut blends = self.blends.lock();
        blends.insert(id.to_string(), (*counter, blend));
        if blends.len() > REMEMBERED_BLENDS {
            if let Some(oldest) = blends
                .iter()
                .min_by_key(|(_, (n, _))| *n)
                .map(|(k, _)| k.clone())
            {
                blends.remove(&oldest);
            }
        }
    }

    /// The blend behind a voice id that [`Engine::find_voice`] gave.
    fn blend_of(&self, id: &str) -> Option<Blend> {
        if let Some((_, blend)) = self.blends.lock().get(id) {
            return Some(blend.clone());
        }
        self.parse(id).ok()
    }

    fn load(&self, voice: &str) -> Result<KokoroVoice, EngineError> {
        let blend = self.blend_of(voice).ok_or_else(|| {
            EngineError::UnknownVoice(self.why_unknown(voice).unwrap_or_else(|| voice.into()))
        })?;
        let language = self
            .language(&blend)
            .ok_or_else(|| EngineError::UnknownVoice(voice.into()))?;
        if language == Language::Mandarin {
            // Its dictionaries (≈ 0.2 s, 41 MiB) load with the voice, not in its first request.
            crate::text::mandarin::preload().map_err(|why| EngineError::load(voice, why))?;
        }
        let pack = blend.mix(|id| {
            self.pack_file(id)
                .ok_or_else(|| EngineError::UnknownVoice(id.to_string()))?
                .load()
                .map_err(|e| EngineError::load(voice, e))
        })?;
        let model = self.model(voice)?;
        Ok(KokoroVoice {
            info: self.info(voice, language, self.gender(&blend)),
            model,
            pack,
            language,
        })
    }

    /// Why `voice` is no voice, in words for the client: a bad blend, a language this server
    /// cannot speak. `None` for a plain unknown name.
    pub fn why_unknown(&self, voice: &str) -> Option<String> {
        let packs = self.packs.read();
        let unsupported = |id: &str| {
            packs
                .get(id)
                .map(|p| p.traits.language)
                .filter(|l| !l.is_supported())
        };
        if let Some(language) = unsupported(voice) {
            let why = language.unsupported_reason().unwrap_or_default();
            return Some(format!(
                "Kokoro voice '{voice}' speaks {language}, which this server cannot speak yet: {why}"
            ));
        }
        drop(packs);
        match self.parse(voice) {
            Ok(_) => None,
            Err(BlendError::UnknownVoice(name)) if name == voice => None,
            Err(BlendError::UnknownVoice(name)) => Some(match unsupported_of(&self.packs.read(), &name) {
                Some(language) => format!("'{name}' in '{voice}' speaks {language}, which this server cannot speak yet."),
                None => format!("'{name}' in the blend '{voice}' is no Kokoro voice."),
            }),
            Err(e) => Some(format!("'{voice}' is no Kokoro voice or blend: {e}.")),
        }
    }
}

fn unsupported_of(packs: &PackDir, id: &str) -> Option<Language> {
    packs
        .get(id)
        .map(|p| p.traits.language)
        .filter(|l| !l.is_supported())
}

impl Engine for KokoroEngine {
    fn id(&self) -> &str {
        super::ID
    }

    fn speaks_first_phrase_apart(&self) -> bool {
        true
    }

    fn default_voice(&self) -> Option<&'static str> {
        Some(super::DEFAULT_VOICE)
    }

    fn is_installed(&self) -> bool {
        self.model_path.is_some()
    }

    fn voices(&self) -> Vec<VoiceInfo> {
        self.packs
            .read()
            .iter()
            .map(|p| self.info(&p.id, p.traits.language, Some(p.traits.gender)))
            .collect()
    }

    fn find_voice(&self, voice: &str) -> Option<VoiceInfo> {
        let blend = self.parse(voice).ok()?;
        let id = blend.cache_name();
        let language = self.language(&blend)?;
        let gender = self.gender(&blend);
        if blend.single().is_none() {
            self.remember(&id, blend);
        }
        Some(self.info(&id, language, gender))
    }

    fn why_unknown(&self, voice: &str) -> Option<String> {
        KokoroEngine::why_unknown(self, voice)
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        Ok(Arc::new(self.load(voice)?))
    }

    fn rescan(&self) -> Vec<String> {
        let found = PackDir::scan(&self.dir);
        let mut packs = self.packs.write();
        let before: BTreeSet<String> = packs.iter().map(|p| p.id.clone()).collect();
        let stale = before
            .into_iter()
            .filter(|id| found.get(id).is_none_or(|new| Some(new) != packs.get(id)))
            .collect();
        *packs = found;
        stale
    }

    fn fingerprint(&self, voice: &str) -> String {
        let model = self.model_hash();
        // A pack's file by its size and time: the model's hash is what costs.
        let mut hasher = Sha256::new();
        hasher.update(model.as_bytes());
        hasher.update(crate::engine::precision_suffix(self.precision).as_bytes());
        if let Some(blend) = self.blend_of(voice) {
            for term in blend.terms() {
                hasher.update(term.voice.as_bytes());
                hasher.update(term.coefficient.to_le_bytes());
                if let Some(file) = self.pack_file(&term.voice) {
                    if let Ok(meta) = std::fs::metadata(file.path()) {
                        hasher.update(meta.len().to_le_bytes());
                        hasher.update(format!("{:?}", meta.modified().ok()).as_bytes());
                    }
                }
            }
        }
        format!("{:x}", hasher.finalize())
    }
}

/// One pack (or blend) of Kokoro, with the shared model.
pub struct KokoroVoice {
    info: VoiceInfo,
    model: Arc<Kokoro>,
    pack: Pack,
    language: Language,
}

impl Voice for KokoroVoice {
    fn info(&self) -> &VoiceInfo {
        &self.info
    }

    fn phonemes(
        &self,
        text: &str,
        pronunciations: &[Pronunciation],
        language: Option<&str>,
    ) -> Result<Phonemes, EngineError> {
        let phonemes = phonemize_with(text, self.reads(language), pronunciations)
            .map_err(EngineError::synthesis)?;
        // One pass's framing, as the model is given it: a pad at each end.
        let ids = std::iter::once(0)
            .chain(
                super::vocab::tokenize(&phonemes.misaki)
                    .into_iter()
                    .map(i64::from),
            )
            .chain(std::iter::once(0))
            .collect();
        Ok(Phonemes {
            phonemes: phonemes.misaki,
            ids,
        })
    }

    fn unsayable(&self, ipa: &str, language: Option<&str>) -> Option<char> {
        phonemes::unsayable(ipa, self.reads(language))
    }

    /// Every language Kokoro phonemizes, in any voice's timbre (Kokoro-FastAPI's `lang_code`).
    fn reads_language(&self, language: &str) -> bool {
        Language::from_tag(language).is_some_and(Language::is_supported)
    }

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        // Phonemization is this thread's work too: no other worker may borrow its core.
        let _computing = spare::computing();
        // One item after another: a padded batch pays only on a GPU, and padding Kokoro's
        // instance norms would change the audio.
        for (index, item) in batch.iter().enumerate() {
            let pcm = self.synthesize(item)?;
            done(index, pcm);
        }
        Ok(())
    }

    /// A stream's first utterance as its first phrase and then the rest, when it has a phrase
    /// to speak first; any other whole.
    fn synthesize_in_pieces(
        &self,
        item: &SynthesisItem,
        piece: &mut dyn FnMut(Pcm) -> bool,
    ) -> Result<(), EngineError> {
        let _computing = spare::computing();
        match item.phrase_end {
            Some(cut) => phrases::in_two(item, cut, |part| self.synthesize(part), piece),
            None => {
                piece(self.synthesize(item)?);
                Ok(())
            }
        }
    }
}

impl KokoroVoice {
    /// The language text is phonemized in: `language` when it names one Kokoro speaks, else
    /// the voice's own.
    fn reads(&self, language: Option<&str>) -> Language {
        language
            .and_then(Language::from_tag)
            .filter(|l| l.is_supported())
            .unwrap_or(self.language)
    }

    /// One item: every piece of its tokens spoken in the pack's style row for that piece's
    /// length, the audio joined, and the words timed from the durations of their tokens.
    fn synthesize(&self, item: &SynthesisItem) -> Result<Pcm, EngineError> {
        // The request layer refuses speeds outside this range; the clamp keeps the engine
        // bounded when called some other way.
        let speed = item.params.speed.clamp(*SPEED.start(), *SPEED.end());
        let language = self.reads(item.language.as_deref());
        let phonemes = phonemize_with(&item.text, language, &item.pronunciations)
            .map_err(EngineError::synthesis)?;
        let pieces = split::pass_pieces(&phonemes, speed);
        let hop = self.model.config().samples_per_frame;
        let mut samples = Vec::new();
        // Per token of all pieces: its first and one-past-last sample in the item's audio.
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for piece in &pieces {
            let style = self.pack.style(piece.tokens.len());
            let spoken = self
                .model
                .synthesize(&piece.tokens, style, speed)
                .map_err(EngineError::synthesis)?;
            if item.word_timings {
                // durations: [pad, tokens…, pad]; the first pad's frames come before the first
                // token. The audio runs ahead of the durations by a couple of frames.
                let offset = samples.len();
                let pad = spoken.durations.first().copied().unwrap_or(0) as usize * hop;
                let mut at = offset + pad.saturating_sub(AUDIO_LEAD_FRAMES * hop);
                let inner = spoken.durations.len().saturating_sub(1);
                for &frames in spoken.durations.get(1..inner).unwrap_or(&[]) {
                    let end = at + frames as usize * hop;
                    spans.push((at, end));
                    at = end;
                }
            }
            samples.extend_from_slice(&spoken.audio);
        }
        let words = if item.word_timings {
            let words = split::word_tokens(
                &item.text,
                &phonemes,
                &pieces,
                language,
                &item.pronunciations,
            )
            .map_err(EngineError::synthesis)?;
            let total = samples.len();
            let mut previous_end = 0;
            Some(
                words
                    .into_iter()
                    .map(|word| {
                        let (start, end) = match (
                            spans.get(word.tokens.start),
                            word.tokens.end.checked_sub(1).and_then(|i| spans.get(i)),
                        ) {
                            (Some(&(start, _)), Some(&(_, end))) if !word.tokens.is_empty() => {
                                (start, end)
                            }
                            _ => (previous_end, previous_end),
                        };
                        let start = start.max(previous_end).min(total);
                        let end = end.max(start).min(total);
                        previous_end = end;
                        WordTiming {
                            text: word.text,
                            start,
                            end,
                        }
                    })
                    .collect::<Vec<_>>(),
            )
        } else {
            None
        };
        Ok(Pcm {
            samples,
            sample_rate: SAMPLE_RATE,
            words,
            continuity: None,
        })
    }
}
