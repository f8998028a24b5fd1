//! Multi-speaker scripts (`POST /v1/audio/script`) over real HTTP with real engines: Piper,
//! Kokoro and the small OmniVoice checkpoint in one script, single and multi track, where
//! the pauses sit and how long they are, skip and abort, every limit, and several scripts at
//! once. Only the timing tests (a full script cap, a client that goes away) use an engine of
//! their own, held on a channel, so that "still reading" is a fact and not a race.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{openai_error, post, read_wav, Binary, InProcess};
use omnivoice_server::engine::{Engine, EngineError, Pcm, SynthesisItem, Voice, VoiceInfo};
use serde_json::{json, Value};

const OMNIVOICE: &str = "crates/models/tests/fixtures/omnivoice/e2e";
const PIPER: &str = "en_US-joe-medium";

async fn script(url: &str, body: &Value) -> reqwest::Response {
    post(url, "/v1/audio/script", body).await
}

async fn ok(url: &str, body: &Value) -> (reqwest::header::HeaderMap, Vec<u8>) {
    let response = script(url, body).await;
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.unwrap().to_vec();
    assert_eq!(status, 200, "{body}: {}", String::from_utf8_lossy(&bytes));
    (headers, bytes)
}

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    headers[name].to_str().unwrap()
}

/// Piper, Kokoro and OmniVoice in one script; the host speaks twice in a row (no pause
/// between), the speaker changes three times (a pause each).
fn three_engines(output_format: &str) -> Value {
    json!({
        "model": "piper",
        "script": [
            {"speaker": "host", "text": "Welcome to the show.", "voice": PIPER},
            {"speaker": "guest", "text": "Thanks.", "voice": "omnivoice/alloy"},
            {"speaker": "narrator", "text": "They talk.", "voice": "af_heart"},
            {"speaker": "host", "text": "Let us begin."},
            {"speaker": "host", "text": "First question.", "voice": "ignored-after-the-first"}
        ],
        "pause_between_speakers": 0.3,
        "response_format": "wav",
        "output_format": output_format,
        "seed": 7
    })
}

fn samples_of_b64_wav(b64: &str) -> (u32, Vec<i16>) {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    read_wav(&bytes)
}

#[tokio::test]
async fn a_script_of_three_engines_as_one_track_and_as_tracks() {
    common::kokoro_dir();
    let server = Binary::ready(&[
        "--kokoro-dir",
        "voices/kokoro",
        "--default-engine",
        "piper",
        "--omnivoice-dir",
        OMNIVOICE,
        "--preload",
        "none",
        "--no-cache",
    ])
    .await;
    let url = server.url.as_str();

    let (headers, json_bytes) = ok(url, &three_engines("multi_track")).await;
    assert!(header(&headers, "content-type").starts_with("application/json"));
    let answer: Value = serde_json::from_slice(&json_bytes).unwrap();
    let metadata = &answer["metadata"];
    // Piper speaks at 22.05 kHz, the others at 24 kHz: all at the highest.
    let rate = metadata["sample_rate"].as_u64().unwrap() as usize;
    assert_eq!(rate, 24_000);
    assert_eq!(metadata["segment_count"], 5);
    assert_eq!(metadata["speakers_unique"], 3);
    assert_eq!(metadata["skipped_segments"], json!([]));
    assert_eq!(header(&headers, "x-segment-count"), "5");
    assert_eq!(header(&headers, "x-speakers-unique"), "3");
    assert_eq!(header(&headers, "x-skipped-segments"), "");
    let segments = metadata["segments"].as_array().unwrap();
    let at = |i: usize, key: &str| segments[i][key].as_u64().unwrap() as usize;
    let pause = 7_200; // 0.3 s at 24 kHz
    assert_eq!(segments.len(), 5);
    for (i, segment) in segments.iter().enumerate() {
        assert_eq!(segment["index"], i);
        let seconds = segment["offset_s"].as_f64().unwrap();
        // Microseconds: finer than a sample.
        assert!((seconds * rate as f64 - at(i, "offset_samples") as f64).abs() < 0.05);
        assert!(at(i, "duration_samples") > rate / 20, "segment {i} speaks");
    }
    let end = |i: usize| at(i, "offset_samples") + at(i, "duration_samples");
    assert_eq!(at(0, "offset_samples"), 0);
    assert_eq!(at(1, "offset_samples"), end(0) + pause, "host → guest");
    assert_eq!(at(2, "offset_samples"), end(1) + pause, "guest → narrator");
    assert_eq!(at(3, "offset_samples"), end(2) + pause, "narrator → host");
    assert_eq!(at(4, "offset_samples"), end(3), "host → host: no pause");
    let total = end(4);
    assert!(
        (metadata["total_duration_s"].as_f64().unwrap() - total as f64 / rate as f64).abs() < 1e-5
    );

    // Every track lasts the whole script and is silent (exactly) outside its speaker's lines.
    let tracks = answer["tracks"].as_object().unwrap();
    assert_eq!(tracks.len(), 3);
    let mut mixed = vec![0i32; total];
    for (speaker, b64) in tracks {
        let (track_rate, samples) = samples_of_b64_wav(b64.as_str().unwrap());
        assert_eq!(track_rate as usize, rate);
        assert_eq!(samples.len(), total, "{speaker}'s track");
        let mut own = vec![false; total];
        for s in segments.iter().filter(|s| s["speaker"] == *speaker) {
            let from = s["offset_samples"].as_u64().unwrap() as usize;
            let to = from + s["duration_samples"].as_u64().unwrap() as usize;
            own[from..to].iter_mut().for_each(|o| *o = true);
            assert!(
                samples[from..to].iter().any(|&v| v != 0),
                "{speaker} speaks"
            );
        }
        for (i, &v) in samples.iter().enumerate() {
            assert!(own[i] || v == 0, "{speaker} is heard at {i}");
            mixed[i] += i32::from(v);
        }
    }

    // One track: the same lines at the same places, silence where the speaker changes.
    let (headers, wav) = ok(url, &three_engines("single_track")).await;
    assert_eq!(header(&headers, "content-type"), "audio/wav");
    assert_eq!(header(&headers, "x-audio-sample-rate"), "24000");
    assert_eq!(header(&headers, "x-segment-count"), "5");
    assert!(headers.contains_key("x-synthesis-latency-s"));
    let (single_rate, single) = read_wav(&wav);
    assert_eq!(single_rate as usize, rate);
    assert_eq!(single.len(), total, "same layout as the tracks");
    let duration: f64 = header(&headers, "x-audio-duration-s").parse().unwrap();
    assert!((duration - total as f64 / rate as f64).abs() < 1e-3);
    for i in 0..3 {
        let gap = &single[end(i)..end(i) + pause];
        assert!(gap.iter().all(|&v| v == 0), "the pause after segment {i}");
    }
    // Seeded, so the same audio as the tracks together.
    let same = single
        .iter()
        .zip(&mixed)
        .filter(|(&a, &b)| i32::from(a) == b)
        .count();
    assert_eq!(same, total, "the single track is the tracks summed");
}

