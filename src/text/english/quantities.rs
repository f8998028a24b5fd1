//! Plain numbers: cardinals, decimals, negatives, ranges, fractions, ordinals, years and
//! decades. Tried after the families that give numbers a meaning (money, units, dates), so a
//! number that reaches here is just a quantity.

use super::numbers::{
    cardinal, count, digits, integer, is_ordinal_suffix, ordinal, plural, read_number, year,
};
use super::roles::{after_year_cue, is_count};
use super::tokens::Token;
use super::{Cursor, Words};

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    decade(cursor)
        .or_else(|| ordinal_number(cursor))
        .or_else(|| mixed_fraction(cursor))
        .or_else(|| fraction(cursor).map(|(tokens, words)| Words::new(tokens, words)))
        .or_else(|| over(cursor))
        .or_else(|| amount(cursor, 0, false).map(|a| Words::new(a.tokens, a.words)))
}

/// A number or a range of them, as money and units are counted: its tokens and words, and
/// whether it is exactly one (for the unit's singular).
pub(super) struct Amount {
    pub tokens: usize,
    pub words: String,
    pub one: bool,
}

/// The signed number or range (`-5`, `3.5`, `3-5`, `1990-2000`) at `offset` tokens on, if it
/// stands on its own there, or, with `unit`, if a unit may follow it at once (`5kg`); a unit's
/// amount is never a year (`1500 W`).
pub(super) fn amount(cursor: &Cursor, offset: usize, unit: bool) -> Option<Amount> {
    let sign = signed(cursor, offset)?;
    let first = cursor.get(offset + sign)?;
    let ends = |at: usize| unit || cursor.ends_at(at);
    let tokens = sign + 1;
    let mut words = quantity(first, cursor, offset + sign, unit)?;
    if sign == 1 {
        words = format!("minus {words}");
    }
    let one = sign == 0 && first.text == "1";
    // A range: `3-5`, `3–5`, with no spaces.
    if let (Some(dash), Some(second)) =
        (cursor.get(offset + tokens), cursor.get(offset + tokens + 1))
    {
        if (dash.is_mark('-') || dash.is_mark('–'))
            && second.is_number()
            && ends(offset + tokens + 2)
        {
            let both_years = !unit && is_year(first) && is_year(second);
            let high = if both_years {
                Some(year(integer(second.text)?))
            } else {
                read_number(second.text)
            };
            if let Some(high) = high {
                let low = if both_years {
                    year(integer(first.text)?)
                } else {
                    words
                };
                return Some(Amount {
                    tokens: tokens + 2,
                    words: format!("{low} to {high}"),
                    one: false,
                });
            }
        }
    }
    ends(offset + tokens).then_some(Amount { tokens, words, one })
}

/// How many sign tokens stand before the number at `offset`: 1 for `-5` at a word start, 0 for
/// `5`; `None` where no number starts.
fn signed(cursor: &Cursor, offset: usize) -> Option<usize> {
    let first = cursor.get(offset)?;
    let starts_word = offset > 0 || cursor.at_word_start();
    if (first.is_mark('-') || first.is_mark('−')) && starts_word {
        return cursor.get(offset + 1).filter(|t| t.is_number()).map(|_| 1);
    }
    (first.is_number() && starts_word).then_some(0)
}

/// A lone number's words: a year when it looks like one, digit by digit with a leading zero.
fn quantity(number: &Token, cursor: &Cursor, offset: usize, unit: bool) -> Option<String> {
    if !unit && is_year(number) && !cursor.get(offset + 1).is_some_and(|t| t.is_mark('%')) {
        let n = integer(number.text)?;
        // "2019 tickets" counts them; "since 2019" is a year whatever follows.
        if is_count(cursor, offset) && !after_year_cue(cursor, offset) {
            return Some(count(n));
        }
        return Some(year(n));
    }
    if number.is_digits() && number.text.len() > 1 && number.text.starts_with('0') {
        return Some(digits(number.text, "zero"));
    }
    read_number(number.text)
}

/// Four digits from 1100 to 2099 with no comma: how years are written.
pub(super) fn is_year(number: &Token) -> bool {
    number.is_digits()
        && number.text.len() == 4
        && integer(number.text).is_some_and(|n| (1100..2100).contains(&n))
}

/// `21st`, `2nd`, `1,000th`.
fn ordinal_number(cursor: &Cursor) -> Option<Words> {
    let number = cursor.get(0).filter(|t| t.is_number())?;
    let suffix = cursor.get(1).filter(|t| t.is_word())?;
    let n = integer(number.text)?;
    (cursor.at_word_start() && is_ordinal_suffix(n, suffix.text) && cursor.ends_at(2))
        .then(|| Words::new(2, ordinal(n)))
}

/// `1990s`, `1800s`, `'90s`, `90s`.
fn decade(cursor: &Cursor) -> Option<Words> {
    let apostrophe = cursor
        .get(0)
        .is_some_and(|t| t.is_mark('\'') || t.is_mark('’'));
    let skip = usize::from(apostrophe);
    let number = cursor.get(skip).filter(|t| t.is_digits())?;
    cursor.get(skip + 1).filter(|t| t.text == "s")?;
    if !cursor.at_word_start() || !cursor.ends_at(skip + 2) || !number.text.ends_with('0') {
        return None;
    }
    let n = integer(number.text)?;
    let words = match number.text.len() {
        2 => plural(&cardinal(n)),
        4 if !apostrophe && (1000..10_000).contains(&n) => plural(&year(n)),
        _ => return None,
    };
    Some(Words::new(skip + 2, words))
}

