//! A stream's encoder, run on the blocking pool.
//!
//! MP3, AAC and Opus (and resampling to their rates) take milliseconds a piece: too long for
//! an async worker, which would stall every other connection it serves meanwhile. Each piece
//! is encoded on a blocking thread and awaited by whoever pulls the stream, so a slow client
//! still holds back synthesis as it did when the encoder ran inline.

use super::{Failure, Job, SpeechError};
use crate::audio::{self, StreamEncoder};

pub(super) struct BlockingEncoder {
    /// `None` once finished or failed.
    encoder: Option<Box<dyn StreamEncoder>>,
}

impl BlockingEncoder {
    /// The encoder of `job`'s format, fed at its voice's rate.
    pub(super) fn of(job: &Job) -> Result<Self, SpeechError> {
        let format = job.format();
        let encoder = audio::stream_encoder(format, job.voice().sample_rate).map_err(|e| {
            SpeechError::Encoding(Failure::new(
                format_args!("encoder for {} failed", format.as_str()),
                e,
            ))
        })?;
        Ok(Self {
            encoder: Some(encoder),
        })
    }

    /// Whether it takes more samples: not once finished or failed.
    pub(super) fn is_open(&self) -> bool {
        self.encoder.is_some()
    }

    /// Takes no more samples: the stream failed before its end.
    pub(super) fn close(&mut self) {
        self.encoder = None;
    }

    /// The bytes `samples` encode to.
    pub(super) async fn push(&mut self, samples: Vec<f32>) -> Result<Vec<u8>, SpeechError> {
        let mut encoder = self.encoder.take().ok_or_else(ended)?;
        let (encoder, bytes) = crate::blocking::run(move || {
            let bytes = encoder.push(&samples);
            (encoder, bytes)
        })
        .await;
        let bytes = bytes.map_err(|e| SpeechError::Encoding(Failure::new("encoding failed", e)))?;
        self.encoder = Some(encoder);
        Ok(bytes)
    }

    /// The bytes `last` encodes to and those that end the file; takes nothing after.
    pub(super) async fn finish(&mut self, last: Vec<f32>) -> Result<Vec<u8>, SpeechError> {
        let mut encoder = self.encoder.take().ok_or_else(ended)?;
        crate::blocking::run(move || {
            let mut bytes = encoder.push(&last)?;
            bytes.extend(encoder.finish()?);
            Ok(bytes)
        })
        .await
        .map_err(|e: audio::AudioError| SpeechError::Encoding(Failure::new("encoding failed", e)))
    }
}

fn ended() -> SpeechError {
    SpeechError::Encoding(Failure::of(Ended))
}

/// A stream's encoder asked for more after its end: a fault of the caller's code.
#[derive(Debug, thiserror::Error)]
#[error("the stream has ended")]
struct Ended;
