//! Roman numerals where context says they are numbers: `Henry VIII` "Henry the eighth",
//! `Chapter IV` "Chapter four". Anywhere else capitals are words or initials (`DC`, `MIX`).

use super::numbers::{cardinal, ordinal};
use super::{Cursor, Words};

/// Names whose bearers are numbered: monarchs and popes.
const REGNAL_NAMES: &[&str] = &[
    "Alexander",
    "Alfonso",
    "Benedict",
    "Boniface",
    "Catherine",
    "Charles",
    "Clement",
    "Constantine",
    "Edward",
    "Elizabeth",
    "Frederick",
    "George",
    "Gregory",
    "Henry",
    "Innocent",
    "James",
    "John",
    "Leo",
    "Louis",
    "Mary",
    "Nicholas",
    "Paul",
    "Peter",
    "Philip",
    "Pius",
    "Richard",
    "Stephen",
    "Urban",
    "Victor",
    "William",
];

/// Words after which a numeral is a plain number; `War` and `Bowl` only after `World` and
/// `Super`.
const COUNTED: &[&str] = &[
    "Chapter", "Part", "Book", "Volume", "Vol", "Act", "Scene", "Section", "Article", "Appendix",
    "Phase", "Season", "Episode", "Apollo", "Type", "Class", "Title",
];

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    let numeral = cursor.get(0).filter(|t| t.is_word())?;
    let value = value(numeral.text)?;
    if !cursor.at_word_start() || !cursor.ends_at(1) {
        return None;
    }
    let before = cursor.previous_word().or_else(|| {
        // `Vol. IV`: the abbreviation's period, then the space.
        let (period, space) = (cursor.before(2)?, cursor.before(1)?);
        (period.is_mark('.') && space.is_space())
            .then(|| cursor.before(3))
            .flatten()
            .filter(|t| t.is_word())
    })?;
    let counted = COUNTED.contains(&before.text)
        || (before.text == "War" && word_before(cursor, before).is_some_and(|w| w == "World"))
        || (before.text == "Bowl" && word_before(cursor, before).is_some_and(|w| w == "Super"));
    if counted {
        return Some(Words::new(1, cardinal(value)));
    }
    if !REGNAL_NAMES.contains(&before.text) {
        return None;
    }
    // A lone `I` after a name is the pronoun unless the phrase ends there.
    if numeral.text == "I"
        && !cursor
            .get(1)
            .is_none_or(|t| matches!(t.kind, super::tokens::Kind::Mark(c) if ".,;:!?)".contains(c)))
    {
        return None;
    }
    Some(Words::new(1, format!("the {}", ordinal(value))))
}

/// The word before `word` (a token before the cursor), across one space.
fn word_before<'a>(cursor: &Cursor<'a>, word: &super::tokens::Token) -> Option<&'a str> {
    let index = cursor.tokens.iter().position(|t| t.start == word.start)?;
    let space = cursor.tokens.get(index.checked_sub(1)?)?;
    let before = cursor.tokens.get(index.checked_sub(2)?)?;
    (space.is_space() && before.is_word()).then_some(before.text)
}

/// The value of a numeral in canonical form (`IV`, not `IIII`), 1 to 3999.
fn value(numeral: &str) -> Option<u64> {
    let digit = |c: char| match c {
        'I' => Some(1),
        'V' => Some(5),
        'X' => Some(10),
        'L' => Some(50),
        'C' => Some(100),
        'D' => Some(500),
        'M' => Some(1000),
        _ => None,
    };
    let values: Vec<u64> = numeral.chars().map(digit).collect::<Option<_>>()?;
    let mut total = 0;
    for (i, &v) in values.iter().enumerate() {
        if values.get(i + 1).is_some_and(|&next| next > v) {
            total -= v as i64;
        } else {
            total += v as i64;
        }
    }
    let total = u64::try_from(total)
        .ok()
        .filter(|t| (1..4000).contains(t))?;
    (canonical(total) == numeral).then_some(total)
}

fn canonical(mut n: u64) -> String {
    const PARTS: [(u64, &str); 13] = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    let mut out = String::new();
    for (v, s) in PARTS {
        while n >= v {
            out.push_str(s);
            n -= v;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;
    use super::value;

    #[test]
    fn numerals_only_in_context() {
        assert_eq!(
            spoken("Henry VIII had six wives."),
            "Henry the eighth had six wives."
        );
        assert_eq!(spoken("Read Chapter IV."), "Read Chapter four.");
        assert_eq!(
            spoken("After World War II ended."),
            "After World War two ended."
        );
        assert_eq!(
            spoken("Pope John XXIII spoke."),
            "Pope John the twenty-third spoke."
        );
        assert_eq!(spoken("Queen Elizabeth I."), "Queen Elizabeth the first.");
        assert_eq!(spoken("Then Henry I said no."), "Then Henry I said no.");
        assert_eq!(spoken("Washington DC is big."), "Washington DC is big.");
        assert_eq!(value("IIII"), None);
        assert_eq!(value("MCMXC"), Some(1990));
    }
}
