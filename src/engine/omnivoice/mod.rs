//! The OmniVoice engine: the checkpoint directory users download, loaded once and shared by
//! every voice, and the voices its requests name (`auto`, presets, designs; [`voices`]).
//!
//! A voice here is only an instruct or a clip to clone ([`cloning`]): all of them run the one
//! model, and its [`scheduler`] steps the utterances of every voice's batches together, each
//! joining at the next step and leaving at its last. OmniVoice predicts no durations per
//! token, so its audio comes without word timings, and the timestamp routes refuse it.

mod cloning;
mod scheduler;
pub mod selftest;
mod voices;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use candle_core::{DType, Device};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use super::{
    Continuation, Continuity, Engine, EngineError, Pcm, Reference, SynthesisItem, Voice, VoiceInfo,
    VoiceRequestError, Wanted, MULTILINGUAL,
};
use crate::params::Generation;
use crate::profiles::voice_files::{VoiceFile, VoiceFiles};
use crate::profiles::ProfileStore;
use cloning::{Clip, Cloning, Profiles, PROFILE};
use omnivoice_models::kernels::Precision;
use omnivoice_models::omnivoice::{self as model, Tts};
use omnivoice_models::spare;
use scheduler::Scheduler;
pub use voices::{Choice, AUTO, DESIGN, PRESETS};

/// The engine's id, as clients send it in `model`.
pub const ID: &str = "omnivoice";

/// The files a checkpoint directory must hold to be loaded.
pub const CHECKPOINT_FILES: [&str; 5] = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "audio_tokenizer/config.json",
    "audio_tokenizer/model.safetensors",
];

/// Whether `dir` holds an OmniVoice checkpoint (its files, not yet whether they load).
pub fn is_installed(dir: &Path) -> bool {
    CHECKPOINT_FILES.iter().all(|f| dir.join(f).is_file())
}

/// Checks the checkpoint in `dir` as loading would read it (configs, every tensor's name and
/// shape, tokenizer, codec) without reading the weights; the error names the file and tensor.
pub fn check_checkpoint(dir: &Path) -> Result<(), omnivoice_models::ModelError> {
    Tts::check_dir(dir)
}

pub struct OmniVoiceEngine {
    dir: PathBuf,
    device: Device,
    /// The codec's output rate and frames per second, read from its config before the model
    /// loads, so that voices can be listed without it.
    sample_rate: u32,
    frame_rate: f64,
    precision: Precision,
    /// Loaded with the first voice (on a loader thread) and kept: every voice shares it, and
    /// its scheduler.
    model: Mutex<Option<Loaded>>,
    fingerprint: OnceLock<String>,
    cloning: Arc<Cloning>,
    profiles: Option<Profiles>,
    voice_files: Option<Arc<VoiceFiles>>,
}

impl OmniVoiceEngine {
    pub fn new(dir: impl Into<PathBuf>, device: Device) -> Self {
        let dir = dir.into();
        // An unreadable config is reported when the model loads; until then, the release's.
        let (sample_rate, frame_rate) = Tts::rates_of(&dir).unwrap_or((24_000, 25));
        Self {
            dir,
            device,
            sample_rate,
            frame_rate: f64::from(frame_rate),
            precision: Precision::F32,
            model: Mutex::new(None),
            fingerprint: OnceLock::new(),
            cloning: Arc::default(),
            profiles: None,
            voice_files: None,
        }
    }

    /// Serves the profiles of `store` as voices, `clone:<id>` (or the bare id).
    pub fn with_profiles(self, store: Arc<ProfileStore>) -> Self {
        Self {
            profiles: Some(Profiles::new(store)),
            ..self
        }
    }

    /// Serves the voice files of `files` as voices, by their names.
    pub fn with_voice_files(self, files: Arc<VoiceFiles>) -> Self {
        Self {
            voice_files: Some(files),
            ..self
        }
    }

