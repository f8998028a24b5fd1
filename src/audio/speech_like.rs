//! Whether audio sounds like speech, by three cheap measures that need no model: a
//! generation can be finite, loud and of the right length and still be no speech (a steady
//! drone, or the noise of a broken checkpoint).
//!
//! - Zero crossings: speech at 24 kHz crosses zero in about 5–25 % of its samples, while the
//!   low drone OmniVoice sometimes makes (the Python omnivoice-server's issue #37) sits near
//!   zero. The measure and its thresholds are that server's, measured on the real model.
//! - Harmonics: voiced speech is a comb of harmonics, so its 25 ms spectra are far from flat
//!   (a spectral flatness of about 0.001 for Piper and espeak-ng speech); noise is flat
//!   (0.27 for the noise of a checkpoint of random weights, 1 for white noise).
//! - Syllables: speech's loudness rises and falls a few times a second, deeply: its envelope's
//!   modulation at 2–8 Hz is 0.7–0.8 of its mean for Piper and espeak-ng, against 0.27 for
//!   the random checkpoint's noise and 0.01 for white noise.

use realfft::RealFftPlanner;

/// Windows of this length are scored for zero crossings.
const WINDOW_MS: u32 = 250;
/// A window below this zero-crossing rate has too little high-frequency content for speech.
const SPEECH_ZCR: f32 = 0.04;
/// Windows and frames quieter than this are pauses, neither speech nor noise.
const SILENCE_RMS: f32 = 0.005;
/// Frames of this length resolve harmonics and follow syllables.
const FRAME_MS: u32 = 25;
/// Speech's median flatness is a hundredth of this, noise's several times more.
const MAX_FLATNESS: f32 = 0.05;
/// Speech's envelope is modulated at syllable rates by 0.7 of its mean, noise's by 0.3 or less.
const MIN_SYLLABIC: f32 = 0.45;

/// What [`measure`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeechLike {
    /// The loudest 250 ms window's RMS.
    pub peak_rms: f32,
    /// The share of audible windows whose zero-crossing rate is speech's (1 with none audible).
    pub speech_windows: f32,
    /// The median spectral flatness of audible 25 ms frames (1 with none audible).
    pub flatness: f32,
    /// The depth of the loudness envelope's modulation at 2–8 Hz, relative to its mean.
    pub syllabic: f32,
}

impl SpeechLike {
    /// Whether the measures all say speech.
    pub fn is_speech(&self) -> bool {
        self.peak_rms >= SILENCE_RMS
            && self.speech_windows >= 0.5
            && self.flatness <= MAX_FLATNESS
            && self.syllabic >= MIN_SYLLABIC
    }
}

/// Below this share of speech-like windows a generation is reported as no speech (the
/// Python omnivoice-server's default `min_speech_ratio`: measured on the real model, healthy
/// output scores 0.6–0.9 and the drone 0.0–0.07).
pub const MIN_SPEECH_RATIO: f32 = 0.15;

/// The zero-crossing measure, kept as audio arrives, so a stream is judged exactly as the
/// same audio would be whole: windows are cut from the start of the audio, whatever the
/// pieces it comes in.
#[derive(Debug, Clone)]
pub struct SpeechWindows {
    sample_rate: u32,
    window: usize,
    /// The samples of the window not yet complete.
    partial: Vec<f32>,
    samples: u64,
    peak_rms: f32,
    audible: u64,
    speechy: u64,
}

impl SpeechWindows {
    pub fn new(sample_rate: u32) -> Self {
        let window = (sample_rate * WINDOW_MS / 1000).max(1) as usize;
        Self {
            sample_rate,
            window,
            partial: Vec::with_capacity(window),
            samples: 0,
            peak_rms: 0.0,
            audible: 0,
            speechy: 0,
        }
    }

    /// Adds the next samples (non-finite ones count as silence).
    pub fn push(&mut self, samples: &[f32]) {
        self.samples += samples.len() as u64;
        for &s in samples {
            self.partial.push(if s.is_finite() { s } else { 0.0 });
            if self.partial.len() == self.window {
                self.score_window();
                self.partial.clear();
            }
        }
    }

    fn score_window(&mut self) {
        let w = &self.partial;
        let level = rms(w);
        self.peak_rms = self.peak_rms.max(level);
        if level < SILENCE_RMS {
            return;
        }
        self.audible += 1;
        // A change of sign, zero counting as a sign of its own (as numpy's `sign` has it).
        let crossings = w.windows(2).filter(|p| sign(p[0]) != sign(p[1])).count();
        if crossings as f32 / w.len() as f32 >= SPEECH_ZCR {
            self.speechy += 1;
        }
    }

