//! The tokens a sentence is read in: the rules look at words, numbers and marks, not at bytes.

/// What a stretch of the sentence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Letters, with apostrophes between them (`don't`, `rock’n’roll`).
    Word,
    /// Digits, with thousands commas in groups of three and a decimal part (`1,234.50`, `.5`).
    Number,
    /// A run of whitespace.
    Space,
    /// Any other single character.
    Mark(char),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token<'a> {
    pub kind: Kind,
    pub text: &'a str,
    /// Byte offset in the sentence.
    pub start: usize,
}

impl Token<'_> {
    pub fn end(&self) -> usize {
        self.start + self.text.len()
    }

    pub fn is_word(&self) -> bool {
        self.kind == Kind::Word
    }

    pub fn is_number(&self) -> bool {
        self.kind == Kind::Number
    }

    pub fn is_space(&self) -> bool {
        self.kind == Kind::Space
    }

    pub fn is_mark(&self, mark: char) -> bool {
        self.kind == Kind::Mark(mark)
    }

    /// A number of digits only: no comma, no decimal point.
    pub fn is_digits(&self) -> bool {
        self.is_number() && self.text.bytes().all(|b| b.is_ascii_digit())
    }

    /// A word equal to `word`, ignoring case.
    pub fn is(&self, word: &str) -> bool {
        self.is_word() && self.text.eq_ignore_ascii_case(word)
    }
}

/// Cuts `sentence` into tokens that cover it without gaps.
pub(super) fn tokenize(sentence: &str) -> Vec<Token<'_>> {
    let bytes = sentence.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < sentence.len() {
        let c = sentence[at..].chars().next().expect("at a char boundary");
        let (kind, len) = if c.is_ascii_digit()
            || (c == '.' && digit_at(bytes, at + 1) && !digit_before(bytes, at))
        {
            (Kind::Number, number_len(bytes, at))
        } else if c.is_alphabetic() {
            (Kind::Word, word_len(sentence, at))
        } else if c.is_whitespace() {
            let len = sentence[at..]
                .char_indices()
                .find(|(_, c)| !c.is_whitespace())
                .map_or(sentence.len() - at, |(i, _)| i);
            (Kind::Space, len)
        } else {
            (Kind::Mark(c), c.len_utf8())
        };
        tokens.push(Token {
            kind,
            text: &sentence[at..at + len],
            start: at,
        });
        at += len;
    }
    tokens
}

fn digit_at(bytes: &[u8], at: usize) -> bool {
    bytes.get(at).is_some_and(u8::is_ascii_digit)
}

fn digit_before(bytes: &[u8], at: usize) -> bool {
    at > 0 && bytes[at - 1].is_ascii_digit()
}

/// `1`, `1,234`, `1,234.5`, `.5`: commas only between groups of exactly three digits, and a
/// decimal point only with a digit after it.
fn number_len(bytes: &[u8], start: usize) -> usize {
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut end = start + digits(start);
    if end > start {
        while bytes.get(end) == Some(&b',')
            && digits(end + 1) == 3
            && start + digits(start) <= end
            && !digit_at(bytes, end + 4)
        {
            end += 4;
        }
    }
    if bytes.get(end) == Some(&b'.') && digit_at(bytes, end + 1) {
        end += 1 + digits(end + 1);
    }
    end - start
}

fn word_len(sentence: &str, start: usize) -> usize {
    let mut end = start;
    let mut chars = sentence[start..].char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let joins =
            (c == '\'' || c == '’') && chars.peek().is_some_and(|&(_, next)| next.is_alphabetic());
        // Combining marks belong to the letter before them.
        if c.is_alphabetic() || ('\u{300}'..='\u{36f}').contains(&c) || (joins && i > 0) {
            end = start + i + c.len_utf8();
        } else {
            break;
        }
    }
    end - start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(&str, Kind)> {
        tokenize(text).iter().map(|t| (t.text, t.kind)).collect()
    }

    #[test]
    fn numbers_keep_their_thousands_and_decimals() {
        use Kind::*;
        assert_eq!(
            kinds("$1,234.50, 1,23 and .5."),
            [
                ("$", Mark('$')),
                ("1,234.50", Number),
                (",", Mark(',')),
                (" ", Space),
                ("1", Number),
                (",", Mark(',')),
                ("23", Number),
                (" ", Space),
                ("and", Word),
                (" ", Space),
                (".5", Number),
                (".", Mark('.')),
            ]
        );
        assert_eq!(kinds("1,2345")[0], ("1", Number));
        assert_eq!(kinds("3.")[0], ("3", Number));
    }

    #[test]
    fn words_keep_inner_apostrophes_only() {
        let tokens = kinds("don’t 'quote' rock'n'roll");
        let words: Vec<&str> = tokens
            .iter()
            .filter(|(_, k)| *k == Kind::Word)
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(words, ["don’t", "quote", "rock'n'roll"]);
        let whole: String = tokenize("a  b\u{301}c").iter().map(|t| t.text).collect();
        assert_eq!(whole, "a  b\u{301}c");
    }
}
