//! English as a news reader says it: numbers, money, dates, times, units, abbreviations,
//! addresses and symbols written out as words before a sentence is phonemized.
//!
//! espeak-ng reads `$5.50` as "dollar five point five zero" and `2026-12-01` as a subtraction,
//! for every engine that phonemizes with it (Piper, espeak, Kokoro). So an English sentence is
//! first cut into [`tokens`], and each family of rules (one module each, tried in a fixed
//! order at every token) may replace a few tokens with the words they stand for. What no rule
//! claims stays exactly as written. The conventions are in `docs/text-normalization.md`, and a
//! hand-written corpus holds the rules to them.
//!
//! Every replacement is reported as a [`Rewrite`]: word timestamps time the words the engine
//! spoke, and a rewrite lets those words be reported as the one written word they came from
//! (`$5.50` is timed from "five" to "cents").

mod abbreviations;
mod dates;
mod keys;
mod measures;
mod money;
mod numbers;
pub use numbers::is_number_word;
mod phone;
mod products;
mod quantities;
mod ranges;
mod roles;
mod roman;
mod say_as;
mod scores;
mod symbols;
mod tokens;
mod web;

use std::ops::Range;

use tokens::{tokenize, Token};

use super::pronunciation::{Claim, Pronunciation, Say};

/// How slashed dates like `12/01/2026` are read when both numbers could be the month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DateOrder {
    /// December first (American usage).
    #[default]
    MonthFirst,
    /// The twelfth of January.
    DayFirst,
}

impl DateOrder {
    /// `"mdy"` or `"dmy"`.
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "mdy" => Some(Self::MonthFirst),
            "dmy" => Some(Self::DayFirst),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::MonthFirst => "mdy",
            Self::DayFirst => "dmy",
        }
    }
}

/// Choices a request (or the server) makes about how text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadingOptions {
    pub date_order: DateOrder,
}

/// A sentence as it is spoken, and where its rewritten words came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Spoken {
    pub text: String,
    /// In order; everything outside them is the sentence as written.
    pub rewrites: Vec<Rewrite>,
    /// Words of `text` said with given phonemes (claimed by the dictionary or inline
    /// markup), in order; each is also one of the rewrites.
    pub pronunciations: Vec<Pronunciation>,
}

/// Words that stand for something written otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// Byte range of the words in [`Spoken::text`].
    pub spoken: Range<usize>,
    /// Byte range of what they replace in the sentence.
    pub written: Range<usize>,
}

impl Spoken {
    /// The sentence unchanged.
    pub fn verbatim(sentence: &str) -> Self {
        Self {
            text: sentence.to_string(),
            ..Self::default()
        }
    }

    /// The rewrite whose words include the spoken byte range `range`, if any.
    pub fn rewrite_of(&self, range: &Range<usize>) -> Option<&Rewrite> {
        self.rewrites
            .iter()
            .find(|r| r.spoken.start <= range.start && range.end <= r.spoken.end)
    }
}

/// `sentence` with every number, date, abbreviation and symbol that a rule knows written out.
pub fn read(sentence: &str, options: &ReadingOptions) -> Spoken {
    read_claimed(sentence, Some(options), &[])
}

