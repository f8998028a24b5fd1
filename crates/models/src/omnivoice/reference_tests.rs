//! Cloning against the official code: the reference preprocessing rule by rule
//! (`reference.safetensors`, `reference_long.safetensors`) and `generate` with a
//! `voice_clone_prompt` on the tiny checkpoint `e2e/` (`clone.safetensors`), made by
//! `scripts/omnivoice_clone_fixtures.py` (omnivoice 0.2.1, pydub, f32) at 11025 samples/s and
//! hop 63.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};

use super::post::remove_silence;
use super::reference::{add_punctuation, numpy_rms, trim_long_audio};
use super::text_tests::{assert_close, official_generation, request};
use super::{prepare_reference, Generation, Reference, ReferenceError, RequestError, Tts};

const RATE: u32 = 11025;
const HOP: usize = 63;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/omnivoice")
}

/// A fixture's tensors and its metadata strings.
pub(super) fn load(name: &str) -> (HashMap<String, Tensor>, HashMap<String, String>) {
    let path = fixtures().join(name);
    let tensors = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    // The header: its length (u64, little-endian), then JSON with the `__metadata__` strings.
    let bytes = std::fs::read(&path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let metadata = serde_json::from_value(header["__metadata__"].clone()).unwrap();
    (tensors, metadata)
}

fn floats(t: &Tensor) -> Vec<f32> {
    t.to_vec1().unwrap()
}

fn scalar_f64(t: &Tensor) -> f64 {
    t.to_vec1::<f64>().unwrap()[0]
}

fn scalar_len(t: &Tensor) -> usize {
    t.to_vec1::<i64>().unwrap()[0] as usize
}

/// 16-bit samples stored as little-endian bytes, as floats (exact: k / 32768).
fn pcm(t: &Tensor) -> Vec<f32> {
    t.to_vec1::<u8>()
        .unwrap()
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect()
}

/// Sample-wise: the same float32 operations in the same order give the same bits; 1e-6
/// leaves room for nothing but a last-bit difference in the RMS scaling, below every int16
/// step (3e-5) the silence removal quantizes through.
fn assert_samples(ours: &[f32], official: &[f32], what: &str) {
    assert_eq!(ours.len(), official.len(), "{what}: length");
    let worst = ours
        .iter()
        .zip(official)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 1e-6, "{what}: max |diff| {worst}");
}

#[test]
fn references_are_prepared_as_the_official_code_does() {
    let (f, metadata) = load("reference.safetensors");
    for name in ["speech", "quiet", "loud", "no_silence", "floor_only"] {
        let input = floats(&f[&format!("{name}.input")]);
        let official_rms = scalar_f64(&f[&format!("{name}.rms")]);
        // numpy's float32 mean of squares, to the bit.
        let rms = numpy_rms(&input);
        assert_eq!(f64::from(rms), official_rms, "{name}: rms");

        // The RMS rule alone (no preprocessing): raised when quiet, then whole hops.
        let raw = prepare_reference(&input, RATE, HOP, "Some words", false).unwrap();
        assert_eq!(raw.rms, rms, "{name}");
        assert_eq!(raw.text, "Some words", "{name}: text untouched");
        let scaled = match f.get(&format!("{name}.scaled")) {
            Some(t) => floats(t),
            None => input.clone(),
        };
        assert_eq!(raw.wave.len(), scaled.len() - scaled.len() % HOP, "{name}");
        assert_samples(
            &raw.wave,
            &scaled[..raw.wave.len()],
            &format!("{name}: scaled"),
        );

        // Silence removal, then the cut to whole hops.
        let removed = remove_silence(&scaled, RATE, 200, 100, 200);
        let official_len = scalar_len(&f[&format!("{name}.silence_removed_len")]);
        assert_eq!(removed.len(), official_len, "{name}: after silence removal");
        let prepared = prepare_reference(&input, RATE, HOP, "Some words", true).unwrap();
        let official = floats(&f[&format!("{name}.prepared")]);
        assert_samples(&prepared.wave, &official, &format!("{name}: prepared"));
        assert_eq!(prepared.wave.len() % HOP, 0);
        assert_eq!(prepared.text, "Some words.");
        assert_eq!(prepared.rms, rms);
    }

    let cases: Vec<(String, String)> = serde_json::from_str(&metadata["punctuation"]).unwrap();
    for (text, official) in cases {
        assert_eq!(add_punctuation(&text), official, "{text:?}");
    }
}

