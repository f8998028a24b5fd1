//! Dates and times: `2026-12-01` "December first, twenty twenty-six", `Dec. 1` "December
//! first", `1 December 2026` "the first of December, twenty twenty-six", `3:30pm` "three thirty
//! p.m.", `14:05` "fourteen oh five".

use super::numbers::{cardinal, integer, is_ordinal_suffix, ordinal, year};
use super::quantities::{is_around_the_clock, is_fraction};
use super::tokens::Token;
use super::{Cursor, DateOrder, Words};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const WEEKDAYS: [(&[&str], &str); 7] = [
    (&["Mon"], "Monday"),
    (&["Tue", "Tues"], "Tuesday"),
    (&["Wed"], "Wednesday"),
    (&["Thu", "Thur", "Thurs"], "Thursday"),
    (&["Fri"], "Friday"),
    (&["Sat"], "Saturday"),
    (&["Sun"], "Sunday"),
];

/// Words before a slashed pair that make it a date rather than a fraction: "due 3/4".
const DATE_CUES: &[&str] = &[
    "after",
    "arrives",
    "before",
    "begins",
    "by",
    "closes",
    "due",
    "effective",
    "ends",
    "expire",
    "expired",
    "expires",
    "from",
    "issued",
    "launches",
    "on",
    "opens",
    "renew",
    "renews",
    "ship",
    "shipped",
    "ships",
    "since",
    "starting",
    "starts",
    "through",
    "thru",
    "till",
    "until",
];

/// Words before "by" that make what follows an amount of change: "fell by 1/3".
const CHANGED_BY: &[&str] = &[
    "cut",
    "decreased",
    "down",
    "drop",
    "dropped",
    "fell",
    "grew",
    "grow",
    "increase",
    "increased",
    "reduce",
    "reduced",
    "rise",
    "rose",
    "shrank",
    "up",
];

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    iso(cursor)
        .or_else(|| slashed(cursor))
        .or_else(|| month_day(cursor))
        .or_else(|| day_month(cursor))
        .or_else(|| weekday(cursor))
        .or_else(|| lone_month(cursor))
        .or_else(|| time(cursor))
}

/// A weekday's name, in full or abbreviated (`Tue`, `Thurs`), capitalised.
pub(super) fn weekday_name(word: &Token) -> Option<&'static str> {
    if !word.is_word() {
        return None;
    }
    WEEKDAYS
        .iter()
        .find(|(short, name)| short.contains(&word.text) || *name == word.text)
        .map(|(_, name)| *name)
}

/// Whether a word names a month or a weekday.
pub(super) fn is_calendar_word(word: &Token) -> bool {
    month(word).is_some() || weekday_name(word).is_some()
}

/// The month a word names, in full or abbreviated (`Dec`, `Sept`), capitalised.
pub(super) fn month(word: &Token) -> Option<usize> {
    if !word.is_word() || !word.text.starts_with(|c: char| c.is_uppercase()) {
        return None;
    }
    // `APR`, `MAR`: capitals are acronyms more often than months.
    if word.text.len() > 1 && word.text.chars().all(|c| c.is_uppercase()) {
        return None;
    }
    let text = word.text;
    // Compared in place: this runs at every word of every sentence.
    MONTHS.iter().position(|m| {
        m.eq_ignore_ascii_case(text)
            || (text.len() == 3 && m[..3].eq_ignore_ascii_case(text))
            || (*m == "September" && text.eq_ignore_ascii_case("sept"))
    })
}

pub(super) fn month_name(month: usize) -> &'static str {
    MONTHS[month]
}

/// A day of the month: 1 to 31, one or two digits.
fn day(number: &Token) -> Option<u64> {
    (number.is_digits() && number.text.len() <= 2)
        .then(|| integer(number.text))
        .flatten()
        .filter(|d| (1..=31).contains(d))
}

/// A year written in full (four digits) or as two (`'26` is left alone, `/26` is 2026).
fn full_year(number: &Token) -> Option<u64> {
    (number.is_digits() && number.text.len() == 4).then(|| integer(number.text))?
}