/// `sentence` with its `claims` (in order, apart) said as they say, and, when `options` are
/// given, everything else [`read`] as usual. The rules look at the whole sentence (so "Dr."
/// before a claimed "Nguyen" still sees a name after it), but a reading that would take in a
/// claimed word is not used: "5 kg" with "kg" claimed reads the number alone.
pub fn read_claimed(sentence: &str, options: Option<&ReadingOptions>, claims: &[Claim]) -> Spoken {
    let tokens = tokenize(sentence);
    let rules: &[Rule] = if options.is_some() { RULES } else { &[] };
    let english = options;
    let options = options.copied().unwrap_or_default();
    let mut spoken = Spoken::default();
    let mut at = 0;
    for claim in claims
        .iter()
        .map(Some)
        .chain([None])
        .filter(|c| c.is_none_or(|c| c.written.end <= sentence.len()))
    {
        let until = claim.map_or(sentence.len(), |c| c.written.start);
        // The rules read the tokens wholly before the claim.
        let stretch = tokens.partition_point(|t| t.end() <= until);
        while at < stretch {
            let cursor = Cursor {
                tokens: &tokens,
                at,
                options: &options,
                sentence,
            };
            let fits = |words: &Words| words.tokens > 0 && at + words.tokens <= stretch;
            match rules.iter().find_map(|rule| rule(&cursor).filter(fits)) {
                Some(words) => {
                    let written = tokens[at].start..tokens[at + words.tokens - 1].end();
                    spoken.push_words(&words.text, written, tokens.get(at + words.tokens));
                    at += words.tokens;
                }
                None => {
                    spoken.text.push_str(tokens[at].text);
                    at += 1;
                }
            }
        }
        let Some(claim) = claim else { break };
        if claim.written.start < spoken_end(&tokens, at) {
            continue; // overlaps what was read already: claims come in order and apart
        }
        // A token cut by the claim's start keeps its head as written.
        if let Some(token) = tokens.get(at).filter(|t| t.start < claim.written.start) {
            spoken
                .text
                .push_str(&sentence[token.start..claim.written.start]);
        }
        at = tokens.partition_point(|t| t.end() <= claim.written.end);
        let next = tokens.get(at).filter(|t| t.start >= claim.written.end);
        let written = claim.written.clone();
        match &claim.say {
            Say::Alias(words) => spoken.push_words(words, written, next),
            Say::Interpret { how, format } => {
                let words =
                    say_as::interpret(&sentence[written.clone()], *how, format.as_deref(), english);
                spoken.push_words(&words, written, next);
            }
            Say::Phonemes(ipa) => {
                let words = &sentence[written.clone()];
                let start = spoken.text.len();
                spoken.text.push_str(words);
                spoken.rewrites.push(Rewrite {
                    spoken: start..spoken.text.len(),
                    written,
                });
                spoken.pronunciations.push(Pronunciation {
                    text: start..spoken.text.len(),
                    ipa: ipa.clone(),
                });
            }
        }
        // …and one cut by its end keeps its tail.
        if let Some(token) = tokens.get(at).filter(|t| t.start < claim.written.end) {
            spoken
                .text
                .push_str(&sentence[claim.written.end..token.end()]);
            at += 1;
        }
    }
    spoken
}

/// Where the text read so far ends in the sentence: the start of token `at`.
fn spoken_end(tokens: &[Token], at: usize) -> usize {
    match at {
        0 => 0,
        _ => tokens[at - 1].end(),
    }
}

/// The families, in the order they are tried at each token: the more specific shapes first
/// (an address holds numbers, a date holds what looks like a range, a score or a range of
/// days what looks like a date, a product's name what looks like a count).
const RULES: &[Rule] = &[
    web::read,
    keys::read,
    phone::read,
    scores::read,
    ranges::read,
    dates::read,
    money::read,
    measures::read,
    products::read,
    roles::read,
    quantities::read,
    roman::read,
    abbreviations::read,
    symbols::read,
];

type Rule = fn(&Cursor) -> Option<Words>;

/// What a rule reads a few tokens as.
struct Words {
    /// How many tokens, from the cursor on, the words replace.
    tokens: usize,
    text: String,
}

impl Words {
    fn new(tokens: usize, text: impl Into<String>) -> Self {
        Self {
            tokens,
            text: text.into(),
        }
    }
}

impl Spoken {
    /// Appends words that replace `written`, spaced from the letters and digits around them.
    fn push_words(&mut self, words: &str, written: Range<usize>, next: Option<&Token>) {
        // `3 p.m.` ending a sentence: one period says both.
        let words = match next {
            Some(t) if t.is_mark('.') => words.strip_suffix('.').unwrap_or(words),
            _ => words,
        };
        if self.text.ends_with(|c: char| c.is_alphanumeric()) {
            self.text.push(' ');
        }
        let start = self.text.len();
        self.text.push_str(words);
        self.rewrites.push(Rewrite {
            spoken: start..self.text.len(),
            written,
        });
        if next.is_some_and(|t| t.text.starts_with(|c: char| c.is_alphanumeric())) {
            self.text.push(' ');
        }
    }
}

/// Where a rule stands in a sentence's tokens.
struct Cursor<'a> {
    tokens: &'a [Token<'a>],
    at: usize,
    options: &'a ReadingOptions,
    sentence: &'a str,
}

