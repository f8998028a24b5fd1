//! Quality gates for the reduced precisions: the real default voice in bf16 against its own
//! `f32` output, at noise 0, on several sentences.
//!
//! `f32` is held to onnxruntime by `vits_reference.rs`; a reduced precision cannot be (it
//! rounds every product), so it is held to `f32` instead, by two measures: the waveform's
//! signal-to-noise ratio (any drift at all) and the log-mel spectral distance (what a
//! listener hears: the spectrogram, whatever the phase). Durations come from the `f32` text
//! encoder and duration predictor in both, so the two outputs have the same length and are
//! compared sample for sample. Intelligibility is checked separately, with an ASR model on the
//! server binary's output (`--precision`).

use std::path::PathBuf;
use std::sync::OnceLock;

use candle_core::Device;
use omnivoice_models::kernels::Precision;
use omnivoice_models::vits::{Sampling, Vits, VitsConfig, VitsInput, Weights};
use omnivoice_server::text::{phonemize, PhonemeIdMap};

mod audio_quality;
use audio_quality::{log_mel_distance_db, snr_db, Worst, SAMPLE_RATE};

const VOICE: &str = "voices/en_US-joe-medium.onnx";

/// Sentences beyond the four reference fixtures: numbers, a question, sibilants.
const TEXTS: [&str; 3] = [
    "It's 7:45 on Tuesday, March 3rd; the train to Boston leaves from platform 12.",
    "Would you like a cup of tea, or would you prefer coffee?",
    "She sells sea shells by the sea shore, and the shells she sells are surely seashells.",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn voice_json() -> serde_json::Value {
    let text = std::fs::read_to_string(root().join(format!("{VOICE}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn load(precision: Precision) -> Vits {
    let weights = Weights::from_onnx(&root().join(VOICE), &Device::Cpu).unwrap();
    let config = VitsConfig::from_weights(&weights, &voice_json()).unwrap();
    Vits::load(&config, weights)
        .unwrap()
        .with_precision(precision)
        .unwrap()
}

/// Phoneme ids of every test sentence: the fixtures', then the texts' through espeak-ng.
fn sentences() -> &'static [Vec<i64>] {
    static IDS: OnceLock<Vec<Vec<i64>>> = OnceLock::new();
    IDS.get_or_init(|| {
        let dir = root().join("crates/models/tests/fixtures/vits");
        let mut ids: Vec<Vec<i64>> = (0..4)
            .map(|i| {
                let text = std::fs::read_to_string(dir.join(format!("sentence{i}.ids"))).unwrap();
                text.trim().split(',').map(|s| s.parse().unwrap()).collect()
            })
            .collect();
        let map = PhonemeIdMap::from_voice_json(&voice_json()).unwrap();
        for text in TEXTS {
            ids.push(map.ids(&phonemize(text, "en-us").unwrap()));
        }
        ids
    })
}

fn deterministic(ids: &[i64]) -> VitsInput {
    VitsInput {
        ids: ids.to_vec(),
        length_scale: 1.0,
        sampling: Sampling {
            seed: 0,
            noise_scale: Some(0.0),
            noise_w: Some(0.0),
            ..Sampling::default()
        },
    }
}

/// The waveform gate. bf16 measured 25.8–34.1 dB on these 7 sentences (the worst on the
/// shortest, "Hi."): rounding every product to 8 significant bits moves each sample by a few
/// percent of the signal, most of it from the flow (with the flow in `f32` the decoder alone
/// measured 36.6–43.6 dB), whose drift in the latent the decoder then renders. 20 dB (error
/// RMS at most a tenth of the signal's) sits below that spread with room for other CPUs'
/// summation orders, and far above what any real mistake gives (int8 measured 5–8 dB; a wrong
/// tap or channel lands near 0 dB or below).
const MIN_SNR_DB: f64 = 20.0;
/// The spectral gate. bf16 measured 0.15–0.20 dB; a 1 % gain change is at most 0.086 dB
/// (test below), so bf16 changes the spectrum about as much as turning the volume up by 2–3 %,
/// while the smallest level difference listeners notice is about 1 dB (int8 measured 3.9–5.1
/// dB). 0.5 dB keeps half of that margin and over twice the measured worst.
const MAX_LOG_MEL_DB: f64 = 0.5;

#[test]
fn bf16_holds_the_quality_gates_against_f32() {
    let reference = load(Precision::F32);
    let bf16 = load(Precision::Bf16);
    assert_eq!(bf16.precision(), Precision::Bf16);
    let mut worst = Worst::new();
    for (n, ids) in sentences().iter().enumerate() {
        let input = [deterministic(ids)];
        let want = reference.synthesize(&input).unwrap().remove(0);
        let got = bf16.synthesize(&input).unwrap().remove(0);
        assert_eq!(got.len(), want.len(), "sentence {n}: sample count");
        worst.add(&format!("sentence {n}"), SAMPLE_RATE, &want, &got);
    }
    worst.assert_within(MIN_SNR_DB, MAX_LOG_MEL_DB);
}

/// The measures themselves: a signal against itself is perfect, and against a slightly
/// changed copy they fall the way they should.
#[test]
fn measures_tell_small_changes_from_large_ones() {
    let reference = load(Precision::F32);
    let audio = reference
        .synthesize(&[deterministic(&sentences()[2])])
        .unwrap()
        .remove(0);
    assert!(snr_db(&audio, &audio) > 200.0);
    assert_eq!(log_mel_distance_db(&audio, &audio), 0.0);
    let scaled = |g: f32| audio.iter().map(|v| v * g).collect::<Vec<f32>>();
    // 1 % louder: SNR 40 dB, every mel bin above the floor 0.086 dB up (0.069 dB on average
    // here, where a fifth of the bins sit below the floor).
    let one_percent = scaled(1.01);
    assert!((snr_db(&audio, &one_percent) - 40.0).abs() < 0.01);
    let mel = log_mel_distance_db(&audio, &one_percent);
    assert!(mel > 0.05 && mel <= 0.0865, "1 % gain: {mel} dB");
    // Noise at a tenth of the signal's RMS: SNR 20 dB.
    let rms = (audio.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / audio.len() as f64).sqrt();
    let mut state = 1u64;
    let noisy: Vec<f32> = audio
        .iter()
        .map(|&v| {
            // ±1 with equal odds, from a linear congruential generator.
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let sign = if state >> 63 == 0 { 1.0 } else { -1.0 };
            v + (0.1 * rms * sign) as f32
        })
        .collect();
    assert!((snr_db(&audio, &noisy) - 20.0).abs() < 0.2);
    assert!(log_mel_distance_db(&audio, &noisy) > log_mel_distance_db(&audio, &one_percent));
}

/// Streamed synthesis computes the flow and decoder window by window; in bf16 it must still
/// equal whole-sentence synthesis in bf16 (every activation is rounded on its own, so only
/// `f32` summation order can differ), like the `f32` model's windowed test.
#[test]
fn bf16_windowed_audio_matches_whole_synthesis() {
    let bf16 = load(Precision::Bf16);
    let item = deterministic(&sentences()[3]);
    let whole = bf16
        .synthesize(std::slice::from_ref(&item))
        .unwrap()
        .remove(0);
    for (first, later) in [(16, 128), (7, 13)] {
        let mut audio = Vec::new();
        bf16.synthesize_windowed(&item, first, later, &mut |chunk| {
            audio.extend_from_slice(chunk);
            true
        })
        .unwrap();
        assert_eq!(audio.len(), whole.len());
        let diff = audio
            .iter()
            .zip(&whole)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        eprintln!("windows {first}/{later}: max diff {diff:e}");
        assert!(diff <= 1e-4, "windows {first}/{later}: max diff {diff}");
    }
}
