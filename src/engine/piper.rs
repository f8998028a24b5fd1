//! The Piper engine: every Piper voice in the voices directory, served by our candle VITS.
//!
//! A Piper voice is `<name>.onnx` (weights) plus `<name>.onnx.json` (phonemes, audio and
//! inference settings). A `<name>.safetensors` written by `convert-voice` beside them loads
//! faster and is preferred. Voices are found by scanning the directory, so a client's voice
//! name is only ever looked up in that list — never joined into a path. Every voice is loaded
//! in the engine's [`Precision`] (on a CPU: f32 or bf16; `auto` picks the one this CPU runs
//! fastest), and the audio cache tells precisions apart through the voice fingerprint.
//!
//! A voice only sounds right when it hears the symbols it was trained on, which its config's
//! `phoneme_type` names: `espeak` (espeak-ng's IPA; the default) and `text` (the text's own
//! characters) are read here. The other types of piper1-gpl, Piper's successor (`pinyin`,
//! `japanese`, `hebrew`), need phonemizers this server does not have: such a voice is listed
//! with the reason it cannot be spoken, said once in the log, and a request for it is refused
//! as an unknown voice with that reason, never read as if it were another type.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

use candle_core::Device;
use sha2::{Digest, Sha256};

use super::{
    Engine, EngineError, Pcm, Phonemes, Pronunciation, SynthesisItem, Voice, VoiceInfo, WordTiming,
};
use crate::espeak;
use crate::metrics as m;
use crate::params::SynthesisParams;
use crate::text::phonemize::{phonemize_with, PhonemeIdMap};
use crate::text::words::{spoken_words, words_by_source, SpokenWord};
use omnivoice_models::spare;
use omnivoice_models::vits::{Precision, Sampling, Vits, VitsConfig, VitsInput, Weights};
use omnivoice_models::ModelError;

pub struct PiperEngine {
    dir: PathBuf,
    device: Device,
    /// What voices are loaded in: the setting resolved once (`auto` by this CPU, and `f32`
    /// on other devices, which have no reduced-precision kernels).
    precision: Precision,
    voices: RwLock<BTreeMap<String, Arc<VoiceFiles>>>,
}

/// The files of one voice found by a scan.
struct VoiceFiles {
    info: VoiceInfo,
    onnx: PathBuf,
    json: PathBuf,
    safetensors: Option<PathBuf>,
    /// Sizes and modification times of the files: a cheap "did they change" check for rescans.
    stamp: Vec<(u64, Option<std::time::SystemTime>)>,
    fingerprint: OnceLock<String>,
}

impl VoiceFiles {
    /// Hash of the model bytes, computed on first use (a 60 MB voice takes ~0.2 s).
    fn fingerprint(&self) -> &str {
        self.fingerprint.get_or_init(|| {
            let weights = self.safetensors.as_ref().unwrap_or(&self.onnx);
            let mut hasher = Sha256::new();
            for path in [weights, &self.json] {
                match std::fs::File::open(path) {
                    Ok(mut file) => {
                        let _ = std::io::copy(&mut file, &mut hasher);
                    }
                    Err(e) => hasher.update(e.to_string().as_bytes()),
                }
            }
            format!("{:x}", hasher.finalize())
        })
    }
}

impl PiperEngine {
    pub fn new(dir: impl Into<PathBuf>, device: Device) -> Self {
        let dir = dir.into();
        let found = scan(&dir);
        for (id, files) in &found {
            say_if_refused(id, files);
        }
        let voices = RwLock::new(found);
        Self {
            dir,
            device,
            precision: Precision::F32,
            voices,
        }
    }

    /// Loads voices in `requested` (`None`: the precision this CPU runs fastest).
    pub fn with_precision(self, requested: Option<Precision>) -> Self {
        let precision = super::cpu_precision(&self.device, requested, "Piper voices");
        Self { precision, ..self }
    }

    fn files(&self, voice: &str) -> Option<Arc<VoiceFiles>> {
        self.voices.read().get(voice).cloned()
    }

    fn load(&self, voice: &str) -> Result<PiperVoice, EngineError> {
        let files = self
            .files(voice)
            .ok_or_else(|| EngineError::UnknownVoice(voice.to_string()))?;
        // Requests never get here for a voice the scan refused (it is no voice to
        // `find_voice`); the config is read again, so a type changed since is refused too.
        if let Some(why) = &files.info.unsupported {
            return Err(EngineError::load(voice, why.clone()));
        }
        let config = read_json(&files.json).map_err(|e| EngineError::load(voice, e))?;
        let phoneme_type = PhonemeType::of(&config).map_err(|why| EngineError::load(voice, why))?;
        let model = match &files.safetensors {
            Some(path) => Weights::from_safetensors(path, &self.device),
            None => Weights::from_onnx(&files.onnx, &self.device),
        }
        .and_then(|weights| Vits::load(&VitsConfig::from_weights(&weights, &config)?, weights))
        .and_then(|model| model.with_precision(self.precision))
        .map_err(|e| EngineError::load(voice, e))?;
        tracing::info!(voice, precision = %model.precision().describe(), "Piper voice loaded");
        let phonemes =
            PhonemeIdMap::from_voice_json(&config).map_err(|e| EngineError::load(voice, e))?;
        let length_scale = model.config().length_scale;
        let espeak_voice = config["espeak"]["voice"]
            .as_str()
            .unwrap_or("en-us")
            .to_string();
        Ok(PiperVoice {
            info: files.info.clone(),
            model,
            phonemes,
            phoneme_type,
            espeak_voice,
            length_scale,
        })
    }
}

