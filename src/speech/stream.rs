//! Streamed responses: encoded audio as it is computed, a piece of a sentence at a time.
//!
//! The first sentence is queued on its own so it starts at once, and is computed in pieces
//! so that its first audio leaves long before its end exists (an engine that needs whole
//! utterances speaks its first phrase apart: [`crate::text::phrase`]); the rest follow a few
//! at a time as they are delivered.
//! The complete body goes to the cache when the stream ends, and identical requests that
//! arrive meanwhile wait for it (or take over if this client goes away).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::encoder::BlockingEncoder;
use super::synthesis::{Delivery, Synthesis};
use super::timed::{Finder, WordStamp};
use super::{join, warn_if_no_speech, Job, SpeechError, SpeechService, Utterance, Utterances};
use crate::audio::speech_like::SpeechWindows;
use crate::cache::{CacheLayer, CacheStatus, CachedAudio, StreamLease, StreamRole};
use crate::engine::WordTiming;
use crate::metrics as m;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};

/// A streamed response body: encoded bytes, or with word timestamps [`TimedChunk`]s.
pub struct SpeechStream<C = Bytes> {
    pub sample_rate: u32,
    pub cache: CacheStatus,
    /// The cache the bytes came from; `None` when they are synthesized for this request.
    pub layer: Option<CacheLayer>,
    /// The encoded audio in order; an error ends the stream.
    pub chunks: BoxStream<'static, Result<C, SpeechError>>,
    /// Samples produced so far, at `sample_rate` (for usage reports once the stream ends).
    pub samples: Arc<AtomicU64>,
}

impl<C: Send + 'static> SpeechStream<C> {
    /// The same stream with each chunk turned into another.
    pub fn map_chunks<D>(self, f: impl Fn(C) -> D + Send + 'static) -> SpeechStream<D> {
        SpeechStream {
            sample_rate: self.sample_rate,
            cache: self.cache,
            layer: self.layer,
            chunks: self.chunks.map(move |chunk| chunk.map(&f)).boxed(),
            samples: self.samples,
        }
    }
}

/// The next bytes of a stream and the words whose audio they complete (times from the start
/// of the stream, as in [`TimedSpeech`](super::TimedSpeech)).
#[derive(Debug, Clone)]
pub struct TimedChunk {
    pub audio: Bytes,
    pub words: Vec<WordStamp>,
}

impl SpeechService {
    /// Streams the encoded audio sentence by sentence. A cached body is sent at once. Errors
    /// after the first chunk end the stream.
    pub async fn stream(&self, job: Job) -> Result<SpeechStream, SpeechError> {
        let rate = job.voice().sample_rate;
        let format = job.format();
        let sample_rate = format.output_sample_rate(rate);
        let samples = Arc::new(AtomicU64::new(0));
        let lease = if !job.use_cache() {
            None
        } else {
            match self
                .inner
                .cache
                .lead_or_follow(self.key(&job, true).await?)
                .await?
            {
                StreamRole::Lead(lease) => lease,
                StreamRole::Done(audio, outcome) => {
                    let bytes = audio.bytes.clone();
                    m::add_audio_seconds(audio.duration_s);
                    samples.store(
                        (audio.duration_s * f64::from(audio.sample_rate)).round() as u64,
                        Ordering::Relaxed,
                    );
                    return Ok(SpeechStream {
                        sample_rate: audio.sample_rate,
                        cache: outcome.status,
                        layer: outcome.layer,
                        chunks: stream::once(async move { Ok(bytes) }).boxed(),
                        samples,
                    });
                }
            }
        };
        metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
        let started = self.start(&job, true).await.and_then(|pending| {
            BlockingEncoder::of(&job).map(|encoder| StreamState::new(pending, encoder, &job))
        });
        let mut state = match started {
            Ok(started) => started,
            Err(e) => {
                if let Some(lease) = lease {
                    lease.complete(Err(e.clone())).await;
                }
                return Err(e);
            }
        };
        state.body = lease.is_some().then(Vec::new);
        state.lease = lease;
        state.samples = samples.clone();
        let chunks = state
            .into_stream()
            .map(|chunk| chunk.map(|chunk| chunk.audio))
            .boxed();
        Ok(SpeechStream {
            sample_rate,
            cache: if !job.use_cache() || !self.inner.cache.enabled() {
                CacheStatus::Bypass
            } else {
                CacheStatus::Miss
            },
            layer: None,
            chunks,
            samples,
        })
    }

    /// Streams the encoded audio as [`stream`](Self::stream) does, with the words each chunk
    /// completes. Never cached: the timings are not kept with the audio.
    pub async fn stream_with_words(
        &self,
        job: Job,
    ) -> Result<SpeechStream<TimedChunk>, SpeechError> {
        let request = Utterances::of_input(&job, true);
        metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
        let sentences = request.script.utterances.clone();
        let finder = Finder::within(job.input(), request.script.text_ranges.clone());
        let pending = self.start_utterances(&job, request, true).await?;
        let mut state = StreamState::new(pending, BlockingEncoder::of(&job)?, &job);
        state.words = Some(WordTrack {
            finder,
            sentences: sentences.into(),
            sentence_start: 0,
            sentence: 0,
            placed: Vec::new(),
        });
        let (sample_rate, samples) = (state.sample_rate, state.samples.clone());
        Ok(SpeechStream {
            sample_rate,
            cache: CacheStatus::Bypass,
            layer: None,
            chunks: state.into_stream().boxed(),
            samples,
        })
    }
}

/// Where the words of a streamed response stand.
struct WordTrack {
    finder: Finder,
    /// The sentences not yet complete.
    sentences: std::collections::VecDeque<Utterance>,
    /// Where the current sentence starts in the stream, in samples, and its number.
    sentence_start: usize,
    sentence: usize,
    /// Words of the current sentence, placed, waiting for their audio to be out.
    placed: Vec<WordStamp>,
}

