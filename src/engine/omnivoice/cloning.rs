//! Voices cloned from a clip. A clip is prepared once, when it arrives (resampled to the
//! codec's rate and trimmed as the official code trims it), and named by the hash of what was
//! prepared: the same clip and transcript are one voice, one batch and one cache entry however
//! often they are uploaded. Encoding it into the codec's codes is the expensive part, done on
//! a worker thread with the voice's first batch, and its codes are kept by the prepared
//! clip's hash, so a repeated clone request encodes nothing.
//!
//! Uploads are held in memory, a bounded number of them: a request names its clip by hash
//! right after it arrives, and a clip that has fallen out is simply uploaded again.

use std::collections::HashMap;
use std::sync::Arc;

use moka::sync::Cache;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::audio::upload::decode_upload;
use crate::metrics as m;
use crate::profiles::ProfileStore;
use candle_core::Tensor;
use omnivoice_models::omnivoice::{PreparedReference, Reference, Tts};

/// What an uploaded voice's id starts with; the rest is its clip's hash.
pub const UPLOAD: &str = "ref:";

/// Clips held for the requests that just uploaded them. Each is at most the upload limit
/// long, at the codec's rate.
const HELD_UPLOADS: u64 = 32;

/// Encoded references kept: 8 codebooks of 25 frames a second make a 20 s clip 16 KB.
const HELD_CODES: u64 = 1024;

/// A prepared clip to clone, with the hashes it is known by.
pub struct Clip {
    pub prepared: PreparedReference,
    /// Of the audio alone: what its codes are kept by.
    audio_hash: String,
    /// Of the audio and its transcript: the voice.
    pub hash: String,
    /// For a profile's clip: where its codes are kept on disk too.
    saved: Option<Saved>,
}

impl Clip {
    pub fn new(prepared: PreparedReference) -> Self {
        let mut audio = Sha256::new();
        audio.update(prepared.rms.to_le_bytes());
        for sample in &prepared.wave {
            audio.update(sample.to_le_bytes());
        }
        let audio_hash = format!("{:x}", audio.finalize());
        let mut voice = Sha256::new();
        voice.update(audio_hash.as_bytes());
        voice.update(prepared.text.as_bytes());
        // 96 bits: no collision among any number of clips a server will see.
        let hash = format!("{:x}", voice.finalize())[..24].to_string();
        Self {
            prepared,
            audio_hash,
            hash,
            saved: None,
        }
    }

    /// The reference the model reads: the clip's codes, its transcript and its loudness.
    pub fn reference(&self, codes: Tensor) -> Reference {
        Reference {
            codes,
            text: self.prepared.text.clone(),
            rms: self.prepared.rms,
        }
    }
}

/// The uploads in use and every clip's codes.
pub struct Cloning {
    uploads: Cache<String, Arc<Clip>>,
    codes: Cache<String, Tensor>,
}

impl Default for Cloning {
    fn default() -> Self {
        Self {
            uploads: Cache::new(HELD_UPLOADS),
            codes: Cache::new(HELD_CODES),
        }
    }
}

impl Cloning {
    /// Holds an uploaded clip; the voice id it is named by.
    pub fn hold(&self, clip: Clip) -> String {
        let id = format!("{UPLOAD}{}", clip.hash);
        self.uploads.insert(clip.hash.clone(), Arc::new(clip));
        id
    }

    /// The uploaded clip a voice id names, while it is held.
    pub fn upload(&self, voice: &str) -> Option<Arc<Clip>> {
        let hash = voice.strip_prefix(UPLOAD)?;
        self.uploads.get(hash)
    }

    /// The clip's codes ([codebooks, frames]), encoding it only if no earlier request did
    /// (on this server, or for a profile, on any run of it: `fingerprint` names the codec).
    pub fn codes(&self, tts: &Tts, clip: &Clip, fingerprint: &str) -> candle_core::Result<Tensor> {
        if let Some(codes) = self.codes.get(&clip.audio_hash) {
            metrics::counter!(m::REFERENCE_ENCODES, "result" => "cached").increment(1);
            return Ok(codes);
        }
        let stored = clip.saved.as_ref().and_then(|saved| {
            let bytes = saved
                .store
                .codes(&saved.id, &saved.audio_sha256, fingerprint)?;
            codes_from_bytes(&bytes)
        });
        if let Some(codes) = stored {
            metrics::counter!(m::REFERENCE_ENCODES, "result" => "stored").increment(1);
            self.codes.insert(clip.audio_hash.clone(), codes.clone());
            return Ok(codes);
        }
        let started = std::time::Instant::now();
        let codes = tts.encode_reference(&clip.prepared)?;
        metrics::counter!(m::REFERENCE_ENCODES, "result" => "encoded").increment(1);
        tracing::debug!(
            clip = %clip.hash,
            seconds = started.elapsed().as_secs_f64(),
            "reference encoded"
        );
        if let Some(saved) = &clip.saved {
            // A failed save costs a later encode, nothing more.
            let saving = codes_to_bytes(&codes)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    saved
                        .store
                        .store_codes(&saved.id, &saved.audio_sha256, fingerprint, &bytes)
                        .map_err(|e| e.to_string())
                });
            if let Err(error) = saving {
                tracing::warn!(profile = %saved.id, %error, "the codes of a profile could not be saved");
            }
        }
        self.codes.insert(clip.audio_hash.clone(), codes.clone());
        Ok(codes)
    }
}

/// What a profile voice's id starts with; the rest is the profile's id, and once resolved,
/// `@` and the version of its clip.
pub const PROFILE: &str = "clone:";

