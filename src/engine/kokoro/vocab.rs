//! Kokoro v1.0's input symbols and their token ids: the model's embedding tables have 178 rows
//! and these 114 symbols use ids 1..=177; 0 is the pad the model expects around every input.
//!
//! The table is data needed to interoperate with the released weights (it is the `vocab` of
//! kokoro-onnx's config.json and of hexgrad's config.json); the tests compare it with
//! kokoro-onnx's, entry by entry.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The id around every input (`[0, tokens…, 0]`); the model adds it, callers never do.
pub const PAD: u32 = 0;

/// Most tokens one forward pass takes: 512 positions of ALBERT less the two pads.
pub const MAX_TOKENS: usize = 510;

/// Symbol and id, in id order. Punctuation first (the prosody marks the model was trained to
/// pause at), then misaki's capital-letter diphthongs (`A` = eɪ, `I` = aɪ, `O` = oʊ, `Q` = əʊ,
/// `W` = aʊ, `Y` = ɔɪ) and flap (`T`), then IPA.
const SYMBOLS: [(char, u32); 114] = [
    (';', 1),
    (':', 2),
    (',', 3),
    ('.', 4),
    ('!', 5),
    ('?', 6),
    ('—', 9),
    ('…', 10),
    ('"', 11),
    ('(', 12),
    (')', 13),
    ('“', 14),
    ('”', 15),
    (' ', 16),
    ('\u{303}', 17),
    ('ʣ', 18),
    ('ʥ', 19),
    ('ʦ', 20),
    ('ʨ', 21),
    ('ᵝ', 22),
    ('\u{ab67}', 23),
    ('A', 24),
    ('I', 25),
    ('O', 31),
    ('Q', 33),
    ('S', 35),
    ('T', 36),
    ('W', 39),
    ('Y', 41),
    ('ᵊ', 42),
    ('a', 43),
    ('b', 44),
    ('c', 45),
    ('d', 46),
    ('e', 47),
    ('f', 48),
    ('h', 50),
    ('i', 51),
    ('j', 52),
    ('k', 53),
    ('l', 54),
    ('m', 55),
    ('n', 56),
    ('o', 57),
    ('p', 58),
    ('q', 59),
    ('r', 60),
    ('s', 61),
    ('t', 62),
    ('u', 63),
    ('v', 64),
    ('w', 65),
    ('x', 66),
    ('y', 67),
    ('z', 68),
    ('ɑ', 69),
    ('ɐ', 70),
    ('ɒ', 71),
    ('æ', 72),
    ('β', 75),
    ('ɔ', 76),
    ('ɕ', 77),
    ('ç', 78),
    ('ɖ', 80),
    ('ð', 81),
    ('ʤ', 82),
    ('ə', 83),
    ('ɚ', 85),
    ('ɛ', 86),
    ('ɜ', 87),
    ('ɟ', 90),
    ('ɡ', 92),
    ('ɥ', 99),
    ('ɨ', 101),
    ('ɪ', 102),
    ('ʝ', 103),
    ('ɯ', 110),
    ('ɰ', 111),
    ('ŋ', 112),
    ('ɳ', 113),
    ('ɲ', 114),
    ('ɴ', 115),
    ('ø', 116),
    ('ɸ', 118),
    ('θ', 119),
    ('œ', 120),
    ('ɹ', 123),
    ('ɾ', 125),
    ('ɻ', 126),
    ('ʁ', 128),
    ('ɽ', 129),
    ('ʂ', 130),
    ('ʃ', 131),
    ('ʈ', 132),
    ('ʧ', 133),
    ('ʊ', 135),
    ('ʋ', 136),
    ('ʌ', 138),
    ('ɣ', 139),
    ('ɤ', 140),
    ('χ', 142),
    ('ʎ', 143),
    ('ʒ', 147),
    ('ʔ', 148),
    ('ˈ', 156),
    ('ˌ', 157),
    ('ː', 158),
    ('ʰ', 162),
    ('ʲ', 164),
    ('↓', 169),
    ('→', 171),
    ('↗', 172),
    ('↘', 173),
    ('ᵻ', 177),
];

fn ids() -> &'static HashMap<char, u32> {
    static IDS: OnceLock<HashMap<char, u32>> = OnceLock::new();
    IDS.get_or_init(|| SYMBOLS.into_iter().collect())
}

/// The id of one symbol; `None` for a character the model has no embedding for.
pub fn id(symbol: char) -> Option<u32> {
    ids().get(&symbol).copied()
}

/// The symbol of an id (for logs and tests); `None` for the pad and unused ids.
pub fn symbol(id: u32) -> Option<char> {
    SYMBOLS
        .binary_search_by_key(&id, |&(_, i)| i)
        .ok()
        .map(|at| SYMBOLS[at].0)
}

/// The ids of `phonemes`, one per character; characters outside the table are dropped, as
/// every Kokoro front end drops them. No pads.
pub fn tokenize(phonemes: &str) -> Vec<u32> {
    phonemes.chars().filter_map(id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_kokoro_onnx_s_entry_by_entry() {
        let reference = super::super::reference();
        let theirs = reference["vocab"].as_object().unwrap();
        assert_eq!(theirs.len(), SYMBOLS.len());
        for (symbol, id) in theirs {
            let mut chars = symbol.chars();
            let c = chars.next().unwrap();
            assert!(chars.next().is_none(), "{symbol:?} is one character");
            assert_eq!(
                super::id(c),
                Some(id.as_u64().unwrap() as u32),
                "{symbol:?}"
            );
        }
    }

    #[test]
    fn ids_are_unique_ascending_and_fit_the_embeddings() {
        assert!(SYMBOLS.windows(2).all(|w| w[0].1 < w[1].1));
        assert!(SYMBOLS.iter().all(|&(_, i)| (1..=177).contains(&i)));
        assert_eq!(ids().len(), SYMBOLS.len(), "no symbol twice");
        for (c, i) in SYMBOLS {
            assert_eq!(symbol(i), Some(c));
        }
        assert_eq!(symbol(PAD), None);
        assert_eq!(symbol(7), None);
        assert_eq!(symbol(178), None);
    }

    #[test]
    fn tokenize_drops_what_the_model_cannot_read() {
        // "həlˈoʊ" → h ə l ˈ o ʊ; '^', 'g' (ASCII, not 'ɡ'), '\n' and '«' are not symbols.
        assert_eq!(tokenize("həlˈoʊ"), [50, 83, 54, 156, 57, 135]);
        assert_eq!(tokenize("a^ɪ g\n«"), [43, 102, 16]);
        assert!(tokenize("").is_empty());
        assert!(tokenize("ggg«»").is_empty());
    }
}