/// Says once, in one line, why a listed voice cannot be spoken (at startup, and for a voice
/// a rescan found new or changed).
fn say_if_refused(id: &str, files: &VoiceFiles) {
    if let Some(why) = &files.info.unsupported {
        tracing::warn!(voice = %id, "Piper voice '{id}' is listed but refused: {why}");
    }
}

/// What a voice's `phoneme_id_map` is keyed by: its config's `phoneme_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PhonemeType {
    /// espeak-ng's IPA: Piper's default, and what a config without the field means.
    Espeak,
    /// The text's own characters, NFD (voices trained without a phonemizer).
    Text,
}

/// piper1-gpl's phoneme types beyond `espeak` and `text`, with what it reads each with.
const OTHER_PIPER_TYPES: &[(&str, &str)] = &[
    (
        "pinyin",
        "Chinese pinyin that the g2pW model picks for each character in context",
    ),
    ("japanese", "OpenJTalk's readings and pitch accent"),
    (
        "hebrew",
        "vowel points restored by the Nakdimon model and a Hebrew IPA converter",
    ),
];

impl PhonemeType {
    /// The voice's phoneme type, or why this server would misread the voice.
    fn of(config: &serde_json::Value) -> Result<Self, String> {
        let name = match config.get("phoneme_type") {
            None => return Ok(Self::Espeak),
            Some(serde_json::Value::String(name)) => name.as_str(),
            // Piper's implementations disagree on a null (an error, or `text`): refused.
            Some(other) => {
                let shown: String = other.to_string().chars().take(40).collect();
                return Err(format!(
                    "phoneme_type {shown} is not the name of a phoneme type; the voice would be misread"
                ));
            }
        };
        match name {
            "espeak" => Ok(Self::Espeak),
            "text" => Ok(Self::Text),
            other => {
                let shown: String = other
                    .chars()
                    .take(40)
                    .flat_map(char::escape_debug)
                    .collect();
                let refused = format!(
                    "phoneme_type '{shown}' is not supported by this server; the voice would be misread"
                );
                Err(match OTHER_PIPER_TYPES.iter().find(|(n, _)| *n == other) {
                    Some((_, what)) => format!("{refused} (Piper reads it with {what})"),
                    None => refused,
                })
            }
        }
    }
}

fn scan(dir: &Path) -> BTreeMap<String, Arc<VoiceFiles>> {
    let mut voices = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        tracing::warn!(dir = %dir.display(), "voices directory cannot be read; no Piper voices");
        return voices;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("onnx") {
            continue;
        }
        let Some(stem) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        let json = path.with_extension("onnx.json");
        let config = match read_json(&json) {
            Ok(config) => config,
            Err(e) => {
                tracing::warn!(voice = %stem, error = %e, "skipping voice without a readable .onnx.json");
                continue;
            }
        };
        let safetensors = Some(path.with_extension("safetensors")).filter(|p| p.is_file());
        let info = voice_info(&stem, &config);
        let stamp = [Some(&path), Some(&json), safetensors.as_ref()]
            .into_iter()
            .flatten()
            .map(|p| std::fs::metadata(p).map_or((0, None), |m| (m.len(), m.modified().ok())))
            .collect();
        voices.insert(
            stem,
            Arc::new(VoiceFiles {
                info,
                onnx: path,
                json,
                safetensors,
                stamp,
                fingerprint: OnceLock::new(),
            }),
        );
    }
    voices
}

/// A voice file that could not be read or parsed, with the I/O or JSON error why.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
struct FileError {
    path: PathBuf,
    source: Box<dyn std::error::Error + Send + Sync>,
}

fn read_json(path: &Path) -> Result<serde_json::Value, FileError> {
    let file_error = |source: Box<dyn std::error::Error + Send + Sync>| FileError {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_error(e.into()))?;
    serde_json::from_str(&text).map_err(|e| file_error(e.into()))
}

fn voice_info(id: &str, config: &serde_json::Value) -> VoiceInfo {
    let language = config["language"]["code"]
        .as_str()
        .or_else(|| config["espeak"]["voice"].as_str())
        .unwrap_or("und")
        .replace('_', "-");
    let sample_rate = config["audio"]["sample_rate"].as_u64().unwrap_or(22050) as u32;
    // Speakers in id order, so a speaker's position is its id.
    let mut speakers: Vec<(u64, String)> = config["speaker_id_map"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(name, id)| Some((id.as_u64()?, name.clone())))
                .collect()
        })
        .unwrap_or_default();
    speakers.sort();
    VoiceInfo {
        id: id.to_string(),
        engine: "piper".into(),
        language,
        sample_rate,
        speakers: speakers.into_iter().map(|(_, name)| name).collect(),
        gender: None,
        unsupported: PhonemeType::of(config).err(),
        design: None,
    }
}

impl Engine for PiperEngine {
    fn id(&self) -> &str {
        "piper"
    }

    fn voices(&self) -> Vec<VoiceInfo> {
        self.voices
            .read()
            .values()
            .map(|v| v.info.clone())
            .collect()
    }

    fn rescan(&self) -> Vec<String> {
        let found = scan(&self.dir);
        let mut voices = self.voices.write();
        for (id, files) in &found {
            if voices.get(id).is_none_or(|old| old.stamp != files.stamp) {
                say_if_refused(id, files);
            }
        }
        let stale = voices
            .iter()
            .filter(|(id, old)| found.get(*id).is_none_or(|new| new.stamp != old.stamp))
            .map(|(id, _)| id.clone())
            .collect();
        *voices = found;
        stale
    }

    /// Only voices that can be spoken: a refused one is listed, but resolving it fails with
    /// [`why_unknown`](Engine::why_unknown)'s reason.
    fn find_voice(&self, voice: &str) -> Option<VoiceInfo> {
        self.files(voice)
            .filter(|f| f.info.unsupported.is_none())
            .map(|f| f.info.clone())
    }

