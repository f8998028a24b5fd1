//! omnivoice-server: an OpenAI-compatible text-to-speech server.
//!
//! The modules follow the request path: `api` (HTTP) → `cache` → `batch` → `engine`
//! (`vits` is the neural model behind the Piper engine, `text` prepares its input) → `audio`
//! (encoders). `config` and `metrics` are read by all of them.

pub mod audio;
pub mod engine;
pub mod espeak;
pub mod text;
pub mod vits;
