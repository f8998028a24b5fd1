//! Text preparation shared by both engines: clean the request text, cut it into sentences
//! that can be synthesized (and batched) one by one, and turn a sentence into the phoneme ids a
//! Piper voice reads.

pub mod document;
pub mod english;
pub mod incremental;
pub mod inline;
pub mod japanese;
pub mod lexicon;
pub mod mandarin;
pub mod normalize;
pub mod phonemize;
pub mod phrase;
mod pronunciation;
pub mod split;
pub mod ssml;
pub mod words;
pub mod writing;

pub use normalize::normalize;
pub use phonemize::{phonemize, PhonemeIdMap};
pub use pronunciation::{Claim, Pronunciation, Say};
pub use split::split_sentences;
