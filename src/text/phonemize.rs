//! Text → IPA → phoneme ids, the input of a Piper (VITS) voice.
//!
//! A voice only sounds right when it sees the phoneme stream it was trained on: espeak-ng IPA
//! with the clause punctuation kept, NFD-decomposed, each symbol separated by the pad id. This
//! module reproduces that stream with stock espeak-ng, which drops the punctuation (see
//! [`crate::espeak::text_to_phoneme_clauses`] for how it is recovered).

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

use super::Pronunciation;
use crate::espeak::{self, EspeakError};

const PAD: char = '_';
const BOS: char = '^';
const EOS: char = '$';
/// The phoneme between words; a model input may be cut there without cutting a word.
const WORD_BREAK: char = ' ';
/// Punctuation that [`phonemize`] keeps at the end of a clause: the best places to cut.
const CLAUSE_MARKS: &[char] = &[',', '.', ';', ':', '!', '?'];

/// A voice's phoneme table: from its `.onnx.json`, `phoneme_id_map` (phoneme → ids) and the
/// optional `phoneme_map` (phoneme → replacement phonemes, applied before the lookup).
#[derive(Debug, Clone, PartialEq)]
pub struct PhonemeIdMap {
    ids: HashMap<char, Vec<i64>>,
    replacements: HashMap<char, Vec<char>>,
}

