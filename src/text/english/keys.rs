//! Keyboard shortcuts as people say them (issue #50): `Cmd+S` "Command S", `Ctrl+Shift+T`
//! "Control Shift T", `Alt+F4` "Alt F four". Without this the `+` would be read "plus".

use super::numbers::cardinal;
use super::tokens::Token;
use super::{Cursor, Words};

/// Keys a shortcut starts with, as written and as said.
const MODIFIERS: &[(&str, &str)] = &[
    ("alt", "Alt"),
    ("cmd", "Command"),
    ("command", "Command"),
    ("control", "Control"),
    ("ctrl", "Control"),
    ("meta", "Meta"),
    ("opt", "Option"),
    ("option", "Option"),
    ("shift", "Shift"),
    ("super", "Super"),
    ("win", "Windows"),
];

/// Other keys with names.
const NAMED_KEYS: &[(&str, &str)] = &[
    ("backspace", "Backspace"),
    ("del", "Delete"),
    ("delete", "Delete"),
    ("down", "Down"),
    ("end", "End"),
    ("enter", "Enter"),
    ("esc", "Escape"),
    ("escape", "Escape"),
    ("home", "Home"),
    ("insert", "Insert"),
    ("left", "Left"),
    ("pgdn", "Page Down"),
    ("pgup", "Page Up"),
    ("return", "Return"),
    ("right", "Right"),
    ("space", "Space"),
    ("tab", "Tab"),
    ("up", "Up"),
];

fn said(table: &[(&str, &'static str)], word: &Token) -> Option<&'static str> {
    let lower = word.text.to_lowercase();
    table
        .iter()
        .find(|(written, _)| *written == lower)
        .map(|(_, said)| *said)
}

pub(super) fn read(cursor: &Cursor) -> Option<Words> {
    let first = cursor.get(0).filter(|t| t.is_word())?;
    if !cursor.get(1).is_some_and(|t| t.is_mark('+')) || !cursor.at_word_start() {
        return None;
    }
    let mut words = vec![said(MODIFIERS, first)?.to_string()];
    let mut at = 1;
    while cursor.get(at).is_some_and(|t| t.is_mark('+')) {
        let (key, tokens) = key(cursor, at + 1)?;
        words.push(key);
        at += 1 + tokens;
    }
    (at > 1 && cursor.ends_at(at)).then(|| Words::new(at, words.join(" ")))
}

/// The key `offset` tokens on and the tokens it takes: a modifier, a named key, a letter, a
/// digit or a function key (`F4`).
fn key(cursor: &Cursor, offset: usize) -> Option<(String, usize)> {
    let token = cursor.get(offset)?;
    if token.is_digits() && token.text.len() == 1 {
        return Some((cardinal(token.text.parse().ok()?), 1));
    }
    if !token.is_word() {
        return None;
    }
    if let Some(name) = said(MODIFIERS, token).or_else(|| said(NAMED_KEYS, token)) {
        return Some((name.to_string(), 1));
    }
    if token.text.chars().count() != 1 {
        return None;
    }
    let letter = token.text.to_uppercase();
    // `F4`: a function key.
    if let Some(n) = cursor
        .get(offset + 1)
        .filter(|t| letter == "F" && t.is_digits() && t.text.len() <= 2)
        .and_then(|t| t.text.parse::<u64>().ok())
        .filter(|n| (1..=24).contains(n))
    {
        return Some((format!("F {}", cardinal(n)), 2));
    }
    Some((letter, 1))
}

#[cfg(test)]
mod tests {
    use super::super::said as spoken;

    #[test]
    fn shortcuts_are_said_key_by_key() {
        for (written, said) in [
            ("Press Cmd+S now.", "Press Command S now."),
            ("Press Ctrl+Shift+T now.", "Press Control Shift T now."),
            ("Press Alt+F4 now.", "Press Alt F four now."),
            ("Press Shift+Enter now.", "Press Shift Enter now."),
            ("Press Ctrl+1 now.", "Press Control one now."),
            ("Add salt+pepper now.", "Add salt plus pepper now."),
        ] {
            assert_eq!(spoken(written), said, "{written}");
        }
    }
}
