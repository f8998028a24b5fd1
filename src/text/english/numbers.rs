//! Numbers as words: the shared vocabulary of every rule that reads digits.
//!
//! Hand-written rather than taken from `num2words`: that crate says numbers the British way
//! ("one hundred and five") and parses through a big-float type, while this reads American
//! style and only ever needs the digits as written.

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const SCALES: [&str; 5] = ["", "thousand", "million", "billion", "trillion"];

/// Whether `word` (lower case) is one of the words numbers are read with, "point" and "oh"
/// included: what tells "one hundred and five" is one number to a rule that looks at words.
pub fn is_number_word(word: &str) -> bool {
    ONES.contains(&word)
        || TENS[2..].contains(&word)
        || SCALES[1..].contains(&word)
        || matches!(word, "hundred" | "point" | "oh")
}

/// The longest run of digits read as one number; longer runs are read digit by digit or left
/// alone.
pub(super) const MAX_DIGITS: usize = 15;

/// `n` in words, American style: `115` "one hundred fifteen", `42` "forty-two".
pub(super) fn cardinal(n: u64) -> String {
    if n == 0 {
        return ONES[0].to_string();
    }
    let mut groups = Vec::new();
    let mut rest = n;
    while rest > 0 {
        groups.push((rest % 1000) as usize);
        rest /= 1000;
    }
    let mut words: Vec<String> = Vec::new();
    for (scale, &group) in groups.iter().enumerate().rev() {
        if group == 0 {
            continue;
        }
        words.push(below_thousand(group));
        if scale > 0 {
            words.push(SCALES[scale].to_string());
        }
    }
    words.join(" ")
}

fn below_thousand(n: usize) -> String {
    let (hundreds, rest) = (n / 100, n % 100);
    let tens = below_hundred(rest);
    match (hundreds, rest) {
        (0, _) => tens,
        (h, 0) => format!("{} hundred", ONES[h]),
        (h, _) => format!("{} hundred {tens}", ONES[h]),
    }
}

fn below_hundred(n: usize) -> String {
    match n {
        0..=19 => ONES[n].to_string(),
        _ if n.is_multiple_of(10) => TENS[n / 10].to_string(),
        _ => format!("{}-{}", TENS[n / 10], ONES[n % 10]),
    }
}

/// A number as written (`1,234`, `3.14`, `.5`): its words, if it is not too long to read.
pub(super) fn read_number(written: &str) -> Option<String> {
    let (whole, fraction) = split_decimal(written)?;
    let mut words = match whole {
        None => String::new(),
        Some(n) => cardinal(n),
    };
    if let Some(fraction) = fraction {
        if !words.is_empty() {
            words.push(' ');
        }
        words.push_str("point ");
        words.push_str(&digits(fraction, "zero"));
    }
    Some(words)
}

/// The whole part (none for `.5`) and the digits after the point of a number as written.
pub(super) fn split_decimal(written: &str) -> Option<(Option<u64>, Option<&str>)> {
    let (whole, fraction) = match written.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (written, None),
    };
    let whole: String = whole.chars().filter(|&c| c != ',').collect();
    if whole.len() > MAX_DIGITS || fraction.is_some_and(|f| f.len() > MAX_DIGITS) {
        return None;
    }
    let whole = if whole.is_empty() {
        None
    } else {
        Some(whole.parse().ok()?)
    };
    Some((whole, fraction))
}

/// The value of a number as written, if it is a whole number.
pub(super) fn integer(written: &str) -> Option<u64> {
    match split_decimal(written)? {
        (Some(n), None) => Some(n),
        _ => None,
    }
}

