//! Percentages and units after numbers: `50%` "fifty percent", `5 kg` "five kilograms",
//! `72°F` "seventy-two degrees Fahrenheit", `100 km/h` "one hundred kilometers per hour".

use super::numbers::read_number;
use super::quantities::amount;
use super::{Cursor, Words};

/// A unit as written (the tokens' text joined), its singular and plural, and whether it may be
/// written glued to the number (`5kg`) and with a space (`5 kg`).
struct Unit {
    written: &'static str,
    one: &'static str,
    many: &'static str,
    glued: bool,
    spaced: bool,
}

const fn unit(written: &'static str, one: &'static str, many: &'static str) -> Unit {
    Unit {
        written,
        one,
        many,
        glued: true,
        spaced: true,
    }
}

/// Only with a space: glued, these letters are more often something else (`5s`, `3t`).
const fn spaced(written: &'static str, one: &'static str, many: &'static str) -> Unit {
    Unit {
        glued: false,
        ..unit(written, one, many)
    }
}

/// Longest forms first, so that `km/h` wins over `km` and `kWh` over `kW`.
const UNITS: &[Unit] = &[
    unit("km/h", "kilometer per hour", "kilometers per hour"),
    unit("m/s", "meter per second", "meters per second"),
    spaced("sq ft", "square foot", "square feet"),
    unit("°C", "degree Celsius", "degrees Celsius"),
    unit("°F", "degree Fahrenheit", "degrees Fahrenheit"),
    unit("° C", "degree Celsius", "degrees Celsius"),
    unit("° F", "degree Fahrenheit", "degrees Fahrenheit"),
    unit("°", "degree", "degrees"),
    unit("in.", "inch", "inches"),
    unit("mg", "milligram", "milligrams"),
    unit("g", "gram", "grams"),
    unit("kg", "kilogram", "kilograms"),
    spaced("t", "metric ton", "metric tons"),
    unit("lb", "pound", "pounds"),
    unit("lbs", "pound", "pounds"),
    unit("oz", "ounce", "ounces"),
    unit("mm", "millimeter", "millimeters"),
    unit("cm", "centimeter", "centimeters"),
    unit("m", "meter", "meters"),
    unit("km", "kilometer", "kilometers"),
    unit("ft", "foot", "feet"),
    unit("yd", "yard", "yards"),
    unit("mi", "mile", "miles"),
    unit("ml", "milliliter", "milliliters"),
    unit("mL", "milliliter", "milliliters"),
    unit("l", "liter", "liters"),
    unit("L", "liter", "liters"),
    unit("ms", "millisecond", "milliseconds"),
    spaced("s", "second", "seconds"),
    unit("sec", "second", "seconds"),
    unit("min", "minute", "minutes"),
    unit("h", "hour", "hours"),
    unit("hr", "hour", "hours"),
    unit("hrs", "hour", "hours"),
    unit("Hz", "hertz", "hertz"),
    unit("kHz", "kilohertz", "kilohertz"),
    unit("MHz", "megahertz", "megahertz"),
    unit("GHz", "gigahertz", "gigahertz"),
    unit("B", "byte", "bytes"),
    unit("KB", "kilobyte", "kilobytes"),
    unit("kB", "kilobyte", "kilobytes"),
    unit("MB", "megabyte", "megabytes"),
    unit("GB", "gigabyte", "gigabytes"),
    unit("TB", "terabyte", "terabytes"),
    unit("PB", "petabyte", "petabytes"),
    unit("Kbps", "kilobit per second", "kilobits per second"),
    unit("Mbps", "megabit per second", "megabits per second"),
    unit("Gbps", "gigabit per second", "gigabits per second"),
    unit("W", "watt", "watts"),
    unit("kW", "kilowatt", "kilowatts"),
    unit("MW", "megawatt", "megawatts"),
    unit("kWh", "kilowatt hour", "kilowatt hours"),
    unit("V", "volt", "volts"),
    unit("mA", "milliamp", "milliamps"),
    unit("mAh", "milliamp hour", "milliamp hours"),
    unit("kph", "kilometer per hour", "kilometers per hour"),
    unit("mph", "mile per hour", "miles per hour"),
    unit("px", "pixel", "pixels"),
    unit("dpi", "dot per inch", "dots per inch"),
    unit("ha", "hectare", "hectares"),
];

/// Words after an amount and its unit that are no noun the unit describes: "12 in. wide".
const NOT_NOUNS: &[&str] = &[
    "and", "at", "by", "deep", "each", "for", "from", "high", "in", "long", "of", "on", "or",
    "per", "tall", "thick", "to", "wide", "with",
];

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    marks(cursor).or_else(|| unit_after(cursor))
}

/// Whether an amount and its unit, ending `offset` tokens on, describe the noun after them:
/// "a 10 km run" is a "ten kilometer run", with the unit in the singular.
fn describes_a_noun(cursor: &Cursor, offset: usize) -> bool {
    let article = cursor
        .previous_word()
        .is_some_and(|w| w.is("a") || w.is("an"));
    let noun = cursor.get(offset).is_some_and(|t| t.is_space())
        && cursor
            .get(offset + 1)
            .is_some_and(|t| t.is_word() && !NOT_NOUNS.contains(&t.text.to_lowercase().as_str()));
    article && noun
}

