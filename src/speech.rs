//! The speech pipeline: from a validated request to encoded audio.
//!
//! `cache lookup → (miss) load voice → split into sentences → batcher → join → encode → store`.
//! HTTP handlers only validate and format responses; everything between lives here, so the
//! same path serves whole-body and streamed responses.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::oneshot;

use crate::api::ApiError;
use crate::audio::{self, AudioFormat};
use crate::batch::{BatchError, Batcher, Reply};
use crate::cache::{
    AudioCache, CacheKey, CacheStatus, CachedAudio, KeyHash, StreamLease, StreamRole,
};
use crate::engine::registry::{Registry, ResolvedVoice};
use crate::engine::{Pcm, SynthesisItem, Voice};
use crate::metrics as m;
use crate::text;

/// Longest piece of text handed to an engine in one utterance; longer sentences are split at
/// clause boundaries. VITS attention cost grows with the square of the length.
pub const MAX_UTTERANCE_CHARS: usize = 400;

/// Silence between sentences, as natural speech pauses.
const SENTENCE_PAUSE_S: f32 = 0.2;
/// Fade at both ends of every sentence so joins never click.
const EDGE_FADE_S: f32 = 0.005;

/// A validated speech request.
#[derive(Debug, Clone)]
pub struct SpeechJob {
    pub voice: ResolvedVoice,
    pub input: String,
    pub format: AudioFormat,
    pub speed: f32,
    pub seed: Option<u64>,
    pub noise_scale: Option<f32>,
    pub noise_w: Option<f32>,
    pub bypass_cache: bool,
}

/// What a finished synthesis reports besides its bytes.
pub struct Spoken {
    pub audio: Arc<CachedAudio>,
    pub cache: CacheStatus,
}

#[derive(Clone)]
pub struct SpeechService {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Arc<Registry>,
    batcher: Batcher,
    cache: AudioCache,
    default_seed: Option<u64>,
}

