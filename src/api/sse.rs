//! OpenAI's server-sent-event framing of a speech answer (`"stream_format": "sse"`), and the
//! events' types, which are also their schemas in `/openapi.json`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::response::sse::{Event, Sse};
use base64::Engine as _;
use futures::stream::{Stream, StreamExt};
use serde::Serialize;
use utoipa::ToSchema;

use super::words::TimedWord;
use crate::speech::TimedChunk;

/// OpenAI's SSE framing: `speech.audio.delta` events with base64 audio, then one
/// `speech.audio.done` with usage. These engines have no tokens, so usage counts what they do
/// have: `input_tokens` is the number of characters of `input`, `output_tokens` the number of
/// audio samples sent (at `X-Audio-Sample-Rate`), and `total_tokens` their sum. Words that a
/// delta completes follow it in a `speech.audio.timestamps` event of our own, which OpenAI's
/// clients skip as an unknown event type.
pub(super) fn sse(
    chunks: impl Stream<Item = Result<TimedChunk, std::io::Error>> + Send + 'static,
    input_chars: usize,
    samples: Arc<AtomicU64>,
) -> Sse<impl Stream<Item = Result<Event, std::io::Error>>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let deltas = chunks.flat_map(move |chunk| {
        let events = match chunk {
            Err(e) => vec![Err(e)],
            Ok(TimedChunk { audio, words }) => {
                let mut events = Vec::with_capacity(2);
                // Words can complete with no new bytes (a codec holding samples back).
                if !audio.is_empty() || words.is_empty() {
                    events.push(event(&SpeechAudioDelta {
                        kind: DeltaType::SpeechAudioDelta,
                        audio: b64.encode(&audio),
                    }));
                }
                if !words.is_empty() {
                    events.push(event(&SpeechAudioTimestamps {
                        kind: TimestampsType::SpeechAudioTimestamps,
                        words: words.into_iter().map(TimedWord::from).collect(),
                    }));
                }
                events
            }
        };
        futures::stream::iter(events)
    });
    let done = futures::stream::once(async move {
        let output_tokens = samples.load(Ordering::Relaxed);
        let input_tokens = input_chars as u64;
        event(&SpeechAudioDone {
            kind: DoneType::SpeechAudioDone,
            usage: SpeechUsage {
                input_tokens,
                output_tokens,
                total_tokens: input_tokens + output_tokens,
            },
        })
    });
    Sse::new(deltas.chain(done))
}

fn event(data: &impl Serialize) -> Result<Event, std::io::Error> {
    Event::default()
        .json_data(data)
        .map_err(std::io::Error::other)
}

/// One piece of audio in an SSE answer.
#[derive(Serialize, ToSchema)]
pub(super) struct SpeechAudioDelta {
    #[serde(rename = "type")]
    kind: DeltaType,
    /// The next bytes of audio in `response_format`, base64-encoded.
    audio: String,
}

#[derive(Serialize, ToSchema)]
enum DeltaType {
    #[serde(rename = "speech.audio.delta")]
    SpeechAudioDelta,
}

/// The words of the audio sent so far that the previous delta completed.
#[derive(Serialize, ToSchema)]
pub(super) struct SpeechAudioTimestamps {
    #[serde(rename = "type")]
    kind: TimestampsType,
    words: Vec<TimedWord>,
}

#[derive(Serialize, ToSchema)]
enum TimestampsType {
    #[serde(rename = "speech.audio.timestamps")]
    SpeechAudioTimestamps,
}

/// The last event of an SSE answer.
#[derive(Serialize, ToSchema)]
pub(super) struct SpeechAudioDone {
    #[serde(rename = "type")]
    kind: DoneType,
    usage: SpeechUsage,
}

#[derive(Serialize, ToSchema)]
enum DoneType {
    #[serde(rename = "speech.audio.done")]
    SpeechAudioDone,
}

/// OpenAI's usage numbers, counted in what these engines have instead of tokens.
#[derive(Serialize, ToSchema)]
struct SpeechUsage {
    /// Characters of `input`.
    input_tokens: u64,
    /// Audio samples sent, at `X-Audio-Sample-Rate`.
    output_tokens: u64,
    /// The sum of both.
    total_tokens: u64,
}
