//! Whisper hears the Japanese voices as well as the reference: the server (real binary, real
//! port) speaks 12 Japanese sentences with jf_alpha and jm_kumo through its own Japanese G2P;
//! kokoro-onnx speaks the same sentences from misaki 0.9.4's phonemes (Kokoro's own front end,
//! scripts/cjk_oracle_ja.py in .venv-cjk-ja) on the same int8 model and voice packs; Whisper
//! base (multilingual, `--language ja`) transcribes both. Ours must have a character error
//! rate no higher than kokoro-onnx's plus 2 points. Also: the Japanese voices are listed as
//! supported once the dictionary is installed.

mod common;

use common::listening::{edit_distance, kokoro_onnx_speak, run_python, transcribe};
use common::{get_json, post_speech, read_wav, Binary};
use serde_json::{json, Value};

/// Varied sentences without digits (Whisper may write a number in digits or in kanji; a
/// spelling is not an intelligibility error).
const SENTENCES: [&str; 12] = [
    "今日はいい天気ですね。",
    "私の名前は田中太郎です。",
    "東京駅から新幹線で大阪へ行きました。",
    "昨日、友達と映画を見に行った。",
    "明日の天気予報によると、雨が降るそうです。",
    "日本語の勉強は難しいですが、楽しいです。",
    "駅の近くに新しいレストランができました。",
    "京都には古いお寺がたくさんあります。",
    "北海道の冬はとても寒いです。",
    "ラーメンを食べに行きませんか？",
    "桜の花が満開になりました。",
    "音楽を聴きながら勉強するのが好きです。",
];
const VOICES: [&str; 2] = ["jf_alpha", "jm_kumo"];
/// How much higher ours may be than kokoro-onnx's character error rate: two points.
const CER_MARGIN: f64 = 0.02;

/// Characters for comparison: letters and digits only (kana and kanji are letters).
fn characters(text: &str) -> Vec<char> {
    text.chars().filter(|c| c.is_alphanumeric()).collect()
}

/// Character errors over all `heard`, against SENTENCES repeated per voice, and the total.
fn character_errors(label: &str, heard: &[Value]) -> (usize, usize) {
    let (mut errors, mut total) = (0, 0);
    for (i, answer) in heard.iter().enumerate() {
        let expected = characters(SENTENCES[i % SENTENCES.len()]);
        let text = answer["text"].as_str().unwrap_or_default();
        let e = edit_distance(&expected, &characters(text));
        if e > 0 {
            eprintln!(
                "{label} {}: {e} errors: heard {text:?}",
                SENTENCES[i % SENTENCES.len()]
            );
        }
        errors += e;
        total += expected.len();
    }
    (errors, total)
}

#[test]
fn the_error_rate_counts_characters() {
    assert_eq!(
        edit_distance(&characters("今日は。"), &characters("今日は")),
        0
    );
    assert_eq!(edit_distance(&characters("今日は"), &characters("京は")), 2);
    assert_eq!(edit_distance(&characters(""), &characters("あい")), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whisper_hears_our_japanese_as_well_as_kokoro_onnx_with_misaki() {
    let misaki = common::venv_python("cjk-ja");
    let kokoro_dir = common::kokoro_dir();
    assert!(
        kokoro_dir.join("japanese/sys.dic").is_file(),
        "no Japanese dictionary: run scripts/japanese-dictionary.sh"
    );
    let dir = tempfile::tempdir().unwrap();

    let server = Binary::ready(&["--no-cache", "--kokoro-dir", "voices/kokoro"]).await;
    let voices = get_json(format!("{}/v1/audio/voices", server.url)).await;
    for voice in VOICES {
        let listed = voices["voices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["id"] == voice)
            .unwrap_or_else(|| panic!("{voice} is listed"));
        assert_eq!(listed["supported"], true, "{listed}");
        assert_eq!(listed["language"], "ja", "{listed}");
    }
    let mut ours = Vec::new();
    for voice in VOICES {
        for (i, sentence) in SENTENCES.iter().enumerate() {
            let body = json!({"model": "kokoro", "voice": voice, "input": sentence,
                              "response_format": "wav", "stream": false});
            let response = post_speech(&server.url, &body).await;
            assert_eq!(response.status(), 200, "{voice} {sentence}");
            let bytes = response.bytes().await.unwrap();
            assert_eq!(read_wav(&bytes).0, 24_000, "{voice}");
            let file = dir.path().join(format!("ours-{voice}-{i}.wav"));
            std::fs::write(&file, bytes).unwrap();
            ours.push(file);
        }
    }
    drop(server);

    let phonemes = run_python(
        &misaki,
        "scripts/cjk_oracle_ja.py",
        &["--stdin".to_string()],
        &SENTENCES.join("\n"),
    );
    let phonemes: Vec<String> = String::from_utf8(phonemes)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(phonemes.len(), SENTENCES.len(), "{phonemes:?}");
    let mut jobs = Vec::new();
    let mut theirs = Vec::new();
    for voice in VOICES {
        for (i, p) in phonemes.iter().enumerate() {
            let wav = dir.path().join(format!("kokoro-onnx-{voice}-{i}.wav"));
            jobs.push(json!({"voice": voice, "lang": "ja", "phonemes": p, "wav": wav}));
            theirs.push(wav);
        }
    }
    kokoro_onnx_speak(&Value::Array(jobs)).await;
    let heard = transcribe("ja", &[ours.clone(), theirs].concat()).await;
    let (heard_ours, heard_theirs) = heard.split_at(ours.len());
    let (errors_ours, total) = character_errors("ours", heard_ours);
    let (errors_theirs, _) = character_errors("kokoro-onnx", heard_theirs);
    let (cer_ours, cer_theirs) = (
        errors_ours as f64 / total as f64,
        errors_theirs as f64 / total as f64,
    );
    eprintln!(
        "character error rate over {} sentences × {} voices: ours {:.1} % ({errors_ours} of \
         {total}), kokoro-onnx + misaki {:.1} % ({errors_theirs} of {total})",
        SENTENCES.len(),
        VOICES.len(),
        100.0 * cer_ours,
        100.0 * cer_theirs
    );
    assert!(
        cer_ours <= cer_theirs + CER_MARGIN,
        "ours {:.1} % > kokoro-onnx {:.1} % + {:.0} points",
        100.0 * cer_ours,
        100.0 * cer_theirs,
        100.0 * CER_MARGIN
    );
}