/// Each digit on its own, `zero` saying `0`: `"0123"` → "zero one two three".
pub(super) fn digits(written: &str, zero: &str) -> String {
    written
        .chars()
        .filter_map(|c| c.to_digit(10))
        .map(|d| if d == 0 { zero } else { ONES[d as usize] })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n` as an ordinal: `21` "twenty-first", `100` "one hundredth".
pub(super) fn ordinal(n: u64) -> String {
    let words = cardinal(n);
    let cut = words.rfind([' ', '-']).map_or(0, |i| i + 1);
    let (head, last) = words.split_at(cut);
    let last = match last {
        "one" => "first".to_string(),
        "two" => "second".to_string(),
        "three" => "third".to_string(),
        "five" => "fifth".to_string(),
        "eight" => "eighth".to_string(),
        "nine" => "ninth".to_string(),
        "twelve" => "twelfth".to_string(),
        word if word.ends_with('y') => format!("{}ieth", &word[..word.len() - 1]),
        word => format!("{word}th"),
    };
    format!("{head}{last}")
}

/// Whether `suffix` is the right ordinal ending for `n` (`1st`, `2nd`, `11th`, `23rd`).
pub(super) fn is_ordinal_suffix(n: u64, suffix: &str) -> bool {
    let expected = match (n % 100, n % 10) {
        (11..=13, _) => "th",
        (_, 1) => "st",
        (_, 2) => "nd",
        (_, 3) => "rd",
        _ => "th",
    };
    suffix.eq_ignore_ascii_case(expected)
}

/// A year as people say it: `1990` "nineteen ninety", `1905` "nineteen oh five", `1900`
/// "nineteen hundred", `2000` "two thousand", `2005` "two thousand five", `2026` "twenty
/// twenty-six".
pub(super) fn year(n: u64) -> String {
    let (high, low) = (n / 100, n % 100);
    match (high, low) {
        _ if !(1000..10_000).contains(&n) => cardinal(n),
        (_, 0) if high % 10 == 0 => cardinal(n),
        (_, 0) => format!("{} hundred", cardinal(high)),
        (_, 1..=9) if high % 10 == 0 => cardinal(n),
        (_, 1..=9) => format!("{} oh {}", cardinal(high), cardinal(low)),
        _ => format!("{} {}", cardinal(high), cardinal(low)),
    }
}

/// An identifier's number as people say it (`gate 214`, `flight 1492`, `Xbox 360`): up to two
/// digits as a cardinal, three as a digit and a pair ("two fourteen", "three oh five"), four
/// as two pairs ("fourteen ninety-two", "twelve oh four", "twenty-three hundred"); longer ones,
/// or ones with a leading zero, digit by digit.
pub(super) fn identifier(written: &str) -> Option<String> {
    if !written.bytes().all(|b| b.is_ascii_digit()) || written.is_empty() {
        return None;
    }
    let n: u64 = written.parse().ok()?;
    if written.len() > 4 || (written.len() > 1 && written.starts_with('0')) {
        return Some(digits(written, "oh"));
    }
    if written.len() <= 2 {
        return Some(cardinal(n));
    }
    let (high, low) = (n / 100, n % 100);
    Some(match low {
        0 if written.len() == 3 || high % 10 == 0 => cardinal(n),
        0 => format!("{} hundred", cardinal(high)),
        1..=9 => format!("{} oh {}", cardinal(high), cardinal(low)),
        _ => format!("{} {}", cardinal(high), cardinal(low)),
    })
}

/// A count of four digits as people say it: round hundreds below two thousand in hundreds
/// ("fifteen hundred people"), anything else as a cardinal ("two thousand nineteen tickets").
pub(super) fn count(n: u64) -> String {
    if (1100..2000).contains(&n) && n.is_multiple_of(100) {
        year(n)
    } else {
        cardinal(n)
    }
}

/// A version as it is said, each part on its own: `3.12` "three point twelve", `2.0` "two
/// point oh", `24.04` "twenty-four point oh four".
pub(super) fn version(parts: &[&str]) -> Option<String> {
    let words: Option<Vec<String>> = parts
        .iter()
        .map(|part| {
            // Parts longer than four digits are no version's.
            if part.is_empty() || part.len() > 4 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(match *part {
                "0" => "oh".to_string(),
                p if p.starts_with('0') => format!("oh {}", cardinal(p[1..].parse().ok()?)),
                p => cardinal(p.parse().ok()?),
            })
        })
        .collect();
    Some(words?.join(" point "))
}

/// The plural of a number's last word, for decades and "the 1800s": "nineties",
/// "hundreds", "twenties".
pub(super) fn plural(words: &str) -> String {
    match words.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None if words.ends_with('x') => format!("{words}es"),
        None => format!("{words}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cardinals_are_american() {
        for (n, words) in [
            (0, "zero"),
            (7, "seven"),
            (13, "thirteen"),
            (42, "forty-two"),
            (100, "one hundred"),
            (115, "one hundred fifteen"),
            (1_000, "one thousand"),
            (1_005, "one thousand five"),
            (12_000, "twelve thousand"),
            (
                1_234_567,
                "one million two hundred thirty-four thousand five hundred sixty-seven",
            ),
            (3_000_000_000, "three billion"),
        ] {
            assert_eq!(cardinal(n), words, "{n}");
        }
    }

    #[test]
    fn ordinals_change_the_last_word() {
        for (n, words) in [
            (1, "first"),
            (2, "second"),
            (3, "third"),
            (4, "fourth"),
            (5, "fifth"),
            (8, "eighth"),
            (9, "ninth"),
            (11, "eleventh"),
            (12, "twelfth"),
            (20, "twentieth"),
            (21, "twenty-first"),
            (100, "one hundredth"),
            (1_000, "one thousandth"),
            (103, "one hundred third"),
        ] {
            assert_eq!(ordinal(n), words, "{n}");
        }
        assert!(is_ordinal_suffix(21, "st"));
        assert!(is_ordinal_suffix(11, "th"));
        assert!(!is_ordinal_suffix(11, "st"));
        assert!(is_ordinal_suffix(112, "TH"));
    }

    #[test]
    fn years_are_said_in_pairs() {
        for (n, words) in [
            (1990, "nineteen ninety"),
            (1905, "nineteen oh five"),
            (1900, "nineteen hundred"),
            (2000, "two thousand"),
            (2005, "two thousand five"),
            (2010, "twenty ten"),
            (2026, "twenty twenty-six"),
            (1100, "eleven hundred"),
        ] {
            assert_eq!(year(n), words, "{n}");
        }
    }

    #[test]
    fn written_numbers_read_with_their_decimals() {
        assert_eq!(read_number("3.14").unwrap(), "three point one four");
        assert_eq!(read_number(".5").unwrap(), "point five");
        assert_eq!(read_number("1,000").unwrap(), "one thousand");
        assert_eq!(read_number("5.50").unwrap(), "five point five zero");
        assert!(read_number("1234567890123456").is_none());
        assert_eq!(digits("0123", "oh"), "oh one two three");
        assert_eq!(plural("ninety"), "nineties");
        assert_eq!(plural("eighteen hundred"), "eighteen hundreds");
    }

    #[test]
    fn identifiers_counts_and_versions_read_as_said() {
        for (written, words) in [
            ("9", "nine"),
            ("66", "sixty-six"),
            ("214", "two fourteen"),
            ("305", "three oh five"),
            ("100", "one hundred"),
            ("1492", "fourteen ninety-two"),
            ("1204", "twelve oh four"),
            ("2300", "twenty-three hundred"),
            ("2000", "two thousand"),
            ("1010", "ten ten"),
            ("007", "oh oh seven"),
            ("48213", "four eight two one three"),
        ] {
            assert_eq!(identifier(written).unwrap(), words, "{written}");
        }
        assert_eq!(count(2019), "two thousand nineteen");
        assert_eq!(count(1500), "fifteen hundred");
        assert_eq!(count(1250), "one thousand two hundred fifty");
        assert_eq!(version(&["3", "12"]).unwrap(), "three point twelve");
        assert_eq!(version(&["2", "0"]).unwrap(), "two point oh");
        assert_eq!(version(&["24", "04"]).unwrap(), "twenty-four point oh four");
        assert!(version(&["1", ""]).is_none());
        assert!(version(&["3", "0123456789012345678"]).is_none());
    }
}
