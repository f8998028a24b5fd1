//! The model registry: names → engines and voices, single-flight loads, residency limits,
//! safe switching under running requests, and rescans. Fake engines make load counts and
//! lifetimes observable; the real Piper voice checks loads, reloads and memory.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::fake::FakeEngine;
use common::{get_json, get_text, metric, openai_error, post_speech, Binary, InProcess};
use omnivoice_server::engine::Engine;
use serde_json::{json, Value};

/// Flags shared by the fake-engine tests: alpha's a1 by default, nothing preloaded, no cache.
fn fake_server_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--default-engine",
        "alpha",
        "--default-voice",
        "a1",
        "--preload",
        "none",
        "--no-cache",
    ];
    args.extend_from_slice(extra);
    args
}

fn as_engines(list: &[&Arc<FakeEngine>]) -> Vec<Arc<dyn Engine>> {
    list.iter()
        .map(|e| (*e).clone() as Arc<dyn Engine>)
        .collect()
}

async fn speak(url: &str, model: &str, voice: &str, input: &str) -> reqwest::Response {
    let body = json!({"model": model, "voice": voice, "input": input, "response_format": "wav", "stream": false});
    post_speech(url, &body).await
}

async fn health(url: &str) -> Value {
    get_json(format!("{url}/health")).await
}

