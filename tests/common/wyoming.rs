//! A minimal Wyoming client, for tests that compare a voice across front doors; the protocol
//! itself is held to the reference Python client in tests/wyoming.rs.
//!
//! An event is a JSON header line, then `data_length` bytes of more JSON data, then
//! `payload_length` bytes of payload (audio).

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What one synthesis sent back: its audio or the server's error event's text.
pub enum Spoken {
    Audio { rate: u32, samples: Vec<i16> },
    Error(String),
}

/// Asks the server at `address` (`host:port`) to speak `text` in the voice named `voice`.
pub async fn synthesize(address: &str, text: &str, voice: &str) -> Spoken {
    synthesize_as(address, text, json!({ "name": voice })).await
}

/// Asks for `text` with the event's `voice` object as given (`{"language": "de_DE"}`).
pub async fn synthesize_as(address: &str, text: &str, voice: Value) -> Spoken {
    let stream = TcpStream::connect(address).await.expect("connect");
    let (read, mut write) = stream.into_split();
    let event = json!({"type": "synthesize", "data": {"text": text, "voice": voice}});
    write
        .write_all(format!("{event}\n").as_bytes())
        .await
        .expect("send");
    let mut reader = BufReader::new(read);
    let (mut rate, mut bytes) = (0, Vec::new());
    loop {
        let (kind, data, payload) =
            tokio::time::timeout(Duration::from_secs(120), next(&mut reader))
                .await
                .expect("an event within 120 s");
        match kind.as_str() {
            "audio-start" => rate = data["rate"].as_u64().expect("rate") as u32,
            "audio-chunk" => bytes.extend(payload),
            "audio-stop" => break,
            "error" => return Spoken::Error(data["text"].as_str().unwrap_or("").to_string()),
            _ => {}
        }
    }
    let samples = bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    Spoken::Audio { rate, samples }
}

/// The next event: its type, its data (the header's and the data block's, merged) and payload.
async fn next(reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> (String, Value, Vec<u8>) {
    let mut line = String::new();
    reader.read_line(&mut line).await.expect("a header line");
    let header: Value = serde_json::from_str(&line).expect("a JSON header");
    let mut data = header.get("data").cloned().unwrap_or_else(|| json!({}));
    let length = |key: &str| header.get(key).and_then(Value::as_u64).unwrap_or(0) as usize;
    if length("data_length") > 0 {
        let mut block = vec![0; length("data_length")];
        reader.read_exact(&mut block).await.expect("the data block");
        let more: Value = serde_json::from_slice(&block).expect("JSON data");
        if let (Some(data), Some(more)) = (data.as_object_mut(), more.as_object()) {
            data.extend(more.clone());
        }
    }
    let mut payload = vec![0; length("payload_length")];
    reader.read_exact(&mut payload).await.expect("the payload");
    let kind = header["type"].as_str().expect("a type").to_string();
    (kind, data, payload)
}
