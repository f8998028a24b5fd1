//! `GET /v1/audio/speech/stream` with a real WebSocket client against the real binary: text
//! streamed in pieces sounds like the same text sent at once, audio starts before the text
//! ends, and every refusal closes with its code and a reason. Where a case depends on what
//! the engine is doing (or on time), it runs against an in-process server with a fake engine.

mod common;
#[path = "ws_stream/support.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use common::decode::decode;
use common::fake::FakeEngine;
use common::{get_text, post_speech, Binary};
use futures::{SinkExt, StreamExt};
use omnivoice_server::audio::AudioFormat;
use serde_json::{json, Value};
use support::*;
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;

const VOICE: &str = "en_US-joe-medium";
const TEXT: &str = "The quick brown fox jumps over the lazy dog. It was a sunny day, and \
    the birds were singing in the old oak tree. Did you hear that? Dr. Smith paid 5 dollars \
    for it.";

#[tokio::test]
async fn pieces_cut_mid_word_sound_exactly_like_the_whole_text_at_once() {
    // One utterance per forward pass on both paths: the audio is then bit-identical.
    let server = Binary::ready(&["--no-batch"]).await;
    let mut ws = connect(&server).await;
    send(
        &mut ws,
        // No wait limit: however slowly the pieces arrive, no clause is spoken early.
        json!({"text": " ", "model": "piper", "voice": VOICE, "seed": 42, "max_wait_ms": 0,
               "voice_settings": {"stability": 0.5}}),
    )
    .await;
    let (mut tx, mut rx) = ws.split();
    let reader = tokio::spawn(async move {
        let mut received = Received::default();
        loop {
            match rx.next().await {
                Some(Ok(Message::Binary(bytes))) => received.audio.extend_from_slice(&bytes),
                Some(Ok(Message::Text(text))) => received
                    .messages
                    .push(serde_json::from_str(text.as_str()).unwrap()),
                Some(Ok(Message::Close(frame))) => {
                    received.close =
                        frame.map(|f| (u16::from(f.code), f.reason.as_str().to_string()));
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return received,
            }
        }
    });
    for piece in pieces(TEXT, 5) {
        let message = json!({ "text": piece }).to_string();
        tx.send(Message::text(message)).await.unwrap();
    }
    tx.send(Message::text(json!({"text": ""}).to_string()))
        .await
        .unwrap();
    let received = tokio::time::timeout(Duration::from_secs(120), reader)
        .await
        .expect("the stream ended")
        .unwrap();
    assert_eq!(
        received.close.as_ref().map(|c| c.0),
        Some(1000),
        "{received:?}"
    );

    let start = &received.of_type("start")[0];
    assert_eq!(start["voice"], format!("piper/{VOICE}"));
    assert_eq!(start["response_format"], "pcm");
    assert_eq!(start["sample_rate"], 24_000);
    let sentences = received.of_type("sentence");
    let texts: Vec<&str> = sentences
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, omnivoice_server::text::split_sentences(TEXT, 400));
    let done = received.of_type("done");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["sentences"], sentences.len());
    assert_eq!(done[0]["audio_bytes"], received.audio.len());

    let whole = post_speech(
        &server.url,
        &json!({"model": "piper", "voice": VOICE, "input": TEXT, "response_format": "pcm",
                "seed": 42, "stream": true}),
    )
    .await;
    assert_eq!(whole.status(), 200);
    let whole = whole.bytes().await.unwrap();
    // Sentence by sentence: each sentence's bytes are where the whole request has them.
    let mut offset = 0;
    for sentence in &sentences {
        let n = sentence["audio_bytes"].as_u64().unwrap() as usize;
        assert!(n > 4800, "{sentence}: at least 0.1 s of audio");
        assert!(
            offset + n <= whole.len(),
            "{sentence} runs past the whole audio"
        );
        assert!(
            received.audio[offset..offset + n] == whole[offset..offset + n],
            "{sentence} differs from the whole request's audio"
        );
        offset += n;
    }
    assert_eq!(received.audio.len(), whole.len(), "same length in all");
    assert!(received.audio == whole.as_ref(), "same bytes in all");
    let seconds = done[0]["duration_s"].as_f64().unwrap();
    let expected = whole.len() as f64 / 2.0 / 24_000.0;
    assert!((seconds - expected).abs() < 0.05, "{seconds} vs {expected}");
    // Timings: sentences follow each other with a pause between them.
    for pair in sentences.windows(2) {
        let end = pair[0]["start_s"].as_f64().unwrap() + pair[0]["duration_s"].as_f64().unwrap();
        let gap = pair[1]["start_s"].as_f64().unwrap() - end;
        assert!((gap - 0.2).abs() < 0.01, "pause of {gap} s");
    }
}