impl SpeechService {
    pub fn new(
        registry: Arc<Registry>,
        batcher: Batcher,
        cache: AudioCache,
        default_seed: Option<u64>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                registry,
                batcher,
                cache,
                default_seed,
            }),
        }
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.inner.registry
    }

    pub fn batcher(&self) -> &Batcher {
        &self.inner.batcher
    }

    pub fn cache(&self) -> &AudioCache {
        &self.inner.cache
    }

    fn key(&self, job: &SpeechJob) -> KeyHash {
        let fingerprint = self.inner.registry.fingerprint(&job.voice);
        CacheKey {
            engine: &job.voice.engine,
            voice: &job.voice.voice,
            voice_fingerprint: &fingerprint,
            speaker: job.voice.speaker,
            input: &job.input,
            response_format: job.format.as_str(),
            sample_rate: job.format.output_sample_rate(job.voice.sample_rate),
            speed: job.speed,
            seed: job.seed.or(self.inner.default_seed),
            noise_scale: job.noise_scale,
            noise_w: job.noise_w,
            server_version: env!("CARGO_PKG_VERSION"),
        }
        .hash()
    }

    /// Synthesizes (or finds) the whole response body.
    pub async fn speak(&self, job: SpeechJob) -> Result<Spoken, ApiError> {
        let key = self.key(&job);
        let this = self.clone();
        let bypass = job.bypass_cache;
        let work = async move { this.synthesize_whole(job).await };
        let (result, status) = self.inner.cache.get_or_synthesize(key, bypass, work).await;
        if status == CacheStatus::Miss {
            self.inner.cache.publish_gauges().await;
        }
        result.map(|audio| Spoken {
            audio,
            cache: status,
        })
    }

    async fn synthesize_whole(&self, job: SpeechJob) -> Result<CachedAudio, ApiError> {
        metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
        let pending = self.start(&job, false).await?;
        let mut pieces = Vec::with_capacity(pending.len());
        for reply in pending {
            pieces.push(await_reply(reply).await?);
        }
        let rate = pieces
            .first()
            .map_or(job.voice.sample_rate, |p| p.sample_rate);
        let samples = join_sentences(&pieces, rate);
        let format = job.format;
        let bytes = tokio::task::spawn_blocking(move || audio::encode(format, &samples.0, rate))
            .await
            .map_err(|e| ApiError::internal(format!("encoder task failed: {e}")))?
            .map_err(|e| ApiError::internal(format!("encoding {} failed: {e}", format.as_str())))?;
        Ok(CachedAudio {
            bytes: Bytes::from(bytes),
            content_type: format.content_type(),
            sample_rate: format.output_sample_rate(rate),
            duration_s: samples.1,
        })
    }

    /// Splits the input and queues every sentence; returns one pending reply per sentence.
    async fn start(
        &self,
        job: &SpeechJob,
        first_alone: bool,
    ) -> Result<Vec<oneshot::Receiver<Reply>>, ApiError> {
        let voice: Arc<dyn Voice> = self
            .inner
            .registry
            .voice(&job.voice)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let sentences = text::split::split_sentences(
            &text::normalize::normalize(&job.input),
            MAX_UTTERANCE_CHARS,
        );
        let sentences: Vec<String> = sentences
            .into_iter()
            .filter(|s| !s.trim().is_empty())
            .collect();
        if sentences.is_empty() {
            return Err(ApiError::invalid(
                "input",
                "input contains nothing that can be spoken",
            ));
        }
        let base_seed = job
            .seed
            .or(self.inner.default_seed)
            .unwrap_or_else(rand::random);
        let items = sentences
            .into_iter()
            .enumerate()
            .map(|(i, text)| SynthesisItem {
                text,
                speed: job.speed,
                seed: base_seed.wrapping_add(i as u64),
                speaker: job.voice.speaker,
                noise_scale: job.noise_scale,
                noise_w: job.noise_w,
            })
            .collect();
        self.inner
            .batcher
            .submit(&job.voice.key(), &voice, items, first_alone)
            .map_err(|_| {
                metrics::counter!(m::REJECTED, "reason" => "queue_full").increment(1);
                ApiError::overloaded(std::time::Duration::from_secs(1))
            })
    }

    /// Streams the encoded audio sentence by sentence. The complete body is stored in the cache
    /// when the stream ends; a cached body is sent at once. Errors after the first chunk end
    /// the stream (and are logged and counted).
    pub async fn speak_streaming(&self, job: SpeechJob) -> Result<SpeechStream, ApiError> {
        let rate = job.voice.sample_rate;
        let format = job.format;
        let lease = if job.bypass_cache {
            None
        } else {
            match self.inner.cache.lead_or_follow(self.key(&job)).await? {
                StreamRole::Lead(lease) => lease,
                StreamRole::Done(audio, status) => {
                    let bytes = audio.bytes.clone();
                    m::add_audio_seconds(audio.duration_s);
                    return Ok(SpeechStream {
                        sample_rate: audio.sample_rate,
                        cache: status,
                        chunks: stream::once(async move { Ok(bytes) }).boxed(),
                    });
                }
            }
        };
        metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
        let started = self.start(&job, true).await.and_then(|pending| {
            audio::stream_encoder(format, rate)
                .map(|encoder| (pending, encoder))
                .map_err(|e| {
                    ApiError::internal(format!("encoder for {} failed: {e}", format.as_str()))
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
        let sample_rate = format.output_sample_rate(rate);
        let state = StreamState {
            pending: pending.into_iter(),
            encoder: Some(encoder),
            body: lease.is_some().then(Vec::new),
            lease,
            first: true,
            audio_s: 0.0,
            rate,
            cache: self.clone(),
            sample_rate,
            format,
        };
        let chunks = stream::unfold(state, |mut state| async move {
            let next = state.next_chunk().await;
            next.map(|chunk| (chunk, state))
        })
        .boxed();
        Ok(SpeechStream {
            sample_rate,
            cache: if job.bypass_cache || !self.inner.cache.enabled() {
                CacheStatus::Bypass
            } else {
                CacheStatus::Miss
            },
            chunks,
        })
    }
}

/// A streamed response body.
pub struct SpeechStream {
    pub sample_rate: u32,
    pub cache: CacheStatus,
    pub chunks: BoxStream<'static, Result<Bytes, ApiError>>,
}

struct StreamState {
    pending: std::vec::IntoIter<oneshot::Receiver<Reply>>,
    encoder: Option<Box<dyn audio::StreamEncoder>>,
    /// The whole body so far, for the cache and identical requests waiting on the lease.
    body: Option<Vec<u8>>,
    /// Dropped unfinished when the client goes away: waiting identical requests take over.
    lease: Option<StreamLease>,
    first: bool,
    audio_s: f64,
    rate: u32,
    cache: SpeechService,
    sample_rate: u32,
    format: AudioFormat,
}

impl StreamState {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, ApiError>> {
        let encoder = self.encoder.as_mut()?;
        let chunk = match self.pending.next() {
            Some(reply) => match await_reply(reply).await {
                Ok(pcm) => {
                    let mut samples = Vec::with_capacity(pcm.samples.len() + self.rate as usize);
                    append_sentence(&mut samples, &pcm.samples, self.rate, !self.first);
                    self.first = false;
                    self.audio_s += samples.len() as f64 / self.rate as f64;
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
                        content_type: self.format.content_type(),
                        sample_rate: self.sample_rate,
                        duration_s: self.audio_s,
                    };
                    lease.complete(Ok(audio)).await;
                    self.cache.inner.cache.publish_gauges().await;
                }
                last
            }
        };
        let chunk = chunk.map_err(|e| ApiError::internal(format!("encoding failed: {e}")));
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

async fn await_reply(reply: oneshot::Receiver<Reply>) -> Result<Pcm, ApiError> {
    let started = Instant::now();
    let result = reply.await.unwrap_or(Err(BatchError::Shutdown));
    tracing::trace!(waited_s = started.elapsed().as_secs_f64(), "utterance done");
    result.map_err(|e| match e {
        BatchError::Shutdown => ApiError::unavailable(e.to_string()),
        other => ApiError::internal(other.to_string()),
    })
}

/// Joins sentence audio with short pauses; returns the samples and their duration in seconds.
fn join_sentences(pieces: &[Pcm], rate: u32) -> (Vec<f32>, f64) {
    let pause = (SENTENCE_PAUSE_S * rate as f32) as usize;
    let total: usize = pieces.iter().map(|p| p.samples.len()).sum::<usize>()
        + pause * pieces.len().saturating_sub(1);
    let mut out = Vec::with_capacity(total);
    for (i, piece) in pieces.iter().enumerate() {
        append_sentence(&mut out, &piece.samples, rate, i > 0);
    }
    let duration = out.len() as f64 / rate as f64;
    (out, duration)
}

/// Appends one sentence's audio, faded at both ends and, after another sentence, behind a pause.
fn append_sentence(out: &mut Vec<f32>, sentence: &[f32], rate: u32, after_another: bool) {
    if after_another {
        out.resize(out.len() + (SENTENCE_PAUSE_S * rate as f32) as usize, 0.0);
    }
    let start = out.len();
    out.extend_from_slice(sentence);
    fade_edges(&mut out[start..], rate);
}

/// Linear fade-in and fade-out of a few milliseconds: sentence audio then starts and ends at
/// zero, so joining it to silence or to the next sentence never makes a step.
fn fade_edges(samples: &mut [f32], rate: u32) {
    let n = ((EDGE_FADE_S * rate as f32) as usize).min(samples.len() / 2);
    let len = samples.len();
    for i in 0..n {
        let gain = i as f32 / n as f32;
        samples[i] *= gain;
        samples[len - 1 - i] *= gain;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_sentences_have_pauses_and_start_and_end_at_zero() {
        let piece = |n| Pcm {
            samples: vec![0.5; n],
            sample_rate: 1000,
        };
        let (out, duration) = join_sentences(&[piece(100), piece(50)], 1000);
        assert_eq!(out.len(), 100 + 200 + 50);
        assert!((duration - 0.35).abs() < 1e-9);
        assert_eq!(out[0], 0.0);
        assert_eq!(out[99], 0.0);
        assert_eq!(out[300], 0.0);
        assert!(out[150] == 0.0 && out[50] == 0.5);
        let max_step = out
            .windows(2)
            .map(|w| (w[1] - w[0]).abs())
            .fold(0.0, f32::max);
        assert!(max_step <= 0.1 + 1e-6, "largest step {max_step}");
    }
}
