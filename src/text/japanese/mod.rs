//! Japanese text → the phonemes Kokoro's Japanese voices (`jf_*`, `jm_*`) read, the way
//! misaki 0.9.4 (Kokoro's own front end) makes them: numbers read in kana, MeCab's best path
//! over UniDic for words and their readings, misaki's romanizer for the symbols. misaki's
//! `ja` front end writes no pitch accent (its accent-marking path is not the one Kokoro's
//! pipeline runs), so neither does this.
//!
//! The dictionary (UniDic from unidic-lite, and misaki's list of words kept whole) is installed
//! by scripts/japanese-dictionary.sh; it is opened once per process and shared. Without it the
//! Japanese voices are listed as unsupported, with the reason.

mod dictionary;
mod lattice;
mod normalize;
mod numbers;
mod romaji;

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use lattice::{Morpheme, Tagger};
use romaji::{Romanizer, Word, READ_CLASS};

/// misaki's list of words its romanizer keeps whole, beside the dictionary.
const WHOLE_WORDS_FILE: &str = "ja_words.txt";
/// UniDic's feature columns of the pronunciation and of the kana spelling.
const PRONUNCIATION_FIELD: usize = 9;
const KANA_FIELD: usize = 17;
/// MeCab's class of katakana: an unknown katakana word is read from its own letters.
const KATAKANA_CLASS: u8 = 7;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JapaneseError {
    #[error("the Japanese dictionary is not usable: {0}")]
    Dictionary(String),
}

/// The Japanese front end: the analyser and the romanizer.
pub struct JapaneseG2p {
    tagger: Tagger,
    romanizer: Romanizer,
}

impl JapaneseG2p {
    /// Opens the dictionary installed in `dir`.
    pub fn open(dir: &Path) -> Result<Self, JapaneseError> {
        let tagger = Tagger::open(dir)?;
        let words_path = dir.join(WHOLE_WORDS_FILE);
        let words = std::fs::read_to_string(&words_path)
            .map_err(|e| JapaneseError::Dictionary(format!("{}: {e}", words_path.display())))?;
        let whole_words: HashSet<String> = words.lines().map(|l| l.trim().to_string()).collect();
        Ok(Self {
            tagger,
            romanizer: Romanizer::new(whole_words),
        })
    }

    /// Bytes of dictionary files mapped (resident only as far as texts touch them).
    pub fn dictionary_bytes(&self) -> usize {
        self.tagger.size()
    }

    /// Words in misaki's list of words kept whole.
    pub fn whole_words(&self) -> usize {
        self.romanizer.whole_words()
    }

    /// The phonemes of `text`, in misaki's symbols.
    pub fn phonemize(&self, text: &str) -> String {
        if text.is_empty() {
            return String::new();
        }
        let text = normalize::normalize(text);
        let words: Vec<Word> = self
            .tagger
            .tag(&text)
            .into_iter()
            .map(|m| word(&text, &m))
            .collect();
        self.romanizer.romanize(&words)
    }
}

fn word(text: &str, morpheme: &Morpheme) -> Word {
    let surface = &text[morpheme.surface.clone()];
    let pronunciation = field(morpheme.feature, PRONUNCIATION_FIELD).filter(|f| !f.is_empty());
    let kana = field(morpheme.feature, KANA_FIELD).filter(|f| !f.is_empty());
    let reading = pronunciation.or(kana).unwrap_or(surface);
    let class = if morpheme.char_class == KATAKANA_CLASS || !morpheme.unknown {
        READ_CLASS
    } else {
        morpheme.char_class
    };
    Word {
        surface: surface.to_string(),
        reading: reading.chars().map(katakana_to_hiragana).collect(),
        class,
    }
}

/// Field `index` of a MeCab feature line (fields in double quotes may hold commas).
fn field(feature: &str, index: usize) -> Option<&str> {
    let mut rest = feature;
    let mut i = 0;
    loop {
        let (value, next) = if let Some(quoted) = rest.strip_prefix('"') {
            let close = quoted.find("\",").map_or(quoted.len(), |c| c);
            let value = quoted[..close].trim_end_matches('"');
            (value, quoted.get(close + 2..))
        } else {
            match rest.find(',') {
                Some(c) => (&rest[..c], Some(&rest[c + 1..])),
                None => (rest, None),
            }
        };
        if i == index {
            return Some(value);
        }
        rest = next?;
        i += 1;
    }
}

/// Katakana as hiragana (ァ…ヶ and the iteration marks ヽヾ); everything else unchanged.
fn katakana_to_hiragana(c: char) -> char {
    match c {
        'ァ'..='ヶ' | 'ヽ' | 'ヾ' => char::from_u32(c as u32 - 0x60).unwrap_or(c),
        c => c,
    }
}

static SHARED: OnceLock<Result<Arc<JapaneseG2p>, JapaneseError>> = OnceLock::new();

/// The process's Japanese front end, opened from `dir` by the first call (later calls share it,
/// whatever directory they name). The dictionary's size is logged once at debug level, since
/// this runs before the settings are all checked, and again with the Kokoro model's load line.
pub fn load(dir: &Path) -> Result<Arc<JapaneseG2p>, JapaneseError> {
    SHARED
        .get_or_init(|| {
            let started = std::time::Instant::now();
            let g2p = JapaneseG2p::open(dir)?;
            tracing::debug!(
                dir = %dir.display(),
                mapped_mib = g2p.dictionary_bytes() / (1 << 20),
                whole_words = g2p.whole_words(),
                load_ms = started.elapsed().as_millis() as u64,
                "Japanese dictionary (UniDic) opened"
            );
            Ok(Arc::new(g2p))
        })
        .clone()
}

/// The front end [`load`] opened, if it did.
pub fn loaded() -> Option<Arc<JapaneseG2p>> {
    SHARED.get().and_then(|r| r.as_ref().ok()).cloned()
}

/// Why the Japanese front end is not available: `None` when it is loaded.
pub fn unavailable_reason() -> Option<String> {
    match SHARED.get() {
        Some(Ok(_)) => None,
        Some(Err(e)) => Some(e.to_string()),
        None => Some("the Japanese dictionary has not been loaded".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_feature_fields_keep_their_commas() {
        let line = "名詞,\"a,b\",c,,e";
        assert_eq!(field(line, 0), Some("名詞"));
        assert_eq!(field(line, 1), Some("a,b"));
        assert_eq!(field(line, 2), Some("c"));
        assert_eq!(field(line, 3), Some(""));
        assert_eq!(field(line, 4), Some("e"));
        assert_eq!(field(line, 5), None);
    }

    #[test]
    fn katakana_folds_to_hiragana() {
        let folded: String = "カタカナーヴヶヽ漢"
            .chars()
            .map(katakana_to_hiragana)
            .collect();
        assert_eq!(folded, "かたかなーゔゖゝ漢");
    }
}