/// Sends `pieces` after the first message `settings`, then the end; what came back.
async fn stream_of(server: &Binary, settings: Value, pieces: &[String]) -> Received {
    let mut ws = connect(server).await;
    send(&mut ws, settings).await;
    for piece in pieces {
        send(&mut ws, json!({ "text": piece })).await;
    }
    send(&mut ws, json!({"text": ""})).await;
    let mut received = Received::default();
    receive_all(&mut ws, &mut received).await;
    received
}

/// A stream of SSML documents, cut anywhere (the end tag too): each is read as a whole request
/// reads it, so with a seed its audio is the request's; breaks between documents are heard;
/// bad or unclosed markup is refused with 1008 and its position.
#[tokio::test]
async fn ssml_documents_stream_as_a_request_reads_them() {
    let server = Binary::ready(&["--no-batch"]).await;
    let settings = json!({"text": " ", "model": "piper", "voice": VOICE, "seed": 42,
                          "input_format": "ssml"});
    let document = "<speak>Good morning.<break time=\"700ms\"/>Say \
        <say-as interpret-as=\"characters\">ABC</say-as> <prosody rate=\"slow\">slowly</prosody>.</speak>";
    let received = stream_of(&server, settings.clone(), &pieces(document, 5)).await;
    assert_eq!(
        received.close.as_ref().map(|c| c.0),
        Some(1000),
        "{received:?}"
    );
    let sentences = received.of_type("sentence");
    assert_eq!(sentences.len(), 1, "one document, one unit: {sentences:?}");
    let text = sentences[0]["text"].as_str().unwrap();
    assert!(
        !text.contains('<') && text.contains("Good morning."),
        "{text}"
    );
    let whole = post_speech(
        &server.url,
        &json!({"model": "piper", "voice": VOICE, "input": document, "response_format": "pcm",
                "seed": 42, "stream": true}),
    )
    .await;
    assert_eq!(whole.status(), 200);
    let whole = whole.bytes().await.unwrap();
    assert_eq!(received.audio.len(), whole.len(), "the request's length");
    assert!(received.audio == whole.as_ref(), "the request's audio");

    // Documents follow each other; one of a break alone is silence between them.
    let documents = [
        "<speak>One.</speak>",
        " <speak><break time=\"1s\"/></speak>",
        "<speak>Two.</speak><speak>Three.</speak>",
    ]
    .map(String::from);
    let received = stream_of(&server, settings.clone(), &documents).await;
    assert_eq!(
        received.close.as_ref().map(|c| c.0),
        Some(1000),
        "{received:?}"
    );
    let sentences = received.of_type("sentence");
    let texts: Vec<&str> = sentences
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["One.", "Two.", "Three."]);
    let gap = |a: &Value, b: &Value| {
        b["start_s"].as_f64().unwrap()
            - a["start_s"].as_f64().unwrap()
            - a["duration_s"].as_f64().unwrap()
    };
    let (breaking, usual) = (
        gap(sentences[0], sentences[1]),
        gap(sentences[1], sentences[2]),
    );
    assert!((breaking - 1.0).abs() < 0.01, "the break: {breaking} s");
    assert!((usual - 0.2).abs() < 0.01, "a sentence pause: {usual} s");

    // Bad markup, an unclosed document at the end, and an unknown format are refused.
    let bad = ["<speak>Hi <break time=\"soon\"/></speak>".to_string()];
    let received = stream_of(&server, settings.clone(), &bad).await;
    assert_refused(&received, 1008, "invalid_ssml");
    let message = received.of_type("error")[0]["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("line 1"), "{message}");
    let unclosed = ["<speak>Never closed".to_string()];
    let received = stream_of(&server, settings.clone(), &unclosed).await;
    assert_refused(&received, 1008, "invalid_ssml");
    let mut html = settings;
    html["input_format"] = json!("html");
    let received = stream_of(&server, html, &[]).await;
    assert_refused(&received, 1008, "invalid_value");
    assert_eq!(
        received.of_type("error")[0]["error"]["param"],
        "input_format"
    );
}

