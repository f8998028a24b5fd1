//! Kokoro's streams through the real binary on a real port, with the real weights: a streamed
//! sentence starts with its first phrase spoken apart, the join is not heard (no step larger
//! than the speech's own, a pause no longer than a breath), the stream lasts as long as the
//! whole body, and its words are where their sound is. And Kokoro's word starts after a pause
//! are where the audio's energy returns.

mod common;

use base64::Engine as _;
use common::{post, post_speech, Binary};
use serde_json::{json, Value};

const RATE: f64 = 24_000.0;

/// Sentences streamed in two, with the last word of the first phrase and the first of the
/// rest (`text::phrase`'s rules: before a preposition in a long clause).
const CUT_SENTENCES: [(&str, &str, &str); 2] = [
    (
        "Sure, I can help you book a table for two at seven tonight.",
        "table",
        "for",
    ),
    (
        "The quick brown fox jumps over the lazy dog.",
        "jumps",
        "over",
    ),
];

/// Sentences with pauses inside (commas, a semicolon), 8 words after a pause at speed 1.
const PAUSED_SENTENCES: [&str; 20] = [
    "Hello there, my friend.",
    "Well, that is not what I meant.",
    "If you can, call me tomorrow.",
    "First, open the door; then, close the window.",
    "Yes, I know, but it is late.",
    "After dinner, we walked home.",
    "In the morning, the birds sing loudly.",
    "However, nobody came to the party.",
    "Wait, what did you say?",
    "Sure, I can help you with that.",
    "Okay, let me check the weather.",
    "No, thank you, I am fine.",
    "Honestly, I have no idea.",
    "Today, the market opened higher.",
    "Meanwhile, back at the ranch, things got worse.",
    "Please, sit down and relax.",
    "Look, the sun is setting.",
    "Right, so here is the plan.",
    "Anyway, see you soon.",
    "Actually, it was a great day.",
];

/// How far a word's start may be from the audio's onset, as a median over the words after a
/// pause (the bar; before the fix it was 55 ms).
const MAX_MEDIAN_ONSET_DIFF_S: f64 = 0.025;

async fn kokoro() -> Binary {
    common::kokoro_dir();
    Binary::ready(&["--no-cache", "--kokoro-dir", "voices/kokoro"]).await
}

fn body(input: &str, stream: bool) -> Value {
    json!({"model": "kokoro", "voice": "af_heart", "input": input, "response_format": "pcm",
           "seed": 1, "stream": stream})
}

fn samples(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(2)
        .map(|b| f64::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect()
}

/// The streamed audio and words of `input` (NDJSON with timestamps).
async fn streamed(url: &str, input: &str) -> (Vec<f64>, Vec<Value>) {
    let response = post(url, "/v1/audio/speech/timestamps", &body(input, true)).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let (mut audio, mut words) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert!(line.get("error").is_none(), "{line}");
        audio.extend(
            base64::engine::general_purpose::STANDARD
                .decode(line["audio"].as_str().unwrap())
                .unwrap(),
        );
        words.extend(line["words"].as_array().unwrap().iter().cloned());
    }
    (samples(&audio), words)
}

async fn whole(url: &str, input: &str) -> Vec<f64> {
    let response = post_speech(url, &body(input, false)).await;
    assert_eq!(response.status(), 200);
    samples(&response.bytes().await.unwrap())
}

fn time(word: &Value, key: &str) -> f64 {
    word[key].as_f64().unwrap()
}

fn at(seconds: f64) -> usize {
    (seconds.max(0.0) * RATE) as usize
}

fn largest_step(samples: &[f64]) -> f64 {
    samples
        .windows(2)
        .map(|w| (w[1] - w[0]).abs())
        .fold(0.0, f64::max)
}

