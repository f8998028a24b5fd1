//! Wyoming's framing: a JSON header line, then an optional JSON data block, then an optional
//! binary payload, as a [`tokio_util::codec`] codec.
//!
//! It exists separately from the event types so that everything a hostile peer can send is
//! checked in one place before anything is interpreted: the header line, the data block and the
//! payload each have a size limit that is enforced before their bytes are awaited, and the
//! buffer only ever grows with bytes that actually arrived, never to a size a header claims.
//! A codec keeps its partial state between reads, which makes `FramedRead::next` safe to race
//! against timers.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::codec::{Decoder, Encoder};

/// The protocol version written into every header: the one that introduced the streaming
/// text-to-speech events this server speaks.
const PROTOCOL_VERSION: &str = "1.7.0";

/// Size limits for one incoming event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameLimits {
    /// Longest header line, its newline included.
    pub max_header_bytes: usize,
    pub max_data_bytes: usize,
    pub max_payload_bytes: usize,
}

/// One event as it travels: its type, its data (inline and block data merged) and payload.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RawEvent {
    pub kind: String,
    pub data: Map<String, Value>,
    pub payload: Bytes,
}

impl RawEvent {
    #[cfg(test)]
    pub fn new(kind: impl Into<String>, data: Map<String, Value>) -> Self {
        Self {
            kind: kind.into(),
            data,
            payload: Bytes::new(),
        }
    }
}

/// Why the byte stream is not (or no longer) a sequence of events. Every variant but `Io`
/// means the peer broke the protocol; the connection cannot be resynchronized after any.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    #[error("header line longer than {limit} bytes")]
    HeaderTooLong { limit: usize },
    #[error("data_length {length} over the limit of {limit} bytes")]
    DataTooLong { length: u64, limit: usize },
    #[error("payload_length {length} over the limit of {limit} bytes")]
    PayloadTooLong { length: u64, limit: usize },
    #[error("invalid header: {0}")]
    BadHeader(String),
    #[error("invalid data block: {0}")]
    BadData(String),
    #[error("connection closed in the middle of an event")]
    Truncated,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[derive(Deserialize)]
struct Header {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Option<Map<String, Value>>,
    #[serde(default)]
    data_length: Option<u64>,
    #[serde(default)]
    payload_length: Option<u64>,
}

/// A header that was read while its data block or payload is still on the way.
#[derive(Debug)]
struct PendingBody {
    kind: String,
    data: Map<String, Value>,
    data_length: usize,
    payload_length: usize,
}

/// Decodes and encodes [`RawEvent`]s.
#[derive(Debug)]
pub(crate) struct Codec {
    limits: FrameLimits,
    /// How much of the buffer is known to hold no newline, so a slowly arriving header is
    /// scanned once, not once per read.
    scanned: usize,
    body: Option<PendingBody>,
}

impl Codec {
    pub fn new(limits: FrameLimits) -> Self {
        Self {
            limits,
            scanned: 0,
            body: None,
        }
    }

    fn decode_header(&mut self, buf: &mut BytesMut) -> Result<Option<PendingBody>, FrameError> {
        let window = buf.len().min(self.limits.max_header_bytes);
        let Some(newline) = buf[self.scanned.min(window)..window]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| i + self.scanned.min(window))
        else {
            if buf.len() >= self.limits.max_header_bytes {
                return Err(FrameError::HeaderTooLong {
                    limit: self.limits.max_header_bytes,
                });
            }
            self.scanned = buf.len();
            return Ok(None);
        };
        let line = buf.split_to(newline + 1);
        self.scanned = 0;
        let header: Header = serde_json::from_slice(&line[..newline])
            .map_err(|e| FrameError::BadHeader(e.to_string()))?;
        let data_length = checked_length(header.data_length, self.limits.max_data_bytes)
            .map_err(|(length, limit)| FrameError::DataTooLong { length, limit })?;
        let payload_length =
            checked_length(header.payload_length, self.limits.max_payload_bytes)
                .map_err(|(length, limit)| FrameError::PayloadTooLong { length, limit })?;
        Ok(Some(PendingBody {
            kind: header.kind,
            data: header.data.unwrap_or_default(),
            data_length,
            payload_length,
        }))
    }
}