#[tokio::test]
async fn audio_starts_before_the_text_ends_and_a_clause_is_spoken_after_the_max_wait() {
    let server = Binary::ready(&[]).await;
    let mut ws = connect(&server).await;
    let mut received = Received::default();
    send(
        &mut ws,
        json!({"text": " ", "voice": VOICE, "max_wait_ms": 300}),
    )
    .await;
    // No clause mark before the first sentence ends: it cannot be spoken early, however long
    // the next piece takes.
    send(&mut ws, json!({"text": "Hello there my fri"})).await;
    send(&mut ws, json!({"text": "end. How a"})).await;
    // Nothing more is sent until the first sentence's audio has arrived.
    first_audio(&mut ws, &mut received).await;
    send(&mut ws, json!({"text": "re you today? Well, let me think"})).await;
    // No sentence end follows "Well,": after the max wait it is spoken up to its comma.
    loop {
        match next_event(&mut ws).await {
            Event::Audio(bytes) => received.audio.extend(bytes),
            Event::Json(message) => {
                let is_well = message["text"] == "Well,";
                received.messages.push(message);
                if is_well {
                    break;
                }
            }
            Event::Closed(close) => panic!("closed early: {close:?}"),
        }
    }
    send(&mut ws, json!({"text": " about it", "flush": true})).await;
    loop {
        match next_event(&mut ws).await {
            Event::Audio(bytes) => received.audio.extend(bytes),
            Event::Json(message) if message["type"] == "flushed" => break,
            Event::Json(message) => received.messages.push(message),
            Event::Closed(close) => panic!("closed early: {close:?}"),
        }
    }
    send(&mut ws, json!({"type": "end"})).await;
    receive_all(&mut ws, &mut received).await;
    let texts: Vec<&str> = received
        .of_type("sentence")
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "Hello there my friend.",
            "How are you today?",
            "Well,",
            "let me think about it"
        ]
    );
    assert_eq!(received.close.as_ref().map(|c| c.0), Some(1000));
    let decoded = decode(AudioFormat::Pcm, &received.audio);
    let seconds = decoded.samples.len() as f64 / 24_000.0;
    let done = received.of_type("done")[0]["duration_s"].as_f64().unwrap();
    assert!(
        seconds > 2.0 && (seconds - done).abs() < 0.05,
        "{seconds} vs {done}"
    );
}

#[tokio::test]
async fn any_format_streams_as_one_valid_file() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    for format in [AudioFormat::Mp3, AudioFormat::Wav, AudioFormat::Opus] {
        let mut ws = connect(&server).await;
        send(
            &mut ws,
            json!({"model": "espeak", "voice": "en-us", "response_format": format.as_str(),
                   "text": "One sentence here. And a"}),
        )
        .await;
        send(&mut ws, json!({"text": "nother one."})).await;
        send(&mut ws, json!({"text": ""})).await;
        let mut received = Received::default();
        receive_all(&mut ws, &mut received).await;
        assert_eq!(received.close.as_ref().map(|c| c.0), Some(1000), "{format}");
        assert_eq!(received.of_type("sentence").len(), 2, "{format}");
        let decoded = decode(format, &received.audio);
        let seconds = decoded.samples.len() as f64 / f64::from(decoded.rate);
        let done = received.of_type("done")[0]["duration_s"].as_f64().unwrap();
        assert!(
            done > 1.0 && (seconds - done).abs() < 0.1,
            "{format}: decoded {seconds} s, done says {done} s"
        );
    }
}