struct StreamState {
    pending: Synthesis,
    encoder: BlockingEncoder,
    /// The whole body so far, for the cache and identical requests waiting on the lease.
    body: Option<Vec<u8>>,
    /// Dropped unfinished when the client goes away: waiting identical requests take over.
    lease: Option<StreamLease<SpeechError>>,
    joiner: join::Joiner,
    /// For a stream with word timestamps.
    words: Option<WordTrack>,
    /// The voice's native rate, at which sentences arrive.
    rate: u32,
    /// The encoded audio's rate.
    sample_rate: u32,
    samples: Arc<AtomicU64>,
    /// Whether it sounds like speech, for the cached body and the log.
    heard: SpeechWindows,
    /// The start of the input, for the log.
    text_head: String,
}

impl StreamState {
    /// A stream of `pending`'s audio without cache or words (the callers add those).
    fn new(pending: Synthesis, encoder: BlockingEncoder, job: &Job) -> Self {
        let rate = job.voice().sample_rate;
        Self {
            pending,
            encoder,
            body: None,
            lease: None,
            joiner: join::Joiner::with_pauses(rate, job.script().pauses()),
            words: None,
            rate,
            sample_rate: job.format().output_sample_rate(rate),
            samples: Arc::new(AtomicU64::new(0)),
            heard: SpeechWindows::new(rate),
            text_head: job.input().chars().take(super::TEXT_IN_LOG).collect(),
        }
    }

    fn into_stream(self) -> impl futures::Stream<Item = Result<TimedChunk, SpeechError>> {
        stream::unfold(self, |mut state| async move {
            let next = state.next_chunk().await;
            next.map(|chunk| (chunk, state))
        })
    }

    async fn next_chunk(&mut self) -> Option<Result<TimedChunk, SpeechError>> {
        let mut words = Vec::new();
        let chunk = loop {
            if !self.encoder.is_open() {
                return None;
            }
            let mut samples = Vec::new();
            match self.pending.next_piece().await {
                Some(Ok(delivery)) => {
                    match delivery {
                        Delivery::Piece(pcm) => {
                            let start = self.joiner.push(&pcm.samples, &mut samples);
                            if let Some(track) = self.words.as_mut() {
                                let emitted = self.joiner.position();
                                words =
                                    track.piece(start, pcm.words.as_deref(), self.rate, emitted);
                            }
                        }
                        Delivery::SentenceEnd => {
                            self.joiner.end_sentence(&mut samples);
                            if let Some(track) = self.words.as_mut() {
                                words = track.end_sentence();
                            }
                        }
                    }
                    if samples.is_empty() && words.is_empty() {
                        continue;
                    }
                    let at_output_rate = self.audio_s() * f64::from(self.sample_rate);
                    self.samples
                        .store(at_output_rate.round() as u64, Ordering::Relaxed);
                    self.heard.push(&samples);
                    break self.encoder.push(samples).await;
                }
                Some(Err(e)) => {
                    self.encoder.close();
                    if let Some(lease) = self.lease.take() {
                        lease.complete(Err(e.clone())).await;
                    }
                    return Some(Err(e));
                }
                None => {
                    let mut silence = Vec::new();
                    self.joiner.finish(&mut silence);
                    self.heard.push(&silence);
                    let last = self.encoder.finish(silence).await;
                    let audio_s = self.audio_s();
                    m::add_audio_seconds(audio_s);
                    if let (Ok(tail), Some(mut body), Some(lease)) =
                        (&last, self.body.take(), self.lease.take())
                    {
                        body.extend_from_slice(tail);
                        let audio = CachedAudio {
                            bytes: Bytes::from(body),
                            sample_rate: self.sample_rate,
                            duration_s: audio_s,
                            no_speech: warn_if_no_speech(&self.heard, &self.text_head),
                        };
                        lease.complete(Ok(audio)).await;
                    }
                    break last;
                }
            }
        };
        if let Err(e) = &chunk {
            if let Some(lease) = self.lease.take() {
                lease.complete(Err(e.clone())).await;
            }
        }
        if let (Ok(bytes), Some(body)) = (&chunk, self.body.as_mut()) {
            body.extend_from_slice(bytes);
        }
        Some(chunk.map(|audio| TimedChunk {
            audio: Bytes::from(audio),
            words,
        }))
    }

    /// Seconds of audio handed to the encoder so far, pauses included.
    fn audio_s(&self) -> f64 {
        self.joiner.position() as f64 / f64::from(self.rate)
    }
}

impl WordTrack {
    /// A piece of the current sentence arrived; `start` says where the sentence starts when
    /// this piece starts it, and `timings` come with one of its pieces. Returns the words whose
    /// audio is complete once `emitted` samples of the stream are out.
    fn piece(
        &mut self,
        start: Option<usize>,
        timings: Option<&[WordTiming]>,
        rate: u32,
        emitted: usize,
    ) -> Vec<WordStamp> {
        if let Some(start) = start {
            self.sentence_start = start;
        }
        if let (Some(timings), Some(utterance)) = (timings, self.sentences.front()) {
            let placed =
                self.finder
                    .place(utterance, timings, self.sentence_start, rate, self.sentence);
            self.placed.extend(placed);
        }
        let heard = emitted as f64 / f64::from(rate);
        let complete = self.placed.partition_point(|word| word.end_s <= heard);
        self.placed.drain(..complete).collect()
    }

    /// The current sentence is complete: its words not handed out yet.
    fn end_sentence(&mut self) -> Vec<WordStamp> {
        self.sentences.pop_front();
        self.sentence += 1;
        std::mem::take(&mut self.placed)
    }
}
