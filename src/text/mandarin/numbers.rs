//! Numbers written with digits → Mandarin number words, as cn2an's `an2cn` transform writes
//! them for misaki: ranges before a measure word (`1-2公里` → 一到二公里), dates (years digit by
//! digit: `2024年3月15日` → 二零二四年三月十五日), fractions (`3/4` → 四分之三), percentages
//! (`15%` → 百分之十五), degrees Celsius (`5℃` → 五摄氏度), then every other number
//! (`1200` → 一千二百, `3.14` → 三点一四, `-5` → 负五). A number cn2an cannot write (more than
//! sixteen digits) stays as written.

use std::sync::OnceLock;

use regex::Regex;

/// The measure words a range must stand before to be read as one (cn2an's list).
const MEASURE_WORDS: &[&str] = &[
    "斤", "克", "千克", "公斤", "吨", "米", "厘米", "毫米", "公里", "升", "毫升", "元", "角", "分",
    "个", "只", "条", "张", "块", "瓶", "杯", "份", "本", "辆", "台", "匹", "头", "位", "亩",
    "小时", "分钟", "秒", "天", "半",
];

const DIGITS: [char; 10] = ['零', '一', '二', '三', '四', '五', '六', '七', '八', '九'];
/// The unit of each place, from the ones up: sixteen places at most.
const PLACES: [&str; 16] = [
    "", "十", "百", "千", "万", "十", "百", "千", "亿", "十", "百", "千", "万", "十", "百", "千",
];

/// A digit as cn2an reads one: ASCII or full-width.
const DIGIT: &str = "[0-9０-９]";

struct Patterns {
    range: Regex,
    date: Regex,
    year: Regex,
    digits: Regex,
    fraction: Regex,
    percent: Regex,
    celsius: Regex,
    number: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let d = DIGIT;
        let build = |pattern: String| Regex::new(&pattern).expect("number pattern compiles");
        Patterns {
            range: build(format!(r"{d}+(\.{d}+)?-{d}+(\.{d}+)?")),
            date: build(format!(r"({d}{{2,4}}年)?({d}{{1,2}}月)?({d}{{1,2}}日)?")),
            year: build(format!(r"{d}+年")),
            digits: build(format!("{d}+")),
            fraction: build(format!("{d}+/{d}+")),
            percent: build(format!(r"-?({d}+\.)?{d}+%")),
            celsius: build(format!("{d}+℃")),
            number: build(format!(r"-?({d}+\.)?{d}+")),
        }
    })
}

/// `text` with its numbers written in Mandarin words.
pub(super) fn write_out(text: &str) -> String {
    let p = patterns();
    let text = substitute(text, &p.range, |found, after| {
        if !MEASURE_WORDS.iter().any(|w| after.starts_with(w)) {
            return None;
        }
        let (from, to) = found.split_once('-')?;
        Some(format!("{}到{}", number(from)?, number(to)?))
    });
    let text = substitute(&text, &p.date, |found, _| {
        Some(kept(found, || {
            let mut failed = false;
            let years = substitute(found, &p.year, |year, _| {
                let words = digit_by_digit(year.strip_suffix('年')?);
                failed |= words.is_none();
                Some(format!("{}年", words?))
            });
            let words = substitute(&years, &p.digits, |digits, _| {
                let words = number(digits);
                failed |= words.is_none();
                words
            });
            (!failed).then_some(words)
        }))
    });
    let text = substitute(&text, &p.fraction, |found, _| {
        let (numerator, denominator) = found.split_once('/')?;
        Some(kept(found, || {
            Some(format!(
                "{}分之{}",
                number(denominator)?,
                number(numerator)?
            ))
        }))
    });
    let text = substitute(&text, &p.percent, |found, _| {
        Some(kept(found, || {
            Some(format!("百分之{}", number(found.strip_suffix('%')?)?))
        }))
    });
    let text = substitute(&text, &p.celsius, |found, _| {
        Some(kept(found, || {
            Some(format!("{}摄氏度", number(found.strip_suffix('℃')?)?))
        }))
    });
    substitute(&text, &p.number, |found, _| {
        Some(kept(found, || number(found)))
    })
}

/// What `write` makes of `found`, or `found` itself where it cannot (cn2an gives back what it
/// cannot convert, and goes on after it).
fn kept(found: &str, write: impl FnOnce() -> Option<String>) -> String {
    write().unwrap_or_else(|| found.to_string())
}

