//! What can go wrong between a request and its audio, in the pipeline's own words.
//!
//! Front doors translate these once each (HTTP status codes in `api::error`, `error` events
//! over Wyoming); nothing here knows about a transport, so every front door reports the same
//! failure the same way.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::registry::ResolveError;
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

/// An error and the causes below it, in one line, each said once: an error whose words
/// already end with its cause's (as [`Failure`] and the engines' errors write theirs) does not
/// repeat it.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let words = cause.to_string();
        if !text.ends_with(&words) {
            text = format!("{text}: {words}");
        }
        source = cause.source();
    }
    text
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
    /// Whether the server itself failed, not the request nor the load it met: its words may
    /// name files and internals, so they are for the log, and clients are told less.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Self::VoiceLoad(_) | Self::Engine(_) | Self::Encoding(_) | Self::LexiconStorage(_)
        )
    }

    /// What a client may read of this error: its own words, or, for a fault of the server's
    /// own ([`is_fault`](Self::is_fault)), that there was one, with the cause logged once.
    pub fn for_clients(&self) -> String {
        if self.is_fault() {
            tracing::error!(error = %chain(self), "internal error");
            "internal error; the cause has been logged.".to_string()
        } else {
            self.to_string()
        }
    }

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

/// A voice the request names, or makes, that cannot be had: the request's fault, naming the
/// field at fault, unless the engine itself failed.
impl From<ResolveError> for SpeechError {
    fn from(e: ResolveError) -> Self {
        match e {
            ResolveError::UnknownModel(message) => Self::UnknownModel(message),
            ResolveError::UnknownVoice(message) => Self::UnknownVoice(message),
            ResolveError::InvalidInstructions(why) => {
                Self::invalid("instructions", InvalidReason::Unsupported, why.to_string())
            }
            ResolveError::UnusableReference(why) => {
                Self::invalid("ref_audio", InvalidReason::Unsupported, why.to_string())
            }
            ResolveError::Engine(e) => Self::VoiceLoad(Failure::of(e)),
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
    }
}
