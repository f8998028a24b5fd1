//! Piper voices of each `phoneme_type` on a real server: `espeak` and `text` voices speak,
//! each from its own symbols, and a `pinyin` voice (piper1-gpl's Chinese) is listed as
//! unsupported with its reason, said once in the log, and refused with a 400 — never read as
//! if it were espeak-ng's IPA.

mod common;

use std::path::Path;
use std::process::Stdio;

use common::{get_json, openai_error, post, post_speech, read_wav, Binary};
use serde_json::{json, Value};

const REFUSED: &str =
    "phoneme_type 'pinyin' is not supported by this server; the voice would be misread";

fn joe_config() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("voices/en_US-joe-medium.onnx.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// joe as a `text` voice: its ids for the ASCII characters of its IPA map, which include
/// every letter but `g` (IPA's `ɡ`), so that each letter is read close to its sound.
fn letters_config() -> Value {
    let mut config = joe_config();
    let joe = config["phoneme_id_map"].as_object().unwrap().clone();
    let mut letters: serde_json::Map<String, Value> = joe
        .iter()
        .filter(|(key, _)| key.is_ascii())
        .map(|(key, ids)| (key.clone(), ids.clone()))
        .collect();
    letters.insert("g".into(), joe["ɡ"].clone());
    config["phoneme_id_map"] = letters.into();
    config["phoneme_type"] = "text".into();
    config
}

/// A voices directory of joe's model (linked, not copied) under each name, with its config.
fn voices_dir(configs: &[(&str, Value)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("voices/en_US-joe-medium.onnx");
    for (name, config) in configs {
        std::os::unix::fs::symlink(&model, dir.path().join(format!("{name}.onnx"))).unwrap();
        std::fs::write(
            dir.path().join(format!("{name}.onnx.json")),
            config.to_string(),
        )
        .unwrap();
    }
    dir
}

fn speech(voice: &str, input: &str) -> Value {
    json!({"model": "piper", "voice": voice, "input": input, "response_format": "wav",
           "seed": 5, "stream": false})
}

/// Seconds and RMS (of 16-bit samples) of a 200 WAV answer.
async fn spoken(response: reqwest::Response) -> (f64, f64) {
    assert_eq!(response.status(), 200);
    let (rate, samples) = read_wav(&response.bytes().await.unwrap());
    assert_eq!(rate, 22050);
    let rms =
        (samples.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / samples.len() as f64).sqrt();
    (samples.len() as f64 / f64::from(rate), rms)
}

#[tokio::test]
async fn each_phoneme_type_is_read_as_its_voice_was_trained_or_refused() {
    let mut pinyin = joe_config();
    pinyin["phoneme_type"] = "pinyin".into();
    let dir = voices_dir(&[
        ("joe", joe_config()),
        ("letters", letters_config()),
        ("zh", pinyin),
    ]);
    let log = tempfile::NamedTempFile::new().unwrap();
    let server = Binary::spawn_logging_to(
        &[
            "--voices-dir",
            dir.path().to_str().unwrap(),
            "--default-voice",
            "joe",
            "--preload",
            "none",
            "--no-cache",
        ],
        Stdio::from(log.reopen().unwrap()),
    )
    .until_ready()
    .await;
    let url = server.url.clone();

    // Listed, each with whether it can be spoken.
    let voices: Value = get_json(format!("{url}/v1/audio/voices")).await;
    let piper: Vec<&Value> = voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["engine"] == "piper")
        .collect();
    let ids: Vec<&str> = piper.iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["joe", "letters", "zh"]);
    for voice in &piper[..2] {
        assert_eq!(voice["supported"], true, "{voice}");
        assert!(voice.get("unsupported_reason").is_none(), "{voice}");
    }
    assert_eq!(piper[2]["supported"], false);
    let reason = piper[2]["unsupported_reason"].as_str().unwrap();
    assert!(reason.starts_with(REFUSED), "{reason}");

    // The startup log says it once, in one line naming the voice.
    let text = std::fs::read_to_string(log.path()).unwrap();
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("phoneme_type"))
        .collect();
    assert_eq!(said.len(), 1, "{text}");
    assert!(
        said[0].contains("'zh'") && said[0].contains(REFUSED),
        "{}",
        said[0]
    );

    // A request for it is the client's error, naming the phoneme type, streamed or not.
    for stream in [false, true] {
        let mut body = speech("zh", "你好");
        body["stream"] = stream.into();
        let error = openai_error(post_speech(&url, &body).await, 400).await;
        assert_eq!(error["param"], "voice", "{error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("Piper voice 'zh' cannot be spoken") && message.contains(REFUSED),
            "{message}"
        );
        assert!(
            !message.contains("zh,") && !message.ends_with("zh."),
            "a refused voice is no valid choice: {message}"
        );
    }
    let error = openai_error(
        post(
            &url,
            "/v1/audio/phonemize",
            &json!({"model": "piper", "voice": "zh", "input": "你好"}),
        )
        .await,
        400,
    )
    .await;
    assert!(
        error["message"].as_str().unwrap().contains(REFUSED),
        "{error}"
    );

    // The text voice is given the characters (lower-cased: its map has no capitals), the
    // espeak voice espeak-ng's IPA.
    let input = "Hello world, this is a test of the letters.";
    let phonemes = |voice: &str| {
        let url = url.clone();
        let body = json!({"model": "piper", "voice": voice, "input": input});
        async move {
            let response = post(&url, "/v1/audio/phonemize", &body).await;
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.unwrap()["phonemes"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(phonemes("letters").await, input.to_lowercase());
    let ipa = phonemes("joe").await;
    assert!(ipa.contains('ə') && ipa.contains('ˈ'), "{ipa}");

    // Both speak: non-silent audio of a plausible length for eight words.
    let (letters_s, letters_rms) = spoken(post_speech(&url, &speech("letters", input)).await).await;
    let (joe_s, joe_rms) = spoken(post_speech(&url, &speech("joe", input)).await).await;
    for (seconds, rms) in [(letters_s, letters_rms), (joe_s, joe_rms)] {
        assert!(
            (1.2..8.0).contains(&seconds) && rms > 300.0,
            "letters {letters_s:.2} s rms {letters_rms:.0}, joe {joe_s:.2} s rms {joe_rms:.0}"
        );
    }
    assert_ne!(letters_s, joe_s, "letters are other symbols than IPA");
}
