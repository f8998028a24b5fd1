//! Names with a number joined by a hyphen (issue #50): `GPT-5` "GPT five", `GPT-4o` "GPT four
//! o", `F-150` "F one fifty", `COVID-19` "COVID nineteen". The hyphen is no minus and no
//! range; the number is an identifier.

use super::dates::is_calendar_word;
use super::numbers::identifier;
use super::{Cursor, Words};

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    let name = cursor.get(0).filter(|t| t.is_word())?;
    let (dash, number) = (cursor.get(1)?, cursor.get(2)?);
    if !dash.is_mark('-')
        || !number.is_digits()
        || number.text.len() > 4
        || !cursor.at_word_start()
        || !name.text.chars().any(char::is_uppercase)
        || is_calendar_word(name)
    {
        return None;
    }
    let mut words = format!("{} {}", name.text, identifier(number.text)?);
    let mut tokens = 3;
    // `4o`, `3b`: a model's letters after its number.
    if let Some(letters) = cursor.get(3).filter(|t| {
        t.is_word() && t.text.len() <= 2 && t.text.bytes().all(|b| b.is_ascii_lowercase())
    }) {
        words.push(' ');
        words.push_str(letters.text);
        tokens = 4;
    }
    cursor.ends_at(tokens).then(|| Words::new(tokens, words))
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn hyphenated_names_read_their_numbers() {
        for (written, said) in [
            ("Try GPT-5 now.", "Try GPT five now."),
            ("Try GPT-4o now.", "Try GPT four o now."),
            ("The F-150 sold.", "The F one fifty sold."),
            ("COVID-19 spread.", "COVID nineteen spread."),
            ("Pages 10-20 now.", "Pages ten to twenty now."),
        ] {
            assert_eq!(spoken(written), said, "{written}");
        }
    }
}