impl PhonemeIdMap {
    pub fn from_voice_json(voice: &serde_json::Value) -> Result<Self, PhonemeMapError> {
        let table = voice
            .get("phoneme_id_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| PhonemeMapError("voice config has no phoneme_id_map object".into()))?;
        let mut ids = HashMap::with_capacity(table.len());
        for (phoneme, value) in table {
            let phoneme = single_char(phoneme, "phoneme_id_map")?;
            let list = value
                .as_array()
                .ok_or_else(|| invalid(format!("phoneme_id_map[{phoneme:?}] is not a list")))?;
            let list = list
                .iter()
                .map(|id| id.as_i64())
                .collect::<Option<Vec<i64>>>()
                .ok_or_else(|| {
                    invalid(format!(
                        "phoneme_id_map[{phoneme:?}] holds a non-integer id"
                    ))
                })?;
            ids.insert(phoneme, list);
        }
        for required in [PAD, BOS, EOS] {
            if !ids.contains_key(&required) {
                return Err(invalid(format!("phoneme_id_map lacks {required:?}")));
            }
        }

        let mut replacements = HashMap::new();
        if let Some(map) = voice.get("phoneme_map").filter(|m| !m.is_null()) {
            let map = map
                .as_object()
                .ok_or_else(|| invalid("phoneme_map is not an object".into()))?;
            for (phoneme, value) in map {
                let phoneme = single_char(phoneme, "phoneme_map")?;
                let targets = value
                    .as_array()
                    .ok_or_else(|| invalid(format!("phoneme_map[{phoneme:?}] is not a list")))?
                    .iter()
                    .map(|t| {
                        t.as_str()
                            .ok_or_else(|| {
                                invalid(format!("phoneme_map[{phoneme:?}] holds a non-string"))
                            })
                            .and_then(|t| single_char(t, "phoneme_map"))
                    })
                    .collect::<Result<Vec<char>, PhonemeMapError>>()?;
                replacements.insert(phoneme, targets);
            }
        }
        Ok(Self { ids, replacements })
    }

    /// Piper's rule: `^` ids, `_` ids, then for each codepoint of the NFD phoneme string its
    /// ids followed by `_` ids, then `$` ids. Codepoints the voice does not know are skipped.
    pub fn ids(&self, phonemes: &str) -> Vec<i64> {
        self.pieces(phonemes, usize::MAX).remove(0)
    }

    /// The ids of [`ids`](Self::ids) cut into model inputs of at most `max_ids` ids each, every
    /// one framed as Piper frames a sentence (`^ _ … $`), so that the work and memory of one
    /// forward pass stay bounded whatever the text. Cuts fall at word boundaries (the space
    /// phoneme, which is dropped at the cut), preferably after clause punctuation, and inside a
    /// word only when the word alone exceeds the limit. Always at least one piece; a limit
    /// smaller than the framing plus one symbol still gives pieces of one symbol each.
    pub fn pieces(&self, phonemes: &str, max_ids: usize) -> Vec<Vec<i64>> {
        self.traced_pieces(phonemes, max_ids)
            .into_iter()
            .map(|piece| piece.ids)
            .collect()
    }

    /// [`pieces`](Self::pieces), each with where every character of `phonemes` went: what
    /// lets the time the model gives each id be read back as the time of a character.
    pub fn traced_pieces(&self, phonemes: &str, max_ids: usize) -> Vec<TracedPiece> {
        let symbols = self.symbols(phonemes);
        let head = [self.ids[&BOS].as_slice(), &self.ids[&PAD]].concat();
        let tail = &self.ids[&EOS];
        let budget = max_ids.saturating_sub(head.len() + tail.len());
        cut_at_words(&symbols, budget)
            .into_iter()
            .map(|run| {
                let mut ids = head.clone();
                let mut chars = Vec::with_capacity(run.len());
                for symbol in run {
                    chars.push((symbol.source, ids.len()..ids.len() + symbol.ids.len()));
                    ids.extend_from_slice(&symbol.ids);
                }
                ids.extend_from_slice(tail);
                TracedPiece { ids, chars }
            })
            .collect()
    }

    /// Whether the voice has ids for `c`: its own, or those of every phoneme it is replaced by.
    fn knows(&self, c: char) -> bool {
        match self.replacements.get(&c) {
            Some(targets) => targets.iter().all(|t| self.ids.contains_key(t)),
            None => self.ids.contains_key(&c),
        }
    }

    /// The first symbol of `phonemes` (NFD, replacements applied) that the voice has no ids
    /// for, which [`ids`](Self::ids) would skip; whitespace is never one (a voice without a
    /// space phoneme just runs words together). `None` when the voice can say them all.
    pub fn first_unknown(&self, phonemes: &str) -> Option<char> {
        phonemes
            .nfd()
            .filter(|c| !c.is_whitespace())
            .flat_map(|c| match self.replacements.get(&c) {
                Some(targets) => targets.clone(),
                None => vec![c],
            })
            .find(|symbol| !self.ids.contains_key(symbol))
    }

    /// `text` as a voice of Piper's `text` phoneme type reads it: its own characters, NFD,
    /// which [`ids`](Self::ids) then looks up directly. piper1-gpl (which trains such voices)
    /// keeps the case; the original Piper's runtime folded it to lower case. So a character
    /// is kept as it is where the voice knows it, and taken in lower case where only that is
    /// known: a voice trained with capitals hears its capitals, one trained on lower case
    /// hears "Hello" as "hello" instead of losing the "H".
    pub fn read_text(&self, text: &str) -> TextPhonemes {
        let mut decomposed: Vec<(char, usize)> = Vec::with_capacity(text.len());
        for (at, c) in text.char_indices() {
            unicode_normalization::char::decompose_canonical(c, |d| decomposed.push((d, at)));
        }
        canonical_order(&mut decomposed);
        let mut phonemes = String::with_capacity(text.len());
        let mut sources = Vec::with_capacity(decomposed.len());
        for (c, at) in decomposed {
            let lower: Vec<char> = c.to_lowercase().collect();
            let read = if !self.knows(c) && lower != [c] && lower.iter().all(|&l| self.knows(l)) {
                lower
            } else {
                vec![c]
            };
            for c in read {
                phonemes.push(c);
                sources.push(at);
            }
        }
        TextPhonemes { phonemes, sources }
    }

    /// Each known phoneme of `phonemes` (NFD, replacements applied) with its ids and the pad.
    fn symbols(&self, phonemes: &str) -> Vec<Symbol> {
        let pad = &self.ids[&PAD];
        let mut symbols = Vec::with_capacity(phonemes.len());
        for (source, c) in phonemes.nfd().enumerate() {
            let replaced = self.replacements.get(&c);
            for &symbol in replaced.map_or(std::slice::from_ref(&c), Vec::as_slice) {
                match self.ids.get(&symbol) {
                    Some(symbol_ids) => symbols.push(Symbol {
                        phoneme: symbol,
                        ids: [symbol_ids.as_slice(), pad].concat(),
                        source,
                    }),
                    None => {
                        tracing::debug!(phoneme = ?symbol, "phoneme not in the voice's map, skipped")
                    }
                }
            }
        }
        symbols
    }
}

/// A text's characters as a `text` voice reads them ([`PhonemeIdMap::read_text`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextPhonemes {
    /// The characters the voice is given: the text in NFD (some in lower case).
    pub phonemes: String,
    /// For each character of `phonemes`, the byte offset in the text of the character it
    /// came from (in order but for combining marks, which NFD may reorder within a letter).
    pub sources: Vec<usize>,
}

