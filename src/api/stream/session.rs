//! One WebSocket text stream: reads text pieces, hands them to the pipeline, which cuts them
//! into sentences, and sends each sentence's audio back in order, until the text ends, the
//! client goes, or a limit is hit.
//!
//! Everything happens in one task, one event at a time: a client message, a sentence whose
//! audio is ready, text that waited too long for its sentence to end, the idle timer, server
//! shutdown. At most [`LOOKAHEAD`] sentences are synthesized ahead of the one being sent, so
//! a client that writes faster than speech is computed queues text (bounded by
//! [`Limits::max_pending_chars`]) rather than batcher slots.

use std::collections::VecDeque;
use std::time::Duration;

use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket};
use tokio::time::{sleep_until, timeout, Instant};
use tokio_util::sync::CancellationToken;

use super::message::{ClientMessage, Kind, Refusal, ServerMessage, StreamSettings};
use crate::speech::{LiveSpeech, Request, Sentence, SentenceAudio, SentencePart, SpeechService};

/// Sentences synthesized while an earlier one is still being computed or sent.
const LOOKAHEAD: usize = 2;

/// OpenAI's names for "the default engine" and "the default voice".
const DEFAULT_MODEL: &str = "tts-1";
const DEFAULT_VOICE: &str = "alloy";
const DEFAULT_FORMAT: &str = "pcm";
/// How long text waits for its sentence to end unless the first message says otherwise.
const DEFAULT_MAX_WAIT: Duration = Duration::from_millis(1500);
const MAX_WAIT_LIMIT_MS: u64 = 60_000;
/// How long the close handshake may take before the connection is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a connection whose input cannot be read stays open after its close frame.
const UNREAD_LINGER: Duration = Duration::from_secs(1);

/// What bounds one stream.
#[derive(Debug, Clone)]
pub(super) struct Limits {
    /// How long the client may send nothing while nothing is left to speak.
    pub idle_timeout: Duration,
    /// Characters received and not yet spoken; more is refused with 1009.
    pub max_pending_chars: usize,
    /// How long one message may take to send; a client that stops reading is dropped.
    pub write_timeout: Duration,
}

/// How a stream ended; the close code it gets.
#[derive(Debug)]
enum Stop {
    /// All text was spoken.
    Done,
    /// The server is shutting down; what was received was spoken first.
    ShutDown,
    Refused(Refusal),
    /// Refused after a read error: the input cannot be read any further (the rest of a
    /// message over the size limit would be buffered whole), so the close handshake is not
    /// awaited.
    Unreadable(Refusal),
    /// The client closed the connection (or sent a close) before the end.
    ClientClosed,
    /// The connection broke, or the client stopped reading.
    Gone,
}

impl From<Refusal> for Stop {
    fn from(refusal: Refusal) -> Self {
        Stop::Refused(refusal)
    }
}

enum Work {
    Sentence(Sentence),
    Flushed,
}

/// Handed to the pipeline, in order: a sentence's audio on its way, or a flush mark.
enum InFlight {
    Sentence {
        sentence: Sentence,
        audio: SentenceAudio,
        /// Bytes of its audio sent so far.
        sent: usize,
    },
    Flushed,
}

/// What the head of [`InFlight`] has for the client.
enum Progress {
    Part(SentencePart),
    SentenceDone,
    Flushed,
}

/// The next thing the oldest work in flight has: its sentence's next part of audio as soon
/// as it is computed, that the sentence is complete, or a flush mark (at once).
async fn progress(in_flight: &mut VecDeque<InFlight>) -> Progress {
    match in_flight.front_mut() {
        Some(InFlight::Sentence { audio, .. }) => match audio.next_part().await {
            Some(part) => Progress::Part(part),
            None => Progress::SentenceDone,
        },
        Some(InFlight::Flushed) | None => Progress::Flushed,
    }
}

/// Serves one connection; returns the close code it ended with (1006 when there was none).
pub(super) async fn serve(
    socket: WebSocket,
    speech: SpeechService,
    limits: Limits,
    shutdown: CancellationToken,
) -> u16 {
    let mut session = Session {
        socket,
        speech,
        limits,
        live: None,
        waiting: VecDeque::new(),
        in_flight: VecDeque::new(),
        unspoken_chars: 0,
        ending: None,
        spoken: 0,
        audio_bytes: 0,
        last_heard: Instant::now(),
    };
    let stop = match session.run(&shutdown).await {
        Ok(stop) => session.finish(stop).await.unwrap_or_else(|failed| failed),
        Err(stop) => stop,
    };
    match stop {
        Stop::Done => session.close(close_code::NORMAL, "done").await,
        Stop::ShutDown => {
            session
                .close(close_code::AWAY, "the server is shutting down")
                .await
        }
        Stop::Refused(refusal) => session.refuse(refusal, true).await,
        Stop::Unreadable(refusal) => session.refuse(refusal, false).await,
        Stop::ClientClosed => {
            session.drain().await;
            close_code::NORMAL
        }
        Stop::Gone => close_code::ABNORMAL,
    }
}

