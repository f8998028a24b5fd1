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

mod phoneme_type;
mod scan;
#[cfg(test)]
mod tests;
mod voice;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;

use candle_core::Device;

use super::{Engine, EngineError, Voice, VoiceInfo};
use crate::text::phonemize::PhonemeIdMap;
use omnivoice_models::kernels::Precision;
use omnivoice_models::vits::{Vits, VitsConfig, Weights};

use phoneme_type::PhonemeType;
use scan::{read_json, scan, VoiceFiles};
pub use voice::{PiperVoice, MAX_IDS_PER_PASS};

/// The engine's id: what clients send as `model`.
pub const ID: &str = "piper";
/// The voice behind OpenAI's voice names when Piper is the default engine.
pub const DEFAULT_VOICE: &str = "en_US-joe-medium";

pub struct PiperEngine {
    dir: PathBuf,
    device: Device,
    /// What voices are loaded in: the setting resolved once (`auto` by this CPU, and `f32`
    /// on other devices, which have no reduced-precision kernels).
    precision: Precision,
    voices: RwLock<BTreeMap<String, Arc<VoiceFiles>>>,
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
        let precision =
            super::cpu_precision(&self.device, requested, Precision::auto, "Piper voices");
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
        // Hashed here, on the loader's thread, while the files are read anyway: the cache key
        // needs it, and it is the one part of a key that costs.
        files.fingerprint();
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

impl Engine for PiperEngine {
    fn id(&self) -> &str {
        ID
    }

    fn default_voice(&self) -> Option<&'static str> {
        Some(DEFAULT_VOICE)
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
