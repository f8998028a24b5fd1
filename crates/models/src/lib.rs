//! The neural text-to-speech models behind omnivoice-server, in candle.
//!
//! A crate of its own, as candle-transformers stands apart from any server: it knows nothing of
//! HTTP, requests, engines or async runtimes, and the server depends on it, never the reverse.
//! One module per model ([`vits`], the model behind Piper voices; [`kokoro`], Kokoro-82M;
//! [`omnivoice`], OmniVoice's network; [`hubert`], the semantic model of OmniVoice's codec),
//! the CPU arithmetic they all share ([`kernels`]), and the scheduler that lends idle cores
//! to a computation ([`spare`]).

pub mod hubert;
pub mod kernels;
pub mod kokoro;
pub mod omnivoice;
mod onnx;
pub mod spare;
pub mod vits;