/// A header's length field as a size, or the refused length and its limit.
fn checked_length(length: Option<u64>, limit: usize) -> Result<usize, (u64, usize)> {
    let length = length.unwrap_or(0);
    match usize::try_from(length) {
        Ok(n) if n <= limit => Ok(n),
        _ => Err((length, limit)),
    }
}

impl Decoder for Codec {
    type Item = RawEvent;
    type Error = FrameError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<RawEvent>, FrameError> {
        if self.body.is_none() {
            match self.decode_header(buf)? {
                Some(body) => self.body = Some(body),
                None => return Ok(None),
            }
        }
        let Some(body) = self.body.as_ref() else {
            return Ok(None);
        };
        // No `reserve` here on purpose: the buffer grows with arriving bytes only.
        if buf.len() < body.data_length + body.payload_length {
            return Ok(None);
        }
        let PendingBody {
            kind,
            mut data,
            data_length,
            payload_length,
        } = self.body.take().expect("checked above");
        if data_length > 0 {
            let block: Map<String, Value> = serde_json::from_slice(&buf[..data_length])
                .map_err(|e| FrameError::BadData(e.to_string()))?;
            // The data block wins over inline data, key by key.
            data.extend(block);
            buf.advance(data_length);
        }
        let payload = buf.split_to(payload_length).freeze();
        Ok(Some(RawEvent {
            kind,
            data,
            payload,
        }))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<RawEvent>, FrameError> {
        match self.decode(buf)? {
            Some(event) => Ok(Some(event)),
            None if buf.is_empty() && self.body.is_none() => Ok(None),
            None => Err(FrameError::Truncated),
        }
    }
}

impl Encoder<RawEvent> for Codec {
    type Error = FrameError;

    /// Writes the data as a separate block, as the reference implementation does, so the
    /// header line stays short whatever the data holds.
    fn encode(&mut self, event: RawEvent, dst: &mut BytesMut) -> Result<(), FrameError> {
        let data = if event.data.is_empty() {
            Vec::new()
        } else {
            serde_json::to_vec(&event.data).map_err(|e| FrameError::BadData(e.to_string()))?
        };
        let mut header = Map::new();
        header.insert("type".into(), event.kind.into());
        header.insert("version".into(), PROTOCOL_VERSION.into());
        if !data.is_empty() {
            header.insert("data_length".into(), data.len().into());
        }
        if !event.payload.is_empty() {
            header.insert("payload_length".into(), event.payload.len().into());
        }
        let header =
            serde_json::to_vec(&header).map_err(|e| FrameError::BadHeader(e.to_string()))?;
        dst.reserve(header.len() + 1 + data.len() + event.payload.len());
        dst.put_slice(&header);
        dst.put_u8(b'\n');
        dst.put_slice(&data);
        dst.put_slice(&event.payload);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use futures::{SinkExt, StreamExt};
    use serde_json::json;
    use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
    use tokio_util::codec::{FramedRead, FramedWrite};

    use super::*;

    const LIMITS: FrameLimits = FrameLimits {
        max_header_bytes: 1024,
        max_data_bytes: 4096,
        max_payload_bytes: 8192,
    };

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    /// Decodes everything in `bytes`, as a peer that sent them and closed would be read.
    async fn decode_all(bytes: &[u8]) -> Vec<Result<RawEvent, FrameError>> {
        FramedRead::new(bytes, Codec::new(LIMITS)).collect().await
    }

    /// A reader that hands out one byte per read, the worst a network can do.
    struct Trickle(Vec<u8>, usize);

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            if let Some(&b) = self.0.get(self.1) {
                buf.put_slice(&[b]);
                self.1 += 1;
            }
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn data_inline_in_a_block_or_both_is_merged() {
        let block = br#"{"text":"from block","extra":1}"#;
        let mut wire = Vec::new();
        wire.extend_from_slice(b"{\"type\":\"synthesize\",\"data\":{\"text\":\"inline\"}}\n");
        wire.extend_from_slice(
            format!(
                "{{\"type\":\"synthesize\",\"data_length\":{}}}\n",
                block.len()
            )
            .as_bytes(),
        );
        wire.extend_from_slice(block);
        wire.extend_from_slice(
            format!(
                "{{\"type\":\"synthesize\",\"data\":{{\"text\":\"inline\",\"keep\":true}},\
                 \"data_length\":{}}}\n",
                block.len()
            )
            .as_bytes(),
        );
        wire.extend_from_slice(block);
        let events: Vec<RawEvent> = decode_all(&wire)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].data, object(json!({"text": "inline"})));
        assert_eq!(
            events[1].data,
            object(json!({"text": "from block", "extra": 1}))
        );
        assert_eq!(
            events[2].data,
            object(json!({"text": "from block", "extra": 1, "keep": true})),
            "the block overrides inline keys and keeps the others"
        );
        assert!(events
            .iter()
            .all(|e| e.kind == "synthesize" && e.payload.is_empty()));
    }