/// Turns away a connection that arrived when the stream limit was reached (or at shutdown).
pub(super) async fn turn_away(mut socket: WebSocket, refusal: Refusal) {
    let message = serde_json::to_string(&refusal.to_message()).unwrap_or_default();
    let _ = timeout(CLOSE_TIMEOUT, async {
        socket.send(Message::text(message)).await?;
        socket
            .send(Message::Close(Some(CloseFrame {
                code: refusal.close_code,
                reason: refusal.reason().into(),
            })))
            .await?;
        while let Some(Ok(_)) = socket.recv().await {}
        Ok::<(), axum::Error>(())
    })
    .await;
}

struct Session {
    socket: WebSocket,
    speech: SpeechService,
    limits: Limits,
    /// Opened by the first message; it also holds the text not yet in a sentence.
    live: Option<LiveSpeech>,
    /// Sentences not yet handed to the pipeline, in order, and flush marks between them.
    waiting: VecDeque<Work>,
    in_flight: VecDeque<InFlight>,
    /// Characters of sentences waiting or in flight.
    unspoken_chars: usize,
    /// Set once the text has ended: nothing more is read into the buffer.
    ending: Option<Stop>,
    spoken: usize,
    audio_bytes: u64,
    last_heard: Instant,
}

impl Session {
    /// Runs until all text is spoken (or shutdown has let it be spoken); returns how it ended.
    async fn run(&mut self, shutdown: &CancellationToken) -> Result<Stop, Stop> {
        loop {
            self.start_waiting();
            if self.ending.is_some() && self.waiting.is_empty() && self.in_flight.is_empty() {
                return Ok(self.ending.take().unwrap_or(Stop::Done));
            }
            let overdue = self
                .live
                .as_ref()
                .and_then(LiveSpeech::deadline)
                .filter(|_| self.ending.is_none());
            let idle = self.last_heard + self.limits.idle_timeout;
            let busy = !self.in_flight.is_empty() || !self.waiting.is_empty();
            tokio::select! {
                biased;
                _ = shutdown.cancelled(), if self.ending.is_none() => self.end(Stop::ShutDown)?,
                next = progress(&mut self.in_flight), if !self.in_flight.is_empty() => {
                    self.deliver(next).await?;
                }
                _ = sleep_until(overdue.unwrap_or(idle)), if overdue.is_some() => {
                    let ready = self.live.as_mut().map(LiveSpeech::flush_overdue);
                    self.enqueue(ready.unwrap_or_default());
                }
                _ = sleep_until(idle), if !busy => {
                    return Err(Refusal::new(
                        close_code::POLICY,
                        "idle_timeout",
                        format!(
                            "nothing received for {} s with nothing left to speak",
                            self.limits.idle_timeout.as_secs()
                        ),
                    )
                    .into());
                }
                message = self.socket.recv() => {
                    self.last_heard = Instant::now();
                    self.receive(message).await?;
                }
            }
        }
    }

    async fn receive(&mut self, message: Option<Result<Message, axum::Error>>) -> Result<(), Stop> {
        match message {
            None => Err(Stop::Gone),
            Some(Err(e)) => Err(read_error(e)),
            Some(Ok(Message::Text(text))) => self.on_text(text.as_str()).await,
            Some(Ok(Message::Binary(_))) => Err(Refusal::new(
                close_code::UNSUPPORTED,
                "unsupported_message",
                "binary messages are not accepted; send JSON text messages",
            )
            .into()),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => Ok(()),
            Some(Ok(Message::Close(_))) => Err(Stop::ClientClosed),
        }
    }

    async fn on_text(&mut self, raw: &str) -> Result<(), Stop> {
        let message: ClientMessage = serde_json::from_str(raw).map_err(|e| {
            Refusal::new(
                close_code::UNSUPPORTED,
                "invalid_message",
                format!("not a stream message: {e}"),
            )
        })?;
        match self.ending {
            // The text is being finished for the shutdown; anything new is not spoken.
            Some(Stop::ShutDown) => return Ok(()),
            Some(_) => {
                return Err(Refusal::new(
                    close_code::POLICY,
                    "stream_ended",
                    "text after the end of the stream; open a new stream",
                )
                .into())
            }
            None => {}
        }
        if self.live.is_none() {
            self.open(message.settings).await?;
        } else if !message.settings.is_empty() {
            return Err(Refusal::new(
                close_code::POLICY,
                "settings_after_start",
                "model, voice, format and parameters are only read from the first message",
            )
            .into());
        }
        match message.text.as_deref() {
            Some("") => return self.end(Stop::Done),
            Some(text) => self.push(text)?,
            None => {}
        }
        if message.flush == Some(true) || message.kind == Some(Kind::Flush) {
            self.flush()?;
            self.waiting.push_back(Work::Flushed);
        }
        if message.kind == Some(Kind::End) {
            self.end(Stop::Done)?;
        }
        Ok(())
    }