    /// The voice file a name stands for (`<name>`, or `<name>@<version>` as resolved), with
    /// its design in canonical form; `Err` says why the file of that name cannot be used.
    fn voice_file(&self, name: &str) -> Option<Result<(VoiceFile, String), String>> {
        let files = self.voice_files.as_ref()?;
        let name = name.trim();
        let (name, version) = match name.split_once('@') {
            Some((name, version)) => (name, Some(version)),
            None => (name, None),
        };
        if name.eq_ignore_ascii_case(AUTO) || name.contains(':') {
            return None;
        }
        let unusable = |why: String| format!("The voice file '{name}.txt' cannot be used: {why}");
        let Some(file) = files.get(name) else {
            return files.problem(name).map(|why| Err(unusable(why)));
        };
        if version.is_some_and(|v| v != file.version) {
            return Some(Err(format!(
                "The voice file '{name}.txt' changed meanwhile; try again."
            )));
        }
        Some(match voices::design_of(&file.design) {
            Ok(Some(design)) => Ok((file, design)),
            Ok(None) => Err(unusable("it names no voice attributes".into())),
            Err(e) => Err(unusable(e.to_string())),
        })
    }

    /// A voice file's voice: its design's, under the file's name.
    fn file_info(&self, id: String, design: String) -> VoiceInfo {
        VoiceInfo {
            id,
            ..self.info(&Choice::Design(design))
        }
    }

    /// The profile a name stands for (`clone:<id>`, `clone:<id>@<version>`, or a bare id that
    /// names no preset), with the version asked for, if any.
    fn profile_of(
        &self,
        name: &str,
    ) -> Option<(String, Option<String>, Arc<cloning::ProfileVoice>)> {
        let profiles = self.profiles.as_ref()?;
        let name = name.trim();
        let (id, explicit) = match name.get(..PROFILE.len()) {
            Some(head) if head.eq_ignore_ascii_case(PROFILE) => (&name[PROFILE.len()..], true),
            _ => (name, false),
        };
        if !explicit && voices::parse(id).is_ok() {
            return None;
        }
        let (id, version) = match id.split_once('@') {
            Some((id, version)) => (id, Some(version.to_string())),
            None => (id, None),
        };
        let voice = profiles.current(id)?;
        Some((id.to_string(), version, voice))
    }

    /// Runs the body's linear layers in `requested` (`None`: what this CPU runs fastest). On a
    /// GPU, bf16 asked for is the weights' own dtype (cuBLAS runs it); the codec stays `f32`.
    pub fn with_precision(self, requested: Option<Precision>) -> Self {
        let precision = if !self.device.is_cpu() && requested == Some(Precision::Bf16) {
            Precision::Bf16
        } else {
            super::cpu_precision(&self.device, requested, Precision::auto, "OmniVoice model")
        };
        Self { precision, ..self }
    }

    /// The shared model, loaded on the first call; every error names the file.
    pub fn model(&self) -> Result<Arc<Tts>, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.loaded()?.tts)
    }

    fn loaded(&self) -> Result<Loaded, Box<dyn std::error::Error + Send + Sync>> {
        let mut model = self.model.lock();
        if let Some(loaded) = model.as_ref() {
            return Ok(loaded.clone());
        }
        let started = std::time::Instant::now();
        let dtype = match self.precision {
            Precision::Bf16 if !self.device.is_cpu() => DType::BF16,
            _ => DType::F32,
        };
        let tts = Tts::load(&self.dir, dtype, &self.device)?.with_precision(self.precision)?;
        let tts = Arc::new(tts);
        // Off the CPU the precision is the weights' dtype, run by the device's own library.
        let precision = match self.device {
            candle_core::Device::Cpu => tts.precision().describe(),
            _ => format!("{} weights on the GPU", tts.precision()),
        };
        tracing::info!(dir = %self.dir.display(), %precision, seconds = started.elapsed().as_secs_f64(), "OmniVoice model loaded");
        let scheduler = Arc::new(Scheduler::start(tts.clone())?);
        let loaded = Loaded { tts, scheduler };
        *model = Some(loaded.clone());
        Ok(loaded)
    }

    /// Audio frames per second of the codec (25 for the release).
    pub fn frame_rate(&self) -> f64 {
        self.frame_rate
    }

    fn info(&self, choice: &Choice) -> VoiceInfo {
        VoiceInfo {
            id: choice.id(),
            engine: ID.into(),
            language: MULTILINGUAL.into(),
            sample_rate: self.sample_rate,
            speakers: Vec::new(),
            gender: choice.gender().map(str::to_string),
            unsupported: None,
            design: choice.instruct().map(str::to_string),
        }
    }

    fn clone_info(&self, id: String) -> VoiceInfo {
        VoiceInfo {
            id,
            engine: ID.into(),
            language: MULTILINGUAL.into(),
            sample_rate: self.sample_rate,
            speakers: Vec::new(),
            gender: None,
            unsupported: None,
            design: None,
        }
    }

    fn voice(
        &self,
        info: VoiceInfo,
        instruct: Option<String>,
        clip: Option<Arc<Clip>>,
    ) -> Result<Arc<dyn Voice>, EngineError> {
        let Loaded { tts, scheduler } =
            self.loaded().map_err(|e| EngineError::load(&info.id, e))?;
        Ok(Arc::new(OmniVoiceVoice {
            info,
            sample_rate: self.sample_rate,
            instruct,
            clip,
            reference: Mutex::new(None),
            cloning: self.cloning.clone(),
            fingerprint: self.fingerprint(""),
            tts,
            scheduler,
        }))
    }
}

