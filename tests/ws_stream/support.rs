//! What the WebSocket stream tests share: a connection, its events read until it closes, a
//! voice held until the test lets it compute, and the check of a refusal.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use omnivoice_server::engine::{Engine, EngineError, Pcm, SynthesisItem, Voice, VoiceInfo};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

use crate::common::fake::{is_warm_up, FakeEngine};
use crate::common::{Binary, InProcess};

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Something with a URL a stream can be opened on.
pub trait Server {
    fn url(&self) -> &str;
}

impl Server for Binary {
    fn url(&self) -> &str {
        &self.url
    }
}

impl Server for InProcess {
    fn url(&self) -> &str {
        &self.url
    }
}

pub fn stream_url(server: &impl Server) -> String {
    format!(
        "{}/v1/audio/speech/stream",
        server.url().replacen("http://", "ws://", 1)
    )
}

pub async fn connect(server: &impl Server) -> Ws {
    connect_async(stream_url(server))
        .await
        .expect("handshake")
        .0
}

/// An in-process server whose only engine is `engine`'s voice `fake-voice`.
pub async fn in_process(engine: Arc<dyn Engine>, args: &[&str]) -> InProcess {
    let id = engine.id().to_string();
    let mut all = vec![
        "--default-engine",
        &id,
        "--default-voice",
        "fake-voice",
        "--no-cache",
    ];
    all.extend_from_slice(args);
    InProcess::start(&all, vec![engine]).await
}

/// A gate the test opens: until then, a [`Gated`] voice computes nothing.
#[derive(Default)]
pub struct Gate {
    pub open: Mutex<bool>,
    pub opened: Condvar,
}

impl Gate {
    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    pub fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
}

/// The fake engine, holding every synthesis until its gate opens.
pub struct Gated {
    pub inner: FakeEngine,
    pub gate: Arc<Gate>,
}

pub struct GatedVoice {
    pub inner: Arc<dyn Voice>,
    pub gate: Arc<Gate>,
}

impl Engine for Gated {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn voices(&self) -> Vec<VoiceInfo> {
        self.inner.voices()
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        Ok(Arc::new(GatedVoice {
            inner: self.inner.load_voice(voice)?,
            gate: self.gate.clone(),
        }))
    }
}

impl Voice for GatedVoice {
    fn info(&self) -> &VoiceInfo {
        self.inner.info()
    }

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        // The server's warm-up at start is not held at the gate.
        if !is_warm_up(batch) {
            self.gate.wait();
        }
        self.inner.synthesize_each(batch, done)
    }
}

pub async fn send(ws: &mut Ws, message: Value) {
    ws.send(Message::text(message.to_string()))
        .await
        .expect("send");
}

/// What a stream sent until it closed.
#[derive(Debug, Default)]
pub struct Received {
    pub audio: Vec<u8>,
    /// Every JSON message, in order.
    pub messages: Vec<Value>,
    pub close: Option<(u16, String)>,
}

impl Received {
    pub fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.messages.iter().filter(|m| m["type"] == kind).collect()
    }
}

pub enum Event {
    Audio(Vec<u8>),
    Json(Value),
    Closed(Option<(u16, String)>),
}

pub async fn next_event(ws: &mut Ws) -> Event {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("the server answered within 60 s");
        match message {
            None | Some(Err(_)) => return Event::Closed(None),
            Some(Ok(Message::Binary(bytes))) => return Event::Audio(bytes.to_vec()),
            Some(Ok(Message::Text(text))) => {
                return Event::Json(serde_json::from_str(text.as_str()).expect("JSON message"))
            }
            Some(Ok(Message::Close(frame))) => {
                return Event::Closed(
                    frame.map(|f| (u16::from(f.code), f.reason.as_str().to_string())),
                )
            }
            Some(Ok(_)) => {}
        }
    }
}

pub async fn receive_all(ws: &mut Ws, into: &mut Received) {
    loop {
        match next_event(ws).await {
            Event::Audio(bytes) => into.audio.extend(bytes),
            Event::Json(message) => into.messages.push(message),
            Event::Closed(close) => {
                into.close = close;
                return;
            }
        }
    }
}

/// Waits for the first audio, keeping what came before it.
pub async fn first_audio(ws: &mut Ws, into: &mut Received) {
    loop {
        match next_event(ws).await {
            Event::Audio(bytes) => {
                into.audio.extend(bytes);
                return;
            }
            Event::Json(message) => into.messages.push(message),
            Event::Closed(close) => panic!("closed before any audio: {close:?} {into:?}"),
        }
    }
}

/// `text` cut every `n` characters: mid-word, mid-number, right after periods.
pub fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// Asserts the stream was refused with `close_code`, an `error` message naming `code`, and
/// a close reason.
pub fn assert_refused(received: &Received, close_code: u16, code: &str) {
    let (got, reason) = received
        .close
        .clone()
        .unwrap_or_else(|| panic!("no close frame: {received:?}"));
    assert_eq!(got, close_code, "close code ({reason})");
    assert!(!reason.is_empty(), "a close reason");
    let errors = received.of_type("error");
    assert_eq!(errors.len(), 1, "{received:?}");
    assert_eq!(errors[0]["close_code"], close_code);
    assert_eq!(errors[0]["error"]["code"], code, "{}", errors[0]);
    assert!(errors[0]["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
}
