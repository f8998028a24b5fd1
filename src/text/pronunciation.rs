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