/// A Piper-only server: fast, for the rules.
async fn piper_server(extra: &[&str]) -> Binary {
    let mut args = vec!["--preload", "none"];
    args.extend_from_slice(extra);
    Binary::ready(&args).await
}

fn with_bad_voice(on_error: &str) -> Value {
    json!({
        "model": "piper",
        "script": [
            {"speaker": "a", "text": "One.", "voice": PIPER},
            {"speaker": "b", "text": "Two.", "voice": "klingon"},
            {"speaker": "a", "text": "Three."},
            {"speaker": "b", "text": "Four."}
        ],
        "on_error": on_error,
        "output_format": "multi_track"
    })
}

#[tokio::test]
async fn a_bad_segment_aborts_the_script_or_is_skipped_and_listed() {
    let server = piper_server(&[]).await;
    let url = server.url.as_str();

    let error = openai_error(script(url, &with_bad_voice("abort")).await, 400).await;
    assert_eq!(error["param"], "script[1].voice");
    assert_eq!(error["code"], "voice_not_found");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("Segment 1 failed"),
        "{error}"
    );

    let (headers, body) = ok(url, &with_bad_voice("skip")).await;
    assert_eq!(header(&headers, "x-skipped-segments"), "1,3");
    assert_eq!(header(&headers, "x-segment-count"), "2");
    let answer: Value = serde_json::from_slice(&body).unwrap();
    let metadata = &answer["metadata"];
    assert_eq!(metadata["skipped_segments"], json!([1, 3]));
    assert_eq!(metadata["skipped_errors"][0]["param"], "script[1].voice");
    let indices: Vec<u64> = metadata["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [0, 2]);
    // Both lines left are a's: no pause between them.
    let segments = &metadata["segments"];
    assert_eq!(
        segments[1]["offset_samples"],
        segments[0]["duration_samples"]
    );
    assert_eq!(answer["tracks"].as_object().unwrap().len(), 1);

    // Text the voice cannot say (a symbol Piper's voice lacks, given as SSML phonemes).
    let unsayable = json!({
        "model": "piper",
        "script": [
            {"speaker": "a", "text": "Fine.", "voice": PIPER},
            {"speaker": "a", "text": "<speak>Say <phoneme alphabet=\"ipa\" ph=\"☃\">this</phoneme>.</speak>"}
        ],
        "on_error": "abort"
    });
    let error = openai_error(script(url, &unsayable).await, 400).await;
    assert_eq!(error["param"], "script[1].text", "{error}");
    let mut skipping = unsayable.clone();
    skipping["on_error"] = json!("skip");
    let (headers, _) = ok(url, &skipping).await;
    assert_eq!(header(&headers, "x-skipped-segments"), "1");

    // Nothing left to speak: the first failure, said to be every segment's.
    let none = json!({"model": "piper", "on_error": "skip",
        "script": [{"speaker": "a", "text": "One.", "voice": "klingon"}]});
    let error = openai_error(script(url, &none).await, 400).await;
    assert_eq!(error["param"], "script[0].voice");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .starts_with("Every segment failed"));
}

