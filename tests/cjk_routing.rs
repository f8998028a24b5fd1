//! Text in ideographs is never spelled out letter by letter ("Chinese letter, Chinese
//! letter…"), on every front door, with the real binary and Kokoro as the default engine:
//! a voice named outright refuses it before any work, naming the language and the voices that
//! speak it; an OpenAI name hands it to a Mandarin voice; a stray ideograph in English text is
//! left out. HTTP (whole body and SSE), scripts, WebSocket and Wyoming. The same holds for the
//! other writing systems an English voice spells (Hangul, Arabic, Hebrew, Cyrillic, Greek,
//! Thai): they go to espeak-ng's voice of their language.

mod common;

use std::time::Duration;

use common::decode::decode;
use common::{kokoro_dir, mandarin_dir, openai_error, post, post_speech, ws_speak, Binary};
use futures::{SinkExt, StreamExt};
use omnivoice_server::audio::AudioFormat;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

const CHINESE: &str = "你好世界今天天气很好";

async fn kokoro_server() -> Binary {
    let dir = kokoro_dir();
    let mandarin = mandarin_dir();
    Binary::ready(&[
        "--no-cache",
        "--kokoro-dir",
        dir.to_str().unwrap(),
        "--mandarin-dir",
        mandarin.to_str().unwrap(),
        "--wyoming-port",
        "0",
    ])
    .await
}

fn assert_names_chinese_and_its_voices(message: &str) {
    assert!(message.contains("Chinese"), "{message}");
    assert!(message.contains("af_heart"), "{message}");
    assert!(message.contains("kokoro/zf_"), "{message}");
}

