//! The OmniVoice engine through the real binary on a real port. The real checkpoint lives on
//! a model hub these machines cannot reach, so the server loads the small checkpoint that the
//! official code wrote (`crates/models/tests/fixtures/omnivoice/e2e`: real file layout, real
//! tokenizer format, seeded random weights; the model crate's tests hold its audio to the
//! official `generate`). What it says is noise, so these tests check everything but the
//! sound: voices and designs, `instructions`, the generation fields and their ranges, seeds,
//! the cache key, languages, the refusal of timestamps, formats, streaming, batching and the
//! `selftest` subcommand.

mod common;

use common::{get_json, get_text, metric, openai_error, post, post_speech, read_wav, Binary};
use serde_json::{json, Value};

const CHECKPOINT: &str = "crates/models/tests/fixtures/omnivoice/e2e";
const TEXT: &str = "Hello world. This is a test.";

fn speech(extra: Value) -> Value {
    let mut body = json!({"model": "omnivoice", "voice": "alloy", "input": TEXT,
                          "response_format": "wav", "stream": false, "seed": 7, "num_step": 4});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

async fn audio(url: &str, body: &Value) -> (reqwest::header::HeaderMap, Vec<u8>) {
    let response = post_speech(url, body).await;
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.unwrap().to_vec();
    assert_eq!(status, 200, "{body}: {}", String::from_utf8_lossy(&bytes));
    (headers, bytes)
}

async fn server(extra: &[&str]) -> Binary {
    let mut args = vec!["--omnivoice-dir", CHECKPOINT, "--preload", "none"];
    args.extend_from_slice(extra);
    Binary::ready(&args).await
}

#[tokio::test]
async fn voices_designs_instructions_and_languages() {
    let server = server(&["--no-cache"]).await;
    let url = server.url.as_str();

    let listed = get_json(format!("{url}/v1/audio/voices")).await;
    let ours: Vec<&Value> = listed["voices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["engine"] == "omnivoice")
        .collect();
    let ids: Vec<&str> = ours.iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert!(
        ids.contains(&"auto") && ids.contains(&"alloy") && ids.contains(&"onyx"),
        "{ids:?}"
    );
    assert_eq!(ours.len(), 14, "auto and the 13 presets: {ids:?}");
    let alloy = ours.iter().find(|v| v["id"] == "alloy").unwrap();
    assert_eq!(alloy["language"], "mul");
    assert_eq!(alloy["gender"], "female");
    let models = get_json(format!("{url}/v1/models")).await;
    assert!(models.to_string().contains("\"omnivoice\""), "{models}");

    // A preset speaks, as WAV at the codec's rate.
    let (headers, wav) = audio(url, &speech(json!({}))).await;
    let (rate, samples) = read_wav(&wav);
    assert_eq!(
        rate.to_string(),
        headers["x-audio-sample-rate"].to_str().unwrap()
    );
    assert!(
        samples.len() > rate as usize / 10,
        "{} samples",
        samples.len()
    );

    // `instructions` decide the voice: the same audio as the design named as the voice,
    // however it is spelt; other voices and seeds give other audio.
    let designed = |voice: &str, instructions: Option<&str>, seed: u64| {
        let mut body = speech(json!({"voice": voice, "seed": seed}));
        if let Some(i) = instructions {
            body["instructions"] = json!(i);
        }
        body
    };
    let (_, by_instructions) = audio(
        url,
        &designed("alloy", Some("Male,  Low Pitch, british accent"), 7),
    )
    .await;
    let (_, by_voice) = audio(
        url,
        &designed("design:male, low pitch, british accent", None, 7),
    )
    .await;
    assert_eq!(by_instructions, by_voice);
    let (_, again) = audio(url, &designed("alloy", None, 7)).await;
    assert_eq!(again, wav, "a seed gives the same audio");
    let (_, other_seed) = audio(url, &designed("alloy", None, 8)).await;
    assert_ne!(other_seed, wav);
    assert_ne!(by_voice, wav, "another design, other audio");
    let (_, auto) = audio(url, &designed("auto", None, 7)).await;
    assert_ne!(auto, wav);

    // Bad designs: a 400 that names the item and the nearest valid one.
    let error = openai_error(
        post_speech(
            url,
            &speech(json!({"instructions": "femal, british accent"})),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(error["param"], "instructions");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("femal") && message.contains("'female'"),
        "{message}"
    );
    let error = openai_error(
        post_speech(url, &speech(json!({"instructions": "male, female"}))).await,
        400,
    )
    .await;
    assert_eq!(error["param"], "instructions");
    let error = openai_error(
        post_speech(url, &speech(json!({"voice": "design:male, cheerful"}))).await,
        400,
    )
    .await;
    assert_eq!(error["param"], "voice");
    assert!(
        error["message"].as_str().unwrap().contains("cheerful"),
        "{error}"
    );

    // Languages by id and by name go to the model; an unknown one is refused.
    for language in ["en", "English", "zh"] {
        let (headers, _) = audio(url, &speech(json!({"language": language}))).await;
        assert_eq!(headers["content-language"], language);
    }
    let error = openai_error(
        post_speech(url, &speech(json!({"language": "Klingonese"}))).await,
        400,
    )
    .await;
    assert_eq!(error["param"], "language");
}

#[tokio::test]
async fn generation_fields_ranges_cache_formats_streams_and_timestamps() {
    let server = server(&[]).await;
    let url = server.url.as_str();

    // Out of range, or for another engine: 400s naming the field.
    for (field, value) in [
        ("num_step", json!(0)),
        ("num_step", json!(65)),
        ("guidance_scale", json!(10.5)),
        ("t_shift", json!(-0.1)),
        ("position_temperature", json!(11)),
        ("class_temperature", json!(2.5)),
        ("layer_penalty_factor", json!(-1)),
        ("duration", json!(0.05)),
        ("audio_chunk_duration", json!(0)),
        ("audio_chunk_threshold", json!(0)),
    ] {
        let error = openai_error(
            post_speech(url, &speech(json!({ field: value }))).await,
            400,
        )
        .await;
        assert_eq!(error["param"], field, "{field} = {value}");
    }
    let error = openai_error(
        post_speech(
            url,
            &json!({"model": "piper", "voice": "en_US-joe-medium", "input": TEXT, "num_step": 8}),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(error["param"], "model");

    // Every field is part of the cache key.
    let (first, body) = audio(url, &speech(json!({"seed": 11}))).await;
    assert_eq!(first["x-cache"], "MISS");
    let (again, cached) = audio(url, &speech(json!({"seed": 11}))).await;
    assert_eq!(again["x-cache"], "HIT");
    assert_eq!(cached, body);
    for (field, value) in [
        ("num_step", json!(5)),
        ("guidance_scale", json!(1.5)),
        ("t_shift", json!(0.2)),
        ("position_temperature", json!(0)),
        ("class_temperature", json!(0.5)),
        ("layer_penalty_factor", json!(4)),
        ("denoise", json!(false)),
        ("postprocess_output", json!(false)),
        ("duration", json!(1.5)),
    ] {
        let (headers, _) = audio(url, &speech(json!({"seed": 11, field: value}))).await;
        assert_eq!(headers["x-cache"], "MISS", "{field} changes the key");
    }

    // `duration` sets the length: without post-processing, exactly its frames plus the
    // official 0.1 s of padding at each end.
    let (_, wav) = audio(
        url,
        &speech(json!({"input": "Hello there.", "duration": 1.0, "postprocess_output": false})),
    )
    .await;
    let (rate, samples) = read_wav(&wav);
    let seconds = samples.len() as f64 / f64::from(rate);
    assert!((seconds - 1.2).abs() < 0.05, "{seconds} s");

    // Every format, whole and streamed.
    for format in ["mp3", "opus", "aac", "flac", "wav", "pcm"] {
        for stream in [false, true] {
            let (_, bytes) = audio(
                url,
                &speech(json!({"response_format": format, "stream": stream, "seed": 3})),
            )
            .await;
            assert!(
                bytes.len() > 100,
                "{format} stream={stream}: {} bytes",
                bytes.len()
            );
        }
    }

    // No word timings: the timestamp routes and SSE words say so before any work.
    let error = openai_error(
        post(url, "/v1/audio/speech/timestamps", &speech(json!({}))).await,
        400,
    )
    .await;
    assert!(
        error["message"].as_str().unwrap().contains("word timings"),
        "{error}"
    );
    let error = openai_error(
        post_speech(
            url,
            &speech(json!({"stream_format": "sse", "timestamps": true})),
        )
        .await,
        400,
    )
    .await;
    assert!(
        error["message"].as_str().unwrap().contains("word timings"),
        "{error}"
    );
}

#[tokio::test]
async fn concurrent_requests_share_generations() {
    // One worker and a batch window: requests that come together are generated together.
    let server = server(&[
        "--no-cache",
        "--max-concurrent",
        "1",
        "--batch-timeout-ms",
        "300",
        "--batch-max-size",
        "8",
    ])
    .await;
    let url = server.url.clone();
    // Load the model first, so the requests meet in the queue rather than at the load.
    audio(&url, &speech(json!({"input": "Warm up."}))).await;
    let before = metric(
        &get_text(format!("{url}/metrics")).await,
        "omnivoice_batches_total",
    );
    let requests = 6;
    let handles: Vec<_> = (0..requests)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move {
                let body =
                    speech(json!({"input": format!("Sentence number {i} is here."), "seed": i}));
                audio(&url, &body).await.1
            })
        })
        .collect();
    let mut bodies = Vec::new();
    for h in handles {
        bodies.push(h.await.unwrap());
    }
    let after = metric(
        &get_text(format!("{url}/metrics")).await,
        "omnivoice_batches_total",
    );
    let batches = after - before;
    assert!(
        batches >= 1.0 && batches < requests as f64,
        "{requests} requests took {batches} batches"
    );
    // A request's audio does not depend on what it was batched with.
    let alone = audio(
        &url,
        &speech(json!({"input": "Sentence number 2 is here.", "seed": 2})),
    )
    .await
    .1;
    assert_eq!(alone, bodies[2]);
}

#[tokio::test]
async fn voices_generating_at_once_share_their_decoding_steps() {
    // Two workers and batches of one: each request is generated on its own worker, two at a
    // time, and two voices (which the batcher never puts in one batch) at once. Their
    // utterances are stepped together, one forward a step for both: fewer steps than each
    // batch taking its own 32, whenever two overlap at all.
    let server = server(&[
        "--no-cache",
        "--max-concurrent",
        "2",
        "--batch-max-size",
        "1",
    ])
    .await;
    let url = server.url.clone();
    audio(&url, &speech(json!({"input": "Warm up."}))).await;
    let counters = |text: String| {
        (
            metric(&text, "omnivoice_decoding_steps_total"),
            metric(&text, "omnivoice_batches_total"),
        )
    };
    let (steps_before, batches_before) = counters(get_text(format!("{url}/metrics")).await);
    let num_step = 32;
    let body = |i: usize| {
        let voice = if i.is_multiple_of(2) {
            "alloy"
        } else {
            "design:male, low pitch"
        };
        speech(json!({
            "voice": voice,
            "input": format!(
                "Request number {i} reads one sentence of a fair length, long enough that \
                 two of them at once are stepped together for most of their steps"
            ),
            "seed": i,
            "num_step": num_step,
        }))
    };
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (url, body) = (url.clone(), body(i));
            tokio::spawn(async move { audio(&url, &body).await.1 })
        })
        .collect();
    let mut bodies = Vec::new();
    for h in handles {
        bodies.push(h.await.unwrap());
    }
    let (steps_after, batches_after) = counters(get_text(format!("{url}/metrics")).await);
    let (steps, batches) = (steps_after - steps_before, batches_after - batches_before);
    assert!(
        batches >= 2.0,
        "two voices are two batches at least: {batches}"
    );
    assert!(
        steps < batches * f64::from(num_step),
        "{batches} batches took {steps} steps"
    );
    // What a request says does not depend on what it was stepped with.
    assert_eq!(audio(&url, &body(1)).await.1, bodies[1]);
}

