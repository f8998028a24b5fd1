//! Which written word each phoneme of an utterance was spoken for, so that the time a voice
//! gives its phonemes can be read back as word timestamps.
//!
//! espeak-ng's IPA does not keep the words of the text apart: it joins unstressed words
//! ("in the" → `ɪnðə`), speaks one token as several words ("$100" → `dˈɑːlɚ wˈʌnhˈʌndɹɪd`),
//! and its clause IPA carries no positions. So every written word is phonemized on its own as
//! well, and that sequence is aligned to the utterance's IPA phone by phone (an edit-distance
//! alignment, so that a word said a little differently in context — "a" as `ɐ` rather than
//! `ˈeɪ` — still lands in place). A word's phonemes are then the span of the utterance's IPA
//! its own phones aligned to.

use std::ops::Range;

use unicode_normalization::UnicodeNormalization;

use super::phonemize::phonemize;
use super::Pronunciation;
use crate::espeak::{EspeakError, CLAUSE_PUNCTUATION};

/// Characters trimmed off the ends of a written word: quotes, brackets, dashes, and the
/// punctuation that ends clauses. Symbols that are spoken ("$", "%", "&") stay.
const EDGE_PUNCTUATION: &[char] = &[
    '.', ',', ';', ':', '!', '?', '"', '\'', '(', ')', '[', ']', '{', '}', '<', '>', '«', '»', '“',
    '”', '‘', '’', '„', '‚', '‹', '›', '—', '–', '-', '…', '¿', '¡', '*', '_', '~', '`',
];

/// Stress marks: part of a word's IPA, but no sound of their own to align.
const STRESS: &[char] = &['ˈ', 'ˌ'];

/// A written word and the phonemes spoken for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpokenWord {
    /// Byte range of the word in the text.
    pub text: Range<usize>,
    /// Character range in the IPA (empty when none of the word's phones could be placed).
    pub phonemes: Range<usize>,
}

/// The words of `text` as byte ranges: runs of non-whitespace with [`EDGE_PUNCTUATION`]
/// trimmed off both ends (a run of nothing but punctuation is kept whole: espeak may say it).
pub fn written_words(text: &str) -> Vec<Range<usize>> {
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(at),
            (true, Some(from)) => {
                let token = &text[from..at];
                let core = token.trim_matches(EDGE_PUNCTUATION);
                let range = if core.is_empty() {
                    from..at
                } else {
                    let lead = token.len() - token.trim_start_matches(EDGE_PUNCTUATION).len();
                    from + lead..from + lead + core.len()
                };
                words.push(range);
                start = None;
            }
            _ => {}
        }
    }
    words
}