#[tokio::test]
async fn chinese_text_is_refused_by_a_named_voice_and_spoken_by_a_mandarin_voice_otherwise() {
    let server = kokoro_server().await;
    let url = server.url.as_str();

    // A voice named outright: 400 before any work, whole body or SSE.
    for extra in [json!({}), json!({"stream_format": "sse"})] {
        let mut body = json!({"model": "kokoro", "voice": "af_heart", "input": CHINESE});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let error = openai_error(post_speech(url, &body).await, 400).await;
        assert_names_chinese_and_its_voices(error["message"].as_str().unwrap());
    }

    // OpenAI's names: a Mandarin voice reads it, and says so.
    let body = json!({"model": "tts-1", "voice": "alloy", "input": CHINESE,
                      "response_format": "wav"});
    let response = post_speech(url, &body).await;
    assert_eq!(response.status(), 200);
    let language = response.headers()["content-language"].to_str().unwrap();
    assert_eq!(language, "zh");
    let audio = decode(AudioFormat::Wav, &response.bytes().await.unwrap());
    let seconds = audio.samples.len() as f64 / f64::from(audio.rate);
    // Ten syllables, not ten "Chinese letter"s (≈ 9 s).
    assert!((1.0..5.0).contains(&seconds), "{seconds} s");

    // Scripts: a line in Chinese for a voice named outright is refused, naming the language.
    let script = json!({"model": "kokoro", "response_format": "wav", "script": [
        {"speaker": "host", "text": "Welcome.", "voice": "af_heart"},
        {"speaker": "host", "text": CHINESE}
    ]});
    let error = openai_error(post(url, "/v1/audio/script", &script).await, 400).await;
    assert_names_chinese_and_its_voices(error["message"].as_str().unwrap());

    // Japanese (kana) behind an OpenAI name: a Japanese voice reads it where one is supported,
    // else a 400 that names the language; never an English voice.
    let voices: Value = common::get_json(format!("{url}/v1/audio/voices")).await;
    let japanese = voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["language"] == "ja" && v["supported"] == true);
    let body = json!({"model": "tts-1", "voice": "alloy", "input": "こんにちは、元気ですか。",
                      "response_format": "wav"});
    let response = post_speech(url, &body).await;
    if japanese {
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-language"], "ja");
    } else {
        let error = openai_error(response, 400).await;
        assert!(
            error["message"].as_str().unwrap().contains("'ja'"),
            "{error}"
        );
    }

    // English around a stray ideograph: read as if it were not there.
    let phonemes = |input: &str| {
        let body = json!({"model": "kokoro", "voice": "af_heart", "input": input});
        async move {
            let response = post(url, "/v1/audio/phonemize", &body).await;
            assert_eq!(response.status(), 200);
            let answer: Value = response.json().await.unwrap();
            answer["sentences"][0]["phonemes"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let with = phonemes("I visited 北京 last year.").await;
    let without = phonemes("I visited last year.").await;
    assert_eq!(
        with.split_whitespace().collect::<Vec<_>>(),
        without.split_whitespace().collect::<Vec<_>>()
    );

    // Phonemized without a voice: the default voice, which hands Chinese to a Mandarin voice
    // as an OpenAI name would (not a 400 as for a voice named outright).
    let response = post(url, "/v1/audio/phonemize", &json!({"input": CHINESE})).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["voice"].as_str().unwrap().starts_with('z'),
        "{answer}"
    );
    let response = post(
        url,
        "/v1/audio/phonemize",
        &json!({"input": "Hello there."}),
    )
    .await;
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["voice"], "af_heart", "{answer}");

    // WebSocket: the named voice's refusal is an error message; an OpenAI name speaks.
    let error = ws_error(
        url,
        json!({"model": "kokoro", "voice": "af_heart"}),
        CHINESE,
    )
    .await;
    assert_names_chinese_and_its_voices(&error);
    let (audio, _) = ws_speak(
        url,
        &json!({"model": "tts-1", "voice": "alloy", "response_format": "pcm"}),
        &[CHINESE],
    )
    .await;
    let seconds = audio.len() as f64 / 2.0 / 24_000.0;
    assert!((1.0..5.0).contains(&seconds), "{seconds} s");

    // Wyoming: a voice named refuses; the default voice speaks.
    let address = server.wyoming.clone().expect("the wyoming address");
    match common::wyoming::synthesize(&address, CHINESE, "af_heart").await {
        common::wyoming::Spoken::Error(message) => assert_names_chinese_and_its_voices(&message),
        common::wyoming::Spoken::Audio { .. } => panic!("af_heart spoke Chinese"),
    }
    match common::wyoming::synthesize_as(&address, CHINESE, json!({})).await {
        common::wyoming::Spoken::Audio { rate, samples } => {
            let seconds = samples.len() as f64 / f64::from(rate);
            assert!((1.0..5.0).contains(&seconds), "{seconds} s");
        }
        common::wyoming::Spoken::Error(e) => panic!("the default voice refused: {e}"),
    }
}

