//! Symbols read as words: `&` "and", `+` "plus", `=` "equals", `#1` "number one",
//! `R&D` "R and D".

use super::tokens::Kind;
use super::{Cursor, Words};

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    spelled_ampersand(cursor).or_else(|| symbol(cursor))
}

fn symbol(cursor: &Cursor) -> Option<Words> {
    let Kind::Mark(mark) = cursor.get(0)?.kind else {
        return None;
    };
    let before_number = cursor.get(1).is_some_and(|t| t.is_number())
        || (cursor.get(1).is_some_and(|t| t.is_space())
            && cursor.get(2).is_some_and(|t| t.is_number()));
    let words = match mark {
        '&' => "and",
        '@' => "at",
        '+' => "plus",
        '=' => "equals",
        '#' if before_number => "number",
        '#' => "hash",
        '×' => "times",
        '÷' => "divided by",
        '~' if before_number => "about",
        '<' => "less than",
        '>' => "greater than",
        _ => return None,
    };
    Some(Words::new(1, words))
}

/// `AT&T`, `R&D`: short capitals around an ampersand are letters.
fn spelled_ampersand(cursor: &Cursor) -> Option<Words> {
    let (left, amp, right) = (cursor.get(0)?, cursor.get(1)?, cursor.get(2)?);
    let short_capitals = |t: &super::tokens::Token| {
        t.is_word() && t.text.len() <= 3 && t.text.bytes().all(|b| b.is_ascii_uppercase())
    };
    if !cursor.at_word_start()
        || !amp.is_mark('&')
        || !short_capitals(left)
        || !short_capitals(right)
        || !cursor.ends_at(3)
    {
        return None;
    }
    let spell = |t: &str| t.chars().map(String::from).collect::<Vec<_>>().join(" ");
    Some(Words::new(
        3,
        format!("{} and {}", spell(left.text), spell(right.text)),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn symbols_become_words() {
        assert_eq!(spoken("2 + 2 = 4"), "two plus two equals four");
        assert_eq!(spoken("We're #1!"), "We're number one!");
        assert_eq!(spoken("Use #general."), "Use hash general.");
        assert_eq!(spoken("R&D at AT&T"), "R and D at A T and T");
        assert_eq!(spoken("salt & pepper"), "salt and pepper");
        assert_eq!(spoken("3 × 4"), "three times four");
    }
}