    fn why_unknown(&self, voice: &str) -> Option<String> {
        let files = self.files(voice)?;
        let why = files.info.unsupported.as_ref()?;
        Some(format!("Piper voice '{voice}' cannot be spoken: {why}."))
    }

    fn fingerprint(&self, voice: &str) -> String {
        let precision = super::precision_suffix(self.precision);
        self.files(voice)
            .map(|f| format!("{}{precision}", f.fingerprint()))
            .unwrap_or_default()
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        Ok(Arc::new(self.load(voice)?))
    }
}

pub struct PiperVoice {
    info: VoiceInfo,
    model: Vits,
    phonemes: PhonemeIdMap,
    phoneme_type: PhonemeType,
    espeak_voice: String,
    /// The voice's duration multiplier; the noise defaults live in the model's config.
    length_scale: f32,
}

impl Voice for PiperVoice {
    fn info(&self) -> &VoiceInfo {
        &self.info
    }

    fn computes_batches_at_once(&self) -> bool {
        !self.model.device().is_cpu()
    }

    fn phonemes(
        &self,
        text: &str,
        pronunciations: &[Pronunciation],
        language: Option<&str>,
    ) -> Result<Phonemes, EngineError> {
        let ipa = self.phoneme_string(text, pronunciations, language)?;
        Ok(Phonemes {
            ids: self.phonemes.ids(&ipa),
            phonemes: ipa,
        })
    }

    fn unsayable(&self, ipa: &str, _language: Option<&str>) -> Option<char> {
        self.phonemes.first_unknown(ipa)
    }

    /// An espeak voice reads any language espeak-ng has; a `text` voice only its own letters.
    fn reads_language(&self, language: &str) -> bool {
        self.phoneme_type == PhonemeType::Espeak && espeak::voice_of_language(language).is_some()
    }

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        // Phonemization is this thread's work too: no other worker may borrow its core.
        let _computing = spare::computing();
        // Every item becomes one or more model inputs ("pieces"), in item order.
        let mut inputs = Vec::with_capacity(batch.len());
        let mut owners = Vec::with_capacity(batch.len());
        // Where each phoneme character went, for the items that want word timings.
        let mut traces = Vec::with_capacity(batch.len());
        let mut ipas = Vec::with_capacity(batch.len());
        for (index, item) in batch.iter().enumerate() {
            let (pieces, ipa) = self.model_inputs(item)?;
            for (input, trace) in pieces {
                inputs.push(input);
                owners.push(index);
                traces.push(trace);
            }
            ipas.push(ipa);
        }
        // On a GPU one padded forward pass computes a whole batch in parallel; passes hold as
        // many pieces as the batch has items, so a split item never makes a pass larger than a
        // batch of unsplit ones. On a CPU the kernels go through the inputs one after another
        // anyway, so padding is pure extra work (measured 2.75× slower for 8 mixed sentences,
        // docs/performance.md), and running pieces one by one also lets each item be answered
        // as soon as it is done. Same audio either way: batch equivalence is tested.
        let per_pass = if self.model.device().is_cpu() {
            1
        } else {
            batch.len()
        };
        let rate = self.model.sample_rate();
        let hop = self.model.config().hop_length;
        let mut samples = Vec::new();
        // Per phoneme character of the current item: its first and one-past-last sample.
        let mut spans: Vec<Option<(usize, usize)>> = Vec::new();
        for (pass, chunk) in inputs.chunks(per_pass).enumerate() {
            let audio = self.model.synthesize_timed(chunk).map_err(failed)?;
            for (offset, piece) in audio.into_iter().enumerate() {
                let i = pass * per_pass + offset;
                let owner = owners[i];
                if batch[owner].word_timings {
                    spans.resize(ipas[owner].chars().count(), None);
                    trace_chars(
                        &mut spans,
                        &traces[i],
                        &piece.frames_per_id,
                        hop,
                        samples.len(),
                    );
                }
                samples.extend_from_slice(&piece.samples);
                if owners.get(i + 1) != Some(&owner) {
                    let item = &batch[owner];
                    let words = if item.word_timings {
                        let words = self.word_timings(item, &ipas[owner], &spans)?;
                        spans.clear();
                        Some(words)
                    } else {
                        None
                    };
                    let pcm = Pcm {
                        samples: std::mem::take(&mut samples),
                        sample_rate: rate,
                        words,
                        continuity: None,
                    };
                    done(owner, pcm);
                }
            }
        }
        Ok(())
    }

    fn synthesize_in_pieces(
        &self,
        item: &SynthesisItem,
        piece: &mut dyn FnMut(Pcm) -> bool,
    ) -> Result<(), EngineError> {
        if !self.model.device().is_cpu() {
            // A GPU computes the whole utterance in about the time of one window.
            return self.synthesize_each(std::slice::from_ref(item), &mut |_, pcm| {
                piece(pcm);
            });
        }
        let _computing = spare::computing();
        let (inputs, ipa) = self.model_inputs(item)?;
        let rate = self.model.sample_rate();
        let hop = self.model.config().hop_length;
        let passes = inputs.len();
        let mut spans: Vec<Option<(usize, usize)>> = Vec::new();
        // The words, once the last pass's durations are known: they go out with its first
        // chunk, so that a listener can show each word as its audio plays.
        let words: RefCell<Option<Result<Vec<WordTiming>, EngineError>>> = RefCell::new(None);
        let mut offset = 0;
        for (pass, (input, trace)) in inputs.into_iter().enumerate() {
            let mut listening = true;
            let done = self
                .model
                .synthesize_windowed_timed(
                    &input,
                    FIRST_WINDOW_FRAMES,
                    LATER_WINDOW_FRAMES,
                    &mut |frames_per_id| {
                        if !item.word_timings {
                            return;
                        }
                        spans.resize(ipa.chars().count(), None);
                        trace_chars(&mut spans, &trace, frames_per_id, hop, offset);
                        if pass + 1 == passes {
                            *words.borrow_mut() = Some(self.word_timings(item, &ipa, &spans));
                        }
                    },
                    &mut |chunk| {
                        let mut pcm = Pcm::new(chunk.to_vec(), rate);
                        let mut known = words.borrow_mut();
                        if matches!(*known, Some(Ok(_))) {
                            pcm.words = known.take().and_then(Result::ok);
                        }
                        drop(known);
                        listening = piece(pcm);
                        listening
                    },
                )
                .map_err(failed)?;
            if !listening {
                return Ok(());
            }
            offset += done.samples;
        }
        if let Some(Err(e)) = words.into_inner() {
            return Err(e);
        }
        Ok(())
    }
}