    #[tokio::test]
    async fn encoded_events_decode_to_themselves_even_one_byte_at_a_time() {
        let sent = vec![
            RawEvent::new("describe", Map::new()),
            RawEvent {
                kind: "audio-chunk".into(),
                data: object(json!({"rate": 22050, "width": 2, "channels": 1})),
                payload: Bytes::from((0..=255u8).cycle().take(3000).collect::<Vec<u8>>()),
            },
            RawEvent::new("synthesize", object(json!({"text": "Grüße, 日本語\n"}))),
        ];
        let mut wire = Vec::new();
        {
            let mut sink = FramedWrite::new(&mut wire, Codec::new(LIMITS));
            for event in &sent {
                sink.send(event.clone()).await.unwrap();
            }
        }
        // Headers carry the version and lengths; data goes in its own block.
        let first_line = wire.split(|&b| b == b'\n').nth(1).unwrap();
        let header: Value = serde_json::from_slice(first_line).unwrap();
        assert_eq!(header["type"], "audio-chunk");
        assert_eq!(header["version"], PROTOCOL_VERSION);
        assert_eq!(header["payload_length"], 3000);
        assert!(header["data_length"].as_u64().unwrap() > 0);
        assert!(header.get("data").is_none());

        let got: Vec<RawEvent> = FramedRead::new(Trickle(wire, 0), Codec::new(LIMITS))
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(got, sent);
    }

    #[tokio::test]
    async fn events_split_across_writes_arrive_whole() {
        let (client, server) = tokio::io::duplex(16);
        let writer = tokio::spawn(async move {
            let mut client = client;
            let wire =
                b"{\"type\":\"a\",\"data_length\":11,\"payload_length\":3}\n{\"x\":[1,2]}abc\
                         {\"type\":\"b\"}\n";
            for piece in wire.chunks(5) {
                client.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let got: Vec<RawEvent> = FramedRead::new(server, Codec::new(LIMITS))
            .map(Result::unwrap)
            .collect()
            .await;
        writer.await.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].data, object(json!({"x": [1, 2]})));
        assert_eq!(&got[0].payload[..], b"abc");
        assert_eq!(got[1].kind, "b");
    }

    #[test]
    fn an_endless_header_is_refused_at_the_limit() {
        let mut codec = Codec::new(LIMITS);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[b'{'; 1000]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(&[b' '; 24]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(FrameError::HeaderTooLong { limit: 1024 })
        ));
        // A header of exactly the limit, newline included, is fine.
        let mut codec = Codec::new(LIMITS);
        let mut line = br#"{"type":"describe"}"#.to_vec();
        line.resize(LIMITS.max_header_bytes - 1, b' ');
        line.push(b'\n');
        let mut buf = BytesMut::from(&line[..]);
        assert_eq!(codec.decode(&mut buf).unwrap().unwrap().kind, "describe");
    }