#[tokio::test]
async fn every_limit_is_a_400_naming_its_field() {
    let server = piper_server(&["--max-input-chars", "10000"]).await;
    let url = server.url.as_str();
    let line = |speaker: &str, text: &str| json!({"speaker": speaker, "text": text});
    let body = |lines: Vec<Value>| json!({"model": "piper", "script": lines});
    let with = |field: &str, value: Value| {
        let mut b = body(vec![line("a", "Hi.")]);
        b[field] = value;
        b
    };
    let long = "word ".repeat(1800); // 9,000 characters
    let cases: Vec<(Value, &str)> = vec![
        (body(vec![]), "script"),
        (body((0..101).map(|_| line("a", "Hi.")).collect()), "script"),
        (body((0..6).map(|_| line("a", &long)).collect()), "script"),
        (
            body((0..11).map(|i| line(&format!("s{i}"), "Hi.")).collect()),
            "script",
        ),
        (body(vec![line("a", &"a".repeat(10_001))]), "script[0].text"),
        // About 640 s of speech, by the estimate.
        (
            body(vec![line("a", &long[..4000]), line("a", &long[..4000])]),
            "script",
        ),
        (
            body(vec![line("a", "Hi."), line("bad id", "Hi.")]),
            "script[1].speaker",
        ),
        (
            body(vec![line(&"x".repeat(65), "Hi.")]),
            "script[0].speaker",
        ),
        (
            body(vec![line("a", "Hi."), line("a", "  ")]),
            "script[1].text",
        ),
        (
            body(vec![json!({"speaker": "a", "text": "Hi.", "voice": " "})]),
            "script[0].voice",
        ),
        (
            body(vec![
                line("a", "Hi."),
                json!({"speaker": "a", "text": "Hi.", "speed": 5}),
            ]),
            "script[1].speed",
        ),
        (with("speed", json!(0.1)), "speed"),
        (
            with("pause_between_speakers", json!(5.5)),
            "pause_between_speakers",
        ),
        (
            with("pause_between_speakers", json!(-1)),
            "pause_between_speakers",
        ),
        (with("output_format", json!("stereo")), "output_format"),
        (with("on_error", json!("retry")), "on_error"),
        (with("response_format", json!("ogg")), "response_format"),
        (with("default_voice", json!("")), "default_voice"),
    ];
    for (request, param) in cases {
        let error = openai_error(script(url, &request).await, 400).await;
        assert_eq!(error["param"], param, "{error}");
        assert_eq!(error["type"], "invalid_request_error");
    }
    // A malformed segment is refused by the JSON reader, with its path.
    let error = openai_error(
        script(url, &body(vec![json!({"speaker": 5, "text": "Hi."})])).await,
        400,
    )
    .await;
    assert!(
        error["param"].as_str().unwrap().starts_with("script[0]"),
        "{error}"
    );
}

#[tokio::test]
async fn several_scripts_at_once_all_complete_as_each_alone() {
    let server = piper_server(&["--no-cache", "--max-scripts", "3"]).await;
    let url = server.url.clone();
    let body = |n: usize| {
        json!({"model": "piper", "seed": 3, "pause_between_speakers": 0.1, "script": [
            {"speaker": "a", "text": format!("Script {n}, line one."), "voice": PIPER},
            {"speaker": "b", "text": "Line two.", "voice": PIPER},
            {"speaker": "a", "text": "Line three."},
            {"speaker": "b", "text": "And the end."}
        ]})
    };
    let mut alone = Vec::new();
    for n in 0..3 {
        alone.push(ok(&url, &body(n)).await.1);
    }
    let together = futures::future::join_all((0..3).map(|n| {
        let url = url.clone();
        let body = body(n);
        async move { ok(&url, &body).await.1 }
    }))
    .await;
    for (n, (a, t)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(read_wav(a), read_wav(t), "script {n}");
        assert!(read_wav(a).1.len() > 22_050, "script {n} speaks");
    }
}

/// An engine whose every batch waits for a permit on a channel, and tells when one starts.
struct Gate {
    permits: Mutex<std::sync::mpsc::Receiver<()>>,
    started: AtomicUsize,
    texts: Mutex<Vec<String>>,
}

