//! Sessions and the listener driven over in-memory pipes and loopback TCP, against a fake
//! synthesizer whose audio length follows its text, so every count below is checkable.

use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{stream, FutureExt, SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use super::event::data;
use super::frame::{Codec, RawEvent};
use super::*;

const RATE: u32 = 16_000;
/// The fake speaks this many samples per character, in pieces of `PIECE` samples.
const SAMPLES_PER_CHAR: usize = 300;
const PIECE: usize = 700;
const WAIT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<(String, VoiceChoice)>>,
}

impl Fake {
    fn calls(&self) -> Vec<(String, VoiceChoice)> {
        self.calls.lock().clone()
    }

    fn texts(&self) -> Vec<String> {
        self.calls().into_iter().map(|(text, _)| text).collect()
    }
}

fn voice(name: &str, language: &str, speakers: &[&str]) -> VoiceDescription {
    VoiceDescription {
        name: name.into(),
        description: Some(format!("{name} voice")),
        languages: vec![language.into()],
        speakers: speakers.iter().map(|s| s.to_string()).collect(),
        attribution: Attribution {
            name: "test".into(),
            url: "https://example.invalid".into(),
        },
        installed: true,
        version: Some("1".into()),
    }
}

impl Synthesizer for Fake {
    fn voices(&self) -> BoxFuture<'_, Vec<VoiceDescription>> {
        async {
            vec![
                voice("en_US-joe-medium", "en-US", &[]),
                voice("de_DE-thorsten", "de_DE", &[]),
                voice("multi", "en_GB", &["alice", "bob"]),
            ]
        }
        .boxed()
    }

    fn speak_sentence(
        &self,
        sentence: crate::speech::Sentence,
        voice: VoiceChoice,
    ) -> BoxFuture<'_, Result<Speech, SpeakError>> {
        self.speak(sentence.text().to_string(), voice)
    }

    fn speak(&self, text: String, voice: VoiceChoice) -> BoxFuture<'_, Result<Speech, SpeakError>> {
        async move {
            self.calls.lock().push((text.clone(), voice.clone()));
            let known = ["en_US-joe-medium", "de_DE-thorsten", "multi"];
            if let Some(name) = &voice.name {
                if !known.contains(&name.as_str()) {
                    return Err(SpeakError::UnknownVoice(name.clone()));
                }
            }
            if text.contains("BUSY") {
                return Err(SpeakError::Busy("queue full".into()));
            }
            let total = SAMPLES_PER_CHAR * text.chars().count();
            let samples: Vec<i16> = (0..total).map(|i| (i % 32_000) as i16).collect();
            let mut pieces: Vec<Result<bytes::Bytes, SpeakError>> = samples
                .chunks(PIECE)
                .map(|p| Ok(p.iter().flat_map(|s| s.to_le_bytes()).collect()))
                .collect();
            if text.contains("FAIL") {
                pieces.truncate(1);
                pieces.push(Err(SpeakError::Failed("model exploded".into())));
            }
            Ok(Speech {
                sample_rate: RATE,
                pcm: stream::iter(pieces).boxed(),
            })
        }
        .boxed()
    }
}