impl Engine for OmniVoiceEngine {
    fn id(&self) -> &str {
        ID
    }

    /// OpenAI's own name: every preset answers to one.
    fn default_voice(&self) -> Option<&'static str> {
        Some("alloy")
    }

    /// Auto and the presets; designs are voices too, but too many to list
    /// (`GET /v1/voices` lists their attributes).
    fn voices(&self) -> Vec<VoiceInfo> {
        let mut voices: Vec<VoiceInfo> = std::iter::once(Choice::Auto)
            .chain(
                PRESETS
                    .iter()
                    .map(|&(name, design)| Choice::Preset(name, design)),
            )
            .map(|choice| self.info(&choice))
            .collect();
        if let Some(profiles) = &self.profiles {
            voices.extend(
                profiles
                    .ids()
                    .into_iter()
                    .map(|id| self.clone_info(format!("{PROFILE}{id}"))),
            );
        }
        if let Some(files) = &self.voice_files {
            for file in files.list() {
                if let Ok(Some(design)) = voices::design_of(&file.design) {
                    voices.push(self.file_info(file.name, design));
                }
            }
        }
        voices
    }

    fn find_voice(&self, voice: &str) -> Option<VoiceInfo> {
        if let Some(clip) = self.cloning.upload(voice) {
            return Some(self.clone_info(format!("{}{}", cloning::UPLOAD, clip.hash)));
        }
        if let Some((id, asked, profile)) = self.profile_of(voice) {
            // Pinned to the version read now: one request, one clip.
            let fresh = asked.is_none_or(|v| v == profile.version);
            return (fresh && profile.text.is_some())
                .then(|| self.clone_info(format!("{PROFILE}{id}@{}", profile.version)));
        }
        // A file outranks a preset of the same name: the operator made it.
        if let Some(found) = self.voice_file(voice) {
            let (file, design) = found.ok()?;
            return Some(self.file_info(format!("{}@{}", file.name, file.version), design));
        }
        voices::parse(voice).ok().map(|choice| self.info(&choice))
    }

    fn why_unknown(&self, voice: &str) -> Option<String> {
        if let Some((id, _, profile)) = self.profile_of(voice) {
            return Some(match profile.text {
                None => cloning::no_transcript(&id),
                Some(_) => format!("The voice profile '{id}' changed meanwhile; try again."),
            });
        }
        if let Some(Err(why)) = self.voice_file(voice) {
            return Some(why);
        }
        if self.profiles.is_some() && voice.trim().to_lowercase().starts_with(PROFILE) {
            return Some(format!(
                "There is no voice profile '{}' (POST /v1/voices/profiles makes one).",
                &voice.trim()[PROFILE.len()..]
            ));
        }
        match voices::parse(voice) {
            Err(voices::NameError::Design(message)) => Some(message),
            _ => Some(format!(
                "OmniVoice's voices are '{AUTO}', OpenAI's names and designs such as \
                 '{DESIGN}female, low pitch, british accent'."
            )),
        }
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        if let Some(clip) = self.cloning.upload(voice) {
            let info = self.clone_info(voice.to_string());
            return self.voice(info, None, Some(clip));
        }
        if let (Some(profiles), Some((id, Some(version), _))) =
            (&self.profiles, self.profile_of(voice))
        {
            let tts = self.model().map_err(|e| EngineError::load(voice, e))?;
            let clip = profiles
                .clip(&tts, &id, &version)
                .map_err(|why| EngineError::load(voice, why))?;
            let info = self.clone_info(voice.to_string());
            return self.voice(info, None, Some(Arc::new(clip)));
        }
        if let Some(found) = self.voice_file(voice) {
            let (_, design) = found.map_err(|why| EngineError::load(voice, why))?;
            let info = self.file_info(voice.to_string(), design.clone());
            return self.voice(info, Some(design), None);
        }
        let choice = voices::parse(voice).map_err(|_| EngineError::UnknownVoice(voice.into()))?;
        self.voice(
            self.info(&choice),
            choice.instruct().map(str::to_string),
            None,
        )
    }

    /// The files' sizes and times and the small files' contents: hashing gigabytes of
    /// weights at every start would cost seconds.
    fn fingerprint(&self, _voice: &str) -> String {
        self.fingerprint
            .get_or_init(|| {
                let mut hasher = Sha256::new();
                for file in CHECKPOINT_FILES {
                    let path = self.dir.join(file);
                    hasher.update(file.as_bytes());
                    if file.ends_with(".json") {
                        hasher.update(std::fs::read(&path).unwrap_or_default());
                    } else if let Ok(meta) = std::fs::metadata(&path) {
                        hasher.update(meta.len().to_le_bytes());
                        hasher.update(format!("{:?}", meta.modified().ok()).as_bytes());
                    }
                }
                hasher.update(super::precision_suffix(self.precision).as_bytes());
                format!("{:x}", hasher.finalize())
            })
            .clone()
    }

    fn voice_defaults(&self, voice: &str) -> Option<crate::params::VoiceDefaults> {
        if !is_file_voice(voice) {
            return None;
        }
        let (file, _) = self.voice_file(voice)?.ok()?;
        Some(file.defaults)
    }

    /// A clone (a profile or an uploaded clip) and a voice file outrank a design, as in the
    /// Python server's resolution order: they are the voice asked for.
    fn instructed_voice(
        &self,
        voice: &str,
        instructions: &str,
    ) -> Option<Result<String, VoiceRequestError>> {
        if is_clone(voice) || is_file_voice(voice) {
            return Some(Ok(voice.to_string()));
        }
        Some(match voices::design_of(instructions) {
            Ok(Some(design)) => Ok(Choice::Design(design).id()),
            Ok(None) => Ok(AUTO.to_string()),
            Err(e) => Err(VoiceRequestError::refused(e)),
        })
    }

    fn takes_generation(&self) -> bool {
        true
    }

    /// As the official `generate` speaks a text: one length estimate and one voice for all of
    /// it, chunked (with the first chunk as the rest's reference) only past
    /// `audio_chunk_threshold`.
    fn speaks_whole_texts(&self) -> bool {
        true
    }

    /// Every voice but a clone, which holds its clip as every utterance's reference: without
    /// one, `auto` is a new speaker each time and a design comes out a little otherwise.
    fn drifts(&self, voice: &str) -> bool {
        !is_clone(voice)
    }

    fn unknown_cues(&self, text: &str) -> Vec<String> {
        model::unknown_nonverbal_tags(text)
    }

    fn cloned_voice(&self, reference: &Reference) -> Option<Result<String, VoiceRequestError>> {
        let Some(text) = reference.text.as_deref() else {
            return Some(Err(VoiceRequestError::refused(
                "OmniVoice needs the transcript of the clip to clone.",
            )));
        };
        let model = self
            .model()
            .map_err(|e| VoiceRequestError::Engine(EngineError::load(ID, e)));
        let prepared = model.and_then(|tts| {
            tts.prepare_reference(
                &reference.samples,
                reference.sample_rate,
                text,
                reference.preprocess,
            )
            .map_err(VoiceRequestError::refused)
        });
        Some(prepared.map(|prepared| self.cloning.hold(Clip::new(prepared))))
    }
}

