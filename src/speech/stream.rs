//! Streamed responses: encoded audio sentence by sentence, as each sentence is computed.
//!
//! The first sentence is queued on its own so it starts at once; the rest follow a few at a
//! time as they are delivered.
//! The complete body goes to the cache when the stream ends, and identical requests that
//! arrive meanwhile wait for it (or take over if this client goes away).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::synthesis::Synthesis;
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
            first: true,
            audio_s: 0.0,
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
    first: bool,
    audio_s: f64,
    /// The voice's native rate, at which sentences arrive.
    rate: u32,
    /// The encoded audio's rate.
    sample_rate: u32,
    samples: Arc<AtomicU64>,
}

impl StreamState {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, SpeechError>> {
        let encoder = self.encoder.as_mut()?;
        let chunk = match self.pending.next().await {
            Some(reply) => match reply {
                Ok(pcm) => {
                    let mut samples = Vec::with_capacity(pcm.samples.len() + self.rate as usize);
                    join::append_sentence(&mut samples, &pcm.samples, self.rate, !self.first);
                    self.first = false;
                    self.audio_s += samples.len() as f64 / self.rate as f64;
                    let at_output_rate = self.audio_s * f64::from(self.sample_rate);
                    self.samples
                        .store(at_output_rate.round() as u64, Ordering::Relaxed);
                    encoder.push(&samples)
                }
                Err(e) => {
                    self.encoder = None;
                    if let Some(lease) = self.lease.take() {
                        lease.complete(Err(e.clone())).await;
                    }
                    return Some(Err(e));
                }
            },
            None => {
                let encoder = self.encoder.take()?;
                let last = encoder.finish();
                m::add_audio_seconds(self.audio_s);
                if let (Ok(tail), Some(mut body), Some(lease)) =
                    (&last, self.body.take(), self.lease.take())
                {
                    body.extend_from_slice(tail);
                    let audio = CachedAudio {
                        bytes: Bytes::from(body),
                        sample_rate: self.sample_rate,
                        duration_s: self.audio_s,
                    };
                    lease.complete(Ok(audio)).await;
                }
                last
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
}