struct Client<R, W> {
    events: FramedRead<R, Codec>,
    out: FramedWrite<W, Codec>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Client<R, W> {
    fn new(reader: R, writer: W) -> Self {
        let limits = Limits::default().frame();
        Self {
            events: FramedRead::new(reader, Codec::new(limits)),
            out: FramedWrite::new(writer, Codec::new(limits)),
        }
    }

    async fn send(&mut self, kind: &str, value: Value) {
        self.out
            .send(RawEvent::new(kind, data(value)))
            .await
            .unwrap();
    }

    async fn send_bytes(&mut self, bytes: &[u8]) {
        let w = self.out.get_mut();
        w.write_all(bytes).await.unwrap();
        w.flush().await.unwrap();
    }

    /// The next event, `None` once the server closed; panics after `within`.
    async fn recv_within(&mut self, within: Duration) -> Option<RawEvent> {
        let next = tokio::time::timeout(within, self.events.next())
            .await
            .expect("no event in time");
        next.map(|e| e.expect("server sent a malformed event"))
    }

    async fn recv(&mut self) -> Option<RawEvent> {
        self.recv_within(WAIT).await
    }

    /// Events up to and including the first of type `kind`.
    async fn until(&mut self, kind: &str) -> Vec<RawEvent> {
        let mut got = Vec::new();
        loop {
            let event = self
                .recv()
                .await
                .unwrap_or_else(|| panic!("closed before '{kind}': {:?}", kinds(&got)));
            let done = event.kind == kind;
            got.push(event);
            if done {
                return got;
            }
        }
    }

    /// Expects an `error` with `code`, then the close.
    async fn expect_refusal(&mut self, code: &str) -> Vec<RawEvent> {
        let got = self.until("error").await;
        assert_eq!(got.last().unwrap().data["code"], code, "{:?}", got.last());
        assert!(
            self.recv().await.is_none(),
            "the connection stays open after '{code}'"
        );
        got
    }
}

type PipeClient = Client<
    tokio::io::ReadHalf<tokio::io::DuplexStream>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
>;

struct Harness {
    client: PipeClient,
    fake: Arc<Fake>,
    session: tokio::task::JoinHandle<()>,
    shutdown: CancellationToken,
}

/// Default limits without the wait rule, so a slow test machine cannot split a sentence.
fn quiet() -> Limits {
    Limits {
        sentence_max_wait: None,
        ..Limits::default()
    }
}

fn start(limits: Limits) -> Harness {
    start_with_pipe(limits, 1 << 16)
}

fn start_with_pipe(limits: Limits, pipe_bytes: usize) -> Harness {
    let (ours, theirs) = tokio::io::duplex(pipe_bytes);
    let fake = Arc::new(Fake::default());
    let shutdown = CancellationToken::new();
    let session = {
        let fake = fake.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let (r, w) = tokio::io::split(theirs);
            serve_connection(&*fake, r, w, &limits, &shutdown).await;
        })
    };
    let (r, w) = tokio::io::split(ours);
    Harness {
        client: Client::new(r, w),
        fake,
        session,
        shutdown,
    }
}

fn kinds(events: &[RawEvent]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

fn count(events: &[RawEvent], kind: &str) -> usize {
    events.iter().filter(|e| e.kind == kind).count()
}

/// Checks one `audio-start` … `audio-stop` run and returns its sample count.
fn audio_samples(events: &[RawEvent]) -> usize {
    assert_eq!(
        events.first().unwrap().kind,
        "audio-start",
        "{:?}",
        kinds(events)
    );
    assert_eq!(events.last().unwrap().kind, "audio-stop");
    let format = json!({"rate": RATE, "width": 2, "channels": 1});
    assert_eq!(Value::Object(events[0].data.clone()), format);
    let chunks = &events[1..events.len() - 1];
    assert!(!chunks.is_empty());
    let mut samples = 0;
    for (i, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk.kind, "audio-chunk");
        assert_eq!(Value::Object(chunk.data.clone()), format);
        assert_eq!(chunk.payload.len() % 2, 0);
        let n = chunk.payload.len() / 2;
        if i + 1 < chunks.len() {
            assert_eq!(n, 1024, "only the last chunk may be short");
        } else {
            assert!((1..=1024).contains(&n));
        }
        samples += n;
    }
    samples
}

/// Splits a reply into its `audio-start` … `audio-stop` runs.
fn runs(events: &[RawEvent]) -> Vec<&[RawEvent]> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, e) in events.iter().enumerate() {
        match e.kind.as_str() {
            "audio-start" => {
                assert!(start.is_none(), "nested audio-start");
                start = Some(i);
            }
            "audio-stop" => out.push(&events[start.take().expect("stop without start")..=i]),
            _ => {}
        }
    }
    assert!(start.is_none(), "audio-start without stop");
    out
}

