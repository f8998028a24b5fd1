//! `omnivoice-server selftest`: a checkpoint that loads can still be the wrong one (another
//! model's weights under the right names, a half-downloaded file of zeros, a codec that does
//! not belong to it). Speaking one known sentence and measuring the audio tells a user in a
//! minute whether this directory will serve speech.

use std::time::Instant;

use super::{Engine, OmniVoiceEngine, AUTO};
use crate::audio::speech_like::{self, SpeechLike};
use crate::engine::SynthesisItem;
use crate::params::{Generation, SynthesisParams};
use omnivoice_models::omnivoice::target_frames;

/// What is said: plain English, long enough (about 3 s) to judge, short to compute.
pub const SENTENCE: &str = "The quick brown fox jumps over the lazy dog, then rests in the sun.";

/// A passed self-test's measurements.
#[derive(Debug, Clone)]
pub struct Report {
    pub load_s: f64,
    pub synthesis_s: f64,
    pub audio_s: f64,
    pub expected_s: f64,
    pub measured: SpeechLike,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.2} s of audio (estimate {:.2} s) in {:.2} s (real-time factor {:.2}; model loaded in {:.2} s); \
             loudest window RMS {:.3}, speech-like windows {:.0} %, spectral flatness {:.4}, \
             modulation at syllable rates {:.2}",
            self.audio_s,
            self.expected_s,
            self.synthesis_s,
            self.synthesis_s / self.audio_s.max(1e-9),
            self.load_s,
            self.measured.peak_rms,
            100.0 * self.measured.speech_windows,
            self.measured.flatness,
            self.measured.syllabic
        )
    }
}

/// Loads the model of `engine`, speaks [`SENTENCE`] in the auto voice at `num_step` steps
/// (seeded, so a rerun hears the same), and checks the audio; the error says which check
/// failed and what was measured.
pub fn run(engine: &OmniVoiceEngine, num_step: u32) -> Result<Report, SelftestError> {
    let started = Instant::now();
    engine.model().map_err(SelftestError::Load)?;
    let load_s = started.elapsed().as_secs_f64();
    let voice = engine.load_voice(AUTO).map_err(SelftestError::Engine)?;
    let item = SynthesisItem {
        params: SynthesisParams {
            seed: Some(1),
            generation: Generation {
                num_step: Some(num_step),
                ..Generation::default()
            },
            ..SynthesisParams::default()
        },
        ..SynthesisItem::new(SENTENCE)
    };
    let started = Instant::now();
    let mut audio = None;
    voice
        .synthesize_each(std::slice::from_ref(&item), &mut |_, pcm| audio = Some(pcm))
        .map_err(SelftestError::Engine)?;
    let synthesis_s = started.elapsed().as_secs_f64();
    let pcm = audio.ok_or_else(|| SelftestError::Check("the engine returned no audio".into()))?;
    let rate = pcm.sample_rate;
    let frames = target_frames(SENTENCE, None, 1.0);
    let expected_s = frames as f64 / engine.frame_rate();
    let report = Report {
        load_s,
        synthesis_s,
        audio_s: pcm.duration_s(),
        expected_s,
        measured: speech_like::measure(&pcm.samples, rate),
    };
    check(&pcm.samples, &report)
        .map(|()| report)
        .map_err(SelftestError::Check)
}

/// Why the selftest failed: the model, the engine, or a check of the audio (which says what
/// was measured).
#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    #[error("loading failed")]
    Load(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Engine(crate::engine::EngineError),
    #[error("{0}")]
    Check(String),
}

/// The checks, in the order a broken checkpoint fails them.
fn check(samples: &[f32], report: &Report) -> Result<(), String> {
    if let Some(at) = samples.iter().position(|s| !s.is_finite()) {
        return Err(format!("sample {at} is not a number"));
    }
    let m = &report.measured;
    if m.peak_rms < 0.005 {
        return Err(format!("the audio is silent ({report})"));
    }
    // Post-processing trims long silences and pads each end by 0.1 s.
    let (low, high) = (0.4 * report.expected_s, 1.5 * report.expected_s + 0.3);
    if !(low..=high).contains(&report.audio_s) {
        return Err(format!(
            "{:.2} s of audio, where {low:.2}–{high:.2} s were expected ({report})",
            report.audio_s
        ));
    }
    if !m.is_speech() {
        return Err(format!(
            "the audio does not sound like speech: speech has at least 50 % speech-like \
             windows, a spectral flatness of at most 0.05 and a loudness modulated at syllable \
             rates by at least 0.45 of its mean ({report})"
        ));
    }
    Ok(())
}
