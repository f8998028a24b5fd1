//! Streamed responses: encoded audio as it is computed, a piece of a sentence at a time.
//!
//! The first sentence is queued on its own so it starts at once, and is computed in pieces
//! so that its first audio leaves long before its end exists; the rest follow a few at a
//! time as they are delivered.
//! The complete body goes to the cache when the stream ends, and identical requests that
//! arrive meanwhile wait for it (or take over if this client goes away).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::synthesis::{Delivery, Synthesis};
use super::{join, Job, SpeechError, SpeechService};
use crate::audio;
use crate::cache::{CacheLayer, CacheStatus, CachedAudio, StreamLease, StreamRole};
use crate::metrics as m;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};

/// A streamed response body.
pub struct SpeechStream {
    pub sample_rate: u32,
    pub cache: CacheStatus,
    /// The cache the bytes came from; `None` when they are synthesized for this request.
    pub layer: Option<CacheLayer>,
    /// Encoded bytes; an error ends the stream.
    pub chunks: BoxStream<'static, Result<Bytes, SpeechError>>,
    /// Samples produced so far, at `sample_rate` (for usage reports once the stream ends).
    pub samples: Arc<AtomicU64>,
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
            match self.inner.cache.lead_or_follow(self.key(&job)).await? {
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
            audio::stream_encoder(format, rate)
                .map(|encoder| (pending, encoder))
                .map_err(|e| {
                    SpeechError::Encoding(format!("encoder for {} failed: {e}", format.as_str()))
                })
        });
        let (pending, encoder) = match started {
            Ok(started) => started,
            Err(e) => {
                if let Some(lease) = lease {
                    lease.complete(Err(e.clone())).await;
                }
                return Err(e);
            }
        };
        let state = StreamState {
            pending,
            encoder: Some(encoder),
            body: lease.is_some().then(Vec::new),
            lease,
            joiner: join::Joiner::new(rate),
            rate,
            sample_rate,
            samples: samples.clone(),
        };
        let chunks = stream::unfold(state, |mut state| async move {
            let next = state.next_chunk().await;
            next.map(|chunk| (chunk, state))
        })
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
}

struct StreamState {
    pending: Synthesis,
    encoder: Option<Box<dyn audio::StreamEncoder>>,
    /// The whole body so far, for the cache and identical requests waiting on the lease.
    body: Option<Vec<u8>>,
    /// Dropped unfinished when the client goes away: waiting identical requests take over.
    lease: Option<StreamLease<SpeechError>>,
    joiner: join::Joiner,
    /// The voice's native rate, at which sentences arrive.
    rate: u32,
    /// The encoded audio's rate.
    sample_rate: u32,
    samples: Arc<AtomicU64>,
}

impl StreamState {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, SpeechError>> {
        let chunk = loop {
            self.encoder.as_ref()?;
            let mut samples = Vec::new();
            match self.pending.next_piece().await {
                Some(Ok(delivery)) => {
                    match delivery {
                        Delivery::Piece(pcm) => {
                            self.joiner.push(&pcm.samples, &mut samples);
                        }
                        Delivery::SentenceEnd => self.joiner.end_sentence(&mut samples),
                    }
                    if samples.is_empty() {
                        continue;
                    }
                    let at_output_rate = self.audio_s() * f64::from(self.sample_rate);
                    self.samples
                        .store(at_output_rate.round() as u64, Ordering::Relaxed);
                    let encoder = self.encoder.as_mut()?;
                    break encoder.push(&samples);
                }
                Some(Err(e)) => {
                    self.encoder = None;
                    if let Some(lease) = self.lease.take() {
                        lease.complete(Err(e.clone())).await;
                    }
                    return Some(Err(e));
                }
                None => {
                    let encoder = self.encoder.take()?;
                    let last = encoder.finish();
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
                        };
                        lease.complete(Ok(audio)).await;
                    }
                    break last;
                }
            }
        };
        let chunk = chunk.map_err(|e| SpeechError::Encoding(format!("encoding failed: {e}")));
        if let Err(e) = &chunk {
            if let Some(lease) = self.lease.take() {
                lease.complete(Err(e.clone())).await;
            }
        }
        if let (Ok(bytes), Some(body)) = (&chunk, self.body.as_mut()) {
            body.extend_from_slice(bytes);
        }
        Some(chunk.map(Bytes::from))
    }

    /// Seconds of audio handed to the encoder so far, pauses included.
    fn audio_s(&self) -> f64 {
        self.joiner.position() as f64 / f64::from(self.rate)
    }
}
