//! The Kokoro engine through the real binary on a real port, with the real weights
//! (`voices/kokoro`, installed by `scripts/kokoro-assets.sh`): its voices listed with their
//! languages, genders and whether they can be spoken, the model lists, speech at 24 kHz of the length the model predicts, blends and bad blends,
//! OpenAI's names meaning Kokoro, speed, word timestamps and a streamed answer. Each synthesis
//! costs about two seconds of CPU, so one server serves every check.

mod common;

use base64::Engine as _;
use common::{get_json, openai_error, post, post_speech, read_wav, Binary};
use serde_json::{json, Value};

const TEXT: &str = "Hello world. This is a test.";

fn speech(model: &str, voice: &str, speed: f64) -> Value {
    json!({"model": model, "voice": voice, "input": TEXT, "response_format": "wav",
           "speed": speed, "stream": false})
}

/// The WAV's rate and duration in seconds.
async fn spoken(url: &str, body: &Value) -> (u32, f64) {
    let response = post_speech(url, body).await;
    assert_eq!(response.status(), 200, "{body}");
    let bytes = response.bytes().await.unwrap();
    let (rate, samples) = read_wav(&bytes);
    (rate, samples.len() as f64 / f64::from(rate))
}

#[tokio::test]
async fn kokoro_serves_its_voices_blends_openai_names_speed_timestamps_and_streams() {
    common::kokoro_dir(); // fails, naming the script, without the weights
    let mandarin = common::mandarin_dir(); // the same, without the pinyin tables

    // No --default-engine: an installed Kokoro is the default by itself.
    // A bare Piper voice id still preloads Piper's voice with Kokoro the default engine.
    let server = Binary::ready(&[
        "--no-cache",
        "--kokoro-dir",
        "voices/kokoro",
        "--mandarin-dir",
        mandarin.to_str().unwrap(),
        "--preload",
        "en_US-joe-medium",
    ])
    .await;
    let url = server.url.as_str();

    // Every pack is listed with the language of its prefix.
    let voices = get_json(format!("{url}/v1/audio/voices")).await;
    let voices = voices["voices"].as_array().expect("a voice list");
    let heart = voices
        .iter()
        .find(|v| v["id"] == "af_heart" && v["engine"] == "kokoro")
        .expect("af_heart is listed");
    assert_eq!(heart["language"], "en-US");
    assert_eq!(heart["sample_rate"], 24_000);
    assert_eq!(heart["gender"], "female");
    assert_eq!(heart["supported"], true);
    assert!(heart.get("unsupported_reason").is_none(), "{heart}");
    let joe = voices
        .iter()
        .find(|v| v["id"] == "en_US-joe-medium" && v["engine"] == "piper")
        .expect("the Piper voice is listed");
    assert_eq!(
        joe["loaded"], true,
        "--preload en_US-joe-medium loaded it: {joe}"
    );
    let emma = voices.iter().find(|v| v["id"] == "bf_emma").unwrap();
    assert_eq!(emma["language"], "en-GB");
    check_kokoro_listing(voices);

    // The model lists name Kokoro, and OpenAI's names as Kokoro; the other engines stay.
    let models = get_json(format!("{url}/v1/audio/models")).await;
    let models = models["models"].as_array().expect("a model list");
    let engine_of = |id: &str| {
        models
            .iter()
            .find(|m| m["id"] == id)
            .map(|m| m["engine"].clone())
    };
    assert_eq!(engine_of("kokoro"), Some(json!("kokoro")), "{models:?}");
    assert_eq!(engine_of("tts-1"), Some(json!("kokoro")), "{models:?}");
    assert_eq!(engine_of("tts-1-hd"), Some(json!("kokoro")), "{models:?}");
    assert_eq!(engine_of("piper"), Some(json!("piper")), "{models:?}");
    assert_eq!(engine_of("espeak"), Some(json!("espeak")), "{models:?}");
    let model = get_json(format!("{url}/v1/models/kokoro")).await;
    assert_eq!(model["engine"], "kokoro");

    // kokoro-onnx speaks the oracle's text as one input in 2.5 s (100 frames of 600). The
    // server speaks each sentence as an input of its own, each with its pads, joined by a
    // 0.2 s pause: longer, but by less than a second.
    let (rate, seconds) = spoken(url, &speech("kokoro", "af_heart", 1.0)).await;
    assert_eq!(rate, 24_000);
    assert!(seconds > 2.5 && seconds < 3.7, "{seconds} s");

    // Twice the speed is clearly shorter.
    let (_, fast) = spoken(url, &speech("kokoro", "af_heart", 2.0)).await;
    assert!(fast < seconds * 0.7, "{fast} s at speed 2 vs {seconds} s");

    // A blend is a voice of its own.
    let (rate, blended) = spoken(url, &speech("kokoro", "af_bella(2)+af_sky(1)", 1.0)).await;
    assert_eq!(rate, 24_000);
    assert!(blended > 1.5 && blended < 4.0, "{blended} s");

    // Bad blends and unknown voices are the client's error (a language whose dictionary is
    // missing: tests/cjk_routing.rs and tests/japanese_g2p.rs).
    for bad in [
        "af_bella(x)",
        "nobody",
        "af_bella+",
        "af_bella(2)+nobody(1)",
    ] {
        let response = post_speech(url, &speech("kokoro", bad, 1.0)).await;
        let error = openai_error(response, 400).await;
        assert_eq!(error["param"], "voice", "{bad}: {error}");
    }

    // OpenAI's names mean Kokoro.
    let (rate, _) = spoken(url, &speech("tts-1", "alloy", 1.0)).await;
    assert_eq!(rate, 24_000);
    // Piper stays available by name.
    let (rate, _) = spoken(url, &speech("piper", "en_US-joe-medium", 1.0)).await;
    assert_eq!(rate, 22_050);

    // Word timestamps: the words in order, times increasing inside the audio.
    let response = post(
        url,
        "/v1/audio/speech/timestamps",
        &speech("kokoro", "af_heart", 1.0),
    )
    .await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["sample_rate"], 24_000);
    let audio = base64::engine::general_purpose::STANDARD
        .decode(answer["audio"].as_str().unwrap())
        .unwrap();
    let (_, samples) = read_wav(&audio);
    let duration = samples.len() as f64 / 24_000.0;
    let words = answer["words"].as_array().unwrap();
    let written: Vec<&str> = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
    assert_eq!(written, ["Hello", "world", "This", "is", "a", "test"]);
    let mut previous_end = 0.0;
    for word in words {
        let (start, end) = (
            word["start"].as_f64().unwrap(),
            word["end"].as_f64().unwrap(),
        );
        assert!(start >= previous_end - 1e-9 && end > start, "{word}");
        assert!(
            end <= duration + 1e-6,
            "{word} ends after the audio ({duration} s)"
        );
        previous_end = end;
    }
    assert!(
        time_of(&words[0], "start") > 0.0,
        "the leading pad comes first"
    );
    // The sentence pause after "world." lies between its words.
    assert!(time_of(&words[2], "start") - time_of(&words[1], "end") > 0.1);

    // A streamed answer (SSE) carries the whole audio.
    let mut body = speech("kokoro", "af_heart", 1.0);
    body["response_format"] = json!("pcm");
    body["stream"] = json!(true);
    body["stream_format"] = json!("sse");
    let response = post_speech(url, &body).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let mut bytes = 0;
    let mut done = false;
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let event: Value = serde_json::from_str(data).expect("each event is JSON");
        match event["type"].as_str() {
            Some("speech.audio.delta") => {
                bytes += base64::engine::general_purpose::STANDARD
                    .decode(event["audio"].as_str().unwrap())
                    .unwrap()
                    .len();
            }
            Some("speech.audio.done") => done = true,
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert!(done, "the stream ends with speech.audio.done");
    let streamed = bytes as f64 / 2.0 / 24_000.0;
    assert!(
        (streamed - seconds).abs() <= 0.15 * seconds,
        "{streamed} s streamed vs {seconds} s"
    );
}

