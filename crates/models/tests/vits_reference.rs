//! Checks the native VITS implementation against onnxruntime on the real default voice.
//!
//! Fixtures in `tests/fixtures/vits/` come from `scripts/make-vits-fixtures.sh` (noise 0, so
//! the reference is deterministic). The voice itself is installed by `scripts/setup.sh`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use candle_core::Device;
use omnivoice_models::vits::{Sampling, Vits, VitsConfig, VitsInput, Weights};
use omnivoice_models::ModelError;

/// The default Piper voice, which `scripts/setup.sh` installs at the workspace root.
const VOICE: &str = "../../voices/en_US-joe-medium.onnx";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn voice_json() -> serde_json::Value {
    let path = root().join(format!("{VOICE}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The voice of `weights`, with its `.onnx.json`.
fn load(weights: Result<Weights, ModelError>) -> Result<Vits, ModelError> {
    let weights = weights?;
    Vits::load(&VitsConfig::from_weights(&weights, &voice_json())?, weights)
}

/// Loaded once per test binary; loading dominates otherwise.
fn voice() -> &'static Vits {
    static VITS: OnceLock<Vits> = OnceLock::new();
    VITS.get_or_init(|| {
        let start = Instant::now();
        let vits = load(Weights::from_onnx(&root().join(VOICE), &Device::Cpu)).unwrap();
        eprintln!("from_onnx: {:.0} ms", start.elapsed().as_secs_f64() * 1e3);
        vits
    })
}

struct Fixture {
    name: String,
    ids: Vec<i64>,
    expected: Vec<f32>,
}

fn fixtures() -> Vec<Fixture> {
    let dir = root().join("tests/fixtures/vits");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            (path.extension()? == "ids").then(|| path.file_stem()?.to_str().map(String::from))?
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= 4,
        "expected at least 4 fixtures in {}",
        dir.display()
    );
    names
        .into_iter()
        .map(|name| {
            let ids = std::fs::read_to_string(dir.join(format!("{name}.ids"))).unwrap();
            let ids = ids.trim().split(',').map(|s| s.parse().unwrap()).collect();
            let bytes = std::fs::read(dir.join(format!("{name}.f32"))).unwrap();
            let expected = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            Fixture {
                name,
                ids,
                expected,
            }
        })
        .collect()
}

fn deterministic(ids: Vec<i64>) -> VitsInput {
    VitsInput {
        ids,
        length_scale: 1.0,
        sampling: Sampling {
            seed: 0,
            noise_scale: Some(0.0),
            noise_w: Some(0.0),
            ..Sampling::default()
        },
    }
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn assert_matches_reference(name: &str, got: &[f32], expected: &[f32]) {
    assert_eq!(got.len(), expected.len(), "{name}: sample count");
    let diff = max_abs_diff(got, expected);
    eprintln!("{name}: {} samples, max |diff| {diff:.2e}", got.len());
    assert!(diff <= 1e-3, "{name}: max |diff| {diff} > 1e-3");
}

#[test]
fn matches_onnxruntime_one_sentence_at_a_time() {
    let vits = voice();
    assert_eq!(vits.sample_rate(), 22050);
    assert_eq!(vits.num_speakers(), 1);
    for f in fixtures() {
        let start = Instant::now();
        let audio = vits
            .synthesize(&[deterministic(f.ids.clone())])
            .unwrap()
            .remove(0);
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "{}: synthesized {:.2} s of audio in {:.0} ms (RTF {:.3})",
            f.name,
            audio.len() as f64 / 22050.0,
            secs * 1e3,
            secs * 22050.0 / audio.len() as f64
        );
        assert_matches_reference(&f.name, &audio, &f.expected);
    }
}

#[test]
fn matches_onnxruntime_as_one_padded_batch() {
    let fixtures = fixtures();
    let batch: Vec<VitsInput> = fixtures
        .iter()
        .map(|f| deterministic(f.ids.clone()))
        .collect();
    let audio = voice().synthesize(&batch).unwrap();
    for (f, got) in fixtures.iter().zip(&audio) {
        assert_matches_reference(&f.name, got, &f.expected);
    }
}

#[test]
fn batch_items_equal_their_single_runs_with_default_noise() {
    let vits = voice();
    let cfg = vits.config();
    let batch: Vec<VitsInput> = fixtures()
        .into_iter()
        .zip(1u64..)
        .map(|(f, seed)| VitsInput {
            ids: f.ids,
            length_scale: cfg.length_scale,
            sampling: Sampling {
                seed,
                ..Sampling::default()
            },
        })
        .collect();
    let together = vits.synthesize(&batch).unwrap();
    for (n, (item, audio)) in batch.iter().zip(&together).enumerate() {
        let alone = vits
            .synthesize(std::slice::from_ref(item))
            .unwrap()
            .remove(0);
        assert_eq!(audio.len(), alone.len(), "item {n}: sample count");
        let diff = max_abs_diff(audio, &alone);
        eprintln!(
            "item {n}: {} samples, batch vs single max |diff| {diff:.2e}",
            audio.len()
        );
        assert!(diff <= 1e-4, "item {n}: batch vs single max |diff| {diff}");
    }
    // The noise is live: another seed changes the audio.
    let mut other = batch[2].clone();
    other.sampling.seed += 100;
    let other = vits.synthesize(&[other]).unwrap().remove(0);
    assert!(other.len() != together[2].len() || max_abs_diff(&other, &together[2]) > 1e-3);
}

#[test]
fn safetensors_round_trip_gives_the_same_audio() {
    let vits = voice();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("joe.safetensors");
    vits.save_safetensors(&path).unwrap();
    let start = Instant::now();
    let again = load(Weights::from_safetensors(&path, &Device::Cpu)).unwrap();
    eprintln!(
        "from_safetensors: {:.0} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(again.config(), vits.config());
    let f = &fixtures()[1];
    let input = [deterministic(f.ids.clone())];
    assert_eq!(
        again.synthesize(&input).unwrap(),
        vits.synthesize(&input).unwrap()
    );
}

#[test]
fn errors_name_the_file() {
    let missing = Path::new("voices/does-not-exist.onnx");
    let err = load(Weights::from_onnx(missing, &Device::Cpu))
        .err()
        .unwrap();
    assert!(err.to_string().contains("does-not-exist.onnx"), "{err}");
    let mut input = deterministic(vec![1, 0, 2]);
    input.sampling.speaker = Some(1);
    let single = voice().synthesize(&[input]);
    assert!(single.is_err());
}
