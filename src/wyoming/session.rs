//! One Wyoming connection: reads events, drives the [`Synthesizer`], writes audio events.
//!
//! The rules that make Home Assistant happy live here: a one-shot `synthesize` gets exactly one
//! `audio-start` … `audio-stop` around all its sentences; a text stream gets one such pair per
//! sentence as soon as the sentence is complete, then `synthesize-stopped`; the `synthesize`
//! a client repeats inside a stream for older servers is ignored. A request that fails gets an
//! `error` event and the connection is closed, because clients wait for `audio-stop` or
//! `synthesize-stopped` and treat only a close as the end of a failed request.

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::time::{sleep_until, timeout, timeout_at, Instant};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use super::event::{ClientEvent, EventError, RequestedVoice, ServerEvent};
use super::frame::{Codec, FrameError};
use super::{Limits, SpeakError, Speech, Synthesizer, VoiceChoice};
use crate::speech::{LiveText, Sentence};

/// Serves one connection until the client closes it, breaks the protocol, goes idle past
/// [`Limits::idle_timeout`], a request fails, or `shutdown` is cancelled (checked between
/// events, so a request being spoken is finished first). Never panics on input.
pub async fn serve_connection<S, R, W>(
    synthesizer: &S,
    reader: R,
    writer: W,
    limits: &Limits,
    shutdown: &CancellationToken,
) where
    S: Synthesizer + ?Sized,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut session = Session {
        synthesizer,
        limits,
        events: FramedRead::new(reader, Codec::new(limits.frame())),
        out: FramedWrite::new(writer, Codec::new(limits.frame())),
        stream: None,
    };
    match session.run(shutdown).await {
        Ok(()) => {}
        Err(Stop::Refuse { code, text }) => {
            tracing::debug!(code, %text, "wyoming: refusing and closing");
            // The connection closes either way; a failed write only means the client left.
            let _ = session.send(ServerEvent::Error { code, text }).await;
        }
        Err(Stop::Gone) => tracing::debug!("wyoming: client gone or too slow"),
    }
    let _ = timeout(limits.write_timeout, session.out.get_mut().shutdown()).await;
}

/// Why a session ends before the client closes it.
#[derive(Debug)]
enum Stop {
    /// Tell the client why in an `error` event, then close.
    Refuse { code: &'static str, text: String },
    /// The client cannot be written to any more (closed, or not reading).
    Gone,
}

fn refuse(code: &'static str, text: impl ToString) -> Stop {
    Stop::Refuse {
        code,
        text: text.to_string(),
    }
}

impl From<SpeakError> for Stop {
    fn from(e: SpeakError) -> Self {
        let code = match e {
            SpeakError::UnknownVoice(_) => "unknown-voice",
            SpeakError::InvalidRequest(_) => "invalid-request",
            SpeakError::Busy(_) => "busy",
            SpeakError::Failed(_) => "synthesis-failed",
        };
        refuse(code, e)
    }
}

/// An open `synthesize-start` … `synthesize-stop` stream.
struct TextStream {
    voice: VoiceChoice,
    /// The text not yet in a sentence, in the pipeline's hands.
    text: LiveText,
    chars: usize,
}

struct Session<'a, S: ?Sized, R, W> {
    synthesizer: &'a S,
    limits: &'a Limits,
    events: FramedRead<R, Codec>,
    out: FramedWrite<W, Codec>,
    stream: Option<TextStream>,
}

