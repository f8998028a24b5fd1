//! Quality gates for Kokoro in a reduced precision: the real model in bf16 against its own
//! `f32` output, on three voices (US and GB English, female and male); and int8's durations,
//! which must be `f32`'s exactly (its quality is held to kokoro-onnx's instead, in
//! `tests/kokoro_gate.rs` and `scripts/kokoro-gate.sh`).
//!
//! `f32` is held to onnxruntime stage by stage in the models crate; bf16 rounds every product
//! of the decoder and generator, so it is held to `f32` instead, by the gates of
//! `tests/vits_precision.rs`: the waveform's signal-to-noise ratio and the log-mel spectral
//! distance. ALBERT, the prosody predictor and the text encoder stay `f32` in both, so the
//! durations are the same and the outputs are compared sample for sample.

use candle_core::Device;
use omnivoice_models::kernels::Precision;
use omnivoice_server::engine::kokoro::KokoroEngine;
use omnivoice_server::engine::{Engine, Pcm, SynthesisItem};

mod audio_quality;
mod common;
use audio_quality::Worst;

const SAMPLE_RATE: f64 = 24_000.0;

/// (voice, text): a statement, numbers and a question, sibilants.
const CASES: [(&str, &str); 3] = [
    (
        "af_heart",
        "Hello world. This is a test of the speech server.",
    ),
    (
        "am_michael",
        "It's 7:45 on Tuesday; would you like a cup of tea, or coffee?",
    ),
    (
        "bf_emma",
        "She sells sea shells by the sea shore, and the shells she sells are surely seashells.",
    ),
];

/// The waveform gate, as for VITS. Measured: 39.7–41.2 dB (log-mel 0.05–0.06 dB).
const MIN_SNR_DB: f64 = 20.0;
/// The spectral gate, as for VITS: a 1 % gain change is ≈ 0.09 dB, and listeners notice ≈ 1 dB.
const MAX_LOG_MEL_DB: f64 = 0.5;

fn speak(engine: &KokoroEngine, voice: &str, text: &str) -> Pcm {
    let voice = engine.load_voice(voice).unwrap();
    let mut out = None;
    voice
        .synthesize_each(&[SynthesisItem::new(text)], &mut |_, pcm| out = Some(pcm))
        .unwrap();
    out.expect("one item, one answer")
}

#[test]
fn bf16_stays_within_the_gates_of_f32() {
    let dir = common::kokoro_dir();
    let f32_engine = KokoroEngine::new(&dir, Device::Cpu).with_precision(Some(Precision::F32));
    let bf16_engine = KokoroEngine::new(&dir, Device::Cpu).with_precision(Some(Precision::Bf16));
    let mut worst = Worst::new();
    for (voice, text) in CASES {
        let reference = speak(&f32_engine, voice, text);
        let reduced = speak(&bf16_engine, voice, text);
        assert_eq!(reference.sample_rate, 24_000);
        assert_eq!(
            reduced.samples.len(),
            reference.samples.len(),
            "{voice}: the durations come from f32 layers in both"
        );
        assert_ne!(
            reduced.samples, reference.samples,
            "{voice}: bf16 computed the same samples as f32; is it in use?"
        );
        worst.add(voice, SAMPLE_RATE, &reference.samples, &reduced.samples);
    }
    worst.assert_within(MIN_SNR_DB, MAX_LOG_MEL_DB);
}

/// int8 changes only the decoder's and generator's convolutions: the durations, so the lengths,
/// are `f32`'s exactly, on every voice; the audio differs (int8 is in use) but keeps its level.
#[test]
fn int8_keeps_the_f32_durations() {
    let dir = common::kokoro_dir();
    let f32_engine = KokoroEngine::new(&dir, Device::Cpu).with_precision(Some(Precision::F32));
    let int8_engine = KokoroEngine::new(&dir, Device::Cpu).with_precision(Some(Precision::Int8));
    for (voice, text) in CASES {
        let reference = speak(&f32_engine, voice, text);
        let reduced = speak(&int8_engine, voice, text);
        assert_eq!(
            reduced.samples.len(),
            reference.samples.len(),
            "{voice}: int8 must keep the f32 durations"
        );
        assert_ne!(
            reduced.samples, reference.samples,
            "{voice}: int8 computed the same samples as f32; is it in use?"
        );
        let rms = |s: &[f32]| {
            (s.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / s.len() as f64).sqrt()
        };
        let ratio = rms(&reduced.samples) / rms(&reference.samples);
        assert!(
            (0.9..1.1).contains(&ratio),
            "{voice}: int8's level is {ratio:.3} of f32's"
        );
    }
}
