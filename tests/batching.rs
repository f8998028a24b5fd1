//! Batcher behaviour over real HTTP, with a deterministic fake engine: fixed compute time per
//! batch, and a record of every batch's composition. (The real engines are exercised by the
//! other integration tests; timing rules are only testable with a predictable engine.)

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fake::FakeEngine;
use common::{openai_error, InProcess};
use serde_json::json;

struct Setup {
    server: InProcess,
    engine: Arc<FakeEngine>,
    client: reqwest::Client,
}

async fn setup(compute_ms: u64, args: &[&str]) -> Setup {
    let engine = FakeEngine::new("fake", &["fake-voice"])
        .compute_ms(compute_ms)
        .slow_ms(2500)
        .shared();
    let mut all = vec![
        "--default-engine",
        "fake",
        "--default-voice",
        "fake-voice",
        "--no-cache",
    ];
    all.extend_from_slice(args);
    let server = InProcess::start(&all, vec![engine.clone()]).await;
    Setup {
        server,
        engine,
        client: reqwest::Client::new(),
    }
}

impl Setup {
    fn speak(&self, input: &str) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}/v1/audio/speech", self.server.url))
            .json(&json!({
                "model": "fake", "voice": "fake-voice", "input": input,
                "response_format": "wav", "stream": false
            }))
    }

    fn computed(&self) -> Vec<Vec<String>> {
        self.engine.batches()
    }

    /// The batcher's numbers from `/health`.
    async fn batch(&self) -> serde_json::Value {
        common::get_json(format!("{}/health", self.server.url)).await["batch"].clone()
    }

    /// Waits until the engine has started a batch containing `text`.
    async fn until_computing(&self, text: &str) {
        until(&format!("{text:?} computing"), || async move {
            self.computed().iter().flatten().any(|t| t == text)
        })
        .await;
    }

    /// Waits until the batcher's `/health` numbers satisfy `done`.
    async fn until_batch(&self, what: &str, done: impl Fn(&serde_json::Value) -> bool) {
        let done = &done;
        until(what, || async move { done(&self.batch().await) }).await;
    }
}