fn date_words(month: usize, day: u64, year_of: Option<u64>, day_first: bool) -> String {
    let mut words = if day_first {
        format!("the {} of {}", ordinal(day), month_name(month))
    } else {
        format!("{} {}", month_name(month), ordinal(day))
    };
    if let Some(y) = year_of {
        words.push_str(", ");
        words.push_str(&year(y));
    }
    words
}

/// `2026-12-01`.
fn iso(cursor: &Cursor) -> Option<Words> {
    let [y, d1, m, d2, d] = [0, 1, 2, 3, 4].map(|i| cursor.get(i));
    let (y, m, d) = (y?, m?, d?);
    let dashed = d1?.is_mark('-') && d2?.is_mark('-');
    if !cursor.at_word_start()
        || !dashed
        || m.text.len() != 2
        || d.text.len() != 2
        || !cursor.ends_at(5)
    {
        return None;
    }
    let year_of = full_year(y)?;
    let month_of = integer(m.text).filter(|m| (1..=12).contains(m))? as usize - 1;
    Some(Words::new(
        5,
        date_words(month_of, day(d)?, Some(year_of), false),
    ))
}

/// `12/01/2026`, `31/12/2026`, `12/01`: month first unless the request says day first, or
/// the first number cannot be a month.
fn slashed(cursor: &Cursor) -> Option<Words> {
    let (a, s1, b) = (cursor.get(0)?, cursor.get(1)?, cursor.get(2)?);
    if !cursor.at_word_start() || !s1.is_mark('/') {
        return None;
    }
    let (a_n, b_n) = (day(a)?, day(b)?);
    let with_year = cursor.get(3).is_some_and(|t| t.is_mark('/'));
    let (tokens, year_of) = if with_year {
        let y = cursor.get(4)?;
        let y = match y.text.len() {
            4 => full_year(y)?,
            2 => 2000 + integer(y.text)?,
            _ => return None,
        };
        (5, Some(y))
    } else {
        if is_around_the_clock(a, b) || (is_fraction(a, b) && !dated(cursor)) {
            return None;
        }
        (3, None)
    };
    if !cursor.ends_at(tokens) {
        return None;
    }
    let day_first = match cursor.options.date_order {
        _ if a_n > 12 && b_n <= 12 => true,
        _ if b_n > 12 && a_n <= 12 => false,
        _ if a_n > 12 => return None,
        DateOrder::MonthFirst => false,
        DateOrder::DayFirst => true,
    };
    let (month_of, day_of) = if day_first { (b_n, a_n) } else { (a_n, b_n) };
    Some(Words::new(
        tokens,
        date_words(month_of as usize - 1, day_of, year_of, day_first),
    ))
}

/// Whether the word before the cursor makes a slashed pair a date: "due 3/4", "Tue 3/4",
/// but not "fell by 1/3".
fn dated(cursor: &Cursor) -> bool {
    let Some(word) = cursor.previous_word() else {
        return false;
    };
    let lower = word.text.to_lowercase();
    if lower == "by" {
        let before = Cursor {
            at: cursor.at - 2,
            ..*cursor
        };
        return !before
            .previous_word()
            .is_some_and(|w| CHANGED_BY.contains(&w.text.to_lowercase().as_str()));
    }
    DATE_CUES.contains(&lower.as_str()) || weekday_name(word).is_some()
}

/// `Aug.`, `Sept.`, `Oct 2025`: a month's abbreviation on its own, with its period or
/// before a year.
fn lone_month(cursor: &Cursor) -> Option<Words> {
    let word = cursor.get(0).filter(|t| t.is_word() && t.text.len() <= 4)?;
    let month_of = month(word)?;
    if !cursor.at_word_start() || month_name(month_of).len() == word.text.len() {
        return None;
    }
    if cursor.get(1).is_some_and(|t| t.is_mark('.')) {
        return Some(Words::new(cursor.with_period(1), month_name(month_of)));
    }
    let year_after = cursor.get(1).is_some_and(|t| t.is_space())
        && cursor.get(2).is_some_and(|y| full_year(y).is_some());
    (year_after && cursor.ends_at(1)).then(|| Words::new(1, month_name(month_of)))
}

