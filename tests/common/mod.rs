//! Helpers shared by the integration tests: a real server on an ephemeral port, either
//! in-process (to inject a deterministic fake engine) or as the real binary.
#![allow(dead_code)]

pub mod decode;
pub mod fake;
pub mod listening;
pub mod services;
pub mod signal;
pub mod wyoming;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omnivoice_server::config::{Cli, Settings};
use omnivoice_server::engine::Engine;
use tokio::sync::oneshot;

/// `--request-timeout-s` for the servers whose tests send long work but are not about the
/// time limit. A server weighs each request by the real-time factor its start-up warm-up
/// measured, and on a 2-core CPU with other tests' servers warming up beside it that pace is
/// several times the idle one: on an AVX2 EPYC (Zen 3) it put 4,096 characters of Piper, and
/// a 4,000-letter word spelled out, past the default 120 s and refused them with a 400. The
/// limit's own tests set theirs.
pub const UNHURRIED_TIMEOUT_S: &str = "3600";

/// A server running inside the test process.
pub struct InProcess {
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    pub handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl InProcess {
    pub async fn start(args: &[&str], engines: Vec<Arc<dyn Engine>>) -> Self {
        let server = Self::spawn(args, engines).await;
        server.wait_ready().await;
        server
    }

    /// Starts the server without waiting for it to report ready.
    pub async fn spawn(args: &[&str], engines: Vec<Arc<dyn Engine>>) -> Self {
        let mut argv = vec!["omnivoice-server"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_args_only(argv).expect("a valid test command line");
        let settings = Settings::resolve(&cli.serve).expect("test settings");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let profiles = omnivoice_server::profiles::ProfileStore::open(&settings.profile_dir)
            .expect("the profile directory");
        let voice_files = Arc::new(omnivoice_server::profiles::voice_files::VoiceFiles::new(
            &settings.voice_file_dir,
        ));
        let state = omnivoice_server::server::build(
            settings,
            engines,
            Arc::new(profiles),
            voice_files,
            "cpu".into(),
        )
        .expect("valid test settings");
        let handle = tokio::spawn(omnivoice_server::server::run(
            state,
            listener,
            None,
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            url,
            stop: Some(stop),
            handle,
        }
    }

    pub async fn wait_ready(&self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(r) = client.get(format!("{}/health", self.url)).send().await {
                if r.status() == 200 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("server at {} never became ready", self.url);
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.handle).await;
    }
}

/// The `omnivoice-server` binary without the developer's `OMNIVOICE_*` variables (a set
/// `OMNIVOICE_API_KEYS` would lock every test out): a test gives the settings it means to test
/// on the command line, or sets a variable on this command itself.
pub fn server_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_omnivoice-server"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OMNIVOICE_") {
            command.env_remove(name);
        }
    }
    command
}

/// The real `omnivoice-server` binary on an ephemeral port.
pub struct Binary {
    pub url: String,
    /// `host:port` of the Wyoming listener, when started with `--wyoming-port`.
    pub wyoming: Option<String>,
    pub child: Child,
}

impl Binary {
    /// Starts the binary and returns once it listens (not necessarily ready). Piper stays the
    /// default engine, as these tests were written for, even where `voices/kokoro` holds
    /// Kokoro (which would otherwise answer OpenAI's names), unless `args` name an engine or
    /// a Kokoro directory.
    pub fn spawn(args: &[&str]) -> Self {
        Self::spawn_logging_to(args, Stdio::inherit())
    }