/// Puts each run of combining marks in canonical order (a stable sort by combining class),
/// as NFD does after decomposing: with the characters decomposed one by one, the result is
/// the text's NFD, each character still carrying where it came from.
fn canonical_order(chars: &mut [(char, usize)]) {
    let class = |c: char| unicode_normalization::char::canonical_combining_class(c);
    let mut start = 0;
    while start < chars.len() {
        if class(chars[start].0) == 0 {
            start += 1;
            continue;
        }
        let end = chars[start..]
            .iter()
            .position(|&(c, _)| class(c) == 0)
            .map_or(chars.len(), |n| start + n);
        chars[start..end].sort_by_key(|&(c, _)| class(c));
        start = end;
    }
}

/// One phoneme of the model input: its ids followed by the pad ids.
#[derive(Debug, Clone, PartialEq)]
struct Symbol {
    phoneme: char,
    ids: Vec<i64>,
    /// Index of the character of the NFD phoneme string it came from.
    source: usize,
}

/// One model input and, for each character of the phoneme string that reached it (in
/// order), the range of `ids` it became (its ids and the pad after them). Characters the
/// voice does not know, and spaces dropped at a cut, are in no piece.
#[derive(Debug, Clone, PartialEq)]
pub struct TracedPiece {
    pub ids: Vec<i64>,
    pub chars: Vec<(usize, std::ops::Range<usize>)>,
}

impl Symbol {
    fn is_space(&self) -> bool {
        self.phoneme == WORD_BREAK
    }
}

/// Splits `symbols` into runs of at most `budget` ids (at least one symbol each), cutting at a
/// space where one fits — the last one after clause punctuation when that keeps at least half
/// of the run, else the last one — and dropping the space at the cut. Spaces at the start of a
/// run are dropped too, so no run is empty unless the input has no symbols at all.
fn cut_at_words(symbols: &[Symbol], budget: usize) -> Vec<&[Symbol]> {
    let mut runs = Vec::new();
    let mut start = 0;
    loop {
        while start < symbols.len() && symbols[start].is_space() && !runs.is_empty() {
            start += 1;
        }
        let rest = &symbols[start..];
        // The longest prefix within the budget, at least one symbol.
        let mut used = 0;
        let fits = rest
            .iter()
            .take_while(|s| {
                used += s.ids.len();
                used <= budget
            })
            .count()
            .max(1);
        if fits >= rest.len() {
            if !rest.is_empty() || runs.is_empty() {
                runs.push(rest);
            }
            return runs;
        }
        // A space at `fits` itself is the ideal cut: everything before it fits.
        let spaces = (1..=fits).rev().filter(|&i| rest[i].is_space());
        let after_clause = spaces
            .clone()
            .take_while(|&i| 2 * i >= fits)
            .find(|&i| CLAUSE_MARKS.contains(&rest[i - 1].phoneme));
        let end = after_clause.or(spaces.clone().next()).unwrap_or(fits);
        runs.push(&rest[..end]);
        start += end;
    }
}

fn single_char(key: &str, table: &str) -> Result<char, PhonemeMapError> {
    let mut chars = key.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(invalid(format!(
            "{table} key {key:?} is not a single codepoint"
        ))),
    }
}

/// A voice config whose phoneme tables cannot be used; the words say which entry and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PhonemeMapError(String);

