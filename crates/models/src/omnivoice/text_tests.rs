//! The text side and the whole `generate` against the official code:
//! `crates/models/tests/fixtures/omnivoice/{text.json, cross_fade.safetensors, e2e.safetensors}`
//! and the tiny checkpoint `e2e/` with its own byte-level BPE tokenizer, made by
//! `scripts/omnivoice_text_fixtures.py` (omnivoice 0.2.1, transformers 5.24, f32, SDPA).

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde_json::Value;

use super::{
    chunk_text, combine_text, cross_fade, resolve_instruct, resolve_language, Decoding, Generation,
    InstructError, Request, RequestError, Tts,
};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/omnivoice")
}

fn text_json() -> Value {
    let text = std::fs::read_to_string(fixtures().join("text.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn tts() -> Tts {
    Tts::load(&fixtures().join("e2e"), DType::F32, &Device::Cpu).unwrap()
}

#[test]
fn instructs_resolve_as_the_official_code() {
    let json = text_json();
    let cases = json["instructs"].as_array().unwrap();
    assert!(cases.len() >= 120);
    let (mut unknown, mut conflicts) = (0, 0);
    for case in cases {
        let instruct = case["instruct"].as_str().unwrap();
        let use_zh = case["use_zh"].as_bool().unwrap();
        let ours = resolve_instruct(instruct, use_zh);
        let what = format!("{instruct:?} (use_zh {use_zh})");
        if let Some(items) = case.get("unknown") {
            unknown += 1;
            let Err(InstructError::Unknown(ours)) = ours else {
                panic!("{what}: {ours:?}, expected unknown items");
            };
            let ours: Vec<Vec<Option<String>>> = ours
                .into_iter()
                .map(|u| vec![Some(u.raw), Some(u.normalized), u.suggestion])
                .collect();
            let official: Vec<Vec<Option<String>>> = items
                .as_array()
                .unwrap()
                .iter()
                .map(|i| {
                    i.as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .collect();
            assert_eq!(ours, official, "{what}");
        } else if let Some(groups) = case.get("conflicts") {
            conflicts += 1;
            let official: Vec<Vec<String>> =
                groups.as_array().unwrap().iter().map(strings).collect();
            assert_eq!(ours, Err(InstructError::Conflict(official)), "{what}");
        } else if case.get("error").is_some() {
            assert_eq!(ours, Err(InstructError::DialectAndAccent), "{what}");
        } else {
            let official = case["result"].as_str().map(str::to_string);
            assert_eq!(ours, Ok(official), "{what}");
        }
    }
    assert!(unknown > 20 && conflicts > 5, "{unknown} {conflicts}");
}

#[test]
fn instruct_errors_name_each_item_and_its_suggestion() {
    let error = resolve_instruct("mal, qqq, britsh accent", false)
        .unwrap_err()
        .to_string();
    for part in ["'mal' (did you mean 'male'?)", "'qqq'", "'british accent'?"] {
        assert!(error.contains(part), "{error}");
    }
    let error = resolve_instruct("male, 女", true).unwrap_err().to_string();
    assert!(error.contains("'男' vs '女'"), "{error}");
}

#[test]
fn languages_resolve_as_the_official_code_or_are_refused() {
    let json = text_json();
    let cases = json["languages"].as_array().unwrap();
    assert!(cases.len() >= 30);
    for case in cases {
        let Some(language) = case["language"].as_str() else {
            continue;
        };
        let ours = resolve_language(language);
        match case["result"].as_str() {
            Some(id) => assert_eq!(ours, Ok(Some(id)), "{language:?}"),
            // The official code drops what it does not know; here that is an error, but
            // for the literal None and an id in capitals.
            None if super::is_none_literal(language) => assert_eq!(ours, Ok(None)),
            None if language == "EN" => assert_eq!(ours, Ok(Some("en"))),
            None => {
                let error = ours.unwrap_err().to_string();
                assert!(error.contains(&format!("'{language}'")), "{error}");
            }
        }
    }
}

#[test]
fn text_is_combined_and_chunked_as_the_official_code() {
    let json = text_json();
    for case in json["combine"].as_array().unwrap() {
        let ours = combine_text(case["text"].as_str().unwrap(), case["ref_text"].as_str());
        assert_eq!(ours, case["result"].as_str().unwrap(), "{case}");
    }
    let cases = json["chunks"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let ours = chunk_text(
            case["text"].as_str().unwrap(),
            case["chunk_len"].as_u64().unwrap() as usize,
            case["min_chunk_len"].as_u64().map(|m| m as usize),
        );
        assert_eq!(ours, strings(&case["chunks"]), "{case}");
    }
}

#[test]
fn chunks_are_cross_faded_as_the_official_code() {
    let f = candle_core::safetensors::load(fixtures().join("cross_fade.safetensors"), &Device::Cpu)
        .unwrap();
    for case in 0..5 {
        let rate: Vec<i64> = f[&format!("case{case}_rate")].to_vec1().unwrap();
        let chunks: Vec<Vec<f32>> = (0..)
            .map_while(|i| f.get(&format!("case{case}_chunk{i}")))
            .map(|t| t.to_vec1().unwrap())
            .collect();
        let official: Vec<f32> = f[&format!("case{case}_out")].to_vec1().unwrap();
        let ours = cross_fade(&chunks, rate[0] as u32);
        assert_eq!(ours.len(), official.len(), "case {case}");
        // Same f32 products of the same f32 ramps: measured exact.
        let worst = ours
            .iter()
            .zip(&official)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-6, "case {case}: {worst}");
    }
}

#[test]
fn prompts_are_the_official_ids() {
    let tts = tts();
    let json = text_json();
    let cases = json["prompts"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let language = case["language"]
            .as_str()
            .and_then(|l| resolve_language(l).unwrap());
        let use_zh = text.chars().any(super::text::is_cjk);
        let instruct = case["instruct"]
            .as_str()
            .and_then(|i| resolve_instruct(i, use_zh).unwrap());
        let reference: Option<Tensor> = case["ref_frames"].as_array().map(|_| {
            let rows = id_rows(&case["ref_frames"]);
            let width = rows[0].len();
            Tensor::from_vec(rows.concat(), (rows.len(), width), &Device::Cpu).unwrap()
        });
        let ref_text = case["ref_text"].as_str();
        let prompt = tts
            .prompt(
                text,
                reference.as_ref().map(|r| (ref_text.unwrap(), r)),
                language,
                instruct.as_deref(),
                case["denoise"].as_bool().unwrap(),
                case["frames"].as_u64().unwrap() as usize,
            )
            .unwrap();
        let ids: Vec<Vec<u32>> = prompt.ids.to_vec2().unwrap();
        assert_eq!(ids, id_rows(&case["ids"]), "{text:?}");
        let audio: Vec<u8> = prompt.audio.to_vec1().unwrap();
        let official: Vec<u8> = case["audio"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u8)
            .collect();
        assert_eq!(audio, official, "{text:?}");
    }
}

pub(super) fn official_generation() -> Generation {
    // scripts/omnivoice_text_fixtures.py's E2E_CONFIG.
    Generation {
        decoding: Decoding {
            num_step: 6,
            position_temperature: 0.0,
            class_temperature: 0.0,
            ..Decoding::default()
        },
        audio_chunk_threshold: 0.5,
        audio_chunk_duration: 0.25,
        ..Generation::default()
    }
}

pub(super) fn request(text: &str, language: Option<&str>, instruct: Option<&str>) -> Request {
    Request {
        text: text.to_string(),
        language: language.map(str::to_string),
        instruct: instruct.map(str::to_string),
        speed: 1.0,
        duration: None,
        generation: official_generation(),
        reference: None,
        follows: None,
    }
}

/// Sample-wise against the official output, which post-processing quantized through int16
/// (pydub) before the peak normalization: the f32 logits differ from torch's in the last
/// bits, which is below every greedy choice here (the frames agree), and the decoded audio by
/// ~1e-6 of its peak, which can move a sample across an int16 step (1/32768 ≈ 3e-5, scaled by
/// 0.5/peak). 1e-4 allows a few such steps.
pub(super) fn assert_close(ours: &[f32], official: &[f32], what: &str) {
    assert_eq!(ours.len(), official.len(), "{what}: length");
    let worst = ours
        .iter()
        .zip(official)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!("{what}: {} samples, max |diff| {worst:e}", ours.len());
    assert!(worst <= 1e-4, "{what}: {worst}");
}

#[test]
fn synthesis_is_the_official_generate() {
    let tts = tts();
    assert_eq!((tts.sample_rate(), tts.frame_rate()), (11025, 175.0));
    let f =
        candle_core::safetensors::load(fixtures().join("e2e.safetensors"), &Device::Cpu).unwrap();
    // Voice design, auto voice, and a long text in chunks, in one batch.
    let requests = [
        request(
            "Hello there, nice to meet you.",
            Some("English"),
            Some("female, british accent"),
        ),
        request("你好，今天天气很好。", None, None),
        request(
            "The first sentence is short. Then a second one comes along, and a third follows it! \
             At last the fourth closes the text.",
            Some("en"),
            Some("male, low pitch"),
        ),
    ];
    let prepared: Vec<_> = requests.iter().map(|r| tts.check(r).unwrap()).collect();
    assert!(prepared[2].frames() > 87, "the last must be chunked");
    let audio = tts.synthesize(&prepared, &[1, 2, 3]).unwrap();
    for (i, ours) in audio.iter().enumerate() {
        let official: Vec<f32> = f[&format!("audio_{i}")].to_vec1().unwrap();
        assert_close(ours, &official, &format!("item {i}"));
    }

    // A fixed duration (the speed then only paces chunks), no denoise, no trimming.
    let mut alone = request("Just one item.", Some("de"), None);
    alone.duration = Some(0.4);
    alone.speed = 1.5;
    alone.generation.denoise = false;
    alone.generation.postprocess_output = false;
    let prepared = tts.check(&alone).unwrap();
    assert_eq!(prepared.frames(), 70);
    let ours = tts.synthesize(&[prepared], &[9]).unwrap();
    let official: Vec<f32> = f["audio_duration"].to_vec1().unwrap();
    assert_close(&ours[0], &official, "duration");
}

#[test]
fn an_items_audio_does_not_depend_on_its_batch() {
    let tts = tts();
    let mut sampled = request("Hello there.", Some("en"), Some("male"));
    sampled.generation.decoding.class_temperature = 1.0;
    sampled.generation.decoding.position_temperature = 5.0;
    // Decoded in the same batch (same generation settings), before it.
    let other = Request {
        text: "Another, longer text to go with it.".into(),
        ..sampled.clone()
    };
    let a = tts.check(&sampled).unwrap();
    let b = tts.check(&other).unwrap();
    let alone = tts.synthesize(std::slice::from_ref(&a), &[7]).unwrap();
    let batched = tts.synthesize(&[b, a.clone()], &[8, 7]).unwrap();
    assert_eq!(alone[0], batched[1]);
    let reseeded = tts.synthesize(&[a], &[70]).unwrap();
    assert_ne!(alone[0], reseeded[0]);
}

#[test]
fn bad_requests_are_refused_before_any_model_work() {
    let tts = tts();
    let check = |r: Request| tts.check(&r).unwrap_err();
    let mut r = request("Hi.", Some("klingon"), None);
    assert!(matches!(check(r.clone()), RequestError::Language(_)));
    r.language = None;
    r.instruct = Some("femal".into());
    let error = check(r.clone());
    assert!(matches!(error, RequestError::Instruct(_)));
    assert!(error.to_string().contains("'female'"), "{error}");
    r.instruct = None;
    r.speed = 0.0;
    assert_eq!(check(r.clone()), RequestError::Speed(0.0));
    r.speed = 1.0;
    r.duration = Some(f32::NAN);
    assert!(matches!(check(r.clone()), RequestError::Duration(_)));
    r.duration = None;
    r.text = " \n ".into();
    assert_eq!(check(r.clone()), RequestError::EmptyText);
    // The text's ideographs turn the instruct Chinese, as officially.
    let zh = tts
        .check(&request("你好", Some("none"), Some("female")))
        .unwrap();
    assert_eq!((zh.language(), zh.instruct()), (None, Some("女")));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn load_errors_name_the_file_and_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("e2e"), dir.path());
    assert!(Tts::check_dir(dir.path()).is_ok());
    // The load and the startup check (which reads no weights) fail at the same file and
    // tensor; the checks below hold for both messages (their first lines: candle appends a
    // backtrace when RUST_BACKTRACE is set).
    let load = || {
        let loaded = Tts::load(dir.path(), DType::F32, &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        let checked = Tts::check_dir(dir.path()).unwrap_err().to_string();
        let first = |m: &str| m.lines().next().unwrap_or_default().to_string();
        format!("{}\n{}", first(&loaded), first(&checked))
    };
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let error = load();
    assert!(
        error.lines().all(|e| e.contains("tokenizer.json")),
        "{error}"
    );

    std::fs::copy(
        fixtures().join("e2e/tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    let config = dir.path().join("config.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    json["llm_config"]["intermediate_size"] = 80.into();
    std::fs::write(&config, json.to_string()).unwrap();
    let error = load();
    assert!(
        error
            .lines()
            .all(|e| e.contains("model.safetensors") && e.contains("gate_proj")),
        "{error}"
    );

    std::fs::copy(fixtures().join("e2e/config.json"), &config).unwrap();
    // A download cut short: the header promises more data than there is.
    let weights = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() - 1000]).unwrap();
    let error = Tts::check_dir(dir.path()).unwrap_err().to_string();
    assert!(
        error.contains("model.safetensors") && error.contains("truncated"),
        "{error}"
    );
    std::fs::write(&weights, &bytes).unwrap();

    std::fs::remove_file(dir.path().join("audio_tokenizer/model.safetensors")).unwrap();
    let error = load();
    assert!(
        error
            .lines()
            .all(|e| e.contains("audio_tokenizer/model.safetensors")),
        "{error}"
    );
}

#[test]
fn a_server_can_share_one_tts_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Tts>();
    let tts = std::sync::Arc::new(tts());
    let worker = {
        let tts = tts.clone();
        std::thread::spawn(move || tts.check(&request("Hi.", None, None)).unwrap().frames())
    };
    assert!(worker.join().unwrap() >= 1);
}

/// A JSON array of arrays of ids, as the fixture script writes [C, L] id tensors.
fn id_rows(rows: &Value) -> Vec<Vec<u32>> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}