#[tokio::test]
async fn a_client_that_hangs_up_stops_its_generation_between_two_steps() {
    // 64 steps of a long sentence (12 s at this checkpoint's 175 frames a second: 2,100
    // frames, a few hundred ms a step here) that the client gives up on after 1.5 s. The
    // scheduler drops it at the next step instead of computing the other steps for nobody.
    let server = server(&["--no-cache"]).await;
    let url = server.url.clone();
    audio(&url, &speech(json!({"input": "Warm up."}))).await;
    let counters = |text: String| {
        (
            metric(&text, "omnivoice_decoding_steps_total"),
            metric(
                &text,
                "omnivoice_rejected_total{reason=\"abandoned_mid_generation\"}",
            ),
        )
    };
    let (steps_before, dropped_before) = counters(get_text(format!("{url}/metrics")).await);
    let body = speech(json!({"input": "One long sentence.", "num_step": 64, "duration": 12}));
    let hung_up = reqwest::Client::new()
        .post(format!("{url}/v1/audio/speech"))
        .json(&body)
        .timeout(std::time::Duration::from_millis(1500))
        .send()
        .await;
    assert!(
        hung_up.is_err(),
        "the generation must outlast the client for this test"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (steps, dropped) = loop {
        let (steps, dropped) = counters(get_text(format!("{url}/metrics")).await);
        if dropped > dropped_before || std::time::Instant::now() > deadline {
            break (steps - steps_before, dropped - dropped_before);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        dropped, 1.0,
        "the abandoned utterance is dropped and counted"
    );
    assert!(
        (1.0..64.0).contains(&steps),
        "{steps} steps were taken of 64"
    );
    // The server goes on serving.
    audio(&url, &speech(json!({"input": "Still here."}))).await;
}

#[test]
fn selftest_runs_the_checks_and_refuses_noise() {
    // The fixture's random weights make noise: the self-test must get past loading, length
    // and loudness, and then refuse it as no speech.
    let output = common::server_command()
        .args(["selftest", "--omnivoice-dir", CHECKPOINT, "--num-step", "4"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("selftest failed: the audio does not sound like speech"),
        "{stderr}"
    );
    let missing = common::server_command()
        .args(["selftest", "--omnivoice-dir", "/nonexistent"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(
        stderr.contains("loading failed") && stderr.contains("/nonexistent"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_wrong_checkpoint_is_refused_at_startup_naming_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(CHECKPOINT);
    for file in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "audio_tokenizer/config.json",
        "audio_tokenizer/preprocessor_config.json",
        "audio_tokenizer/model.safetensors",
    ] {
        let to = dir.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root.join(file), to).unwrap();
    }
    // The weights without the final norm.
    let mut tensors =
        candle_core::safetensors::load(root.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    assert!(tensors.remove("llm.norm.weight").is_some());
    candle_core::safetensors::save(&tensors, dir.path().join("model.safetensors")).unwrap();
    let output = common::server_command()
        .args(["--port", "0", "--omnivoice-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("omnivoice-dir")
            && stderr.contains("model.safetensors")
            && stderr.contains("llm.norm.weight"),
        "{stderr}"
    );
}
