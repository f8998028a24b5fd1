//! What a document is read into: the pieces to speak, in order, each piece of text with the
//! settings in force where it stands and the byte range it was written at.

use std::borrow::Cow;
use std::ops::Range;
use std::time::Duration;

use quick_xml::escape::resolve_xml_entity;
use quick_xml::events::BytesRef;

use super::reader::Parser;

#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Text to speak, in document order; adjacent text of the same settings is merged (text is
    /// adjacent when only comments, entities or CDATA sections stand between).
    Text(Span),
    /// Silence of this length.
    Break(Duration),
    /// The end of a `<s>` or `<p>`: what follows starts a new sentence (a paragraph's is a longer pause: `paragraph: true`).
    /// Text before a `<s>` or `<p>` in the same element is ended the same way, and two
    /// boundaries in a row are one (a paragraph's if either is).
    Boundary { paragraph: bool },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The text as it is to be read (for `<sub>`, the alias; otherwise the element's text content with entities decoded, whitespace runs collapsed to one space).
    /// Never starts or ends with whitespace: consecutive spans are separate words.
    pub text: String,
    /// Byte range in `input` of what the text stands for: the text content as written (for sub/phoneme/say-as, the range of the element's inner text). Timestamps use it to point at the original.
    /// Leading and trailing whitespace is left out; an element with no text has an empty range
    /// where its content would be.
    pub source: Range<usize>,
    pub read_as: ReadAs,
    /// Speed factor from enclosing `<prosody rate>` (1.0 when none).
    pub rate: f32,
    /// Innermost `xml:lang` in force, if any (as written, e.g. "de-DE").
    pub language: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReadAs {
    Plain,
    /// `<phoneme>`: the IPA to say instead of the text.
    Phonemes(String),
    /// `<sub>`: the alias is already in `text`.
    Alias,
    /// `<say-as>`; `format` is passed on as written (e.g. `mdy` for a date).
    SayAs {
        interpret_as: InterpretAs,
        format: Option<String>,
    },
}

/// How `<say-as>` asks for its text to be read; `spell-out` is [`InterpretAs::Characters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterpretAs {
    Characters,
    Cardinal,
    Ordinal,
    Digits,
    Date,
    Time,
    Telephone,
}

impl InterpretAs {
    /// The SSML name (`characters` for both of its spellings).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Characters => "characters",
            Self::Cardinal => "cardinal",
            Self::Ordinal => "ordinal",
            Self::Digits => "digits",
            Self::Date => "date",
            Self::Time => "time",
            Self::Telephone => "telephone",
        }
    }

    /// The interpretation [`as_str`](Self::as_str) names.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Characters,
            Self::Cardinal,
            Self::Ordinal,
            Self::Digits,
            Self::Date,
            Self::Time,
            Self::Telephone,
        ]
        .into_iter()
        .find(|how| how.as_str() == name)
    }
}

pub(super) const KNOWN_ENTITIES: &str =
    "`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;` and character references such as `&#233;`";

pub(super) enum Fragment<'a> {
    /// Text exactly as written, starting at byte `at` of the input.
    Written { text: Cow<'a, str>, at: usize },
    /// An entity or character reference: `text` stands for all of `source`.
    Reference {
        text: Cow<'static, str>,
        source: Range<usize>,
    },
}

impl Fragment<'_> {
    fn text(&self) -> &str {
        match self {
            Fragment::Written { text, .. } | Fragment::Reference { text, .. } => text,
        }
    }

    /// Where the first character that is not whitespace was written, if there is one.
    fn first_word_start(&self) -> Option<usize> {
        match self {
            Fragment::Written { text, at } => text
                .char_indices()
                .find(|(_, c)| !c.is_whitespace())
                .map(|(index, _)| at + index),
            Fragment::Reference { text, source } => (!is_blank(text)).then_some(source.start),
        }
    }

    /// Where the last character that is not whitespace ends in the input, if there is one.
    fn last_word_end(&self) -> Option<usize> {
        match self {
            Fragment::Written { text, at } => text
                .char_indices()
                .rev()
                .find(|(_, c)| !c.is_whitespace())
                .map(|(index, c)| at + index + c.len_utf8()),
            Fragment::Reference { text, source } => (!is_blank(text)).then_some(source.end),
        }
    }
}

impl Parser<'_> {
    pub(super) fn boundary(&mut self, paragraph: bool) {
        match self.pieces.last_mut() {
            // Nothing before it: no sentence to end.
            None => {}
            Some(Piece::Boundary {
                paragraph: previous,
            }) => *previous |= paragraph,
            Some(_) => self.pieces.push(Piece::Boundary { paragraph }),
        }
    }

    /// Makes the text read since the last tag a plain piece, if it has anything to say.
    pub(super) fn flush_run(&mut self, rate: f32, language: &Option<String>) {
        if let Some((text, source)) = self.take_run() {
            self.pieces.push(Piece::Text(Span {
                text,
                source,
                read_as: ReadAs::Plain,
                rate,
                language: language.clone(),
            }));
        }
    }

    /// The text read since the last tag, whitespace collapsed, and where it was written; `None`
    /// when it is only whitespace.
    pub(super) fn take_run(&mut self) -> Option<(String, Range<usize>)> {
        let run = std::mem::take(&mut self.run);
        let text = collapse_whitespace(run.iter().map(Fragment::text));
        if text.is_empty() {
            return None;
        }
        let start = run.iter().find_map(Fragment::first_word_start)?;
        let end = run.iter().rev().find_map(Fragment::last_word_end)?;
        Some((text, start..end))
    }
}

pub(super) fn is_blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

pub(super) fn collapse_whitespace<'s>(parts: impl Iterator<Item = &'s str>) -> String {
    let mut collapsed = String::new();
    let mut space_pending = false;
    for c in parts.flat_map(str::chars) {
        if c.is_whitespace() {
            space_pending = !collapsed.is_empty();
        } else {
            if space_pending {
                collapsed.push(' ');
                space_pending = false;
            }
            collapsed.push(c);
        }
    }
    collapsed
}

pub(super) fn decode_reference(reference: &BytesRef<'_>) -> Result<Cow<'static, str>, String> {
    let name: &str = reference;
    match reference.resolve_char_ref() {
        Ok(Some(c)) if !c.is_control() || c.is_whitespace() => Ok(Cow::Owned(c.to_string())),
        Ok(Some(_)) | Err(_) => Err(format!("`&{name};` is not a character that can be read")),
        Ok(None) => resolve_xml_entity(name).map(Cow::Borrowed).ok_or_else(|| {
            format!("unknown entity `&{name};`: the entities understood are {KNOWN_ENTITIES}")
        }),
    }
}
