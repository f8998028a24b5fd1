//! Money: `$5.50` "five dollars fifty cents", `£3.2m` "three point two million pounds",
//! `USD 40` "forty U.S. dollars".

use super::numbers::{cardinal, integer, read_number, split_decimal};
use super::tokens::Token;
use super::{Cursor, Words};

struct Currency {
    one: &'static str,
    many: &'static str,
    /// The hundredth, singular and plural, where amounts are said with it.
    cents: Option<(&'static str, &'static str)>,
}

const DOLLAR: Currency = Currency {
    one: "dollar",
    many: "dollars",
    cents: Some(("cent", "cents")),
};
const EURO: Currency = Currency {
    one: "euro",
    many: "euros",
    cents: Some(("cent", "cents")),
};
const POUND: Currency = Currency {
    one: "pound",
    many: "pounds",
    cents: Some(("penny", "pence")),
};

fn by_symbol(symbol: char) -> Option<Currency> {
    Some(match symbol {
        '$' => DOLLAR,
        '€' => EURO,
        '£' => POUND,
        '¥' => plain("yen", "yen"),
        '₹' => plain("rupee", "rupees"),
        '₩' => plain("won", "won"),
        '₽' => plain("ruble", "rubles"),
        _ => return None,
    })
}

fn by_code(code: &str) -> Option<Currency> {
    Some(match code {
        "USD" => Currency {
            one: "U.S. dollar",
            many: "U.S. dollars",
            ..DOLLAR
        },
        "EUR" => EURO,
        "GBP" => POUND,
        "JPY" => plain("yen", "yen"),
        "CAD" => Currency {
            one: "Canadian dollar",
            many: "Canadian dollars",
            ..DOLLAR
        },
        "AUD" => Currency {
            one: "Australian dollar",
            many: "Australian dollars",
            ..DOLLAR
        },
        "CHF" => plain("Swiss franc", "Swiss francs"),
        "CNY" => plain("yuan", "yuan"),
        "INR" => plain("rupee", "rupees"),
        _ => return None,
    })
}

const fn plain(one: &'static str, many: &'static str) -> Currency {
    Currency {
        one,
        many,
        cents: None,
    }
}

/// A multiplier written after an amount of money, as a suffix or a word.
fn scale(word: &str, glued: bool) -> Option<&'static str> {
    Some(match word {
        "k" | "K" if glued => "thousand",
        "m" | "M" | "mn" if glued => "million",
        "b" | "B" | "bn" | "bln" if glued => "billion",
        "tn" | "T" if glued => "trillion",
        "thousand" if !glued => "thousand",
        "million" if !glued => "million",
        "billion" if !glued => "billion",
        "trillion" if !glued => "trillion",
        _ => return None,
    })
}

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    let first = cursor.get(0)?;
    if !cursor.at_word_start() {
        return None;
    }
    // `-$5`: the sign before the symbol.
    let negative = first.is_mark('-') || first.is_mark('−');
    let at = usize::from(negative);
    let head = cursor.get(at)?;
    if let super::tokens::Kind::Mark(symbol) = head.kind {
        let currency = by_symbol(symbol)?;
        let number = cursor.get(at + 1).filter(|t| t.is_number())?;
        return said(cursor, at + 1, number, &currency, negative);
    }
    if negative {
        return None;
    }
    // `USD 40`, `USD40`.
    if let Some(currency) = head.is_word().then(|| by_code(head.text)).flatten() {
        let gap = usize::from(cursor.get(1).is_some_and(Token::is_space));
        let number = cursor.get(1 + gap).filter(|t| t.is_number())?;
        return said(cursor, 1 + gap, number, &currency, false);
    }
    // `40 USD`.
    let number = head.is_number().then_some(head)?;
    let gap = usize::from(cursor.get(1).is_some_and(Token::is_space));
    let code = cursor.get(1 + gap).filter(|t| t.is_word())?;
    let currency = by_code(code.text)?;
    if !cursor.ends_at(2 + gap) {
        return None;
    }
    let words = amount_words(number.text, None, &currency)?;
    Some(Words::new(2 + gap, words))
}

