//! Whisper (the multilingual base model of `scripts/asr.py`, told the language is Mandarin)
//! hears our Mandarin as well as the reference's: the same 12 sentences in two voices, spoken
//! by the server (our G2P) and by kokoro-onnx fed misaki 0.9.4's phonemes (from the committed
//! oracle fixture, tests/fixtures/cjk/zh.tsv; `scripts/kokoro_onnx_speak.py`, same int8 file
//! and packs). Our character error rate must be no worse than kokoro-onnx's plus 2 points.
//!
//! The same sentences sent to OpenAI's `tts-1`/`alloy` (an English voice) are handed to the
//! Mandarin voice `[voices.by_language]` names (the first of the two): Whisper, left to tell
//! the language itself, must hear Mandarin in every one, and as well as it hears kokoro-onnx's
//! same voice, left to tell the language too, plus 2 points.

mod common;

use std::path::PathBuf;

use common::listening::{edit_distance, kokoro_onnx_speak, transcribe};
use common::{kokoro_dir, post_speech, read_wav, Binary};
use serde_json::{json, Value};

const FIXTURE: &str = include_str!("fixtures/cjk/zh.tsv");
const VOICES: [&str; 2] = ["zf_xiaoxiao", "zm_yunxi"];
/// Sentences of the fixture without digits or Latin letters (which Whisper may write another
/// way than the text: a spelling difference is no intelligibility error), 12 of them.
const SENTENCES: usize = 12;

fn sentences() -> Vec<(String, String)> {
    FIXTURE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut fields = l.split('\t');
            Some((fields.next()?.to_string(), fields.next()?.to_string()))
        })
        .filter(|(text, _)| !text.chars().any(|c| c.is_ascii_alphanumeric()))
        .take(SENTENCES)
        .collect()
}

