//! Sentence splitting, so that long requests become a batch of short utterances.
//!
//! Each piece is synthesized as one item: shorter items start streaming sooner, batch with
//! other requests, and stay inside what a VITS model handles well. A wrong split only costs a
//! pause in the wrong place, never text: the pieces, joined, are always the input.

use super::inline;

/// Abbreviations that practically never end a sentence, so a period after them is no boundary
/// even before a capital ("Dr. Smith", "e.g. Paris"). Lowercase, without the final period.
const NON_TERMINAL_ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "mx", "dr", "prof", "rev", "hon", "gen", "col", "lt", "sgt", "capt", "st",
    "mt", "fig", "figs", "vol", "e.g", "i.e", "cf", "vs", "approx", "no", "nos", "ca", "ft",
];

const SENTENCE_END: &[char] = &['.', '!', '?', '…'];
const CLOSERS: &[char] = &['"', '\'', '”', '’', '»', ')', ']', '}'];
const OPENERS: &[char] = &['"', '\'', '“', '‘', '«', '(', '[', '{'];
/// Clause marks where an over-long sentence may be cut, strongest first.
const STRONG_CLAUSE_BREAKS: &[char] = &[';', ':', '—', '–'];

/// Whether `text` ends with the end of a sentence (closing quotes and brackets aside).
pub fn ends_sentence(text: &str) -> bool {
    text.trim_end()
        .trim_end_matches(CLOSERS)
        .ends_with(SENTENCE_END)
}

/// Splits `text` into sentences, and sentences longer than `max_chars` characters further at
/// clause boundaries (`;` `:` `—` `,`), then at spaces, and as a last resort inside a word, so that
/// no piece is longer than `max_chars` (at least 1). Pieces are trimmed; joined in order they
/// give the input up to whitespace.
pub fn split_sentences(text: &str, max_chars: usize) -> Vec<String> {
    let max_chars = max_chars.max(1);
    sentence_spans(text)
        .into_iter()
        .flat_map(|sentence| split_long(sentence, max_chars))
        .collect()
}

/// The sentences of `text`, trimmed, without empty ones.
fn sentence_spans(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |i: usize| chars.get(i).map_or(text.len(), |&(b, _)| b);
    let mut sentences = Vec::new();
    let mut start = 0; // char index
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i].1;
        let boundary_end = if SENTENCE_END.contains(&c) {
            let run_end = skip_while(&chars, i, |c| SENTENCE_END.contains(&c));
            let end = skip_while(&chars, run_end, |c| CLOSERS.contains(&c));
            let is_boundary = (end == chars.len() || chars[end].1.is_whitespace())
                && !continues_in_lowercase(&chars, end)
                && !(run_end - i == 1 && c == '.' && is_abbreviation(&chars, start, i));
            i = end;
            is_boundary.then_some(end)
        } else if inline::opens_payload(c) {
            // What marked words are said as is no text of the sentence: an alias's period
            // ends nothing.
            i = skip_while(&chars, i, |c| !inline::closes_payload(c));
            None
        } else if c == '\n' {
            // A blank line ends a paragraph, punctuated or not.
            let end = skip_while(&chars, i, char::is_whitespace);
            let newlines = chars[i..end].iter().filter(|&&(_, c)| c == '\n').count();
            i = end;
            (newlines >= 2).then_some(end)
        } else {
            i += 1;
            None
        };
        if let Some(end) = boundary_end {
            push_trimmed(&mut sentences, &text[byte_at(start)..byte_at(end)]);
            start = end;
        }
    }
    push_trimmed(&mut sentences, &text[byte_at(start)..]);
    sentences
}

fn skip_while(chars: &[(usize, char)], from: usize, pred: impl Fn(char) -> bool) -> usize {
    from + chars[from..].iter().take_while(|&&(_, c)| pred(c)).count()
}

fn push_trimmed<'a>(pieces: &mut Vec<&'a str>, piece: &'a str) {
    let piece = piece.trim();
    if !piece.is_empty() {
        pieces.push(piece);
    }
}

/// Whether the text after a terminator goes on with a lowercase word ("e.g. this", "U.S. is",
/// "wait... what", "“Really?” she asked"): then it is one sentence.
fn continues_in_lowercase(chars: &[(usize, char)], from: usize) -> bool {
    chars[from..]
        .iter()
        .map(|&(_, c)| c)
        .find(|c| !c.is_whitespace() && !OPENERS.contains(c))
        .is_some_and(char::is_lowercase)
}