/// Waits for an event the server shows (a batch started, an entry queued), polling its state;
/// fails after a minute, far beyond any wait a correct server makes.
async fn until<F: std::future::Future<Output = bool>>(what: &str, done: impl Fn() -> F) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lone_request_does_not_wait_for_the_batch_timeout() {
    // (Exactly, on a paused clock: the batch module's unit tests.)
    let s = setup(
        10,
        &["--batch-timeout-ms", "600000", "--max-concurrent", "1"],
    )
    .await;
    let started = Instant::now();
    let response = s.speak("alone").send().await.unwrap();
    assert_eq!(response.status(), 200);
    // The timeout is 10 minutes; a request that waited for it would take at least that long.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(s.computed(), vec![vec!["alone".to_string()]]);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_form_batches_within_the_size_limit() {
    let s = setup(
        200,
        &[
            "--batch-max-size",
            "3",
            "--batch-timeout-ms",
            "50",
            "--max-concurrent",
            "1",
        ],
    )
    .await;
    let requests: Vec<_> = (0..8)
        .map(|i| s.speak(&format!("item {i}")).send())
        .collect();
    for response in futures::future::join_all(requests).await {
        assert_eq!(response.unwrap().status(), 200);
    }
    let batches = s.computed();
    let items: usize = batches.iter().map(Vec::len).sum();
    assert_eq!(items, 8, "every request computed exactly once: {batches:?}");
    assert!(
        batches.iter().all(|b| b.len() <= 3),
        "size limit: {batches:?}"
    );
    assert!(
        batches.iter().any(|b| b.len() > 1),
        "some batching happened: {batches:?}"
    );
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batching_disabled_runs_one_item_per_forward_pass() {
    let s = setup(50, &["--no-batch", "--max-concurrent", "1"]).await;
    let requests: Vec<_> = (0..4)
        .map(|i| s.speak(&format!("item {i}")).send())
        .collect();
    for response in futures::future::join_all(requests).await {
        assert_eq!(response.unwrap().status(), 200);
    }
    let batches = s.computed();
    assert_eq!(batches.len(), 4);
    assert!(batches.iter().all(|b| b.len() == 1), "{batches:?}");
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_queue_answers_429_with_retry_after() {
    let s = setup(
        300,
        &[
            "--batch-queue-size",
            "2",
            "--batch-max-size",
            "1",
            "--max-concurrent",
            "1",
        ],
    )
    .await;
    let requests: Vec<_> = (0..8)
        .map(|i| s.speak(&format!("item {i}")).send())
        .collect();
    let responses = futures::future::join_all(requests).await;
    let mut rejected = 0;
    for response in responses {
        let response = response.unwrap();
        if response.status() == 429 {
            assert!(response.headers().contains_key("retry-after"));
            let error = openai_error(response, 429).await;
            assert_eq!(error["code"], "rate_limit_exceeded");
            rejected += 1;
        } else {
            assert_eq!(response.status(), 200);
        }
    }
    assert!(rejected > 0, "some requests must be refused");
    assert!(rejected < 8, "some requests must be served");
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_timed_out_request_gets_504_and_is_never_computed() {
    let s = setup(
        10,
        &[
            "--request-timeout-s",
            "1",
            "--max-concurrent",
            "1",
            "--batch-max-size",
            "1",
        ],
    )
    .await;
    let busy = tokio::spawn(s.speak("SLOW blocker").send());
    s.until_computing("SLOW blocker").await;
    let response = s.speak("doomed").send().await.unwrap();
    let error = openai_error(response, 504).await;
    assert_eq!(error["code"], "timeout");
    let _ = busy.await;
    // The blocker's batch outlives its request (its 504): once the worker has finished it, it
    // has also taken or dropped whatever was queued.
    s.until_batch("the worker idle and the queue empty", |b| {
        b["batches_in_flight"] == 0 && b["queue_depth"] == 0
    })
    .await;
    let batches = s.computed();
    assert!(
        !batches.iter().flatten().any(|t| t == "doomed"),
        "{batches:?}"
    );
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_disconnected_client_is_removed_before_computation() {
    let s = setup(10, &["--max-concurrent", "1", "--batch-max-size", "1"]).await;
    let busy = tokio::spawn(s.speak("SLOW blocker").send());
    s.until_computing("SLOW blocker").await;
    let gone = tokio::spawn(s.speak("hung up").send());
    s.until_batch("hung up queued", |b| b["queue_depth"] == 1)
        .await;
    gone.abort(); // the client hangs up while its utterance waits
    assert!(gone.await.unwrap_err().is_cancelled(), "client gave up");
    s.until_batch("hung up dropped by the server", |b| {
        b["requests_in_progress"] == 1
    })
    .await;
    assert_eq!(busy.await.unwrap().unwrap().status(), 200);
    let after = s.speak("next").send().await.unwrap();
    assert_eq!(after.status(), 200);
    let batches = s.computed();
    assert!(
        !batches.iter().flatten().any(|t| t == "hung up"),
        "{batches:?}"
    );
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_engine_panic_fails_only_its_batch() {
    let s = setup(10, &["--max-concurrent", "1"]).await;
    let response = s.speak("PANIC now").send().await.unwrap();
    let error = openai_error(response, 500).await;
    assert_eq!(error["type"], "server_error");
    let response = s.speak("fine again").send().await.unwrap();
    assert_eq!(response.status(), 200);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentences_of_one_request_share_a_batch_and_stay_in_order() {
    let s = setup(10, &["--max-concurrent", "1", "--batch-max-size", "8"]).await;
    let response = s
        .speak("First one. Second one here. Third!")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, samples) = common::read_wav(&response.bytes().await.unwrap());
    // Three sentences of 2205 samples with two 0.2 s pauses between them.
    assert_eq!(samples.len(), 3 * 2205 + 2 * 4410);
    let batches = s.computed();
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0].len(), 3);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_is_503_starting_until_preloads_finish() {
    // A voice that takes a while to load, to watch `/health` go from starting to ready.
    let engine = FakeEngine::new("fake", &["v"]).load_delay_ms(1500).shared();
    let args = ["--default-engine", "fake", "--default-voice", "v"];
    let server = InProcess::spawn(&args, vec![engine]).await;
    let health = format!("{}/health", server.url);
    let first = reqwest::get(&health).await.unwrap();
    assert_eq!(first.status(), 503);
    assert_eq!(
        first.json::<serde_json::Value>().await.unwrap(),
        json!({"status": "starting"})
    );
    server.wait_ready().await;
    let ready: serde_json::Value = reqwest::get(&health).await.unwrap().json().await.unwrap();
    assert_eq!(ready["status"], "ok");
    assert_eq!(ready["voices_loaded"], json!(["fake/v"]));
    assert_eq!(ready["batch"]["settings"]["max_size"], 8);
    assert_eq!(ready["cache"]["settings"]["enabled"], true);
    assert!(
        ready["version"].is_string() && ready["uptime_s"].is_number() && ready["device"] == "cpu"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn early_items_of_a_batch_are_answered_before_late_ones_finish() {
    let s = setup(10, &["--max-concurrent", "1", "--batch-timeout-ms", "1000"]).await;
    let blocker = tokio::spawn(s.speak("SLOW blocker").send());
    s.until_computing("SLOW blocker").await;
    let early = tokio::spawn(s.speak("early one").send());
    s.until_batch("early queued", |b| b["queue_depth"] == 1)
        .await;
    let late = tokio::spawn(s.speak("LATE one").send());
    let early = early.await.unwrap().unwrap();
    assert_eq!(early.status(), reqwest::StatusCode::OK);
    early.bytes().await.expect("the early body, whole");
    // Answered while its batch still computes the late item (a second of it).
    let batch = s.batch().await;
    assert!(
        !late.is_finished() && batch["batches_in_flight"] == 1,
        "the early item waited for the late one: {batch}"
    );
    let late = late.await.unwrap().unwrap();
    assert_eq!(late.status(), reqwest::StatusCode::OK);
    assert_eq!(blocker.await.unwrap().unwrap().status(), 200);
    let batches = s.computed();
    assert!(
        batches.contains(&vec!["early one".to_string(), "LATE one".to_string()]),
        "{batches:?}"
    );
    s.server.stop().await;
}