#[test]
fn a_long_reference_without_transcript_is_cut_at_a_pause() {
    let (f, _) = load("reference_long.safetensors");
    let input = pcm(&f["input_pcm"]);
    assert!(input.len() as f64 / f64::from(RATE) > 20.0);
    let rms = numpy_rms(&input);
    assert_eq!(f64::from(rms), scalar_f64(&f["rms"]));
    let scaled: Vec<f32> = if rms < 0.1 {
        input.iter().map(|&x| x * 0.1 / rms).collect()
    } else {
        input.clone()
    };
    let trimmed = trim_long_audio(&scaled, RATE).expect("over 20 s");
    assert_eq!(trimmed.len(), scalar_len(&f["trimmed_len"]), "trimmed");
    // The official trim keeps a prefix of the 16-bit input (the script checks it).
    assert_samples(&trimmed, &input[..trimmed.len()], "trimmed");
    let removed = remove_silence(&trimmed, RATE, 200, 100, 200);
    assert_eq!(removed.len(), scalar_len(&f["silence_removed_len"]));

    let prepared = prepare_reference(&input, RATE, HOP, " ", true).unwrap();
    assert_samples(&prepared.wave, &pcm(&f["prepared_pcm"]), "prepared");
    assert_eq!(prepared.text, "");
    // With a transcript the clip must still match it: nothing is cut.
    let kept = prepare_reference(&input, RATE, HOP, "A transcript", true).unwrap();
    assert_eq!(kept.wave.len(), scalar_len(&f["with_text_prepared_len"]));
    assert!(trim_long_audio(&input[..20 * RATE as usize], RATE).is_none());
}

#[test]
fn unusable_references_are_clear_errors() {
    let prepare = |wave: &[f32], preprocess| prepare_reference(wave, RATE, HOP, "Hi", preprocess);
    // Officially: RMS 0 is not raised, and silence removal leaves nothing (a ValueError).
    let silent = vec![0.0; RATE as usize];
    assert_eq!(prepare(&silent, true), Err(ReferenceError::Silent));
    assert_eq!(prepare(&silent, false), Err(ReferenceError::Silent));
    let mut broken = vec![0.3; 200];
    broken[7] = f32::NAN;
    assert_eq!(prepare(&broken, false), Err(ReferenceError::NotFinite));
    let short = vec![0.3; HOP - 1];
    assert_eq!(
        prepare(&short, false),
        Err(ReferenceError::TooShort {
            samples: HOP - 1,
            hop: HOP
        })
    );
    assert!(matches!(
        prepare(&[], true),
        Err(ReferenceError::TooShort { samples: 0, .. })
    ));
    for error in [ReferenceError::Silent, ReferenceError::EmptyAfterTrimming] {
        assert!(!error.to_string().is_empty());
    }
}

fn tts() -> Tts {
    Tts::load(&fixtures().join("e2e"), DType::F32, &Device::Cpu).unwrap()
}

fn clone_generation() -> Generation {
    // scripts/omnivoice_clone_fixtures.py's CLONE_CONFIG.
    Generation {
        audio_chunk_threshold: 1.0,
        audio_chunk_duration: 0.5,
        ..official_generation()
    }
}

fn official_reference(
    f: &HashMap<String, Tensor>,
    texts: &serde_json::Value,
    name: &str,
) -> Arc<Reference> {
    Arc::new(Reference {
        codes: f[&format!("{name}.codes")].clone(),
        text: texts[name].as_str().unwrap().to_string(),
        rms: scalar_f64(&f[&format!("{name}.rms")]) as f32,
    })
}

/// The script's `CLONE_ITEMS`: text, language, instruct, reference clip, its transcript.
type CloneItem = (String, Option<String>, Option<String>, String, String);