    /// The share of audible windows whose zero-crossing rate is speech's (1 with none
    /// audible: nothing to judge is not a failure).
    pub fn ratio(&self) -> f32 {
        if self.audible == 0 {
            1.0
        } else {
            self.speechy as f32 / self.audible as f32
        }
    }

    /// Whether the audio so far is a drone rather than a voice: at least a second of it (a
    /// shorter one is mostly onset and decay), with fewer than [`MIN_SPEECH_RATIO`] of its
    /// audible windows speech-like.
    pub fn no_speech(&self) -> bool {
        self.samples >= u64::from(self.sample_rate) && self.ratio() < MIN_SPEECH_RATIO
    }
}

fn sign(x: f32) -> i8 {
    if x > 0.0 {
        1
    } else if x < 0.0 {
        -1
    } else {
        0
    }
}

/// Measures mono `samples` at `sample_rate` (non-finite samples count as silence).
pub fn measure(samples: &[f32], sample_rate: u32) -> SpeechLike {
    let clean: Vec<f32> = samples
        .iter()
        .map(|&s| if s.is_finite() { s } else { 0.0 })
        .collect();
    let mut windows = SpeechWindows::new(sample_rate);
    windows.push(&clean);
    let frame = (sample_rate * FRAME_MS / 1000).max(2) as usize;
    let frames: Vec<&[f32]> = clean.chunks_exact(frame).collect();
    let envelope: Vec<f32> = frames.iter().map(|f| rms(f)).collect();
    SpeechLike {
        peak_rms: windows.peak_rms,
        speech_windows: windows.ratio(),
        flatness: median_flatness(&frames, &envelope),
        syllabic: syllabic_depth(&envelope, 1000.0 / FRAME_MS as f32),
    }
}

/// The median of audible frames' spectral flatness (the geometric over the arithmetic mean
/// of the Hann-windowed power spectrum).
fn median_flatness(frames: &[&[f32]], envelope: &[f32]) -> f32 {
    let Some(n) = frames.first().map(|f| f.len()) else {
        return 1.0;
    };
    let fft = RealFftPlanner::<f32>::new().plan_fft_forward(n);
    let hann: Vec<f32> = (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / n as f32).cos())
        .collect();
    let mut input = fft.make_input_vec();
    let mut spectrum = fft.make_output_vec();
    let mut flatness: Vec<f32> = frames
        .iter()
        .zip(envelope)
        .filter(|(_, &level)| level >= SILENCE_RMS)
        .filter_map(|(frame, _)| {
            for ((x, &s), &w) in input.iter_mut().zip(frame.iter()).zip(&hann) {
                *x = s * w;
            }
            fft.process(&mut input, &mut spectrum).ok()?;
            let power: Vec<f64> = spectrum
                .iter()
                .map(|c| f64::from(c.norm_sqr()) + 1e-12)
                .collect();
            let log_mean = power.iter().map(|p| p.ln()).sum::<f64>() / power.len() as f64;
            let mean = power.iter().sum::<f64>() / power.len() as f64;
            Some((log_mean.exp() / mean) as f32)
        })
        .collect();
    if flatness.is_empty() {
        return 1.0;
    }
    flatness.sort_by(f32::total_cmp);
    flatness[flatness.len() / 2]
}

/// The depth of the envelope's modulation at 2–8 Hz: the amplitude of that band (as a
/// sinusoid's, from its energy) over the envelope's mean; `rate` is the envelope's frames
/// per second.
fn syllabic_depth(envelope: &[f32], rate: f32) -> f32 {
    let n = envelope.len();
    let mean = envelope.iter().sum::<f32>() / n.max(1) as f32;
    if n < 8 || mean <= 0.0 {
        return 0.0;
    }
    let fft = RealFftPlanner::<f32>::new().plan_fft_forward(n);
    let mut input: Vec<f32> = envelope.iter().map(|e| e - mean).collect();
    let mut spectrum = fft.make_output_vec();
    if fft.process(&mut input, &mut spectrum).is_err() {
        return 0.0;
    }
    let band: f64 = spectrum
        .iter()
        .enumerate()
        .filter(|(k, _)| (2.0..=8.0).contains(&(*k as f32 * rate / n as f32)))
        .map(|(_, c)| f64::from(c.norm_sqr()))
        .sum();
    ((2.0 * band).sqrt() / n as f64 / f64::from(mean)) as f32
}