/// `Dec. 1`, `December 1st`, `Dec 1, 2026`, `Nov 24-27`.
fn month_day(cursor: &Cursor) -> Option<Words> {
    let month_of = month(cursor.get(0)?)?;
    let mut at = 1;
    if cursor.get(at)?.is_mark('.') {
        at += 1;
    }
    if !cursor.get(at)?.is_space() {
        return None;
    }
    let day_token = cursor.get(at + 1)?;
    let day_of = day(day_token)?;
    at += 2;
    if let Some(suffix) = cursor.get(at).filter(|t| t.is_word()) {
        if !is_ordinal_suffix(day_of, suffix.text) {
            return None;
        }
        at += 1;
    }
    // `Nov 24-27`: a range of days in the month.
    let mut last_day = None;
    if let (Some(dash), Some(to)) = (cursor.get(at), cursor.get(at + 1)) {
        if let Some(to_day) = (dash.is_mark('-') || dash.is_mark('–'))
            .then(|| day(to))
            .flatten()
            .filter(|&d| d > day_of)
        {
            last_day = Some(to_day);
            at += 2;
        }
    }
    if !cursor.ends_at(at) {
        return None;
    }
    if let Some(last) = last_day {
        return Some(Words::new(
            at,
            format!(
                "{} to {}",
                date_words(month_of, day_of, None, false),
                ordinal(last)
            ),
        ));
    }
    // `, 2026`
    let mut year_of = None;
    if let (Some(comma), Some(space), Some(y)) =
        (cursor.get(at), cursor.get(at + 1), cursor.get(at + 2))
    {
        if comma.is_mark(',') && space.is_space() && cursor.ends_at(at + 3) {
            if let Some(y) = full_year(y) {
                year_of = Some(y);
                at += 3;
            }
        }
    }
    Some(Words::new(at, date_words(month_of, day_of, year_of, false)))
}

/// `1 December 2026`, `1 Dec`, `1st of December`.
fn day_month(cursor: &Cursor) -> Option<Words> {
    let day_of = day(cursor.get(0)?)?;
    if !cursor.at_word_start() {
        return None;
    }
    let mut at = 1;
    if let Some(suffix) = cursor.get(at).filter(|t| t.is_word()) {
        if !is_ordinal_suffix(day_of, suffix.text) {
            return None;
        }
        at += 1;
    }
    if !cursor.get(at)?.is_space() {
        return None;
    }
    at += 1;
    if cursor.get(at)?.is("of") && cursor.get(at + 1)?.is_space() {
        at += 2;
    }
    let month_of = month(cursor.get(at)?)?;
    at += 1;
    if cursor.get(at).is_some_and(|t| t.is_mark('.')) && !cursor.ends_sentence(at + 1) {
        at += 1;
    }
    let mut year_of = None;
    if let (Some(space), Some(y)) = (cursor.get(at), cursor.get(at + 1)) {
        if space.is_space() && cursor.ends_at(at + 2) {
            if let Some(y) = full_year(y) {
                year_of = Some(y);
                at += 2;
            }
        }
    }
    if !cursor.ends_at(at) {
        return None;
    }
    let words = date_words(month_of, day_of, year_of, true);
    // `the 1st of May`: the article is written already.
    let words = match cursor.previous_word() {
        Some(the) if the.is("the") => words.trim_start_matches("the ").to_string(),
        _ => words,
    };
    Some(Words::new(at, words))
}

