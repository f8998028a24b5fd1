//! Whole texts through the real binary on a real port, against what the official
//! `OmniVoice.generate()` says for them (`scripts/omnivoice_paragraph_fixture.py`: greedy
//! decoding, f32, the tiny checkpoint with the release's codec geometry): several sentences with
//! a design, auto, a language, a duration, a speed and a clone; a text past the default
//! chunking threshold; a text forced through the chunked path. And streams of such texts: the
//! same audio as the body when the chunk fields are given, about its length otherwise, and the
//! first piece long before the end.

mod common;

use std::time::{Duration, Instant};

use common::{post_speech, read_wav, Binary};
use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};

const CHECKPOINT: &str = "crates/models/tests/fixtures/omnivoice/clone";
const FIXTURE: &str = "tests/fixtures/omnivoice_paragraphs";
const CLIP: &str = "tests/fixtures/omnivoice_clone/reference.wav";

fn cases() -> Value {
    common::fixture_cases(FIXTURE)
}

/// The official audio of a case, as 16-bit samples (rounded from its floats).
fn official(name: &str) -> Vec<i16> {
    let samples: Vec<i64> = common::fixture_audio(FIXTURE, name)
        .to_dtype(candle_core::DType::I64)
        .unwrap()
        .to_vec1()
        .unwrap();
    samples.into_iter().map(|s| s as i16).collect()
}

async fn server() -> Binary {
    common::omnivoice_f32(CHECKPOINT, &["--no-cache"]).await
}

/// The JSON request of a case (not a clone), greedy.
fn request(case: &Value, num_step: &Value, format: &str, stream: bool) -> Value {
    let voice = match case.get("instruct") {
        Some(design) => format!("design:{}", design.as_str().unwrap()),
        None => "auto".into(),
    };
    let mut body = json!({
        "model": "omnivoice", "voice": voice, "input": case["text"],
        "response_format": format, "stream": stream, "num_step": num_step,
        "position_temperature": 0, "class_temperature": 0,
    });
    for field in [
        "language",
        "speed",
        "duration",
        "audio_chunk_threshold",
        "audio_chunk_duration",
    ] {
        if let Some(value) = case.get(field) {
            body[field] = value.clone();
        }
    }
    body
}

async fn body(url: &str, request: &Value) -> Vec<u8> {
    let response = post_speech(url, request).await;
    let status = response.status();
    let bytes = response.bytes().await.unwrap().to_vec();
    assert_eq!(
        status,
        200,
        "{request}: {}",
        String::from_utf8_lossy(&bytes)
    );
    bytes
}

async fn clone(url: &str, case: &Value, cases: &Value) -> Vec<u8> {
    let form = Form::new()
        .text("text", case["text"].as_str().unwrap().to_string())
        .text("ref_text", cases["ref_text"].as_str().unwrap().to_string())
        .part(
            "ref_audio",
            Part::bytes(std::fs::read(CLIP).unwrap()).file_name("reference.wav"),
        )
        .text("response_format", "wav")
        .text("stream", "false")
        .text("num_step", cases["num_step"].to_string())
        .text("position_temperature", "0")
        .text("class_temperature", "0");
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/audio/speech/clone"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.bytes().await.unwrap().to_vec();
    assert_eq!(status, 200, "{case}: {}", String::from_utf8_lossy(&bytes));
    bytes
}

/// Each case as the official code says it: the same length, and every sample within 1e-4
/// (the models crate holds generation to 5e-5; each side's 16-bit rounding adds 1.5e-5).
#[tokio::test]
async fn a_whole_body_is_the_official_generate_for_any_text() {
    let server = server().await;
    let url = server.url.as_str();
    let cases = cases();
    for case in cases["cases"].as_array().unwrap() {
        let wav = match case.get("clone") {
            Some(_) => clone(url, case, &cases).await,
            None => body(url, &request(case, &cases["num_step"], "wav", false)).await,
        };
        let (rate, ours) = read_wav(&wav);
        assert_eq!(rate, cases["sample_rate"].as_u64().unwrap() as u32);
        let expected = official(case["name"].as_str().unwrap());
        assert_eq!(ours.len(), expected.len(), "{}: length", case["name"]);
        let worst = ours
            .iter()
            .zip(&expected)
            .map(|(&a, &b)| (f32::from(a) / 32767.0 - f32::from(b) / 32768.0).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-4, "{}: worst difference {worst}", case["name"]);
    }
}

/// The bytes of a streamed response, and when its first and last bytes came.
async fn streamed(url: &str, request: &Value) -> (Vec<u8>, Duration, Duration) {
    let started = Instant::now();
    let mut response = post_speech(url, request).await;
    assert_eq!(response.status(), 200, "{request}");
    let mut bytes = Vec::new();
    let mut first = None;
    while let Some(chunk) = response.chunk().await.unwrap() {
        first.get_or_insert_with(|| started.elapsed());
        bytes.extend_from_slice(&chunk);
    }
    (bytes, first.unwrap(), started.elapsed())
}

