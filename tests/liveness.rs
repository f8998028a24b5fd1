//! The server stays live while it does slow work: `/health` answers quickly while the first
//! request for a cold Kokoro voice is served (its model loaded and its file hashed for the
//! cache key) and while a 20 MB clip is uploaded and decoded.
//!
//! The server runs on a runtime of two workers, as on a two-core machine: work that blocks an
//! async worker (hashing a model file in the cache key, reading files while choosing a voice,
//! encoding on the worker) stalls the tasks queued behind it, and shows in the probes' tail.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{kokoro_dir, InProcess};
use omnivoice_server::engine::kokoro::KokoroEngine;
use omnivoice_server::engine::Engine;

/// Probes of `/health` taken while the slow work is in flight, at least.
const PROBES: usize = 50;
/// Voices asked for at once, each for the first time.
const VOICES: [&str; 4] = ["af_heart", "af_bella", "am_adam", "bf_emma"];
/// The p99 `/health` may take.
const LIVE_WITHIN: Duration = Duration::from_millis(20);

/// A float stereo WAV of about 20 MB at 48 kHz: 52 seconds, under the 60 s a clip may last.
fn twenty_megabyte_clip() -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 48_000,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut file = std::io::Cursor::new(Vec::new());
    let mut writer = hound::WavWriter::new(&mut file, spec).unwrap();
    let frames = 20 * 1024 * 1024 / 8;
    for i in 0..frames {
        let v = (i as f32 * 0.03).sin() * 0.3;
        writer.write_sample(v).unwrap();
        writer.write_sample(v).unwrap();
    }
    writer.finalize().unwrap();
    file.into_inner()
}

#[test]
fn health_answers_while_a_cold_voice_loads_and_a_clip_uploads() {
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let kokoro: Arc<dyn Engine> =
        Arc::new(KokoroEngine::new(kokoro_dir(), candle_core::Device::Cpu));
    let server = server_runtime.block_on(InProcess::start(
        &[
            "--data-dir",
            data.path().to_str().unwrap(),
            "--default-engine",
            "kokoro",
            "--default-voice",
            "af_heart",
            "--preload",
            "none",
            "--max-upload-bytes",
            "26000000",
        ],
        vec![kokoro],
    ));
    let url = server.url.clone();
    let clip = twenty_megabyte_clip();
    assert!(clip.len() > 20_000_000, "{} bytes", clip.len());

    // The clients run on a runtime of their own, so that only the server's two workers are
    // measured.
    let client_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (latencies, during) = client_runtime.block_on(async move {
        // The first requests for four voices at once: each needs the model's hash for its
        // cache key, and the first to ask computes it while the others wait for it.
        let speech = tokio::spawn({
            let url = url.clone();
            async move {
                let speak = |voice: &'static str| {
                    let url = url.clone();
                    async move {
                        let answer = reqwest::Client::new()
                            .post(format!("{url}/v1/audio/speech"))
                            .json(&serde_json::json!({
                                "model": "kokoro", "voice": voice, "response_format": "mp3",
                                "input": "The first request for a voice loads its model.",
                            }))
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(answer.status(), 200);
                        answer.bytes().await.unwrap().len()
                    }
                };
                let sizes = futures::future::join_all(VOICES.map(speak)).await;
                sizes.into_iter().min().unwrap()
            }
        });
        let upload = tokio::spawn({
            let url = url.clone();
            async move {
                let form = reqwest::multipart::Form::new()
                    .text("profile_id", "big")
                    .text("ref_text", "A long clip.")
                    .part(
                        "ref_audio",
                        reqwest::multipart::Part::bytes(clip).file_name("a"),
                    );
                let answer = reqwest::Client::new()
                    .post(format!("{url}/v1/voices/profiles"))
                    .multipart(form)
                    .send()
                    .await
                    .unwrap();
                let status = answer.status();
                assert_eq!(status, 201, "{}", answer.text().await.unwrap());
            }
        });
        // Another client, with its own connection.
        let probe = reqwest::Client::new();
        let health = format!("{url}/health");
        assert_eq!(probe.get(&health).send().await.unwrap().status(), 200);
        let mut latencies = Vec::new();
        let mut during = Vec::new();
        let busy = || !(speech.is_finished() && upload.is_finished());
        while latencies.len() < PROBES || busy() {
            let before = busy();
            let started = Instant::now();
            let answer = probe.get(&health).send().await.unwrap();
            assert_eq!(answer.status(), 200);
            answer.bytes().await.unwrap();
            let took = started.elapsed();
            latencies.push(took);
            if before && busy() {
                during.push(took);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(speech.await.unwrap() > 1000, "audio came back");
        upload.await.unwrap();
        (latencies, during)
    });
    server_runtime.block_on(server.stop());

    assert!(
        during.len() >= PROBES,
        "only {} probes overlapped the slow work: the test measured nothing",
        during.len()
    );
    // The first 50 probes while the work is in flight: the model's hash and load come first.
    let mut window: Vec<Duration> = during[..PROBES].to_vec();
    window.sort();
    // The 99th percentile of 50 probes, by nearest rank: the 50th, the slowest.
    let p99 = window[(PROBES * 99).div_ceil(100) - 1];
    let mut all = latencies.clone();
    all.sort();
    eprintln!(
        "/health: p99 {p99:?} over the first {PROBES} probes during the work; median {:?}, \
         slowest {:?} over all {} ({} during the work)",
        all[all.len() / 2],
        all[all.len() - 1],
        all.len(),
        during.len()
    );
    assert!(
        p99 <= LIVE_WITHIN,
        "/health took {p99:?} at p99 over {PROBES} probes during the work: {window:?}"
    );
}
