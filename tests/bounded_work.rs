//! Bounded work per request, with the real voice and the real binary: hostile inputs (CJK read
//! letter by letter, Arabic, emoji, a 4,000-letter word, a 400-digit number, a URL, runs of
//! punctuation) end with 200, no model input exceeds the Piper engine's phoneme-id limit, and
//! the server's peak memory stays bounded; SIGTERM drains (`/health` says so) and the process
//! exits 0 within the grace period even while a long utterance is computing.

mod common;

use std::time::{Duration, Instant};

use common::{get_json, get_text, metric, openai_error, post_speech, Binary};
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

async fn speak(url: &str, model: &str, voice: &str, input: &str, stream: bool) -> (u16, usize) {
    let body = json!({"model": model, "voice": voice, "input": input,
                      "response_format": "wav", "stream": stream, "seed": 1});
    let response = post_speech(url, &body).await;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("the whole body");
    (status, bytes.len())
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
        let (status, bytes) = speak(&server.url, "piper", VOICE, &input, stream).await;
        assert_eq!(status, 200, "{name}");
        assert!(bytes > 44, "{name}: audio after the WAV header");
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
        let (status, bytes) = speak(&server.url, "espeak", "en-us", &input, stream).await;
        assert_eq!(status, 200, "{name}");
        eprintln!(
            "espeak {name}: {:.2} s, {} KiB",
            one.elapsed().as_secs_f64(),
            bytes >> 10
        );
    }
    // The worst case of the whole input limit: 4,000 ideographs, each a spoken word or two.
    let one = Instant::now();
    let (status, bytes) = speak(&server.url, "espeak", "en-us", &cjk(4000, 0), false).await;
    assert_eq!(status, 200);
    eprintln!(
        "espeak 4,000 CJK chars: {:.1} s, {} MiB of WAV, peak RSS {} MiB",
        one.elapsed().as_secs_f64(),
        bytes >> 20,
        server.peak_rss_bytes() >> 20
    );
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