#[tokio::test]
async fn describe_lists_every_voice() {
    let mut h = start(quiet());
    h.client.send("describe", json!({})).await;
    let info = h.client.recv().await.unwrap();
    assert_eq!(info.kind, "info");
    let tts = &info.data["tts"][0];
    assert_eq!(tts["supports_synthesize_streaming"], true);
    let voices = tts["voices"].as_array().unwrap();
    let names: Vec<&str> = voices.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["en_US-joe-medium", "de_DE-thorsten", "multi"]);
    assert_eq!(voices[0]["languages"], json!(["en_US"]));
    assert_eq!(
        voices[2]["speakers"],
        json!([{"name": "alice"}, {"name": "bob"}])
    );
    h.client.send("ping", json!({"text": "hi"})).await;
    let pong = h.client.recv().await.unwrap();
    assert_eq!(
        (pong.kind.as_str(), &pong.data["text"]),
        ("pong", &json!("hi"))
    );
}

#[tokio::test]
async fn one_shot_gets_one_audio_run_around_all_sentences() {
    let mut h = start(quiet());
    let text = "Hello there. How are you today? Fine.";
    h.client
        .send(
            "synthesize",
            json!({"text": text, "voice": {"name": "multi", "speaker": "bob"}}),
        )
        .await;
    let reply = h.client.until("audio-stop").await;
    assert_eq!(count(&reply, "audio-start"), 1);
    assert_eq!(
        audio_samples(&reply),
        SAMPLES_PER_CHAR * text.chars().count()
    );
    assert_eq!(
        h.fake.calls(),
        [(
            text.to_string(),
            VoiceChoice {
                name: Some("multi".into()),
                speaker: Some("bob".into()),
                language: None,
            }
        )]
    );
    // Nothing trails the audio-stop: the next event answers the next request.
    h.client.send("describe", json!({})).await;
    assert_eq!(h.client.recv().await.unwrap().kind, "info");
}

#[tokio::test]
async fn a_stream_gets_one_audio_run_per_sentence_as_soon_as_it_is_complete() {
    let mut h = start(quiet());
    h.client
        .send(
            "synthesize-start",
            json!({"voice": {"name": "en_US-joe-medium"}}),
        )
        .await;
    for chunk in ["Hel", "lo the", "re. How a"] {
        h.client
            .send("synthesize-chunk", json!({"text": chunk}))
            .await;
    }
    // The first sentence is spoken while the stream is still open.
    let first = h.client.until("audio-stop").await;
    assert_eq!(
        audio_samples(&first),
        SAMPLES_PER_CHAR * "Hello there.".len()
    );
    assert_eq!(h.fake.texts(), ["Hello there."]);

    for chunk in ["re you? Fi", "ne, tha", "nks"] {
        h.client
            .send("synthesize-chunk", json!({"text": chunk}))
            .await;
    }
    let whole = "Hello there. How are you? Fine, thanks";
    h.client.send("synthesize", json!({"text": whole})).await;
    h.client.send("synthesize-stop", json!({})).await;
    let rest = h.client.until("synthesize-stopped").await;
    let rest_runs = runs(&rest);
    assert_eq!(rest_runs.len(), 2, "{:?}", kinds(&rest));
    assert_eq!(
        rest.len(),
        rest_runs.iter().map(|r| r.len()).sum::<usize>() + 1
    );
    let sentences = ["Hello there.", "How are you?", "Fine, thanks"];
    assert_eq!(
        h.fake.texts(),
        sentences,
        "the repeated synthesize is not spoken"
    );
    for (run, sentence) in rest_runs.iter().zip(&sentences[1..]) {
        assert_eq!(audio_samples(run), SAMPLES_PER_CHAR * sentence.len());
    }
    assert!(h
        .fake
        .calls()
        .iter()
        .all(|(_, v)| v.name.as_deref() == Some("en_US-joe-medium")));

    // After the stream, a one-shot request is served again.
    h.client.send("synthesize", json!({"text": "Again."})).await;
    assert_eq!(count(&h.client.until("audio-stop").await, "audio-start"), 1);
    assert_eq!(h.fake.texts().last().unwrap(), "Again.");
}