/// Every Kokoro pack is listed with the language and gender of its prefix (`af_heart`:
/// en-US, female), and whether the server can speak it: all of them, ja (`j…`) with the
/// Japanese dictionary and zh (`z…`) with the pinyin tables scripts/setup.sh installs (a pack
/// the server cannot speak would need a reason). Piper's and espeak's voices keep the
/// shape they had, now with `supported: true` and no gender.
fn check_kokoro_listing(voices: &[Value]) {
    let kokoro: Vec<&Value> = voices.iter().filter(|v| v["engine"] == "kokoro").collect();
    // kokoro-js 1.2.1 ships 54 packs; scripts/kokoro-assets.sh installs them all.
    assert_eq!(kokoro.len(), 54, "Kokoro voices listed");
    for voice in &kokoro {
        let id = voice["id"].as_str().unwrap();
        let mut letters = id.chars();
        let (language, gender) = (letters.next().unwrap(), letters.next().unwrap());
        let tag = match language {
            'a' => "en-US",
            'b' => "en-GB",
            'e' => "es",
            'f' => "fr",
            'h' => "hi",
            'i' => "it",
            'j' => "ja",
            'p' => "pt-BR",
            'z' => "zh",
            other => panic!("{id}: unknown language letter {other}"),
        };
        assert_eq!(voice["language"], tag, "{voice}");
        let gender = match gender {
            'f' => "female",
            'm' => "male",
            other => panic!("{id}: unknown gender letter {other}"),
        };
        assert_eq!(voice["gender"], gender, "{voice}");
        assert_eq!(voice["sample_rate"], 24_000, "{voice}");
        // Mandarin and Japanese are read by our own G2P (text::mandarin, text::japanese).
        let supported = true;
        assert_eq!(voice["supported"], supported, "{voice}");
        match voice.get("unsupported_reason") {
            None => assert!(supported, "{id}: no reason given"),
            Some(reason) => {
                assert!(!supported, "{id}: a reason though supported");
                let reason = reason.as_str().unwrap();
                assert!(
                    reason.contains("dictionary") || reason.contains("tables"),
                    "{id}: {reason}"
                );
            }
        }
    }
    let unsupported = kokoro.iter().filter(|v| v["supported"] == false).count();
    assert_eq!(unsupported, 0, "every pack, ja and zh included");

    let piper = voices
        .iter()
        .find(|v| v["id"] == "en_US-joe-medium")
        .expect("the Piper voice is still listed");
    for key in [
        "id",
        "name",
        "engine",
        "language",
        "sample_rate",
        "speakers",
        "aliases",
        "loaded",
    ] {
        assert!(piper.get(key).is_some(), "Piper voice lacks {key}: {piper}");
    }
    assert_eq!(piper["supported"], true);
    assert!(piper.get("gender").is_none() && piper.get("unsupported_reason").is_none());
}

fn time_of(word: &Value, key: &str) -> f64 {
    word[key].as_f64().unwrap()
}
