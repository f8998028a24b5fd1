//! The real Piper voice end to end over HTTP: speech, speed, determinism, and the audio
//! cache (hits, coalescing, formats, TTL, size bound) in front of the batcher.

mod common;

use std::time::Duration;

use common::{get_json, get_text, metric, post_speech, read_wav, Binary};
use omnivoice_server::engine::piper::PiperEngine;
use serde_json::{json, Value};

const VOICE: &str = "en_US-joe-medium";

fn wav_request(input: &str, seed: u64) -> Value {
    json!({"model": "piper", "voice": VOICE, "input": input, "response_format": "wav", "seed": seed, "stream": false})
}

async fn metrics(url: &str) -> String {
    get_text(format!("{url}/metrics")).await
}

#[tokio::test]
async fn piper_speaks_through_openai_names_and_speed_changes_duration() {
    let server = Binary::ready(&[]).await;
    let openai = json!({"model": "tts-1", "voice": "alloy", "input": "Hello from the native voice.",
                        "response_format": "wav", "stream": false});
    let response = post_speech(&server.url, &openai).await;
    assert_eq!(response.status(), 200);
    let (rate, samples) = read_wav(&response.bytes().await.unwrap());
    assert_eq!(rate, 22050);
    let rms =
        (samples.iter().map(|&s| (s as f64).powi(2)).sum::<f64>() / samples.len() as f64).sqrt();
    assert!(
        samples.len() > 22050 / 2 && rms > 300.0,
        "{} samples, rms {rms}",
        samples.len()
    );

    let mut lengths = Vec::new();
    for speed in [0.5, 2.0] {
        let mut body = wav_request("Speed changes how long this takes.", 7);
        body["speed"] = json!(speed);
        let response = post_speech(&server.url, &body).await;
        assert_eq!(response.status(), 200);
        lengths.push(read_wav(&response.bytes().await.unwrap()).1.len());
    }
    assert!(
        lengths[0] >= 3 * lengths[1],
        "speed 0.5 vs 2.0: {lengths:?}"
    );
}

#[tokio::test]
async fn concurrent_requests_give_the_same_audio_as_sequential_ones() {
    let server = Binary::ready(&["--no-cache", "--batch-timeout-ms", "100"]).await;
    let texts = [
        "The first voice line.",
        "A second, somewhat longer line of speech.",
        "Third.",
        "And the fourth one!",
    ];
    let mut sequential = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        sequential.push(
            post_speech(&server.url, &wav_request(text, i as u64))
                .await
                .bytes()
                .await
                .unwrap(),
        );
    }
    let before = metric(&metrics(&server.url).await, "omnivoice_batch_size_count");
    let requests = texts.iter().enumerate().map(|(i, text)| {
        let url = server.url.clone();
        let body = wav_request(text, i as u64);
        async move { post_speech(&url, &body).await.bytes().await.unwrap() }
    });
    let concurrent = futures::future::join_all(requests).await;
    let batches = metric(&metrics(&server.url).await, "omnivoice_batch_size_count") - before;
    assert!(
        batches < texts.len() as f64,
        "concurrent requests were batched ({batches} batches)"
    );
    for (i, (a, b)) in sequential.iter().zip(&concurrent).enumerate() {
        let (a, b) = (read_wav(a).1, read_wav(b).1);
        assert_eq!(a.len(), b.len(), "item {i} length");
        let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).max().unwrap();
        // Batched and single runs differ only by float summation order (< 1e-4 of full scale).
        assert!(worst <= 4, "item {i}: worst sample difference {worst}");
    }
}