/// Feet and inches written with marks: `6'2"` "six foot two", `27"` "twenty-seven inches",
/// `8'` "eight feet", `12'x14'` "twelve feet by fourteen feet". A double quote is an inch mark
/// only outside a quotation.
fn marks(cursor: &Cursor) -> Option<Words> {
    let number = cursor.get(0).filter(|t| t.is_number())?;
    let mark = cursor.get(1)?;
    if !cursor.at_word_start() || number.text.contains(',') {
        return None;
    }
    let words = read_number(number.text)?;
    let one = number.text == "1";
    let feet = |one: bool| if one { "foot" } else { "feet" };
    if mark.is_mark('\'') || mark.is_mark('′') {
        let (inches, close) = (cursor.get(2), cursor.get(3));
        if let (Some(inches), Some(close)) = (inches, close) {
            if inches.is_digits() && is_inch_mark(cursor, close) && cursor.ends_at(4) {
                let inches = read_number(inches.text)?;
                return Some(Words::new(4, format!("{words} foot {inches}")));
            }
        }
        let by = (cursor.get(2), cursor.get(3), cursor.get(4));
        if let (Some(x), Some(other), Some(mark2)) = by {
            if x.is("x") && other.is_number() && (mark2.is_mark('\'') || mark2.is_mark('′')) {
                let other_words = read_number(other.text)?;
                return cursor.ends_at(5).then(|| {
                    Words::new(
                        5,
                        format!(
                            "{words} {} by {other_words} {}",
                            feet(one),
                            feet(other.text == "1")
                        ),
                    )
                });
            }
        }
        let lone = cursor.get(2).is_none_or(|t| !t.is_word() && !t.is_number());
        return (lone && cursor.ends_at(2))
            .then(|| Words::new(2, format!("{words} {}", feet(one))));
    }
    if is_inch_mark(cursor, mark) && cursor.ends_at(2) {
        let name = if one || describes_a_noun(cursor, 2) {
            "inch"
        } else {
            "inches"
        };
        return Some(Words::new(2, format!("{words} {name}")));
    }
    None
}

/// Whether `mark` is a double quote that closes no quotation: an even number of them before
/// it in the sentence.
fn is_inch_mark(cursor: &Cursor, mark: &super::tokens::Token) -> bool {
    if mark.is_mark('″') {
        return true;
    }
    mark.is_mark('"')
        && cursor.sentence[..mark.start]
            .matches('"')
            .count()
            .is_multiple_of(2)
}

/// `5 kg`, `50%`, `100 km/h`.
fn unit_after(cursor: &Cursor) -> Option<Words> {
    let number = amount(cursor, 0, true)?;
    let after = number.tokens;
    let gap = usize::from(cursor.get(after).is_some_and(|t| t.is_space()));
    let next = cursor.get(after + gap)?;
    if next.is_mark('%') && gap == 0 {
        return cursor
            .ends_at(after + 1)
            .then(|| Words::new(after + 1, format!("{} percent", number.words)));
    }
    let rest = &cursor.sentence[next.start..];
    let start = cursor.get(0)?.start;
    let (unit, mut tokens) = UNITS
        .iter()
        .filter(|u| if gap == 0 { u.glued } else { u.spaced })
        .filter(|u| rest.starts_with(u.written))
        .find_map(|u| {
            let end = next.start + u.written.len();
            let tokens = cursor.tokens_in(end - start);
            // The unit ends where a token does, and nothing glued follows it.
            let whole = cursor.get(tokens - 1).is_some_and(|t| t.end() == end)
                && (u.written.ends_with('.') || cursor.ends_at(tokens));
            whole.then_some((u, tokens))
        })?;
    if unit.written == "in." && cursor.ends_sentence(tokens) {
        // `in.` ending the sentence keeps its period as the sentence's.
        tokens -= 1;
    } else if cursor.get(tokens).is_some_and(|t| t.is_mark('.'))
        && !cursor.ends_sentence(tokens + 1)
    {
        // `30 min. and`: the abbreviation's period, inside a sentence.
        tokens += 1;
    }
    let name = if number.one || describes_a_noun(cursor, tokens) {
        unit.one
    } else {
        unit.many
    };
    Some(Words::new(tokens, format!("{} {name}", number.words)))
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn units_agree_with_their_number() {
        for (written, said) in [
            ("5 kg", "five kilograms"),
            ("1 kg", "one kilogram"),
            ("5kg", "five kilograms"),
            ("3.5 GB", "three point five gigabytes"),
            ("72°F", "seventy-two degrees Fahrenheit"),
            ("-3 °C", "minus three degrees Celsius"),
            ("90°", "ninety degrees"),
            ("100 km/h", "one hundred kilometers per hour"),
            ("60 mph", "sixty miles per hour"),
            ("5 ft", "five feet"),
            ("3-5 kg", "three to five kilograms"),
            ("50%", "fifty percent"),
            ("3.5%", "three point five percent"),
            ("10-20%", "ten to twenty percent"),
        ] {
            assert_eq!(
                spoken(&format!("It is {written} now.")),
                format!("It is {said} now."),
                "{written}"
            );
        }
        assert_eq!(spoken("It is 12 in."), "It is twelve inches.");
    }

    #[test]
    fn marks_and_units_before_a_noun() {
        for (written, said) in [
            ("He is 6'2\" tall.", "He is six foot two tall."),
            ("A 27\" monitor.", "A twenty-seven inch monitor."),
            ("It is 12\" wide.", "It is twelve inches wide."),
            ("It is 8' high.", "It is eight feet high."),
            ("It is 12'x14'.", "It is twelve feet by fourteen feet."),
            ("A 10 km run.", "A ten kilometer run."),
            ("He said \"27\" twice.", "He said \"twenty-seven\" twice."),
        ] {
            assert_eq!(spoken(written), said, "{written}");
        }
    }
}