/// The model's view of a request's knobs, with this model input's own seed.
fn sampling(params: &SynthesisParams, seed: u64) -> Sampling {
    Sampling {
        speed: params.speed,
        seed,
        speaker: params.speaker,
        noise_scale: params.noise_scale,
        noise_w: params.noise_w,
    }
}

fn failed(e: ModelError) -> EngineError {
    EngineError::synthesis(e)
}

/// Frames in the first window of an utterance computed in pieces (16 frames: 0.19 s of audio
/// for a 22 kHz voice), then in every later one: the first is small so that it is ready
/// soon, the later ones large so that halos recomputed at window edges cost little (4–10 %,
/// docs/performance.md §9).
const FIRST_WINDOW_FRAMES: usize = 16;
const LATER_WINDOW_FRAMES: usize = 128;

/// Which phoneme ids each traced phoneme character of a model input became.
type CharTrace = Vec<(usize, std::ops::Range<usize>)>;

impl PiperVoice {
    /// The espeak-ng voice that phonemizes text in `language`: the voice's own when `None`.
    fn espeak_voice(&self, language: Option<&str>) -> &str {
        language
            .and_then(espeak::voice_of_language)
            .unwrap_or(&self.espeak_voice)
    }

    /// The model inputs an item becomes (more than one when its phoneme ids exceed a pass),
    /// each with where its phoneme characters went (for word timings; empty when the item
    /// asks for none), and the item's phonemes.
    fn model_inputs(
        &self,
        item: &SynthesisItem,
    ) -> Result<(Vec<(VitsInput, CharTrace)>, String), EngineError> {
        let ipa =
            self.phoneme_string(&item.text, &item.pronunciations, item.language.as_deref())?;
        let noise_w = item.params.noise_w.unwrap_or(self.model.config().noise_w);
        let limit = ids_per_pass(item.params.speed, self.length_scale, noise_w);
        let pieces = self.phonemes.traced_pieces(&ipa, limit);
        if pieces.len() > 1 {
            metrics::counter!(m::UTTERANCES_SPLIT).increment(1);
        }
        let inputs = pieces
            .into_iter()
            .enumerate()
            .map(|(n, piece)| {
                metrics::histogram!(m::UTTERANCE_PHONEME_IDS).record(piece.ids.len() as f64);
                let input = VitsInput {
                    ids: piece.ids,
                    length_scale: self.length_scale,
                    // Piece 0 keeps the item's seed: an unsplit item sounds as it always did.
                    sampling: sampling(
                        &item.params,
                        item.params.item_seed().wrapping_add(n as u64),
                    ),
                };
                let trace = if item.word_timings {
                    piece.chars
                } else {
                    Vec::new()
                };
                (input, trace)
            })
            .collect();
        Ok((inputs, ipa))
    }

    /// What the model is given for `text`, one character per symbol: espeak-ng's IPA, or a
    /// `text` voice's characters of the text.
    /// A `text` voice has no phonemes to give words: it reads `pronunciations`' words as
    /// written.
    fn phoneme_string(
        &self,
        text: &str,
        pronunciations: &[Pronunciation],
        language: Option<&str>,
    ) -> Result<String, EngineError> {
        match self.phoneme_type {
            PhonemeType::Espeak => {
                phonemize_with(text, pronunciations, self.espeak_voice(language))
                    .map_err(EngineError::synthesis)
            }
            PhonemeType::Text => Ok(self.phonemes.read_text(text).phonemes),
        }
    }

    /// The words of `text` with their spans of `ipa`, its [`phoneme_string`](Self::phoneme_string).
    fn spoken_words(
        &self,
        item: &SynthesisItem,
        ipa: &str,
    ) -> Result<Vec<SpokenWord>, EngineError> {
        let text = &item.text;
        match self.phoneme_type {
            PhonemeType::Espeak => {
                let voice = self.espeak_voice(item.language.as_deref());
                spoken_words(text, ipa, voice, &item.pronunciations).map_err(EngineError::synthesis)
            }
            PhonemeType::Text => Ok(words_by_source(
                text,
                &self.phonemes.read_text(text).sources,
            )),
        }
    }

    /// When each spoken word of `text` starts and ends, from the samples its phoneme
    /// characters got (`spans`, indexed like the characters of `ipa`).
    fn word_timings(
        &self,
        item: &SynthesisItem,
        ipa: &str,
        spans: &[Option<(usize, usize)>],
    ) -> Result<Vec<WordTiming>, EngineError> {
        let words = self.spoken_words(item, ipa)?;
        let mut previous_end = 0;
        Ok(words
            .into_iter()
            .map(|word| {
                let mut timed = spans[word.phonemes].iter().flatten();
                let (start, end) = match timed.next() {
                    Some(&(start, end)) => (start, timed.last().map_or(end, |&(_, end)| end)),
                    None => (previous_end, previous_end),
                };
                let start = start.max(previous_end);
                let end = end.max(start);
                previous_end = end;
                WordTiming {
                    text: word.text,
                    start,
                    end,
                }
            })
            .collect())
    }
}

