//! A number's role, read from its neighbours (issue #50): the same digits are a count before
//! a noun ("2019 tickets" two thousand nineteen), a year after "in" or "since" ("since 2019"
//! twenty nineteen), and an identifier after a code word or a product's name ("gate 214" two
//! fourteen, "Xbox 360" three sixty, "Python 3.12" three point twelve).

use super::numbers::{identifier, version};
use super::tokens::{Kind, Token};
use super::{Cursor, Words};

/// Words after which a number names one thing among many rather than counting them.
const CODE_WORDS: &[&str] = &[
    "apartment",
    "apt",
    "building",
    "bus",
    "channel",
    "exit",
    "flight",
    "gate",
    "highway",
    "interstate",
    "line",
    "model",
    "pier",
    "platform",
    "room",
    "route",
    "row",
    "seat",
    "suite",
    "terminal",
    "track",
    "unit",
    "version",
];

/// Capitalised words that start sentences and clauses rather than name products.
const NOT_NAMES: &[&str] = &[
    "a", "about", "add", "after", "all", "almost", "an", "and", "another", "around", "at",
    "before", "between", "but", "by", "call", "during", "each", "every", "exactly", "for", "from",
    "he", "i", "in", "into", "it", "just", "nearly", "no", "of", "on", "only", "or", "over",
    "page", "per", "roughly", "she", "since", "some", "step", "than", "the", "they", "to", "top",
    "total", "under", "until", "up", "we", "with", "you",
];

/// Words after which a four-digit number is a year even before a plural.
const YEAR_CUES: &[&str] = &[
    "in", "since", "until", "till", "during", "circa", "year", "class", "fall", "spring", "summer",
    "winter",
];

/// Plurals that do not end in `s`.
const IRREGULAR_PLURALS: &[&str] = &[
    "aircraft",
    "cattle",
    "children",
    "data",
    "deer",
    "feet",
    "fish",
    "geese",
    "men",
    "mice",
    "people",
    "personnel",
    "police",
    "sheep",
    "staff",
    "teeth",
    "women",
];

/// Words ending in `s` that are no plural nouns.
const NOT_PLURALS: &[&str] = &[
    "across",
    "afterwards",
    "always",
    "as",
    "besides",
    "does",
    "goes",
    "has",
    "his",
    "its",
    "less",
    "news",
    "perhaps",
    "plus",
    "sometimes",
    "this",
    "thus",
    "towards",
    "unless",
    "was",
    "whereas",
    "yes",
];

/// Words that describe the noun after them: "2048 new books" counts them, where "2026
/// roadmap focuses" is a year before a noun and a verb.
const ADJECTIVES: &[&str] = &[
    "active",
    "additional",
    "big",
    "daily",
    "different",
    "duplicate",
    "extra",
    "free",
    "full",
    "large",
    "local",
    "monthly",
    "more",
    "new",
    "old",
    "open",
    "other",
    "paid",
    "private",
    "public",
    "separate",
    "small",
    "unique",
    "weekly",
    "young",
];

/// Endings of words that describe rather than name.
const ADJECTIVE_ENDINGS: &[&str] = &["able", "al", "ed", "ful", "ible", "ic", "ing", "ive", "ous"];

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    glued_version(cursor).or_else(|| named_number(cursor))
}

/// A number after a code word or a name: an identifier, or a version when it has dots.
fn named_number(cursor: &Cursor) -> Option<Words> {
    let number = cursor.get(0).filter(|t| t.is_number())?;
    if !cursor.at_word_start() {
        return None;
    }
    let before = cursor.previous_word()?;
    let coded = CODE_WORDS.contains(&before.text.to_ascii_lowercase().as_str());
    if !coded && !is_name(before) {
        return None;
    }
    let (parts, tokens) = version_parts(cursor)?;
    let next = cursor.get(tokens);
    let joined = next.is_some_and(|t| {
        matches!(t.kind, Kind::Mark(c) if "-–:%/'\"".contains(c))
            || (t.is_mark('.') && cursor.get(tokens + 1).is_some_and(Token::is_number))
    });
    if joined || !cursor.ends_at(tokens) || number.text.contains(',') {
        return None;
    }
    if parts.len() > 1 {
        return Some(Words::new(tokens, version(&parts)?));
    }
    // Up to two digits an identifier is the cardinal a quantity reads ("Wait 1 1/2 hours"
    // stays a mixed fraction); a leading zero is read digit by digit there too.
    if (!coded && number.text.len() <= 2) || number.text.starts_with('0') {
        return None;
    }
    // A name before a count is still a count: "Invite 250 people".
    let shouting = before.text.bytes().all(|b| b.is_ascii_uppercase());
    if !coded && !shouting && is_count(cursor, 0) {
        return None;
    }
    Some(Words::new(1, identifier(number.text)?))
}

