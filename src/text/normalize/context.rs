//! Text read line by line: what markup earlier lines leave open (a code fence, an HTML comment
//! or block), and the lines that are markup only.

use std::borrow::Cow;

use pulldown_cmark::{Event, Options, Parser, Tag};
use unicode_normalization::UnicodeNormalization;

use super::characters::unify;
use super::html::is_markup;
use super::inline;
use super::markdown::read_markdown;

/// What a line is read in: markup that an earlier line opened and that goes on past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Context {
    #[default]
    Text,
    /// Inside a code fence of `len` marks `mark` (`` ` `` or `~`): lines are code, read as
    /// written, until a closing fence.
    Fence { mark: char, len: usize },
    /// Inside an HTML comment that opened a line, until the line with `-->`.
    Comment,
    /// Inside an HTML block (a line that starts with an element's tag), until a blank line.
    Html,
}

impl Context {
    /// The words `line` is read as in this context, single-spaced (empty for markup only).
    pub(crate) fn normalize(self, line: &str) -> String {
        // Marks of inline phonemes come only from `inline::mark`, never from the client.
        let line: String = line.nfc().filter(|&c| !inline::is_mark(c)).collect();
        unify(&self.spoken(&line))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether `line` is read only as a whole: a table row, whose cells are told apart by
    /// every `|` on it, including those still to come.
    pub(crate) fn reads_whole(self, line: &str) -> bool {
        self == Self::Text && line.trim_start().starts_with('|')
    }

    /// Whether `line` has begun the text of a paragraph or heading (or code in a fence), past
    /// any block markers: what follows on the line is then read in running text, whatever it
    /// is.
    pub(crate) fn has_text(self, line: &str) -> bool {
        match self {
            // Code is read as written, with no markup in it.
            Self::Fence { .. } => return true,
            Self::Comment | Self::Html => return false,
            Self::Text => {}
        }
        let mut in_text = false;
        for event in Parser::new_ext(line.trim_start(), Options::ENABLE_TASKLISTS) {
            match event {
                Event::Start(Tag::Paragraph | Tag::Heading { .. }) => in_text = true,
                Event::Text(_) | Event::Code(_) if in_text => return true,
                _ => {}
            }
        }
        false
    }

    /// The context the next line is read in, once `line` is complete.
    pub(crate) fn after(self, line: &str) -> Context {
        match self {
            Self::Fence { mark, len } if is_closing_fence(line, mark, len) => Self::Text,
            Self::Fence { .. } => self,
            Self::Comment if line.contains("-->") => Self::Text,
            Self::Comment => self,
            Self::Html if line.trim().is_empty() => Self::Text,
            Self::Html => self,
            Self::Text => {
                let line = line.trim_start();
                if let Some((mark, len)) = opening_fence(line) {
                    Self::Fence { mark, len }
                } else if line.starts_with("<!--") && !line.contains("-->") {
                    Self::Comment
                } else if opens_html_block(line) {
                    Self::Html
                } else {
                    Self::Text
                }
            }
        }
    }

    fn spoken(self, line: &str) -> String {
        match self {
            Self::Fence { mark, len } if is_closing_fence(line, mark, len) => String::new(),
            // Code is read as written.
            Self::Fence { .. } => line.to_string(),
            // As CommonMark reads them, the line that closes a comment is all comment.
            Self::Comment | Self::Html => String::new(),
            Self::Text => {
                // Indentation makes no code here: in chat text it nests list items.
                let line = line.trim_start();
                // A fence's info string ("rust") names a language; it is no text.
                if opening_fence(line).is_some() || is_underline(line) {
                    return String::new();
                }
                let line = inline::mark(line);
                read_markdown(&table_row(&line).unwrap_or(Cow::Borrowed(&line)))
            }
        }
    }
}

/// For a line that opens a code fence (three or more `` ` `` or `~`): its mark and length.
fn opening_fence(line: &str) -> Option<(char, usize)> {
    let mark = line.chars().next().filter(|&c| c == '`' || c == '~')?;
    let len = line.chars().take_while(|&c| c == mark).count();
    // "```code```" on one line is a code span, not a fence.
    let info = &line[len..];
    (len >= 3 && !(mark == '`' && info.contains('`'))).then_some((mark, len))
}

fn is_closing_fence(line: &str, mark: char, len: usize) -> bool {
    let line = line.trim();
    line.chars().count() >= len && line.chars().all(|c| c == mark)
}

/// Whether `line` starts an HTML block of markup that goes on to the next blank line: one
/// that opens with an element's tag (a comment, which ends at its `-->`, is a [`Context`] of
/// its own).
fn opens_html_block(line: &str) -> bool {
    let mut events = Parser::new(line);
    matches!(events.next(), Some(Event::Start(Tag::HtmlBlock)))
        && matches!(events.next(), Some(Event::Html(html))
            if is_markup(&html) && !html.starts_with("<!") && !html.starts_with("<?"))
}

/// A setext heading's underline (`===`) or a table's delimiter row (`|---|:--:|`): they only
/// say how the line above is to be read, and are no text themselves. (A `---` line is a
/// thematic break, which CommonMark reads as no text as well.)
fn is_underline(line: &str) -> bool {
    let line = line.trim();
    let setext = !line.is_empty() && line.chars().all(|c| c == '=');
    let delimiters = line.contains('-')
        && line.contains('|')
        && line
            .chars()
            .all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'));
    setext || delimiters
}

/// A line that starts with `|` is a table row: as CommonMark reads a table only from its head
/// and delimiter row together, the row is given a delimiter row of its own to be parsed as one.
fn table_row(line: &str) -> Option<Cow<'_, str>> {
    if !line.starts_with('|') {
        return None;
    }
    let mut pipes = 0;
    let mut escaped = false;
    for c in line.chars() {
        if c == '|' && !escaped {
            pipes += 1;
        }
        escaped = c == '\\' && !escaped;
    }
    let cells = if line.trim_end().ends_with('|') && !line.trim_end().ends_with("\\|") {
        pipes - 1
    } else {
        pipes
    };
    let cells = cells.max(1);
    Some(Cow::Owned(format!("{line}\n|{}", "-|".repeat(cells))))
}