/// One voice of OmniVoice: the shared model and what it is asked to sound like: an instruct,
/// or a clip to clone.
struct OmniVoiceVoice {
    info: VoiceInfo,
    sample_rate: u32,
    instruct: Option<String>,
    clip: Option<Arc<Clip>>,
    /// The clip as the model reads it, once encoded.
    reference: Mutex<Option<Arc<model::Reference>>>,
    cloning: Arc<Cloning>,
    /// The checkpoint's, which versions a profile's codes saved beside it.
    fingerprint: String,
    tts: Arc<Tts>,
    scheduler: Arc<Scheduler>,
}

/// The model and the thread that steps its utterances, made together.
#[derive(Clone)]
struct Loaded {
    tts: Arc<Tts>,
    scheduler: Arc<Scheduler>,
}

impl OmniVoiceVoice {
    fn request(
        &self,
        item: &SynthesisItem,
        reference: Option<Arc<model::Reference>>,
    ) -> model::Request {
        model::Request {
            text: item.text.clone(),
            language: item.language.as_deref().map(known_language),
            instruct: self.instruct.clone(),
            speed: item.params.speed,
            duration: item.params.generation.duration,
            generation: generation(&item.params.generation),
            reference,
            follows: match &item.continuation {
                Continuation::Follows(Continuity(first)) => first.clone().downcast().ok(),
                _ => None,
            },
        }
    }

