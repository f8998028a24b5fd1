//! Word timestamps from the real binary with the real Piper voice: words as written in the
//! input with offsets that map back to it (numbers, abbreviations, punctuation, non-ASCII),
//! times in order that cover the audio and include the sentence pauses, the same audio as
//! `POST /v1/audio/speech`, and Kokoro's shape at `/dev/captioned_speech`.

mod common;

use base64::Engine as _;
use common::{openai_error, post, post_speech, read_wav, Binary};
use serde_json::{json, Value};

const VOICE: &str = "en_US-joe-medium";
const INPUT: &str = "Dr. Smith paid $100 for a naïve café, didn’t he? \
    Yes: 3.5% of the U.S. budget — in 2023!";
const WORDS: [&str; 18] = [
    "Dr", "Smith", "paid", "$100", "for", "a", "naïve", "café", "didn’t", "he", "Yes", "3.5%",
    "of", "the", "U.S", "budget", "in", "2023",
];

fn request(input: &str, speed: f64) -> Value {
    json!({"model": "piper", "voice": VOICE, "input": input, "response_format": "wav",
           "seed": 3, "speed": speed})
}

async fn timestamps(url: &str, body: &Value) -> Value {
    let response = post(url, "/v1/audio/speech/timestamps", body).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn audio(answer: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(answer["audio"].as_str().unwrap())
        .unwrap()
}

fn words_of(answer: &Value) -> &Vec<Value> {
    answer["words"].as_array().unwrap()
}

fn time(word: &Value, key: &str) -> f64 {
    word[key].as_f64().unwrap()
}

#[tokio::test]
async fn words_map_back_to_the_input_and_their_times_cover_the_audio() {
    let server = Binary::ready(&[]).await;
    let answer = timestamps(&server.url, &request(INPUT, 1.0)).await;
    assert_eq!(answer["format"], "wav");
    assert_eq!(answer["sample_rate"], 22_050);
    let body = audio(&answer);
    let (rate, samples) = read_wav(&body);
    let duration = samples.len() as f64 / f64::from(rate);
    assert!((duration - answer["duration_s"].as_f64().unwrap()).abs() < 0.01);

    let words = words_of(&answer);
    let written: Vec<&str> = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
    assert_eq!(written, WORDS);
    let input: Vec<char> = INPUT.chars().collect();
    let mut previous_char_end = 0;
    let mut previous_end = 0.0;
    for word in words {
        let (start, end) = (
            word["char_start"].as_u64().unwrap() as usize,
            word["char_end"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            input[start..end].iter().collect::<String>(),
            word["word"].as_str().unwrap(),
            "{word}"
        );
        assert!(
            start >= previous_char_end,
            "{word} overlaps the previous word"
        );
        previous_char_end = end;
        let (t0, t1) = (time(word, "start"), time(word, "end"));
        assert!(
            t0 >= previous_end - 1e-9,
            "{word} starts before the previous ends"
        );
        assert!(t1 > t0 + 0.02, "{word} lasts a moment");
        previous_end = t1;
    }
    // The words cover the audio: speech starts soon, and the last word ends near the end.
    assert!(time(&words[0], "start") < 0.3, "{}", words[0]);
    let last = time(words.last().unwrap(), "end");
    assert!(
        last <= duration + 1e-9 && last > duration - 0.5,
        "{last} of {duration}"
    );
    // "$100" is spoken as "dollar one hundred": longer than "for" after it.
    let length = |w: &Value| time(w, "end") - time(w, "start");
    assert!(
        length(&words[3]) > 1.5 * length(&words[4]),
        "{} {}",
        words[3],
        words[4]
    );
    // Between the sentences lies the 0.2 s pause.
    let gap = time(&words[10], "start") - time(&words[9], "end");
    assert!(gap >= 0.2, "pause of {gap} s between the sentences");

    // The same audio as the plain request with the same seed.
    let mut plain = request(INPUT, 1.0);
    plain["stream"] = json!(false);
    let whole = post_speech(&server.url, &plain)
        .await
        .bytes()
        .await
        .unwrap();
    assert!(
        whole.as_ref() == body.as_slice(),
        "same audio as POST /v1/audio/speech"
    );

    // Twice as fast: the same words in about half the time.
    let fast = timestamps(&server.url, &request(INPUT, 2.0)).await;
    assert_eq!(words_of(&fast).len(), WORDS.len());
    let fast_last = time(words_of(&fast).last().unwrap(), "end");
    assert!(
        fast_last < 0.65 * last && fast_last > 0.35 * last,
        "{fast_last} vs {last}"
    );
}

#[tokio::test]
async fn kokoro_clients_get_their_shape_and_bad_requests_their_errors() {
    let server = Binary::ready(&[]).await;
    let body = request("Hello there, world. Bye!", 1.0);
    let ours = timestamps(&server.url, &body).await;
    let response = post(&server.url, "/dev/captioned_speech", &body).await;
    assert_eq!(response.status(), 200);
    let kokoro: Value = response.json().await.unwrap();
    assert_eq!(kokoro["audio_format"], "wav");
    assert_eq!(kokoro["audio"], ours["audio"]);
    let captions = kokoro["timestamps"].as_array().unwrap();
    assert_eq!(captions.len(), words_of(&ours).len());
    for (caption, word) in captions.iter().zip(words_of(&ours)) {
        assert_eq!(caption["word"], word["word"]);
        assert_eq!(caption["start_time"], word["start"]);
        assert_eq!(caption["end_time"], word["end"]);
    }
    let names: Vec<&str> = captions
        .iter()
        .map(|c| c["word"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Hello", "there", "world", "Bye"]);

    let empty = post(
        &server.url,
        "/v1/audio/speech/timestamps",
        &request("  ", 1.0),
    )
    .await;
    assert_eq!(openai_error(empty, 400).await["param"], "input");
    let mut bad_voice = request("Hi.", 1.0);
    bad_voice["voice"] = json!("klingon");
    let bad = post(&server.url, "/dev/captioned_speech", &bad_voice).await;
    assert_eq!(openai_error(bad, 400).await["code"], "voice_not_found");
}

#[tokio::test]
async fn espeak_voices_have_word_timestamps_too() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let input = "Hello there — naïve café owners! It costs $100.";
    let answer = timestamps(
        &server.url,
        &json!({"model": "espeak", "voice": "en-us", "input": input, "response_format": "wav"}),
    )
    .await;
    let words = words_of(&answer);
    let written: Vec<&str> = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
    assert_eq!(
        written,
        ["Hello", "there", "naïve", "café", "owners", "It", "costs", "$100"]
    );
    common::words_at_their_offsets(input, words);
    let duration = answer["duration_s"].as_f64().unwrap();
    let mut previous_end = 0.0;
    for word in words {
        let (t0, t1) = (time(word, "start"), time(word, "end"));
        assert!(
            t0 >= previous_end - 1e-9 && t1 > t0 && t1 <= duration + 1e-9,
            "{word}"
        );
        previous_end = t1;
    }
    let gap = time(&words[5], "start") - time(&words[4], "end");
    assert!(gap >= 0.2, "pause of {gap} s between the sentences");
}

/// Everything a streamed answer's lines carry: their audio joined, and their words in order,
/// with how much audio (in bytes of the joined file) had arrived when each word did.
struct StreamedWords {
    audio: Vec<u8>,
    words: Vec<(Value, usize)>,
    lines: usize,
}

async fn ndjson(url: &str, path: &str, body: &Value, words_key: &str) -> StreamedWords {
    let response = post(url, path, body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let mut streamed = StreamedWords {
        audio: Vec::new(),
        words: Vec::new(),
        lines: 0,
    };
    for line in text.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert!(line.get("error").is_none(), "{line}");
        streamed.lines += 1;
        streamed.audio.extend(audio(&line));
        for word in line[words_key].as_array().unwrap() {
            streamed.words.push((word.clone(), streamed.audio.len()));
        }
    }
    streamed
}

#[tokio::test]
async fn streamed_timestamps_are_ndjson_lines_that_add_up_to_the_whole_answer() {
    let server = Binary::ready(&["--no-cache"]).await;
    let input = "The first sentence is short. The second one takes a little longer to say, \
                 with a clause. Then the third and last sentence ends it all.";
    let body = request(input, 1.0);
    let whole = timestamps(&server.url, &body).await;
    let mut streamed_body = body.clone();
    streamed_body["stream"] = json!(true);
    let streamed = ndjson(
        &server.url,
        "/v1/audio/speech/timestamps",
        &streamed_body,
        "words",
    )
    .await;

    // The lines' audio is one WAV file with the whole answer's samples.
    let decoded =
        common::decode::decode(omnivoice_server::audio::AudioFormat::Wav, &streamed.audio);
    let (_, whole_samples) = read_wav(&audio(&whole));
    assert_eq!(decoded.samples.len(), whole_samples.len());
    assert!(streamed.lines > 3, "{} lines", streamed.lines);

    // The same words at the same times, each arriving with (or after) its own audio.
    let whole_words = words_of(&whole);
    assert_eq!(streamed.words.len(), whole_words.len());
    let bytes_per_second = 22_050.0 * 2.0;
    let mut lines_with_words = std::collections::BTreeSet::new();
    for ((word, arrived), expected) in streamed.words.iter().zip(whole_words) {
        assert_eq!(word["word"], expected["word"]);
        assert_eq!(word["char_start"], expected["char_start"]);
        for key in ["start", "end"] {
            assert!(
                (time(word, key) - time(expected, key)).abs() < 1e-6,
                "{word}"
            );
        }
        let heard_by = (*arrived as f64 - 44.0) / bytes_per_second;
        assert!(
            time(word, "end") <= heard_by + 1e-3,
            "{word} before its audio"
        );
        lines_with_words.insert(*arrived);
    }
    // Words come as their audio does: within a sentence too, not a sentence at a time (the
    // second sentence alone spans three pieces of audio).
    assert!(lines_with_words.len() > 3, "{lines_with_words:?}");

    // Kokoro's streamed shape.
    let kokoro = ndjson(
        &server.url,
        "/dev/captioned_speech",
        &streamed_body,
        "timestamps",
    )
    .await;
    assert_eq!(kokoro.words.len(), whole_words.len());
    assert!(kokoro.words[0].0["start_time"].is_number());
    assert_eq!(kokoro.words[1].0["word"], whole_words[1]["word"]);
}

#[tokio::test]
async fn sse_with_timestamps_adds_timestamp_events_and_keeps_openais_events() {
    let server = Binary::ready(&["--no-cache"]).await;
    let input = "Short first sentence. And a second one follows it.";
    let mut body = request(input, 1.0);
    let whole = timestamps(&server.url, &body).await;
    body["stream_format"] = json!("sse");
    body["timestamps"] = json!(true);
    let response = post(&server.url, "/v1/audio/speech", &body).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"speech.audio.delta"));
    assert_eq!(kinds.last(), Some(&"speech.audio.done"));
    assert!(
        kinds
            .iter()
            .filter(|k| **k == "speech.audio.timestamps")
            .count()
            >= 2
    );
    // OpenAI's events keep exactly their fields.
    for event in &events {
        let keys: Vec<&String> = event.as_object().unwrap().keys().collect();
        match event["type"].as_str().unwrap() {
            "speech.audio.delta" => assert_eq!(keys, ["audio", "type"]),
            "speech.audio.done" => assert_eq!(keys, ["type", "usage"]),
            _ => assert_eq!(keys, ["type", "words"]),
        }
    }
    let words: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "speech.audio.timestamps")
        .flat_map(|e| e["words"].as_array().unwrap())
        .collect();
    let expected: Vec<&Value> = words_of(&whole).iter().collect();
    assert_eq!(words, expected);

    // Timestamps ask for SSE: elsewhere on this route they are a clear 400.
    body["stream_format"] = json!("audio");
    let refused = post(&server.url, "/v1/audio/speech", &body).await;
    let error = openai_error(refused, 400).await;
    assert_eq!(error["param"], "timestamps");
}
