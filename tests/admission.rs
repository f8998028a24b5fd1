//! Bounded work per request, over real HTTP with the real voice: a request is admitted whole
//! however long it is, it keeps only a few sentences queued, others get their turn beside it,
//! and a client that goes away leaves no work behind.

mod common;

use std::time::{Duration, Instant};

use common::{get_json, get_text, metric, Binary, UNHURRIED_TIMEOUT_S};
use futures::StreamExt;
use serde_json::{json, Value};

/// Most sentences of one streamed request queued at once.
const WINDOW: u64 = 2;

fn long_input() -> String {
    let sentence = "A long request keeps the server busy with one sentence after another. ";
    sentence.repeat(4096 / sentence.len() + 1)[..4096].to_string()
}

async fn start_stream(url: &str, input: &str) -> reqwest::Response {
    let body = json!({"model": "tts-1", "voice": "alloy", "input": input, "response_format": "pcm", "cache": false});
    let response = common::post_speech(url, &body).await;
    assert_eq!(response.status(), 200, "a long request is admitted");
    response
}

async fn batch_stats(url: &str) -> Value {
    get_json(format!("{url}/health")).await["batch"].clone()
}

/// Utterances whose computation started so far (every batch records its size when it starts).
async fn utterances_started(url: &str) -> f64 {
    metric(
        &get_text(format!("{url}/metrics")).await,
        "omnivoice_batch_size_sum",
    )
}

/// Waits until nothing is admitted, queued or computing; returns how long that took.
async fn until_idle(url: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let batch = batch_stats(url).await;
        if batch["requests_in_progress"] == 0
            && batch["queue_depth"] == 0
            && batch["batches_in_flight"] == 0
        {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "still busy: {batch}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_length_request_fits_a_small_queue_and_leaves_nothing_behind_when_dropped() {
    let server = Binary::ready(&[
        "--batch-queue-size",
        "16",
        "--request-timeout-s",
        UNHURRIED_TIMEOUT_S,
    ])
    .await;
    let response = start_stream(&server.url, &long_input()).await;
    let mut chunks = response.bytes_stream();
    let first = chunks.next().await.expect("audio").expect("a chunk");
    assert!(!first.is_empty());
    let batch = batch_stats(&server.url).await;
    assert_eq!(batch["requests_in_progress"], 1, "{batch}");
    assert!(
        batch["queue_depth"].as_u64().unwrap() <= WINDOW,
        "only a small window of its ~60 sentences is queued: {batch}"
    );
    let started_before = utterances_started(&server.url).await;
    drop(chunks); // the client goes away
    let idle_after = until_idle(&server.url, Duration::from_secs(20)).await;
    let started_after = utterances_started(&server.url).await - started_before;
    eprintln!("idle {idle_after:?} after the disconnect; {started_after} utterances started since");
    // What was on a core may finish, and until the server sees the client gone (at its next
    // write) what it had queued may start; none of the ~55 sentences left.
    let workers = batch["workers"].as_u64().unwrap();
    assert!(
        started_after <= (WINDOW + workers) as f64,
        "{started_after} utterances started after the disconnect ({workers} workers)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_request_is_answered_while_a_long_one_streams() {
    let server = Binary::ready(&["--request-timeout-s", UNHURRIED_TIMEOUT_S]).await;
    let response = start_stream(&server.url, &long_input()).await;
    let mut chunks = response.bytes_stream();
    chunks.next().await.expect("audio").expect("a chunk");
    let body = json!({"model": "tts-1", "voice": "alloy", "input": "A short one.", "response_format": "wav", "stream": false, "cache": false});
    let short = common::post_speech(&server.url, &body).await;
    assert_eq!(short.status(), 200);
    assert!(!short.bytes().await.unwrap().is_empty());
    let batch = batch_stats(&server.url).await;
    assert_eq!(
        batch["requests_in_progress"], 1,
        "the short request finished while the long one still streams: {batch}"
    );
    drop(chunks);
    until_idle(&server.url, Duration::from_secs(20)).await;
}

/// A request whose speech would take longer to compute than the request timeout is a 400 that
/// says so, before any work, on every front door's path; a short one is still spoken. The
/// server knows its pace from warming its voice up at start, so even the first request is
/// weighed. With a 2-second limit, 4,096 characters (about five minutes of speech) are far
/// past it for any CPU: Piper would need a real-time factor under 0.005.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_cannot_finish_in_time_is_refused_before_any_work() {
    let server = Binary::ready(&["--request-timeout-s", "2", "--no-cache"]).await;
    let url = server.url.as_str();
    let started_before = utterances_started(url).await;
    for stream in [false, true] {
        let body = json!({"model": "tts-1", "voice": "alloy", "input": long_input(),
                          "response_format": "pcm", "stream": stream});
        let error = common::openai_error(common::post_speech(url, &body).await, 400).await;
        assert_eq!(error["param"], "input", "{error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("request time limit of 2 s")
                && message.contains("--request-timeout-s"),
            "{message}"
        );
    }
    assert_eq!(
        utterances_started(url).await,
        started_before,
        "no work was done"
    );
    let body = json!({"model": "tts-1", "voice": "alloy", "input": "Short and sweet.",
                      "response_format": "pcm"});
    let response = common::post_speech(url, &body).await;
    assert_eq!(response.status(), 200);
    assert!(!response.bytes().await.unwrap().is_empty());
}