/// A stream's sentences are the utterances of its whole text (normalized, then split), in
/// any chunking, and each is spoken as it is.
#[tokio::test]
async fn streamed_sentences_are_the_utterances_of_the_whole_text() {
    let text = "## Plan\n- Call **Dr. Smith** at 3.14 p.m.\n- Buy milk\n\nSee [the docs. Now](u) \
        please, e.g. today. Done";
    let whole = crate::text::split_sentences(
        &crate::text::normalize(text),
        crate::speech::MAX_UTTERANCE_CHARS,
    );
    assert!(whole.len() >= 5, "{whole:?}");
    for n in [1, 4, 9] {
        let mut h = start(quiet());
        h.client.send("synthesize-start", json!({})).await;
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(n) {
            let piece: String = piece.iter().collect();
            h.client
                .send("synthesize-chunk", json!({ "text": piece }))
                .await;
        }
        h.client.send("synthesize-stop", json!({})).await;
        let reply = h.client.until("synthesize-stopped").await;
        assert_eq!(runs(&reply).len(), whole.len());
        assert_eq!(h.fake.texts(), whole, "pieces of {n} characters");
    }
}

#[tokio::test]
async fn an_empty_stream_just_stops() {
    let mut h = start(quiet());
    h.client.send("synthesize-start", json!({})).await;
    h.client
        .send("synthesize-chunk", json!({"text": "  "}))
        .await;
    h.client.send("synthesize-stop", json!({})).await;
    assert_eq!(
        kinds(&h.client.until("synthesize-stopped").await),
        ["synthesize-stopped"]
    );
    assert!(h.fake.calls().is_empty());
}

#[tokio::test]
async fn voices_are_found_by_language() {
    let mut h = start(quiet());
    for (language, expected) in [
        ("de-DE", "de_DE-thorsten"),
        ("en_us", "en_US-joe-medium"),
        ("en_GB", "multi"),
        ("en", "en_US-joe-medium"),
    ] {
        h.client
            .send(
                "synthesize",
                json!({"text": "Hi.", "voice": {"language": language}}),
            )
            .await;
        h.client.until("audio-stop").await;
        let (_, voice) = h.fake.calls().pop().unwrap();
        assert_eq!(voice.name.as_deref(), Some(expected), "{language}");
    }
    h.client
        .send(
            "synthesize",
            json!({"text": "Hi.", "voice": {"language": "fr_FR"}}),
        )
        .await;
    h.client.expect_refusal("unknown-language").await;
}

#[tokio::test]
async fn an_unknown_voice_is_refused_before_any_audio() {
    let mut h = start(quiet());
    h.client
        .send(
            "synthesize",
            json!({"text": "Hi.", "voice": {"name": "nobody"}}),
        )
        .await;
    let got = h.client.expect_refusal("unknown-voice").await;
    assert_eq!(kinds(&got), ["error"]);
    assert!(got[0].data["text"].as_str().unwrap().contains("nobody"));
}

#[tokio::test]
async fn an_engine_failure_mid_audio_is_reported() {
    let mut h = start(quiet());
    h.client
        .send("synthesize", json!({"text": "This will FAIL for sure."}))
        .await;
    let got = h.client.expect_refusal("synthesis-failed").await;
    assert_eq!(got[0].kind, "audio-start");
    assert_eq!(count(&got, "audio-stop"), 0);

    let mut h = start(quiet());
    h.client
        .send("synthesize", json!({"text": "BUSY now"}))
        .await;
    h.client.expect_refusal("busy").await;
}

