//! The HTTP contract of the real binary on a real port: OpenAI-shaped success and errors,
//! auth, health, metrics, graceful shutdown.

mod common;

use std::time::Duration;

use common::{get_json, get_text, metric, openai_error, post_speech, read_wav, Binary};
use serde_json::json;

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn speak(url: &str, body: serde_json::Value) -> reqwest::Response {
    post_speech(url, &body).await
}

#[tokio::test]
async fn espeak_speech_is_a_wav_whose_duration_grows_with_the_text() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let mut durations = Vec::new();
    for input in [
        "Hello.",
        "Hello there, this sentence is quite a bit longer than the first one.",
    ] {
        let response = speak(
            &server.url,
            json!({"model": "espeak", "voice": "en-us", "input": input, "response_format": "wav", "stream": false}),
        )
        .await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "audio/wav");
        let header_duration: f64 = response.headers()["x-audio-duration-s"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(response.headers().contains_key("x-synthesis-latency-s"));
        assert!(response.headers().contains_key("x-request-id"));
        assert!(!response.headers().contains_key("x-no-speech-detected"));
        let (rate, samples) = read_wav(&response.bytes().await.unwrap());
        assert_eq!(rate, 22050);
        let duration = samples.len() as f64 / rate as f64;
        assert!(
            (duration - header_duration).abs() < 0.01,
            "{duration} vs header {header_duration}"
        );
        let peak = samples.iter().map(|s| s.unsigned_abs()).max().unwrap();
        assert!(peak > 1000, "audible, peak {peak}");
        durations.push(duration);
    }
    assert!(durations[1] > 2.0 * durations[0], "{durations:?}");
}

