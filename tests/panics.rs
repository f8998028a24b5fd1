//! A handler that panics answers an OpenAI-shaped 500 and is counted, and the server goes on
//! serving: a fault in one request must not look like a network failure to its client.

mod common;

use common::fake::FakeEngine;
use common::{metric, openai_error, InProcess};

#[tokio::test]
async fn a_panicking_handler_answers_an_openai_500_and_is_counted() {
    let engine = FakeEngine::new("fake", &["fake-voice"]).shared();
    let server = InProcess::start(
        &["--default-engine", "fake", "--default-voice", "fake-voice"],
        vec![engine.clone()],
    )
    .await;
    // A new client, so a new connection, for every request: the last one must not depend on
    // a connection that happened to survive.
    let get = |path: &str| {
        let url = format!("{}{path}", server.url);
        async move { reqwest::Client::new().get(url).send().await }
    };
    let scrape = || async {
        let response = get("/metrics").await.expect("GET /metrics");
        response.text().await.expect("the metrics text")
    };
    let panics_before = metric(&scrape().await, "omnivoice_panics_total");

    engine.panic_on_next_listing();
    let response = get("/v1/audio/voices")
        .await
        .expect("an answer, not a dropped connection");
    let error = openai_error(response, 500).await;
    assert_eq!(error["type"], "server_error");
    assert_eq!(error["code"], "internal_error");
    let message = error["message"].as_str().unwrap();
    assert!(
        !message.contains("fake engine"),
        "the panic's own text stays in the log: {message}"
    );

    let metrics = scrape().await;
    assert_eq!(
        metric(&metrics, "omnivoice_panics_total"),
        panics_before + 1.0
    );
    assert_eq!(
        metric(
            &metrics,
            r#"omnivoice_requests_total{protocol="http",route="/v1/audio/voices",status="500"}"#
        ),
        1.0,
        "the 500 is counted as a request too"
    );

    let response = get("/v1/audio/voices").await.expect("the next request");
    assert_eq!(response.status(), 200);
    let voices: serde_json::Value = response.json().await.unwrap();
    assert_eq!(voices["voices"][0]["id"], "fake-voice");
    server.stop().await;
}