/// The amount `number` at `offset` tokens on, with the scale after it if any.
fn said(
    cursor: &Cursor,
    offset: usize,
    number: &Token,
    currency: &Currency,
    negative: bool,
) -> Option<Words> {
    let mut tokens = offset + 1;
    let mut scale_word = None;
    if let Some(word) = cursor.get(tokens).filter(|t| t.is_word()) {
        scale_word = Some(scale(word.text, true)?);
        tokens += 1;
    } else if let (Some(space), Some(word)) = (cursor.get(tokens), cursor.get(tokens + 1)) {
        if space.is_space() && word.is_word() {
            if let Some(found) = scale(&word.text.to_ascii_lowercase(), false) {
                scale_word = Some(found);
                tokens += 2;
            }
        }
    }
    // `$40/mo`, `$12/user/month`: a price per something.
    let mut per = String::new();
    while let (Some(slash), Some(word)) = (cursor.get(tokens), cursor.get(tokens + 1)) {
        let Some(each) = slash.is_mark('/').then(|| rate_unit(word.text)).flatten() else {
            break;
        };
        per.push_str(" per ");
        per.push_str(each);
        tokens += 2;
    }
    if !cursor.ends_at(tokens) {
        return None;
    }
    let words = amount_words(number.text, scale_word, currency)?;
    let words = if negative {
        format!("minus {words}{per}")
    } else {
        format!("{words}{per}")
    };
    Some(Words::new(tokens, words))
}

/// What a price is per, written after a slash.
fn rate_unit(word: &str) -> Option<&'static str> {
    Some(match word {
        "mo" | "month" => "month",
        "yr" | "year" => "year",
        "wk" | "week" => "week",
        "day" => "day",
        "hr" | "hour" => "hour",
        "night" => "night",
        "user" => "user",
        "seat" => "seat",
        "person" => "person",
        _ => return None,
    })
}

fn amount_words(written: &str, scale: Option<&str>, currency: &Currency) -> Option<String> {
    if let Some(scale) = scale {
        return Some(format!(
            "{} {scale} {}",
            read_number(written)?,
            currency.many
        ));
    }
    let (whole, fraction) = split_decimal(written)?;
    let whole = whole.unwrap_or(0);
    let major = |n: u64| {
        let name = if n == 1 { currency.one } else { currency.many };
        format!("{} {name}", cardinal(n))
    };
    match (fraction, currency.cents) {
        (None, _) => Some(major(whole)),
        (Some(fraction), Some((one, many))) if fraction.len() <= 2 => {
            let cents = integer(&format!("{fraction:0<2}"))?;
            let minor = format!(
                "{} {}",
                cardinal(cents),
                if cents == 1 { one } else { many }
            );
            Some(match (whole, cents) {
                (_, 0) => major(whole),
                (0, _) => minor,
                _ => format!("{} {minor}", major(whole)),
            })
        }
        (Some(_), _) => Some(format!("{} {}", read_number(written)?, currency.many)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn amounts_name_their_currency() {
        for (written, said) in [
            ("$100", "one hundred dollars"),
            ("$1", "one dollar"),
            ("$5.50", "five dollars fifty cents"),
            ("$5.05", "five dollars five cents"),
            ("$0.99", "ninety-nine cents"),
            ("$0.01", "one cent"),
            ("$1,000,000", "one million dollars"),
            ("€20", "twenty euros"),
            ("£3.2m", "three point two million pounds"),
            ("£3.2 million", "three point two million pounds"),
            ("$2bn", "two billion dollars"),
            ("$100K", "one hundred thousand dollars"),
            ("USD 40", "forty U.S. dollars"),
            ("40 USD", "forty U.S. dollars"),
            ("£1.50", "one pound fifty pence"),
            ("-$5", "minus five dollars"),
            ("¥500", "five hundred yen"),
            ("$40/mo", "forty dollars per month"),
            ("$12/user/month", "twelve dollars per user per month"),
        ] {
            assert_eq!(
                spoken(&format!("It is {written}.")),
                format!("It is {said}."),
                "{written}"
            );
        }
    }
}