/// Records in `spans` the samples each traced character got in a piece whose ids lasted
/// `frames_per_id` frames of `hop` samples and that starts at sample `offset` of the item.
fn trace_chars(
    spans: &mut [Option<(usize, usize)>],
    chars: &[(usize, std::ops::Range<usize>)],
    frames_per_id: &[usize],
    hop: usize,
    offset: usize,
) {
    let mut before = Vec::with_capacity(frames_per_id.len() + 1);
    before.push(0);
    for frames in frames_per_id {
        before.push(before.last().copied().unwrap_or(0) + frames);
    }
    let at = |id: usize| offset + before[id.min(frames_per_id.len())] * hop;
    for (char, ids) in chars {
        let (start, end) = (at(ids.start), at(ids.end));
        if let Some(span) = spans.get_mut(*char) {
            let merged = span.map_or((start, end), |(s, e)| (s.min(start), e.max(end)));
            *span = Some(merged);
        }
    }
}

/// Most phoneme ids in one forward pass at the voice's natural rate. The model's work and
/// memory grow with its input (memory with the audio it makes, ≈ 10 MiB per second; the text
/// encoder's attention with the square of the ids), so an utterance with more ids is cut into
/// pieces at word boundaries and their audio joined. English averages 38 ids per second of
/// audio with `en_US-joe-medium` (docs/performance.md), so this is ≈ 20 s of audio: far more
/// than a sentence needs, and the 400-character utterances of unpunctuated text stay bounded.
pub const MAX_IDS_PER_PASS: usize = 768;

/// The fewest ids a pass is cut to however slow the speech: a few words.
const MIN_IDS_PER_PASS: usize = 64;

/// Piper's usual `noise_w`; more duration noise makes phonemes longer on average.
const USUAL_NOISE_W: f32 = 0.8;