/// The words of `text` that espeak-ng speaks, each with its span of `ipa` (the utterance's
/// IPA from [`phonemize`] with the same voice, NFD, the IPA of `pronunciations` in their
/// places), in order; spans never overlap. A word a pronunciation covers is said with its
/// IPA; the other words of a phrase it covers share that word's span.
pub fn spoken_words(
    text: &str,
    ipa: &str,
    espeak_voice: &str,
    pronunciations: &[Pronunciation],
) -> Result<Vec<SpokenWord>, EspeakError> {
    let ipa: Vec<char> = ipa.chars().collect();
    let heard: Vec<(usize, char)> = ipa
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, c)| is_phone(c))
        .collect();
    let mut words = Vec::new();
    let mut said: Vec<(usize, char)> = Vec::new();
    let mut given_used = None;
    for range in written_words(text) {
        let given = pronunciations
            .iter()
            .position(|p| p.text.start < range.end && range.start < p.text.end);
        let alone = match given {
            Some(i) if given_used == Some(i) => continue,
            Some(i) => {
                given_used = Some(i);
                pronunciations[i].ipa.nfd().collect()
            }
            None => phonemize(&text[range.clone()], espeak_voice)?,
        };
        let phones: Vec<char> = alone.chars().filter(|&c| is_phone(c)).collect();
        if phones.is_empty() {
            continue; // not spoken ("—", an emoji)
        }
        said.extend(phones.into_iter().map(|c| (words.len(), c)));
        words.push(range);
    }
    let pairs = align(
        &said.iter().map(|&(_, c)| c).collect::<Vec<_>>(),
        &heard.iter().map(|&(_, c)| c).collect::<Vec<_>>(),
    );
    let mut spans: Vec<Option<Range<usize>>> = vec![None; words.len()];
    for (s, h) in pairs {
        let (word, at) = (said[s].0, heard[h].0);
        let span = spans[word].get_or_insert(at..at + 1);
        span.end = at + 1;
    }
    let mut end = 0;
    Ok(words
        .into_iter()
        .zip(spans)
        .map(|(text, span)| {
            let phonemes = match span {
                Some(span) => {
                    // A stress mark right before the first phone is the word's too.
                    let start = if span.start > end
                        && span.start > 0
                        && STRESS.contains(&ipa[span.start - 1])
                    {
                        span.start - 1
                    } else {
                        span.start
                    };
                    start..span.end
                }
                None => end..end,
            };
            end = phonemes.end;
            SpokenWord { text, phonemes }
        })
        .collect())
}

/// The written words of `text`, each with the characters of a phoneme string that came from
/// it, where `sources` gives for each character of that string the byte offset in `text` of
/// the character it came from, in order: how a voice that reads the text's own characters
/// (Piper's `text` phoneme type) finds its words. No alignment is needed; spans never overlap.
pub fn words_by_source(text: &str, sources: &[usize]) -> Vec<SpokenWord> {
    let mut next = 0;
    written_words(text)
        .into_iter()
        .map(|range| {
            while next < sources.len() && sources[next] < range.start {
                next += 1;
            }
            let start = next;
            while next < sources.len() && sources[next] < range.end {
                next += 1;
            }
            SpokenWord {
                text: range,
                phonemes: start..next,
            }
        })
        .collect()
}

/// A character that is a sound: not a space, a stress mark or clause punctuation.
fn is_phone(c: char) -> bool {
    !c.is_whitespace() && !STRESS.contains(&c) && !CLAUSE_PUNCTUATION.contains(&c)
}

