//! Windowed synthesis against whole-utterance synthesis, on tiny random voices (every
//! architecture variant) and on the real default voice.

use std::path::PathBuf;
use std::sync::OnceLock;

use candle_core::Device;

use super::super::tests::{input, load, max_abs_diff, Variant};
use super::*;
use crate::vits::ResBlockKind;
use crate::vits::Sampling;

/// Batch-equivalence tolerance of the model tests (float rounding differs between code paths).
const TOLERANCE: f32 = 1e-4;

/// Windowed audio and the size of each chunk.
fn windowed(vits: &Vits, item: &VitsInput, first: usize, later: usize) -> (Vec<f32>, Vec<usize>) {
    let mut audio = Vec::new();
    let mut sizes = Vec::new();
    let samples = vits
        .synthesize_windowed(item, first, later, &mut |chunk| {
            audio.extend_from_slice(chunk);
            sizes.push(chunk.len());
            true
        })
        .unwrap();
    let timed = vits
        .synthesize_timed(std::slice::from_ref(item))
        .unwrap()
        .remove(0);
    assert_eq!(samples.frames_per_id, timed.frames_per_id);
    assert_eq!(samples.samples, audio.len());
    (audio, sizes)
}

/// Checks windowed against whole synthesis; returns the number of chunks and the max diff.
fn check(vits: &Vits, item: &VitsInput, first: usize, later: usize) -> (usize, f32) {
    let whole = vits
        .synthesize(std::slice::from_ref(item))
        .unwrap()
        .remove(0);
    let (audio, sizes) = windowed(vits, item, first, later);
    assert_eq!(audio.len(), whole.len(), "windows {first}/{later}");
    let diff = max_abs_diff(&audio, &whole);
    assert!(
        diff <= TOLERANCE,
        "windows {first}/{later}, {} ids: max diff {diff}",
        item.ids.len()
    );
    // Every chunk but the last has exactly its window's samples.
    let hop = vits.config().hop_length;
    for (n, &size) in sizes.iter().enumerate() {
        let window = if n == 0 { first } else { later } * hop;
        if n + 1 < sizes.len() {
            assert_eq!(size, window, "chunk {n}");
        } else {
            assert!(size > 0 && size <= window, "last chunk {size} of {window}");
        }
    }
    (sizes.len(), diff)
}

fn with_noise(mut item: VitsInput, noise_scale: f32, noise_w: f32) -> VitsInput {
    item.sampling.noise_scale = Some(noise_scale);
    item.sampling.noise_w = Some(noise_w);
    item
}

fn variants() -> Vec<Variant> {
    let mut all = Vec::new();
    for resblock in [ResBlockKind::One, ResBlockKind::Two] {
        for (speakers, stochastic) in [(1, true), (3, false), (3, true)] {
            all.push(Variant {
                resblock,
                speakers,
                stochastic,
            });
        }
    }
    all
}

#[test]
fn tiny_voices_windowed_audio_matches_whole_synthesis() {
    // Window sizes that fall everywhere: single frames, primes, longer than the utterance.
    let windows = [(1, 1), (2, 3), (5, 7), (16, 64), (10_000, 1)];
    let (mut most_chunks, mut worst) = (0, 0f32);
    for variant in variants() {
        let vits = load(&variant);
        let speaker = (variant.speakers > 1).then_some(2);
        for (len, seed) in [(1, 11), (5, 12), (17, 13), (40, 14)] {
            let item = input(len, seed, speaker);
            for noise in [(0.667, 0.8), (0.0, 0.0)] {
                let item = with_noise(item.clone(), noise.0, noise.1);
                for &(first, later) in &windows {
                    let (chunks, diff) = check(&vits, &item, first, later);
                    most_chunks = most_chunks.max(chunks);
                    worst = worst.max(diff);
                }
            }
        }
    }
    assert!(
        most_chunks > 10,
        "the utterances never spanned many windows"
    );
    eprintln!("tiny voices: largest windowed vs whole difference {worst:e}");
}

#[test]
fn without_the_halo_window_edges_change_the_audio() {
    let vits = load(&Variant {
        resblock: ResBlockKind::Two,
        speakers: 1,
        stochastic: true,
    });
    let item = input(40, 3, None);
    let whole = vits
        .synthesize(std::slice::from_ref(&item))
        .unwrap()
        .remove(0);
    let Prior { z_p, g, .. } = vits.prior(std::slice::from_ref(&item)).unwrap();
    let no_halo = vits
        .piece_shapes()
        .into_iter()
        .map(|(f, _)| (f, Reach::default()))
        .collect();
    let chain = vits.chain(z_p, g.as_ref(), no_halo).unwrap();
    let mut audio = Vec::new();
    let hop = vits.config().hop_length;
    chain
        .stream(5 * hop, 7 * hop, &mut |chunk| {
            audio.extend_from_slice(chunk);
            true
        })
        .unwrap();
    assert_eq!(audio.len(), whole.len());
    let diff = max_abs_diff(&audio, &whole);
    assert!(diff > 100.0 * TOLERANCE, "max diff without halo {diff}");
}