/// `text` with each match of `pattern` (leftmost first, as Python's `re.sub` finds them)
/// replaced by what `replace` makes of it and of the text after it; where it makes nothing,
/// the match stays and the search goes on from its second character.
fn substitute(
    text: &str,
    pattern: &Regex,
    mut replace: impl FnMut(&str, &str) -> Option<String>,
) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut copied = 0;
    let mut from = 0;
    while from <= text.len() {
        let Some(found) = pattern.find_at(text, from) else {
            break;
        };
        let next_char = |at: usize| at + text[at..].chars().next().map_or(1, char::len_utf8);
        if found.is_empty() {
            from = next_char(found.start());
            continue;
        }
        match replace(found.as_str(), &text[found.end()..]) {
            Some(words) => {
                out.push_str(&text[copied..found.start()]);
                out.push_str(&words);
                copied = found.end();
                from = found.end();
            }
            None => from = next_char(found.start()),
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The value of a digit, ASCII or full-width.
fn digit_value(c: char) -> Option<usize> {
    match c {
        '0'..='9' => Some(c as usize - '0' as usize),
        '０'..='９' => Some(c as usize - '０' as usize),
        _ => None,
    }
}

/// Each digit by its name, the point as 点 (years: 二零二四).
fn digit_by_digit(digits: &str) -> Option<String> {
    digits
        .chars()
        .map(|c| match c {
            '.' => Some('点'),
            c => digit_value(c).map(|d| DIGITS[d]),
        })
        .collect()
}

/// A number (an optional minus, digits, an optional point and decimals) in words: cn2an's
/// `an2cn` in its `low` mode. `None` where it cannot be written.
fn number(text: &str) -> Option<String> {
    let (sign, unsigned) = match text.strip_prefix('-') {
        Some(rest) => ("负", rest),
        None => ("", text),
    };
    let mut parts = unsigned.split('.');
    let integer = parts.next()?;
    let decimals = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let mut words = format!("{sign}{}", integer_words(integer)?);
    if let Some(decimals) = decimals.filter(|d| !d.is_empty()) {
        words.push('点');
        for c in decimals.chars().take(16) {
            words.push(DIGITS[digit_value(c)?]);
        }
    }
    Some(words)
}

/// An integer in words, place by place, zeros said once where a run of them ends inside a
/// group of four, as cn2an writes them (一万零一十, 十万, 一千二百).
fn integer_words(digits: &str) -> Option<String> {
    let values: Vec<usize> = digits.chars().map(digit_value).collect::<Option<_>>()?;
    let first = values.iter().position(|&d| d != 0);
    let values = first.map_or(&values[..0], |at| &values[at..]);
    if values.len() > PLACES.len() {
        return None;
    }
    let mut out = String::new();
    for (i, &d) in values.iter().enumerate() {
        let place = values.len() - i - 1;
        if d != 0 {
            out.push(DIGITS[d]);
            out.push_str(PLACES[place]);
        } else {
            if place % 4 == 0 {
                out.push(DIGITS[0]);
                out.push_str(PLACES[place]);
            }
            if i > 0 && !out.ends_with('零') {
                out.push(DIGITS[0]);
            }
        }
    }
    let out = out
        .replace("零零", "零")
        .replace("零万", "万")
        .replace("零亿", "亿")
        .replace("亿万", "亿");
    let mut out = out.trim_matches('零').to_string();
    // A zero between a myriad and a thousand is not said (一万零三千 → 一万三千).
    for unit in ["万", "亿"] {
        for digit in &DIGITS[1..] {
            out = out.replace(&format!("{unit}零{digit}千"), &format!("{unit}{digit}千"));
        }
    }
    if out.starts_with("一十") {
        out = out['一'.len_utf8()..].to_string();
    }
    if out.is_empty() {
        out.push('零');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::write_out;

    /// What cn2an 0.5.24's `transform(text, "an2cn")` writes for each (run by hand in
    /// .venv-cjk; the sentences of tests/fixtures/cjk/zh.tsv check more in context).
    #[test]
    fn numbers_are_written_as_cn2an_writes_them() {
        for (text, expected) in [
            ("1-2公里", "一到二公里"),
            ("0.5", "零点五"),
            ("007", "七"),
            ("100000", "十万"),
            ("10010", "一万零一十"),
            ("3.", "三."),
            ("-3.5%", "百分之负三点五"),
            ("１２", "十二"),
            ("1/2/3", "二分之一/三"),
            ("12345年", "一二三四五年"),
            ("20200年", "二零二零零年"),
            ("第3页", "第三页"),
            ("10万", "十万"),
        ] {
            assert_eq!(write_out(text), expected, "{text}");
        }
    }

    #[test]
    fn numbers_too_long_for_cn2an_stay_as_written() {
        let long = "12345678901234567";
        assert_eq!(write_out(long), long);
        assert_eq!(write_out("12345678901234567.5"), "12345678901234567.5");
    }
}