/// `Mon., Dec. 1` "Monday, December first": a weekday's abbreviation before a date.
fn weekday(cursor: &Cursor) -> Option<Words> {
    let word = cursor.get(0).filter(|t| t.is_word())?;
    let (_, name) = WEEKDAYS
        .iter()
        .find(|(short, _)| short.contains(&word.text))?;
    let period = usize::from(cursor.get(1).is_some_and(|t| t.is_mark('.')));
    let comma = usize::from(cursor.get(1 + period).is_some_and(|t| t.is_mark(',')));
    if !cursor.get(1 + period + comma)?.is_space() {
        return None;
    }
    // `Tue 3/4`, `Sat 11pm`: a day's abbreviation before a date or a time.
    if comma == 0 && cursor.get(2 + period).is_some_and(|t| t.is_number()) {
        return Some(Words::new(1 + period, *name));
    }
    if period + comma == 0 {
        return None;
    }
    let date = Cursor {
        at: cursor.at + 2 + period + comma,
        ..*cursor
    };
    month_day(&date).or_else(|| day_month(&date))?;
    // The period goes with the abbreviation; the comma stays as written.
    Some(Words::new(1 + period, *name))
}

/// `3:30`, `3:30pm`, `3 p.m.`, `14:05`, `3:30:15`.
fn time(cursor: &Cursor) -> Option<Words> {
    if !cursor.at_word_start() {
        return None;
    }
    clock(cursor)
}

/// A time at the cursor, wherever it starts (the end of a range `9am-5pm` starts after a
/// dash).
pub(super) fn clock(cursor: &Cursor) -> Option<Words> {
    let first = cursor.get(0).filter(|t| t.is_number())?;
    let mut at = 1;
    let mut minutes = None;
    let mut seconds = None;
    // British `3.30pm`: a dot between hours and minutes, only with a.m. or p.m. after it.
    let (hour_text, dotted) = match first.text.split_once('.') {
        Some((h, m)) if m.len() == 2 && !h.is_empty() && meridiem(cursor, 1).is_some() => {
            minutes = Some(integer(m).filter(|&m| m < 60)?);
            (h, true)
        }
        Some(_) => return None,
        None => (first.text, false),
    };
    if !hour_text.bytes().all(|b| b.is_ascii_digit()) || hour_text.len() > 2 {
        return None;
    }
    let hour = integer(hour_text)?;
    if !dotted && cursor.get(1).is_some_and(|t| t.is_mark(':')) {
        let m = cursor
            .get(2)
            .filter(|t| t.is_digits() && t.text.len() == 2)?;
        minutes = Some(integer(m.text).filter(|&m| m < 60)?);
        at = 3;
        if cursor.get(3).is_some_and(|t| t.is_mark(':')) {
            let s = cursor
                .get(4)
                .filter(|t| t.is_digits() && t.text.len() == 2)?;
            seconds = Some(integer(s.text).filter(|&s| s < 60)?);
            at = 5;
        }
    }
    let (meridiem, meridiem_tokens) = meridiem(cursor, at).unzip();
    if minutes.is_none() && meridiem.is_none() {
        return None;
    }
    if hour > 23 || (meridiem.is_some() && !(1..=12).contains(&hour)) {
        return None;
    }
    at += meridiem_tokens.unwrap_or(0);
    if !cursor.ends_at(at) {
        return None;
    }
    let mut words = cardinal(hour);
    match minutes {
        None | Some(0) if meridiem.is_some() => {}
        Some(0) if (1..=12).contains(&hour) => words.push_str(" o'clock"),
        Some(0) => words.push_str(" hundred"),
        Some(m @ 1..=9) => words.push_str(&format!(" oh {}", cardinal(m))),
        Some(m) => words.push_str(&format!(" {}", cardinal(m))),
        None => {}
    }
    if let Some(s) = seconds {
        let unit = if s == 1 { "second" } else { "seconds" };
        words.push_str(&format!(" and {} {unit}", cardinal(s)));
    }
    if let Some(m) = meridiem {
        words.push(' ');
        words.push_str(m);
    }
    Some(Words::new(at, words))
}

