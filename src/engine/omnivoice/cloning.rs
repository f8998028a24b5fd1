//! Voices cloned from a clip. A clip is prepared once, when it arrives (resampled to the
//! codec's rate and trimmed as the official code trims it), and named by the hash of what was
//! prepared: the same clip and transcript are one voice, one batch and one cache entry however
//! often they are uploaded. Encoding it into the codec's codes is the expensive part, done on
//! a worker thread with the voice's first batch, and its codes are kept by the prepared
//! clip's hash, so a repeated clone request encodes nothing.
//!
//! Uploads are held in memory, a bounded number of them: a request names its clip by hash
//! right after it arrives, and a clip that has fallen out is simply uploaded again.

use std::sync::Arc;

use moka::sync::Cache;
use sha2::{Digest, Sha256};

use crate::metrics as m;
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

    /// The clip's codes ([codebooks, frames]), encoding it only if no earlier request did.
    pub fn codes(&self, tts: &Tts, clip: &Clip) -> candle_core::Result<Tensor> {
        if let Some(codes) = self.codes.get(&clip.audio_hash) {
            metrics::counter!(m::REFERENCE_ENCODES, "result" => "cached").increment(1);
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
        self.codes.insert(clip.audio_hash.clone(), codes.clone());
        Ok(codes)
    }
}