impl<S, R, W> Session<'_, S, R, W>
where
    S: Synthesizer + ?Sized,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    async fn run(&mut self, shutdown: &CancellationToken) -> Result<(), Stop> {
        loop {
            let overdue = self.stream.as_ref().and_then(|s| s.text.deadline());
            let idle = Instant::now() + self.limits.idle_timeout;
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Ok(()),
                _ = sleep_until(overdue.unwrap_or(idle)), if overdue.is_some() => {
                    self.speak_overdue().await?;
                }
                next = timeout_at(idle, self.events.next()) => match next {
                    Err(_) => {
                        tracing::debug!("wyoming: idle connection closed");
                        return Ok(());
                    }
                    Ok(None) => return Ok(()),
                    Ok(Some(Err(FrameError::Io(_)))) => return Err(Stop::Gone),
                    Ok(Some(Err(e))) => return Err(refuse("bad-frame", e)),
                    Ok(Some(Ok(raw))) => match ClientEvent::parse(raw) {
                        Ok(event) => self.handle(event).await?,
                        Err(e @ EventError::Unknown(_)) => {
                            // Framing is intact, so the connection can go on.
                            self.send(ServerEvent::Error {
                                code: "unknown-event",
                                text: e.to_string(),
                            })
                            .await?;
                        }
                        Err(e) => return Err(refuse("invalid-event", e)),
                    },
                },
            }
        }
    }

    async fn handle(&mut self, event: ClientEvent) -> Result<(), Stop> {
        match event {
            ClientEvent::Describe => {
                let voices = self.synthesizer.voices().await;
                self.send(ServerEvent::Info { voices }).await
            }
            ClientEvent::Ping { text } => self.send(ServerEvent::Pong { text }).await,
            ClientEvent::Synthesize { .. } if self.stream.is_some() => {
                // The whole text again, for servers without streaming: already being spoken.
                Ok(())
            }
            ClientEvent::Synthesize { text, voice } => {
                check_length(text.chars().count(), self.limits.max_text_chars)?;
                if text.trim().is_empty() {
                    return Err(refuse("empty-text", "nothing to speak"));
                }
                let voice = self.resolve(voice).await?;
                let speech = self.synthesizer.speak(text, voice).await?;
                self.play(speech).await
            }
            ClientEvent::SynthesizeStart { voice } => {
                if self.stream.is_some() {
                    return Err(refuse("unexpected-event", "a text stream is already open"));
                }
                let voice = self.resolve(voice).await?;
                self.stream = Some(TextStream {
                    voice,
                    text: LiveText::new(self.limits.sentence_max_wait),
                    chars: 0,
                });
                Ok(())
            }
            ClientEvent::SynthesizeChunk { text } => {
                let Some(stream) = self.stream.as_mut() else {
                    return Err(refuse(
                        "unexpected-event",
                        "synthesize-chunk outside a stream",
                    ));
                };
                stream.chars += text.chars().count();
                check_length(stream.chars, self.limits.max_text_chars)?;
                let sentences = stream.text.push(&text);
                let voice = stream.voice.clone();
                self.speak_each(sentences, &voice).await
            }
            ClientEvent::SynthesizeStop => {
                let Some(mut stream) = self.stream.take() else {
                    return Err(refuse(
                        "unexpected-event",
                        "synthesize-stop outside a stream",
                    ));
                };
                self.speak_each(stream.text.flush(), &stream.voice).await?;
                self.send(ServerEvent::SynthesizeStopped).await
            }
        }
    }

    /// Streamed text that waited too long for its sentence to end.
    async fn speak_overdue(&mut self) -> Result<(), Stop> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(());
        };
        let sentences = stream.text.flush_overdue();
        let voice = stream.voice.clone();
        self.speak_each(sentences, &voice).await
    }

    /// Each sentence in its own `audio-start` … `audio-stop`.
    async fn speak_each(
        &mut self,
        sentences: Vec<Sentence>,
        voice: &VoiceChoice,
    ) -> Result<(), Stop> {
        for sentence in sentences {
            let speech = self
                .synthesizer
                .speak_sentence(sentence, voice.clone())
                .await?;
            self.play(speech).await?;
        }
        Ok(())
    }

    /// One `audio-start`, the audio in chunks of [`Limits::samples_per_chunk`] samples, one
    /// `audio-stop`. The pipeline's bytes are the payloads as they are, only cut to size.
    async fn play(&mut self, speech: Speech) -> Result<(), Stop> {
        let rate = speech.sample_rate;
        self.send(ServerEvent::AudioStart { rate }).await?;
        let per_chunk = 2 * self.limits.samples_per_chunk.max(1);
        let mut chunk = BytesMut::new();
        let mut pcm = speech.pcm;
        while let Some(piece) = pcm.next().await {
            let mut piece: Bytes = piece?;
            while !piece.is_empty() {
                let full = if chunk.is_empty() && piece.len() >= per_chunk {
                    piece.split_to(per_chunk)
                } else {
                    let take = (per_chunk - chunk.len()).min(piece.len());
                    chunk.extend_from_slice(&piece.split_to(take));
                    if chunk.len() < per_chunk {
                        continue;
                    }
                    chunk.split().freeze()
                };
                self.send(ServerEvent::AudioChunk { rate, pcm: full })
                    .await?;
            }
        }
        if !chunk.is_empty() {
            let pcm = chunk.freeze();
            self.send(ServerEvent::AudioChunk { rate, pcm }).await?;
        }
        self.send(ServerEvent::AudioStop).await
    }

    /// Turns a voice asked for by language into the one that reads it; the pipeline resolves
    /// names.
    async fn resolve(&self, voice: RequestedVoice) -> Result<VoiceChoice, Stop> {
        match voice {
            RequestedVoice::Default => Ok(VoiceChoice::default()),
            RequestedVoice::Named {
                name,
                speaker,
                language,
            } => Ok(VoiceChoice {
                name: Some(name),
                speaker,
                language,
            }),
            RequestedVoice::Language(language) => self
                .synthesizer
                .voice_for_language(&language)
                .await
                .ok_or_else(|| refuse("unknown-language", format!("no voice speaks '{language}'"))),
        }
    }

    async fn send(&mut self, event: ServerEvent) -> Result<(), Stop> {
        match timeout(self.limits.write_timeout, self.out.send(event.into_raw())).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) | Err(_) => Err(Stop::Gone),
        }
    }
}

fn check_length(chars: usize, limit: usize) -> Result<(), Stop> {
    if chars > limit {
        return Err(refuse(
            "text-too-long",
            format!("text of {chars} characters is over the limit of {limit}"),
        ));
    }
    Ok(())
}
