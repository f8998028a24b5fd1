//! Words said with given phonemes rather than as they are spelt: the one shape in which a
//! pronunciation dictionary entry, inline phonemes and SSML `<phoneme>` reach the engines.

/// Whole words of an utterance's text that are said with the phonemes given, not as they are
/// spelt: what a pronunciation dictionary entry or inline phonemes (`[Kokoro](/kˈOkəɹO/)`)
/// ask for. The words stay in the text, so that word timestamps still name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pronunciation {
    /// Byte range of the words in the utterance's text.
    pub text: std::ops::Range<usize>,
    /// The phonemes in IPA, as espeak-ng writes it (stress marks `ˈ` `ˌ` included). Each
    /// engine says them through its own symbols; `Voice::unsayable` names one it lacks.
    pub ipa: String,
}

/// What the pronunciation dictionary or inline markup says about some written words of a
/// sentence, before the sentence is read: the rules of [`super::english`] leave them alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Byte range of the words in the written sentence.
    pub written: std::ops::Range<usize>,
    pub say: Say,
}

/// How claimed words are said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Say {
    /// Other words in their place (a respelling: "nginx" as "engine x").
    Alias(String),
    /// The written words, with these phonemes (IPA).
    Phonemes(String),
    /// The written words read as SSML's `<say-as>` asks (`format` as written, e.g. `dmy`).
    Interpret {
        how: super::ssml::InterpretAs,
        format: Option<String>,
    },
}
