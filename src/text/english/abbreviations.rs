//! Abbreviations (`Dr.` "Doctor", `St.` "Saint" or "Street", `etc.` "et cetera") and the
//! acronyms espeak-ng gets wrong (`GUI` "gooey", `CDs` "C D's").
//!
//! espeak-ng already spells the capital words it cannot pronounce and reads the pronounceable
//! ones, so only its mistakes are listed here.

use super::numbers::{cardinal, integer, year};
use super::quantities::is_year;
use super::{Cursor, Words};

/// Where an abbreviation means what it says.
#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    /// Before a capitalised word: `Dr. Smith`, `St. Mary`.
    BeforeName,
    /// After a capitalised word: `Main St.`, `Elm Dr.`.
    AfterName,
    /// Before a number: `No. 5`.
    BeforeNumber,
    /// Before a year: `est. 1887`.
    BeforeYear,
}

/// Written form (without its period), reading, context, and whether the period may be left
/// out (`Mr Smith`, `vs`).
const ABBREVIATIONS: &[(&str, &str, When, bool)] = &[
    ("Dr", "Doctor", When::BeforeName, true),
    ("Dr", "Drive", When::AfterName, false),
    ("St", "Saint", When::BeforeName, false),
    ("St", "Street", When::AfterName, false),
    ("Mr", "Mister", When::Always, true),
    ("Mrs", "Missus", When::Always, true),
    ("Ms", "Miz", When::BeforeName, true),
    ("Prof", "Professor", When::Always, false),
    ("Jr", "Junior", When::Always, false),
    ("Sr", "Senior", When::Always, false),
    ("Ave", "Avenue", When::Always, false),
    ("Blvd", "Boulevard", When::Always, false),
    ("Rd", "Road", When::Always, false),
    ("Mt", "Mount", When::Always, false),
    ("Capt", "Captain", When::Always, false),
    ("Gen", "General", When::BeforeName, false),
    ("Lt", "Lieutenant", When::Always, false),
    ("Sgt", "Sergeant", When::Always, false),
    ("Col", "Colonel", When::BeforeName, false),
    ("Gov", "Governor", When::BeforeName, false),
    ("Sen", "Senator", When::BeforeName, false),
    ("Rep", "Representative", When::BeforeName, false),
    ("Rev", "Reverend", When::Always, false),
    ("Hon", "Honorable", When::Always, false),
    ("etc", "et cetera", When::Always, false),
    ("vs", "versus", When::Always, true),
    ("approx", "approximately", When::Always, false),
    ("No", "number", When::BeforeNumber, false),
    ("no", "number", When::BeforeNumber, false),
    ("Nos", "numbers", When::BeforeNumber, false),
    ("Fig", "figure", When::Always, false),
    ("fig", "figure", When::Always, false),
    ("Inc", "Incorporated", When::Always, false),
    ("Ltd", "Limited", When::Always, false),
    ("Co", "Company", When::AfterName, false),
    ("Corp", "Corporation", When::Always, false),
    ("Dept", "Department", When::Always, false),
    ("Univ", "University", When::Always, false),
    ("est", "established", When::BeforeYear, false),
    ("est", "estimated", When::Always, false),
    ("Est", "Established", When::BeforeYear, false),
    ("Est", "Estimated", When::Always, false),
    ("incl", "including", When::Always, false),
    ("excl", "excluding", When::Always, false),
    ("min", "minimum", When::BeforeNumber, false),
    ("max", "maximum", When::Always, false),
];

/// Two-letter abbreviations written with two periods.
const DOTTED: &[(&str, &str, &str)] = &[("e", "g", "for example"), ("i", "e", "that is")];

/// Acronyms that espeak-ng misreads, and how to say them.
const ACRONYMS: &[(&str, &str)] = &[
    ("GUI", "gooey"),
    ("JSON", "jason"),
    ("SQL", "S Q L"),
    ("ASAP", "A S A P"),
    ("FAQ", "F A Q"),
    ("LED", "L E D"),
    ("CEO", "C E O"),
    ("YoY", "year over year"),
    ("QoQ", "quarter over quarter"),
    ("macOS", "mac O S"),
    ("iOS", "i O S"),
    ("iPadOS", "iPad O S"),
    ("watchOS", "watch O S"),
    ("tvOS", "T V O S"),
];

/// Acronyms read as words, whose plural is no spelled plural.
const WORD_ACRONYMS: &[&str] = &[
    "AIDS", "CAPTCHA", "COVID", "FIFA", "GIF", "JPEG", "LASER", "NASA", "NATO", "NASDAQ", "OPEC",
    "PIN", "RAM", "RADAR", "SCUBA", "SIM", "SWAT", "UNESCO", "UNICEF", "WASP", "YOLO", "ZIP",
];

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    dotted(cursor)
        .or_else(|| abbreviation(cursor))
        .or_else(|| acronym(cursor))
        .or_else(|| with_slash(cursor))
        .or_else(|| period(cursor))
}

/// `w/` "with", `w/o` "without".
fn with_slash(cursor: &Cursor) -> Option<Words> {
    let w = cursor.get(0).filter(|t| t.text == "w" || t.text == "W")?;
    if !w.is_word() || !cursor.at_word_start() || !cursor.get(1)?.is_mark('/') {
        return None;
    }
    if cursor.get(2).is_some_and(|t| t.is("o")) && cursor.ends_at(3) {
        return Some(Words::new(3, "without"));
    }
    cursor
        .get(2)
        .is_some_and(|t| t.is_space())
        .then(|| Words::new(2, "with"))
}