#[tokio::test]
async fn bad_messages_are_refused_with_their_close_codes() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let espeak = json!({"model": "espeak", "voice": "en-us", "text": " "});
    let cases: Vec<(Vec<Message>, u16, &str)> = vec![
        (vec![Message::text("not json")], 1003, "invalid_message"),
        (
            vec![Message::text(r#"{"type": "stop"}"#)],
            1003,
            "invalid_message",
        ),
        (
            vec![Message::binary(vec![1u8, 2, 3])],
            1003,
            "unsupported_message",
        ),
        (
            vec![Message::text(
                json!({"model": "espeak", "voice": "klingon"}).to_string(),
            )],
            1008,
            "voice_not_found",
        ),
        (
            vec![Message::text(
                json!({"model": "espeak", "voice": "en-us", "speed": 9.0}).to_string(),
            )],
            1008,
            "invalid_value",
        ),
        (
            vec![
                Message::text(espeak.to_string()),
                Message::text(json!({"voice": "en-us", "text": "Hi."}).to_string()),
            ],
            1008,
            "settings_after_start",
        ),
    ];
    for (messages, close_code, code) in cases {
        let mut ws = connect(&server).await;
        for message in messages {
            ws.send(message).await.unwrap();
        }
        let mut received = Received::default();
        receive_all(&mut ws, &mut received).await;
        assert_refused(&received, close_code, code);
    }
    // The server is fine afterwards.
    let mut ws = connect(&server).await;
    send(
        &mut ws,
        json!({"model": "espeak", "voice": "en-us", "text": "Still here."}),
    )
    .await;
    send(&mut ws, json!({"text": ""})).await;
    let mut received = Received::default();
    receive_all(&mut ws, &mut received).await;
    assert_eq!(received.close.map(|c| c.0), Some(1000));
    assert!(!received.audio.is_empty());
}

/// Text after the end is refused while the end's audio is still owed. The engine holds the
/// audio until the refusal is in, so which comes first (the last message, or the end of the
/// audio, which would close with 1000 instead) does not depend on timing.
#[tokio::test]
async fn text_after_the_end_is_refused_while_its_audio_is_owed() {
    let gate = Arc::new(Gate::default());
    let engine = Gated {
        inner: FakeEngine::new("fake", &["fake-voice"]),
        gate: gate.clone(),
    };
    let server = in_process(Arc::new(engine), &[]).await;
    let mut ws = connect(&server).await;
    send(&mut ws, json!({"text": "Hello there.", "type": "end"})).await;
    send(&mut ws, json!({"text": "More."})).await;
    let mut received = Received::default();
    receive_all(&mut ws, &mut received).await;
    gate.open();
    assert_refused(&received, 1008, "stream_ended");
    assert!(received.audio.is_empty(), "no audio was computed yet");
    server.stop().await;
}

/// The sentences of a stream are the utterances of the whole text: normalized, then split,
/// however the text is cut. (Splitting the raw text first and normalizing each sentence
/// gives other utterances: a blank line ends a sentence only before normalizing, a link's
/// text is cut at its periods, a list item's marker starts a sentence of its own.)
#[tokio::test]
async fn streamed_markup_becomes_the_utterances_of_the_whole_text() {
    const MARKUP: &str = "# Streaming\nMr. **Smith** paid 3.50 dollars, i.e. *less*. See \
        [the docs. Really](https://x.org/a_b) now!\n\n- apples\n- pears. And more\nA heading\n\n\
        Some text, e.g. this. Dr. Jones met me at 3.14 p.m. Done. - not a list";
    let engine = FakeEngine::new("fake", &["fake-voice"]).shared();
    let server = in_process(engine.clone(), &["--no-batch"]).await;
    let utterances = |batches: &[Vec<String>]| {
        let mut texts: Vec<String> = batches.concat();
        texts.sort();
        texts
    };

    for n in [1, 3, 7] {
        let before = engine.batches().len();
        let mut ws = connect(&server).await;
        send(&mut ws, json!({"max_wait_ms": 0})).await;
        for piece in pieces(MARKUP, n) {
            send(&mut ws, json!({ "text": piece })).await;
        }
        send(&mut ws, json!({"type": "end"})).await;
        let mut received = Received::default();
        receive_all(&mut ws, &mut received).await;
        assert_eq!(
            received.close.as_ref().map(|c| c.0),
            Some(1000),
            "{received:?}"
        );
        let streamed = utterances(&engine.batches()[before..]);

        let before = engine.batches().len();
        let whole = post_speech(
            &server.url,
            &json!({"model": "tts-1", "voice": "alloy", "input": MARKUP,
                    "response_format": "wav", "stream": false}),
        )
        .await;
        assert_eq!(whole.status(), 200);
        whole.bytes().await.unwrap();
        let whole = utterances(&engine.batches()[before..]);
        assert!(whole.len() > 8, "{whole:?}");
        assert_eq!(streamed, whole, "pieces of {n} characters");
        // The messages name each sentence as written; the engine was given it as read.
        let options = omnivoice_server::text::english::ReadingOptions::default();
        let mut sentences: Vec<String> = received
            .of_type("sentence")
            .iter()
            .map(|s| s["text"].as_str().unwrap().to_string())
            .collect();
        assert!(
            sentences.iter().any(|s| s.contains("Dr. Jones")),
            "{sentences:?}"
        );
        let mut read: Vec<String> = sentences
            .iter()
            .map(|s| omnivoice_server::text::english::read(s, &options).text)
            .collect();
        read.sort();
        sentences.sort();
        assert_eq!(read, whole, "the sentence messages name the utterances");
    }
    server.stop().await;
}

#[tokio::test]
async fn too_much_text_and_too_large_messages_close_with_1009() {
    let server = Binary::ready(&["--preload", "espeak/en-us", "--max-input-chars", "100"]).await;
    // Text waiting to be spoken is bounded, however it is cut.
    let mut ws = connect(&server).await;
    send(
        &mut ws,
        json!({"model": "espeak", "voice": "en-us", "text": " "}),
    )
    .await;
    for piece in pieces(&"word ".repeat(30), 10) {
        if ws
            .send(Message::text(json!({ "text": piece }).to_string()))
            .await
            .is_err()
        {
            break;
        }
    }
    let mut received = Received::default();
    receive_all(&mut ws, &mut received).await;
    assert_refused(&received, 1009, "too_much_text");

    // A message over the size limit (1 MiB), sent while reading, as a browser would.
    let mut ws = connect(&server).await;
    send(&mut ws, json!({"model": "espeak", "voice": "en-us"})).await;
    let (mut tx, mut rx) = ws.split();
    let huge = json!({ "text": "a".repeat(2 << 20) }).to_string();
    let sender = tokio::spawn(async move { tx.send(Message::text(huge)).await });
    let mut received = Received::default();
    while let Some(Ok(message)) = rx.next().await {
        match message {
            Message::Text(text) => received
                .messages
                .push(serde_json::from_str(text.as_str()).unwrap()),
            Message::Close(frame) => {
                received.close = frame.map(|f| (u16::from(f.code), f.reason.as_str().to_string()));
                break;
            }
            _ => {}
        }
    }
    assert_refused(&received, 1009, "message_too_large");
    sender.abort();
}

#[tokio::test]
async fn a_client_that_goes_away_stops_the_synthesis() {
    let server = Binary::ready(&[]).await;
    let syntheses = |metrics: &str| common::metric(metrics, "omnivoice_syntheses_total");
    let before = syntheses(&get_text(format!("{}/metrics", server.url)).await);
    let mut ws = connect(&server).await;
    let sentences: String = (1..=12)
        .map(|i| format!("This is sentence number {i} of a long answer. "))
        .collect();
    send(
        &mut ws,
        json!({"voice": VOICE, "text": sentences, "flush": true}),
    )
    .await;
    let mut received = Received::default();
    first_audio(&mut ws, &mut received).await;
    drop(ws);
    // The stream is counted as abandoned once its session has ended: from then on nothing of
    // it can start any more.
    let abandoned = |metrics: &str| {
        metrics
            .lines()
            .filter(|l| l.contains("protocol=\"websocket\"") && l.contains("status=\"1006\""))
            .count()
    };
    let metrics = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let metrics = get_text(format!("{}/metrics", server.url)).await;
            if abandoned(&metrics) > 0 {
                return metrics;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the abandoned stream ended");
    assert_eq!(
        abandoned(&metrics),
        1,
        "the abandoned stream is counted:\n{metrics}"
    );
    let started = syntheses(&metrics) - before;
    assert!(started < 6.0, "{started} of 12 sentences were synthesized");
}

#[tokio::test]
async fn connections_and_keys_are_bounded() {
    let server = Binary::ready(&[
        "--preload",
        "espeak/en-us",
        "--ws-max-connections",
        "1",
        "--api-key",
        "sekrit",
    ])
    .await;
    // Without a key, the handshake is refused with 401.
    match connect_async(stream_url(&server)).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401)
        }
        other => panic!("expected a 401, got {other:?}"),
    }
    let with_bearer = || {
        let mut request = stream_url(&server).into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", HeaderValue::from_static("Bearer sekrit"));
        request
    };
    let mut first = connect_async(with_bearer()).await.unwrap().0;
    send(&mut first, json!({"model": "espeak", "voice": "en-us"})).await;
    let start = next_event(&mut first).await;
    assert!(matches!(start, Event::Json(ref m) if m["type"] == "start"));

    // A second stream is one too many.
    let mut second = connect_async(with_bearer()).await.unwrap().0;
    let mut received = Received::default();
    receive_all(&mut second, &mut received).await;
    assert_refused(&received, 1013, "too_many_streams");

    // Browsers offer the key as a subprotocol; the server selects `omnivoice`, never the key.
    let mut request = stream_url(&server).into_client_request().unwrap();
    request.headers_mut().insert(
        "sec-websocket-protocol",
        HeaderValue::from_static("omnivoice, omnivoice-api-key.sekrit"),
    );
    send(&mut first, json!({"text": ""})).await;
    let mut received = Received::default();
    receive_all(&mut first, &mut received).await;
    assert_eq!(received.close.map(|c| c.0), Some(1000));
    drop(first);
    let (mut ws, response) = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            // The first stream's slot comes free just after its close: until then a stream
            // is refused (and says so), an accepted one answers its first message.
            let (mut ws, response) = connect_async(request.clone()).await.expect("handshake");
            send(
                &mut ws,
                json!({"model": "espeak", "voice": "en-us", "text": "Hi."}),
            )
            .await;
            match next_event(&mut ws).await {
                Event::Json(m) if m["type"] == "start" => return (ws, response),
                Event::Json(m) => assert_eq!(m["error"]["code"], "too_many_streams", "{m}"),
                Event::Audio(_) | Event::Closed(_) => panic!("neither start nor refusal"),
            }
        }
    })
    .await
    .expect("a stream slot came free");
    assert_eq!(response.headers()["sec-websocket-protocol"], "omnivoice");
    send(&mut ws, json!({"text": ""})).await;
    let mut received = Received::default();
    receive_all(&mut ws, &mut received).await;
    assert_eq!(received.close.map(|c| c.0), Some(1000));

    let mut wrong = stream_url(&server).into_client_request().unwrap();
    wrong.headers_mut().insert(
        "sec-websocket-protocol",
        HeaderValue::from_static("omnivoice, omnivoice-api-key.guess"),
    );
    assert!(matches!(
        connect_async(wrong).await,
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status() == 401
    ));
}