    /// The batch's items checked as the model takes them, with the clip to clone.
    fn prepare(&self, batch: &[SynthesisItem]) -> Result<Vec<model::Prepared>, EngineError> {
        // Encoding a clip is this thread's work; the steps are the scheduler's.
        let reference = {
            let _computing = spare::computing();
            self.reference().map_err(EngineError::synthesis)?
        };
        // The request layer checked designs and languages; what fails here fails the batch.
        batch
            .iter()
            .map(|item| self.tts.check(&self.request(item, reference.clone())))
            .collect::<Result<Vec<_>, _>>()
            .map_err(EngineError::synthesis)
    }

    /// The clip to clone, encoded on the first batch that needs it.
    fn reference(&self) -> candle_core::Result<Option<Arc<model::Reference>>> {
        let Some(clip) = &self.clip else {
            return Ok(None);
        };
        let mut reference = self.reference.lock();
        if reference.is_none() {
            let codes = self.cloning.codes(&self.tts, clip, &self.fingerprint)?;
            *reference = Some(Arc::new(clip.reference(codes)));
        }
        Ok(reference.clone())
    }
}

/// The model's generation settings: the request's fields where given, its defaults elsewhere.
fn generation(fields: &Generation) -> model::Generation {
    let mut g = model::Generation::default();
    let d = &mut g.decoding;
    if let Some(n) = fields.num_step {
        d.num_step = n as usize;
    }
    d.guidance_scale = fields.guidance_scale.unwrap_or(d.guidance_scale);
    d.t_shift = fields.t_shift.unwrap_or(d.t_shift);
    d.position_temperature = fields
        .position_temperature
        .unwrap_or(d.position_temperature);
    d.class_temperature = fields.class_temperature.unwrap_or(d.class_temperature);
    d.layer_penalty_factor = fields
        .layer_penalty_factor
        .unwrap_or(d.layer_penalty_factor);
    g.denoise = fields.denoise.unwrap_or(g.denoise);
    g.preprocess_prompt = fields.preprocess_prompt.unwrap_or(g.preprocess_prompt);
    g.postprocess_output = fields.postprocess_output.unwrap_or(g.postprocess_output);
    g.audio_chunk_duration = fields
        .audio_chunk_duration
        .unwrap_or(g.audio_chunk_duration);
    g.audio_chunk_threshold = fields
        .audio_chunk_threshold
        .unwrap_or(g.audio_chunk_threshold);
    g
}

