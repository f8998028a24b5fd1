//! Ranges written with words and times at their ends (issue #50): `Mon-Fri` "Monday to
//! Friday", `Apr–Jun` "April to June", `Tue/Thu` "Tuesday and Thursday", `9am-5pm` "nine a.m.
//! to five p.m.", `2-4pm` "two to four p.m.". Ranges of plain numbers are quantities'.

use super::dates::{clock, month, month_name, weekday_name};
use super::numbers::{cardinal, integer};
use super::tokens::Token;
use super::{Cursor, Words};

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    if !cursor.at_word_start() {
        return None;
    }
    named(cursor).or_else(|| times(cursor))
}

/// The word said between a range's ends for the mark written there.
fn joiner(mark: &Token) -> Option<&'static str> {
    if mark.is_mark('-') || mark.is_mark('–') {
        Some("to")
    } else if mark.is_mark('/') {
        Some("and")
    } else {
        None
    }
}

/// Two days or two months.
fn named(cursor: &Cursor) -> Option<Words> {
    let (a, mark, b) = (cursor.get(0)?, cursor.get(1)?, cursor.get(2)?);
    let joiner = joiner(mark)?;
    let (from, to) = match (weekday_name(a), weekday_name(b)) {
        (Some(from), Some(to)) => (from, to),
        _ => (month_name(month(a)?), month_name(month(b)?)),
    };
    cursor
        .ends_at(3)
        .then(|| Words::new(3, format!("{from} {joiner} {to}")))
}

/// Two times, or an hour and a time with its a.m. or p.m. (`2-4pm`).
fn times(cursor: &Cursor) -> Option<Words> {
    let first = clock(cursor);
    let (from, tokens) = match &first {
        Some(time) => (time.text.clone(), time.tokens),
        None => {
            let hour = cursor
                .get(0)
                .filter(|t| t.is_digits() && t.text.len() <= 2)?;
            (
                cardinal(integer(hour.text).filter(|h| (1..=12).contains(h))?),
                1,
            )
        }
    };
    let dash = cursor.get(tokens)?;
    if !(dash.is_mark('-') || dash.is_mark('–')) {
        return None;
    }
    let second = clock(&Cursor {
        at: cursor.at + tokens + 1,
        ..*cursor
    })?;
    if first.is_none() && !second.text.ends_with(".m.") {
        return None;
    }
    Some(Words::new(
        tokens + 1 + second.tokens,
        format!("{from} to {}", second.text),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn ranges_of_days_months_and_times_read_with_to() {
        for (written, said) in [
            ("Open Mon-Fri today.", "Open Monday to Friday today."),
            ("Open Tue/Thu today.", "Open Tuesday and Thursday today."),
            ("It runs Apr–Jun now.", "It runs April to June now."),
            ("Open 9am-5pm now.", "Open nine a.m. to five p.m. now."),
            ("Open 2-4pm now.", "Open two to four p.m. now."),
            (
                "Open 8:00-12:00 now.",
                "Open eight o'clock to twelve o'clock now.",
            ),
            ("We won 3-1 today.", "We won three to one today."),
        ] {
            assert_eq!(spoken(written), said, "{written}");
        }
    }
}
