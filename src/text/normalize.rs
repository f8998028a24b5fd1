//! Light clean-up of request text before it is split and phonemized.
//!
//! Clients often send what a chat model wrote: markdown, emoji, typographic quotes. espeak-ng
//! would read `**` or `#` aloud or stumble over them, so the markup goes while every word that
//! a reader would say stays. Each line's markdown is parsed by a CommonMark parser
//! (pulldown-cmark) rather than guessed at: what is a heading, a link or emphasis is what
//! CommonMark says, so a link's text is spoken and its address is not, HTML is not spoken, a
//! table row is read cell by cell, and prose that merely contains `*`, `_` or `#` is no markup
//! and stays as written. Numbers, dates and currency are left alone: espeak-ng reads them
//! better than a hand-written expander would, in every language it supports.
//!
//! The text is read **line by line**: a line is parsed on its own, in the [`Context`] that the
//! lines before it leave open (a code fence, an HTML comment or block). That is what lets
//! streamed text (`super::incremental`) be normalized exactly as the whole text is while it
//! arrives, without waiting for a paragraph to end: nothing a later line says changes how an
//! earlier one is read. The price is small and deliberate: a setext heading's underline
//! (`===`) and a table's delimiter row are dropped rather than turning the line above into a
//! heading or a table head, and emphasis that spans two lines loses its marks without being
//! parsed as emphasis.
//!
//! Word timestamps find each word of the result again in the original text, in order
//! (`speech::timed`), so nothing here adds a word that is not written there or changes the
//! order of words: an ordered list keeps its numbers as written, and the periods and commas
//! added to end phrases are punctuation, which that search skips.

use std::borrow::Cow;
use std::ops::Range;

use pulldown_cmark::{BrokenLink, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};
use unicode_normalization::UnicodeNormalization;

use super::inline;

/// Turns markdown into the text it reads as, drops emoji and control characters, unifies
/// quotes, dashes and ellipses, and collapses whitespace to single spaces. Headings, list items
/// and table rows without final punctuation get a period (and table cells a comma) so that they
/// are spoken as separate phrases.
pub fn normalize(text: &str) -> String {
    let mut context = Context::default();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let spoken = context.normalize(line);
        if !spoken.is_empty() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&spoken);
        }
        context = context.after(line);
    }
    out
}