fn invalid(why: String) -> PhonemeMapError {
    PhonemeMapError(why)
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

/// [`phonemize`], with each of `pronunciations` (in order, apart) said with its own IPA: the
/// text between them is phonemized on its own, and clause marks that open a stretch after a
/// pronunciation (", please") follow its IPA, as they would have followed the word's.
pub fn phonemize_with(
    text: &str,
    pronunciations: &[Pronunciation],
    espeak_voice: &str,
) -> Result<String, EspeakError> {
    if pronunciations.is_empty() {
        return phonemize(text, espeak_voice);
    }
    fn push(out: &mut String, ipa: &str) {
        if ipa.is_empty() {
            return;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(ipa);
    }
    let mut out = String::new();
    let mut at = 0;
    for pronunciation in given_in(text, pronunciations) {
        let before = &text[at..pronunciation.text.start];
        let ipa = phonemize_stretch(before, &mut out, espeak_voice)?;
        push(&mut out, &ipa);
        push(&mut out, &pronunciation.ipa.nfd().collect::<String>());
        at = pronunciation.text.end;
    }
    let ipa = phonemize_stretch(&text[at..], &mut out, espeak_voice)?;
    push(&mut out, &ipa);
    Ok(out)
}

/// The pronunciations that lie in `text`, in order and apart, on character boundaries.
pub(crate) fn given_in<'a>(
    text: &'a str,
    pronunciations: &'a [Pronunciation],
) -> impl Iterator<Item = &'a Pronunciation> + 'a {
    let mut end = 0;
    pronunciations.iter().filter(move |p| {
        let fits =
            p.text.start >= end && p.text.start < p.text.end && text.get(p.text.clone()).is_some();
        if fits {
            end = p.text.end;
        }
        fits
    })
}

/// The IPA of a stretch of text between pronunciations; the clause marks it opens with are
/// appended to `before` (the IPA so far) instead, where they belong.
fn phonemize_stretch(
    stretch: &str,
    before: &mut String,
    espeak_voice: &str,
) -> Result<String, EspeakError> {
    let rest = stretch.trim_start_matches(|c: char| c.is_whitespace() || CLAUSE_MARKS.contains(&c));
    let opening = &stretch[..stretch.len() - rest.len()];
    if !before.is_empty() {
        before.extend(opening.chars().filter(|c| CLAUSE_MARKS.contains(c)));
    }
    if rest.trim().is_empty() {
        return Ok(String::new());
    }
    phonemize(rest, espeak_voice)
}

/// Removes espeak-ng's `(lang)` markers around a word read in another language; IPA output
/// has no other parentheses.
pub(crate) fn strip_language_flags(ipa: &str) -> String {
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
                               "c": [16], "\u{0327}": [140], "x": [7], ",": [8]},
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
    fn the_first_unknown_symbol_is_found_after_replacements() {
        let map = PhonemeIdMap::from_voice_json(&json!({
            "phoneme_id_map": {"_": [0], "^": [1], "$": [2], "a": [4], "b": [5], "c": [16],
                               "e": [18], "\u{0327}": [140]},
            "phoneme_map": {"z": ["a", "b"], "y": ["a", "w"]}
        }))
        .unwrap();
        assert_eq!(map.first_unknown(""), None);
        assert_eq!(
            map.first_unknown("ab a\tb\n"),
            None,
            "whitespace is no symbol to refuse, even without a space phoneme"
        );
        assert_eq!(
            map.first_unknown("ç"),
            None,
            "c and the cedilla apart (NFD)"
        );
        assert_eq!(
            map.first_unknown("z"),
            None,
            "replaced by phonemes it knows"
        );
        assert_eq!(map.first_unknown("aqzx"), Some('q'));
        assert_eq!(map.first_unknown("y"), Some('w'), "a replacement it lacks");
        assert_eq!(
            map.first_unknown("bé"),
            Some('\u{0301}'),
            "é is e and an acute"
        );
    }

    /// A map with ids for exactly `symbols` (and the framing), one id each.
    fn map_of(symbols: &str) -> PhonemeIdMap {
        let mut table = serde_json::Map::new();
        for (n, c) in "_^$".chars().chain(symbols.chars()).enumerate() {
            table.insert(c.to_string(), json!([n]));
        }
        PhonemeIdMap::from_voice_json(&json!({ "phoneme_id_map": table })).unwrap()
    }

    #[test]
    fn text_is_read_as_its_own_characters_in_nfd() {
        let texts = [
            "Ça va? Å bientôt.",
            // Combining marks out of canonical order, a precomposed letter with two marks,
            // Hangul: NFD reorders the first and decomposes the others.
            "a\u{0301}\u{0316}",
            "ḕ 한",
        ];
        let all: String = texts.concat().nfd().collect();
        let map = map_of(&all);
        for text in texts {
            let read = map.read_text(text);
            assert_eq!(read.phonemes, text.nfd().collect::<String>(), "{text:?}");
            assert_eq!(read.sources.len(), read.phonemes.chars().count());
        }
        // Each character knows where it came from, reordered marks included.
        assert_eq!(map.read_text("a\u{0301}\u{0316}").sources, [0, 3, 1]);
        assert_eq!(map.read_text("bÅ c").sources, [0, 1, 1, 3, 4]);
    }

    #[test]
    fn capitals_are_kept_where_the_voice_knows_them_else_lowered() {
        let lower = map_of("helo wrd\u{0301}");
        let read = lower.read_text("Hello Wörld É");
        // ö lowers to nothing known (no diaeresis), so it stays and is skipped by the ids.
        assert_eq!(read.phonemes, "hello wo\u{0308}rld e\u{0301}");
        assert_eq!(lower.first_unknown(&read.phonemes), Some('\u{0308}'));
        assert_eq!(
            lower.ids(&read.phonemes),
            lower.ids("hello world e\u{0301}"),
            "the unknown mark is skipped"
        );
        assert_eq!(read.sources[..2], [0, 1]);
        let both = map_of("HhELelo");
        assert_eq!(both.read_text("HELLO hello").phonemes, "HELLo hello");
        // Where neither is known the character stays, for the ids to skip and
        // `first_unknown` to name.
        assert_eq!(both.read_text("Q").phonemes, "Q");
        assert_eq!(both.first_unknown("Q"), Some('Q'));
    }

    /// The pieces' contents without framing, each as the phoneme text it came from.
    fn piece_texts(map: &PhonemeIdMap, phonemes: &str, max_ids: usize) -> Vec<String> {
        let name = |id: i64| match id {
            3 => ' ',
            4 => 'a',
            5 => 'b',
            8 => ',',
            _ => '?',
        };
        map.pieces(phonemes, max_ids)
            .iter()
            .map(|ids| {
                assert!(
                    ids.len() <= max_ids,
                    "{} ids > {max_ids}: {ids:?}",
                    ids.len()
                );
                assert_eq!(&ids[..2], [1, 0], "framing: {ids:?}");
                assert_eq!(ids.last(), Some(&2), "framing: {ids:?}");
                ids[2..ids.len() - 1]
                    .iter()
                    .filter(|&&id| id != 0 && id != 6)
                    .map(|&id| name(id))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn pieces_within_the_limit_are_the_whole_input() {
        let map = small_map();
        let whole = map.ids("ab ab");
        assert_eq!(
            map.pieces("ab ab", whole.len()),
            std::slice::from_ref(&whole)
        );
        assert_eq!(map.pieces("ab ab", usize::MAX), [whole]);
        assert_eq!(map.pieces("", 0), [map.ids("")]);
    }

    #[test]
    fn pieces_are_cut_between_words_and_drop_the_space() {
        let map = small_map();
        // "aa" is 4 ids, "b" 3, a space 2, framing 3: "aa b" is 12 ids.
        assert_eq!(piece_texts(&map, "aa b aa b", 12), ["aa b", "aa b"]);
        assert_eq!(piece_texts(&map, "aa b aa b", 11), ["aa", "b", "aa", "b"]);
        // Spaces around a cut or in a row never make an empty piece.
        assert_eq!(piece_texts(&map, "aa   aa ", 8), ["aa", "aa"]);
    }

    #[test]
    fn pieces_prefer_a_cut_after_clause_punctuation() {
        let map = small_map();
        // 27 ids hold 12 symbols: up to "aa aa, aa aa" and the space after it.
        assert_eq!(
            piece_texts(&map, "aa aa, aa aa aa", 27),
            ["aa aa,", "aa aa aa"]
        );
        let texts = piece_texts(&map, "aa, aa aa aa aa", 27);
        assert_eq!(
            texts[0], "aa, aa aa aa",
            "a clause mark early on is not worth half a piece"
        );
    }

    #[test]
    fn a_word_longer_than_the_limit_is_cut_anywhere() {
        let map = small_map();
        let word = "a".repeat(1000);
        let texts = piece_texts(&map, &format!("b {word} b"), 64);
        assert_eq!(texts.concat().replace(' ', ""), format!("b{word}b"));
        assert!(texts.len() >= 2 * 1000 / 64, "{} pieces", texts.len());
        // Too small a limit for even one symbol still makes progress, one symbol a piece.
        let pieces = map.pieces("ab", 1);
        assert_eq!(pieces, [vec![1, 0, 4, 0, 2], vec![1, 0, 5, 6, 0, 2]]);
    }

    #[test]
    fn pieces_keep_every_symbol_in_order() {
        let map = small_map();
        let text: String = (0..3000)
            .map(|i: usize| match (i * 7919 + 5) % 11 {
                0 | 1 => ' ',
                2 => ',',
                3..=5 => 'b',
                _ => 'a',
            })
            .collect();
        for limit in [8, 13, 40, 100, 1000] {
            let texts = piece_texts(&map, &text, limit);
            let kept: String = texts.concat().chars().filter(|&c| c != ' ').collect();
            let all: String = text.chars().filter(|&c| c != ' ').collect();
            assert_eq!(kept, all, "limit {limit}");
            assert!(texts.iter().all(|t| !t.is_empty() && !t.starts_with(' ')));
        }
    }

    #[test]
    fn traced_pieces_say_which_ids_each_character_became() {
        let map = small_map();
        let pieces = map.traced_pieces("ab qz", usize::MAX);
        assert_eq!(pieces.len(), 1);
        let piece = &pieces[0];
        assert_eq!(piece.ids, map.ids("ab qz"));
        // 'q' (index 3) is unknown; 'z' became "a b".
        let chars: Vec<usize> = piece.chars.iter().map(|(c, _)| *c).collect();
        assert_eq!(chars, [0, 1, 2, 4, 4]);
        assert_eq!(piece.chars[0].1, 2..4);
        assert_eq!(&piece.ids[piece.chars[1].1.clone()], [5, 6, 0]);
        let cut = map.traced_pieces("a b a b", 8);
        assert!(cut.len() > 1);
        for piece in &cut {
            for (_, ids) in &piece.chars {
                assert!(ids.end < piece.ids.len(), "before the end mark");
            }
        }
    }

    #[test]
    fn given_phonemes_take_the_words_place_and_keep_the_punctuation() {
        let text = "Say Kokoro, please.";
        let start = text.find("Kokoro").unwrap();
        let given = [Pronunciation {
            text: start..start + "Kokoro".len(),
            ipa: "kˈoʊkəɹoʊ".into(),
        }];
        let ipa = phonemize_with(text, &given, "en-us").unwrap();
        let expected = format!(
            "{} {}, {}",
            phonemize("Say", "en-us").unwrap(),
            "kˈoʊkəɹoʊ".nfd().collect::<String>(),
            phonemize("please.", "en-us").unwrap()
        );
        assert_eq!(ipa, expected);
        assert_ne!(ipa, phonemize(text, "en-us").unwrap());
        assert_eq!(
            phonemize_with(text, &[], "en-us").unwrap(),
            phonemize(text, "en-us").unwrap()
        );
        // Out-of-range or overlapping pronunciations are skipped.
        let odd = [
            given[0].clone(),
            Pronunciation {
                text: start + 1..start + 3,
                ipa: "x".into(),
            },
            Pronunciation {
                text: 90..99,
                ipa: "x".into(),
            },
        ];
        assert_eq!(phonemize_with(text, &odd, "en-us").unwrap(), expected);
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
