//! What can go wrong between a request and its audio, in the pipeline's own words.
//!
//! Front doors translate these once each (HTTP status codes in `api::error`, `error` events
//! over Wyoming); nothing here knows about a transport, so every front door reports the same
//! failure the same way.

use std::time::Duration;

use crate::params::OutOfRange;

/// Why a request was refused or produced no audio.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpeechError {
    /// The request itself is wrong; `param` names the field as clients send it.
    #[error("{message}")]
    Invalid {
        param: &'static str,
        reason: InvalidReason,
        message: String,
    },
    /// No engine answers to this model name; the message lists the valid ones.
    #[error("{0}")]
    UnknownModel(String),
    /// The engine has no such voice or speaker; the message lists valid choices.
    #[error("{0}")]
    UnknownVoice(String),
    /// Too much work is queued; the queue should have room again after `retry_after`.
    #[error("The server is at capacity: too many requests are waiting. Retry shortly.")]
    Overloaded { retry_after: Duration },
    /// The batcher task is gone, so nothing queued would ever be computed.
    #[error("The synthesis queue has stopped; this server cannot synthesize until it restarts.")]
    BatcherStopped,
    /// The server is shutting down and computes nothing new.
    #[error("The server is shutting down.")]
    ShuttingDown,
    /// A voice's files could not be loaded.
    #[error("{0}")]
    VoiceLoad(String),
    /// The engine failed (or panicked) while synthesizing.
    #[error("{0}")]
    Engine(String),
    /// The audio could not be encoded.
    #[error("{0}")]
    Encoding(String),
}

/// The kind of a client mistake, for front doors that report a machine-readable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidReason {
    /// Nothing to speak.
    Empty,
    /// Longer than the configured limit.
    TooLong,
    /// A value the server does not offer (a format name, say).
    Unsupported,
    /// A number outside its range.
    OutOfRange,
}

impl SpeechError {
    pub(crate) fn invalid(
        param: &'static str,
        reason: InvalidReason,
        message: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            param,
            reason,
            message: message.into(),
        }
    }
}

impl From<OutOfRange> for SpeechError {
    fn from(e: OutOfRange) -> Self {
        Self::invalid(e.param, InvalidReason::OutOfRange, e.to_string())
    }
}
