//! Kokoro-82M (v1.0), the third engine: its front end, everything between a request's text
//! and voice name and what the model (`omnivoice_models::kokoro`) takes.
//!
//! - [`language`]: what a voice id's first letter means, and which languages can be spoken.
//! - [`phonemes`]: text → espeak-ng IPA → misaki's symbols, the phonemes Kokoro was trained on
//!   (Mandarin: `crate::text::mandarin`, a dictionary G2P that writes those symbols itself).
//! - [`vocab`]: those symbols → token ids.
//! - [`split`]: tokens → model inputs of at most 510 tokens, and the tokens of each word.
//! - [`packs`]: voice packs (style vectors) from the layouts they ship in.
//! - [`blend`]: voices mixed from packs, in Kokoro-FastAPI's syntax.
//! - [`names`]: OpenAI's voice names as Kokoro packs.
//! - `phrases`: a stream's first utterance spoken as its first phrase and the rest, joined
//!   unheard.
//!
//! What this front end takes from Kokoro's reference implementations (symbol table, espeak
//! rewriting, punctuation handling) is checked against them in the tests, through fixtures that
//! `scripts/kokoro_tokens_reference.py` generates with the official packages.
//!
//! [`KokoroEngine`] puts them together behind the [`Engine`](super::Engine) interface: every pack of a Kokoro
//! directory is a voice, and so is every blend of packs a client names. The model itself
//! (82 M parameters) is loaded once, on the first voice's load, and shared by every voice: a
//! voice is only its 510 × 256 style pack.

pub mod blend;
pub mod language;
pub mod names;
pub mod packs;
pub mod phonemes;
pub mod split;
pub mod vocab;

mod engine;
mod phrases;

pub use engine::{model_file, KokoroEngine, MODEL_FILES};

/// The engine's id: what clients send as `model`.
pub const ID: &str = "kokoro";
/// The voice behind OpenAI's voice names when Kokoro is the default engine.
pub const DEFAULT_VOICE: &str = "af_heart";

/// `tests/fixtures/kokoro/reference.json`, parsed once.
#[cfg(test)]
fn reference() -> &'static serde_json::Value {
    static REFERENCE: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    REFERENCE.get_or_init(|| {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/kokoro/reference.json"
        ));
        serde_json::from_str(text).expect("reference.json parses")
    })
}