/// Whether the word ending at the period `period` (a char index) is an abbreviation that does
/// not end a sentence, or a single-letter initial ("J. R. R. Tolkien").
fn is_abbreviation(chars: &[(usize, char)], sentence_start: usize, period: usize) -> bool {
    let word_start = chars[sentence_start..period]
        .iter()
        .rposition(|&(_, c)| c.is_whitespace())
        .map_or(sentence_start, |p| sentence_start + p + 1);
    let word: String = chars[word_start..period]
        .iter()
        .map(|&(_, c)| c)
        .skip_while(|c| OPENERS.contains(c))
        .collect();
    let mut letters = word.chars();
    let is_initial =
        matches!((letters.next(), letters.next()), (Some(c), None) if c.is_uppercase());
    is_initial || NON_TERMINAL_ABBREVIATIONS.contains(&word.to_lowercase().as_str())
}

/// Cuts a sentence into pieces of at most `max_chars` characters, each as long as possible,
/// preferring clause boundaries, then spaces.
fn split_long(sentence: &str, max_chars: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest = sentence;
    while rest.chars().count() > max_chars {
        let window_end = rest
            .char_indices()
            .nth(max_chars)
            .map_or(rest.len(), |(b, _)| b);
        let cut = clause_cut(rest, window_end, max_chars)
            .or_else(|| space_cut(rest, window_end))
            .unwrap_or(window_end);
        pieces.push(rest[..cut].trim_end().to_string());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() {
        pieces.push(rest.to_string());
    }
    pieces
}

/// The byte position just after the last clause mark in `rest[..window_end]` where a cut may go;
/// a strong mark (`;` `:` dash) wins unless it leaves a piece shorter than a third of the limit.
fn clause_cut(rest: &str, window_end: usize, max_chars: usize) -> Option<usize> {
    let mut last_strong = None;
    let mut last_any = None;
    for (b, c) in rest[..window_end].char_indices() {
        let after = b + c.len_utf8();
        let is_dash = matches!(c, '—' | '–');
        let followed_by_space = rest[after..].starts_with(char::is_whitespace);
        if !(is_dash || (matches!(c, ';' | ':' | ',') && followed_by_space)) {
            continue;
        }
        if rest[..b].trim().is_empty() {
            continue; // a cut here would leave an empty piece
        }
        if STRONG_CLAUSE_BREAKS.contains(&c) {
            last_strong = Some((after, rest[..after].chars().count()));
        }
        last_any = Some(after);
    }
    match last_strong {
        Some((cut, chars)) if chars * 3 >= max_chars => Some(cut),
        _ => last_any,
    }
}

/// The byte position of the last whitespace at or before `window_end` that leaves a non-empty
/// piece.
fn space_cut(rest: &str, window_end: usize) -> Option<usize> {
    let limit = (window_end + 1).min(rest.len());
    let limit = (0..=limit).rev().find(|&b| rest.is_char_boundary(b))?;
    rest[..limit]
        .char_indices()
        .rev()
        .find(|&(b, c)| c.is_whitespace() && !rest[..b].trim().is_empty())
        .map(|(b, _)| b)
}

#[cfg(test)]
mod tests {
    use super::split_sentences;

    fn split(text: &str) -> Vec<String> {
        split_sentences(text, 400)
    }

    fn without_whitespace(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }

    /// The invariants every split must keep: nothing lost or reordered, nothing too long,
    /// nothing empty.
    fn check_invariants(text: &str, max_chars: usize) -> Vec<String> {
        let pieces = split_sentences(text, max_chars);
        assert_eq!(
            without_whitespace(&pieces.concat()),
            without_whitespace(text),
            "text lost or reordered for {text:?} (max {max_chars}): {pieces:?}"
        );
        for piece in &pieces {
            assert!(!piece.is_empty(), "empty piece for {text:?}");
            assert_eq!(piece.trim(), piece);
            assert!(
                piece.chars().count() <= max_chars.max(1),
                "piece {piece:?} longer than {max_chars}"
            );
        }
        pieces
    }

    #[test]
    fn splits_plain_sentences() {
        assert_eq!(
            split("Hello there. How are you? Fine! Thanks."),
            ["Hello there.", "How are you?", "Fine!", "Thanks."]
        );
        assert_eq!(split("No final punctuation"), ["No final punctuation"]);
        assert_eq!(
            split("What?! Really?? Yes."),
            ["What?!", "Really??", "Yes."]
        );
    }

    #[test]
    fn keeps_abbreviations_inside_sentences() {
        assert_eq!(
            split("Mr. Smith met Dr. Jones at St. Mary's. They talked."),
            ["Mr. Smith met Dr. Jones at St. Mary's.", "They talked."]
        );
        assert_eq!(
            split("Bring fruit, e.g. apples, i.e. red ones. Then go."),
            ["Bring fruit, e.g. apples, i.e. red ones.", "Then go."]
        );
        assert_eq!(
            split("The U.S. is large. The U.K. is not."),
            ["The U.S. is large.", "The U.K. is not."]
        );
        assert_eq!(
            split("J. R. R. Tolkien wrote it. Read it."),
            ["J. R. R. Tolkien wrote it.", "Read it."]
        );
        assert_eq!(
            split("We sell apples, pears, etc. Come by."),
            ["We sell apples, pears, etc.", "Come by."]
        );
        assert_eq!(
            split("See Fig. 3 for details."),
            ["See Fig. 3 for details."]
        );
    }

    #[test]
    fn keeps_decimals_and_ellipses() {
        assert_eq!(
            split("Pi is 3.14 roughly. Version 1.2.3 is out."),
            ["Pi is 3.14 roughly.", "Version 1.2.3 is out."]
        );
        assert_eq!(
            split("Wait... what? Well… Fine."),
            ["Wait... what?", "Well…", "Fine."]
        );
        assert_eq!(
            split("It costs $5.00. Cheap."),
            ["It costs $5.00.", "Cheap."]
        );
    }

    #[test]
    fn quotes_and_brackets_stay_with_their_sentence() {
        assert_eq!(
            split("He said \"Stop.\" Then he left. (It was late.) Done."),
            [
                "He said \"Stop.\"",
                "Then he left.",
                "(It was late.)",
                "Done."
            ]
        );
        assert_eq!(
            split("“Really?” she asked. ‘Yes!’ He nodded."),
            ["“Really?” she asked.", "‘Yes!’", "He nodded."]
        );
    }

    #[test]
    fn blank_lines_end_sentences() {
        assert_eq!(
            split("A heading\n\nSome text\nstill same. Next"),
            ["A heading", "Some text\nstill same.", "Next"]
        );
    }

    #[test]
    fn empty_input_gives_no_pieces() {
        assert!(split("").is_empty());
        assert!(split("  \n ").is_empty());
    }

    #[test]
    fn long_sentences_split_at_clauses_first() {
        let text = "The first part of the sentence is here; the second part follows, \
                    and the third part ends it.";
        assert_eq!(
            check_invariants(text, 50),
            [
                "The first part of the sentence is here;",
                "the second part follows,",
                "and the third part ends it."
            ]
        );
        assert_eq!(
            check_invariants("One thing — another thing — a third thing here.", 30),
            ["One thing — another thing —", "a third thing here."]
        );
    }

    #[test]
    fn numbers_with_separators_are_not_clause_breaks() {
        assert_eq!(
            check_invariants("It cost 3,000 dollars at 10:30 today, said he.", 30),
            ["It cost 3,000 dollars at 10:30", "today, said he."]
        );
    }

    #[test]
    fn long_sentences_without_clauses_split_at_spaces_then_anywhere() {
        assert_eq!(
            check_invariants("aaa bbb ccc ddd eee fff", 8),
            ["aaa bbb", "ccc ddd", "eee fff"]
        );
        assert_eq!(
            check_invariants("abcdefghijkl mn", 5),
            ["abcde", "fghij", "kl mn"]
        );
        assert_eq!(check_invariants("ééééé", 2), ["éé", "éé", "é"]);
        assert_eq!(check_invariants("abc", 0), ["a", "b", "c"]);
    }

    #[test]
    fn invariants_hold_on_generated_text() {
        // A fixed pseudo-random mix of words, punctuation, quotes, digits and multibyte text.
        let tokens = [
            "word",
            "Dr.",
            "e.g.",
            "3.14",
            "U.S.",
            "x",
            "...",
            "…",
            "?!",
            ".",
            ",",
            ";",
            ":",
            "—",
            "\"",
            "“quoted”",
            "(paren)",
            "ÄÖÜ",
            "日本語",
            "\n\n",
            "  ",
            "Mr.",
            "end.",
            "A.",
            "supercalifragilisticexpialidocious",
            "1,000",
            "10:30",
        ];
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        for round in 0..300 {
            let mut text = String::new();
            for _ in 0..(round % 60) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push_str(tokens[(state % tokens.len() as u64) as usize]);
                if state & 0x100 != 0 {
                    text.push(' ');
                }
            }
            for max_chars in [1, 7, 20, 80, 400] {
                check_invariants(&text, max_chars);
            }
        }
    }
}