/// A least-edits alignment of `a` to `b`: the index pairs matched or substituted, in order.
/// Unmatched characters of either side (deletions, insertions) are in no pair.
fn align(a: &[char], b: &[char]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let width = m + 1;
    let mut cost = vec![0u32; (n + 1) * width];
    for i in 0..=n {
        cost[i * width] = i as u32;
    }
    for (j, cell) in cost.iter_mut().enumerate().take(width) {
        *cell = j as u32;
    }
    for i in 1..=n {
        for j in 1..=m {
            let diagonal = cost[(i - 1) * width + j - 1] + u32::from(a[i - 1] != b[j - 1]);
            let up = cost[(i - 1) * width + j] + 1;
            let left = cost[i * width + j - 1] + 1;
            cost[i * width + j] = diagonal.min(up).min(left);
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (n, m);
    while i > 0 && j > 0 {
        let here = cost[i * width + j];
        if here == cost[(i - 1) * width + j - 1] + u32::from(a[i - 1] != b[j - 1]) {
            pairs.push((i - 1, j - 1));
            i -= 1;
            j -= 1;
        } else if here == cost[(i - 1) * width + j] + 1 {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    pairs.reverse();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<&str> {
        written_words(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn written_words_keep_inner_punctuation_and_symbols() {
        assert_eq!(
            words("  “Dr. Smith” paid $100, didn't he? (U.S.) — 3.5% naïve…"),
            ["Dr", "Smith", "paid", "$100", "didn't", "he", "U.S", "—", "3.5%", "naïve"]
        );
        assert!(words(" \n ").is_empty());
    }

    #[test]
    fn words_by_source_take_the_characters_that_came_from_them() {
        // "Ça, va": Ç became C and a cedilla; the phoneme string is "Ça, va" in NFD.
        let text = "Ça, va";
        let sources = [0, 0, 2, 3, 4, 5, 6];
        let words = words_by_source(text, &sources);
        let texts: Vec<&str> = words.iter().map(|w| &text[w.text.clone()]).collect();
        assert_eq!(texts, ["Ça", "va"]);
        assert_eq!(words[0].phonemes, 0..3, "the comma is trimmed off the word");
        assert_eq!(words[1].phonemes, 5..7);
        // Characters the reading dropped leave a word with no phonemes, in place.
        let words = words_by_source("a b c", &[0, 4]);
        let spans: Vec<_> = words.iter().map(|w| w.phonemes.clone()).collect();
        assert_eq!(spans, [0..1, 1..1, 1..2]);
        assert!(words_by_source("", &[]).is_empty());
    }

    #[test]
    fn alignment_matches_equal_characters_and_skips_the_rest() {
        let chars = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(
            align(&chars("abc"), &chars("abc")),
            [(0, 0), (1, 1), (2, 2)]
        );
        let pairs = align(&chars("ɪnðə"), &chars("xɪnðə"));
        assert_eq!(pairs, [(0, 1), (1, 2), (2, 3), (3, 4)]);
        assert!(align(&[], &chars("ab")).is_empty());
    }

    /// Each word's phonemes, as text.
    fn spoken(text: &str) -> Vec<(String, String)> {
        let ipa = phonemize(text, "en-us").unwrap();
        let chars: Vec<char> = ipa.chars().collect();
        spoken_words(text, &ipa, "en-us", &[])
            .unwrap()
            .into_iter()
            .map(|w| {
                let phonemes: String = chars[w.phonemes].iter().collect();
                (text[w.text].to_string(), phonemes)
            })
            .collect()
    }

    #[test]
    fn joined_words_are_told_apart() {
        let words = spoken("In the house of the rising sun.");
        let names: Vec<&str> = words.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(names, ["In", "the", "house", "of", "the", "rising", "sun"]);
        // espeak says "ɪnðə" and "ʌvðə": each half goes to its own word.
        assert_eq!(words[0].1, "ɪn");
        assert_eq!(words[1].1, "ðə");
        assert_eq!(words[3].1, "ʌv");
        assert!(words[2].1.contains("haʊs") || words[2].1.contains("hˈaʊs"));
        for (word, phonemes) in &words {
            assert!(!phonemes.is_empty(), "{word}");
            assert!(!phonemes.contains(' '), "{word}: {phonemes:?}");
        }
    }

    #[test]
    fn a_token_spoken_as_several_words_gets_all_of_them() {
        let words = spoken("Dr. Smith paid $100 for it.");
        let hundred = words.iter().find(|(w, _)| w == "$100").unwrap();
        // "dollar one hundred", in espeak's order.
        assert!(hundred.1.contains("dˈɑːlɚ"), "{words:?}");
        assert!(hundred.1.contains("hˈʌndɹɪd"), "{words:?}");
        assert_eq!(words[0], ("Dr".to_string(), "dˈɑːktɚ".to_string()));
        let spans: Vec<Range<usize>> = {
            let ipa = phonemize("Dr. Smith paid $100 for it.", "en-us").unwrap();
            spoken_words("Dr. Smith paid $100 for it.", &ipa, "en-us", &[])
                .unwrap()
                .into_iter()
                .map(|w| w.phonemes)
                .collect()
        };
        for pair in spans.windows(2) {
            assert!(pair[0].end <= pair[1].start, "{spans:?}");
        }
    }

    #[test]
    fn unspoken_tokens_are_no_words() {
        let words = spoken("Wait — what?");
        let names: Vec<&str> = words.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(names, ["Wait", "what"]);
    }
}