    /// Opens the pipeline's stream with the first message's settings and announces it.
    async fn open(&mut self, settings: StreamSettings) -> Result<(), Stop> {
        let max_wait = match settings.max_wait_ms {
            None => Some(DEFAULT_MAX_WAIT),
            Some(0) => None,
            Some(ms) if ms <= MAX_WAIT_LIMIT_MS => Some(Duration::from_millis(ms)),
            Some(ms) => {
                let mut refusal = Refusal::new(
                    close_code::POLICY,
                    "invalid_value",
                    format!("'max_wait_ms' must be at most {MAX_WAIT_LIMIT_MS}, got {ms}."),
                );
                refusal.param = Some("max_wait_ms".into());
                return Err(refusal.into());
            }
        };
        let live = self
            .speech
            .live(Request {
                model: settings.model.unwrap_or_else(|| DEFAULT_MODEL.into()),
                voice: settings
                    .voice
                    .map_or_else(|| DEFAULT_VOICE.into(), |voice| voice.0),
                response_format: Some(
                    settings
                        .response_format
                        .unwrap_or_else(|| DEFAULT_FORMAT.into()),
                ),
                speed: settings.speed,
                seed: settings.seed,
                noise_scale: settings.noise_scale,
                noise_w: settings.noise_w,
                input_format: settings.input_format,
                ..Request::default()
            })
            .await
            .map_err(Refusal::from)?
            .with_max_wait(max_wait);
        let start = ServerMessage::Start {
            voice: live.job().voice().key.to_string(),
            response_format: live.job().format().as_str(),
            sample_rate: live.sample_rate(),
        };
        self.live = Some(live);
        self.send_json(&start).await
    }

    /// Adds a text piece, refusing it if too much text would wait to be spoken.
    fn push(&mut self, text: &str) -> Result<(), Stop> {
        let Some(live) = self.live.as_mut() else {
            return Ok(());
        };
        let waiting = self.unspoken_chars + live.pending_chars() + text.chars().count();
        if waiting > self.limits.max_pending_chars {
            return Err(Refusal::new(
                close_code::SIZE,
                "too_much_text",
                format!(
                    "{waiting} characters would wait to be spoken; the limit is {}",
                    self.limits.max_pending_chars
                ),
            )
            .into());
        }
        let ready = live.push_text(text).map_err(Refusal::from)?;
        self.enqueue(ready);
        Ok(())
    }

    /// Everything buffered, as if the text ended here, goes to be spoken.
    fn flush(&mut self) -> Result<(), Stop> {
        let rest = self.live.as_mut().map(LiveSpeech::flush).transpose();
        let rest = rest.map_err(Refusal::from)?;
        self.enqueue(rest.unwrap_or_default());
        Ok(())
    }

    fn enqueue(&mut self, sentences: Vec<Sentence>) {
        for sentence in sentences {
            self.unspoken_chars += sentence.text().chars().count();
            self.waiting.push_back(Work::Sentence(sentence));
        }
    }

    /// No more text: what is buffered is spoken, then the stream closes with `how`.
    fn end(&mut self, how: Stop) -> Result<(), Stop> {
        self.ending = Some(how);
        self.flush()
    }

    /// Hands waiting sentences to the pipeline while fewer than [`LOOKAHEAD`] are in flight.
    fn start_waiting(&mut self) {
        let Some(live) = self.live.as_mut() else {
            return;
        };
        while self.in_flight.len() < LOOKAHEAD {
            let Some(work) = self.waiting.pop_front() else {
                break;
            };
            let next = match work {
                Work::Sentence(sentence) => InFlight::Sentence {
                    audio: live.sentence(sentence.clone()),
                    sentence,
                    sent: 0,
                },
                Work::Flushed => InFlight::Flushed,
            };
            self.in_flight.push_back(next);
        }
    }