    /// [`spawn`](Self::spawn) with the server's log (its stderr) going to `log`.
    pub fn spawn_logging_to(args: &[&str], log: Stdio) -> Self {
        let chooses = args
            .iter()
            .any(|a| *a == "--default-engine" || *a == "--kokoro-dir" || *a == "--config");
        let default: &[&str] = if chooses {
            &[]
        } else {
            &["--default-engine", "piper"]
        };
        let mut child = server_command()
            .args(["--port", "0", "--log-level", "warn"])
            .args(default)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start omnivoice-server");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("read the listening line");
        let url = line
            .trim()
            .strip_prefix("omnivoice-server listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_string();
        let wyoming = args.contains(&"--wyoming-port").then(|| {
            let mut line = String::new();
            stdout.read_line(&mut line).expect("read the wyoming line");
            line.trim()
                .strip_prefix("omnivoice-server wyoming on tcp://")
                .unwrap_or_else(|| panic!("unexpected second line: {line:?}"))
                .to_string()
        });
        Self {
            url,
            wyoming,
            child,
        }
    }

    /// Starts the binary and waits until `/health` is 200.
    pub async fn ready(args: &[&str]) -> Self {
        Self::spawn(args).until_ready().await
    }

    /// Waits until this server's `/health` is 200.
    pub async fn until_ready(self) -> Self {
        let server = self;
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(r) = client.get(format!("{}/health", server.url)).send().await {
                if r.status() == 200 {
                    return server;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("binary never became ready");
    }

    /// Sends SIGTERM and returns the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        self.send_sigterm();
        self.child.wait().unwrap()
    }

    /// Sends SIGTERM without waiting for the process to end.
    pub fn send_sigterm(&self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    }

    /// The exit status once the process has ended, or `None` if it still runs after `limit`.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// Peak resident memory of the process so far (`VmHWM`), in bytes.
    pub fn peak_rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status");
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status");
        kib * 1024
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a WAV body: (sample rate, samples).
pub fn read_wav(bytes: &[u8]) -> (u32, Vec<i16>) {
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes)).expect("a valid WAV file");
    let rate = reader.spec().sample_rate;
    let samples = reader.into_samples::<i16>().map(|s| s.unwrap()).collect();
    (rate, samples)
}

/// Asserts an OpenAI-shaped error body and returns its `error` object.
pub async fn openai_error(response: reqwest::Response, status: u16) -> serde_json::Value {
    assert_eq!(response.status().as_u16(), status, "status");
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/json"),
        "content type {content_type}"
    );
    let body: serde_json::Value = response.json().await.expect("JSON error body");
    let error = body["error"].clone();
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "message in {body}"
    );
    assert!(error["type"].is_string(), "type in {body}");
    assert!(
        error.get("param").is_some() && error.get("code").is_some(),
        "param/code in {body}"
    );
    error
}

/// The text of `input` at each timed word's `char_start..char_end` (offsets in characters),
/// asserting that it is the word as the answer reports it.
pub fn words_at_their_offsets(input: &str, words: &[serde_json::Value]) -> Vec<String> {
    let chars: Vec<char> = input.chars().collect();
    words
        .iter()
        .map(|word| {
            let offset = |key: &str| word[key].as_u64().expect("a character offset") as usize;
            let text: String = chars[offset("char_start")..offset("char_end")]
                .iter()
                .collect();
            assert_eq!(text, word["word"].as_str().unwrap(), "{word}");
            text
        })
        .collect()
}

/// Value of a sample in Prometheus text, e.g. `metric("omnivoice_batches_total")`.
pub fn metric(text: &str, name_with_labels: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(name, _)| *name == name_with_labels)
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

/// GETs a JSON document.
pub async fn get_json(url: impl AsRef<str>) -> serde_json::Value {
    let response = reqwest::get(url.as_ref()).await.expect("GET");
    response.json().await.expect("a JSON body")
}

/// GETs a text document (e.g. `/metrics`).
pub async fn get_text(url: impl AsRef<str>) -> String {
    let response = reqwest::get(url.as_ref()).await.expect("GET");
    response.text().await.expect("a text body")
}

/// POSTs a speech request body to `/v1/audio/speech`.
/// POSTs `body` as JSON to `path` on the server at `url`.
pub async fn post(url: &str, path: &str, body: &serde_json::Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(body)
        .send()
        .await
        .expect("POST")
}

pub async fn post_speech(url: &str, body: &serde_json::Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/audio/speech"))
        .json(body)
        .send()
        .await
        .expect("POST /v1/audio/speech")
}