/// Text that is no markdown (an SSML document's text) cleaned as [`normalize`] cleans a
/// line's words: composed, emoji and control characters dropped, quotes, dashes and ellipses
/// unified, whitespace collapsed; marks of inline phonemes removed.
pub(crate) fn clean(text: &str) -> String {
    let text: String = text.nfc().filter(|&c| !inline::is_mark(c)).collect();
    unify(&text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

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

/// The text of one line of markdown as a reader says it, blocks on lines of their own.
fn read_markdown(markdown: &str) -> String {
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

/// Whether tag-shaped text is HTML, which is not read: a comment, a declaration, or a tag of
/// an HTML element. A client's `<here>` or `<placeholder>` is text.
fn is_markup(html: &str) -> bool {
    let Some(tag) = html.trim_start().strip_prefix('<') else {
        return false;
    };
    if tag.starts_with(['!', '?']) {
        return true;
    }
    let tag = tag.strip_prefix('/').unwrap_or(tag);
    let name_len = tag
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(tag.len());
    HTML_ELEMENTS.contains(&tag[..name_len].to_ascii_lowercase().as_str())
}

/// The elements of HTML (the living standard's list, and the obsolete ones still written).
const HTML_ELEMENTS: &[&str] = &[
    "a",
    "abbr",
    "address",
    "area",
    "article",
    "aside",
    "audio",
    "b",
    "base",
    "bdi",
    "bdo",
    "big",
    "blockquote",
    "body",
    "br",
    "button",
    "canvas",
    "caption",
    "center",
    "cite",
    "code",
    "col",
    "colgroup",
    "data",
    "datalist",
    "dd",
    "del",
    "details",
    "dfn",
    "dialog",
    "div",
    "dl",
    "dt",
    "em",
    "embed",
    "fieldset",
    "figcaption",
    "figure",
    "font",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hgroup",
    "hr",
    "html",
    "i",
    "iframe",
    "img",
    "input",
    "ins",
    "kbd",
    "label",
    "legend",
    "li",
    "link",
    "main",
    "map",
    "mark",
    "menu",
    "meta",
    "meter",
    "nav",
    "noscript",
    "object",
    "ol",
    "optgroup",
    "option",
    "output",
    "p",
    "param",
    "picture",
    "pre",
    "progress",
    "q",
    "rp",
    "rt",
    "ruby",
    "s",
    "samp",
    "script",
    "search",
    "section",
    "select",
    "slot",
    "small",
    "source",
    "span",
    "strike",
    "strong",
    "style",
    "sub",
    "summary",
    "sup",
    "svg",
    "table",
    "tbody",
    "td",
    "template",
    "textarea",
    "tfoot",
    "th",
    "thead",
    "time",
    "title",
    "tr",
    "track",
    "tt",
    "u",
    "ul",
    "var",
    "video",
    "wbr",
];

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

/// Character-level clean-up of the spoken text: quotes, dashes, ellipses, symbols.
fn unify(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '-' && chars.get(i + 1) == Some(&'-') && chars.get(i + 2) != Some(&'-') {
            // A typed em dash: "word--word" or "word -- word".
            out.push('—');
            i += 2;
            continue;
        }
        match unify_char(
            c,
            chars.get(i.wrapping_sub(1)).copied(),
            chars.get(i + 1).copied(),
        ) {
            Some(Replacement::Char(r)) => out.push(r),
            Some(Replacement::Str(s)) => out.push_str(s),
            None => {}
        }
        i += 1;
    }
    out
}

enum Replacement {
    Char(char),
    Str(&'static str),
}

fn unify_char(c: char, before: Option<char>, after: Option<char>) -> Option<Replacement> {
    use Replacement::{Char, Str};
    let between_digits =
        before.is_some_and(|b| b.is_ascii_digit()) && after.is_some_and(|a| a.is_ascii_digit());
    Some(match c {
        '“' | '”' | '„' | '‟' | '«' | '»' | '″' | '〝' | '〞' | '＂' => Char('"'),
        '‘' | '’' | '‚' | '‛' | '′' | '‹' | '›' | '＇' => Char('\''),
        // A range "1990–1995" keeps a hyphen; elsewhere dashes are one clause-separating dash.
        '–' | '‒' if between_digits => Char('-'),
        '–' | '‒' | '—' | '―' | '⸺' | '⸻' => Char('—'),
        '−' | '‐' | '‑' => Char('-'),
        '…' => Str("..."),
        '\t' | '\n' | '\r' => Char(' '),
        c if is_dropped(c) => return None,
        c if c.is_whitespace() => Char(' '),
        c => Char(c),
    })
}

/// Control and invisible formatting characters, and emoji with their modifiers: nothing in
/// them can be spoken.
fn is_dropped(c: char) -> bool {
    let cp = c as u32;
    c.is_control()
        || matches!(cp,
            0x200B..=0x200F | 0x2060..=0x206F | 0xFEFF // zero-width, direction marks
            | 0xFE00..=0xFE0F // variation selectors
            | 0x1F000..=0x1FAFF // emoji, pictographs, flags, skin tones
            | 0x2600..=0x27BF // misc symbols, dingbats
            | 0x2B00..=0x2BFF // arrows and stars (⭐)
            | 0x231A..=0x231B | 0x23E9..=0x23FA // watch, hourglass, media keys
            | 0x25A0..=0x25FF // geometric shapes used as bullets
            | 0xE0000..=0xE007F // emoji tag sequences
            | 0x20E3 // keycap
        )
}

/// The text without its emphasis marks: runs of `*` or `_` (and `~~`) that hug a word on one
/// side only. Whether CommonMark pairs two runs into emphasis can depend on marks much later
/// on the line, so the choice is made by each run's neighbours alone, which text streamed in
/// pieces knows as soon as the run is followed by anything. `2 * 3`, `a*b*c`, `snake_case`
/// and `un**believ**able` keep theirs, so no two words become one.
fn drop_marks(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        let is_mark = matches!(c, '*' | '_') || (c == '~' && run == 2);
        let is_word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric());
        let before = i.checked_sub(1).and_then(|j| chars.get(j));
        if !(is_mark && is_word(before) != is_word(chars.get(i + run))) {
            out.extend(&chars[i..i + run]);
        }
        i += run;
    }
    out
}
#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn strips_emphasis_and_code() {
        assert_eq!(
            normalize("This is **bold** and *it*."),
            "This is bold and it."
        );
        assert_eq!(normalize("__Under__ _score_ ~~gone~~"), "Under score gone");
        assert_eq!(normalize("Run `cargo test` now."), "Run cargo test now.");
        assert_eq!(normalize("***Both*** here"), "Both here");
    }

    #[test]
    fn keeps_arithmetic_and_identifiers() {
        assert_eq!(normalize("2 * 3 = 6"), "2 * 3 = 6");
        assert_eq!(
            normalize("call snake_case_name please"),
            "call snake_case_name please"
        );
        assert_eq!(normalize("about ~5 km"), "about ~5 km");
        assert_eq!(normalize("a*b*c"), "a*b*c");
    }

    #[test]
    fn links_keep_their_text() {
        assert_eq!(
            normalize("See [the docs](https://example.org/a_b) for more."),
            "See the docs for more."
        );
        assert_eq!(normalize("![a cat](cat.png) sleeps"), "a cat sleeps");
        assert_eq!(
            normalize("Mail <mailto:me@example.org> or <https://x.org>"),
            "Mail mailto:me@example.org or https://x.org"
        );
        assert_eq!(normalize("Use [brackets] freely"), "Use [brackets] freely");
        assert_eq!(normalize("[**bold link**](u)"), "bold link");
        assert_eq!(normalize("[docs](https://x.org \"The docs\")"), "docs");
        assert_eq!(normalize("[a](not a link) b"), "[a](not a link) b");
    }

    #[test]
    fn headings_and_lists_become_phrases() {
        assert_eq!(
            normalize("# Title\nSome text.\n## Part two ##\n"),
            "Title. Some text. Part two."
        );
        assert_eq!(
            normalize("Shopping:\n- apples\n- pears!\n* plums\n+ figs\n  - [x] done"),
            "Shopping: apples. pears! plums. figs. done."
        );
        assert_eq!(normalize("> quoted line\n> more"), "quoted line more");
        assert_eq!(normalize("#hashtag stays"), "#hashtag stays");
    }

    #[test]
    fn rules_and_fences_go_but_code_words_stay() {
        // A fence's info string ("rust") names a language: no text.
        assert_eq!(
            normalize("Intro\n\n---\n```rust\nlet x = 1;\n```\nEnd"),
            "Intro let x = 1; End"
        );
        // Read line by line, "---" is a rule, not the underline of a heading.
        assert_eq!(normalize("Intro\n---\nText"), "Intro Text");
    }

    /// (markdown, what is spoken) for each case of a table.
    fn check(cases: &[(&str, &str)]) {
        for (markdown, spoken) in cases {
            assert_eq!(normalize(markdown), *spoken, "{markdown:?}");
        }
    }

    #[test]
    fn tables_are_read_cell_by_cell_and_row_by_row() {
        check(&[
            (
                "| Name | Age |\n|------|----:|\n| Ann | 31 |\n| Bob | 42 |",
                "Name, Age. Ann, 31. Bob, 42.",
            ),
            (
                "Prices:\n\n| Item | Cost |\n| --- | --- |\n| Tea! | $3 |\n| | none |",
                "Prices: Item, Cost. Tea! $3. none.",
            ),
            (
                "| **bold** | [link](https://x.org) | `code` |\n|-|-|-|\n| a<br>b | c? | d. |",
                "bold, link, code. a b, c? d.",
            ),
        ]);
    }

    #[test]
    fn links_speak_their_text_not_their_address() {
        check(&[
            (
                "Read [the guide](https://example.org/guide).",
                "Read the guide.",
            ),
            (
                "[ref link][1] here\n\n[1]: https://example.org/x",
                "ref link here",
            ),
            (
                "[collapsed][] too\n\n[collapsed]: /x \"T\"",
                "collapsed too",
            ),
            (
                "A [link with `code` and *emphasis*](/a) ok",
                "A link with code and emphasis ok",
            ),
            ("Mail <me@example.org> now", "Mail me@example.org now"),
            (
                "Plain https://example.org/a_b_c stays",
                "Plain https://example.org/a_b_c stays",
            ),
        ]);
    }

    #[test]
    fn images_speak_their_alt_text() {
        check(&[
            ("![A red fox](fox.png \"Title\") runs.", "A red fox runs."),
            ("[![badge alt](b.svg)](https://ci)", "badge alt"),
            ("![](empty.png) Nothing before.", "Nothing before."),
        ]);
    }

    #[test]
    fn code_spans_and_blocks_keep_their_words() {
        check(&[
            ("Type `ls -la` here.", "Type ls -la here."),
            ("Use ``a `tick` b`` then", "Use a `tick` b then"),
            ("```python\nprint('hi')\n```", "print('hi')"),
            ("~~~\nraw ~~text~~ **stays**\n~~~", "raw ~~text~~ **stays**"),
            (
                "Para.\n\n    indented code\n\nAfter.",
                "Para. indented code After.",
            ),
        ]);
    }

    #[test]
    fn html_is_not_spoken() {
        check(&[
            ("Press <kbd>Ctrl</kbd> now", "Press Ctrl now"),
            ("one<br>two", "one two"),
            ("<div>\nhidden block\n</div>\n\nShown.", "Shown."),
            ("Before <!-- a comment --> after", "Before after"),
            ("<!--\nmulti\nline\n-->\nText", "Text"),
            (
                "<p align=\"center\">\n<img src=\"x\">\n</p>\n\nAfter",
                "After",
            ),
            ("Fish & chips <here>.", "Fish & chips <here>."),
            (
                "Dear <name>,\n\n<placeholder>\nstays",
                "Dear <name>, <placeholder> stays",
            ),
        ]);
    }

    #[test]
    fn emphasis_marks_go() {
        check(&[
            (
                "*one* _two_ **three** __four__ ~~five~~",
                "one two three four five",
            ),
            ("A **bold _and italic_ mix**.", "A bold and italic mix."),
            ("un*believ*able and wo**r**d", "un*believ*able and wo**r**d"),
        ]);
    }

    #[test]
    fn headings_lists_and_quotes_become_phrases() {
        check(&[
            // Lines are read on their own: the underline goes, the line above stays text.
            ("Title\n=====\nBody", "Title Body"),
            ("### Ends with? ###\nNext", "Ends with? Next"),
            ("1. first\n2. second\n3) no", "1. first. 2. second. 3) no."),
            ("7. seven\n8. eight", "7. seven. 8. eight."),
            ("- loose\n\n- items", "loose. items."),
            ("> # Quoted heading\n> text", "Quoted heading. text"),
        ]);
    }

    #[test]
    fn nested_markup_is_read_in_order() {
        check(&[
            (
                "- outer\n  - inner *one*\n  - inner [two](/x)\n- last",
                "outer. inner one. inner two. last.",
            ),
            (
                "> - quoted item\n>   > deeper `code`",
                "quoted item. deeper code",
            ),
            (
                "1. step\n   ```\n   run it\n   ```\n2. done",
                "1. step. run it 2. done.",
            ),
            ("## A [**linked** head](/h)", "A linked head."),
        ]);
    }

    #[test]
    fn plain_text_that_is_no_markdown_stays() {
        for text in [
            "3 * 4 = 12 and 2*3 too.",
            "a*b*c",
            "Write to first.last@example.org today.",
            "Use my_var_name here.",
            "#1 priority, issue #42.",
            "5 > 3, and x -> y.",
            "If a < b then b > a.",
            "2024. It was a good year.",
            "Price: $5 (or 4 €), 50% off!",
            "He said: 'fine' and left.",
        ] {
            assert_eq!(normalize(text), text);
        }
    }

    /// Word timestamps look each word of the result up in the original, in order: every word
    /// of the result must be found there after the previous one.
    #[test]
    fn spoken_words_appear_in_the_original_in_order() {
        let text = "# Intro\n\nSee [the *docs*](https://x.org/docs) and ![a cat](c.png).\n\n\
                    | k | v |\n|---|---|\n| 1 | one |\n\n3. three\n4. four\n\n\
                    > quoted `code` <b>bold</b>\n\n```sh\nrun --fast\n```";
        let mut rest = text;
        for word in normalize(text).split_whitespace() {
            let word = word.trim_matches(|c: char| matches!(c, '.' | ',' | '—'));
            let at = rest
                .find(word)
                .unwrap_or_else(|| panic!("{word:?} not found in {rest:?}"));
            rest = &rest[at + word.len()..];
        }
    }

    #[test]
    fn drops_emoji_and_control_characters() {
        assert_eq!(normalize("Great job 👍🏽! 🎉🎉"), "Great job !");
        assert_eq!(normalize("flag 🇩🇪 and ❤️ love"), "flag and love");
        assert_eq!(normalize("a\u{0007}b\u{200B}c\u{FEFF}"), "abc");
        assert_eq!(normalize("keycap 1\u{FE0F}\u{20E3} done"), "keycap 1 done");
    }

    #[test]
    fn unifies_quotes_dashes_and_ellipses() {
        assert_eq!(
            normalize("“Hi,” she said… ‘ok’"),
            "\"Hi,\" she said... 'ok'"
        );
        assert_eq!(normalize("don’t"), "don't");
        assert_eq!(
            normalize("one – two — three ― four"),
            "one — two — three — four"
        );
        assert_eq!(normalize("1990–1995"), "1990-1995");
        assert_eq!(normalize("wait--what"), "wait—what");
        assert_eq!(normalize("−5 degrees"), "-5 degrees");
    }

    #[test]
    fn keeps_numbers_dates_and_currency() {
        let text = "On 2024-05-17 it cost $3.50 (€3,20) at 10:30, i.e. 15% off.";
        assert_eq!(normalize(text), text);
    }

    #[test]
    fn collapses_whitespace() {
        assert_eq!(normalize("  a \t b\n\n\nc\u{00A0}d  "), "a b c d");
        assert_eq!(normalize(""), "");
        assert_eq!(normalize(" \n\t "), "");
    }

    #[test]
    fn composes_decomposed_text() {
        assert_eq!(normalize("cafe\u{0301}"), "café");
    }

    #[test]
    fn survives_generated_markup() {
        let tokens = [
            "**",
            "*",
            "_",
            "__",
            "~~",
            "`",
            "```",
            "[",
            "](",
            ")",
            "![",
            "<https://a.b>",
            "<",
            ">",
            "#",
            "\n",
            "- ",
            "word",
            "Ünï",
            "👍",
            "\u{200D}",
            "“",
            "’",
            "–",
            "--",
            "…",
            " ",
            "\t",
            "3.5",
            "\u{0007}",
        ];
        // Tokens that can make a code fence's info string or an HTML tag around a word, which
        // are not spoken: with them, words may go, but never come from nowhere or move.
        let hiding = ["```", "~~", "<"];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for round in 0..1000 {
            let pool: Vec<&str> = tokens
                .iter()
                .copied()
                .filter(|t| round % 2 == 0 || !hiding.contains(t))
                .collect();
            let mut text = String::new();
            for _ in 0..(round / 2 % 40) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push_str(pool[(state % pool.len() as u64) as usize]);
            }
            let out = normalize(&text);
            assert_eq!(out.trim(), out, "{text:?}");
            assert!(
                !out.contains("  ") && !out.contains('\n'),
                "{text:?} -> {out:?}"
            );
            assert!(!out.contains('👍') && !out.contains('\u{0007}'), "{text:?}");
            let mut written = text.chars().filter(|c| c.is_alphanumeric());
            assert!(
                out.chars()
                    .filter(|c| c.is_alphanumeric())
                    .all(|c| written.any(|w| w == c)),
                "{text:?} -> {out:?}: letters as written, in order"
            );
            if round % 2 == 1 {
                assert_eq!(
                    out.matches("word").count(),
                    text.matches("word").count(),
                    "{text:?} -> {out:?}"
                );
            }
        }
    }

    #[test]
    fn never_drops_words() {
        let text = "**Note:** see [link](http://a.b) - then `run` it; 3 * 4 is _twelve_.";
        let words = |s: &str| {
            s.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty() && *w != "http" && *w != "a" && *w != "b")
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(words(&normalize(text)), words(text));
    }
}
