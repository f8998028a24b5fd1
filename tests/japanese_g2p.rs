//! The Japanese G2P against its oracle: tests/fixtures/cjk/ja.tsv holds what misaki 0.9.4's
//! `ja` front end (Kokoro's own) makes of 64 sentences with numbers, dates, names, Latin and
//! punctuation (scripts/cjk_oracle_ja.py). Ours must write the same phonemes for at least 95 %
//! of them and the same Kokoro token ids wherever the phonemes agree; every difference is
//! printed. Needs the dictionary scripts/japanese-dictionary.sh installs; no Python. Also: the
//! server lists and speaks the Japanese voices exactly when the dictionary is installed.

mod common;

use omnivoice_server::engine::kokoro::vocab::tokenize;
use omnivoice_server::text::japanese::JapaneseG2p;

/// The dictionary directory `scripts/japanese-dictionary.sh` installs; fails, naming the
/// script, when it is missing.
fn dictionary_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("voices/kokoro/japanese");
    assert!(
        dir.join("sys.dic").is_file() && dir.join("ja_words.txt").is_file(),
        "{} lacks the Japanese dictionary: run scripts/japanese-dictionary.sh",
        dir.display()
    );
    dir
}

#[test]
fn japanese_phonemes_match_misaki_on_95_percent_of_the_corpus() {
    let g2p = JapaneseG2p::open(&dictionary_dir()).expect("dictionary opens");
    let fixture = include_str!("fixtures/cjk/ja.tsv");
    let (mut total, mut same) = (0, 0);
    let mut differences = Vec::new();
    for line in fixture.lines().filter(|l| !l.starts_with('#')) {
        let mut columns = line.split('\t');
        let (text, expected, ids) = (
            columns.next().unwrap(),
            columns.next().unwrap(),
            columns.next().unwrap(),
        );
        let expected_ids: Vec<u32> = ids.split(' ').map(|i| i.parse().unwrap()).collect();
        let ours = g2p.phonemize(text);
        total += 1;
        if ours == expected {
            same += 1;
            assert_eq!(
                tokenize(&ours),
                expected_ids,
                "{text}: same phonemes, other token ids"
            );
        } else {
            differences.push(format!("{text}\n  misaki: {expected}\n  ours:   {ours}"));
        }
    }
    println!(
        "{same}/{total} sentences equal to misaki; {} differ:",
        differences.len()
    );
    for difference in &differences {
        println!("{difference}");
    }
    assert!(total >= 60, "the corpus has {total} sentences");
    assert!(
        same * 100 >= total * 95,
        "{same}/{total} equal to misaki (95 % needed):\n{}",
        differences.join("\n")
    );
}

#[test]
fn hostile_text_is_read_without_panicking() {
    let g2p = JapaneseG2p::open(&dictionary_dir()).expect("dictionary opens");
    let long_digits = "9".repeat(40);
    let unpunctuated = "日本語".repeat(800);
    for text in [
        "",
        " ",
        "\u{3000}\u{3000}",
        "😀😀😀",
        "ゝゞヽヾ々〃",
        "ゃっゅ",
        "ーーー",
        long_digits.as_str(),
        "\u{0}\u{ffff}\u{10ffff}",
        unpunctuated.as_str(),
    ] {
        let phonemes = g2p.phonemize(text);
        assert!(!phonemes.contains('\u{0}'), "{text:?} → {phonemes:?}");
    }
    assert!(!g2p.phonemize(&unpunctuated).is_empty());
}

/// Without the dictionary the server still starts; the Japanese voices are listed as
/// unsupported with the reason, and a request for one is a 400 that says why. With it (the
/// installed Kokoro directory) they are supported and speak.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn japanese_voices_follow_the_dictionary() {
    let installed = common::kokoro_dir();
    dictionary_dir();
    let bare = tempfile::tempdir().unwrap();
    for entry in ["kokoro-v1.0.int8.onnx", "voices"] {
        std::os::unix::fs::symlink(installed.join(entry), bare.path().join(entry)).unwrap();
    }
    let bare_dir = bare.path().to_string_lossy().into_owned();
    for (dir, has_dictionary) in [(bare_dir.as_str(), false), ("voices/kokoro", true)] {
        let server = common::Binary::ready(&["--no-cache", "--kokoro-dir", dir]).await;
        let voices = common::get_json(format!("{}/v1/audio/voices", server.url)).await;
        let alpha = voices["voices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["id"] == "jf_alpha")
            .cloned()
            .expect("jf_alpha is listed");
        assert_eq!(alpha["supported"], has_dictionary, "{alpha}");
        let body = serde_json::json!({"model": "kokoro", "voice": "jf_alpha",
                                      "input": "こんにちは。", "response_format": "wav",
                                      "stream": false});
        let response = common::post_speech(&server.url, &body).await;
        if has_dictionary {
            assert!(alpha.get("unsupported_reason").is_none(), "{alpha}");
            assert_eq!(response.status(), 200);
            let (rate, samples) = common::read_wav(&response.bytes().await.unwrap());
            assert_eq!(rate, 24_000);
            assert!(samples.len() > 24_000 / 4, "{} samples", samples.len());
        } else {
            let reason = alpha["unsupported_reason"].as_str().unwrap();
            assert!(
                reason.contains("Japanese") && reason.contains("dictionary"),
                "{reason}"
            );
            assert_eq!(response.status(), 400);
            let error = response.text().await.unwrap();
            assert!(error.contains("Japanese"), "{error}");
        }
    }
}
