//! Phonemes written into the text, in Kokoro-FastAPI's Markdown-link syntax:
//! `[Kokoro](/kˈOkəɹO/)` says "Kokoro" with those phonemes.
//!
//! Markdown would read such a link as its text and drop the address, and the sentence
//! splitter and the English rules would then never know. So each line is [`mark`]ed before its
//! markdown is read: the link becomes the word between private-use marks that carry its
//! phonemes through normalization and splitting, and [`extract`] takes them out of each
//! sentence again as [`Claim`]s. Private-use characters in the text itself are removed first,
//! so a client cannot forge the marks.

use std::borrow::Cow;

use super::pronunciation::{Claim, Say};

/// Opens the words of inline phonemes.
const OPEN: char = '\u{E000}';
/// Ends the words and opens their phonemes.
const SPLIT: char = '\u{E001}';
/// Ends the phonemes.
const CLOSE: char = '\u{E002}';

/// Whether `c` is one of the marks (never text of its own).
pub(crate) fn is_mark(c: char) -> bool {
    matches!(c, OPEN | SPLIT | CLOSE)
}

/// `line` with every `[words](/phonemes/)` turned into marked words (and any marks already in
/// it removed). Words hold no brackets; phonemes no slash, parenthesis or bracket.
pub(crate) fn mark(line: &str) -> Cow<'_, str> {
    if !line.contains("](/") && !line.contains(is_mark) {
        return Cow::Borrowed(line);
    }
    let line: String = line.chars().filter(|&c| !is_mark(c)).collect();
    let mut out = String::with_capacity(line.len());
    let mut rest = line.as_str();
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let link = after.find(']').and_then(|close| {
            let words = &after[..close];
            let tail = after[close + 1..].strip_prefix("(/")?;
            let end = tail.find("/)")?;
            let phonemes = &tail[..end];
            let valid = !words.trim().is_empty()
                && !words.contains('[')
                && !phonemes.trim().is_empty()
                && !phonemes.contains(['/', '(', ')', '[', ']']);
            valid.then(|| (words, phonemes, close + 1 + 2 + end + 2))
        });
        match link {
            Some((words, phonemes, len)) => {
                out.push_str(&rest[..open]);
                out.push(OPEN);
                out.push_str(words);
                out.push(SPLIT);
                out.push_str(phonemes);
                out.push(CLOSE);
                rest = &after[len..];
            }
            None => {
                out.push_str(&rest[..open + 1]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// `sentence` without its marks, and a claim on each marked stretch of words. A mark whose
/// partner was cut off by splitting loses its phonemes (they are never spoken).
pub fn extract(sentence: &str) -> (String, Vec<Claim>) {
    if !sentence.contains(is_mark) {
        return (sentence.to_string(), Vec::new());
    }
    let mut text = String::with_capacity(sentence.len());
    let mut claims = Vec::new();
    let mut words_start: Option<usize> = None;
    let mut chars = sentence.chars();
    while let Some(c) = chars.next() {
        match c {
            OPEN => words_start = Some(text.len()),
            SPLIT => {
                let phonemes: String = chars.by_ref().take_while(|&c| c != CLOSE).collect();
                let phonemes = phonemes.split_whitespace().collect::<Vec<_>>().join(" ");
                if let Some(start) = words_start.take() {
                    // Markdown inside the brackets may leave space at their edges.
                    let words = &text[start..];
                    let start = start + (words.len() - words.trim_start().len());
                    let end = start + words.trim().len();
                    if start < end && !phonemes.is_empty() {
                        claims.push(Claim {
                            written: start..end,
                            say: Say::Phonemes(phonemes),
                        });
                    }
                }
            }
            CLOSE => {}
            c => text.push(c),
        }
    }
    (text, claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(line: &str) -> (String, Vec<(String, String)>) {
        let (text, claims) = extract(&mark(line));
        let claims = claims
            .into_iter()
            .map(|c| {
                let Say::Phonemes(ipa) = c.say else {
                    panic!("inline claims are phonemes")
                };
                (text[c.written].to_string(), ipa)
            })
            .collect();
        (text, claims)
    }

    #[test]
    fn links_to_phonemes_become_claims_on_their_words() {
        let (text, claims) = round_trip("Say [Kokoro](/kˈOkəɹO/) and [New York](/nuː jˈɔɹk/)!");
        assert_eq!(text, "Say Kokoro and New York!");
        assert_eq!(
            claims,
            [
                ("Kokoro".to_string(), "kˈOkəɹO".to_string()),
                ("New York".to_string(), "nuː jˈɔɹk".to_string())
            ]
        );
    }

    #[test]
    fn other_brackets_and_links_are_left_to_markdown() {
        for line in [
            "a [link](https://example.com) here",
            "[x](/path/to/page)",
            "an [empty]() one, [](/ipa/) and [ ](/ipa/)",
            "[a [b](/x/)",
            "unclosed [word](/ipa",
        ] {
            let marked = mark(line);
            let (text, claims) = extract(&marked);
            if line == "[a [b](/x/)" {
                assert_eq!(text, "[a b");
                assert_eq!(claims.len(), 1, "the inner link counts");
            } else {
                assert_eq!(marked, line);
                assert!(claims.is_empty(), "{line}");
            }
        }
    }

    #[test]
    fn forged_marks_are_removed_and_cut_marks_say_nothing() {
        let forged = format!("a{OPEN}b{SPLIT}zzz{CLOSE} c");
        assert_eq!(round_trip(&forged), ("abzzz c".to_string(), vec![]));
        // A sentence cut after the words: the phonemes went with the next piece.
        let (text, claims) = extract(&format!("say {OPEN}Kokoro"));
        assert_eq!((text.as_str(), claims.len()), ("say Kokoro", 0));
        let (text, claims) = extract(&format!("{SPLIT}kˈOkəɹO{CLOSE} now"));
        assert_eq!((text.as_str(), claims.len()), (" now", 0));
    }
}
