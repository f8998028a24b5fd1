//! omnivoice-server: an OpenAI-compatible text-to-speech server.
//!
//! The modules follow the request path: `api` (HTTP) → `speech` (the pipeline) → `cache` →
//! `batch` → `engine` (`vits` is the neural model behind the Piper engine, `text` prepares its
//! input) → `audio` (encoders). `config` and `metrics` are read by all of them; `server`
//! assembles the parts.

pub mod allocator;
pub mod api;
pub mod audio;
pub mod batch;
pub mod cache;
pub mod config;
pub mod engine;
// Its FFI code gets its SAFETY comments on another branch; until then the unsafe lints the
// workspace denies only warn here, so the crate still builds.
#[warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
pub mod espeak;
pub mod metrics;
pub mod params;
pub mod server;
pub mod speech;
pub mod text;
pub mod wyoming;