#[test]
fn cloning_is_the_official_generate() {
    let tts = tts();
    let (f, metadata) = load("clone.safetensors");
    let texts: serde_json::Value = serde_json::from_str(&metadata["ref_texts"]).unwrap();
    let items: Vec<CloneItem> = serde_json::from_str(&metadata["items"]).unwrap();

    // Each reference as the official code prepared it, before its codec.
    for name in ["speech", "loud", "quiet"] {
        let input = floats(&f[&format!("{name}.input")]);
        let transcript = items.iter().find(|i| i.3 == name).unwrap().4.clone();
        let prepared = prepare_reference(&input, RATE, HOP, &transcript, true).unwrap();
        assert_samples(
            &prepared.wave,
            &floats(&f[&format!("{name}.prepared")]),
            name,
        );
        assert_eq!(prepared.text, texts[name].as_str().unwrap());
        assert_eq!(
            f64::from(prepared.rms),
            scalar_f64(&f[&format!("{name}.rms")])
        );
        assert_eq!(
            prepared.wave.len() / HOP,
            f[&format!("{name}.codes")].dim(1).unwrap()
        );
    }

    // The official batch (a short text, one with an instruct, a chunked one, a quiet
    // reference), here between two items without a reference: all share the batch.
    let design = request(
        "Hello there, nice to meet you.",
        Some("English"),
        Some("female, british accent"),
    );
    let mut requests = vec![tts.check(&design).unwrap()];
    for (text, language, instruct, clip, _) in &items {
        let mut r = request(text, language.as_deref(), instruct.as_deref());
        r.generation = clone_generation();
        r.reference = Some(official_reference(&f, &texts, clip));
        requests.push(tts.check(&r).unwrap());
    }
    let mut auto = request("你好，今天天气很好。", None, None);
    auto.generation = clone_generation();
    requests.push(tts.check(&auto).unwrap());
    let long = &requests[3];
    assert!(long.frames() > 175, "the long text must be chunked");
    let audio = tts.synthesize(&requests, &[1, 2, 3, 4, 5, 6]).unwrap();
    for (i, ours) in audio[1..5].iter().enumerate() {
        let official = floats(&f[&format!("audio_{i}")]);
        assert_close(ours, &official, &format!("clone {i}"));
    }
    // The unreferenced items are untouched by the references beside them.
    let e2e =
        candle_core::safetensors::load(fixtures().join("e2e.safetensors"), &Device::Cpu).unwrap();
    assert_close(&audio[0], &floats(&e2e["audio_0"]), "design beside clones");
    let alone = tts.synthesize(&requests[5..], &[6]).unwrap();
    assert_eq!(alone[0], audio[5]);
}

#[test]
fn bad_references_are_refused_before_any_model_work() {
    let tts = tts();
    let good = Reference {
        codes: Tensor::zeros((8, 4), DType::U32, &Device::Cpu).unwrap(),
        text: "Hello.".into(),
        rms: 0.2,
    };
    let check = |reference: Reference| {
        let mut r = request("Hi.", None, None);
        r.reference = Some(Arc::new(reference));
        tts.check(&r)
    };
    assert!(check(good.clone()).is_ok());
    let with = |f: &dyn Fn(&mut Reference)| {
        let mut r = good.clone();
        f(&mut r);
        check(r).unwrap_err()
    };
    let shape =
        |r: &mut Reference| r.codes = Tensor::zeros((9, 4), DType::U32, &Device::Cpu).unwrap();
    assert!(matches!(
        with(&shape),
        RequestError::ReferenceShape { codebooks: 8, .. }
    ));
    let float =
        |r: &mut Reference| r.codes = Tensor::zeros((8, 4), DType::F32, &Device::Cpu).unwrap();
    assert!(matches!(with(&float), RequestError::ReferenceShape { .. }));
    let flat = |r: &mut Reference| r.codes = Tensor::zeros(8, DType::U32, &Device::Cpu).unwrap();
    assert!(matches!(with(&flat), RequestError::ReferenceShape { .. }));
    let empty =
        |r: &mut Reference| r.codes = Tensor::zeros((8, 0), DType::U32, &Device::Cpu).unwrap();
    assert_eq!(with(&empty), RequestError::ReferenceEmpty);
    // The mask id (16) is not a code; neither is a negative one.
    let mask = |r: &mut Reference| r.codes = Tensor::full(16u32, (8, 4), &Device::Cpu).unwrap();
    assert_eq!(
        with(&mask),
        RequestError::ReferenceCode { code: 16, size: 16 }
    );
    let negative = |r: &mut Reference| r.codes = Tensor::full(-1i64, (8, 4), &Device::Cpu).unwrap();
    assert_eq!(
        with(&negative),
        RequestError::ReferenceCode { code: -1, size: 16 }
    );
    let text = |r: &mut Reference| r.text = " \n".into();
    assert_eq!(with(&text), RequestError::ReferenceText);
    for rms in [0.0, -0.1, f32::NAN, f32::INFINITY] {
        let level = move |r: &mut Reference| r.rms = rms;
        assert!(
            matches!(with(&level), RequestError::ReferenceRms(_)),
            "{rms}"
        );
    }
}
