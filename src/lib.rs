//! omnivoice-server: an OpenAI-compatible text-to-speech server.
//!
//! The modules follow the request path: `api` (HTTP) → `speech` (the pipeline) → `cache` →
//! `batch` → `engine` (the Piper engine runs the VITS model of the `omnivoice-models` crate,
//! `text` prepares its input) → `audio` (encoders). `config` and `metrics` are read by all of them; `server`
//! assembles the parts.

pub mod allocator;
pub mod api;
pub mod audio;
pub mod batch;
pub mod blocking;
pub mod cache;
pub mod config;
pub mod engine;
pub mod espeak;
pub mod metrics;
pub mod params;
pub mod profiles;
pub mod server;
pub mod speech;
pub mod text;
pub mod wyoming;