/// `am`, `PM`, `a.m.`, ` p.m.` at `offset` tokens on: how it is written in the reading, and
/// how many tokens it takes (a final period that ends the sentence stays the sentence's).
fn meridiem(cursor: &Cursor, offset: usize) -> Option<(&'static str, usize)> {
    let gap = usize::from(cursor.get(offset)?.is_space());
    let word = cursor.get(offset + gap).filter(|t| t.is_word())?;
    let said = |letter: &str| match letter.to_ascii_lowercase().as_str() {
        "a" => Some("a.m."),
        "p" => Some("p.m."),
        _ => None,
    };
    // ASCII first: a two-byte word may be one letter (`Ò`), which has no byte 1 to cut at.
    if word.text.len() == 2 && word.text.is_ascii() && word.text[1..].eq_ignore_ascii_case("m") {
        if gap == 1
            && word.text != word.text.to_lowercase()
            && word.text != word.text.to_uppercase()
        {
            return None;
        }
        if !cursor.ends_at(offset + gap + 1) {
            return None;
        }
        return Some((said(&word.text[..1])?, gap + 1));
    }
    // `a.m.`: letter, period, m, period.
    let (p1, m, p2) = (
        cursor.get(offset + gap + 1)?,
        cursor.get(offset + gap + 2)?,
        cursor.get(offset + gap + 3),
    );
    if word.text.len() != 1 || !p1.is_mark('.') || !m.is("m") {
        return None;
    }
    let period = p2.is_some_and(|t| t.is_mark('.'));
    let tokens = if period && !cursor.ends_sentence(offset + gap + 4) {
        gap + 4
    } else {
        gap + 3
    };
    Some((said(word.text)?, tokens))
}

#[cfg(test)]
mod tests {
    use super::super::{read, DateOrder, ReadingOptions};

    fn spoken(text: &str, date_order: DateOrder) -> String {
        read(text, &ReadingOptions { date_order }).text
    }

    #[test]
    fn dates_read_in_words() {
        for (written, said) in [
            ("2026-12-01", "December first, twenty twenty-six"),
            ("Dec. 1", "December first"),
            ("December 1st", "December first"),
            ("Dec 1, 2026", "December first, twenty twenty-six"),
            (
                "1 December 2026",
                "the first of December, twenty twenty-six",
            ),
            ("12/01/2026", "December first, twenty twenty-six"),
            (
                "31/12/2026",
                "the thirty-first of December, twenty twenty-six",
            ),
            ("12/01", "December first"),
            ("Mon., Dec. 1", "Monday, December first"),
        ] {
            assert_eq!(
                spoken(&format!("On {written} we met."), DateOrder::MonthFirst),
                format!("On {said} we met."),
                "{written}"
            );
        }
        assert_eq!(
            spoken("On 12/01/2026 we met.", DateOrder::DayFirst),
            "On the twelfth of January, twenty twenty-six we met."
        );
    }

    /// A time followed by a two-byte letter is no meridiem, and no panic.
    #[test]
    fn a_time_before_a_two_byte_letter_reads_without_a_panic() {
        let read = spoken("1\u{8d}\u{d2}\u{ac}\u{97}M", DateOrder::MonthFirst);
        assert!(!read.contains("m."), "{read}");
        let _ = spoken("At 10 \u{d2} today.", DateOrder::MonthFirst);
    }

    #[test]
    fn times_read_in_words() {
        for (written, said) in [
            ("3:30", "three thirty"),
            ("3:05", "three oh five"),
            ("3:00", "three o'clock"),
            ("3pm", "three p.m."),
            ("3 p.m.", "three p.m."),
            ("3:30 PM", "three thirty p.m."),
            ("14:05", "fourteen oh five"),
            ("14:00", "fourteen hundred"),
            ("3:30:15", "three thirty and fifteen seconds"),
        ] {
            assert_eq!(
                spoken(&format!("Meet at {written} today."), DateOrder::MonthFirst),
                format!("Meet at {said} today."),
                "{written}"
            );
        }
        assert_eq!(
            spoken("Meet at 11 a.m.", DateOrder::MonthFirst),
            "Meet at eleven a.m."
        );
    }
}
