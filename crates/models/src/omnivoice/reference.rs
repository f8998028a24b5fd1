//! A voice to clone, made ready for the codec as the official `create_voice_clone_prompt`
//! makes it: its loudness measured (a quiet clip is raised to RMS 0.1, and the output is later
//! scaled back down by it), its pauses and edges trimmed, a long clip without a transcript cut
//! at a pause, the rest cut to whole codec frames, and the transcript ended with punctuation.
//!
//! The model was trained on references prepared this way, and the RMS and the frame count
//! decide the output's level and length, so every rule follows the official code to the
//! sample (numpy's float32 arithmetic, pydub's 16-bit milliseconds).

use super::post::{detect_nonsilent, remove_silence, Segment};
use super::text::{is_cjk, py_strip};

/// A reference ready to encode: what the codec encodes, and what generation needs besides
/// its codes.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedReference {
    /// Mono samples at the codec's rate, a whole number of hops.
    pub wave: Vec<f32>,
    /// The RMS of the clip as given (before any raising), which scales a quiet clone.
    pub rms: f32,
    /// The transcript, punctuated when preprocessing.
    pub text: String,
}

/// Why a clip cannot be a reference.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReferenceError {
    #[error("the reference audio has a sample that is not a finite number")]
    NotFinite,
    #[error("the reference audio is silent")]
    Silent,
    #[error("the reference audio is empty after its silences are removed")]
    EmptyAfterTrimming,
    #[error(
        "the reference audio is {samples} samples long, shorter than one codec frame of {hop}"
    )]
    TooShort { samples: usize, hop: usize },
}

/// The official pause handling of a reference, ms: pauses cut to 200 on each side, 100 kept
/// before the speech and 200 after.
const MID_SILENCE_MS: i64 = 200;
const LEAD_SILENCE_MS: i64 = 100;
const TRAIL_SILENCE_MS: i64 = 200;
/// An RMS under this is raised to it (and the output later scaled back down).
const QUIET_RMS: f32 = 0.1;

/// `wave` (mono, already at the codec's `sample_rate`) and its transcript as the official
/// `create_voice_clone_prompt` prepares them for a codec of `hop` samples per frame. With
/// `preprocess` (the official `preprocess_prompt`): pauses and edges trimmed, the transcript
/// punctuated, and, when `text` is blank (no transcript: one is to be transcribed from the
/// returned wave), a clip over 20 s cut at a pause to at most 15 s.
pub fn prepare_reference(
    wave: &[f32],
    sample_rate: u32,
    hop: usize,
    text: &str,
    preprocess: bool,
) -> Result<PreparedReference, ReferenceError> {
    if wave.iter().any(|x| !x.is_finite()) {
        return Err(ReferenceError::NotFinite);
    }
    if wave.len() < hop.max(1) {
        return Err(ReferenceError::TooShort {
            samples: wave.len(),
            hop,
        });
    }
    let rms = numpy_rms(wave);
    if rms == 0.0 {
        return Err(ReferenceError::Silent);
    }
    let mut wave = if rms < QUIET_RMS {
        // numpy: `wave * 0.1 / rms` in float32.
        wave.iter().map(|&x| x * QUIET_RMS / rms).collect()
    } else {
        wave.to_vec()
    };
    let mut text = text.to_string();
    if preprocess {
        if py_strip(&text).is_empty() {
            if let Some(trimmed) = trim_long_audio(&wave, sample_rate) {
                wave = trimmed;
            }
        }
        wave = remove_silence(
            &wave,
            sample_rate,
            MID_SILENCE_MS,
            LEAD_SILENCE_MS,
            TRAIL_SILENCE_MS,
        );
        if wave.is_empty() {
            return Err(ReferenceError::EmptyAfterTrimming);
        }
        text = add_punctuation(&text);
    }
    let samples = wave.len();
    if samples < hop.max(1) {
        return Err(ReferenceError::TooShort { samples, hop });
    }
    wave.truncate(samples - samples % hop);
    Ok(PreparedReference { wave, rms, text })
}

/// numpy's `sqrt(mean(wave ** 2))` on float32: squares summed pairwise in float32 (numpy's
/// `pairwise_sum`, the whole array in one call), divided by the count in float32.
pub(super) fn numpy_rms(wave: &[f32]) -> f32 {
    let squares: Vec<f32> = wave.iter().map(|x| x * x).collect();
    (pairwise_sum(&squares) / squares.len() as f32).sqrt()
}

/// numpy's `pairwise_sum` for float32: blocks of up to 128 summed in 8 interleaved lanes,
/// larger arrays halved (at a multiple of 8).
fn pairwise_sum(a: &[f32]) -> f32 {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(0.0, |sum, &x| sum + x);
    }
    if n <= 128 {
        let mut lanes = [0f32; 8];
        lanes.copy_from_slice(&a[..8]);
        let whole = n - n % 8;
        for block in a[8..whole].chunks_exact(8) {
            for (lane, &x) in lanes.iter_mut().zip(block) {
                *lane += x;
            }
        }
        let r = lanes;
        let mut sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[whole..] {
            sum += x;
        }
        return sum;
    }
    let half = n / 2;
    let half = half - half % 8;
    pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
}

/// The official `trim_long_audio(trim_threshold=20)`: a clip over 20 s cut before the last
/// sound (pydub, −40 dBFS, pauses of 100 ms) that starts by 15 s, or at 15 s when that would
/// leave under 3 s. `None`: left as it is (short, or no sound found).
pub(super) fn trim_long_audio(wave: &[f32], sample_rate: u32) -> Option<Vec<f32>> {
    const MAX_MS: i64 = 15_000;
    const MIN_MS: i64 = 3_000;
    const THRESHOLD_S: f64 = 20.0;
    if wave.len() as f64 / f64::from(sample_rate) <= THRESHOLD_S {
        return None;
    }
    let segment = Segment::from_f32(wave, sample_rate);
    let sounds = detect_nonsilent(&segment, 100, -40.0, 10);
    if sounds.is_empty() {
        return None;
    }
    let mut split = 0;
    for [start, end] in sounds {
        if start > split && start <= MAX_MS {
            split = start;
        }
        if end > MAX_MS {
            break;
        }
    }
    if split < MIN_MS {
        split = MAX_MS.min(segment.len_ms());
    }
    Some(segment.slice(0, split).to_f32())
}

/// Marks that already end a transcript (the official `END_PUNCTUATION`).
const END_PUNCTUATION: &str = "!\"'),.:;?]}‘’“”…、。】！），：；？";

/// The official `add_punctuation`: the transcript stripped, and a full stop added (an
/// ideographic one to Chinese) unless it already ends in punctuation.
pub(crate) fn add_punctuation(text: &str) -> String {
    let text = py_strip(text);
    match text.chars().last() {
        None => String::new(),
        Some(last) if END_PUNCTUATION.contains(last) => text.to_string(),
        Some(_) if text.chars().any(is_cjk) => format!("{text}。"),
        Some(_) => format!("{text}."),
    }
}
