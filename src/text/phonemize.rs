//! Text → IPA → phoneme ids, the input of a Piper (VITS) voice.
//!
//! A voice only sounds right when it sees the phoneme stream it was trained on: espeak-ng IPA
//! with the clause punctuation kept, NFD-decomposed, each symbol separated by the pad id. This
//! module reproduces that stream with stock espeak-ng, which drops the punctuation (see
//! [`crate::espeak::text_to_phoneme_clauses`] for how it is recovered).

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

use crate::espeak::{self, EspeakError};

const PAD: char = '_';
const BOS: char = '^';
const EOS: char = '$';

/// A voice's phoneme table: from its `.onnx.json`, `phoneme_id_map` (phoneme → ids) and the
/// optional `phoneme_map` (phoneme → replacement phonemes, applied before the lookup).
#[derive(Debug, Clone, PartialEq)]
pub struct PhonemeIdMap {
    ids: HashMap<char, Vec<i64>>,
    replacements: HashMap<char, Vec<char>>,
}

impl PhonemeIdMap {
    pub fn from_voice_json(voice: &serde_json::Value) -> Result<Self, String> {
        let table = voice
            .get("phoneme_id_map")
            .and_then(|m| m.as_object())
            .ok_or("voice config has no phoneme_id_map object")?;
        let mut ids = HashMap::with_capacity(table.len());
        for (phoneme, value) in table {
            let phoneme = single_char(phoneme, "phoneme_id_map")?;
            let list = value
                .as_array()
                .ok_or_else(|| format!("phoneme_id_map[{phoneme:?}] is not a list"))?;
            let list = list
                .iter()
                .map(|id| id.as_i64())
                .collect::<Option<Vec<i64>>>()
                .ok_or_else(|| format!("phoneme_id_map[{phoneme:?}] holds a non-integer id"))?;
            ids.insert(phoneme, list);
        }
        for required in [PAD, BOS, EOS] {
            if !ids.contains_key(&required) {
                return Err(format!("phoneme_id_map lacks {required:?}"));
            }
        }

        let mut replacements = HashMap::new();
        if let Some(map) = voice.get("phoneme_map").filter(|m| !m.is_null()) {
            let map = map.as_object().ok_or("phoneme_map is not an object")?;
            for (phoneme, value) in map {
                let phoneme = single_char(phoneme, "phoneme_map")?;
                let targets = value
                    .as_array()
                    .ok_or_else(|| format!("phoneme_map[{phoneme:?}] is not a list"))?
                    .iter()
                    .map(|t| {
                        t.as_str()
                            .ok_or_else(|| format!("phoneme_map[{phoneme:?}] holds a non-string"))
                            .and_then(|t| single_char(t, "phoneme_map"))
                    })
                    .collect::<Result<Vec<char>, String>>()?;
                replacements.insert(phoneme, targets);
            }
        }
        Ok(Self { ids, replacements })
    }

    /// Piper's rule: `^` ids, `_` ids, then for each codepoint of the NFD phoneme string its
    /// ids followed by `_` ids, then `$` ids. Codepoints the voice does not know are skipped.
    pub fn ids(&self, phonemes: &str) -> Vec<i64> {
        let pad = &self.ids[&PAD];
        let mut ids = Vec::with_capacity(3 + 2 * phonemes.len());
        ids.extend_from_slice(&self.ids[&BOS]);
        ids.extend_from_slice(pad);
        for c in phonemes.nfd() {
            let replaced = self.replacements.get(&c);
            let symbols = replaced.map_or(std::slice::from_ref(&c), Vec::as_slice);
            for symbol in symbols {
                match self.ids.get(symbol) {
                    Some(symbol_ids) => {
                        ids.extend_from_slice(symbol_ids);
                        ids.extend_from_slice(pad);
                    }
                    None => {
                        tracing::debug!(phoneme = ?symbol, "phoneme not in the voice's map, skipped")
                    }
                }
            }
        }
        ids.extend_from_slice(&self.ids[&EOS]);
        ids
    }
}