#[tokio::test]
async fn bad_requests_get_openai_shaped_4xx_errors() {
    let server = Binary::ready(&["--max-input-chars", "50", "--preload", "espeak/en-us"]).await;
    let url = format!("{}/v1/audio/speech", server.url);
    let ok = json!({"model": "espeak", "voice": "en-us", "input": "hi"});
    let with = |key: &str, value: serde_json::Value| {
        let mut body = ok.clone();
        body[key] = value;
        body
    };
    let without = |key: &str| {
        let mut body = ok.clone();
        body.as_object_mut().unwrap().remove(key);
        body
    };

    let malformed = client()
        .post(&url)
        .header("content-type", "application/json")
        .body("{\"model\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(openai_error(malformed, 400).await["code"], "invalid_json");

    let wrong_type = client()
        .post(&url)
        .header("content-type", "text/plain")
        .body(ok.to_string())
        .send()
        .await
        .unwrap();
    openai_error(wrong_type, 415).await;

    let error = openai_error(speak(&server.url, without("input")).await, 400).await;
    assert_eq!(error["param"], "input", "{error}");
    // `model` and `voice` may be left out, as the Python omnivoice-server allows: the default
    // engine, and `alloy` (its default voice here).
    let default_voice = speak(&server.url, without("voice")).await;
    assert_eq!(default_voice.status(), 200);
    let mut no_model = without("model");
    no_model["voice"] = json!("alloy");
    let default_engine = speak(&server.url, no_model).await;
    assert_eq!(default_engine.status(), 200);
    // A `speaker` that names another voice than `voice` is refused, naming `speaker`.
    let both = with("speaker", json!("nobody"));
    assert_eq!(
        openai_error(speak(&server.url, both).await, 400).await["param"],
        "speaker"
    );
    let cases = [
        (with("speed", json!("fast")), "speed"),
        (with("speed", json!(0.1)), "speed"),
        (with("speed", json!(4.5)), "speed"),
        (with("input", json!("   ")), "input"),
        (with("input", json!("x".repeat(51))), "input"),
        (with("voice", json!("nobody")), "voice"),
        (with("model", json!("tts-9")), "model"),
        (with("response_format", json!("ogg")), "response_format"),
        (with("stream_format", json!("websocket")), "stream_format"),
        (with("input", json!(42)), "input"),
    ];
    for (body, param) in cases {
        let error = openai_error(speak(&server.url, body.clone()).await, 400).await;
        assert_eq!(error["param"], param, "{body} → {error}");
    }
    // Exactly at the limit is fine.
    let at_limit = speak(&server.url, with("input", json!("a".repeat(50)))).await;
    assert_eq!(at_limit.status(), 200);

    let huge = json!({"model": "espeak", "voice": "en-us", "input": "x".repeat(2 * 1024 * 1024)});
    let too_large = client().post(&url).json(&huge).send().await.unwrap();
    openai_error(too_large, 413).await;

    let unknown_route = client()
        .get(format!("{}/v1/nothing", server.url))
        .send()
        .await
        .unwrap();
    openai_error(unknown_route, 404).await;
    let wrong_method = client().get(&url).send().await.unwrap();
    openai_error(wrong_method, 405).await;
    let unknown_model = client()
        .get(format!("{}/v1/models/nope", server.url))
        .send()
        .await
        .unwrap();
    openai_error(unknown_model, 404).await;
}

#[tokio::test]
async fn models_and_voices_are_listed_in_openai_shape() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let models: serde_json::Value = get_json(format!("{}/v1/models", server.url)).await;
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    for id in ["piper", "espeak", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let model: serde_json::Value = get_json(format!("{}/v1/models/tts-1", server.url)).await;
    assert_eq!(model["object"], "model");
    assert_eq!(model["id"], "tts-1");

    let voices: serde_json::Value = get_json(format!("{}/v1/audio/voices", server.url)).await;
    let voices = voices["voices"].as_array().unwrap();
    let en_us = voices
        .iter()
        .find(|v| v["id"] == "en-us" && v["engine"] == "espeak")
        .expect("espeak en-us");
    assert_eq!(en_us["sample_rate"], 22050);
    assert!(en_us["language"].is_string());
    assert!(voices
        .iter()
        .any(|v| v["id"] == "en_US-joe-medium" && v["engine"] == "piper"));
}

#[tokio::test]
async fn api_keys_guard_v1_but_not_health_or_metrics() {
    let server = Binary::ready(&[
        "--api-key",
        "k1",
        "--api-key",
        "k2",
        "--preload",
        "espeak/en-us",
    ])
    .await;
    let models = format!("{}/v1/models", server.url);
    let none = client().get(&models).send().await.unwrap();
    assert_eq!(openai_error(none, 401).await["code"], "invalid_api_key");
    let wrong = client()
        .get(&models)
        .bearer_auth("k3")
        .send()
        .await
        .unwrap();
    openai_error(wrong, 401).await;
    assert_eq!(
        client()
            .get(&models)
            .bearer_auth("k2")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let speech = client()
        .post(format!("{}/v1/audio/speech", server.url))
        .json(&json!({"model": "espeak", "voice": "en-us", "input": "hi"}))
        .send()
        .await
        .unwrap();
    openai_error(speech, 401).await;
    assert_eq!(
        client()
            .get(format!("{}/health", server.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        client()
            .get(format!("{}/metrics", server.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    let open = Binary::ready(&["--preload", "espeak/en-us"]).await;
    assert_eq!(
        client()
            .get(format!("{}/v1/models", open.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn cors_allows_configured_origins() {
    let server = Binary::ready(&[
        "--cors-origins",
        "http://app.example",
        "--preload",
        "espeak/en-us",
    ])
    .await;
    let response = client()
        .get(format!("{}/v1/models", server.url))
        .header("origin", "http://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        "http://app.example"
    );
    let other = client()
        .get(format!("{}/v1/models", server.url))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert!(!other.headers().contains_key("access-control-allow-origin"));
}

#[tokio::test]
async fn metrics_count_requests_and_pass_promtool() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    for _ in 0..3 {
        let r = speak(
            &server.url,
            json!({"model": "espeak", "voice": "en-us", "input": "count me", "stream": false}),
        )
        .await;
        assert_eq!(r.status(), 200);
    }
    let r = speak(&server.url, json!({"model": "espeak", "voice": "en-us"})).await;
    assert_eq!(r.status(), 400);
    let text = get_text(format!("{}/metrics", server.url)).await;
    let ok = metric(
        &text,
        r#"omnivoice_requests_total{protocol="http",route="/v1/audio/speech",status="200"}"#,
    );
    let bad = metric(
        &text,
        r#"omnivoice_requests_total{protocol="http",route="/v1/audio/speech",status="400"}"#,
    );
    assert_eq!((ok, bad), (3.0, 1.0), "{text}");
    for name in [
        "omnivoice_request_duration_seconds_bucket",
        "omnivoice_inference_seconds_bucket",
        "omnivoice_audio_seconds_total",
        "omnivoice_batch_size_bucket",
        "omnivoice_queue_wait_seconds_bucket",
    ] {
        assert!(text.contains(name), "{name} missing from {text}");
    }

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &text).unwrap();
    let output = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(file.path()).unwrap())
        .output()
        .expect("promtool is installed (see .ci/run)");
    let problems = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && problems.trim().is_empty(),
        "promtool found problems: {problems}"
    );
}

#[test]
fn invalid_settings_exit_2_with_one_line_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let bad_toml = dir.path().join("bad.toml");
    std::fs::write(&bad_toml, "colour = \"blue\"\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--port", "99999"], "port"),
        (vec!["--device", "tpu"], "device"),
        (vec!["--config", "/does/not/exist.toml"], "config"),
        (vec!["--config", bad_toml.to_str().unwrap()], "colour"),
        (vec!["--default-engine", "nope"], "default-engine"),
        // A typo in a voice name must not turn into a server speaking with another voice.
        (vec!["--default-voice", "en_US-nobody"], "default-voice"),
        (
            vec!["--default-engine", "espeak", "--default-voice", "klingon"],
            "default-voice",
        ),
    ];
    for (args, needle) in cases {
        let output = common::server_command().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    }
}

/// Flag > environment > file, seen through the one setting whose rejection quotes its value: each
/// layer gives a different bad log filter, and the error names the one that won.
#[test]
fn flag_beats_environment_beats_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.toml");
    std::fs::write(&file, "log_level = \"from_file=nonsense\"\n").unwrap();
    let config = file.to_str().unwrap();
    let cases: [(&[&str], Option<&str>, &str); 3] = [
        (
            &["--log-level", "from_flag=nonsense"],
            Some("from_env=nonsense"),
            "from_flag",
        ),
        (&[], Some("from_env=nonsense"), "from_env"),
        (&[], None, "from_file"),
    ];
    for (flags, env, winner) in cases {
        let mut command = common::server_command();
        command.args(["--config", config]).args(flags);
        if let Some(value) = env {
            command.env("OMNIVOICE_LOG_LEVEL", value);
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?} {env:?}: {stderr}");
        assert!(
            stderr.contains("log-level") && stderr.contains(winner),
            "{winner} should win: {stderr}"
        );
    }
}

/// An off flag beats its setting's variable (flag > environment), as /health reports.
#[tokio::test]
async fn off_flags_beat_the_environment() {
    use std::io::BufRead;
    let mut child = common::server_command()
        .args(["--port", "0", "--log-level", "warn", "--preload", "none"])
        .args(["--no-batch", "--no-cache"])
        .env("OMNIVOICE_BATCH_ENABLED", "true")
        .env("OMNIVOICE_CACHE_ENABLED", "true")
        .env("OMNIVOICE_MAX_CONCURRENT", "3")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().strip_prefix("omnivoice-server listening on ");
    let health = match url {
        // The settings are in the body once startup is over ("starting" has none yet).
        Some(url) => {
            let mut health = get_json(format!("{url}/health")).await;
            for _ in 0..200 {
                if health["status"] != "starting" {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                health = get_json(format!("{url}/health")).await;
            }
            Some(health)
        }
        None => None,
    };
    let _ = child.kill();
    let _ = child.wait();
    let health = health.unwrap_or_else(|| panic!("the server did not start: {line:?}"));
    assert_eq!(health["batch"]["settings"]["enabled"], false, "{health}");
    assert_eq!(health["cache"]["settings"]["enabled"], false, "{health}");
    assert_eq!(
        health["batch"]["workers"], 3,
        "the variables were read: {health}"
    );
}

#[tokio::test]
async fn sigterm_finishes_the_in_flight_request_then_exits_0() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let input = "This is a rather long request that keeps the engine busy for a while. ".repeat(55);
    let url = server.url.clone();
    // The body is read inside the task: the server can only finish (and exit) once the client
    // has taken the whole body.
    let request = tokio::spawn(async move {
        let body = json!({"model": "espeak", "voice": "en-us", "input": input, "response_format": "wav", "stream": false});
        let response = speak(&url, body).await;
        (response.status(), response.bytes().await.unwrap())
    });
    // The signal comes once the pipeline has taken the request: speaking its text takes far
    // longer than the steps up to the signal.
    let admitted = async {
        loop {
            let health = get_json(format!("{}/health", server.url)).await;
            if health["batch"]["requests_in_progress"] == 1 || request.is_finished() {
                break;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), admitted)
        .await
        .expect("the request reaches the pipeline");
    assert!(
        !request.is_finished(),
        "the request must still be in flight when the signal arrives"
    );
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    let (status_code, body) = request.await.unwrap();
    assert_eq!(status_code, 200);
    let (_, samples) = read_wav(&body);
    assert!(samples.len() > 22050 * 10, "the whole long text was spoken");
    assert_eq!(status.code(), Some(0));
}

/// `X-No-Speech-Detected: true` when the audio is a drone, not a voice: on a whole body, again
/// when it comes from the cache, and when the cached body was a stream's. Real speech never
/// carries it (above, and every engine's hostile inputs in tests/bounded_work.rs); no real
/// engine drones on demand, so the fake voice hums here.
#[tokio::test]
async fn a_drone_is_reported_on_whole_bodies_and_from_the_cache() {
    use common::fake::FakeEngine;
    let engine = FakeEngine::new("fake", &["fake-voice"]).shared();
    let server = common::InProcess::start(
        &["--default-engine", "fake", "--default-voice", "fake-voice"],
        vec![engine],
    )
    .await;
    let ask = |input: &'static str, stream: bool| {
        let url = server.url.clone();
        async move {
            let body = json!({"input": input, "response_format": "wav", "stream": stream});
            let response = speak(&url, body).await;
            assert_eq!(response.status(), 200);
            let headers = response.headers().clone();
            response.bytes().await.unwrap();
            (
                headers
                    .get("x-no-speech-detected")
                    .map(|v| v.to_str().unwrap().to_string()),
                headers["x-cache"].to_str().unwrap().to_string(),
            )
        }
    };
    assert_eq!(
        ask("A DRONE.", false).await,
        (Some("true".into()), "MISS".into())
    );
    assert_eq!(
        ask("A DRONE.", false).await,
        (Some("true".into()), "HIT".into())
    );
    // Streamed: no header (it goes before the audio), but the cached body keeps the verdict.
    assert_eq!(ask("Another DRONE.", true).await.0, None);
    assert_eq!(
        ask("Another DRONE.", false).await,
        (Some("true".into()), "HIT".into())
    );
    // Too short to judge.
    assert_eq!(ask("Short.", false).await.0, None);
}