impl<'a> Cursor<'a> {
    /// The token `offset` places after the cursor (0 is the one at it).
    fn get(&self, offset: usize) -> Option<&'a Token<'a>> {
        self.tokens.get(self.at + offset)
    }

    /// The token `back` places before the cursor (1 is the one just before).
    fn before(&self, back: usize) -> Option<&'a Token<'a>> {
        self.at.checked_sub(back).and_then(|i| self.tokens.get(i))
    }

    /// The word before the cursor, across one space: `in` for `in 1990`.
    fn previous_word(&self) -> Option<&'a Token<'a>> {
        match self.before(1)? {
            space if space.is_space() => self.before(2).filter(|t| t.is_word()),
            _ => None,
        }
    }

    /// The words and numbers before the cursor, nearest first, back to the start of its
    /// clause (a comma, colon, bracket or sentence mark).
    fn clause_before(&self) -> impl Iterator<Item = &'a Token<'a>> {
        let tokens: &'a [Token<'a>] = self.tokens;
        tokens[..self.at]
            .iter()
            .rev()
            .take_while(|t| !matches!(t.kind, tokens::Kind::Mark(c) if ",;:.!?()".contains(c)))
            .filter(|t| t.is_word() || t.is_number())
    }

    /// Whether the cursor stands at the start of a word: nothing that joins on before it but
    /// opening quotes and brackets, or a `#` or `~` that is read on its own (`#1`, `~50`).
    fn at_word_start(&self) -> bool {
        self.before(1).is_none_or(|t| {
            t.is_space() || matches!(t.kind, tokens::Kind::Mark(c) if "([{\"'“‘#~".contains(c))
        })
    }

    /// Whether a word or number ends at `offset` tokens on: what follows is not glued to it
    /// (a space, or punctuation other than what joins addresses and paths; a period only
    /// where no word goes on after it, as in `3.5x` or `a.b`).
    fn ends_at(&self, offset: usize) -> bool {
        let Some(next) = self.get(offset) else {
            return true;
        };
        let tokens::Kind::Mark(c) = next.kind else {
            return next.is_space();
        };
        let glues = "@_/".contains(c)
            || (c == '.'
                && self
                    .get(offset + 1)
                    .is_some_and(|n| n.is_word() || n.is_number()));
        !glues
    }

    /// The number of tokens an abbreviation of `len` tokens and its period take: the period
    /// stays as written when it also ends the sentence.
    fn with_period(&self, len: usize) -> usize {
        if self.ends_sentence(len + 1) {
            len
        } else {
            len + 1
        }
    }

    /// Whether nothing but closing quotes, brackets and space follows `offset` tokens on.
    fn ends_sentence(&self, offset: usize) -> bool {
        self.tokens[(self.at + offset).min(self.tokens.len())..]
            .iter()
            .all(|t| {
                t.is_space() || matches!(t.kind, tokens::Kind::Mark(c) if "\"')]}”’»".contains(c))
            })
    }

    /// The sentence text from the cursor on.
    fn rest(&self) -> &'a str {
        &self.sentence[self.get(0).map_or(self.sentence.len(), |t| t.start)..]
    }

    /// How many tokens, from the cursor on, cover the first `bytes` bytes of [`rest`].
    fn tokens_in(&self, bytes: usize) -> usize {
        let end = self.get(0).map_or(0, |t| t.start) + bytes;
        self.tokens[self.at..]
            .iter()
            .take_while(|t| t.start < end)
            .count()
    }
}