#[tokio::test]
async fn a_stream_is_the_body_with_the_chunk_fields_and_about_as_long_without() {
    let server = server().await;
    let url = server.url.as_str();
    let cases = cases();
    let case = |name: &str| {
        cases["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    let steps = &cases["num_step"];

    // The chunk fields ask for the official chunked audio: streamed, the same bytes.
    let chunked = case("chunked");
    let whole = body(url, &request(&chunked, steps, "pcm", false)).await;
    let (stream, _, _) = streamed(url, &request(&chunked, steps, "pcm", true)).await;
    assert_eq!(stream.len(), whole.len());
    assert!(stream == whole, "the streamed chunked audio differs");

    // One sentence is one piece: the same bytes too.
    let mut one = case("auto");
    one["text"] = json!("Just one sentence to say.");
    let whole = body(url, &request(&one, steps, "pcm", false)).await;
    let (stream, _, _) = streamed(url, &request(&one, steps, "pcm", true)).await;
    assert!(
        stream == whole,
        "a one-sentence stream differs from its body"
    );

    // Several sentences: pieces, within 15 % of the body's length, and other audio.
    for name in ["design", "auto", "language", "duration", "speed"] {
        let case = case(name);
        let whole = body(url, &request(&case, steps, "pcm", false)).await;
        let (stream, _, _) = streamed(url, &request(&case, steps, "pcm", true)).await;
        let ratio = stream.len() as f64 / whole.len() as f64;
        eprintln!("{name}: the stream is {ratio:.3} of the body's length");
        assert!(
            (ratio - 1.0).abs() <= 0.15,
            "{name}: {ratio:.3} of the body's length"
        );
        assert!(stream != whole, "{name}: streamed in one piece");
    }
}

/// The first piece is sent as soon as it is decoded, while the rest is generated: of a
/// three-sentence text, long before the end. Many steps make the generation, not the HTTP
/// round trip, what the times measure.
#[tokio::test]
async fn a_streams_first_audio_comes_well_before_its_end() {
    let server = server().await;
    let url = server.url.as_str();
    let request = json!({
        "model": "omnivoice", "voice": "design:female, low pitch",
        "input": "Good evening. The talk tonight covers three quiet rivers of the north, \
                  their towns and the people who fish them. Questions come at the very end.",
        "response_format": "pcm", "stream": true, "num_step": 32, "seed": 4,
    });
    let (_, first, total) = streamed(url, &request).await;
    let share = first.as_secs_f64() / total.as_secs_f64();
    eprintln!("first audio at {first:?} of {total:?} ({share:.2})");
    assert!(
        share < 0.6,
        "first audio at {first:?} of {total:?} ({share:.2})"
    );
}

/// Each sentence's audio in a WebSocket stream's PCM, by its `sentence` message.
fn sentences_of(audio: &[u8], messages: &[Value]) -> Vec<Vec<u8>> {
    let mut offset = 0;
    messages
        .iter()
        .filter(|m| m["type"] == "sentence")
        .map(|m| {
            let n = m["audio_bytes"].as_u64().unwrap() as usize;
            offset += n;
            audio[offset - n..offset].to_vec()
        })
        .collect()
}

/// A WebSocket stream keeps one voice: every later sentence continues from the first, so
/// another first sentence makes the second sound otherwise (each sentence alone would give
/// the same second sentence, seed for seed).
#[tokio::test]
async fn a_websocket_stream_continues_in_the_voice_of_its_first_sentence() {
    let server = server().await;
    let url = server.url.as_str();
    let second = "The second sentence keeps the voice.";
    let speak = |voice: &'static str, first: &'static str| async move {
        let settings = json!({"text": " ", "model": "omnivoice", "voice": voice,
                              "response_format": "pcm", "seed": 9, "num_step": 4,
                              "position_temperature": 0, "class_temperature": 0});
        let (audio, messages) = common::ws_speak(url, &settings, &[first, second]).await;
        let sentences = sentences_of(&audio, &messages);
        assert_eq!(sentences.len(), 2, "{messages:?}");
        sentences[1].clone()
    };
    for voice in ["auto", "design:male, low pitch"] {
        let after_one = speak(voice, "Here is the first one. ").await;
        let after_another = speak(voice, "A different opening line, longer than that. ").await;
        assert!(
            after_one != after_another,
            "{voice}: the second sentence ignored the first"
        );
    }
}

/// A script speaker keeps the voice of its first line: another first line makes its second
/// line sound otherwise (each line alone would give the same second line, seed for seed).
/// Another speaker's lines are theirs: they do not depend on the first speaker's.
#[tokio::test]
async fn a_script_speaker_continues_in_the_voice_of_its_first_line() {
    let server = server().await;
    let url = server.url.as_str();
    let read = |first: &'static str| async move {
        let body = json!({
            "model": "omnivoice",
            "script": [
                {"speaker": "anna", "text": first, "voice": "auto"},
                {"speaker": "ben", "text": "I am the other speaker.", "voice": "design:male"},
                {"speaker": "anna", "text": "My second line keeps my voice."},
            ],
            "response_format": "wav", "output_format": "multi_track", "seed": 7,
        });
        let response = common::post(url, "/v1/audio/script", &body).await;
        let status = response.status();
        let bytes = response.bytes().await.unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        let segments = answer["metadata"]["segments"].as_array().unwrap().clone();
        let track = |speaker: &str| {
            use base64::Engine as _;
            let wav = base64::engine::general_purpose::STANDARD
                .decode(answer["tracks"][speaker].as_str().unwrap())
                .unwrap();
            read_wav(&wav).1
        };
        let line = |i: usize| {
            let s = &segments[i];
            let from = s["offset_samples"].as_u64().unwrap() as usize;
            let to = from + s["duration_samples"].as_u64().unwrap() as usize;
            track(s["speaker"].as_str().unwrap())[from..to].to_vec()
        };
        (line(1), line(2))
    };
    let (ben, second) = read("Here is my first line.").await;
    let (ben_again, second_again) = read("A different first line, a longer one.").await;
    assert!(second != second_again, "the second line ignored the first");
    assert!(
        ben == ben_again,
        "another speaker's line changed with anna's"
    );
}
