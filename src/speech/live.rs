//! Speech for text that is still being written: sentences are handed in one at a time, as a
//! language model produces them, and all of them become one continuous audio stream.
//!
//! Each sentence is its own request to the batcher (so a long conversation never holds a
//! place in line), but the sentences share what makes a stream one utterance: one encoder
//! (one valid file for every format), the pauses and fades of [`join`](super::join), and the
//! seed sequence of a whole request, so that text streamed in pieces sounds exactly like the
//! same text sent at once with the same seed. Live audio is never cached: every sentence is
//! new text, and its bytes only make sense inside this stream's encoder.

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;

use super::{join, utterances, Job, Request, SpeechError, SpeechService, Utterances};
use crate::audio::{self, StreamEncoder};
use crate::engine::Pcm;
use crate::metrics as m;

/// One stream of speech fed sentence by sentence. Sentences are synthesized concurrently if
/// the caller polls several [`sentence`](Self::sentence) futures at once, and encoded strictly
/// in the order they were handed in.
pub struct LiveSpeech {
    service: SpeechService,
    job: Job,
    base_seed: u64,
    /// Utterance index of the next sentence's first utterance, across the whole stream.
    next_utterance: usize,
    /// Sentences handed in, and encoded.
    handed_in: usize,
    encoded: usize,
    encoder: Option<Box<dyn StreamEncoder>>,
    /// The voice's native rate, at which sentences arrive.
    rate: u32,
    /// Native-rate samples encoded so far, pauses included.
    samples: u64,
}

/// A sentence's audio, ready for [`LiveSpeech::encode`].
pub struct SentenceAudio {
    index: usize,
    pieces: Vec<Pcm>,
}

/// A sentence as it went into the stream.
#[derive(Debug, Clone)]
pub struct SpokenSentence {
    /// Encoded bytes; with codecs that buffer, they may end a little before the sentence does.
    pub bytes: Bytes,
    /// Where its speech starts in the stream (after the pause before it), in seconds.
    pub start_s: f64,
    /// How long its speech lasts, in seconds (0 for text with nothing to speak).
    pub duration_s: f64,
}

impl SpeechService {
    /// Validates everything of `request` but its input (which is ignored) and opens a stream.
    pub fn live(&self, request: Request) -> Result<LiveSpeech, SpeechError> {
        let job = super::request::validate_settings(
            Request {
                use_cache: false,
                ..request
            },
            &self.inner.registry,
            &self.inner.limits,
        )?;
        let rate = job.voice().sample_rate;
        let format = job.format();
        let encoder = audio::stream_encoder(format, rate).map_err(|e| {
            SpeechError::Encoding(format!("encoder for {} failed: {e}", format.as_str()))
        })?;
        Ok(LiveSpeech {
            service: self.clone(),
            base_seed: job.params().seed.unwrap_or_else(rand::random),
            job,
            next_utterance: 0,
            handed_in: 0,
            encoded: 0,
            encoder: Some(encoder),
            rate,
            samples: 0,
        })
    }
}

impl LiveSpeech {
    /// Rate of the encoded audio.
    pub fn sample_rate(&self) -> u32 {
        self.job.format().output_sample_rate(self.rate)
    }

    /// The validated settings (voice, format, parameters) of the stream.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// Hands in the next sentence; the future synthesizes it (nothing happens until it is
    /// polled). Text with nothing speakable in it gives audio with no samples.
    pub fn sentence(
        &mut self,
        text: &str,
    ) -> BoxFuture<'static, Result<SentenceAudio, SpeechError>> {
        let sentences = utterances(text);
        let first_index = self.next_utterance;
        self.next_utterance += sentences.len();
        let index = self.handed_in;
        self.handed_in += 1;
        let (service, job, base_seed) = (self.service.clone(), self.job.clone(), self.base_seed);
        async move {
            let mut pieces = Vec::with_capacity(sentences.len());
            if !sentences.is_empty() {
                metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
                let utterances = Utterances {
                    sentences,
                    base_seed,
                    first_index,
                    word_timings: false,
                };
                let mut synthesis = service.start_utterances(&job, utterances, true).await?;
                while let Some(piece) = synthesis.next().await {
                    pieces.push(piece?);
                }
            }
            Ok(SentenceAudio { index, pieces })
        }
        .boxed()
    }

    /// Appends a sentence's audio to the stream. Sentences must come in the order they were
    /// handed in.
    pub fn encode(&mut self, audio: SentenceAudio) -> Result<SpokenSentence, SpeechError> {
        if audio.index != self.encoded {
            return Err(SpeechError::Encoding(format!(
                "sentence {} encoded out of order (expected {})",
                audio.index, self.encoded
            )));
        }
        self.encoded += 1;
        let encoder = self
            .encoder
            .as_mut()
            .ok_or_else(|| SpeechError::Encoding("the stream has ended".into()))?;
        let mut bytes = Vec::new();
        let mut start = None;
        for piece in &audio.pieces {
            let mut samples = Vec::with_capacity(piece.samples.len() + self.rate as usize);
            join::append_sentence(&mut samples, &piece.samples, self.rate, self.samples > 0);
            let pause = (samples.len() - piece.samples.len()) as u64;
            start.get_or_insert(self.samples + pause);
            self.samples += samples.len() as u64;
            bytes.extend(
                encoder
                    .push(&samples)
                    .map_err(|e| SpeechError::Encoding(format!("encoding failed: {e}")))?,
            );
        }
        let seconds = |samples: u64| samples as f64 / f64::from(self.rate);
        let start = start.unwrap_or(self.samples);
        Ok(SpokenSentence {
            bytes: Bytes::from(bytes),
            start_s: seconds(start),
            duration_s: seconds(self.samples - start),
        })
    }

    /// Ends the stream: the encoder's last bytes.
    pub fn finish(&mut self) -> Result<Bytes, SpeechError> {
        let Some(encoder) = self.encoder.take() else {
            return Ok(Bytes::new());
        };
        m::add_audio_seconds(self.duration_s());
        encoder
            .finish()
            .map(Bytes::from)
            .map_err(|e| SpeechError::Encoding(format!("encoding failed: {e}")))
    }

    /// Seconds of audio in the stream so far, pauses included.
    pub fn duration_s(&self) -> f64 {
        self.samples as f64 / f64::from(self.rate)
    }
}