fn rms(x: &[f32]) -> f32 {
    (x.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / x.len().max(1) as f64).sqrt() as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{espeak::EspeakEngine, Engine, SynthesisItem};

    fn speech() -> (Vec<f32>, u32) {
        let voice = EspeakEngine::new().load_voice("en-us").unwrap();
        let mut audio = None;
        voice
            .synthesize_each(
                &[SynthesisItem::new(
                    "The quick brown fox jumps over the lazy dog, and then it runs away.",
                )],
                &mut |_, pcm| audio = Some(pcm),
            )
            .unwrap();
        let pcm = audio.unwrap();
        (pcm.samples, pcm.sample_rate)
    }

    #[test]
    fn speech_is_speech_like() {
        let (samples, rate) = speech();
        let m = measure(&samples, rate);
        assert!(m.is_speech(), "{m:?}");
    }

    #[test]
    fn a_drone_noise_and_silence_are_not() {
        let rate = 24_000;
        let drone: Vec<f32> = (0..rate * 3)
            .map(|i| 0.3 * (2.0 * std::f32::consts::PI * 40.0 * i as f32 / rate as f32).sin())
            .collect();
        let m = measure(&drone, rate);
        assert!(!m.is_speech() && m.speech_windows < 0.5, "{m:?}");

        // White noise: crosses zero like speech, but its spectrum is flat and its loudness
        // never moves.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<f32> = (0..rate * 3)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let m = measure(&noise, rate);
        assert!(
            m.speech_windows > 0.9,
            "it crosses zero as speech does: {m:?}"
        );
        assert!(m.flatness > 0.3 && m.syllabic < MIN_SYLLABIC, "{m:?}");
        assert!(!m.is_speech());

        let silence = vec![0.0; rate as usize];
        assert!(!measure(&silence, rate).is_speech());
        let broken = vec![f32::NAN; rate as usize];
        assert!(!measure(&broken, rate).is_speech());
    }

    fn drone(rate: u32, seconds: f32) -> Vec<f32> {
        (0..(rate as f32 * seconds) as usize)
            .map(|i| 0.3 * (2.0 * std::f32::consts::PI * 60.0 * i as f32 / rate as f32).sin())
            .collect()
    }

    #[test]
    fn a_drone_of_a_second_or_more_is_no_speech_and_speech_is_not() {
        let (samples, rate) = speech();
        let mut windows = SpeechWindows::new(rate);
        windows.push(&samples);
        assert!(!windows.no_speech(), "ratio {}", windows.ratio());
        assert!(windows.ratio() > 0.5, "ratio {}", windows.ratio());

        let mut windows = SpeechWindows::new(24_000);
        windows.push(&drone(24_000, 2.0));
        assert!(windows.no_speech(), "ratio {}", windows.ratio());
        // Too short to judge.
        let mut windows = SpeechWindows::new(24_000);
        windows.push(&drone(24_000, 0.9));
        assert!(windows.ratio() < MIN_SPEECH_RATIO && !windows.no_speech());
        // Silence has nothing to judge; pauses count for neither side.
        let mut windows = SpeechWindows::new(24_000);
        windows.push(&vec![0.0; 48_000]);
        assert!(!windows.no_speech());
        let mut paused = samples.clone();
        paused.extend(vec![0.0; rate as usize * 3]);
        let mut windows = SpeechWindows::new(rate);
        windows.push(&paused);
        assert!(!windows.no_speech(), "ratio {}", windows.ratio());
    }

    #[test]
    fn audio_in_pieces_is_judged_as_the_whole() {
        let (mut samples, rate) = speech();
        samples.extend(drone(rate, 4.0));
        let mut whole = SpeechWindows::new(rate);
        whole.push(&samples);
        let mut pieces = SpeechWindows::new(rate);
        let mut rest = &samples[..];
        let mut n = 1;
        while !rest.is_empty() {
            let (piece, after) = rest.split_at(n.min(rest.len()));
            pieces.push(piece);
            rest = after;
            n = n * 7 % 9973 + 1;
        }
        assert_eq!(whole.ratio(), pieces.ratio());
        assert!(
            whole.ratio() > 0.0 && whole.ratio() < 1.0,
            "both kinds of window"
        );
    }
}
