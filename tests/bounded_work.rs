//! Bounded work per request, with the real voice and the real binary: hostile inputs (CJK read
//! letter by letter, Arabic, emoji, a 4,000-letter word, a 400-digit number, a URL, runs of
//! punctuation) end with 200, no model input exceeds the Piper engine's phoneme-id limit, and
//! the server's peak memory stays bounded; SIGTERM drains (`/health` says so) and the process
//! exits 0 within the grace period even while a long utterance is computing.

mod common;

use std::time::{Duration, Instant};

use common::decode::decode;
use common::{get_json, get_text, metric, openai_error, post_speech, Binary};
use omnivoice_server::audio::AudioFormat;
use omnivoice_server::engine::piper::MAX_IDS_PER_PASS;
use serde_json::{json, Value};

const VOICE: &str = "en_US-joe-medium";
/// Peak RSS the server must stay under across the hostile set (the figure is in
/// docs/performance.md).
const PEAK_RSS_LIMIT: u64 = 1536 * 1024 * 1024;

/// `n` different CJK ideographs without punctuation; an English voice reads each one as
/// "Chinese letter", ≈ 16 phoneme ids a character.
fn cjk(n: usize, offset: u32) -> String {
    (0..n as u32)
        .map(|i| char::from_u32(0x4E00 + (offset + i * 37) % 2000).unwrap())
        .collect()
}

/// (name, input, streamed): each proves a different way text becomes many phoneme ids. Short
/// where short proves the point, to keep the suite fast: 56 ideographs already need two passes
/// (≈ 16 ids each), and a 1,000-letter word is cut like a 4,000-letter one (measured too: 200,
/// same peak memory; docs/performance.md).
fn hostile_inputs() -> Vec<(&'static str, String, bool)> {
    vec![
        ("CJK, whole body", cjk(56, 0), false),
        ("CJK, streamed", cjk(56, 500), true),
        ("Arabic", "مرحبا بالعالم كيف حالك اليوم ".repeat(3), false),
        (
            "emoji between words",
            format!("Yes {} no", "😀🎉👍🔥🚀".repeat(400)),
            false,
        ),
        ("1,000-letter word", "abcdefghij".repeat(100), false),
        ("400-digit number", "1234567890".repeat(40), false),
        (
            "URL",
            format!(
                "https://example.com/{}?q={}",
                "very/long/path/".repeat(6),
                "x1y2z3".repeat(5)
            ),
            false,
        ),
        ("punctuation", "!?.,;:-—…".repeat(440), false),
    ]
}

/// What a request got back: its status and, for a 200, its audio decoded.
struct Heard {
    status: u16,
    /// Seconds of audio in the body.
    seconds: f64,
    /// What `X-Audio-Duration-S` said (whole bodies only).
    header_seconds: Option<f64>,
    /// Loudest sample, full scale 1.0.
    peak: f32,
}

/// Streamed as raw PCM (a streamed WAV header cannot know the length), whole as WAV.
async fn speak(url: &str, model: &str, voice: &str, input: &str, stream: bool) -> Heard {
    let format = if stream {
        AudioFormat::Pcm
    } else {
        AudioFormat::Wav
    };
    let body = json!({"model": model, "voice": voice, "input": input,
                      "response_format": format.extension(), "stream": stream, "seed": 1});
    let response = post_speech(url, &body).await;
    let status = response.status().as_u16();
    let header_seconds = response
        .headers()
        .get("x-audio-duration-s")
        .map(|v| v.to_str().unwrap().parse::<f64>().unwrap());
    let bytes = response.bytes().await.expect("the whole body");
    if status != 200 {
        return Heard {
            status,
            seconds: 0.0,
            header_seconds,
            peak: 0.0,
        };
    }
    let audio = decode(format, &bytes);
    Heard {
        status,
        seconds: audio.samples.len() as f64 / f64::from(audio.rate),
        header_seconds,
        peak: audio.samples.iter().fold(0.0, |m, s| m.max(s.abs())),
    }
}

