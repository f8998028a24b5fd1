//! What a client reads when the server fails, and whose fault a refusal names, through a real
//! server on a real port with an engine made to fail.
//!
//! - A 500 says "internal error" and the request's id, nothing of the server's files; the log
//!   line has the whole chain of causes.
//! - A voice that `instructions` lead to and that does not exist is the `voice` field's error.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use common::{openai_error, InProcess};
use omnivoice_server::engine::{Engine, EngineError, Voice, VoiceInfo, VoiceRequestError};

/// Where the broken engine's model "is": it must reach the log and never the client.
const MODEL_PATH: &str = "/srv/omnivoice/models/broken-voice.onnx";

/// The file behind a failed load, with the I/O error below it.
#[derive(Debug, thiserror::Error)]
#[error("reading {path}")]
struct Unreadable {
    path: &'static str,
    #[source]
    source: std::io::Error,
}

/// An engine whose one voice never loads, and whose instructions lead to a voice it lacks.
struct Broken;

impl Engine for Broken {
    fn id(&self) -> &str {
        "broken"
    }

    fn voices(&self) -> Vec<VoiceInfo> {
        vec![VoiceInfo {
            id: "broken-voice".into(),
            engine: "broken".into(),
            language: "en".into(),
            sample_rate: 22_050,
            speakers: Vec::new(),
            gender: None,
            unsupported: None,
            design: None,
        }]
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        Err(EngineError::load(
            voice,
            Unreadable {
                path: MODEL_PATH,
                source: std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "the disk refused to read",
                ),
            },
        ))
    }

    fn instructed_voice(
        &self,
        _voice: &str,
        _instructions: &str,
    ) -> Option<Result<String, VoiceRequestError>> {
        Some(Ok("a-voice-nobody-installed".into()))
    }
}

/// Everything the server logs, for the whole test binary.
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let writer = LogWriter(log.clone());
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        log
    })
}

#[derive(Clone)]
struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn broken_server() -> InProcess {
    InProcess::start(
        &[
            "--default-engine",
            "broken",
            "--default-voice",
            "broken-voice",
            "--preload",
            "none",
        ],
        vec![Arc::new(Broken)],
    )
    .await
}

#[tokio::test]
async fn a_500_names_the_request_and_its_log_line_the_causes() {
    let log = log();
    let server = broken_server().await;
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/audio/speech", server.url))
        .json(&serde_json::json!({"model": "broken", "voice": "broken-voice", "input": "Hello."}))
        .send()
        .await
        .unwrap();
    let request_id = answer.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let error = openai_error(answer, 500).await;
    assert_eq!(error["code"], "internal_error");
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with("internal error"), "{message}");
    assert!(
        message.contains(&request_id),
        "{message} lacks {request_id}"
    );
    for secret in ["/srv", "broken-voice.onnx", "disk refused"] {
        assert!(
            !message.contains(secret),
            "the 500 says {secret:?}: {message}"
        );
    }

    // A script whose line fails so says no more than any internal error.
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/audio/script", server.url))
        .json(&serde_json::json!({
            "model": "broken", "on_error": "abort",
            "script": [{"speaker": "a", "text": "Hello.", "voice": "broken-voice"}],
        }))
        .send()
        .await
        .unwrap();
    let script_error = openai_error(answer, 500).await;
    let message = script_error["message"].as_str().unwrap();
    assert!(message.starts_with("internal error"), "{message}");
    for secret in ["/srv", "broken-voice.onnx", "disk refused"] {
        assert!(
            !message.contains(secret),
            "the script's 500 says {secret:?}: {message}"
        );
    }
    server.stop().await;

    let logged = String::from_utf8(log.lock().unwrap().clone()).unwrap();
    let line = logged
        .lines()
        .find(|line| line.contains("internal error") && line.contains(&request_id))
        .unwrap_or_else(|| panic!("no log line of the 500 names {request_id}:\n{logged}"));
    for cause in [
        "failed to load voice 'broken-voice'",
        MODEL_PATH,
        "the disk refused to read",
    ] {
        assert!(line.contains(cause), "the log line lacks {cause:?}: {line}");
    }
}

#[tokio::test]
async fn a_missing_voice_that_instructions_lead_to_is_the_voice_fields_error() {
    log();
    let server = broken_server().await;
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/audio/speech", server.url))
        .json(&serde_json::json!({
            "model": "broken", "voice": "broken-voice", "input": "Hello.",
            "instructions": "a calm voice",
        }))
        .send()
        .await
        .unwrap();
    let error = openai_error(answer, 400).await;
    assert_eq!(error["param"], "voice", "{error}");
    assert_eq!(error["code"], "voice_not_found", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("a-voice-nobody-installed"),
        "{error}"
    );
    server.stop().await;
}