/// A sentence as the rules read it by default, for the rule modules' tests.
#[cfg(test)]
fn said(text: &str) -> String {
    read(text, &ReadingOptions::default()).text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spoken(text: &str) -> Spoken {
        read(text, &ReadingOptions::default())
    }

    #[test]
    fn rewrites_point_back_at_what_they_replace() {
        let text = "Pay $5.50 by 3pm, please.";
        let out = spoken(text);
        assert_eq!(
            out.text,
            "Pay five dollars fifty cents by three p.m., please."
        );
        let words: Vec<(&str, &str)> = out
            .rewrites
            .iter()
            .map(|r| (&out.text[r.spoken.clone()], &text[r.written.clone()]))
            .collect();
        assert_eq!(
            words,
            [("five dollars fifty cents", "$5.50"), ("three p.m.", "3pm")]
        );
        let cents = out.text.find("cents").unwrap();
        assert_eq!(
            out.rewrite_of(&(cents..cents + 5))
                .map(|r| r.written.clone()),
            Some(4..9)
        );
        assert!(out.rewrite_of(&(0..3)).is_none());
    }

    /// The corpus was written by hand from `docs/text-normalization.md`, not from this code.
    #[test]
    fn the_hand_written_corpus_reads_as_written() {
        let corpus = include_str!("../../../tests/fixtures/normalization/en.tsv");
        let mut cases = 0;
        let mut failures = Vec::new();
        for line in corpus.lines() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (input, expected) = line.split_once('\t').expect("input<TAB>reading");
            cases += 1;
            let out = spoken(input);
            if out.text != expected {
                failures.push(format!(
                    "  {input}\n    want {expected}\n    got  {}",
                    out.text
                ));
            }
            // Rewrites are in order, apart, and cover real text on both sides.
            let mut last = (0, 0);
            for r in &out.rewrites {
                assert!(
                    r.written.start >= last.0 && r.spoken.start >= last.1,
                    "{input}"
                );
                assert!(input
                    .get(r.written.clone())
                    .is_some_and(|w| !w.trim().is_empty()));
                assert!(out.text.get(r.spoken.clone()).is_some(), "{input}");
                last = (r.written.end, r.spoken.end);
            }
        }
        assert!(cases >= 300, "only {cases} cases");
        assert!(
            failures.is_empty(),
            "{} of {cases} cases read otherwise:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    fn claim(sentence: &str, word: &str, say: Say) -> Claim {
        let start = sentence.find(word).unwrap();
        Claim {
            written: start..start + word.len(),
            say,
        }
    }

    #[test]
    fn claimed_words_are_said_as_claimed_and_the_rules_read_around_them() {
        let sentence = "Pay $5 to nginx at 3pm, Dr. Nguyen.";
        let claims = [
            claim(sentence, "nginx", Say::Alias("engine x".into())),
            claim(sentence, "Nguyen", Say::Phonemes("wˈɪn".into())),
        ];
        let options = ReadingOptions::default();
        let out = read_claimed(sentence, Some(&options), &claims);
        assert_eq!(
            out.text,
            "Pay five dollars to engine x at three p.m., Doctor Nguyen."
        );
        let pairs: Vec<(&str, &str)> = out
            .rewrites
            .iter()
            .map(|r| (&out.text[r.spoken.clone()], &sentence[r.written.clone()]))
            .collect();
        assert_eq!(
            pairs,
            [
                ("five dollars", "$5"),
                ("engine x", "nginx"),
                ("three p.m.", "3pm"),
                ("Doctor", "Dr."),
                ("Nguyen", "Nguyen")
            ]
        );
        assert_eq!(out.pronunciations.len(), 1);
        let given = &out.pronunciations[0];
        assert_eq!(
            (&out.text[given.text.clone()], given.ipa.as_str()),
            ("Nguyen", "wˈɪn")
        );

        // Without reading options only the claims change anything.
        let plain = read_claimed(sentence, None, &claims);
        assert_eq!(plain.text, "Pay $5 to engine x at 3pm, Dr. Nguyen.");
    }

    #[test]
    fn a_claim_is_never_swallowed_by_a_rule() {
        // "5 kg" would be a measure; with "kg" claimed, the number is read alone.
        let sentence = "Take 5 kg now.";
        let claims = [claim(
            sentence,
            "kg",
            Say::Alias("kilograms, roughly".into()),
        )];
        let out = read_claimed(sentence, Some(&ReadingOptions::default()), &claims);
        assert_eq!(out.text, "Take five kilograms, roughly now.");
        // Overlapping or out-of-range claims are skipped, never a panic.
        let bad = [
            claim(sentence, "Take 5", Say::Alias("a".into())),
            claim(sentence, "5 kg", Say::Alias("b".into())),
            Claim {
                written: 10..99,
                say: Say::Alias("c".into()),
            },
        ];
        let out = read_claimed(sentence, None, &bad);
        assert_eq!(out.text, "a kg now.");
    }

    #[test]
    fn plain_prose_is_left_as_written() {
        for text in [
            "I think so.",
            "May I come in?",
            "Hello, world!",
            "It’s “fine” — really…",
        ] {
            assert_eq!(spoken(text), Spoken::verbatim(text));
        }
    }
}