/// The Kokoro directory `scripts/kokoro-assets.sh` installs (`voices/kokoro`); fails, naming
/// the script, when the model or the voices are missing: never skipped silently.
pub fn kokoro_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("voices/kokoro");
    assert!(
        dir.join("kokoro-v1.0.int8.onnx").is_file() && dir.join("voices/af_heart.bin").is_file(),
        "{} lacks the Kokoro model or voices: run scripts/kokoro-assets.sh",
        dir.display()
    );
    dir
}

/// The Mandarin pinyin tables `scripts/mandarin-assets.sh` installs (`$OMNIVOICE_MANDARIN_DIR`,
/// else `voices/mandarin`); fails, naming the script, when they are missing.
#[allow(dead_code)]
pub fn mandarin_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("OMNIVOICE_MANDARIN_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("voices/mandarin"),
        std::path::PathBuf::from,
    );
    assert!(
        omnivoice_server::text::mandarin::missing_in(&dir).is_none(),
        "{} lacks the Mandarin pinyin tables: run scripts/mandarin-assets.sh",
        dir.display()
    );
    dir
}

/// What a WebSocket text stream (`/v1/audio/speech/stream` of the server at `url`) sends for
/// `settings` (the first message) and then `texts`, one message each, and the end: its audio
/// bytes and its JSON messages, until it closes. Any `error` message fails the test.
pub async fn ws_speak(
    url: &str,
    settings: &serde_json::Value,
    texts: &[&str],
) -> (Vec<u8>, Vec<serde_json::Value>) {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let ws_url = format!(
        "{}/v1/audio/speech/stream",
        url.replacen("http://", "ws://", 1)
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.unwrap();
    let text = |t: &str| Message::text(serde_json::json!({ "text": t }).to_string());
    ws.send(Message::text(settings.to_string())).await.unwrap();
    for piece in texts {
        ws.send(text(piece)).await.unwrap();
    }
    ws.send(text("")).await.unwrap();
    let (mut audio, mut messages) = (Vec::new(), Vec::new());
    while let Some(message) = tokio::time::timeout(Duration::from_secs(120), ws.next())
        .await
        .expect("the stream went on")
    {
        match message {
            Ok(Message::Binary(bytes)) => audio.extend_from_slice(&bytes),
            Ok(Message::Text(text)) => {
                assert!(!text.contains("\"error\""), "{text}");
                messages.push(serde_json::from_str(text.as_str()).unwrap());
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    (audio, messages)
}

/// `cases.json` of the fixture folder `dir` (written beside `expected.safetensors` by one of
/// the scripts that run the official OmniVoice code).
pub fn fixture_cases(dir: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{dir}/cases.json")).unwrap()).unwrap()
}

/// The official audio `audio_<name>` of `dir/expected.safetensors`.
pub fn fixture_audio(dir: &str, name: &str) -> candle_core::Tensor {
    let tensors = candle_core::safetensors::load(
        format!("{dir}/expected.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    tensors[&format!("audio_{name}")].clone()
}

/// A server of the OmniVoice checkpoint in `checkpoint`, in `f32` (the only precision held to
/// the official code: bf16 flips a few greedy picks, and then the audio is another one), with
/// nothing preloaded and `extra` flags.
pub async fn omnivoice_f32(checkpoint: &str, extra: &[&str]) -> Binary {
    let mut args = vec![
        "--omnivoice-dir",
        checkpoint,
        "--preload",
        "none",
        "--precision",
        "f32",
    ];
    args.extend_from_slice(extra);
    Binary::ready(&args).await
}

/// The python of the pinned venv `.venv-<name>`, which `scripts/<name>-venv.sh` makes (and
/// `scripts/test.sh` runs); a clear failure naming that script when it is missing.
pub fn venv_python(name: &str) -> std::path::PathBuf {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!(".venv-{name}"))
        .join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/{name}-venv.sh (scripts/test.sh does)",
        python.display()
    );
    python
}
