//! The Piper engine: every Piper voice in the voices directory, served by our candle VITS.
//!
//! A Piper voice is `<name>.onnx` (weights) plus `<name>.onnx.json` (phonemes, audio and
//! inference settings). A `<name>.safetensors` written by `convert-voice` beside them loads
//! faster and is preferred. Voices are found by scanning the directory, so a client's voice
//! name is only ever looked up in that list — never joined into a path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use candle_core::Device;
use sha2::{Digest, Sha256};

use super::{Engine, EngineError, Pcm, SynthesisItem, Voice, VoiceInfo};
use crate::text::phonemize::{phonemize, PhonemeIdMap};
use crate::vits::{Vits, VitsInput};

pub struct PiperEngine {
    dir: PathBuf,
    device: Device,
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
        let voices = RwLock::new(scan(&dir));
        Self {
            dir,
            device,
            voices,
        }
    }

    fn files(&self, voice: &str) -> Option<Arc<VoiceFiles>> {
        self.voices
            .read()
            .expect("voice list lock")
            .get(voice)
            .cloned()
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

fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
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
    }
}

impl Engine for PiperEngine {
    fn id(&self) -> &str {
        "piper"
    }

    fn voices(&self) -> Vec<VoiceInfo> {
        self.voices
            .read()
            .expect("voice list lock")
            .values()
            .map(|v| v.info.clone())
            .collect()
    }

    fn rescan(&self) -> Vec<String> {
        let found = scan(&self.dir);
        let mut voices = self.voices.write().expect("voice list lock");
        let stale = voices
            .iter()
            .filter(|(id, old)| found.get(*id).is_none_or(|new| new.stamp != old.stamp))
            .map(|(id, _)| id.clone())
            .collect();
        *voices = found;
        stale
    }

    fn find_voice(&self, voice: &str) -> Option<VoiceInfo> {
        self.files(voice).map(|f| f.info.clone())
    }

    fn fingerprint(&self, voice: &str) -> String {
        self.files(voice)
            .map(|f| f.fingerprint().to_string())
            .unwrap_or_default()
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        let files = self
            .files(voice)
            .ok_or_else(|| EngineError::UnknownVoice(voice.to_string()))?;
        let load_error = |reason: String| EngineError::Load {
            voice: voice.to_string(),
            reason,
        };
        let config = read_json(&files.json).map_err(load_error)?;
        let model = match &files.safetensors {
            Some(path) => Vits::from_safetensors(path, &config, &self.device),
            None => Vits::from_onnx(&files.onnx, &config, &self.device),
        }
        .map_err(|e| load_error(e.to_string()))?;
        let phonemes = PhonemeIdMap::from_voice_json(&config).map_err(load_error)?;
        let length_scale = model.config().length_scale;
        let espeak_voice = config["espeak"]["voice"]
            .as_str()
            .unwrap_or("en-us")
            .to_string();
        Ok(Arc::new(PiperVoice {
            info: files.info.clone(),
            model,
            phonemes,
            espeak_voice,
            length_scale,
        }))
    }
}

pub struct PiperVoice {
    info: VoiceInfo,
    model: Vits,
    phonemes: PhonemeIdMap,
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

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        let failed = |e: crate::vits::VitsError| EngineError::Synthesis(e.to_string());
        let mut inputs = Vec::with_capacity(batch.len());
        for item in batch {
            let ipa = phonemize(&item.text, &self.espeak_voice)
                .map_err(|e| EngineError::Synthesis(e.to_string()))?;
            inputs.push(VitsInput {
                ids: self.phonemes.ids(&ipa),
                length_scale: self.length_scale,
                params: item.params,
            });
        }
        let rate = self.model.sample_rate();
        let pcm = |samples| Pcm {
            samples,
            sample_rate: rate,
        };
        // On a GPU one padded forward pass computes the whole batch in parallel. On a CPU the
        // kernels go through the items one after another anyway, so padding is pure extra work
        // (measured 2.75× slower for 8 mixed sentences, docs/performance.md), and running items
        // one by one also lets each be answered as soon as it is done. Same audio either way:
        // batch equivalence is tested.
        if self.model.device().is_cpu() {
            for (index, input) in inputs.iter().enumerate() {
                let mut audio = self
                    .model
                    .synthesize(std::slice::from_ref(input))
                    .map_err(failed)?;
                done(index, pcm(audio.remove(0)));
            }
        } else {
            let audio = self.model.synthesize(&inputs).map_err(failed)?;
            for (index, samples) in audio.into_iter().enumerate() {
                done(index, pcm(samples));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