/// The idle timer runs on the server's clock, which this test controls: the stream closes
/// exactly when it has been idle that long, with nothing left to speak.
#[tokio::test(start_paused = true)]
async fn an_idle_stream_is_closed_after_the_idle_timeout() {
    let engine = FakeEngine::new("fake", &["fake-voice"]).shared();
    let server = in_process(engine, &["--ws-idle-timeout-s", "30"]).await;
    let mut ws = connect(&server).await;
    send(&mut ws, json!({})).await;
    let start = next_event(&mut ws).await;
    assert!(matches!(start, Event::Json(ref m) if m["type"] == "start"));
    let opened = tokio::time::Instant::now();
    tokio::time::advance(Duration::from_secs(29)).await;
    // Anything the client sends restarts the timer.
    send(&mut ws, json!({"text": "  "})).await;
    let mut received = Received::default();
    receive_all(&mut ws, &mut received).await;
    assert_refused(&received, 1008, "idle_timeout");
    let idle = opened.elapsed();
    assert!(
        idle >= Duration::from_secs(59) && idle < Duration::from_secs(60),
        "closed after {idle:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_plain_get_gets_an_openai_shaped_error() {
    let server = Binary::ready(&["--preload", "none"]).await;
    let response = reqwest::get(format!("{}/v1/audio/speech/stream", server.url))
        .await
        .unwrap();
    let status = response.status().as_u16();
    assert!((400..500).contains(&status), "{status}");
    let error = common::openai_error(response, status).await;
    assert_eq!(error["code"], "websocket_required");
}

#[tokio::test]
async fn shutdown_speaks_what_was_received_and_closes_with_1001() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let mut ws = connect(&server).await;
    // No wait limit: "Second," is not spoken early, however long the shutdown takes.
    send(
        &mut ws,
        json!({"model": "espeak", "voice": "en-us", "text": "First sentence. Sec",
               "max_wait_ms": 0}),
    )
    .await;
    let mut received = Received::default();
    first_audio(&mut ws, &mut received).await;
    send(&mut ws, json!({"text": "ond, unfinished"})).await;
    // The server reads in order: once it answers a ping sent after the text, it has the text.
    ws.send(Message::Ping(b"after the text".to_vec().into()))
        .await
        .unwrap();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("the server answered within 60 s");
        match message {
            Some(Ok(Message::Pong(_))) => break,
            Some(Ok(Message::Binary(bytes))) => received.audio.extend(bytes.to_vec()),
            Some(Ok(Message::Text(text))) => received
                .messages
                .push(serde_json::from_str(text.as_str()).unwrap()),
            other => panic!("before the pong: {other:?}"),
        }
    }
    let pid = server.child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    receive_all(&mut ws, &mut received).await;
    let texts: Vec<&str> = received
        .of_type("sentence")
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["First sentence.", "Second, unfinished"]);
    assert_eq!(received.of_type("done").len(), 1);
    assert_eq!(received.close.map(|c| c.0), Some(1001));
}

/// A long sentence's audio comes in several binary frames, the first of them long before
/// the sentence's `sentence` message (which follows its last audio).
#[tokio::test]
async fn a_long_sentence_arrives_in_pieces_before_its_sentence_message() {
    let server = Binary::ready(&[]).await;
    let mut ws = connect(&server).await;
    send(
        &mut ws,
        json!({"text": " ", "model": "piper", "voice": VOICE}),
    )
    .await;
    send(
        &mut ws,
        json!({"text": "The old lighthouse keeper walked slowly along the narrow rocky path \
                        that wound its way up the steep green hill toward the tall tower."}),
    )
    .await;
    send(&mut ws, json!({"text": ""})).await;
    let mut frames_before_sentence = 0;
    loop {
        match next_event(&mut ws).await {
            Event::Audio(bytes) if !bytes.is_empty() => frames_before_sentence += 1,
            Event::Audio(_) => {}
            Event::Json(message) if message["type"] == "sentence" => break,
            Event::Json(_) => {}
            Event::Closed(close) => panic!("closed before the sentence: {close:?}"),
        }
    }
    assert!(
        frames_before_sentence > 3,
        "{frames_before_sentence} audio frames before the sentence message"
    );
}