/// The profiles' clips, read from the store once per version. A request resolves
/// `clone:<id>` to `clone:<id>@<version>`, so every sentence of it uses one clip even if the
/// profile changes meanwhile, and the audio cache never mixes versions.
pub struct Profiles {
    store: Arc<ProfileStore>,
    /// Per profile: the files' sizes and times it was read at, and what was read.
    read: Mutex<HashMap<String, (Stamp, Arc<ProfileVoice>)>>,
}

/// A profile as a voice: its clip's version and its transcript (`None`: it has none, so it
/// cannot be cloned here, where nothing transcribes).
pub struct ProfileVoice {
    pub version: String,
    audio_sha256: String,
    audio: Vec<u8>,
    pub text: Option<String>,
}

/// Sizes and modification times of a profile's two files: every write replaces a file
/// (rename), so a change shows here without reading the clip.
type Stamp = Vec<(u64, Option<std::time::SystemTime>)>;

impl Profiles {
    pub fn new(store: Arc<ProfileStore>) -> Self {
        Self {
            store,
            read: Mutex::new(HashMap::new()),
        }
    }

    /// The ids of every profile.
    pub fn ids(&self) -> Vec<String> {
        self.store
            .list()
            .map(|list| list.into_iter().map(|meta| meta.id).collect())
            .unwrap_or_default()
    }

    /// The profile `id` as it is now; `None` when there is none.
    pub fn current(&self, id: &str) -> Option<Arc<ProfileVoice>> {
        if !crate::profiles::is_valid_name(id) {
            return None;
        }
        let folder = self.store.dir().join(id);
        let stamp: Stamp = ["ref_audio.wav", "meta.json"]
            .iter()
            .map(|file| {
                std::fs::metadata(folder.join(file))
                    .map(|m| (m.len(), m.modified().ok()))
                    .unwrap_or((u64::MAX, None))
            })
            .collect();
        if let Some((seen, voice)) = self.read.lock().get(id) {
            if *seen == stamp {
                return Some(voice.clone());
            }
        }
        let profile = self.store.get(id).ok()?;
        let voice = Arc::new(ProfileVoice {
            version: profile.audio_sha256[..16].to_string(),
            audio_sha256: profile.audio_sha256,
            audio: profile.audio,
            text: profile.meta.ref_text.filter(|t| !t.trim().is_empty()),
        });
        self.read
            .lock()
            .insert(id.to_string(), (stamp, voice.clone()));
        Some(voice)
    }

    /// The clip of `id` at `version`, decoded and prepared.
    pub fn clip(&self, tts: &Tts, id: &str, version: &str) -> Result<Clip, ProfileClipError> {
        let voice = self
            .current(id)
            .filter(|v| v.version == version)
            .ok_or_else(|| ProfileClipError::Changed(id.to_string()))?;
        let text = voice
            .text
            .as_deref()
            .ok_or_else(|| ProfileClipError::NoTranscript(no_transcript(id)))?;
        let clip = decode_upload(&voice.audio).map_err(|source| ProfileClipError::Unreadable {
            id: id.to_string(),
            source,
        })?;
        let prepared = tts
            .prepare_reference(&clip.samples, clip.sample_rate, text, true)
            .map_err(|source| ProfileClipError::Unclonable {
                id: id.to_string(),
                source,
            })?;
        let mut clip = Clip::new(prepared);
        clip.saved = Some(Saved {
            store: self.store.clone(),
            id: id.to_string(),
            audio_sha256: voice.audio_sha256.clone(),
        });
        Ok(clip)
    }
}

/// Why a profile's clip makes no voice.
#[derive(Debug, thiserror::Error)]
pub enum ProfileClipError {
    #[error("The voice profile '{0}' changed or went away; try again.")]
    Changed(String),
    #[error("{0}")]
    NoTranscript(String),
    #[error("The clip of voice profile '{id}' cannot be read")]
    Unreadable {
        id: String,
        #[source]
        source: crate::audio::upload::UploadError,
    },
    #[error("The clip of voice profile '{id}' cannot be cloned")]
    Unclonable {
        id: String,
        #[source]
        source: omnivoice_models::omnivoice::ReferenceError,
    },
}

/// Why a profile without a transcript is no voice here.
pub fn no_transcript(id: &str) -> String {
    format!(
        "The voice profile '{id}' has no ref_text, and this server runs no speech recognition: \
         add it with PATCH /v1/voices/profiles/{id}."
    )
}

/// Where a profile's codes are kept beside it.
struct Saved {
    store: Arc<ProfileStore>,
    id: String,
    audio_sha256: String,
}

/// Codes as stored beside a profile: codebooks and frames (u32 each), then the codes.
fn codes_to_bytes(codes: &Tensor) -> candle_core::Result<Vec<u8>> {
    let (rows, frames) = codes.dims2()?;
    let values: Vec<u32> = codes
        .to_dtype(candle_core::DType::U32)?
        .flatten_all()?
        .to_vec1()?;
    let mut bytes = Vec::with_capacity(8 + values.len() * 4);
    bytes.extend_from_slice(&(rows as u32).to_le_bytes());
    bytes.extend_from_slice(&(frames as u32).to_le_bytes());
    for value in values {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    Ok(bytes)
}

fn codes_from_bytes(bytes: &[u8]) -> Option<Tensor> {
    let word = |i: usize| {
        Some(u32::from_le_bytes(
            bytes.get(i * 4..i * 4 + 4)?.try_into().ok()?,
        ))
    };
    let (rows, frames) = (word(0)? as usize, word(1)? as usize);
    if bytes.len() != 8 + rows * frames * 4 || rows == 0 || frames == 0 {
        return None;
    }
    let values: Vec<u32> = (0..rows * frames)
        .map(|i| word(2 + i))
        .collect::<Option<_>>()?;
    Tensor::from_vec(values, (rows, frames), &candle_core::Device::Cpu).ok()
}