/// The audio is what the input asks for: as long as its header says, at least `min_seconds`
/// (said letter by letter or digit by digit, these inputs take seconds), and audible unless
/// nothing in it is speech.
fn check_audio(engine: &str, name: &str, heard: &Heard, min_seconds: f64, speech: bool) {
    assert_eq!(heard.status, 200, "{engine} {name}");
    if let Some(header) = heard.header_seconds {
        assert!(
            (heard.seconds - header).abs() < 0.01,
            "{engine} {name}: {} s of audio, the header says {header} s",
            heard.seconds
        );
    }
    assert!(
        heard.seconds >= min_seconds,
        "{engine} {name}: {} s of audio, expected at least {min_seconds} s",
        heard.seconds
    );
    if speech {
        assert!(
            heard.peak > 0.05,
            "{engine} {name}: silent, peak {}",
            heard.peak
        );
    }
}

/// Least audio an input must give, and whether it must be audible: a CJK ideograph is read as
/// "Chinese letter", a digit or a letter of a word no voice knows is spelled out (a fifth of
/// a second each at least), words take a quarter of a second; punctuation alone may be silence.
fn expected_audio(name: &str, input: &str) -> (f64, bool) {
    let chars = input.chars().count() as f64;
    let words = input
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count() as f64;
    match name {
        name if name.starts_with("CJK") => (0.2 * chars, true),
        "punctuation" => (0.0, false),
        "1,000-letter word" | "400-digit number" => (0.02 * chars, true),
        _ => (0.25 * words, true),
    }
}

fn splits(metrics: &str) -> f64 {
    metric(metrics, "omnivoice_utterances_split_total")
}

