//! Home Assistant's side of the Wyoming front door: the real `wyoming` Python client library
//! (the one Home Assistant and wyoming-piper use) against the real binary and voice, sharing
//! one pipeline with HTTP.

mod common;

use std::process::Command;

use common::{get_text, metric, Binary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_client_speaks_with_the_server() {
    let python = common::venv_python("wyoming");
    let server = Binary::ready(&["--wyoming-port", "0"]).await;
    let address = server.wyoming.clone().expect("the wyoming address");
    let (host, port) = address.rsplit_once(':').unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wyoming/client_test.py");
    let output = tokio::task::spawn_blocking({
        let (host, port) = (host.to_string(), port.to_string());
        move || {
            Command::new(python)
                .args([script, "--host", &host, "--port", &port, "--timeout", "120"])
                .output()
                .expect("run the Wyoming client")
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(output.status.success(), "the Wyoming client checks failed");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");

    // The same pipeline as HTTP: its requests are counted per front door, and HTTP still works.
    let metrics = get_text(format!("{}/metrics", server.url)).await;
    let ok = metric(
        &metrics,
        r#"omnivoice_requests_total{protocol="wyoming",route="synthesize",status="ok"}"#,
    );
    assert!(ok >= 4.0, "wyoming syntheses counted: {ok}");
    let refused = metric(
        &metrics,
        r#"omnivoice_requests_total{protocol="wyoming",route="synthesize",status="unknown_voice"}"#,
    );
    assert!(refused >= 1.0, "the unknown voice was counted: {refused}");
    let body = serde_json::json!({"model": "tts-1", "voice": "alloy", "input": "Still here.", "response_format": "wav", "stream": false});
    assert_eq!(common::post_speech(&server.url, &body).await.status(), 200);
}

#[test]
fn a_wyoming_port_that_cannot_be_bound_exits_2_naming_the_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let output = common::server_command()
        .args(["--port", "0", "--wyoming-port", &port, "--preload", "none"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("wyoming-port"), "{stderr}");
}