/// A capitalised word that may name a product or a place: `Xbox`, `RTX`, `Python`, not a
/// sentence's first "About" or a month.
fn is_name(word: &Token) -> bool {
    word.text.starts_with(|c: char| c.is_uppercase())
        && !NOT_NAMES.contains(&word.text.to_lowercase().as_str())
        && !super::dates::is_calendar_word(word)
}

/// The parts of a number as written at the cursor, dots and all (`10.2.1` is the number
/// `10.2`, a period and `1`), and the tokens they take.
fn version_parts<'a>(cursor: &Cursor<'a>) -> Option<(Vec<&'a str>, usize)> {
    let first = cursor.get(0).filter(|t| t.is_number())?;
    let mut parts: Vec<&str> = first.text.split('.').collect();
    let mut tokens = 1;
    while let (Some(dot), Some(part)) = (cursor.get(tokens), cursor.get(tokens + 1)) {
        if !dot.is_mark('.') || !part.is_digits() {
            break;
        }
        parts.push(part.text);
        tokens += 2;
    }
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    Some((parts, tokens))
}

/// `v2.1`, `v3.4.2`: a version glued to its `v`.
fn glued_version(cursor: &Cursor) -> Option<Words> {
    let v = cursor.get(0).filter(|t| t.is("v"))?;
    if !cursor.at_word_start() || !cursor.get(1)?.is_number() {
        return None;
    }
    let rest = Cursor {
        at: cursor.at + 1,
        ..*cursor
    };
    let (parts, tokens) = version_parts(&rest)?;
    if !cursor.ends_at(1 + tokens) || v.text != "v" {
        return None;
    }
    Some(Words::new(
        1 + tokens,
        format!("version {}", version(&parts)?),
    ))
}

/// Whether the number `offset` tokens on counts the noun after it: a plural within the next
/// two words ("2019 tickets", "2048 new books").
pub(super) fn is_count(cursor: &Cursor, offset: usize) -> bool {
    let word_at = |at: usize| {
        cursor
            .get(at)
            .filter(|t| t.is_space() && t.text == " ")
            .and(cursor.get(at + 1))
            .filter(|t| t.is_word())
    };
    let Some(first) = word_at(offset + 1) else {
        return false;
    };
    if is_plural_noun(first.text) {
        return true;
    }
    let describes = ADJECTIVES.contains(&first.text)
        || ADJECTIVE_ENDINGS
            .iter()
            .any(|end| first.text.ends_with(end));
    describes && word_at(offset + 3).is_some_and(|second| is_plural_noun(second.text))
}

/// Whether the word before the number `offset` tokens on makes it a year whatever follows.
pub(super) fn after_year_cue(cursor: &Cursor, offset: usize) -> bool {
    let at = Cursor {
        at: cursor.at + offset,
        ..*cursor
    };
    at.previous_word()
        .is_some_and(|w| YEAR_CUES.contains(&w.text.to_lowercase().as_str()))
}

fn is_plural_noun(word: &str) -> bool {
    if IRREGULAR_PLURALS.contains(&word) {
        return true;
    }
    word.len() >= 3
        && word.bytes().all(|b| b.is_ascii_lowercase())
        && word.ends_with('s')
        && !["ss", "us", "is"].iter().any(|end| word.ends_with(end))
        && !NOT_PLURALS.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn a_number_reads_by_its_role() {
        for (written, said) in [
            (
                "We sold 2019 tickets.",
                "We sold two thousand nineteen tickets.",
            ),
            (
                "Since 2019 tickets cost more.",
                "Since twenty nineteen tickets cost more.",
            ),
            (
                "It lent 2048 new books.",
                "It lent two thousand forty-eight new books.",
            ),
            (
                "The 2026 roadmap focuses on it.",
                "The twenty twenty-six roadmap focuses on it.",
            ),
            ("Go to gate 214 now.", "Go to gate two fourteen now."),
            (
                "Take flight 1492 home.",
                "Take flight fourteen ninety-two home.",
            ),
            ("The Xbox 360 is old.", "The Xbox three sixty is old."),
            (
                "Install Python 3.12 today.",
                "Install Python three point twelve today.",
            ),
            (
                "Ship v3.4.2 today.",
                "Ship version three point four point two today.",
            ),
            ("Invite 250 people.", "Invite two hundred fifty people."),
            ("About 250 came.", "About two hundred fifty came."),
            ("Rooms 3-5 are free.", "Rooms three to five are free."),
        ] {
            assert_eq!(spoken(written), said, "{written}");
        }
    }
}
