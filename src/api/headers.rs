//! The names of the headers this API sets beyond HTTP's own.
//!
//! The handlers that send them and the document that describes them both read the names from
//! here, so a header cannot be renamed in one and not the other.

use axum::http::HeaderName;

/// Identifies a request in the logs; a client's own value is echoed back.
pub(super) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub(super) const X_CACHE: HeaderName = HeaderName::from_static("x-cache");
pub(super) const X_CACHE_LAYER: HeaderName = HeaderName::from_static("x-cache-layer");
pub(super) const X_DURATION: HeaderName = HeaderName::from_static("x-audio-duration-s");
pub(super) const X_LATENCY: HeaderName = HeaderName::from_static("x-synthesis-latency-s");
pub(super) const X_SAMPLE_RATE: HeaderName = HeaderName::from_static("x-audio-sample-rate");
/// Bracketed tags in the input that OmniVoice reads as words though they look like sound cues
/// (the Python omnivoice-server's header, comma-separated).
pub(super) const X_UNKNOWN_NONVERBAL_TAGS: HeaderName =
    HeaderName::from_static("x-unknown-nonverbal-tags");
/// `true` when the audio sounds like a drone rather than a voice (the Python omnivoice-server's
/// zero-crossing check); absent otherwise, and on streams, whose headers precede the audio.
pub(super) const X_NO_SPEECH_DETECTED: HeaderName = HeaderName::from_static("x-no-speech-detected");
