//! One line of markdown as a reader says it: CommonMark's events turned into text, blocks
//! into phrases, a link into its text and a table into cells and rows.

use std::ops::Range;

use pulldown_cmark::{BrokenLink, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

use super::characters::{drop_marks, is_dropped, unify_char, Replacement};
use super::html::is_markup;

/// The text of one line of markdown as a reader says it, blocks on lines of their own.
pub(super) fn read_markdown(markdown: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    // A reference whose definition is elsewhere (`[text][1]`) is still a link: its text is
    // spoken. A bare `[text]` that defines nothing is prose in brackets and stays.
    let mut references = |link: BrokenLink<'_>| {
        (link.link_type != LinkType::Shortcut)
            .then_some((CowStr::Borrowed(""), CowStr::Borrowed("")))
    };
    let mut speech = Speech {
        source: markdown,
        text: String::with_capacity(markdown.len()),
        lists: Vec::new(),
        items: Vec::new(),
        spans: Vec::new(),
        cell_comma: None,
        html_block: None,
    };
    let parser = Parser::new_with_broken_link_callback(markdown, options, Some(&mut references));
    for (event, range) in parser.into_offset_iter() {
        speech.event(event, range);
    }
    drop_marks(&speech.text)
}

/// The spoken text so far, and what the parser's events still have open.
struct Speech<'a> {
    source: &'a str,
    text: String,
    /// Open lists, innermost last: whether each is ordered.
    lists: Vec<bool>,
    /// Open list items, innermost last: where each one's own text starts.
    items: Vec<usize>,
    /// Open emphasis spans, innermost last: the closing delimiter to write back.
    spans: Vec<&'a str>,
    /// Where the comma that ended the last table cell is, while it is the last character.
    cell_comma: Option<usize>,
    /// Whether the open HTML block is text after all (decided by its first tag).
    html_block: Option<bool>,
}

impl<'a> Speech<'a> {
    fn event(&mut self, event: Event<'a>, range: Range<usize>) {
        match event {
            Event::Text(text) | Event::Code(text) => self.text.push_str(&text),
            Event::SoftBreak => self.text.push(' '),
            Event::HardBreak | Event::Rule => self.line_break(),
            // A tag is no word, but may stand between two (`one<br>two`).
            Event::InlineHtml(html) if is_markup(&html) => self.text.push(' '),
            Event::Html(html) if *self.html_block.get_or_insert_with(|| is_markup(&html)) => {}
            // Tag-shaped but no HTML ("<here>", "<name@host>"): what was written.
            Event::InlineHtml(html) | Event::Html(html) => self.text.push_str(&html),
            Event::Start(tag) => self.start(tag, range),
            Event::End(tag) => self.end(tag),
            // Task-list boxes: markup, nothing to say.
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'a>, range: Range<usize>) {
        match tag {
            Tag::List(first) => {
                self.block();
                self.lists.push(first.is_some());
            }
            Tag::Item => {
                self.line_break();
                if self.lists.last() == Some(&true) {
                    self.text.push_str(list_number(&self.source[range]));
                    self.text.push(' ');
                }
                self.items.push(self.text.len());
            }
            Tag::TableCell => self.text.push(' '),
            Tag::Emphasis | Tag::Strong | Tag::Strikethrough => {
                // The marks are written back: which of them go is decided by where they
                // stand ([`drop_marks`]), not by how the parser paired them.
                let marked = &self.source[range];
                let lead = marked.chars().next().unwrap_or('*');
                let len = match tag {
                    Tag::Strong => 2,
                    Tag::Strikethrough => marked.chars().take_while(|&c| c == lead).count(),
                    _ => 1,
                }
                .min(marked.len() / 2);
                self.text.push_str(&marked[..len]);
                self.spans.push(&marked[marked.len() - len..]);
            }
            // Links and images: their text (an image's alt text) is what is said.
            Tag::Link { .. } | Tag::Image { .. } => {}
            _ => self.block(),
        }
    }

    /// A block starts: on a line of its own, and after an item's own text ("- item" over a
    /// nested list or quote) a phrase of its own.
    fn block(&mut self) {
        let item_text = self.items.last().and_then(|&from| self.text.get(from..));
        if item_text.is_some_and(|text| !text.trim().is_empty()) {
            self.end_phrase('.');
        }
        self.line_break();
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => {
                self.end_phrase('.');
                self.line_break();
            }
            TagEnd::Item => {
                self.end_phrase('.');
                self.items.pop();
                self.line_break();
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.line_break();
            }
            TagEnd::TableCell => {
                self.cell_comma = self.end_phrase(',').then(|| self.text.len() - 1);
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                match self.cell_comma.take() {
                    Some(at) if at + 1 == self.text.len() => self.text.replace_range(at.., "."),
                    _ => {
                        self.end_phrase('.');
                    }
                }
                self.line_break();
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                if let Some(close) = self.spans.pop() {
                    self.text.push_str(close);
                }
            }
            TagEnd::Link | TagEnd::Image => {}
            TagEnd::HtmlBlock => {
                self.html_block = None;
                self.line_break();
            }
            _ => self.line_break(),
        }
    }

    fn line_break(&mut self) {
        self.cell_comma = None;
        self.text.push('\n');
    }

    /// Ends the phrase so far with `mark` unless it already ends in punctuation; says whether
    /// it did.
    fn end_phrase(&mut self, mark: char) -> bool {
        let kept = self
            .text
            .trim_end_matches(|c: char| c.is_whitespace() || is_dropped(c))
            .len();
        self.text.truncate(kept);
        // Emphasis marks at the end go (see [`drop_marks`]): what they close is what ends.
        let unmarked = self.text.trim_end_matches(['*', '_', '~']);
        let open = unmarked.chars().next_back().is_some_and(|last| {
            last.is_alphanumeric()
                || matches!(
                    unify_char(last, None, None),
                    Some(Replacement::Char(')' | '"' | '\'' | '%'))
                )
        });
        if open {
            self.text.push(mark);
        }
        open
    }
}

/// An ordered item's number as written (`3.`, `12)`): part of what is read, and where a list
/// was not meant ("2024. A good year.") the text stays as it was.
fn list_number(item: &str) -> &str {
    let digits = item.len() - item.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let delimiter = item[digits..]
        .chars()
        .next()
        .filter(|c| matches!(c, '.' | ')'))
        .map_or(0, char::len_utf8);
    &item[..digits + delimiter]
}
