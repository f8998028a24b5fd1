//! The voices directory: which voices it holds (only those with a config), what each one's
//! config says of it, and the fingerprint of its files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

use super::PhonemeType;
use crate::engine::VoiceInfo;

/// The files of one voice found by a scan.
pub(super) struct VoiceFiles {
    pub(super) info: VoiceInfo,
    pub(super) onnx: PathBuf,
    pub(super) json: PathBuf,
    pub(super) safetensors: Option<PathBuf>,
    /// Sizes and modification times of the files: a cheap "did they change" check for rescans.
    pub(super) stamp: Vec<(u64, Option<std::time::SystemTime>)>,
    fingerprint: OnceLock<String>,
}

impl VoiceFiles {
    /// Hash of the model bytes, computed once, when the voice loads or a cache key first needs
    /// it (a 60 MB voice takes ~0.2 s), always off the async threads.
    pub(super) fn fingerprint(&self) -> &str {
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

pub(super) fn scan(dir: &Path) -> BTreeMap<String, Arc<VoiceFiles>> {
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
pub(super) struct FileError {
    path: PathBuf,
    source: Box<dyn std::error::Error + Send + Sync>,
}

pub(super) fn read_json(path: &Path) -> Result<serde_json::Value, FileError> {
    let file_error = |source: Box<dyn std::error::Error + Send + Sync>| FileError {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_error(e.into()))?;
    serde_json::from_str(&text).map_err(|e| file_error(e.into()))
}

pub(super) fn voice_info(id: &str, config: &serde_json::Value) -> VoiceInfo {
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
