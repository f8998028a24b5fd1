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

/// `+44 20 7946 0958`, `+1-555-123-4567`: a country code and at least two more groups of one
/// to four digits.
fn international<'a>(cursor: &Cursor<'a>) -> Option<(usize, Vec<&'a str>)> {
    if !cursor.get(0)?.is_mark('+') {
        return None;
    }
    let (tokens, groups) = groups(cursor, 1, 4)?;
    (groups.len() >= 3 && groups[0].len() <= 3).then_some((tokens + 1, groups))
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
        // Not phone-shaped: left to the other families.
        assert_eq!(spoken("Call 12-34 now."), "Call twelve to thirty-four now.");
    }
}