/// Korean, Arabic, Hebrew, Russian, Greek and Thai: an English voice named outright refuses
/// them, naming the language; OpenAI's names hand them to a voice of the language (espeak-ng's,
/// the only ones installed here), which reads them as words; a stray Cyrillic word in English
/// is left out, as a stray ideograph is.
#[tokio::test]
async fn other_writing_systems_an_english_voice_would_spell_go_to_a_voice_that_reads_them() {
    let server = kokoro_server().await;
    let url = server.url.as_str();
    let phonemize = |body: Value| async move { post(url, "/v1/audio/phonemize", &body).await };
    for (text, tag, name) in [
        ("안녕하세요 여러분, 만나서 반갑습니다.", "ko", "Korean"),
        ("مرحبا بكم في بيتنا", "ar", "Arabic"),
        ("שלום עולם, מה שלומך?", "he", "Hebrew"),
        ("Привет, как у тебя дела?", "ru", "Russian"),
        ("Καλημέρα κόσμε, τι κάνεις;", "el", "Greek"),
        ("สวัสดีครับ ยินดีต้อนรับ", "th", "Thai"),
    ] {
        let named = json!({"model": "kokoro", "voice": "af_heart", "input": text});
        let error = openai_error(post_speech(url, &named).await, 400).await;
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(name) && message.contains(&format!("espeak/{tag}")),
            "{message}"
        );
        let answer: Value = phonemize(json!({"model": "tts-1", "voice": "alloy", "input": text}))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(answer["model"], "espeak", "{text}: {answer}");
        assert_eq!(answer["voice"], tag, "{text}: {answer}");
    }
    // Spoken, and labelled as what it is.
    let body = json!({"model": "tts-1", "voice": "alloy", "input": "Привет, как у тебя дела?",
                      "response_format": "wav"});
    let response = post_speech(url, &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-language"], "ru");
    let audio = decode(AudioFormat::Wav, &response.bytes().await.unwrap());
    let seconds = audio.samples.len() as f64 / f64::from(audio.rate);
    assert!((0.8..4.0).contains(&seconds), "{seconds} s");

    let phonemes = |input: &'static str| async move {
        let body = json!({"model": "kokoro", "voice": "af_heart", "input": input});
        let answer: Value = phonemize(body).await.json().await.unwrap();
        answer["phonemes"].as_str().unwrap().to_string()
    };
    assert_eq!(
        phonemes("Tchaikovsky (Чайковский) wrote it.")
            .await
            .split_whitespace()
            .collect::<Vec<_>>(),
        phonemes("Tchaikovsky ( ) wrote it.")
            .await
            .split_whitespace()
            .collect::<Vec<_>>()
    );
}

/// The first error message a WebSocket stream of `settings` sends for `text`.
async fn ws_error(url: &str, settings: Value, text: &str) -> String {
    let ws_url = format!(
        "{}/v1/audio/speech/stream",
        url.replacen("http://", "ws://", 1)
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.unwrap();
    ws.send(Message::text(settings.to_string())).await.unwrap();
    for piece in [text, ""] {
        let message = json!({ "text": piece }).to_string();
        ws.send(Message::text(message)).await.unwrap();
    }
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("an answer within 60 s");
        match message {
            Some(Ok(Message::Text(text))) if text.contains("error") => return text.to_string(),
            Some(Ok(Message::Close(frame))) => {
                return frame.map(|f| f.reason.to_string()).unwrap_or_default()
            }
            Some(Ok(_)) => {}
            None | Some(Err(_)) => panic!("the stream ended without an error"),
        }
    }
}

/// Without the pinyin tables the server still starts: the Mandarin voices are listed as
/// unsupported with a reason naming the script that installs them, and a request for one, or
/// for Chinese text behind an OpenAI name, is a 400 saying so — never a 5xx.
#[tokio::test]
async fn without_the_pinyin_tables_mandarin_voices_are_unsupported_and_refused() {
    let dir = kokoro_dir();
    let empty = tempfile::tempdir().unwrap();
    let server = Binary::ready(&[
        "--no-cache",
        "--kokoro-dir",
        dir.to_str().unwrap(),
        "--mandarin-dir",
        empty.path().to_str().unwrap(),
    ])
    .await;
    let url = server.url.as_str();

    let voices: Value = common::get_json(format!("{url}/v1/audio/voices")).await;
    let mandarin: Vec<&Value> = voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["language"] == "zh")
        .collect();
    assert!(!mandarin.is_empty(), "{voices}");
    for voice in &mandarin {
        assert_eq!(voice["supported"], false, "{voice}");
        let reason = voice["unsupported_reason"].as_str().unwrap();
        assert!(reason.contains("scripts/mandarin-assets.sh"), "{reason}");
    }

    let body = json!({"model": "kokoro", "voice": "zf_xiaobei", "input": CHINESE});
    let response = post_speech(url, &body).await;
    assert_eq!(response.status(), 400);
    let error = openai_error(response, 400).await;
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("scripts/mandarin-assets.sh"), "{message}");

    let body = json!({"model": "tts-1", "voice": "alloy", "input": CHINESE});
    let error = openai_error(post_speech(url, &body).await, 400).await;
    assert!(
        error["message"].as_str().unwrap().contains("'zh'"),
        "{error}"
    );
}