fn single_char(key: &str, table: &str) -> Result<char, String> {
    let mut chars = key.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(format!("{table} key {key:?} is not a single codepoint")),
    }
}

/// IPA for `text` as a Piper voice expects it: espeak-ng's phonemes clause by clause, each
/// followed by the punctuation (`, . ; : ! ?`) that ended it in the text, clauses joined by one
/// space, NFD-normalized.
///
/// Clauses are espeak-ng's own, which is where this differs from phonemizing text pieces cut at
/// every punctuation mark: "3.14" stays "three point one four" and "5,000" stays "five
/// thousand" instead of being read as two numbers. Language-switch markers that espeak-ng puts
/// around foreign words ("(en)sˈɒftweə(de)") are removed, as Piper's own phonemizer does: the
/// voices never saw them.
pub fn phonemize(text: &str, espeak_voice: &str) -> Result<String, EspeakError> {
    let clauses = espeak::text_to_phoneme_clauses(text, espeak_voice)?;
    let mut out = String::new();
    for (ipa, terminator) in clauses {
        let ipa = strip_language_flags(&ipa);
        if ipa.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&ipa);
        out.extend(terminator);
    }
    Ok(out.nfd().collect())
}

/// Removes espeak-ng's `(lang)` markers; IPA output has no other parentheses.
fn strip_language_flags(ipa: &str) -> String {
    let mut out = String::with_capacity(ipa.len());
    let mut in_flag = false;
    for c in ipa.chars() {
        match c {
            '(' => in_flag = true,
            ')' => in_flag = false,
            c if !in_flag => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn small_map() -> PhonemeIdMap {
        PhonemeIdMap::from_voice_json(&json!({
            "phoneme_id_map": {"_": [0], "^": [1], "$": [2], " ": [3], "a": [4], "b": [5, 6],
                               "c": [16], "\u{0327}": [140], "x": [7]},
            "phoneme_map": {"z": ["a", "b"]}
        }))
        .unwrap()
    }

    #[test]
    fn ids_follow_the_piper_rule() {
        let map = small_map();
        assert_eq!(map.ids(""), [1, 0, 2]);
        assert_eq!(map.ids("a b"), [1, 0, 4, 0, 3, 0, 5, 6, 0, 2]);
    }

    #[test]
    fn ids_decompose_skip_unknown_and_replace() {
        let map = small_map();
        // 'ç' is 'c' + combining cedilla under NFD.
        assert_eq!(map.ids("ç"), [1, 0, 16, 0, 140, 0, 2]);
        assert_eq!(map.ids("aqa"), [1, 0, 4, 0, 4, 0, 2]);
        assert_eq!(map.ids("z"), [1, 0, 4, 0, 5, 6, 0, 2]);
    }

    #[test]
    fn language_flags_are_removed() {
        assert_eq!(
            strip_language_flags("mˈɑːk (en)sˈɒftweə(de) ʊnt"),
            "mˈɑːk sˈɒftweə ʊnt"
        );
        assert_eq!(strip_language_flags("həlˈoʊ"), "həlˈoʊ");
    }

    #[test]
    fn bad_configs_are_errors() {
        assert!(PhonemeIdMap::from_voice_json(&json!({})).is_err());
        assert!(
            PhonemeIdMap::from_voice_json(&json!({"phoneme_id_map": {"_": [0], "^": [1]}}))
                .is_err()
        );
        assert!(PhonemeIdMap::from_voice_json(
            &json!({"phoneme_id_map": {"_": [0], "^": [1], "$": [2], "ab": [3]}})
        )
        .is_err());
        assert!(PhonemeIdMap::from_voice_json(
            &json!({"phoneme_id_map": {"_": [0], "^": [1], "$": ["x"]}})
        )
        .is_err());
        assert!(PhonemeIdMap::from_voice_json(
            &json!({"phoneme_id_map": {"_": [0], "^": [1], "$": [2]}, "phoneme_map": null})
        )
        .is_ok());
    }
}