/// Waits until `happened` says the awaited event took place (looked at every 10 ms); fails
/// naming `what` if it has not after 30 s, far beyond any wait these tests expect.
async fn until(what: &str, happened: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !happened() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn aliases_resolve_and_unknown_names_list_the_valid_ones() {
    let alpha = FakeEngine::new("alpha", &["a1", "a2"]).shared();
    let beta = FakeEngine::new("beta", &["b1"]).shared();
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "[models.aliases]\nmy-model = \"beta\"\n[voices.aliases]\nalloy = \"a2\"\nnarrator = \"b1\"\n",
    )
    .unwrap();
    let args = fake_server_args(&["--config", config.path().to_str().unwrap()]);
    let server = InProcess::start(&args, as_engines(&[&alpha, &beta])).await;

    assert_eq!(
        speak(&server.url, "tts-1", "alloy", "hi").await.status(),
        200
    );
    assert!(
        alpha.alive("a2") && !alpha.alive("a1"),
        "alloy is configured as a2"
    );
    assert_eq!(
        speak(&server.url, "gpt-4o-mini-tts", "nova", "hi")
            .await
            .status(),
        200
    );
    assert!(
        alpha.alive("a1"),
        "unconfigured OpenAI voices mean the default voice"
    );
    assert_eq!(
        speak(&server.url, "my-model", "narrator", "hi")
            .await
            .status(),
        200
    );
    assert!(beta.alive("b1"));

    let error = openai_error(speak(&server.url, "nope", "a1", "hi").await, 400).await;
    assert_eq!(error["param"], "model");
    assert!(
        error["message"].as_str().unwrap().contains("alpha, beta"),
        "{error}"
    );
    let error = openai_error(speak(&server.url, "alpha", "zz", "hi").await, 400).await;
    assert_eq!(error["param"], "voice");
    assert!(error["message"].as_str().unwrap().contains("a1"), "{error}");
    for hostile in ["../a1", "/etc/passwd", "a1/../../x", "a1:7"] {
        openai_error(speak(&server.url, "alpha", hostile, "hi").await, 400).await;
    }

    let models: Value = get_json(format!("{}/v1/models", server.url)).await;
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"my-model") && ids.contains(&"tts-1-hd"),
        "{ids:?}"
    );
    let voices: Value = get_json(format!("{}/v1/audio/voices", server.url)).await;
    let a2 = voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == "a2")
        .unwrap()
        .clone();
    assert_eq!(a2["aliases"], json!(["alloy"]));
    assert_eq!(a2["loaded"], true);
    let a1 = voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == "a1")
        .unwrap()
        .clone();
    assert!(a1["aliases"].as_array().unwrap().contains(&json!("nova")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_requests_load_a_voice_once() {
    let alpha = FakeEngine::new("alpha", &["a1"])
        .load_delay_ms(500)
        .shared();
    let args = fake_server_args(&[]);
    let server = InProcess::start(&args, as_engines(&[&alpha])).await;
    let requests = (0..8).map(|i| {
        speak(
            &server.url,
            "alpha",
            "a1",
            if i % 2 == 0 { "even" } else { "odd" },
        )
    });
    for response in futures::future::join_all(requests).await {
        assert_eq!(response.status(), 200);
    }
    assert_eq!(alpha.loads(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_least_recently_used_voice_goes_at_the_limit() {
    let alpha = FakeEngine::new("alpha", &["a1", "a2", "a3"]).shared();
    let args = fake_server_args(&["--max-loaded-voices", "2"]);
    let server = InProcess::start(&args, as_engines(&[&alpha])).await;
    for voice in ["a1", "a2", "a1", "a3"] {
        assert_eq!(speak(&server.url, "alpha", voice, "hi").await.status(), 200);
    }
    let loaded = health(&server.url).await["voices_loaded"].clone();
    assert_eq!(
        loaded,
        json!(["alpha/a1", "alpha/a3"]),
        "a2 was least recently used"
    );
    assert!(!alpha.alive("a2"), "its memory is gone");
    assert_eq!(alpha.loads(), 3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switching_engines_under_a_running_request_does_not_fail_it() {
    let alpha = FakeEngine::new("alpha", &["a1"]).shared();
    let beta = FakeEngine::new("beta", &["b1"]).shared();
    let args = fake_server_args(&["--single-engine-resident"]);
    let server = InProcess::start(&args, as_engines(&[&alpha, &beta])).await;
    let url = server.url.clone();
    let long =
        tokio::spawn(async move { speak(&url, "alpha", "a1", "SLOW and long").await.status() });
    until("the long request is computing", || {
        !alpha.batches().is_empty()
    })
    .await;
    assert_eq!(
        speak(&server.url, "beta", "b1", "switch").await.status(),
        200
    );
    assert_eq!(
        health(&server.url).await["voices_loaded"],
        json!(["beta/b1"])
    );
    assert!(
        alpha.alive("a1"),
        "the running request still holds its voice"
    );
    assert_eq!(
        long.await.unwrap(),
        200,
        "the running request finished normally"
    );
    // The worker drops its reference right after answering.
    until("released once its last user finished", || {
        !alpha.alive("a1")
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_voices_are_released() {
    let alpha = FakeEngine::new("alpha", &["a1"]).shared();
    let args = fake_server_args(&["--idle-unload-s", "1"]);
    let server = InProcess::start(&args, as_engines(&[&alpha])).await;
    assert_eq!(speak(&server.url, "alpha", "a1", "hi").await.status(), 200);
    assert!(alpha.alive("a1"));
    // When exactly is the registry's unit test's to check, on a paused clock; here the
    // server's sweeper must do it at all.
    until("the idle voice is released", || !alpha.alive("a1")).await;
    assert_eq!(health(&server.url).await["voices_loaded"], json!([]));
    server.stop().await;
}

/// A voices directory holding the default voice under several names (hard links: no copies).
fn voices_dir(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    for name in names {
        link_voice(dir.path(), name);
    }
    dir
}

fn link_voice(dir: &std::path::Path, name: &str) {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("voices");
    for ext in ["onnx", "onnx.json"] {
        let from = source.join(format!("en_US-joe-medium.{ext}"));
        let to = dir.join(format!("{name}.{ext}"));
        std::fs::hard_link(&from, &to)
            .or_else(|_| std::fs::copy(&from, &to).map(|_| ()))
            .unwrap();
    }
}

fn piper_ids(voices: &Value) -> Vec<String> {
    voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["engine"] == "piper")
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn real_voice_loads_once_and_rescans_add_and_remove_voices() {
    let dir = voices_dir(&["first"]);
    let server = Binary::ready(&[
        "--voices-dir",
        dir.path().to_str().unwrap(),
        "--default-voice",
        "first",
        "--preload",
        "none",
        "--no-cache",
    ])
    .await;
    let url = server.url.clone();
    let requests = (0..4).map(|i| {
        let url = url.clone();
        async move {
            speak(
                &url,
                "piper",
                "first",
                &format!("Load me once, number {i}."),
            )
            .await
            .status()
        }
    });
    assert!(futures::future::join_all(requests)
        .await
        .iter()
        .all(|s| *s == 200));
    let text = get_text(format!("{url}/metrics")).await;
    assert_eq!(
        metric(
            &text,
            r#"omnivoice_voice_loads_total{engine="piper",voice="first"}"#
        ),
        1.0,
        "{text}"
    );

    link_voice(dir.path(), "second");
    let client = reqwest::Client::new();
    let reload: Value = client
        .post(format!("{url}/v1/voices/reload"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reload["reloaded"], true);
    let voices: Value = get_json(format!("{url}/v1/audio/voices")).await;
    assert_eq!(piper_ids(&voices), vec!["first", "second"]);
    assert_eq!(
        speak(&url, "piper", "second", "A new voice.")
            .await
            .status(),
        200
    );

    // SIGHUP does the same: a removed voice stops being offered.
    for ext in ["onnx", "onnx.json"] {
        std::fs::remove_file(dir.path().join(format!("second.{ext}"))).unwrap();
    }
    let pid = server.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let mut offered = Vec::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let voices: Value = get_json(format!("{url}/v1/audio/voices")).await;
        offered = piper_ids(&voices);
        if offered == vec!["first"] {
            break;
        }
    }
    assert_eq!(offered, vec!["first"]);
    openai_error(speak(&url, "piper", "second", "Gone.").await, 400).await;
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn memory_stays_bounded_across_alternating_voices() {
    let names = ["v1", "v2", "v3"];
    let dir = voices_dir(&names);
    let server = Binary::ready(&[
        "--voices-dir",
        dir.path().to_str().unwrap(),
        "--default-voice",
        "v1",
        "--preload",
        "none",
        "--no-cache",
        "--max-loaded-voices",
        "1",
    ])
    .await;
    let pid = server.child.id();
    let mut samples = Vec::new();
    for i in 0..50 {
        let voice = names[i % names.len()];
        assert_eq!(
            speak(&server.url, "piper", voice, "Short.").await.status(),
            200
        );
        samples.push(rss_kib(pid));
    }
    let text = get_text(format!("{}/metrics", server.url)).await;
    assert!(
        metric(
            &text,
            "omnivoice_voice_unloads_total{engine=\"piper\",voice=\"v1\"}"
        ) >= 10.0,
        "voices were cycled"
    );
    assert_eq!(
        health(&server.url).await["voices_loaded"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // With at most one voice resident, RSS may hold the resident voice plus one being loaded
    // (~63 MB each) above where it stood after the first switches. The allocator's arenas make
    // one-time steps within that (seen: a single +57 MB step, then flat); a leak of a voice per
    // switch would exceed it within three switches of the 30 here.
    assert!(
        samples.iter().all(|&s| s <= samples[5] + 2 * 64 * 1024),
        "RSS beyond two voices above {} KiB: {samples:?}",
        samples[5]
    );
}

#[tokio::test]
async fn convert_voice_writes_safetensors_that_load_and_sound_the_same() {
    let dir = voices_dir(&["plain", "converted"]);
    let onnx = dir.path().join("converted.onnx");
    let out = dir.path().join("converted.safetensors");
    let status = common::server_command()
        .arg("convert-voice")
        .arg(&onnx)
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        std::fs::metadata(&out).unwrap().len() > 10_000_000,
        "the weights were written"
    );
    let missing = common::server_command()
        .args([
            "convert-voice",
            "/nonexistent/x.onnx",
            "/tmp/never.safetensors",
        ])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/x.onnx"));

    let server = Binary::ready(&[
        "--voices-dir",
        dir.path().to_str().unwrap(),
        "--default-voice",
        "plain",
        "--preload",
        "none",
        "--no-cache",
    ])
    .await;
    let mut audio = Vec::new();
    for voice in ["plain", "converted"] {
        let body = json!({"model": "piper", "voice": voice, "input": "Same weights, same voice.",
                          "response_format": "wav", "seed": 9, "stream": false});
        let response = reqwest::Client::new()
            .post(format!("{}/v1/audio/speech", server.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        audio.push(response.bytes().await.unwrap());
    }
    assert_eq!(
        audio[0], audio[1],
        "safetensors and ONNX give identical audio"
    );
}

fn settings_from(args: &[&str]) -> omnivoice_server::config::Settings {
    let mut argv = vec!["omnivoice-server"];
    argv.extend_from_slice(args);
    let cli = omnivoice_server::config::Cli::try_parse_args_only(argv).unwrap();
    omnivoice_server::config::Settings::resolve(&cli.serve).unwrap()
}

#[tokio::test]
async fn names_that_point_nowhere_are_startup_errors_naming_the_setting() {
    let engines = || as_engines(&[&FakeEngine::new("alpha", &["a1", "a2"]).shared()]);
    // Never written: opening a store makes no directory.
    let profiles = || {
        let dir = std::env::temp_dir().join("omnivoice-registry-test-profiles");
        std::sync::Arc::new(omnivoice_server::profiles::ProfileStore::open(dir).unwrap())
    };
    let voice_files = || {
        let dir = std::env::temp_dir().join("omnivoice-registry-test-voice-files");
        std::sync::Arc::new(omnivoice_server::profiles::voice_files::VoiceFiles::new(
            dir,
        ))
    };
    let build = |settings| {
        omnivoice_server::server::build(
            settings,
            engines(),
            profiles(),
            voice_files(),
            "cpu".into(),
        )
    };
    let config = tempfile::NamedTempFile::new().unwrap();
    let cases = [
        ("[voices.aliases]\nalloy = \"a9\"\n", "voices.aliases.alloy"),
        (
            "[models.aliases]\nmine = \"omega\"\n",
            "models.aliases.mine",
        ),
    ];
    for (toml, setting) in cases {
        std::fs::write(config.path(), toml).unwrap();
        let args = fake_server_args(&["--config", config.path().to_str().unwrap()]);
        let message = build(settings_from(&args)).err().expect("a startup error");
        assert!(message.to_string().contains(setting), "{toml}: {message}");
    }
    // An alias to an existing voice with a speaker suffix is fine at startup.
    std::fs::write(config.path(), "[voices.aliases]\nnarrator = \"a2:0\"\n").unwrap();
    let args = fake_server_args(&["--config", config.path().to_str().unwrap()]);
    assert!(build(settings_from(&args)).is_ok());

    let typo = ["--default-engine", "alpha", "--default-voice", "a3"];
    let message = build(settings_from(&typo)).err().expect("a startup error");
    let message = message.to_string();
    assert!(
        message.contains("default-voice") && message.contains("a1"),
        "{message}"
    );
}