    /// Sends the oldest sentence's next audio, or, once it is complete, its `sentence`
    /// message; or a flush mark's `flushed`.
    async fn deliver(&mut self, progress: Progress) -> Result<(), Stop> {
        let live = self.live.as_mut().ok_or(Stop::Gone)?;
        match progress {
            Progress::Flushed => {
                self.in_flight.pop_front();
                let flushed = ServerMessage::Flushed {
                    sentences: self.spoken,
                };
                self.send_json(&flushed).await
            }
            Progress::Part(part) => {
                let bytes = live.encode(part).await.map_err(Refusal::from)?;
                if let Some(InFlight::Sentence { sent, .. }) = self.in_flight.front_mut() {
                    *sent += bytes.len();
                }
                self.audio_bytes += bytes.len() as u64;
                if bytes.is_empty() {
                    return Ok(());
                }
                self.send(Message::Binary(bytes)).await
            }
            Progress::SentenceDone => {
                let Some(InFlight::Sentence {
                    sentence,
                    audio,
                    sent,
                }) = self.in_flight.pop_front()
                else {
                    return Ok(());
                };
                let spoken = live.end_sentence(audio).map_err(Refusal::from)?;
                let text = sentence.text();
                self.unspoken_chars = self.unspoken_chars.saturating_sub(text.chars().count());
                let sentence = ServerMessage::Sentence {
                    index: self.spoken,
                    text,
                    audio_bytes: sent,
                    start_s: spoken.start_s,
                    duration_s: spoken.duration_s,
                };
                self.spoken += 1;
                self.send_json(&sentence).await
            }
        }
    }

    /// After the last sentence: the encoder's tail and `done`.
    async fn finish(&mut self, stop: Stop) -> Result<Stop, Stop> {
        let Some(live) = self.live.as_mut() else {
            return Ok(stop);
        };
        let tail = live.finish().await.map_err(Refusal::from)?;
        let duration_s = live.duration_s();
        if !tail.is_empty() {
            self.audio_bytes += tail.len() as u64;
            self.send(Message::Binary(tail)).await?;
        }
        let done = ServerMessage::Done {
            sentences: self.spoken,
            audio_bytes: self.audio_bytes,
            duration_s,
        };
        self.send_json(&done).await?;
        Ok(stop)
    }

    async fn send_json(&mut self, message: &ServerMessage<'_>) -> Result<(), Stop> {
        let text = serde_json::to_string(message).map_err(|e| {
            Refusal::new(
                close_code::ERROR,
                "internal_error",
                format!("encoding a message: {e}"),
            )
        })?;
        self.send(Message::text(text)).await
    }

    async fn send(&mut self, message: Message) -> Result<(), Stop> {
        match timeout(self.limits.write_timeout, self.socket.send(message)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) | Err(_) => Err(Stop::Gone),
        }
    }

    /// Says why in an `error` message, then closes with the refusal's code. When the input
    /// can no longer be `readable`, the client's close frame is not awaited.
    async fn refuse(&mut self, refusal: Refusal, readable: bool) -> u16 {
        tracing::debug!(code = refusal.close_code, reason = %refusal.message, "stream refused");
        let _ = self.send_json(&refusal.to_message()).await;
        if readable {
            return self.close(refusal.close_code, &refusal.reason()).await;
        }
        let frame = CloseFrame {
            code: refusal.close_code,
            reason: refusal.reason().into(),
        };
        if self.send(Message::Close(Some(frame))).await.is_ok() {
            // Unread input makes the kernel reset the connection when it closes, which can
            // discard the close frame before the client has read it: give it a moment.
            tokio::time::sleep(UNREAD_LINGER).await;
        }
        refusal.close_code
    }

    /// Sends the close frame and waits briefly for the client's; returns `code`.
    async fn close(&mut self, code: u16, reason: &str) -> u16 {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        if self.send(Message::Close(Some(frame))).await.is_ok() {
            self.drain().await;
        }
        code
    }

    /// Reads until the connection ends, so the close handshake completes and unread input
    /// does not reset the connection before the client has read the close frame.
    async fn drain(&mut self) {
        let _ = timeout(CLOSE_TIMEOUT, async {
            while let Some(Ok(_)) = self.socket.recv().await {}
        })
        .await;
    }
}

/// A read error: a message over the size limit or broken framing is refused, anything else
/// broke the connection.
fn read_error(e: axum::Error) -> Stop {
    let Ok(e) = e.into_inner().downcast::<tungstenite::Error>() else {
        return Stop::Gone;
    };
    let refusal = match *e {
        tungstenite::Error::Capacity(e) => Refusal::new(
            close_code::SIZE,
            "message_too_large",
            format!("message too large: {e}"),
        ),
        tungstenite::Error::Utf8(_) => Refusal::new(
            close_code::INVALID,
            "invalid_utf8",
            "a text message was not valid UTF-8",
        ),
        tungstenite::Error::Protocol(
            tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
        ) => return Stop::Gone,
        tungstenite::Error::Protocol(e) => {
            Refusal::new(close_code::PROTOCOL, "protocol_error", e.to_string())
        }
        _ => return Stop::Gone,
    };
    Stop::Unreadable(refusal)
}