struct GatedEngine(Arc<Gate>);
struct GatedVoice(Arc<Gate>, VoiceInfo);

fn gated_info() -> VoiceInfo {
    VoiceInfo {
        id: "gated".into(),
        engine: "gated".into(),
        language: "en".into(),
        sample_rate: 16_000,
        speakers: vec![],
        gender: None,
        unsupported: None,
        design: None,
    }
}

impl Engine for GatedEngine {
    fn id(&self) -> &str {
        "gated"
    }
    fn voices(&self) -> Vec<VoiceInfo> {
        vec![gated_info()]
    }
    fn load_voice(&self, _voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        Ok(Arc::new(GatedVoice(self.0.clone(), gated_info())))
    }
}

impl Voice for GatedVoice {
    fn info(&self) -> &VoiceInfo {
        &self.1
    }
    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        if common::fake::is_warm_up(batch) {
            // The server's warm-up at start: answered at once, not counted.
            (0..batch.len()).for_each(|index| done(index, Pcm::new(vec![0.1; 1600], 16_000)));
            return Ok(());
        }
        let gate = &self.0;
        gate.texts
            .lock()
            .unwrap()
            .extend(batch.iter().map(|i| i.text.clone()));
        gate.started.fetch_add(1, Ordering::SeqCst);
        for index in 0..batch.len() {
            // A dropped sender (the test is over) lets everything through.
            let _ = gate.permits.lock().unwrap().recv();
            done(index, Pcm::new(vec![0.1; 1600], 16_000));
        }
        Ok(())
    }
}

async fn gated_server(args: &[&str]) -> (InProcess, Arc<Gate>, std::sync::mpsc::Sender<()>) {
    let (open, permits) = std::sync::mpsc::channel();
    let gate = Arc::new(Gate {
        permits: Mutex::new(permits),
        started: AtomicUsize::new(0),
        texts: Mutex::default(),
    });
    let mut all = vec![
        "--default-engine",
        "gated",
        "--default-voice",
        "gated",
        "--no-cache",
        "--preload",
        "none",
    ];
    all.extend_from_slice(args);
    let engine: Arc<dyn Engine> = Arc::new(GatedEngine(gate.clone()));
    (InProcess::start(&all, vec![engine]).await, gate, open)
}

/// Waits (a bounded while) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(20), "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn lines(n: usize) -> Value {
    let script: Vec<Value> = (0..n)
        .map(|i| json!({"speaker": format!("s{}", i % 2), "text": format!("Line {i}.")}))
        .collect();
    json!({"script": script, "response_format": "pcm"})
}

#[tokio::test]
async fn a_full_script_cap_answers_429_with_retry_after() {
    let (server, gate, open) = gated_server(&["--max-scripts", "1"]).await;
    let url = server.url.clone();
    let first = tokio::spawn({
        let url = url.clone();
        async move { script(&url, &lines(2)).await }
    });
    until("the first script reaches the engine", || {
        gate.started.load(Ordering::SeqCst) > 0
    })
    .await;

    let refused = script(&url, &lines(1)).await;
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1);
    let error = openai_error(refused, 429).await;
    assert_eq!(error["type"], "rate_limit_error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("limit of 1 script"),
        "{error}"
    );

    for _ in 0..3 {
        open.send(()).unwrap();
    }
    let first = first.await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-segment-count"], "2");
    // The slot is free again.
    let (_, pcm) = ok(&url, &lines(1)).await;
    assert!(!pcm.is_empty());
    drop(open);
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_goes_away_stops_its_script() {
    let (server, gate, open) = gated_server(&["--max-scripts", "1"]).await;
    let url = server.url.clone();
    let n = 12;
    let abandoned = tokio::spawn({
        let url = url.clone();
        async move { script(&url, &lines(n)).await }
    });
    until("the script reaches the engine", || {
        gate.started.load(Ordering::SeqCst) > 0
    })
    .await;
    abandoned.abort();
    let _ = abandoned.await;
    // Everything let through from now on: only what was already in flight is computed.
    for _ in 0..64 {
        open.send(()).unwrap();
    }
    // The script's slot comes free once its handler is gone.
    let started = Instant::now();
    loop {
        let response = script(
            &url,
            &json!({"script": [{"speaker": "z", "text": "Next."}]}),
        )
        .await;
        if response.status() == 200 {
            break;
        }
        assert_eq!(response.status(), 429);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the slot never came free"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let texts = gate.texts.lock().unwrap().clone();
    let of_script = texts.iter().filter(|t| t.starts_with("Line")).count();
    assert!(
        of_script <= omnivoice_server::speech::LINES_IN_FLIGHT,
        "{of_script} of {n} lines computed for nobody: {texts:?}"
    );
    drop(open);
    server.stop().await;
}