    #[test]
    fn oversized_lengths_are_refused_before_any_body_arrives() {
        let mut codec = Codec::new(LIMITS);
        let mut buf = BytesMut::from(&b"{\"type\":\"x\",\"data_length\":4097}\n"[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(FrameError::DataTooLong {
                length: 4097,
                limit: 4096
            })
        ));
        let mut codec = Codec::new(LIMITS);
        let huge = format!("{{\"type\":\"x\",\"payload_length\":{}}}\n", u64::MAX);
        let mut buf = BytesMut::from(huge.as_bytes());
        assert!(matches!(
            codec.decode(&mut buf),
            Err(FrameError::PayloadTooLong {
                length: u64::MAX,
                ..
            })
        ));
    }

    #[test]
    fn a_claimed_length_allocates_nothing_by_itself() {
        let mut codec = Codec::new(FrameLimits {
            max_data_bytes: 1 << 20,
            ..LIMITS
        });
        let mut buf = BytesMut::from(&b"{\"type\":\"x\",\"data_length\":1048576}\n{\"a\":"[..]);
        let capacity = buf.capacity();
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(
            buf.capacity() <= capacity,
            "the decoder reserved room for the claim"
        );
        assert!(matches!(
            codec.decode_eof(&mut buf),
            Err(FrameError::Truncated)
        ));
    }

    #[tokio::test]
    async fn garbage_is_an_error_not_a_panic() {
        let cases: &[&[u8]] = &[
            b"not json\n",
            b"\n",
            b"[1,2,3]\n",
            b"{\"data\":{}}\n",
            b"{\"type\":7}\n",
            b"{\"type\":\"x\",\"data\":[1]}\n",
            b"{\"type\":\"x\",\"data_length\":-1}\n",
            b"{\"type\":\"x\",\"data_length\":\"3\"}\n",
            b"\xff\xfe\x00\n",
        ];
        for &case in cases {
            let results = decode_all(case).await;
            assert!(
                matches!(results.as_slice(), [Err(FrameError::BadHeader(_))]),
                "{:?}: {results:?}",
                String::from_utf8_lossy(case)
            );
        }
        let results = decode_all(b"{\"type\":\"x\",\"data_length\":3}\nabc").await;
        assert!(matches!(results.as_slice(), [Err(FrameError::BadData(_))]));
        let results = decode_all(b"{\"type\":\"x\",\"data_length\":4}\n[12]").await;
        assert!(matches!(results.as_slice(), [Err(FrameError::BadData(_))]));
    }

    #[tokio::test]
    async fn a_close_between_events_is_clean_and_inside_one_is_not() {
        assert!(decode_all(b"").await.is_empty());
        let results = decode_all(b"{\"type\":\"a\"}\n").await;
        assert!(matches!(results.as_slice(), [Ok(e)] if e.kind == "a"));
        for cut in [
            b"{\"type\":\"a\"".as_slice(),
            b"{\"type\":\"a\",\"payload_length\":4}\nab",
        ] {
            let results = decode_all(cut).await;
            assert!(
                matches!(results.as_slice(), [Err(FrameError::Truncated)]),
                "{results:?}"
            );
        }
    }

    #[tokio::test]
    async fn null_data_and_carriage_returns_are_tolerated() {
        let results = decode_all(b"{\"type\":\"a\",\"data\":null,\"data_length\":null}\r\n").await;
        assert!(matches!(results.as_slice(), [Ok(e)] if e.kind == "a" && e.data.is_empty()));
    }
}