#[tokio::test]
async fn an_unknown_event_is_answered_and_the_connection_goes_on() {
    let mut h = start(quiet());
    h.client.send("transcribe", json!({"language": "en"})).await;
    let error = h.client.recv().await.unwrap();
    assert_eq!(error.kind, "error");
    assert_eq!(error.data["code"], "unknown-event");
    h.client.send("describe", json!({})).await;
    assert_eq!(h.client.recv().await.unwrap().kind, "info");
}

#[tokio::test]
async fn bad_events_and_out_of_order_events_close_the_connection() {
    let cases: [(&[(&str, Value)], &str); 5] = [
        (&[("synthesize", json!({"voice": {}}))], "invalid-event"),
        (&[("synthesize", json!({"text": " \n"}))], "empty-text"),
        (
            &[("synthesize-chunk", json!({"text": "Hi"}))],
            "unexpected-event",
        ),
        (&[("synthesize-stop", json!({}))], "unexpected-event"),
        (
            &[
                ("synthesize-start", json!({})),
                ("synthesize-start", json!({})),
            ],
            "unexpected-event",
        ),
    ];
    for (events, code) in cases {
        let mut h = start(quiet());
        for (kind, value) in events {
            h.client.send(kind, value.clone()).await;
        }
        h.client.expect_refusal(code).await;
        assert!(h.fake.calls().is_empty());
    }
}