#[tokio::test]
async fn the_cache_answers_repeats_and_coalesces_identical_requests() {
    let server = Binary::ready(&[]).await;
    let body = wav_request("Cache me if you can.", 11);
    let syntheses = |text: &str| metric(text, "omnivoice_syntheses_total");
    let before = syntheses(&metrics(&server.url).await);

    let identical = (0..4).map(|_| {
        let (url, body) = (server.url.clone(), body.clone());
        async move {
            let response = post_speech(&url, &body).await;
            let status = response.headers()["x-cache"].to_str().unwrap().to_string();
            (status, response.bytes().await.unwrap())
        }
    });
    let results = futures::future::join_all(identical).await;
    let text = metrics(&server.url).await;
    assert_eq!(
        syntheses(&text) - before,
        1.0,
        "four identical requests, one synthesis"
    );
    assert_eq!(
        results.iter().filter(|(s, _)| s == "MISS").count(),
        1,
        "{:?}",
        results.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    assert!(results
        .iter()
        .all(|(s, b)| (s == "MISS" || s == "COALESCED") && *b == results[0].1));
    assert!(metric(&text, "omnivoice_cache_coalesced_total") >= 3.0);

    let again = post_speech(&server.url, &body).await;
    assert_eq!(again.headers()["x-cache"], "HIT");
    assert_eq!(again.bytes().await.unwrap(), results[0].1);
    let text = metrics(&server.url).await;
    assert!(metric(&text, "omnivoice_cache_hits_total") >= 1.0);
    assert!(metric(&text, "omnivoice_batch_requests_avoided_total") >= 4.0);

    let mut flac = body.clone();
    flac["response_format"] = json!("flac");
    let other_format = post_speech(&server.url, &flac).await;
    assert_eq!(other_format.headers()["x-cache"], "MISS");
    assert_eq!(other_format.headers()["content-type"], "audio/flac");

    let bypass = reqwest::Client::new()
        .post(format!("{}/v1/audio/speech", server.url))
        .header("cache-control", "no-cache")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(bypass.headers()["x-cache"], "BYPASS");
    assert_eq!(
        bypass.bytes().await.unwrap(),
        results[0].1,
        "a fixed seed reproduces the audio exactly"
    );

    let cleared: Value = reqwest::Client::new()
        .delete(format!("{}/v1/audio/cache", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cleared["stats"]["entries"], 2, "{cleared}");
    assert_eq!(
        post_speech(&server.url, &body).await.headers()["x-cache"],
        "MISS"
    );
}

/// An entry's age is judged on Tokio's clock, and this server runs in the test's runtime: the
/// test moves that clock past the TTL instead of waiting it out. Time stands still only while
/// it is moved, never while a request runs, so no request's own timers jump.
#[tokio::test]
async fn cache_entries_expire_after_the_ttl() {
    let voices = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("voices");
    let piper = PiperEngine::new(voices, candle_core::Device::Cpu);
    let server = common::InProcess::start(
        &[
            "--cache-ttl-s",
            "60",
            "--default-engine",
            "piper",
            "--default-voice",
            VOICE,
        ],
        vec![std::sync::Arc::new(piper)],
    )
    .await;
    let body = wav_request("Short lived.", 3);
    let cache = || async { post_speech(&server.url, &body).await.headers()["x-cache"].clone() };
    assert_eq!(cache().await, "MISS");
    assert_eq!(cache().await, "HIT");
    let later = |seconds| async move {
        tokio::time::pause();
        tokio::time::advance(Duration::from_secs(seconds)).await;
        tokio::time::resume();
    };
    later(30).await;
    assert_eq!(cache().await, "HIT", "half way through its TTL");
    later(30).await;
    assert_eq!(cache().await, "MISS", "past its TTL");
    server.stop().await;
}

#[tokio::test]
async fn the_cache_stays_within_its_byte_budget() {
    let server = Binary::ready(&["--cache-max-mb", "1"]).await;
    // Each response is a WAV of roughly 1.5 s (≈ 66 KB); 24 of them exceed 1 MiB.
    for i in 0..24 {
        let response = post_speech(
            &server.url,
            &wav_request(&format!("Sentence number {i} for the cache."), i),
        )
        .await;
        assert_eq!(response.status(), 200);
    }
    let health: Value = get_json(format!("{}/health", server.url)).await;
    let bytes = health["cache"]["stats"]["bytes"].as_u64().unwrap();
    assert!(bytes <= 1024 * 1024, "cache holds {bytes} bytes");
    assert!(
        health["cache"]["stats"]["evictions"].as_u64().unwrap() > 0,
        "{health}"
    );
    assert!(
        metric(
            &metrics(&server.url).await,
            "omnivoice_cache_evictions_total"
        ) > 0.0
    );
}

#[tokio::test]
async fn identical_streamed_requests_are_synthesized_once() {
    let server = Binary::ready(&[]).await;
    let body = json!({"model": "piper", "voice": VOICE, "input": "Streams can share one synthesis. Two sentences.",
                      "response_format": "mp3", "seed": 21});
    let before = metric(&metrics(&server.url).await, "omnivoice_syntheses_total");
    let requests = (0..4).map(|_| {
        let (url, body) = (server.url.clone(), body.clone());
        async move {
            let response = post_speech(&url, &body).await;
            let status = response.headers()["x-cache"].to_str().unwrap().to_string();
            (status, response.bytes().await.unwrap())
        }
    });
    let results = futures::future::join_all(requests).await;
    let after = metric(&metrics(&server.url).await, "omnivoice_syntheses_total");
    assert_eq!(
        after - before,
        1.0,
        "{:?}",
        results.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    assert!(
        results.iter().all(|(_, bytes)| *bytes == results[0].1),
        "everyone got the same file"
    );
    assert_eq!(
        post_speech(&server.url, &body).await.headers()["x-cache"],
        "HIT"
    );
}