/// Denominators read as fractions, with their singular and plural names.
fn denominator(n: u64) -> Option<(&'static str, &'static str)> {
    Some(match n {
        2 => ("half", "halves"),
        3 => ("third", "thirds"),
        4 => ("quarter", "quarters"),
        5 => ("fifth", "fifths"),
        6 => ("sixth", "sixths"),
        7 => ("seventh", "sevenths"),
        8 => ("eighth", "eighths"),
        9 => ("ninth", "ninths"),
        10 => ("tenth", "tenths"),
        16 => ("sixteenth", "sixteenths"),
        32 => ("thirty-second", "thirty-seconds"),
        64 => ("sixty-fourth", "sixty-fourths"),
        100 => ("hundredth", "hundredths"),
        _ => return None,
    })
}

/// `24/7`: neither a fraction nor a date, but "twenty-four seven".
pub(super) fn is_around_the_clock(top: &Token, bottom: &Token) -> bool {
    (top.text, bottom.text) == ("24", "7")
}

/// Whether `numerator/denominator`, as written, is read as a fraction rather than a date.
pub(super) fn is_fraction(numerator: &Token, denominator_token: &Token) -> bool {
    !is_around_the_clock(numerator, denominator_token)
        && numerator.is_digits()
        && denominator_token.is_digits()
        && !denominator_token.text.starts_with('0')
        && integer(numerator.text).is_some_and(|n| n < 100)
        && integer(denominator_token.text).is_some_and(|d| denominator(d).is_some())
}

/// `3/4` "three quarters": its tokens and words.
fn fraction(cursor: &Cursor) -> Option<(usize, String)> {
    let (top, slash, bottom) = (cursor.get(0)?, cursor.get(1)?, cursor.get(2)?);
    if !cursor.at_word_start() || !slash.is_mark('/') || !is_fraction(top, bottom) {
        return None;
    }
    if !cursor.ends_at(3) {
        return None;
    }
    let (n, d) = (integer(top.text)?, integer(bottom.text)?);
    let (one, many) = denominator(d)?;
    let words = if n == 1 {
        format!("one {one}")
    } else {
        format!("{} {many}", cardinal(n))
    };
    Some((3, words))
}

/// `40/60` "forty over sixty": two whole numbers with a slash that are neither a fraction
/// nor a date; `24/7` is the idiom.
fn over(cursor: &Cursor) -> Option<Words> {
    let (top, slash, bottom) = (cursor.get(0)?, cursor.get(1)?, cursor.get(2)?);
    if !cursor.at_word_start() || !slash.is_mark('/') || !top.is_digits() || !bottom.is_digits() {
        return None;
    }
    if !cursor.ends_at(3) || top.text.starts_with('0') || bottom.text.starts_with('0') {
        return None;
    }
    let (n, d) = (integer(top.text)?, integer(bottom.text)?);
    let words = if is_around_the_clock(top, bottom) {
        "twenty-four seven".to_string()
    } else {
        format!("{} over {}", cardinal(n), cardinal(d))
    };
    Some(Words::new(3, words))
}

/// `1 1/2` "one and a half".
fn mixed_fraction(cursor: &Cursor) -> Option<Words> {
    let whole = cursor.get(0).filter(|t| t.is_digits())?;
    if !cursor.at_word_start() || !cursor.get(1)?.is_space() {
        return None;
    }
    let rest = Cursor {
        at: cursor.at + 2,
        ..*cursor
    };
    let (tokens, words) = fraction(&rest)?;
    let words = words
        .strip_prefix("one ")
        .map_or(words.clone(), |w| format!("a {w}"));
    Some(Words::new(
        tokens + 2,
        format!("{} and {words}", cardinal(integer(whole.text)?)),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn quantities_read_as_words() {
        for (written, said) in [
            ("7 days", "seven days"),
            (
                "1,234,567 people",
                "one million two hundred thirty-four thousand five hundred sixty-seven people",
            ),
            ("pi is 3.14", "pi is three point one four"),
            ("It was -5 outside", "It was minus five outside"),
            ("3-5 days", "three to five days"),
            ("from 1990-2000", "from nineteen ninety to two thousand"),
            ("3/4 of them", "three quarters of them"),
            ("open 24/7", "open twenty-four seven"),
            ("1 1/2 cups", "one and a half cups"),
            ("the 21st time", "the twenty-first time"),
            (
                "the 1990s and the '80s",
                "the nineteen nineties and the eighties",
            ),
            ("in 1905", "in nineteen oh five"),
            ("agent 007", "agent zero zero seven"),
            ("an MP3 in 4K", "an MP3 in 4K"),
            // A wrong suffix is no ordinal, and a number glued to letters stays as written.
            ("the 21th", "the 21th"),
        ] {
            assert_eq!(spoken(written), said, "{written}");
        }
    }
}
