//! SSML's `<say-as>`: words read as the writer says they are (a number, a date, letters), not
//! as the rules would guess. An order number `1990` is "one nine nine zero" with
//! `interpret-as="digits"`, where the rules would take it for a year.

use super::numbers;
use super::{read, DateOrder, ReadingOptions};
use crate::text::ssml::InterpretAs;

/// `written` read as `how` (and its SSML `format`) asks. English words with `options`; for
/// other languages (`None`) only the interpretations that need no words of their own
/// (letters and digits apart), everything else left to the voice's phonemizer as written.
pub(super) fn interpret(
    written: &str,
    how: InterpretAs,
    format: Option<&str>,
    options: Option<&ReadingOptions>,
) -> String {
    let Some(options) = options else {
        return match how {
            InterpretAs::Characters => apart(written.chars().filter(|c| !c.is_whitespace())),
            InterpretAs::Digits => apart(written.chars().filter(char::is_ascii_digit)),
            _ => written.to_string(),
        };
    };
    let plain: String = written
        .chars()
        .filter(|c| !matches!(c, ',' | ' '))
        .collect();
    let digits = || Some(numbers::digits(written, "zero")).filter(|d| !d.is_empty());
    let words = match how {
        InterpretAs::Characters => Some(letters(written)),
        InterpretAs::Digits => digits(),
        InterpretAs::Cardinal => {
            numbers::read_number(plain.trim_start_matches('+')).or_else(|| {
                let negative = plain.strip_prefix(['-', '−'])?;
                Some(format!("minus {}", numbers::read_number(negative)?))
            })
        }
        InterpretAs::Ordinal => {
            let number = ["st", "nd", "rd", "th"]
                .iter()
                .find_map(|suffix| plain.strip_suffix(suffix))
                .unwrap_or(&plain);
            numbers::integer(number).map(numbers::ordinal)
        }
        InterpretAs::Date => {
            let date_order = match format.map(str::to_ascii_lowercase).as_deref() {
                Some(f) if f.starts_with("dm") => DateOrder::DayFirst,
                Some(f) if f.starts_with("md") => DateOrder::MonthFirst,
                _ => options.date_order,
            };
            Some(read(written, &ReadingOptions { date_order }).text)
        }
        InterpretAs::Time => Some(read(written, options).text),
        InterpretAs::Telephone => {
            let spoken = read(written, options);
            if spoken.rewrites.is_empty() {
                // No shape the phone rule knows: each group of digits, apart.
                let groups: Vec<String> = written
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|g| !g.is_empty())
                    .map(|g| numbers::digits(g, "oh"))
                    .collect();
                (!groups.is_empty()).then(|| groups.join(", "))
            } else {
                Some(spoken.text)
            }
        }
    };
    words.unwrap_or_else(|| read(written, options).text)
}

/// Letters as the house spells them (capitals apart, "A B C"), digits as words.
fn letters(written: &str) -> String {
    let words: Vec<String> = written
        .chars()
        .filter_map(|c| match c {
            c if c.is_ascii_digit() => Some(numbers::digits(&c.to_string(), "zero")),
            c if c.is_alphabetic() => Some(c.to_uppercase().to_string()),
            _ => None,
        })
        .collect();
    words.join(" ")
}

fn apart(chars: impl Iterator<Item = char>) -> String {
    chars.map(String::from).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn english(written: &str, how: InterpretAs, format: Option<&str>) -> String {
        interpret(written, how, format, Some(&ReadingOptions::default()))
    }

    #[test]
    fn each_interpretation_reads_as_asked() {
        use InterpretAs::*;
        for (written, how, format, expected) in [
            ("abc", Characters, None, "A B C"),
            ("R2-D2", Characters, None, "R two D two"),
            ("1990", Digits, None, "one nine nine zero"),
            ("1990", Cardinal, None, "one thousand nine hundred ninety"),
            (
                "12,345",
                Cardinal,
                None,
                "twelve thousand three hundred forty-five",
            ),
            ("-7", Cardinal, None, "minus seven"),
            ("21", Ordinal, None, "twenty-first"),
            ("3rd", Ordinal, None, "third"),
            (
                "12/01/2026",
                Date,
                Some("dmy"),
                "the twelfth of January, twenty twenty-six",
            ),
            (
                "12/01/2026",
                Date,
                Some("mdy"),
                "December first, twenty twenty-six",
            ),
            ("3:30pm", Time, None, "three thirty p.m."),
            (
                "555 0123",
                Telephone,
                None,
                "five five five, oh one two three",
            ),
        ] {
            assert_eq!(
                english(written, how, format),
                expected,
                "{written} as {how:?}"
            );
        }
    }

    #[test]
    fn other_languages_get_letters_and_digits_apart_and_the_rest_as_written() {
        let other = |written, how| interpret(written, how, None, None);
        assert_eq!(other("ABC", InterpretAs::Characters), "A B C");
        assert_eq!(other("2026", InterpretAs::Digits), "2 0 2 6");
        assert_eq!(other("2026", InterpretAs::Cardinal), "2026");
    }

    #[test]
    fn what_cannot_be_read_so_falls_back_to_the_rules() {
        assert_eq!(english("many", InterpretAs::Cardinal, None), "many");
        assert_eq!(english("first", InterpretAs::Ordinal, None), "first");
    }
}