/// The id limit for speech made longer by `speed` < 1, the voice's `length_scale` > 1 or a
/// `noise_w` above the usual: as many ids as make ≈ 20 s of audio at that rate, so slow speech
/// does not make a pass longer. Measured: 768 ids at noise_w 2 gave 2.15× the audio of
/// noise_w 0.8, hence one more "speed unit" per unit of noise_w above the usual.
fn ids_per_pass(speed: f32, length_scale: f32, noise_w: f32) -> usize {
    let longer = length_scale / speed * (1.0 + (noise_w - USUAL_NOISE_W).max(0.0));
    ((MAX_IDS_PER_PASS as f32 / longer.max(1.0)) as usize).clamp(MIN_IDS_PER_PASS, MAX_IDS_PER_PASS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::phonemize::phonemize;

    /// Pieces of a long sentence, and of one split into several passes, joined equal the
    /// whole-item audio with the same seed, and carry the same word timings at the end.
    /// `item`'s audio computed whole.
    fn whole_of(voice: &impl Voice, item: &SynthesisItem) -> Pcm {
        let mut whole = None;
        voice
            .synthesize_each(std::slice::from_ref(item), &mut |_, pcm| whole = Some(pcm))
            .unwrap();
        whole.expect("audio")
    }

    /// `item`'s audio computed in pieces, as a stream takes it.
    fn pieces_of(voice: &impl Voice, item: &SynthesisItem) -> Vec<Pcm> {
        let mut pieces = Vec::new();
        voice
            .synthesize_in_pieces(item, &mut |pcm| {
                pieces.push(pcm);
                true
            })
            .unwrap();
        pieces
    }

    #[test]
    fn pieces_join_to_the_whole_item_with_its_words() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/voices");
        let voice = PiperEngine::new(dir, Device::Cpu)
            .load("en_US-joe-medium")
            .expect("the default voice in voices/");
        let long = "The old lighthouse keeper walked slowly along the narrow rocky path that \
                    wound its way up the steep green hill toward the tall white tower.";
        let many_passes = "word ".repeat(400);
        for (text, noise) in [
            (long, Some(0.0)),
            (long, None),
            (many_passes.as_str(), None),
        ] {
            let item = SynthesisItem {
                text: text.to_string(),
                params: SynthesisParams {
                    seed: Some(7),
                    noise_scale: noise,
                    ..SynthesisParams::default()
                },
                word_timings: true,
                in_pieces: true,
                pronunciations: Vec::new(),
                language: None,
                continuation: Default::default(),
            };
            let whole = whole_of(&voice, &item);
            let pieces = pieces_of(&voice, &item);
            assert!(pieces.len() > 2, "{} pieces", pieces.len());
            let joined: Vec<f32> = pieces.iter().flat_map(|p| p.samples.clone()).collect();
            assert_eq!(joined.len(), whole.samples.len());
            let diff = joined
                .iter()
                .zip(&whole.samples)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(diff < 1e-4, "largest difference {diff}");
            // One piece carries the words, as soon as the last pass's durations are known:
            // with the very first audio when the item is one pass.
            let carriers: Vec<usize> = (0..pieces.len())
                .filter(|&i| pieces[i].words.is_some())
                .collect();
            assert_eq!(carriers.len(), 1, "words on pieces {carriers:?}");
            let words = pieces[carriers[0]].words.clone();
            assert!(words.as_ref().is_some_and(|w| !w.is_empty()));
            assert_eq!(words, whole.words);
            if text == long {
                assert_eq!(carriers, [0]);
            } else {
                assert!(
                    carriers[0] > 0,
                    "a split item's words wait for its last pass"
                );
            }
        }
        // A listener that goes away stops the computation after its answer.
        let mut calls = 0;
        voice
            .synthesize_in_pieces(&SynthesisItem::new(long), &mut |_| {
                calls += 1;
                false
            })
            .unwrap();
        assert_eq!(calls, 1);
    }

    fn joe_config() -> serde_json::Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/voices/en_US-joe-medium.onnx.json"
        );
        read_json(Path::new(path)).expect("the default voice's config in voices/")
    }

    /// joe's config as a `text` voice: its ids for the ASCII characters its IPA map has (the
    /// letters but `g`, which IPA writes `ɡ`), so that letters are close to their sounds.
    fn letters_config() -> serde_json::Value {
        let mut config = joe_config();
        let joe = config["phoneme_id_map"].as_object().unwrap().clone();
        let mut letters: serde_json::Map<String, serde_json::Value> = joe
            .iter()
            .filter(|(key, _)| key.is_ascii())
            .map(|(key, ids)| (key.clone(), ids.clone()))
            .collect();
        letters.insert("g".into(), joe["ɡ"].clone());
        config["phoneme_id_map"] = letters.into();
        config["phoneme_type"] = "text".into();
        config
    }

    /// A voices directory of joe's model (linked) under each name, with each one's config.
    fn voices_with(configs: &[(&str, serde_json::Value)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let model = concat!(env!("CARGO_MANIFEST_DIR"), "/voices/en_US-joe-medium.onnx");
        for (name, config) in configs {
            std::os::unix::fs::symlink(model, dir.path().join(format!("{name}.onnx"))).unwrap();
            let json = dir.path().join(format!("{name}.onnx.json"));
            std::fs::write(json, config.to_string()).unwrap();
        }
        dir
    }

    fn with_type(phoneme_type: serde_json::Value) -> serde_json::Value {
        let mut config = joe_config();
        config["phoneme_type"] = phoneme_type;
        config
    }

    #[test]
    fn phoneme_type_is_read_from_the_config() {
        let of = |config: serde_json::Value| PhonemeType::of(&config);
        assert_eq!(of(serde_json::json!({})), Ok(PhonemeType::Espeak));
        assert_eq!(
            of(serde_json::json!({"phoneme_type": "espeak"})),
            Ok(PhonemeType::Espeak)
        );
        assert_eq!(
            of(serde_json::json!({"phoneme_type": "text"})),
            Ok(PhonemeType::Text)
        );
        let pinyin = of(serde_json::json!({"phoneme_type": "pinyin"})).unwrap_err();
        assert!(
            pinyin.starts_with(
                "phoneme_type 'pinyin' is not supported by this server; the voice would be misread"
            ) && pinyin.contains("g2pW"),
            "{pinyin}"
        );
        for (name, reader) in [("japanese", "OpenJTalk"), ("hebrew", "Nakdimon")] {
            let why = of(serde_json::json!({ "phoneme_type": name })).unwrap_err();
            assert!(
                why.starts_with(&format!("phoneme_type '{name}' is not supported"))
                    && why.contains(reader),
                "{why}"
            );
        }
        // Names are exact, and anything else is refused too: never read as espeak.
        for refused in [
            serde_json::json!("Espeak"),
            serde_json::json!("openjtalk"),
            serde_json::json!(""),
            serde_json::json!(null),
            serde_json::json!(3),
            serde_json::json!(["espeak"]),
        ] {
            let why = of(serde_json::json!({ "phoneme_type": refused })).unwrap_err();
            assert!(
                why.starts_with("phoneme_type ") && why.ends_with("the voice would be misread"),
                "{refused}: {why}"
            );
        }
        let long = "x\n".repeat(100);
        let why = of(serde_json::json!({ "phoneme_type": long })).unwrap_err();
        assert!(why.len() < 200 && !why.contains('\n'), "{why}");
    }

    #[test]
    fn voices_of_other_phoneme_types_are_listed_but_never_loaded() {
        let mut no_type = joe_config();
        no_type.as_object_mut().unwrap().remove("phoneme_type");
        let dir = voices_with(&[
            ("espeak", with_type("espeak".into())),
            ("untyped", no_type),
            ("letters", letters_config()),
            ("zh", with_type("pinyin".into())),
            ("ja", with_type("japanese".into())),
            ("odd", with_type(7.into())),
        ]);
        let engine = PiperEngine::new(dir.path(), Device::Cpu);
        let listed: BTreeMap<String, Option<String>> = engine
            .voices()
            .into_iter()
            .map(|v| (v.id, v.unsupported))
            .collect();
        assert_eq!(listed.len(), 6, "{listed:?}");
        for id in ["espeak", "untyped", "letters"] {
            assert_eq!(listed[id], None, "{id}");
            assert!(engine.find_voice(id).is_some(), "{id}");
            assert_eq!(engine.why_unknown(id), None, "{id}");
        }
        assert!(listed["zh"]
            .as_ref()
            .unwrap()
            .starts_with("phoneme_type 'pinyin' is not supported"));
        assert!(listed["ja"]
            .as_ref()
            .unwrap()
            .starts_with("phoneme_type 'japanese'"));
        assert!(listed["odd"]
            .as_ref()
            .unwrap()
            .starts_with("phoneme_type 7 "));
        for id in ["zh", "ja", "odd"] {
            assert!(engine.find_voice(id).is_none(), "{id} resolves to nothing");
            let why = engine.why_unknown(id).unwrap();
            assert!(
                why.starts_with(&format!(
                    "Piper voice '{id}' cannot be spoken: phoneme_type "
                )),
                "{why}"
            );
            let Err(e) = engine.load_voice(id) else {
                panic!("{id} loaded");
            };
            assert!(e.to_string().contains("phoneme_type"), "{e}");
        }
        assert_eq!(engine.why_unknown("nothing"), None);

        // A config changed to another type since the scan is refused by the load itself, and
        // the next rescan lists the voice as refused (and releases a loaded copy).
        let json = dir.path().join("letters.onnx.json");
        std::fs::write(&json, with_type("pinyin".into()).to_string()).unwrap();
        let Err(e) = engine.load_voice("letters") else {
            panic!("a voice turned pinyin loaded");
        };
        assert!(e.to_string().contains("phoneme_type 'pinyin'"), "{e}");
        let stale = engine.rescan();
        assert!(stale.contains(&"letters".to_string()), "{stale:?}");
        assert!(engine.find_voice("letters").is_none());
    }

    #[test]
    fn unsayable_symbols_are_those_the_map_lacks_after_replacements() {
        let mut replaced = with_type("espeak".into());
        replaced["phoneme_map"] = serde_json::json!({"Q": ["k", "w"], "X": ["k", "Q"]});
        let dir = voices_with(&[("replaced", replaced)]);
        let voice = PiperEngine::new(dir.path(), Device::Cpu)
            .load("replaced")
            .unwrap();
        assert_eq!(voice.phoneme_type, PhonemeType::Espeak);
        assert_eq!(voice.unsayable("həlˈoʊ wˈɜːld", None), None);
        assert_eq!(
            voice.unsayable("Q", None),
            None,
            "replaced by phonemes joe has"
        );
        assert_eq!(
            voice.unsayable("X", None),
            Some('Q'),
            "replaced by one it lacks"
        );
        assert_eq!(voice.unsayable("hə\u{05D0}", None), Some('\u{05D0}'));
        // An espeak voice is given espeak-ng's IPA, as before.
        let text = "Hello world.";
        let ipa = phonemize(text, "en-us").unwrap();
        let read = voice.phonemes(text, &[], None).unwrap();
        assert_eq!(read.ids, voice.phonemes.ids(&ipa));
        assert_eq!(read.phonemes, ipa);
    }

    #[test]
    fn a_text_voice_is_given_the_characters_of_the_text() {
        let dir = voices_with(&[("letters", letters_config())]);
        let voice = PiperEngine::new(dir.path(), Device::Cpu)
            .load("letters")
            .unwrap();
        assert_eq!(voice.phoneme_type, PhonemeType::Text);
        // The map has no capitals, so they are read in lower case; no espeak-ng IPA.
        let read = voice.phonemes("Hello, world", &[], None).unwrap();
        assert_eq!(read.phonemes, "hello, world");
        let joe = joe_config()["phoneme_id_map"].clone();
        let id = |c: char| joe[c.to_string()][0].as_i64().unwrap();
        let mut ids = vec![id('^'), id('_')];
        for c in "hello, world".chars() {
            ids.extend([id(c), id('_')]);
        }
        ids.push(id('$'));
        assert_eq!(read.ids, ids);
        assert_eq!(voice.unsayable("hello world", None), None);
        assert_eq!(
            voice.unsayable("həˈloʊ", None),
            Some('ə'),
            "IPA is no letter"
        );

        let item = SynthesisItem {
            word_timings: true,
            params: SynthesisParams {
                seed: Some(3),
                ..SynthesisParams::default()
            },
            ..SynthesisItem::new("Hello world, this is a test.")
        };
        let pcm = whole_of(&voice, &item);
        let seconds = pcm.duration_s();
        let rms =
            (pcm.samples.iter().map(|s| s * s).sum::<f32>() / pcm.samples.len() as f32).sqrt();
        assert!(
            (0.8..6.0).contains(&seconds) && rms > 0.02,
            "{seconds} s, rms {rms}"
        );
        let words = pcm.words.clone().expect("word timings");
        let texts: Vec<&str> = words.iter().map(|w| &item.text[w.text.clone()]).collect();
        assert_eq!(texts, ["Hello", "world", "this", "is", "a", "test"]);
        for pair in words.windows(2) {
            assert!(pair[0].end <= pair[1].start, "{words:?}");
        }
        assert!(words.iter().all(|w| w.start < w.end), "{words:?}");
        assert!(words.last().unwrap().end <= pcm.samples.len());
        // Computed in pieces, the same audio and words.
        let pieces = pieces_of(&voice, &item);
        let joined: Vec<f32> = pieces.iter().flat_map(|p| p.samples.clone()).collect();
        assert_eq!(joined.len(), pcm.samples.len());
        assert_eq!(pieces.iter().find_map(|p| p.words.clone()), pcm.words);
    }

    #[test]
    fn voice_info_reads_language_rate_and_speakers_in_id_order() {
        let config = serde_json::json!({
            "language": {"code": "en_GB"},
            "audio": {"sample_rate": 16000},
            "speaker_id_map": {"b": 1, "a": 0, "c": 2}
        });
        let info = voice_info("x", &config);
        assert_eq!(info.language, "en-GB");
        assert_eq!(info.sample_rate, 16000);
        assert_eq!(info.speakers, vec!["a", "b", "c"]);
    }

    #[test]
    fn scan_only_offers_voices_with_a_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lonely.onnx"), b"x").unwrap();
        std::fs::write(dir.path().join("ok.onnx"), b"x").unwrap();
        std::fs::write(
            dir.path().join("ok.onnx.json"),
            br#"{"audio":{"sample_rate":22050}}"#,
        )
        .unwrap();
        let engine = PiperEngine::new(dir.path(), Device::Cpu);
        let ids: Vec<String> = engine.voices().into_iter().map(|v| v.id).collect();
        assert_eq!(ids, vec!["ok"]);
        assert!(engine.find_voice("../ok").is_none());
        assert!(!engine.fingerprint("ok").is_empty());
    }

    #[test]
    fn slow_speech_gets_fewer_ids_per_pass() {
        assert_eq!(ids_per_pass(1.0, 1.0, 0.8), MAX_IDS_PER_PASS);
        assert_eq!(ids_per_pass(4.0, 1.0, 0.0), MAX_IDS_PER_PASS);
        assert_eq!(ids_per_pass(0.5, 1.0, 0.8), MAX_IDS_PER_PASS / 2);
        assert_eq!(ids_per_pass(1.0, 2.0, 0.5), MAX_IDS_PER_PASS / 2);
        assert_eq!(ids_per_pass(1.0, 1.0, 1.8), MAX_IDS_PER_PASS / 2);
        assert_eq!(ids_per_pass(0.25, 100.0, 2.0), MIN_IDS_PER_PASS);
    }

    /// Peak resident memory of this process so far, in MiB.
    fn peak_rss_mib() -> f64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / 1024.0)
    }

    /// What [`MAX_IDS_PER_PASS`] is chosen from: phoneme ids per second of audio with the real
    /// default voice, and the wall time and peak memory of passes around the limit. Run:
    /// `RAYON_NUM_THREADS=1 cargo test --lib measure_ids_per_second -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement with the real voice in voices/, not a check"]
    fn measure_ids_per_second_of_audio() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/voices");
        let voice = PiperEngine::new(dir, Device::Cpu)
            .load("en_US-joe-medium")
            .expect("the default voice in voices/");
        let pass_with = |ids: Vec<i64>, speed: f32, noise_w: f32| {
            let input = VitsInput {
                ids,
                length_scale: voice.length_scale,
                sampling: Sampling {
                    speed,
                    seed: 1,
                    noise_w: Some(noise_w),
                    ..Sampling::default()
                },
            };
            let started = std::time::Instant::now();
            let audio = voice.model.synthesize(&[input]).unwrap().remove(0);
            let seconds = audio.len() as f64 / f64::from(voice.model.sample_rate());
            (seconds, started.elapsed().as_secs_f64())
        };
        let pass = |ids, speed| pass_with(ids, speed, voice.model.config().noise_w);
        let ids_of = |text: &str| voice.phonemes.ids(&phonemize(text, "en-us").unwrap());
        let english = [
            "Hello world, this is a test of the speech server.",
            "The quick brown fox jumps over the lazy dog.",
            "Please call Stella and ask her to bring these things with her from the store.",
            "It was the best of times, it was the worst of times, it was the age of wisdom, \
             it was the age of foolishness.",
            "Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack \
             for her brother Bob.",
            "In the beginning the universe was created; this has made a lot of people very \
             angry and been widely regarded as a bad move.",
            "We also need a small plastic snake and a big toy frog for the kids.",
            "Speech synthesis turns written text into audio that sounds like a person reading \
             it aloud, one sentence at a time.",
        ];
        let (mut ids_total, mut seconds_total) = (0, 0.0);
        for text in english {
            let ids = ids_of(text);
            let n = ids.len();
            let (seconds, wall) = pass(ids, 1.0);
            println!(
                "{n:5} ids {seconds:6.2} s audio {:5.1} ids/s  {wall:5.2} s wall  {text:.40}",
                n as f64 / seconds
            );
            ids_total += n;
            seconds_total += seconds;
        }
        println!(
            "English: {ids_total} ids, {seconds_total:.2} s, {:.1} ids per second of audio",
            ids_total as f64 / seconds_total
        );

        // What one 400-character utterance of hostile text becomes, and its rate.
        let hostile = [
            ("CJK (read as \"Chinese letter\")", "中文字".repeat(134)),
            ("digits", "7".repeat(400)),
            ("one long word", "a".repeat(400)),
            ("punctuation", "!?.,;".repeat(80)),
            ("emoji", "😀🎉👍".repeat(67)),
            ("Arabic", "مرحبا بالعالم ".repeat(28)),
        ];
        for (name, text) in &hostile {
            let ipa = phonemize(&text.chars().take(400).collect::<String>(), "en-us").unwrap();
            let all = voice.phonemes.ids(&ipa).len();
            let first = voice.phonemes.pieces(&ipa, MAX_IDS_PER_PASS).remove(0);
            let n = first.len();
            let (seconds, wall) = pass(first, 1.0);
            println!(
                "{name}: 400 chars = {all} ids; first piece {n} ids {seconds:.2} s audio \
                 ({:.1} ids/s) {wall:.2} s wall",
                n as f64 / seconds
            );
        }

        // Passes of growing size: time and peak memory (VmHWM only grows, so go up in size).
        let text = english.join(" ").repeat(8);
        let all = ids_of(&text);
        println!("peak RSS with the voice loaded: {:.0} MiB", peak_rss_mib());
        let limit = MAX_IDS_PER_PASS;
        let w = voice.model.config().noise_w;
        let cases = [
            (ids_per_pass(0.25, 1.0, w), 0.25, w),
            (limit, 1.0, w),
            (ids_per_pass(1.0, 1.0, 2.0), 1.0, 2.0),
            (ids_per_pass(0.25, 1.0, 2.0), 0.25, 2.0),
            (limit, 1.0, 2.0),
            (2 * limit, 1.0, w),
            (4 * limit, 1.0, w),
        ];
        for (n, speed, noise_w) in cases {
            let mut ids = all[..n - 1].to_vec();
            ids.push(all[all.len() - 1]);
            let (seconds, wall) = pass_with(ids, speed, noise_w);
            println!(
                "{n:5} ids at speed {speed}, noise_w {noise_w}: {seconds:6.2} s audio, \
                 {wall:6.2} s wall, peak RSS {:.0} MiB",
                peak_rss_mib()
            );
        }
    }
}