/// The ideographs of a text in simplified characters, what the error rate counts: Whisper
/// writes some sentences in traditional characters and some in simplified, on either side,
/// and "氣" for "气" is a spelling, not a misheard word. Counted as errors, those made most
/// of both sides' errors and moved with any change in the audio (measured on an AVX-512 Xeon:
/// 34 errors of 118 for the routed voice, of which about 20 were only the script).
fn ideographs(text: &str) -> Vec<char> {
    zhconv::zhconv(text, zhconv::Variant::ZhCN)
        .chars()
        .filter(|&c| omnivoice_server::text::writing::is_ideograph(c))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whisper_hears_our_mandarin_as_well_as_kokoro_onnx_with_misaki() {
    let dir = kokoro_dir();
    let sentences = sentences();
    assert_eq!(sentences.len(), SENTENCES);
    let tmp = tempfile::tempdir().unwrap();
    let mandarin = common::mandarin_dir();
    // The routed voice is one of the compared ones, so that its bar is like for like.
    let config = tmp.path().join("config.toml");
    let routed_voice = VOICES[0];
    std::fs::write(
        &config,
        format!("[voices.by_language]\nzh = \"{routed_voice}\"\n"),
    )
    .unwrap();
    let server = Binary::ready(&[
        "--config",
        config.to_str().unwrap(),
        "--no-cache",
        "--kokoro-dir",
        dir.to_str().unwrap(),
        "--mandarin-dir",
        mandarin.to_str().unwrap(),
    ])
    .await;
    let mut routed = Vec::new();
    for (i, (text, _)) in sentences.iter().enumerate() {
        let body = json!({"model": "tts-1", "voice": "alloy", "input": text,
                          "response_format": "wav", "stream": false});
        let response = post_speech(&server.url, &body).await;
        assert_eq!(response.status(), 200, "tts-1 {text}");
        assert_eq!(response.headers()["content-language"], "zh", "{text}");
        let file = tmp.path().join(format!("routed-{i}.wav"));
        std::fs::write(&file, response.bytes().await.unwrap()).unwrap();
        routed.push(file);
    }
    let (mut ours, mut jobs) = (Vec::new(), Vec::new());
    for voice in VOICES {
        for (i, (text, phonemes)) in sentences.iter().enumerate() {
            let body = json!({"model": "kokoro", "voice": voice, "input": text,
                              "response_format": "wav", "stream": false});
            let response = post_speech(&server.url, &body).await;
            assert_eq!(response.status(), 200, "{voice} {text}");
            let bytes = response.bytes().await.unwrap();
            assert_eq!(read_wav(&bytes).0, 24_000);
            if voice == routed_voice {
                // Routing hands the sentence to the voice, nothing else: the same samples.
                let routed_bytes = std::fs::read(&routed[i]).unwrap();
                assert!(
                    read_wav(&routed_bytes).1 == read_wav(&bytes).1,
                    "tts-1 routed to {voice} speaks as {voice} itself: {text}"
                );
            }
            let file = tmp.path().join(format!("ours-{voice}-{i}.wav"));
            std::fs::write(&file, bytes).unwrap();
            ours.push(file);
            let theirs = tmp.path().join(format!("kokoro-onnx-{voice}-{i}.wav"));
            jobs.push(json!({"voice": voice, "phonemes": phonemes, "wav": theirs}));
        }
    }
    drop(server);
    kokoro_onnx_speak(&Value::Array(jobs.clone())).await;
    let theirs: Vec<PathBuf> = jobs
        .iter()
        .map(|j| PathBuf::from(j["wav"].as_str().unwrap()))
        .collect();
    let heard = transcribe("zh", &[ours.clone(), theirs.clone()].concat()).await;
    let (heard_ours, heard_theirs) = heard.split_at(ours.len());
    // The routed voice's audio and kokoro-onnx's of the same voice, the language left to
    // Whisper for both.
    let theirs_routed = &theirs[..sentences.len()];
    let heard_auto = transcribe("auto", &[routed.clone(), theirs_routed.to_vec()].concat()).await;
    let (heard_routed, heard_theirs_routed) = heard_auto.split_at(routed.len());

    let (mut errors_ours, mut errors_theirs, mut total) = (0, 0, 0);
    for (v, voice) in VOICES.iter().enumerate() {
        for (i, (text, _)) in sentences.iter().enumerate() {
            let reference = ideographs(text);
            let k = v * sentences.len() + i;
            let ours_text = heard_ours[k]["text"].as_str().unwrap_or("");
            let theirs_text = heard_theirs[k]["text"].as_str().unwrap_or("");
            let ours = edit_distance(&reference, &ideographs(ours_text));
            let theirs = edit_distance(&reference, &ideographs(theirs_text));
            eprintln!("{voice} {text}\n  ours ({ours}): {ours_text}\n  kokoro-onnx ({theirs}): {theirs_text}");
            (errors_ours, errors_theirs, total) = (
                errors_ours + ours,
                errors_theirs + theirs,
                total + reference.len(),
            );
        }
    }
    let (mut errors_routed, mut errors_theirs_routed, mut total_routed) = (0, 0, 0);
    for (((text, _), heard), theirs) in sentences.iter().zip(heard_routed).zip(heard_theirs_routed)
    {
        let reference = ideographs(text);
        let text_heard = heard["text"].as_str().unwrap_or("");
        let theirs_text = theirs["text"].as_str().unwrap_or("");
        let errors = edit_distance(&reference, &ideographs(text_heard));
        let theirs_errors = edit_distance(&reference, &ideographs(theirs_text));
        eprintln!(
            "tts-1 ({routed_voice}) {text}\n  heard as {} ({errors}): {text_heard}\n  \
             kokoro-onnx heard as {} ({theirs_errors}): {theirs_text}",
            heard["language"], theirs["language"]
        );
        assert_eq!(heard["language"], "zh", "Whisper hears Mandarin: {text}");
        errors_routed += errors;
        errors_theirs_routed += theirs_errors;
        total_routed += reference.len();
    }
    let routed_cer = 100.0 * errors_routed as f64 / total_routed as f64;
    let theirs_routed_cer = 100.0 * errors_theirs_routed as f64 / total_routed as f64;
    let cer = |errors: usize| 100.0 * errors as f64 / total as f64;
    eprintln!(
        "tts-1, routed to {routed_voice}: character error rate {routed_cer:.1} %, kokoro-onnx's \
         {theirs_routed_cer:.1} %"
    );
    assert!(
        routed_cer <= theirs_routed_cer + 2.0,
        "routed {routed_cer:.1} % against kokoro-onnx's {theirs_routed_cer:.1} % (same voice)"
    );
    eprintln!(
        "character error rate: ours {:.1} % ({errors_ours} of {total}), kokoro-onnx + misaki {:.1} % ({errors_theirs} of {total})",
        cer(errors_ours),
        cer(errors_theirs)
    );
    assert!(
        cer(errors_ours) <= cer(errors_theirs) + 2.0,
        "ours {:.1} % against kokoro-onnx's {:.1} %",
        cer(errors_ours),
        cer(errors_theirs)
    );
}
