//! A crude voiced-speech stand-in for the encoders, shared by their tests and their bench
//! (`benches/encoders.rs` includes this file): what an encoder sees of speech, without a model.

use std::f32::consts::TAU;

/// `seconds` of [`voice_like_frames`].
pub fn voice_like(seconds: f32, rate: u32) -> Vec<f32> {
    voice_like_frames((seconds * rate as f32).round() as usize, rate)
}

/// A 120 Hz glottal tone with vibrato and ten harmonics falling off as 1/k, shaped into 4 Hz
/// "syllables" with a slower phrase envelope, peaking near 0.6.
pub fn voice_like_frames(frames: usize, rate: u32) -> Vec<f32> {
    let mut phase = 0.0f32;
    (0..frames)
        .map(|n| {
            let t = n as f32 / rate as f32;
            let f0 = 120.0 + 15.0 * (TAU * 5.0 * t).sin();
            phase = (phase + TAU * f0 / rate as f32) % TAU;
            let tone: f32 = (1..=10).map(|k| (k as f32 * phase).sin() / k as f32).sum();
            let syllables = 0.5 - 0.5 * (TAU * 4.0 * t).cos();
            let phrase = 0.6 + 0.4 * (TAU * 0.5 * t).sin();
            0.33 * tone * syllables * phrase
        })
        .collect()
}