#[tokio::test]
async fn hostile_inputs_stay_within_the_phoneme_limit_and_the_memory_bound() {
    let server = Binary::ready(&["--no-cache"]).await;
    let started = Instant::now();
    for (name, input, stream) in hostile_inputs() {
        assert!(
            input.chars().count() <= 4096,
            "{name} is within the input limit"
        );
        let before = splits(&get_text(format!("{}/metrics", server.url)).await);
        let one = Instant::now();
        let heard = speak(&server.url, "piper", VOICE, &input, stream).await;
        eprintln!(
            "piper {name}: {:.2} s of audio, peak {:.2}",
            heard.seconds, heard.peak
        );
        let (min_seconds, speech) = expected_audio(name, &input);
        check_audio("piper", name, &heard, min_seconds, speech);
        let after = splits(&get_text(format!("{}/metrics", server.url)).await);
        eprintln!(
            "piper {name}: {} chars, {:.1} s, {} utterances split, peak RSS {} MiB",
            input.chars().count(),
            one.elapsed().as_secs_f64(),
            after - before,
            server.peak_rss_bytes() >> 20
        );
        if name.starts_with("CJK") {
            assert!(after > before, "{name}: had more ids than one pass takes");
        }
    }
    eprintln!(
        "piper hostile set: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Emoji alone are no speech (normalization drops them): a clear 400, not an empty WAV.
    let emoji = json!({"model": "piper", "voice": VOICE, "input": "😀🎉👍🔥🚀".repeat(800)});
    let error = openai_error(post_speech(&server.url, &emoji).await, 400).await;
    assert_eq!(error["code"], "empty_input", "{error}");

    let text = get_text(format!("{}/metrics", server.url)).await;
    let passes = metric(&text, "omnivoice_utterance_phoneme_ids_count");
    let within = metric(
        &text,
        &format!("omnivoice_utterance_phoneme_ids_bucket{{le=\"{MAX_IDS_PER_PASS}\"}}"),
    );
    assert!(passes > 0.0, "model inputs were recorded");
    assert_eq!(
        within, passes,
        "no model input exceeds {MAX_IDS_PER_PASS} ids"
    );

    let peak = server.peak_rss_bytes();
    eprintln!("peak RSS across the hostile set: {} MiB", peak >> 20);
    assert!(peak < PEAK_RSS_LIMIT, "peak RSS {} MiB", peak >> 20);
}

#[tokio::test]
async fn the_espeak_engine_answers_hostile_inputs_too() {
    let server = Binary::ready(&["--no-cache", "--preload", "espeak/en-us"]).await;
    let started = Instant::now();
    for (name, input, stream) in hostile_inputs() {
        let one = Instant::now();
        let heard = speak(&server.url, "espeak", "en-us", &input, stream).await;
        eprintln!(
            "espeak {name}: {:.2} s, {:.2} s of audio, peak {:.2}",
            one.elapsed().as_secs_f64(),
            heard.seconds,
            heard.peak
        );
        let (min_seconds, speech) = expected_audio(name, &input);
        check_audio("espeak", name, &heard, min_seconds, speech);
    }
    // The worst case of the whole input limit: 4,000 ideographs, each a spoken word or two.
    let one = Instant::now();
    let input = cjk(4000, 0);
    let heard = speak(&server.url, "espeak", "en-us", &input, false).await;
    eprintln!(
        "espeak 4,000 CJK chars: {:.1} s, {:.0} s of audio, peak RSS {} MiB",
        one.elapsed().as_secs_f64(),
        heard.seconds,
        server.peak_rss_bytes() >> 20
    );
    let (min_seconds, speech) = expected_audio("CJK", &input);
    check_audio("espeak", "4,000 CJK chars", &heard, min_seconds, speech);
    eprintln!(
        "espeak hostile set: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(server.peak_rss_bytes() < PEAK_RSS_LIMIT);
}

#[tokio::test]
async fn sigterm_drains_and_exits_0_within_the_grace_period_while_a_long_utterance_computes() {
    const GRACE_S: u64 = 2;
    let grace = GRACE_S.to_string();
    let mut server = Binary::ready(&["--no-cache", "--shutdown-timeout-s", &grace]).await;
    let url = server.url.clone();
    // One short sentence to start the stream, then one 400-character CJK utterance: thousands
    // of phoneme ids, many passes, one blocking task that runs far beyond the grace period.
    let input = format!("Here it comes. {}", cjk(400, 0));
    let body = json!({"model": "piper", "voice": VOICE, "input": input,
                      "response_format": "pcm", "stream": true});
    let response = post_speech(&url, &body).await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    use futures::StreamExt;
    let first = stream.next().await.expect("a first chunk").expect("bytes");
    assert!(!first.is_empty());
    let reader = tokio::spawn(async move { while let Some(Ok(_)) = stream.next().await {} });

    server.send_sigterm();
    let signalled = Instant::now();
    let client = reqwest::Client::new();
    let mut health: Option<(u16, Value)> = None;
    while signalled.elapsed() < Duration::from_secs(GRACE_S) {
        if let Ok(r) = client.get(format!("{url}/health")).send().await {
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            if status == 503 {
                health = Some((status, body));
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        health,
        Some((503, json!({"status": "draining"}))),
        "/health says draining while the stream is in flight"
    );
    let ready = client.get(format!("{url}/health/ready")).send().await;
    let live = client.get(format!("{url}/health/live")).send().await;
    let refused = post_speech(
        &url,
        &json!({"model": "piper", "voice": VOICE, "input": "Hi."}),
    )
    .await;
    assert_eq!(ready.unwrap().status(), 503);
    assert_eq!(live.unwrap().status(), 200);
    assert_eq!(
        refused.status(),
        503,
        "new speech is refused while draining"
    );

    let status = server
        .wait_exit(Duration::from_secs(GRACE_S + 4))
        .await
        .expect("the process exits within the grace period plus a few seconds");
    eprintln!(
        "exited {:?} {:.2} s after SIGTERM",
        status.code(),
        signalled.elapsed().as_secs_f64()
    );
    assert_eq!(status.code(), Some(0));
    tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the client's stream ends with the process")
        .unwrap();
}

#[tokio::test]
async fn probes_say_live_and_ready_once_the_voice_is_preloaded() {
    let server = Binary::ready(&[]).await;
    let live = get_json(format!("{}/health/live", server.url)).await;
    assert_eq!(live, json!({"status": "alive"}));
    let ready = reqwest::get(format!("{}/health/ready", server.url))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(
        ready.json::<Value>().await.unwrap(),
        json!({"status": "ready"})
    );
}