/// The longest run of exact zeros in `samples[range]`, as a range of `samples`.
fn longest_silence(samples: &[f64], range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let (mut best, mut start) = (range.start..range.start, None);
    for i in range.clone() {
        match (samples[i] == 0.0, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if i - s > best.len() {
                    best = s..i;
                }
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start.filter(|&s| range.end - s > best.len()) {
        best = s..range.end;
    }
    best
}

/// RMS of 5 ms windows.
fn loudness(samples: &[f64]) -> Vec<f64> {
    samples
        .chunks(at(0.005))
        .map(|c| (c.iter().map(|s| s * s).sum::<f64>() / c.len() as f64).sqrt())
        .collect()
}

/// Where the sound returns after the quietest window in `from..to` seconds: the first 5 ms
/// window within 30 dB of the loudest.
fn onset(samples: &[f64], from: f64, to: f64) -> f64 {
    let rms = loudness(samples);
    let loud = 0.0316 * rms.iter().cloned().fold(0.0, f64::max);
    let window = |s: f64| ((s.max(0.0) / 0.005) as usize).min(rms.len() - 1);
    let quietest = (window(from)..window(to))
        .min_by(|&a, &b| rms[a].total_cmp(&rms[b]))
        .unwrap_or(window(from));
    let first = (quietest..rms.len())
        .find(|&i| rms[i] >= loud)
        .unwrap_or(rms.len());
    first as f64 * 0.005
}

#[tokio::test]
async fn a_stream_speaks_its_first_phrase_apart_and_the_join_is_not_heard() {
    let server = kokoro().await;
    for (input, before, after) in CUT_SENTENCES {
        let whole = whole(&server.url, input).await;
        let (audio, words) = streamed(&server.url, input).await;
        assert_ne!(audio, whole, "{input}: the stream is spoken in two");
        let (streamed_s, whole_s) = (audio.len() as f64 / RATE, whole.len() as f64 / RATE);
        assert!(
            (streamed_s - whole_s).abs() <= 0.1 * whole_s,
            "{input}: {streamed_s:.3} s streamed, {whole_s:.3} s whole"
        );

        // Every word, in order, never overlapping, inside the audio.
        let names: Vec<&str> = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
        let expected: Vec<String> = input
            .split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| c.is_ascii_punctuation())
                    .to_string()
            })
            .collect();
        assert_eq!(names, expected, "{input}");
        for pair in words.windows(2) {
            assert!(
                time(&pair[1], "start") >= time(&pair[0], "end") - 1e-9,
                "{pair:?}"
            );
        }
        assert!(time(words.last().unwrap(), "end") <= streamed_s + 1e-6);

        // The join: a short silence between the phrases' words…
        let word = |name: &str| words.iter().find(|w| w["word"] == name).unwrap();
        let (last, next) = (word(before), word(after));
        let near = at(time(last, "end") - 0.05)..at(time(next, "start") + 0.05).min(audio.len());
        let pause = longest_silence(&audio, near);
        let pause_s = pause.len() as f64 / RATE;
        assert!(
            (0.025..=0.09).contains(&pause_s),
            "{input}: a pause of {pause_s:.3} s between '{before}' and '{after}'"
        );
        // …with no step larger than the speech's own.
        let edges = pause.start - at(0.01)..pause.end + at(0.01);
        let at_join = largest_step(&audio[edges.clone()]);
        let inside = largest_step(&audio[..edges.start]).max(largest_step(&audio[edges.end..]));
        assert!(
            at_join <= inside,
            "{input}: a step of {at_join} at the join, at most {inside} inside"
        );
        // The word after the cut starts where its sound does.
        let sound = onset(
            &audio,
            pause.start as f64 / RATE,
            pause.end as f64 / RATE + 0.01,
        );
        let start = time(next, "start");
        eprintln!(
            "{input}: {streamed_s:.3} s streamed, {whole_s:.3} s whole; a pause of {pause_s:.3} s; \
             largest step {at_join:.4} at the join, {inside:.4} inside; '{after}' at {start:.3} s, \
             its sound at {sound:.3} s"
        );
        assert!(
            (start - sound).abs() <= MAX_MEDIAN_ONSET_DIFF_S,
            "{input}: '{after}' starts at {start:.3} s, its sound at {sound:.3} s"
        );
    }
}

#[tokio::test]
async fn word_starts_after_a_pause_are_where_the_sound_returns() {
    let server = kokoro().await;
    let mut differences = Vec::new();
    for input in PAUSED_SENTENCES {
        let mut request = body(input, false);
        request["response_format"] = json!("wav");
        let response = post(&server.url, "/v1/audio/speech/timestamps", &request).await;
        assert_eq!(response.status(), 200);
        let answer: Value = response.json().await.unwrap();
        let wav = base64::engine::general_purpose::STANDARD
            .decode(answer["audio"].as_str().unwrap())
            .unwrap();
        let (rate, pcm) = common::read_wav(&wav);
        assert_eq!(f64::from(rate), RATE);
        let audio: Vec<f64> = pcm.iter().map(|&s| f64::from(s) / 32768.0).collect();
        let words = answer["words"].as_array().unwrap();
        for pair in words.windows(2) {
            let (end, start) = (time(&pair[0], "end"), time(&pair[1], "start"));
            if start - end >= 0.08 {
                let sound = onset(&audio, end - 0.03, start + 0.03);
                differences.push((pair[1]["word"].clone(), start - sound));
            }
        }
    }
    eprintln!("words after a pause, start − onset (s): {differences:?}");
    assert!(differences.len() >= 8, "pauses found: {differences:?}");
    let mut off: Vec<f64> = differences.iter().map(|(_, d)| d.abs()).collect();
    off.sort_by(f64::total_cmp);
    let median = off[off.len() / 2];
    assert!(
        median <= MAX_MEDIAN_ONSET_DIFF_S,
        "median |start − onset| {median:.3} s: {differences:?}"
    );
}