#[tokio::test]
async fn garbage_and_oversized_headers_are_refused() {
    let mut h = start(quiet());
    h.client
        .send_bytes(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    h.client.expect_refusal("bad-frame").await;

    let limits = Limits {
        max_header_bytes: 256,
        max_data_bytes: 1000,
        ..quiet()
    };
    let mut h = start(limits.clone());
    h.client.send_bytes(&[b'a'; 300]).await;
    h.client.expect_refusal("bad-frame").await;

    let mut h = start(limits);
    h.client
        .send_bytes(b"{\"type\":\"synthesize\",\"data_length\":1001}\n")
        .await;
    let got = h.client.expect_refusal("bad-frame").await;
    assert!(got[0].data["text"].as_str().unwrap().contains("1001"));
}

#[tokio::test]
async fn text_over_the_limit_is_refused() {
    let limits = Limits {
        max_text_chars: 20,
        ..quiet()
    };
    let mut h = start(limits.clone());
    h.client
        .send("synthesize", json!({"text": "x".repeat(21)}))
        .await;
    h.client.expect_refusal("text-too-long").await;

    let mut h = start(limits);
    h.client.send("synthesize-start", json!({})).await;
    h.client
        .send("synthesize-chunk", json!({"text": "Ten chars."}))
        .await;
    h.client
        .send("synthesize-chunk", json!({"text": " Ten chars"}))
        .await;
    h.client
        .send("synthesize-chunk", json!({"text": "!"}))
        .await;
    let got = h.client.expect_refusal("text-too-long").await;
    assert_eq!(
        count(&got, "audio-stop"),
        1,
        "the first sentence was spoken"
    );
}

/// On the test's clock: the wait passes without sleeping.
#[tokio::test(start_paused = true)]
async fn a_stalled_stream_speaks_its_clause_after_the_wait() {
    let limits = Limits {
        sentence_max_wait: Some(Duration::from_millis(200)),
        ..Limits::default()
    };
    let mut h = start(limits);
    h.client.send("synthesize-start", json!({})).await;
    let sent = tokio::time::Instant::now();
    h.client
        .send("synthesize-chunk", json!({"text": "Well, let me think"}))
        .await;
    let first = h.client.until("audio-stop").await;
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_millis(250),
        "spoken after {waited:?}"
    );
    assert_eq!(audio_samples(&first), SAMPLES_PER_CHAR * "Well,".len());
    assert_eq!(h.fake.texts(), ["Well,"]);
    h.client.send("synthesize-stop", json!({})).await;
    h.client.until("synthesize-stopped").await;
    assert_eq!(h.fake.texts(), ["Well,", "let me think"]);
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_closed() {
    let limits = Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let mut h = start(limits);
    let opened = tokio::time::Instant::now();
    // A header trickling in does not count as activity.
    h.client.send_bytes(b"{\"type\":").await;
    assert!(h.client.recv().await.is_none());
    let idle = opened.elapsed();
    assert!(
        idle >= Duration::from_millis(300) && idle < Duration::from_millis(350),
        "closed after {idle:?}"
    );
    h.session.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_is_dropped() {
    let limits = Limits {
        write_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let mut h = start_with_pipe(limits, 256);
    h.client
        .send("synthesize", json!({"text": "A long text. ".repeat(100)}))
        .await;
    // Never read: the session gives up once a write has waited `write_timeout`.
    tokio::time::timeout(WAIT, h.session)
        .await
        .expect("the session kept waiting on a client that does not read")
        .unwrap();
}

#[tokio::test]
async fn shutdown_ends_an_idle_session() {
    let mut h = start(quiet());
    h.client.send("describe", json!({})).await;
    assert_eq!(h.client.recv().await.unwrap().kind, "info");
    h.shutdown.cancel();
    assert!(h.client.recv().await.is_none());
    h.session.await.unwrap();
}

#[tokio::test]
async fn the_listener_bounds_connections_and_shuts_down() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = Arc::new(Fake::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limits = Limits {
        max_connections: 1,
        ..Limits::default()
    };
    let server = tokio::spawn(serve(listener, fake, limits, async {
        let _ = stopped.await;
    }));
    let connect = || async {
        let (r, w) = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap()
            .into_split();
        Client::new(r, w)
    };

    let mut first = connect().await;
    first.send("describe", json!({})).await;
    assert_eq!(first.recv().await.unwrap().kind, "info");

    let mut second = connect().await;
    let busy = second.recv().await.unwrap();
    assert_eq!(
        (busy.kind.as_str(), &busy.data["code"]),
        ("error", &json!("busy"))
    );
    assert!(second.recv().await.is_none());

    drop(first);
    // The slot frees once the server has noticed the close.
    let mut served = false;
    for _ in 0..50 {
        let mut third = connect().await;
        third.send("synthesize", json!({"text": "Hi."})).await;
        if third.recv().await.unwrap().kind == "audio-start" {
            third.until("audio-stop").await;
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "the freed slot was never reused");

    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, server)
        .await
        .expect("serve did not return after shutdown")
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// A deterministic engine: a tone whose length follows the text.
struct Tone {
    info: crate::engine::VoiceInfo,
}

impl Tone {
    fn info() -> crate::engine::VoiceInfo {
        crate::engine::VoiceInfo {
            id: "tone".into(),
            engine: "tone".into(),
            language: "en".into(),
            sample_rate: RATE,
            speakers: vec![],
            gender: None,
            unsupported: None,
            design: None,
        }
    }
}

impl crate::engine::Engine for Tone {
    fn id(&self) -> &str {
        "tone"
    }

    fn voices(&self) -> Vec<crate::engine::VoiceInfo> {
        vec![Tone::info()]
    }

    fn load_voice(
        &self,
        _voice: &str,
    ) -> Result<Arc<dyn crate::engine::Voice>, crate::engine::EngineError> {
        Ok(Arc::new(Tone { info: Tone::info() }))
    }
}

impl crate::engine::Voice for Tone {
    fn info(&self) -> &crate::engine::VoiceInfo {
        &self.info
    }

    fn synthesize_each(
        &self,
        batch: &[crate::engine::SynthesisItem],
        done: &mut dyn FnMut(usize, crate::engine::Pcm),
    ) -> Result<(), crate::engine::EngineError> {
        for (i, item) in batch.iter().enumerate() {
            let samples = (0..SAMPLES_PER_CHAR * item.text.chars().count())
                .map(|n| 0.9 * (n as f32 * 0.031).sin())
                .collect();
            done(i, crate::engine::Pcm::new(samples, RATE));
        }
        Ok(())
    }
}

/// The real pipeline with the [`Tone`] engine.
fn tone_service() -> crate::speech::SpeechService {
    use crate::batch::Batcher;
    use crate::cache::AudioCache;
    use crate::config::{BatchSettings, CacheSettings};
    use crate::engine::registry::{Registry, RegistryConfig};
    let registry = Registry::new(
        vec![Arc::new(Tone { info: Tone::info() })],
        RegistryConfig {
            default_engine: "tone".into(),
            default_voice: "tone".into(),
            model_aliases: Default::default(),
            voice_aliases: Default::default(),
            max_loaded: 2,
            single_engine_resident: false,
            idle_unload: None,
        },
    )
    .unwrap();
    let batch = BatchSettings {
        enabled: true,
        max_size: 4,
        timeout_ms: 1,
        queue_size: 16,
    };
    let cache = CacheSettings {
        enabled: false,
        max_mb: 8,
        ttl_s: 0,
        redis: None,
    };
    crate::speech::SpeechService::new(
        Arc::new(registry),
        Batcher::start(&batch, 1),
        AudioCache::new(&cache),
        1000,
        None,
        crate::speech::TextSettings {
            normalize: true,
            ..Default::default()
        },
        Arc::new(crate::speech::LexiconStore::open(None).unwrap()),
    )
}

/// The concatenated payloads of one `audio-start` … `audio-stop` run.
fn payloads(run: &[RawEvent]) -> Vec<u8> {
    run.iter()
        .filter(|e| e.kind == "audio-chunk")
        .flat_map(|e| e.payload.to_vec())
        .collect()
}

/// The real pipeline's audio reaches the wire exactly as the pipeline encodes it: the
/// `audio-chunk` payloads of a one-shot request, joined, are the bytes of the same text's
/// whole body in native-rate `pcm`, and so are a streamed sentence's those of that sentence.
#[tokio::test]
async fn audio_chunks_carry_the_pipelines_pcm_unchanged() {
    let speech = tone_service();
    let whole = |input: &str| {
        let request = crate::speech::Request {
            model: "tone".into(),
            voice: "tone".into(),
            input: input.into(),
            native_pcm: true,
            ..Default::default()
        };
        let speech = speech.clone();
        async move {
            let job = speech.prepare(request).await.unwrap();
            speech.speak(job).await.unwrap().audio.bytes.to_vec()
        }
    };
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let session = {
        let speech = speech.clone();
        tokio::spawn(async move {
            let (r, w) = tokio::io::split(theirs);
            serve_connection(&speech, r, w, &quiet(), &CancellationToken::new()).await;
        })
    };
    let (r, w) = tokio::io::split(ours);
    let mut client = Client::new(r, w);
    let voice = json!({"name": "tone"});

    let text = "Hello there. How are you today?";
    client
        .send("synthesize", json!({"text": text, "voice": voice}))
        .await;
    let reply = client.until("audio-stop").await;
    let heard = payloads(&reply);
    assert!(heard.len() > 22_050, "{} bytes", heard.len());
    assert!(heard == whole(text).await, "one-shot audio differs");

    client
        .send("synthesize-start", json!({"voice": voice}))
        .await;
    for chunk in ["Hello the", "re. How are", " you today?"] {
        client
            .send("synthesize-chunk", json!({"text": chunk}))
            .await;
    }
    client.send("synthesize-stop", json!({})).await;
    let reply = client.until("synthesize-stopped").await;
    let streamed = runs(&reply);
    assert_eq!(streamed.len(), 2);
    assert!(payloads(streamed[0]) == whole("Hello there.").await);
    assert!(payloads(streamed[1]) == whole("How are you today?").await);
    drop(client);
    session.await.unwrap();
}