#[test]
fn returning_false_stops_after_that_chunk() {
    let vits = load(&Variant {
        resblock: ResBlockKind::One,
        speakers: 1,
        stochastic: true,
    });
    let item = input(40, 5, None);
    let whole = vits
        .synthesize(std::slice::from_ref(&item))
        .unwrap()
        .remove(0);
    let hop = vits.config().hop_length;
    assert!(whole.len() > 5 * hop, "utterance too short for the test");
    let mut calls = 0;
    let samples = vits
        .synthesize_windowed(&item, 2, 3, &mut |_| {
            calls += 1;
            calls < 2
        })
        .unwrap()
        .samples;
    assert_eq!((calls, samples), (2, 5 * hop));
}

#[test]
fn rejects_empty_windows_and_bad_items() {
    let vits = load(&Variant {
        resblock: ResBlockKind::Two,
        speakers: 1,
        stochastic: false,
    });
    let item = input(5, 1, None);
    let mut never = |_: &[f32]| -> bool { panic!("no audio expected") };
    for (first, later) in [(0, 4), (4, 0)] {
        let result = vits.synthesize_windowed(&item, first, later, &mut never);
        assert!(
            matches!(result, Err(ModelError::Input(_))),
            "{first}/{later}"
        );
    }
    let empty = VitsInput {
        ids: Vec::new(),
        ..item
    };
    let result = vits.synthesize_windowed(&empty, 4, 4, &mut never);
    assert!(matches!(result, Err(ModelError::Input(_))));
}

#[test]
fn receptive_field_adds_up_the_pieces() {
    let vits = load(&Variant {
        resblock: ResBlockKind::One,
        speakers: 1,
        stochastic: true,
    });
    let field = vits.receptive_field();
    // Each coupling is a WaveNet of dilated "same" convolutions, one after another.
    let cfg = &vits.config().flow;
    let per_coupling: usize = (0..cfg.wavenet_layers as u32)
        .map(|i| cfg.dilation_rate.pow(i) * (cfg.kernel_size - 1) / 2)
        .sum();
    let flow = per_coupling * cfg.couplings.len();
    assert_eq!(
        field.flow,
        Reach {
            left: flow,
            right: flow
        }
    );
    assert!(field.decoder.left > 0 && field.decoder.right > 0);
    assert_eq!(field.total, field.flow.then(field.decoder));
}

// The real default voice (installed by `scripts/setup.sh`).

fn real_voice() -> &'static Vits {
    static VITS: OnceLock<Vits> = OnceLock::new();
    VITS.get_or_init(|| {
        let voice =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../voices/en_US-joe-medium.onnx");
        let json = voice.with_extension("onnx.json");
        let json = std::fs::read_to_string(&json)
            .unwrap_or_else(|e| panic!("{}: {e} (run scripts/setup.sh)", json.display()));
        let weights = crate::vits::Weights::from_onnx(&voice, &Device::Cpu).unwrap();
        let json = serde_json::from_str(&json).unwrap();
        let config = crate::vits::VitsConfig::from_weights(&weights, &json).unwrap();
        Vits::load(&config, weights).unwrap()
    })
}

fn fixture_ids(name: &str) -> Vec<i64> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/vits")
        .join(format!("{name}.ids"));
    let text = std::fs::read_to_string(&path).unwrap();
    text.trim().split(',').map(|x| x.parse().unwrap()).collect()
}

fn real_input(name: &str, noise: Option<(f32, f32)>) -> VitsInput {
    let vits = real_voice();
    let (noise_scale, noise_w) =
        noise.unwrap_or((vits.config().noise_scale, vits.config().noise_w));
    VitsInput {
        ids: fixture_ids(name),
        length_scale: vits.config().length_scale,
        sampling: Sampling {
            seed: 42,
            noise_scale: Some(noise_scale),
            noise_w: Some(noise_w),
            ..Sampling::default()
        },
    }
}

#[test]
fn real_voice_windowed_audio_matches_whole_synthesis() {
    let vits = real_voice();
    let field = vits.receptive_field();
    eprintln!("receptive field in frames: {field:?}");
    eprintln!("pieces (upsampling, reach): {:?}", vits.piece_shapes());
    // "Hi." (shorter than most windows) and the longest fixture sentence.
    for (name, windows) in [
        ("sentence0", &[(1, 3), (16, 96), (10_000, 1)][..]),
        ("sentence3", &[(7, 13), (16, 96), (12, 128)][..]),
    ] {
        for noise in [Some((0.0, 0.0)), None] {
            let item = real_input(name, noise);
            for &(first, later) in windows {
                let (chunks, diff) = check(vits, &item, first, later);
                eprintln!(
                    "{name} noise {noise:?} windows {first}/{later}: {chunks} chunks, max diff {diff:e}"
                );
            }
        }
    }
}
