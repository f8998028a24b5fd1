//! What can go wrong between a request and its audio, in the pipeline's own words.
//!
//! Front doors translate these once each (HTTP status codes in `api::error`, `error` events
//! over Wyoming); nothing here knows about a transport, so every front door reports the same
//! failure the same way.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
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
    #[error(transparent)]
    VoiceLoad(Failure),
    /// The engine failed (or panicked) while synthesizing.
    #[error(transparent)]
    Engine(Failure),
    /// The audio could not be encoded.
    #[error(transparent)]
    Encoding(Failure),
    /// A change to the pronunciation dictionary holds a bad entry; the error names its field.
    #[error("{}: {}", .0.field, .0.message)]
    InvalidLexicon(crate::text::lexicon::LexiconError),
    /// The pronunciation dictionary has no entry to remove by that name.
    #[error("{0}")]
    LexiconEntryNotFound(String),
    /// A change to the pronunciation dictionary could not be saved (and was not applied).
    #[error(transparent)]
    LexiconStorage(Failure),
}

/// A failure inside the server: the message clients are told (the whole chain of causes in
/// words, as every error in this crate writes its message) and, for logs and for code that
/// looks inside, the error behind it as `source()`. Cheap to clone, so one failure can be
/// shared by every request that waited for the same work.
#[derive(Debug, Clone)]
pub struct Failure {
    message: String,
    cause: Option<Arc<dyn Error + Send + Sync>>,
}

impl Failure {
    /// `context: cause` as the message, keeping `cause`.
    pub(crate) fn new(
        context: impl fmt::Display,
        cause: impl Into<Box<dyn Error + Send + Sync>>,
    ) -> Self {
        let cause: Arc<dyn Error + Send + Sync> = Arc::from(cause.into());
        Self {
            message: format!("{context}: {cause}"),
            cause: Some(cause),
        }
    }

    /// The failure `cause` is, in its own words.
    pub(crate) fn of(cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        let cause: Arc<dyn Error + Send + Sync> = Arc::from(cause.into());
        Self {
            message: cause.to_string(),
            cause: Some(cause),
        }
    }
}

/// A failure that has no error behind it, only a message.
impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self {
            message,
            cause: None,
        }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for Failure {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn Error + 'static))
    }
}

/// Failures are equal when they say the same: their causes cannot be compared.
impl PartialEq for Failure {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
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
    /// Markup that does not parse, or that the server does not understand (the message says
    /// where).
    Malformed,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineError;

    /// What clients read stays the whole sentence, and the cause stays reachable below it.
    #[test]
    fn a_failure_says_its_cause_and_keeps_it_as_the_source() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "voice.onnx.json is gone");
        let error = SpeechError::VoiceLoad(Failure::of(EngineError::load("joe", io)));
        assert_eq!(
            error.to_string(),
            "failed to load voice 'joe': voice.onnx.json is gone"
        );
        let chain: Vec<&(dyn Error + 'static)> =
            std::iter::successors(error.source(), |e| (*e).source()).collect();
        assert!(chain.iter().any(|e| matches!(
            e.downcast_ref::<EngineError>(),
            Some(EngineError::Load { .. })
        )));
        let io = chain
            .iter()
            .find_map(|e| e.downcast_ref::<std::io::Error>())
            .expect("the I/O error is in the source chain");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);

        let encoding = Failure::new("encoding mp3 failed", std::fmt::Error);
        assert_eq!(
            encoding.to_string(),
            format!("encoding mp3 failed: {}", std::fmt::Error)
        );
        assert!(encoding.source().unwrap().is::<std::fmt::Error>());
        assert!(Failure::from("no cause").source().is_none());
    }
}
