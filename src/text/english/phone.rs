//! Phone numbers, digit by digit in their groups: `555-0123` "five five five, oh one two
//! three", `+1 555 123 4567` "plus one, five five five, one two three, four five six seven".

use super::numbers::digits;
use super::{Cursor, Words};

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    if !cursor.at_word_start() {
        return None;
    }
    let (tokens, groups) = international(cursor).or_else(|| national(cursor))?;
    if !cursor.ends_at(tokens) {
        return None;
    }
    let mut words: Vec<String> = groups.iter().map(|g| digits(g, "oh")).collect();
    if cursor.get(0)?.is_mark('+') {
        words[0] = format!("plus {}", words[0]);
    }
    Some(Words::new(tokens, words.join(", ")))
}

/// `+44 20 7946 0958`, `+1-555-123-4567`, `+1 (415) 555-0199`, `+81 3-1234-5678`,
/// `+91 98765 43210`: a country code of one to three digits, then a space or hyphen, an area
/// code in brackets or not, and groups of one to five digits (the separator after the
/// country code may differ from the rest).
fn international<'a>(cursor: &Cursor<'a>) -> Option<(usize, Vec<&'a str>)> {
    if !cursor.get(0)?.is_mark('+') {
        return None;
    }
    let code = cursor
        .get(1)
        .filter(|t| t.is_digits() && t.text.len() <= 3)?;
    let separator = cursor.get(2)?;
    if !(separator.text == " " || separator.is_mark('-')) {
        return None;
    }
    let mut all = vec![code.text];
    let mut at = 3;
    if cursor.get(at)?.is_mark('(') {
        let area = cursor
            .get(at + 1)
            .filter(|t| t.is_digits() && t.text.len() <= 4)?;
        if !cursor.get(at + 2)?.is_mark(')') || !cursor.get(at + 3)?.is_space() {
            return None;
        }
        all.push(area.text);
        at += 4;
    }
    let (tokens, rest) = groups(cursor, at, 5)?;
    all.extend(rest);
    let digits: usize = all.iter().map(|g| g.len()).sum();
    (all.len() >= 3 && (7..=15).contains(&digits)).then_some((at + tokens, all))
}

/// `555-0123`, `555-123-4567`, `555.123.4567`, `(555) 123-4567`.
fn national<'a>(cursor: &Cursor<'a>) -> Option<(usize, Vec<&'a str>)> {
    let (area, skip) = if cursor.get(0)?.is_mark('(') {
        let area = cursor
            .get(1)
            .filter(|t| t.is_digits() && t.text.len() == 3)?;
        if !cursor.get(2)?.is_mark(')') {
            return None;
        }
        let gap = usize::from(cursor.get(3)?.is_space());
        (Some(area.text), 3 + gap)
    } else {
        (None, 0)
    };
    let (tokens, mut groups) = groups(cursor, skip, 4)?;
    if let Some(area) = area {
        groups.insert(0, area);
    }
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    let shaped = match lengths.as_slice() {
        [3, 4] => area.is_none(),
        [3, 3, 4] => true,
        // `1-800-555-0199`: the trunk prefix of a North American number.
        [1, 3, 3, 4] => area.is_none() && groups[0] == "1",
        _ => false,
    };
    shaped.then_some((skip + tokens, groups))
}

/// Groups of one to `max` digits from `offset` tokens on, joined by one separator each (a
/// hyphen, a dot or a single space; the same one throughout after the first): the tokens they
/// take and the groups. A dotted `555.123` arrives as one decimal-looking number.
fn groups<'a>(cursor: &Cursor<'a>, offset: usize, max: usize) -> Option<(usize, Vec<&'a str>)> {
    let mut groups = Vec::new();
    let mut at = offset;
    let mut separator: Option<&str> = None;
    loop {
        let token = cursor.get(at).filter(|t| t.is_number())?;
        for part in token.text.split('.') {
            if part.is_empty() || part.len() > max || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            groups.push(part);
        }
        if token.text.contains('.') {
            separator.get_or_insert(".");
        }
        at += 1;
        let (Some(sep), Some(next)) = (cursor.get(at), cursor.get(at + 1)) else {
            break;
        };
        let fits = (sep.text == "-" || sep.text == "." || sep.text == " ")
            && next.is_number()
            && separator.is_none_or(|s| s == sep.text);
        if !fits {
            break;
        }
        separator = Some(sep.text);
        at += 1;
    }
    Some((at - offset, groups))
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn phone_numbers_are_read_in_groups() {
        for (written, said) in [
            ("555-0123", "five five five, oh one two three"),
            (
                "555-123-4567",
                "five five five, one two three, four five six seven",
            ),
            (
                "555.123.4567",
                "five five five, one two three, four five six seven",
            ),
            (
                "(555) 123-4567",
                "five five five, one two three, four five six seven",
            ),
            (
                "+1 555 123 4567",
                "plus one, five five five, one two three, four five six seven",
            ),
            (
                "+44 20 7946 0958",
                "plus four four, two oh, seven nine four six, oh nine five eight",
            ),
        ] {
            assert_eq!(
                spoken(&format!("Call {written} now.")),
                format!("Call {said} now."),
                "{written}"
            );
        }
        for (written, said) in [
            (
                "+49 30 1234 5678",
                "plus four nine, three oh, one two three four, five six seven eight",
            ),
            (
                "+1 (415) 555-0199",
                "plus one, four one five, five five five, oh one nine nine",
            ),
            (
                "+81 3-1234-5678",
                "plus eight one, three, one two three four, five six seven eight",
            ),
            (
                "1-800-555-0199",
                "one, eight oh oh, five five five, oh one nine nine",
            ),
        ] {
            assert_eq!(
                spoken(&format!("Call {written} now.")),
                format!("Call {said} now."),
                "{written}"
            );
        }
        // Not phone-shaped: left to the other families.
        assert_eq!(spoken("Call 12-34 now."), "Call twelve to thirty-four now.");
    }
}
