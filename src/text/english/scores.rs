//! Ratings, scores and ratios (issue #50): `rated 9/10` "nine out of ten", `a 3.8/4 GPA` "three
//! point eight out of four", `a 16:9 ratio` "sixteen to nine". A slash between numbers is a
//! score only where the sentence rates something; elsewhere it stays a fraction or a date.

use super::numbers::{cardinal, integer, read_number};
use super::tokens::Token;
use super::{Cursor, Words};

/// Words before a score, in its clause, that say something is being rated.
const SCORE_CUES: &[&str] = &[
    "earn", "earned", "earns", "gave", "get", "give", "given", "gives", "got", "grade", "graded",
    "ranked", "rate", "rated", "rates", "rating", "review", "reviewed", "score", "scored",
    "scores",
];

/// Words right after a score that say what it is.
const SCORE_NOUNS: &[&str] = &[
    "average", "gpa", "overall", "points", "rating", "ratings", "score", "star", "stars",
];

/// Words near `a:b` that make it a ratio rather than a time.
const RATIO_CUES: &[&str] = &["aspect", "mix", "odds", "ratio", "split"];

/// How far back, in words, a cue is looked for.
const CUE_REACH: usize = 6;

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    if !cursor.at_word_start() {
        return None;
    }
    score(cursor).or_else(|| ratio(cursor))
}

/// `9/10`, `4.5/5`, `92/100`, `3.8/4`.
fn score(cursor: &Cursor) -> Option<Words> {
    let (top, slash, bottom) = (cursor.get(0)?, cursor.get(1)?, cursor.get(2)?);
    if !top.is_number() || !slash.is_mark('/') || !bottom.is_digits() || !cursor.ends_at(3) {
        return None;
    }
    let scale = integer(bottom.text)?;
    let decimal = top.text.contains('.');
    if !(matches!(scale, 5 | 10 | 100) || (scale == 4 && decimal)) {
        return None;
    }
    let value: f64 = top.text.replace(',', "").parse().ok()?;
    if value > scale as f64 {
        return None;
    }
    let rated = decimal
        || top.text == bottom.text
        || labelled(cursor)
        || cued(cursor, SCORE_CUES)
        || named_after(cursor, 3, SCORE_NOUNS);
    rated.then(|| {
        let top = read_number(top.text)?;
        Some(Words::new(3, format!("{top} out of {}", cardinal(scale))))
    })?
}

/// `16:9`, `1:3`, `3:1` beside a word that makes them ratios.
fn ratio(cursor: &Cursor) -> Option<Words> {
    let (a, colon, b) = (cursor.get(0)?, cursor.get(1)?, cursor.get(2)?);
    let small = |t: &Token| t.is_digits() && t.text.len() <= 2;
    if !small(a) || !colon.is_mark(':') || !small(b) || !cursor.ends_at(3) {
        return None;
    }
    if !cued(cursor, RATIO_CUES) && !named_after(cursor, 3, RATIO_CUES) {
        return None;
    }
    Some(Words::new(
        3,
        format!(
            "{} to {}",
            cardinal(integer(a.text)?),
            cardinal(integer(b.text)?)
        ),
    ))
}

/// `Rating: 4/5`, `camera: 7/10`: the score is a label's value.
fn labelled(cursor: &Cursor) -> bool {
    let space = cursor.before(1).is_some_and(Token::is_space);
    let colon = cursor.before(1 + usize::from(space));
    colon.is_some_and(|t| t.is_mark(':'))
        && cursor
            .before(2 + usize::from(space))
            .is_some_and(Token::is_word)
}

/// Whether one of `cues` is among the last few words of the clause before the cursor.
fn cued(cursor: &Cursor, cues: &[&str]) -> bool {
    cursor
        .clause_before()
        .take(CUE_REACH)
        .any(|t| cues.contains(&t.text.to_lowercase().as_str()))
}

/// Whether the word after a space `offset` tokens on is one of `nouns`.
fn named_after(cursor: &Cursor, offset: usize, nouns: &[&str]) -> bool {
    cursor.get(offset).is_some_and(Token::is_space)
        && cursor
            .get(offset + 1)
            .is_some_and(|t| t.is_word() && nouns.contains(&t.text.to_lowercase().as_str()))
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn scores_read_out_of_where_something_is_rated() {
        for (written, said) in [
            (
                "Critics rated it 9/10.",
                "Critics rated it nine out of ten.",
            ),
            ("A 3.8/4 GPA.", "A three point eight out of four GPA."),
            ("Rating: 4/5.", "Rating: four out of five."),
            ("It got 2/5 stars.", "It got two out of five stars."),
            ("Add 9/10 of it.", "Add nine tenths of it."),
            (
                "The score was 150/200.",
                "The score was one hundred fifty over two hundred.",
            ),
            ("A 16:9 ratio.", "A sixteen to nine ratio."),
            ("Meet at 16:30.", "Meet at sixteen thirty."),
        ] {
            assert_eq!(spoken(written), said, "{written}");
        }
    }
}