impl Voice for OmniVoiceVoice {
    fn info(&self) -> &VoiceInfo {
        &self.info
    }

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        self.synthesize_each_while(batch, done, &Wanted::always())
    }

    /// The whole batch in one generation, stepped by the scheduler with every other
    /// utterance in flight (one forward per step for all of them) until it is done or
    /// nobody waits for it.
    fn synthesize_each_while(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
        wanted: &Wanted,
    ) -> Result<(), EngineError> {
        let prepared = self.prepare(batch)?;
        let seeds: Vec<u64> = batch.iter().map(|i| i.params.item_seed()).collect();
        let audio = self
            .tts
            .synthesize_spoken(&prepared, &seeds, &self.scheduler.for_batch(wanted.clone()))
            .map_err(EngineError::synthesis)?;
        for (index, (samples, spoken)) in audio.into_iter().enumerate() {
            let leads = batch[index].continuation == Continuation::Leads;
            done(
                index,
                Pcm {
                    continuity: leads.then(|| Continuity(Arc::new(spoken))),
                    ..Pcm::new(samples, self.sample_rate)
                },
            );
        }
        Ok(())
    }

    /// A streamed text: its first piece alone, then the rest with it as their reference
    /// ([`Tts::synthesize_streamed`]), each piece handed on as soon as it is decoded. With
    /// the chunk fields given, the client asked for the official chunked audio, which the
    /// official code levels as a whole: it comes whole, the same as the response body.
    fn synthesize_in_pieces_while(
        &self,
        item: &SynthesisItem,
        piece: &mut dyn FnMut(Pcm) -> bool,
        wanted: &Wanted,
    ) -> Result<(), EngineError> {
        if item.params.generation.sets_chunking() {
            return self.synthesize_each_while(
                std::slice::from_ref(item),
                &mut |_, pcm| {
                    piece(pcm);
                },
                wanted,
            );
        }
        let prepared = self.prepare(std::slice::from_ref(item))?.remove(0);
        let rate = self.sample_rate;
        let leads = item.continuation == Continuation::Leads;
        self.tts
            .synthesize_streamed(
                &prepared,
                item.params.item_seed(),
                &self.scheduler.for_batch(wanted.clone()),
                &mut |samples, spoken| {
                    let continuity = spoken
                        .filter(|_| leads)
                        .map(|spoken| Continuity(Arc::new(spoken)));
                    piece(Pcm {
                        continuity,
                        ..Pcm::new(samples, rate)
                    })
                },
            )
            .map_err(EngineError::synthesis)
    }

    fn streams_items_apart(&self) -> bool {
        true
    }

    fn computes_batches_at_once(&self) -> bool {
        true
    }

    /// Every language the model knows, by its id or its name (`en`, `English`).
    fn reads_language(&self, language: &str) -> bool {
        model::resolve_language(&known_language(language)).is_ok()
    }

    /// The model reads text, never phonemes.
    fn says_given_phonemes(&self, _language: Option<&str>) -> bool {
        false
    }

    fn times_words(&self) -> bool {
        false
    }
}

/// Whether a resolved voice id is a clone: a profile's (`clone:<id>@<version>`) or an
/// uploaded clip's.
fn is_clone(voice: &str) -> bool {
    voice.starts_with(PROFILE) || voice.starts_with(cloning::UPLOAD)
}

/// Whether a resolved voice id is a voice file's (`<name>@<version>`).
fn is_file_voice(voice: &str) -> bool {
    !voice.contains(':') && voice.contains('@')
}

/// `language` as the model knows it: as written when it does (`en`, `English`, `yue`), else
/// the primary subtag of a regional tag (`de` for `de-DE` or Wyoming's `de_DE`), which the
/// model's own table does not list.
fn known_language(language: &str) -> String {
    if model::resolve_language(language).is_ok() {
        return language.to_string();
    }
    match language.split(['-', '_']).next() {
        Some(primary)
            if primary.len() < language.len() && model::resolve_language(primary).is_ok() =>
        {
            primary.to_string()
        }
        _ => language.to_string(),
    }
}

/// A design in the canonical form the model is given, if it is a valid one with attributes.
pub fn canonical_design(design: &str) -> Option<String> {
    voices::design_of(design).ok().flatten()
}

/// The decoding knobs' values where a request sets none: the official defaults.
pub fn generation_defaults() -> [(&'static str, f32); 6] {
    let d = omnivoice_models::omnivoice::Decoding::default();
    [
        ("num_step", d.num_step as f32),
        ("guidance_scale", d.guidance_scale),
        ("t_shift", d.t_shift),
        ("position_temperature", d.position_temperature),
        ("class_temperature", d.class_temperature),
        ("layer_penalty_factor", d.layer_penalty_factor),
    ]
}

/// The attributes a design may combine, by category (the model's own table; the Chinese
/// forms under `<category>_zh`).
pub fn design_attributes() -> std::collections::BTreeMap<String, Vec<String>> {
    let mut table = std::collections::BTreeMap::new();
    for category in model::instruct_categories() {
        let list = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        if !category.english.is_empty() {
            table.insert(category.name.to_string(), list(&category.english));
        }
        if !category.chinese.is_empty() {
            table.insert(format!("{}_zh", category.name), list(&category.chinese));
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::known_language;

    #[test]
    fn a_regional_tag_is_read_in_its_language() {
        assert_eq!(known_language("de-DE"), "de");
        assert_eq!(known_language("de_DE"), "de");
        assert_eq!(known_language("pt-BR"), "pt");
        // Known as written: kept, as the model's own lookup takes it.
        assert_eq!(known_language("de"), "de");
        assert_eq!(known_language("English"), "English");
        // Unknown either way: left for the refusal to name as sent.
        assert_eq!(known_language("qq-ZZ"), "qq-ZZ");
        assert_eq!(known_language("-"), "-");
    }
}