/// A business period: `Q1` "Q one", `H2` "H two", `FY2026` "F Y twenty twenty-six", `FY26`.
fn period(cursor: &Cursor) -> Option<Words> {
    let (letters, number) = (cursor.get(0)?, cursor.get(1)?);
    if !letters.is_word() || !number.is_digits() || !cursor.at_word_start() || !cursor.ends_at(2) {
        return None;
    }
    let n = integer(number.text)?;
    let words = match (letters.text, number.text.len()) {
        ("Q", 1) if (1..=4).contains(&n) => format!("Q {}", cardinal(n)),
        ("H", 1) if (1..=2).contains(&n) => format!("H {}", cardinal(n)),
        ("FY", 2) => format!("F Y {}", cardinal(n)),
        ("FY", 4) => format!("F Y {}", year(n)),
        _ => return None,
    };
    Some(Words::new(2, words))
}

fn abbreviation(cursor: &Cursor) -> Option<Words> {
    let word = cursor.get(0).filter(|t| t.is_word())?;
    if !cursor.at_word_start() {
        return None;
    }
    let period = cursor.get(1).is_some_and(|t| t.is_mark('.'));
    let after = 1 + usize::from(period);
    let next_word = || {
        cursor
            .get(after)
            .filter(|t| t.is_space())
            .and(cursor.get(after + 1))
    };
    let capitalised =
        |t: &super::tokens::Token| t.is_word() && t.text.starts_with(char::is_uppercase);
    let fits = |when: When| match when {
        When::Always => true,
        When::BeforeName => next_word().is_some_and(capitalised),
        When::AfterName => cursor.previous_word().is_some_and(capitalised),
        When::BeforeNumber => next_word().is_some_and(|t| t.is_number()),
        When::BeforeYear => next_word().is_some_and(is_year),
    };
    let (_, reading, ..) = ABBREVIATIONS.iter().find(|(written, _, when, bare)| {
        *written == word.text && (period || *bare) && fits(*when)
    })?;
    if !period && !cursor.ends_at(1) {
        return None;
    }
    let tokens = if period { cursor.with_period(1) } else { 1 };
    Some(Words::new(tokens, *reading))
}

/// `e.g.`, `i.e.`.
fn dotted(cursor: &Cursor) -> Option<Words> {
    let (a, p1, b, p2) = (
        cursor.get(0)?,
        cursor.get(1)?,
        cursor.get(2)?,
        cursor.get(3)?,
    );
    if !cursor.at_word_start() || !p1.is_mark('.') || !p2.is_mark('.') {
        return None;
    }
    let (_, _, reading) = DOTTED
        .iter()
        .find(|(x, y, _)| a.text.eq_ignore_ascii_case(x) && b.text.eq_ignore_ascii_case(y))?;
    Some(Words::new(cursor.with_period(3), *reading))
}

fn acronym(cursor: &Cursor) -> Option<Words> {
    let word = cursor.get(0).filter(|t| t.is_word())?;
    if !cursor.at_word_start() || !cursor.ends_at(1) {
        return None;
    }
    if let Some((_, reading)) = ACRONYMS.iter().find(|(w, _)| *w == word.text) {
        return Some(Words::new(1, *reading));
    }
    // A spelled acronym's plural: espeak-ng drops the `s` of `CDs`.
    let stem = word.text.strip_suffix('s')?;
    let spelled = (2..=5).contains(&stem.len())
        && stem.bytes().all(|b| b.is_ascii_uppercase())
        && !WORD_ACRONYMS.contains(&stem);
    spelled.then(|| {
        let letters: Vec<String> = stem.chars().map(String::from).collect();
        Words::new(1, format!("{}'s", letters.join(" ")))
    })
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn abbreviations_read_in_context() {
        assert_eq!(
            spoken("Dr. Smith lives on Elm St."),
            "Doctor Smith lives on Elm Street."
        );
        assert_eq!(spoken("We met at St. Mary's."), "We met at Saint Mary's.");
        assert_eq!(spoken("Apples, pears, etc."), "Apples, pears, et cetera.");
        assert_eq!(
            spoken("Apples, etc. are fine."),
            "Apples, et cetera are fine."
        );
        assert_eq!(spoken("Fruit, e.g. apples."), "Fruit, for example apples.");
        assert_eq!(spoken("It is No. 5 today."), "It is number five today.");
        assert_eq!(spoken("There is no. Really."), "There is no. Really.");
        assert_eq!(spoken("Ali vs Frazier."), "Ali versus Frazier.");
        assert_eq!(spoken("It is est. 3 days."), "It is estimated three days.");
        assert_eq!(
            spoken("Tea w/ milk, w/o sugar."),
            "Tea with milk, without sugar."
        );
        assert_eq!(spoken("In Q1 and FY26."), "In Q one and F Y twenty-six.");
        assert_eq!(spoken("Drink H2O."), "Drink H2O.");
    }

    #[test]
    fn acronyms_espeak_misreads_are_respelled() {
        assert_eq!(spoken("The GUI uses JSON."), "The gooey uses jason.");
        assert_eq!(
            spoken("Two CDs and three PDFs."),
            "Two C D's and three P D F's."
        );
        assert_eq!(spoken("The FBI and NASA."), "The FBI and NASA.");
    }
}
