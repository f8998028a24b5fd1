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
use super::ssml::InterpretAs;

/// Opens the words of inline phonemes.
const OPEN: char = '\u{E000}';
/// Ends the words and opens their phonemes.
const SPLIT: char = '\u{E001}';
/// Ends the phonemes.
const CLOSE: char = '\u{E002}';
/// Ends the words and opens the words said instead (SSML's `<sub alias>`).
const ALIAS: char = '\u{E003}';
/// Ends the words and opens how they are read (SSML's `<say-as>`: `date` or `date dmy`).
const INTERPRET: char = '\u{E004}';

/// Whether `c` is one of the marks (never text of its own).
pub(crate) fn is_mark(c: char) -> bool {
    matches!(c, OPEN | SPLIT | CLOSE | ALIAS | INTERPRET)
}

/// Whether `c` starts what marked words are said as (phonemes, an alias, a reading), which
/// runs to the next [`closes_payload`].
pub(crate) fn opens_payload(c: char) -> bool {
    matches!(c, SPLIT | ALIAS | INTERPRET)
}

pub(crate) fn closes_payload(c: char) -> bool {
    c == CLOSE
}

/// `words` between marks that make [`extract`] claim them as `say` says: how SSML's
/// `<phoneme>`, `<sub>` and `<say-as>` ride through splitting, as inline phonemes do.
pub(crate) fn marked(words: &str, say: &Say) -> String {
    let (mark, what) = match say {
        Say::Phonemes(ipa) => (SPLIT, Cow::Borrowed(ipa.as_str())),
        Say::Alias(alias) => (ALIAS, Cow::Borrowed(alias.as_str())),
        Say::Interpret { how, format } => (
            INTERPRET,
            Cow::Owned(match format {
                Some(format) => format!("{} {format}", how.as_str()),
                None => how.as_str().to_string(),
            }),
        ),
    };
    let clean = |text: &str| text.chars().filter(|&c| !is_mark(c)).collect::<String>();
    format!("{OPEN}{}{mark}{}{CLOSE}", clean(words), clean(&what))
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
            SPLIT | ALIAS | INTERPRET => {
                let what: String = chars.by_ref().take_while(|&c| c != CLOSE).collect();
                let what = what.split_whitespace().collect::<Vec<_>>().join(" ");
                let say = match c {
                    SPLIT => (!what.is_empty()).then_some(Say::Phonemes(what)),
                    ALIAS => Some(Say::Alias(what)),
                    _ => interpretation(&what),
                };
                if let (Some(start), Some(say)) = (words_start.take(), say) {
                    // Markdown inside the brackets may leave space at their edges.
                    let words = &text[start..];
                    let start = start + (words.len() - words.trim_start().len());
                    let end = start + words.trim().len();
                    if start < end {
                        claims.push(Claim {
                            written: start..end,
                            say,
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

/// `date` or `date dmy`, as [`marked`] wrote it.
fn interpretation(what: &str) -> Option<Say> {
    let (how, format) = match what.split_once(' ') {
        Some((how, format)) => (how, Some(format.to_string())),
        None => (what, None),
    };
    Some(Say::Interpret {
        how: InterpretAs::parse(how)?,
        format,
    })
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
    fn marked_words_come_back_as_their_claims() {
        let says = [
            Say::Phonemes("kˈOkəɹO".into()),
            Say::Alias("World Wide Web".into()),
            Say::Interpret {
                how: InterpretAs::Date,
                format: Some("dmy".into()),
            },
            Say::Interpret {
                how: InterpretAs::Characters,
                format: None,
            },
        ];
        let mut sentence = String::from("Read");
        for say in &says {
            sentence.push(' ');
            sentence.push_str(&marked("it", say));
        }
        let (text, claims) = extract(&sentence);
        assert_eq!(text, "Read it it it it");
        let said: Vec<&Say> = claims.iter().map(|c| &c.say).collect();
        assert_eq!(said, says.iter().collect::<Vec<_>>());
        assert!(claims.iter().all(|c| &text[c.written.clone()] == "it"));
        // Marks inside what is marked are the client's, and go.
        let forged = marked("a\u{E001}b", &Say::Alias("c\u{E002}d".into()));
        let (text, claims) = extract(&forged);
        assert_eq!(text, "ab");
        assert_eq!(claims[0].say, Say::Alias("cd".into()));
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
