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
use tokio::sync::mpsc;

use super::synthesis::Delivery;
use super::{join, utterances, Job, Request, SpeechError, SpeechService, Utterances};
use crate::audio::StreamEncoder;
use crate::metrics as m;

/// One stream of speech fed sentence by sentence. Each sentence handed in is synthesized at
/// once, concurrently with the others, and its audio is encoded strictly in the order the
/// sentences were handed in, a piece at a time as it is computed.
pub struct LiveSpeech {
    service: SpeechService,
    job: Job,
    base_seed: u64,
    /// Utterance index of the next sentence's first utterance, across the whole stream.
    next_utterance: usize,
    /// Sentences handed in, and encoded completely.
    handed_in: usize,
    encoded: usize,
    encoder: Option<Box<dyn StreamEncoder>>,
    joiner: join::Joiner,
    /// Where the sentence being encoded starts in the stream (after its pause), in samples.
    sentence_start: Option<usize>,
    /// The voice's native rate, at which sentences arrive.
    rate: u32,
}

/// A sentence on its way: its audio arrives in parts, from a task that stops when this is
/// dropped.
pub struct SentenceAudio {
    index: usize,
    parts: mpsc::UnboundedReceiver<Result<Delivery, SpeechError>>,
    task: tokio::task::JoinHandle<()>,
}

/// A part of a sentence's audio, for [`LiveSpeech::encode`].
pub struct SentencePart {
    index: usize,
    delivery: Result<Delivery, SpeechError>,
}

/// A sentence as it went into the stream.
#[derive(Debug, Clone)]
pub struct SpokenSentence {
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
        let encoder = super::stream_encoder(&job)?;
        Ok(LiveSpeech {
            service: self.clone(),
            base_seed: job.params().seed.unwrap_or_else(rand::random),
            job,
            next_utterance: 0,
            handed_in: 0,
            encoded: 0,
            encoder: Some(encoder),
            joiner: join::Joiner::new(rate),
            sentence_start: None,
            rate,
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

    /// Hands in the next sentence and starts synthesizing it. Text with nothing speakable
    /// in it ends at once, with no audio.
    pub fn sentence(&mut self, text: &str) -> SentenceAudio {
        let sentences = utterances(text);
        let first_index = self.next_utterance;
        self.next_utterance += sentences.len();
        let index = self.handed_in;
        self.handed_in += 1;
        let (service, job, base_seed) = (self.service.clone(), self.job.clone(), self.base_seed);
        let (sender, parts) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            if sentences.is_empty() {
                return;
            }
            metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
            let utterances = Utterances {
                sentences,
                base_seed,
                first_index,
                word_timings: false,
            };
            let mut synthesis = match service.start_utterances(&job, utterances, true).await {
                Ok(synthesis) => synthesis,
                Err(e) => {
                    let _ = sender.send(Err(e));
                    return;
                }
            };
            while let Some(delivery) = synthesis.next_piece().await {
                let failed = delivery.is_err();
                if sender.send(delivery).is_err() || failed {
                    return;
                }
            }
        });
        SentenceAudio { index, parts, task }
    }

    /// Appends a part of the sentence being encoded to the stream: the bytes to send now.
    /// Sentences must come in the order they were handed in.
    pub fn encode(&mut self, part: SentencePart) -> Result<Bytes, SpeechError> {
        if part.index != self.encoded {
            return Err(SpeechError::Encoding(
                format!(
                    "sentence {} encoded out of order (expected {})",
                    part.index, self.encoded
                )
                .into(),
            ));
        }
        let mut samples = Vec::new();
        match part.delivery? {
            Delivery::Piece(pcm) => {
                if let Some(start) = self.joiner.push(&pcm.samples, &mut samples) {
                    self.sentence_start.get_or_insert(start);
                }
            }
            Delivery::SentenceEnd => self.joiner.end_sentence(&mut samples),
        }
        let encoder = self
            .encoder
            .as_mut()
            .ok_or_else(|| SpeechError::Encoding("the stream has ended".into()))?;
        let bytes = encoder
            .push(&samples)
            .map_err(|e| SpeechError::Encoding(format!("encoding failed: {e}").into()))?;
        Ok(Bytes::from(bytes))
    }

    /// The sentence being encoded has no more parts: where it went in the stream.
    pub fn end_sentence(&mut self, audio: SentenceAudio) -> Result<SpokenSentence, SpeechError> {
        if audio.index != self.encoded {
            return Err(SpeechError::Encoding(
                format!(
                    "sentence {} ended out of order (expected {})",
                    audio.index, self.encoded
                )
                .into(),
            ));
        }
        self.encoded += 1;
        let end = self.joiner.position();
        let start = self.sentence_start.take().unwrap_or(end);
        let seconds = |samples: usize| samples as f64 / f64::from(self.rate);
        Ok(SpokenSentence {
            start_s: seconds(start),
            duration_s: seconds(end - start),
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
            .map_err(|e| SpeechError::Encoding(format!("encoding failed: {e}").into()))
    }

    /// Seconds of audio in the stream so far, pauses included.
    pub fn duration_s(&self) -> f64 {
        self.joiner.position() as f64 / f64::from(self.rate)
    }
}

impl SentenceAudio {
    /// The next part of the sentence's audio as it is computed; `None` once it is complete.
    pub async fn next_part(&mut self) -> Option<SentencePart> {
        let delivery = self.parts.recv().await?;
        Some(SentencePart {
            index: self.index,
            delivery,
        })
    }
}

impl Drop for SentenceAudio {
    fn drop(&mut self) {
        // Nobody will play it: stop synthesizing (queued utterances are then dropped too).
        self.task.abort();
    }
}
