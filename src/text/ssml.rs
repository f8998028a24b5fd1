//! SSML input: a request whose text is an SSML document (`<speak>…</speak>`) says itself how it
//! is to be read — pauses, sentence and paragraph breaks, speed, language, pronunciations, and
//! how to read numbers, dates and letters — where plain text leaves all of that to the
//! normalizer's guesses.
//!
//! This module only reads the document. It checks it against the subset of SSML the server
//! honours and flattens it into [`Piece`]s in reading order, each piece of text carrying the
//! settings in force where it stands and the byte range it was written at, so that word
//! timestamps can still point into what the client sent. A real XML parser reads it, so that
//! markup is never spoken and text is never taken for markup. Anything outside the subset is an
//! error rather than being spoken or dropped: whoever wrote markup meant something by it.

use std::borrow::Cow;
use std::ops::{Range, RangeInclusive};
use std::time::Duration;

use quick_xml::escape::resolve_xml_entity;
use quick_xml::events::attributes::AttrError;
use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::reader::Reader;
use quick_xml::XmlVersion;

/// Reads an SSML document (the whole request text) into the pieces to speak, in order.
pub fn parse(input: &str) -> Result<Vec<Piece>, SsmlError> {
    Parser::new(input).read_document()
}

/// Whether `tag` is written as a language tag is (`de`, `pt-BR`, `en_US`): letters, digits,
/// hyphens and underscores.
pub fn is_language_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Whether `input` is an SSML document (starts with `<speak`, after whitespace and an optional `<?xml …?>` declaration).
pub fn is_ssml(input: &str) -> bool {
    let mut reader = Reader::from_str(input);
    let mut declaration_allowed = true;
    loop {
        let start = position(&reader, input);
        match reader.read_event() {
            Ok(Event::Text(text)) if is_blank(&text) => {}
            Ok(Event::Decl(_)) if declaration_allowed => declaration_allowed = false,
            // Decided on what is written rather than on whether it parses: a broken `<speak>`
            // document must get parse's error, not be read aloud, markup and all, as plain text.
            _ => return starts_with_speak_tag(input.get(start..).unwrap_or_default()),
        }
    }
}

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

/// What is wrong with an SSML document, and where: `line` and `column` (1-based, the column
/// counted in characters) and `offset` (in bytes) point at the markup at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SSML error at line {line}, column {column}: {message}")]
pub struct SsmlError {
    pub message: String,
    pub line: usize,
    pub column: usize,
    pub offset: usize,
}

impl SsmlError {
    /// What is wrong at byte `offset` of the document `input`.
    pub fn at(input: &str, offset: usize, message: impl Into<String>) -> Self {
        let offset = offset.min(input.len());
        let (line, column) = line_and_column(input, offset);
        SsmlError {
            message: message.into(),
            line,
            column,
            offset,
        }
    }
}

/// The longest pause a `<break time>` may ask for: a longer one is far more likely a slip
/// (`5000s` for `5000ms`) than a wish, and would hold a synthesis slot producing silence.
const MAX_BREAK: Duration = Duration::from_secs(10);

/// The speed factors a voice can be driven at without falling apart.
const RATE_RANGE: RangeInclusive<f32> = 0.25..=4.0;

/// The `<prosody>` attributes SSML defines that the voices here cannot honour: named so that
/// their error says "not supported" rather than "unknown".
const UNSUPPORTED_PROSODY: &[&str] = &["pitch", "volume", "contour", "range", "duration"];

const KNOWN_ELEMENTS: &str =
    "`<speak>`, `<p>`, `<s>`, `<break>`, `<prosody>`, `<lang>`, `<say-as>`, `<phoneme>` and `<sub>`";

const KNOWN_ENTITIES: &str =
    "`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;` and character references such as `&#233;`";

struct Parser<'a> {
    input: &'a str,
    reader: Reader<&'a [u8]>,
    root: Root,
    /// The elements open inside the root, outermost first.
    open: Vec<Open>,
    /// Text read since the last tag, not yet made a piece. Kept as written fragments so that
    /// the piece's source can still be found in the input once entities are decoded.
    run: Vec<Fragment<'a>>,
    pieces: Vec<Piece>,
    /// An XML declaration may only open the document.
    declaration_allowed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    NotYet,
    Open,
    Closed,
}

struct Open {
    element: Element,
    /// Where the start tag begins: errors about the element as a whole point there.
    tag_start: usize,
    /// Where its content begins: the source of a `<sub>` or `<phoneme>` with no text.
    content_start: usize,
    rate: f32,
    language: Option<String>,
}

enum Element {
    Speak,
    Paragraph,
    Sentence,
    Break,
    Prosody,
    Lang,
    /// `<say-as>`, `<phoneme>` or `<sub>`: text only, read as this says.
    Reading(Reading),
}

enum Reading {
    SayAs {
        interpret_as: InterpretAs,
        format: Option<String>,
    },
    Phoneme(String),
    Sub(String),
}

impl Element {
    fn tag(&self) -> &'static str {
        match self {
            Element::Speak => "speak",
            Element::Paragraph => "p",
            Element::Sentence => "s",
            Element::Break => "break",
            Element::Prosody => "prosody",
            Element::Lang => "lang",
            Element::Reading(Reading::SayAs { .. }) => "say-as",
            Element::Reading(Reading::Phoneme(_)) => "phoneme",
            Element::Reading(Reading::Sub(_)) => "sub",
        }
    }
}

enum Fragment<'a> {
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

/// One attribute of a start tag, its value decoded.
struct Attribute {
    name: String,
    value: String,
    /// Where its name is written: errors about it point there.
    at: usize,
}

fn find<'l>(attributes: &'l [Attribute], name: &str) -> Option<&'l Attribute> {
    attributes.iter().find(|attribute| attribute.name == name)
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Parser {
            input,
            reader: Reader::from_str(input),
            root: Root::NotYet,
            open: Vec::new(),
            run: Vec::new(),
            pieces: Vec::new(),
            declaration_allowed: true,
        }
    }

    fn read_document(mut self) -> Result<Vec<Piece>, SsmlError> {
        loop {
            let start = position(&self.reader, self.input);
            let event = match self.reader.read_event() {
                Ok(event) => event,
                Err(error) => return Err(self.xml_error(&error)),
            };
            let end = position(&self.reader, self.input);
            let leading_whitespace = matches!(&event, Event::Text(text) if is_blank(text));
            match event {
                Event::Decl(_) if !self.declaration_allowed => {
                    return Err(self.error(
                        start,
                        "an XML declaration (`<?xml …?>`) can only open the document",
                    ));
                }
                Event::Decl(_) | Event::Comment(_) | Event::PI(_) => {}
                Event::DocType(_) => {
                    return Err(self.error(
                        start,
                        "a DOCTYPE is not supported in SSML input: start the document with `<speak>`",
                    ));
                }
                Event::Start(tag) => self.open_element(&tag, start, end)?,
                Event::Empty(tag) => {
                    self.open_element(&tag, start, end)?;
                    self.close_element(start)?;
                }
                Event::End(_) => self.close_element(start)?,
                Event::Text(text) => self.add_text(text.into_inner(), start)?,
                Event::CData(cdata) => {
                    self.add_text(cdata.into_inner(), start + "<![CDATA[".len())?;
                }
                Event::GeneralRef(reference) => self.add_reference(&reference, start..end)?,
                Event::Eof => return self.finish(),
            }
            if !leading_whitespace {
                self.declaration_allowed = false;
            }
        }
    }

    fn finish(self) -> Result<Vec<Piece>, SsmlError> {
        match (self.root, self.open.last()) {
            (Root::Closed, _) => Ok(self.pieces),
            (Root::Open, Some(innermost)) => {
                let tag = innermost.element.tag();
                Err(self.error(
                    innermost.tag_start,
                    format!("`<{tag}>` is never closed: the document ends before its `</{tag}>`"),
                ))
            }
            _ => Err(self.error(
                self.input.len(),
                "there is no `<speak>` element: an SSML document is `<speak>`…`</speak>`",
            )),
        }
    }

    /// Text as written (a text node, or a CDATA section's content) that starts at byte `at`.
    fn add_text(&mut self, text: Cow<'a, str>, at: usize) -> Result<(), SsmlError> {
        if self.root != Root::Open {
            let stray = text.char_indices().find(|(_, c)| !c.is_whitespace());
            return match stray {
                Some((index, _)) => Err(self.text_outside_root(at + index)),
                None => Ok(()),
            };
        }
        if !is_blank(&text) {
            self.refuse_text_in_break(at)?;
        }
        self.run.push(Fragment::Written { text, at });
        Ok(())
    }

    fn add_reference(
        &mut self,
        reference: &BytesRef<'_>,
        source: Range<usize>,
    ) -> Result<(), SsmlError> {
        if self.root != Root::Open {
            return Err(self.text_outside_root(source.start));
        }
        let text =
            decode_reference(reference).map_err(|message| self.error(source.start, message))?;
        self.refuse_text_in_break(source.start)?;
        self.run.push(Fragment::Reference { text, source });
        Ok(())
    }

    fn refuse_text_in_break(&self, at: usize) -> Result<(), SsmlError> {
        match self.open.last() {
            Some(open) if matches!(open.element, Element::Break) => Err(self.error(
                at,
                "`<break>` cannot contain text: write it as `<break time=\"500ms\"/>`",
            )),
            _ => Ok(()),
        }
    }

    fn text_outside_root(&self, at: usize) -> SsmlError {
        let message = if self.root == Root::NotYet {
            "text before `<speak>`: an SSML document must start with `<speak>`"
        } else {
            "text after `</speak>`: everything to be spoken must be inside `<speak>`…`</speak>`"
        };
        self.error(at, message)
    }

    fn open_element(
        &mut self,
        tag: &BytesStart<'_>,
        start: usize,
        end: usize,
    ) -> Result<(), SsmlError> {
        let name = tag.name().as_ref().to_owned();
        match self.root {
            Root::NotYet if name != "speak" => {
                return Err(self.error(
                    start,
                    format!("an SSML document must start with `<speak>`, not `<{name}>`"),
                ));
            }
            Root::Closed => {
                return Err(self.error(
                    start,
                    format!(
                        "a document has one root element, but `<{name}>` comes after `</speak>`"
                    ),
                ));
            }
            _ => {}
        }
        if let Some(parent) = self.open.last() {
            let refusal = match parent.element {
                Element::Break => Some(format!("`<break>` must be empty, but contains `<{name}>`")),
                Element::Reading(_) => Some(format!(
                    "`<{}>` can only contain text, not `<{name}>`",
                    parent.element.tag()
                )),
                _ => None,
            };
            if let Some(message) = refusal {
                return Err(self.error(start, message));
            }
        }
        let attributes = self.attributes(tag, start)?;
        let (parent_rate, parent_language) = match self.open.last() {
            Some(parent) => (parent.rate, parent.language.clone()),
            None => (1.0, None),
        };
        self.flush_run(parent_rate, &parent_language);

        let mut rate = parent_rate;
        let mut language = parent_language;
        let element = match name.as_str() {
            "speak" => {
                if self.root == Root::Open {
                    return Err(self.error(
                        start,
                        "`<speak>` is the root element and cannot be nested in itself",
                    ));
                }
                self.root = Root::Open;
                language = self.language(&attributes, language)?;
                Element::Speak
            }
            "p" => {
                self.allow_only(&attributes, "p", &["xml:lang"])?;
                if self.inside(|element| matches!(element, Element::Paragraph | Element::Sentence))
                {
                    return Err(self.error(start, "`<p>` cannot be inside a `<p>` or an `<s>`"));
                }
                language = self.language(&attributes, language)?;
                self.boundary(true);
                Element::Paragraph
            }
            "s" => {
                self.allow_only(&attributes, "s", &["xml:lang"])?;
                if self.inside(|element| matches!(element, Element::Sentence)) {
                    return Err(self.error(start, "`<s>` cannot be inside another `<s>`"));
                }
                language = self.language(&attributes, language)?;
                self.boundary(false);
                Element::Sentence
            }
            "break" => {
                let pause = self.break_length(&attributes)?;
                self.pieces.push(Piece::Break(pause));
                Element::Break
            }
            "prosody" => {
                rate = self.prosody_rate(&attributes, parent_rate, start)?;
                Element::Prosody
            }
            "lang" => {
                self.allow_only(&attributes, "lang", &["xml:lang"])?;
                if find(&attributes, "xml:lang").is_none() {
                    return Err(self.error(
                        start,
                        "`<lang>` needs an `xml:lang` attribute naming the language, e.g. `xml:lang=\"de-DE\"`",
                    ));
                }
                language = self.language(&attributes, language)?;
                Element::Lang
            }
            "say-as" => Element::Reading(self.say_as(&attributes, start)?),
            "phoneme" => Element::Reading(self.phoneme(&attributes, start)?),
            "sub" => Element::Reading(self.sub(&attributes, start)?),
            _ => {
                return Err(self.error(
                    start,
                    format!(
                        "`<{name}>` is not supported: the elements understood are {KNOWN_ELEMENTS}"
                    ),
                ));
            }
        };
        self.open.push(Open {
            element,
            tag_start: start,
            content_start: end,
            rate,
            language,
        });
        Ok(())
    }

    fn close_element(&mut self, start: usize) -> Result<(), SsmlError> {
        // quick-xml has already matched the end tag against the start tag.
        let Some(open) = self.open.pop() else {
            return Err(self.error(start, "this closing tag closes no open element"));
        };
        let Open {
            element,
            content_start,
            rate,
            language,
            ..
        } = open;
        match element {
            Element::Reading(reading) => {
                let (written, source) = self
                    .take_run()
                    .unwrap_or_else(|| (String::new(), content_start..content_start));
                let (text, read_as) = match reading {
                    Reading::Sub(alias) => (alias, ReadAs::Alias),
                    Reading::Phoneme(ipa) => (written, ReadAs::Phonemes(ipa)),
                    Reading::SayAs {
                        interpret_as,
                        format,
                    } => (
                        written,
                        ReadAs::SayAs {
                            interpret_as,
                            format,
                        },
                    ),
                };
                // A phoneme with no text still has its IPA to say; a sub or say-as with
                // nothing to read says nothing.
                if !text.is_empty() || matches!(read_as, ReadAs::Phonemes(_)) {
                    self.pieces.push(Piece::Text(Span {
                        text,
                        source,
                        read_as,
                        rate,
                        language,
                    }));
                }
            }
            element => {
                self.flush_run(rate, &language);
                match element {
                    Element::Paragraph => self.boundary(true),
                    Element::Sentence => self.boundary(false),
                    Element::Speak => self.root = Root::Closed,
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn inside(&self, is: impl Fn(&Element) -> bool) -> bool {
        self.open.iter().any(|open| is(&open.element))
    }

    fn boundary(&mut self, paragraph: bool) {
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
    fn flush_run(&mut self, rate: f32, language: &Option<String>) {
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
    fn take_run(&mut self) -> Option<(String, Range<usize>)> {
        let run = std::mem::take(&mut self.run);
        let text = collapse_whitespace(run.iter().map(Fragment::text));
        if text.is_empty() {
            return None;
        }
        let start = run.iter().find_map(Fragment::first_word_start)?;
        let end = run.iter().rev().find_map(Fragment::last_word_end)?;
        Some((text, start..end))
    }

    fn attributes(
        &self,
        tag: &BytesStart<'_>,
        tag_start: usize,
    ) -> Result<Vec<Attribute>, SsmlError> {
        let mut attributes = Vec::new();
        for attribute in tag.attributes() {
            let attribute = attribute.map_err(|error| self.attribute_error(&error, tag_start))?;
            let key = attribute.key.as_ref();
            let at = offset_within(self.input, key).unwrap_or(tag_start);
            let name = key.to_owned();
            let value = attribute
                .normalized_value(XmlVersion::Implicit1_0)
                .map_err(|_| {
                    self.error(
                        at,
                        format!(
                            "the value of `{name}` has a bare `&` or an unknown entity: write `&` as `&amp;`; the entities understood are {KNOWN_ENTITIES}"
                        ),
                    )
                })?
                .into_owned();
            attributes.push(Attribute { name, value, at });
        }
        Ok(attributes)
    }

    /// Refuses any attribute of `element` not in `allowed`.
    fn allow_only(
        &self,
        attributes: &[Attribute],
        element: &str,
        allowed: &[&str],
    ) -> Result<(), SsmlError> {
        let Some(stray) = attributes
            .iter()
            .find(|attribute| !allowed.contains(&attribute.name.as_str()))
        else {
            return Ok(());
        };
        let name = &stray.name;
        let message = if element == "prosody" && UNSUPPORTED_PROSODY.contains(&name.as_str()) {
            format!("`<prosody {name}>` is not supported: only `rate` is")
        } else {
            format!(
                "`<{element}>` has no attribute `{name}`: it takes {}",
                list_of(allowed)
            )
        };
        Err(self.error(stray.at, message))
    }

    /// The `xml:lang` of an element, or the language it inherits when it has none.
    fn language(
        &self,
        attributes: &[Attribute],
        inherited: Option<String>,
    ) -> Result<Option<String>, SsmlError> {
        let Some(attribute) = find(attributes, "xml:lang") else {
            return Ok(inherited);
        };
        let tag = attribute.value.trim();
        if !is_language_tag(tag) {
            return Err(self.error(
                attribute.at,
                format!(
                    "`xml:lang=\"{}\"` is not a language tag such as `en-US` or `de`",
                    attribute.value
                ),
            ));
        }
        Ok(Some(tag.to_owned()))
    }

    fn break_length(&self, attributes: &[Attribute]) -> Result<Duration, SsmlError> {
        self.allow_only(attributes, "break", &["time", "strength"])?;
        // SSML: when both are given, `time` wins.
        if let Some(time) = find(attributes, "time") {
            return break_time(&time.value).map_err(|message| self.error(time.at, message));
        }
        let Some(strength) = find(attributes, "strength") else {
            return Ok(Duration::from_millis(400));
        };
        let millis = match strength.value.trim() {
            "none" => 0,
            "x-weak" => 100,
            "weak" => 200,
            "medium" => 400,
            "strong" => 700,
            "x-strong" => 1000,
            other => {
                return Err(self.error(
                    strength.at,
                    format!(
                        "break strength `{other}` is not one of `none`, `x-weak`, `weak`, `medium`, `strong` and `x-strong`"
                    ),
                ));
            }
        };
        Ok(Duration::from_millis(millis))
    }

    /// The speed factor inside a `<prosody>`: its own rate times the rate it is nested in.
    fn prosody_rate(
        &self,
        attributes: &[Attribute],
        parent_rate: f32,
        start: usize,
    ) -> Result<f32, SsmlError> {
        self.allow_only(attributes, "prosody", &["rate"])?;
        let Some(rate) = find(attributes, "rate") else {
            return Err(self.error(
                start,
                "`<prosody>` needs a `rate` attribute, e.g. `rate=\"slow\"` (pitch and volume are not supported)",
            ));
        };
        let factor = speed_factor(&rate.value).map_err(|message| self.error(rate.at, message))?;
        let combined = parent_rate * factor;
        if !RATE_RANGE.contains(&combined) {
            return Err(self.error(
                rate.at,
                format!(
                    "nested `<prosody>` rates multiply to {combined}, outside the range of {} to {} times normal speed",
                    RATE_RANGE.start(),
                    RATE_RANGE.end()
                ),
            ));
        }
        Ok(combined)
    }

    fn say_as(&self, attributes: &[Attribute], start: usize) -> Result<Reading, SsmlError> {
        self.allow_only(attributes, "say-as", &["interpret-as", "format"])?;
        let Some(interpret_as) = find(attributes, "interpret-as") else {
            return Err(self.error(
                start,
                "`<say-as>` needs an `interpret-as` attribute, e.g. `interpret-as=\"date\"`",
            ));
        };
        let name = interpret_as.value.trim();
        let spelled_out = (name == "spell-out").then_some(InterpretAs::Characters);
        let Some(how) = InterpretAs::parse(name).or(spelled_out) else {
            return Err(self.error(
                interpret_as.at,
                format!(
                    "`interpret-as=\"{name}\"` is not supported: use `characters`, `spell-out`, `cardinal`, `ordinal`, `digits`, `date`, `time` or `telephone`"
                ),
            ));
        };
        let format = find(attributes, "format")
            .map(|format| format.value.trim().to_owned())
            .filter(|format| !format.is_empty());
        Ok(Reading::SayAs {
            interpret_as: how,
            format,
        })
    }

    fn phoneme(&self, attributes: &[Attribute], start: usize) -> Result<Reading, SsmlError> {
        self.allow_only(attributes, "phoneme", &["alphabet", "ph"])?;
        if let Some(alphabet) = find(attributes, "alphabet") {
            if alphabet.value.trim() != "ipa" {
                return Err(self.error(
                    alphabet.at,
                    format!(
                        "phoneme alphabet `{}` is not supported: only `ipa` is",
                        alphabet.value
                    ),
                ));
            }
        }
        let ipa = find(attributes, "ph")
            .map(|ph| ph.value.trim())
            .unwrap_or_default();
        if ipa.is_empty() {
            return Err(self.error(
                start,
                "`<phoneme>` needs a `ph` attribute with the IPA to say, e.g. `ph=\"kˈOkəɹO\"`",
            ));
        }
        Ok(Reading::Phoneme(ipa.to_owned()))
    }

    fn sub(&self, attributes: &[Attribute], start: usize) -> Result<Reading, SsmlError> {
        self.allow_only(attributes, "sub", &["alias"])?;
        let Some(alias) = find(attributes, "alias") else {
            return Err(self.error(
                start,
                "`<sub>` needs an `alias` attribute with the text to say instead, e.g. `alias=\"World Wide Web\"`",
            ));
        };
        Ok(Reading::Sub(collapse_whitespace(
            [alias.value.as_str()].into_iter(),
        )))
    }

    fn xml_error(&self, error: &quick_xml::Error) -> SsmlError {
        use quick_xml::errors::{IllFormedError, SyntaxError};
        let at = usize::try_from(self.reader.error_position()).unwrap_or(usize::MAX);
        let message = match error {
            quick_xml::Error::Syntax(syntax) => match syntax {
                SyntaxError::UnclosedTag => "this tag is not closed: its `>` is missing".to_owned(),
                SyntaxError::UnclosedSingleQuotedAttributeValue => {
                    "an attribute value in this tag is not closed: its closing `'` is missing"
                        .to_owned()
                }
                SyntaxError::UnclosedDoubleQuotedAttributeValue => {
                    "an attribute value in this tag is not closed: its closing `\"` is missing"
                        .to_owned()
                }
                SyntaxError::UnclosedComment => {
                    "this comment is not closed: `-->` is missing".to_owned()
                }
                SyntaxError::UnclosedCData => {
                    "this CDATA section is not closed: `]]>` is missing".to_owned()
                }
                SyntaxError::UnclosedPI | SyntaxError::UnclosedXmlDecl => {
                    "this `<?…` is not closed: `?>` is missing".to_owned()
                }
                SyntaxError::UnclosedDoctype => {
                    "this DOCTYPE is not closed: `>` is missing".to_owned()
                }
                SyntaxError::InvalidBangMarkup => {
                    "`<!` must start a comment (`<!--`) or a CDATA section (`<![CDATA[`)".to_owned()
                }
            },
            quick_xml::Error::IllFormed(IllFormedError::MismatchedEndTag { expected, found }) => {
                format!(
                    "`</{found}>` does not close the open `<{expected}>`: expected `</{expected}>`"
                )
            }
            quick_xml::Error::IllFormed(IllFormedError::UnmatchedEndTag(tag)) => {
                format!("`</{tag}>` closes an element that is not open")
            }
            quick_xml::Error::IllFormed(IllFormedError::UnclosedReference) => {
                "a bare `&` (or an entity missing its `;`): write `&` as `&amp;`".to_owned()
            }
            other => format!("malformed XML: {other}"),
        };
        self.error(at, message)
    }

    fn attribute_error(&self, error: &AttrError, tag_start: usize) -> SsmlError {
        // Attribute positions count from the byte after the tag's `<`.
        let (within_tag, message) = match error {
            AttrError::ExpectedEq(at) => (
                *at,
                "an attribute name must be followed by `=` and a quoted value",
            ),
            AttrError::ExpectedValue(at) => (*at, "`=` must be followed by a quoted value"),
            AttrError::UnquotedValue(at) => (
                *at,
                "attribute values must be quoted, e.g. `time=\"500ms\"`",
            ),
            AttrError::ExpectedQuote(at, _) => {
                (*at, "an attribute value is missing its closing quote")
            }
            AttrError::Duplicated(at, _) => (*at, "this attribute is given twice"),
        };
        self.error(
            tag_start.saturating_add(1).saturating_add(within_tag),
            message,
        )
    }

    fn error(&self, offset: usize, message: impl Into<String>) -> SsmlError {
        SsmlError::at(self.input, offset, message)
    }
}

/// How far the reader has read, as a byte offset into `input`.
fn position(reader: &Reader<&[u8]>, input: &str) -> usize {
    usize::try_from(reader.buffer_position())
        .unwrap_or(usize::MAX)
        .min(input.len())
}

/// Where `part`, a slice of `input`, begins in it. quick-xml hands attributes back as slices of
/// the input but without their positions, and errors about them should point at them.
fn offset_within(input: &str, part: &str) -> Option<usize> {
    let offset = (part.as_ptr() as usize).checked_sub(input.as_ptr() as usize)?;
    (offset.checked_add(part.len())? <= input.len()).then_some(offset)
}

fn line_and_column(input: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for (at, c) in input.char_indices() {
        if at >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

fn starts_with_speak_tag(text: &str) -> bool {
    text.strip_prefix("<speak").is_some_and(|rest| {
        rest.chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '>' || c == '/')
    })
}

fn is_blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

fn collapse_whitespace<'s>(parts: impl Iterator<Item = &'s str>) -> String {
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

fn decode_reference(reference: &BytesRef<'_>) -> Result<Cow<'static, str>, String> {
    let name: &str = reference;
    match reference.resolve_char_ref() {
        Ok(Some(c)) if !c.is_control() || c.is_whitespace() => Ok(Cow::Owned(c.to_string())),
        Ok(Some(_)) | Err(_) => Err(format!("`&{name};` is not a character that can be read")),
        Ok(None) => resolve_xml_entity(name).map(Cow::Borrowed).ok_or_else(|| {
            format!("unknown entity `&{name};`: the entities understood are {KNOWN_ENTITIES}")
        }),
    }
}

/// A `<break time>`: a number of seconds (`1.5s`) or milliseconds (`500ms`), up to [`MAX_BREAK`].
fn break_time(value: &str) -> Result<Duration, String> {
    let written = value.trim();
    let not_a_time =
        || format!("break time `{value}` is not a duration: write it like `500ms` or `1.5s`");
    let (number, seconds_per_unit) = if let Some(number) = written.strip_suffix("ms") {
        (number, 0.001)
    } else if let Some(number) = written.strip_suffix('s') {
        (number, 1.0)
    } else {
        return Err(not_a_time());
    };
    let seconds = unsigned_decimal(number.trim()).ok_or_else(not_a_time)? * seconds_per_unit;
    if seconds > MAX_BREAK.as_secs_f64() {
        return Err(format!(
            "break time `{value}` is longer than the limit of {}s",
            MAX_BREAK.as_secs()
        ));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| not_a_time())
}

/// A `<prosody rate>` as a speed factor: a keyword, a percentage of normal speed, or the factor.
fn speed_factor(value: &str) -> Result<f32, String> {
    let written = value.trim();
    let factor = match written {
        "x-slow" => 0.5,
        "slow" => 0.75,
        "medium" | "default" => 1.0,
        "fast" => 1.25,
        "x-fast" => 1.5,
        _ => {
            let number = match written.strip_suffix('%') {
                Some(percent) => unsigned_decimal(percent.trim()).map(|percent| percent / 100.0),
                None => unsigned_decimal(written),
            };
            let Some(number) = number else {
                return Err(format!(
                    "rate `{value}` is not understood: use `x-slow`, `slow`, `medium`, `fast`, `x-fast`, a percentage of normal speed such as `80%`, or a factor such as `1.2`"
                ));
            };
            number as f32
        }
    };
    if !RATE_RANGE.contains(&factor) {
        return Err(format!(
            "rate `{value}` is out of range: the speed must be {} to {} times normal ({}% to {}%)",
            RATE_RANGE.start(),
            RATE_RANGE.end(),
            RATE_RANGE.start() * 100.0,
            RATE_RANGE.end() * 100.0
        ));
    }
    Ok(factor)
}

/// A plain decimal number such as `500` or `1.5`: no sign, exponent, or `inf`, which
/// `str::parse` would also take.
fn unsigned_decimal(text: &str) -> Option<f64> {
    let mut digits = 0;
    let mut points = 0;
    for c in text.chars() {
        match c {
            '0'..='9' => digits += 1,
            '.' => points += 1,
            _ => return None,
        }
    }
    if digits == 0 || points > 1 {
        return None;
    }
    text.parse().ok()
}

fn list_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    match quoted.split_last() {
        None => "no attributes".to_owned(),
        Some((only, [])) => format!("only {only}"),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(input: &str) -> Vec<Piece> {
        parse(input).unwrap_or_else(|error| panic!("{input:?} should parse: {error}"))
    }

    fn spans(input: &str) -> Vec<Span> {
        pieces(input)
            .into_iter()
            .filter_map(|piece| match piece {
                Piece::Text(span) => Some(span),
                _ => None,
            })
            .collect()
    }

    fn only_span(input: &str) -> Span {
        let mut all = spans(input);
        assert_eq!(all.len(), 1, "{input:?} should give one span: {all:?}");
        all.remove(0)
    }

    /// What `span.source` covers of `input`.
    fn written<'i>(input: &'i str, span: &Span) -> &'i str {
        input
            .get(span.source.clone())
            .unwrap_or_else(|| panic!("{:?} is not a range of {input:?}", span.source))
    }

    fn error(input: &str) -> SsmlError {
        match parse(input) {
            Ok(pieces) => panic!("{input:?} should be refused, but gave {pieces:?}"),
            Err(error) => error,
        }
    }

    fn plain(input: &str, text: &str, as_written: &str) -> Piece {
        let start = input
            .find(as_written)
            .unwrap_or_else(|| panic!("{as_written:?} is not in {input:?}"));
        Piece::Text(Span {
            text: text.to_owned(),
            source: start..start + as_written.len(),
            read_as: ReadAs::Plain,
            rate: 1.0,
            language: None,
        })
    }

    #[test]
    fn plain_text_is_one_span_with_whitespace_collapsed_and_trimmed() {
        let input = "<speak>\n  Hello,\n\t world!  \n</speak>";
        assert_eq!(
            pieces(input),
            vec![plain(input, "Hello, world!", "Hello,\n\t world!")]
        );
    }

    #[test]
    fn an_empty_document_says_nothing() {
        assert_eq!(pieces("<speak/>"), vec![]);
        assert_eq!(pieces("<speak>  \n </speak>"), vec![]);
    }

    #[test]
    fn declaration_leading_whitespace_and_speak_attributes_are_accepted() {
        let input = "\n <?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<speak version=\"1.1\" \
                     xmlns=\"http://www.w3.org/2001/10/synthesis\" xml:lang=\"en-GB\">Hi</speak>\n";
        let span = only_span(input);
        assert_eq!(span.text, "Hi");
        assert_eq!(span.language.as_deref(), Some("en-GB"));
        assert_eq!(written(input, &span), "Hi");
    }

    #[test]
    fn break_times_and_strengths() {
        let cases: &[(&str, u64)] = &[
            (r#"time="500ms""#, 500),
            (r#"time="1.5s""#, 1500),
            (r#"time="0s""#, 0),
            (r#"time="0ms""#, 0),
            (r#"time=" 2s ""#, 2000),
            (r#"time="10s""#, 10_000),
            (r#"time="10000ms""#, 10_000),
            (r#"time=".25s""#, 250),
            (r#"strength="none""#, 0),
            (r#"strength="x-weak""#, 100),
            (r#"strength="weak""#, 200),
            (r#"strength="medium""#, 400),
            (r#"strength="strong""#, 700),
            (r#"strength="x-strong""#, 1000),
            ("", 400),
            (r#"strength="x-strong" time="50ms""#, 50),
        ];
        for &(attributes, millis) in cases {
            let input = format!("<speak>before<break {attributes}/>after</speak>");
            assert_eq!(
                pieces(&input),
                vec![
                    plain(&input, "before", "before"),
                    Piece::Break(Duration::from_millis(millis)),
                    plain(&input, "after", "after"),
                ],
                "{attributes}"
            );
        }
    }

    #[test]
    fn a_break_may_be_written_with_a_closing_tag() {
        assert_eq!(
            pieces(r#"<speak><break time="1s"> </break></speak>"#),
            vec![Piece::Break(Duration::from_secs(1))]
        );
    }

    #[test]
    fn bad_breaks_are_refused() {
        let cases: &[(&str, &str)] = &[
            (r#"<break time="10.5s"/>"#, "limit of 10s"),
            (r#"<break time="10001ms"/>"#, "limit of 10s"),
            (r#"<break time="5000"/>"#, "not a duration"),
            (r#"<break time="-1s"/>"#, "not a duration"),
            (r#"<break time="1e3ms"/>"#, "not a duration"),
            (r#"<break time="infs"/>"#, "not a duration"),
            (r#"<break time="1.2.3s"/>"#, "not a duration"),
            (r#"<break time="ms"/>"#, "not a duration"),
            (r#"<break strength="loud"/>"#, "break strength `loud`"),
            (r#"<break length="1s"/>"#, "has no attribute `length`"),
            ("<break>pause</break>", "cannot contain text"),
            ("<break>&amp;</break>", "cannot contain text"),
            ("<break><s>x</s></break>", "must be empty"),
        ];
        for &(markup, expected) in cases {
            let error = error(&format!("<speak>{markup}</speak>"));
            assert!(error.message.contains(expected), "{markup}: {error}");
        }
    }

    #[test]
    fn sentences_and_paragraphs_end_with_boundaries() {
        let input = "<speak><p><s>One.</s><s>Two.</s></p><p>Three.</p></speak>";
        assert_eq!(
            pieces(input),
            vec![
                plain(input, "One.", "One."),
                Piece::Boundary { paragraph: false },
                plain(input, "Two.", "Two."),
                Piece::Boundary { paragraph: true },
                plain(input, "Three.", "Three."),
                Piece::Boundary { paragraph: true },
            ]
        );
    }

    #[test]
    fn text_before_a_sentence_is_ended_and_leading_boundaries_dropped() {
        let input = "<speak><p/>Intro <s>One.</s> outro</speak>";
        assert_eq!(
            pieces(input),
            vec![
                plain(input, "Intro", "Intro"),
                Piece::Boundary { paragraph: false },
                plain(input, "One.", "One."),
                Piece::Boundary { paragraph: false },
                plain(input, "outro", "outro"),
            ]
        );
    }

    #[test]
    fn whitespace_between_elements_makes_no_pieces() {
        let input =
            "<speak>\n  <p>\n    <s> One </s>\n    <s>Two</s>\n  </p>\n  <break/>\n</speak>";
        assert_eq!(
            pieces(input),
            vec![
                plain(input, "One", "One"),
                Piece::Boundary { paragraph: false },
                plain(input, "Two", "Two"),
                Piece::Boundary { paragraph: true },
                Piece::Break(Duration::from_millis(400)),
            ]
        );
    }

    #[test]
    fn the_innermost_language_wins() {
        let input = r#"<speak xml:lang="en-US">Hi <lang xml:lang="de-DE">Hallo <lang xml:lang="fr">Salut</lang> wieder</lang> back <p xml:lang="es">Hola</p><s xml:lang="it">Ciao</s></speak>"#;
        let found: Vec<(String, Option<String>)> = spans(input)
            .into_iter()
            .map(|span| (span.text, span.language))
            .collect();
        let expected = [
            ("Hi", "en-US"),
            ("Hallo", "de-DE"),
            ("Salut", "fr"),
            ("wieder", "de-DE"),
            ("back", "en-US"),
            ("Hola", "es"),
            ("Ciao", "it"),
        ]
        .map(|(text, language)| (text.to_owned(), Some(language.to_owned())));
        assert_eq!(found, expected);
        assert_eq!(only_span("<speak>Hi</speak>").language, None);
    }

    #[test]
    fn bad_languages_are_refused() {
        let cases: &[(&str, &str)] = &[
            ("<lang>x</lang>", "needs an `xml:lang`"),
            (r#"<lang xml:lang="">x</lang>"#, "not a language tag"),
            (r#"<lang xml:lang="en US">x</lang>"#, "not a language tag"),
            (r#"<lang lang="de">x</lang>"#, "has no attribute `lang`"),
            (r#"<s xml:lang="de" id="1">x</s>"#, "has no attribute `id`"),
        ];
        for &(markup, expected) in cases {
            let error = error(&format!("<speak>{markup}</speak>"));
            assert!(error.message.contains(expected), "{markup}: {error}");
        }
    }

    #[test]
    fn prosody_rates() {
        let cases: &[(&str, f32)] = &[
            ("x-slow", 0.5),
            ("slow", 0.75),
            ("medium", 1.0),
            ("default", 1.0),
            ("fast", 1.25),
            ("x-fast", 1.5),
            ("80%", 0.8),
            ("150%", 1.5),
            ("25%", 0.25),
            ("400%", 4.0),
            ("1.2", 1.2),
            ("0.25", 0.25),
            ("4", 4.0),
            (" 2 ", 2.0),
        ];
        for &(rate, factor) in cases {
            let input = format!(r#"<speak><prosody rate="{rate}">word</prosody></speak>"#);
            assert_eq!(only_span(&input).rate, factor, "{rate}");
        }
    }

    #[test]
    fn nested_prosody_multiplies_and_ends_with_its_element() {
        let input = r#"<speak>a <prosody rate="x-fast">b <prosody rate="fast">c</prosody> d</prosody> e</speak>"#;
        let rates: Vec<(String, f32)> = spans(input)
            .into_iter()
            .map(|span| (span.text, span.rate))
            .collect();
        let expected = [("a", 1.0), ("b", 1.5), ("c", 1.875), ("d", 1.5), ("e", 1.0)]
            .map(|(text, rate)| (text.to_owned(), rate));
        assert_eq!(rates, expected);
    }

    #[test]
    fn bad_prosody_is_refused() {
        let cases: &[(&str, &str)] = &[
            (r#"<prosody rate="5">x</prosody>"#, "out of range"),
            (r#"<prosody rate="0.2">x</prosody>"#, "out of range"),
            (r#"<prosody rate="10%">x</prosody>"#, "out of range"),
            (r#"<prosody rate="0">x</prosody>"#, "out of range"),
            (r#"<prosody rate="fast-ish">x</prosody>"#, "not understood"),
            (r#"<prosody rate="+10%">x</prosody>"#, "not understood"),
            (r#"<prosody rate="-1">x</prosody>"#, "not understood"),
            (r#"<prosody rate="">x</prosody>"#, "not understood"),
            (
                r#"<prosody rate="4"><prosody rate="x-fast">x</prosody></prosody>"#,
                "multiply to 6",
            ),
            (
                r#"<prosody rate="fast" pitch="high">x</prosody>"#,
                "`<prosody pitch>` is not supported",
            ),
            (
                r#"<prosody volume="loud">x</prosody>"#,
                "`<prosody volume>` is not supported",
            ),
            (
                r#"<prosody speed="2">x</prosody>"#,
                "has no attribute `speed`",
            ),
            ("<prosody>x</prosody>", "needs a `rate`"),
        ];
        for &(markup, expected) in cases {
            let error = error(&format!("<speak>{markup}</speak>"));
            assert!(error.message.contains(expected), "{markup}: {error}");
        }
    }

    #[test]
    fn say_as_every_interpretation() {
        let cases: &[(&str, InterpretAs)] = &[
            ("characters", InterpretAs::Characters),
            ("spell-out", InterpretAs::Characters),
            ("cardinal", InterpretAs::Cardinal),
            ("ordinal", InterpretAs::Ordinal),
            ("digits", InterpretAs::Digits),
            ("date", InterpretAs::Date),
            ("time", InterpretAs::Time),
            ("telephone", InterpretAs::Telephone),
        ];
        for &(value, interpret_as) in cases {
            let input =
                format!(r#"<speak>Say <say-as interpret-as="{value}"> 12 3 </say-as>.</speak>"#);
            let all = spans(&input);
            assert_eq!(all.len(), 3, "{value}: {all:?}");
            assert_eq!(all[1].text, "12 3");
            assert_eq!(written(&input, &all[1]), "12 3");
            assert_eq!(
                all[1].read_as,
                ReadAs::SayAs {
                    interpret_as,
                    format: None
                },
                "{value}"
            );
        }
    }

    #[test]
    fn say_as_format_is_passed_on() {
        let input =
            r#"<speak><say-as interpret-as="date" format="dmy">25/12/2024</say-as></speak>"#;
        let span = only_span(input);
        assert_eq!(
            span.read_as,
            ReadAs::SayAs {
                interpret_as: InterpretAs::Date,
                format: Some("dmy".to_owned())
            }
        );
        assert_eq!(written(input, &span), "25/12/2024");
        let input = r#"<speak><say-as interpret-as="date" format="">1/2/2024</say-as></speak>"#;
        assert!(matches!(
            only_span(input).read_as,
            ReadAs::SayAs { format: None, .. }
        ));
    }

    #[test]
    fn say_as_inside_prosody_and_lang_keeps_their_settings() {
        let input = r#"<speak><lang xml:lang="de-DE"><prosody rate="slow">Am <say-as interpret-as="ordinal">3.</say-as> Mai</prosody></lang></speak>"#;
        let all = spans(input);
        let ordinal = &all[1];
        assert_eq!(ordinal.text, "3.");
        assert_eq!(ordinal.rate, 0.75);
        assert_eq!(ordinal.language.as_deref(), Some("de-DE"));
        assert_eq!(written(input, ordinal), "3.");
        assert!(all
            .iter()
            .all(|span| span.rate == 0.75 && span.language.as_deref() == Some("de-DE")));
    }

    #[test]
    fn phoneme_reads_its_ipa() {
        for alphabet in [r#" alphabet="ipa""#, ""] {
            let input =
                format!(r#"<speak><phoneme{alphabet} ph="kˈOkəɹO">Kokoro</phoneme></speak>"#);
            let span = only_span(&input);
            assert_eq!(span.text, "Kokoro");
            assert_eq!(span.read_as, ReadAs::Phonemes("kˈOkəɹO".to_owned()));
            assert_eq!(written(&input, &span), "Kokoro");
        }
    }

    #[test]
    fn sub_reads_its_alias_for_the_written_text() {
        let input = r#"<speak>The <sub alias="World  Wide
            Web"> WWW </sub> is big.</speak>"#;
        let all = spans(input);
        assert_eq!(all[1].text, "World Wide Web");
        assert_eq!(all[1].read_as, ReadAs::Alias);
        assert_eq!(written(input, &all[1]), "WWW");
        assert_eq!(all[2].text, "is big.");
    }

    #[test]
    fn an_element_with_no_text_points_where_its_content_would_be() {
        let input = r#"<speak><sub alias="hello"/></speak>"#;
        let span = only_span(input);
        assert_eq!(span.text, "hello");
        assert_eq!(
            span.source,
            input.len() - "</speak>".len()..input.len() - "</speak>".len()
        );
        // Nothing to read: no piece.
        assert_eq!(
            pieces(r#"<speak><sub alias=""/><say-as interpret-as="date"> </say-as></speak>"#),
            vec![]
        );
    }

    #[test]
    fn bad_say_as_phoneme_and_sub_are_refused() {
        let cases: &[(&str, &str)] = &[
            (
                r#"<say-as interpret-as="number">5</say-as>"#,
                "`interpret-as=\"number\"` is not supported",
            ),
            ("<say-as>5</say-as>", "needs an `interpret-as`"),
            (
                r#"<say-as interpret-as="date" detail="2">5</say-as>"#,
                "has no attribute `detail`",
            ),
            (
                r#"<say-as interpret-as="date">5<break/></say-as>"#,
                "`<say-as>` can only contain text, not `<break>`",
            ),
            (
                r#"<phoneme alphabet="x-sampa" ph="a">a</phoneme>"#,
                "alphabet `x-sampa` is not supported",
            ),
            ("<phoneme>a</phoneme>", "needs a `ph`"),
            (r#"<phoneme ph=" ">a</phoneme>"#, "needs a `ph`"),
            (
                r#"<phoneme ph="a"><sub alias="b">c</sub></phoneme>"#,
                "`<phoneme>` can only contain text",
            ),
            ("<sub>WWW</sub>", "needs an `alias`"),
            (
                r#"<sub alias="a"><s>b</s></sub>"#,
                "`<sub>` can only contain text",
            ),
        ];
        for &(markup, expected) in cases {
            let error = error(&format!("<speak>{markup}</speak>"));
            assert!(error.message.contains(expected), "{markup}: {error}");
        }
    }

    #[test]
    fn entities_are_decoded_and_the_source_is_as_written() {
        let input = "<speak>Tom &amp; Jerry &lt;3 &#233;t&#xE9; &quot;hi&quot;&apos;s</speak>";
        let span = only_span(input);
        assert_eq!(span.text, "Tom & Jerry <3 été \"hi\"'s");
        assert_eq!(
            written(input, &span),
            "Tom &amp; Jerry &lt;3 &#233;t&#xE9; &quot;hi&quot;&apos;s"
        );
    }

    #[test]
    fn entities_in_attributes_and_reading_elements() {
        let input = r#"<speak><sub alias="A &amp; B">x &amp; y</sub></speak>"#;
        let span = only_span(input);
        assert_eq!(span.text, "A & B");
        assert_eq!(written(input, &span), "x &amp; y");
    }

    #[test]
    fn cdata_is_text() {
        let input = "<speak>a <![CDATA[x < y & z]]> b</speak>";
        let span = only_span(input);
        assert_eq!(span.text, "a x < y & z b");
        assert_eq!(written(input, &span), "a <![CDATA[x < y & z]]> b");

        let input = "<speak><![CDATA[  5 < 6  ]]></speak>";
        let span = only_span(input);
        assert_eq!(span.text, "5 < 6");
        assert_eq!(written(input, &span), "5 < 6");
    }

    #[test]
    fn comments_and_processing_instructions_are_not_spoken() {
        let input =
            "<!-- before --><speak>Hel<!-- note -->lo <?tool x?>there</speak><!-- after -->";
        let span = only_span(input);
        assert_eq!(span.text, "Hello there");
        assert_eq!(written(input, &span), "Hel<!-- note -->lo <?tool x?>there");
    }

    #[test]
    fn every_source_is_the_written_inner_text() {
        let input = r#"<speak>
  <p>Dear <sub alias="Doctor">Dr.</sub> Smith,</p>
  <p><s>Call <say-as interpret-as="telephone">555&#8209;0100</say-as> at
     <say-as interpret-as="time" format="hms12">5:30pm</say-as>.</s>
     <s><phoneme ph="təˈmɑːtoʊ">tomato</phoneme> &amp; <lang xml:lang="fr">pain</lang></s></p>
</speak>"#;
        let found: Vec<&str> = spans(input)
            .iter()
            .map(|span| written(input, span))
            .collect();
        assert_eq!(
            found,
            [
                "Dear",
                "Dr.",
                "Smith,",
                "Call",
                "555&#8209;0100",
                "at",
                "5:30pm",
                ".",
                "tomato",
                "&amp;",
                "pain"
            ]
        );
    }

    #[test]
    fn errors_point_at_the_offending_markup() {
        // (input, line, column, part of the message)
        let cases: &[(&str, usize, usize, &str)] = &[
            ("<speak>\n  <break time=\"1s\"", 2, 3, "not closed"),
            ("<speak>\n<s>Hello", 2, 1, "`<s>` is never closed"),
            (
                "<speak>\n<s>Hi</p></speak>",
                2,
                6,
                "`</p>` does not close the open `<s>`",
            ),
            (
                "<speak>\n<break time=500ms/></speak>",
                2,
                13,
                "must be quoted",
            ),
            (
                "<speak>\n<break time=\"1s/></speak>",
                2,
                1,
                "closing `\"` is missing",
            ),
            ("<speak>Hi</speak>\n oops", 2, 2, "text after `</speak>`"),
            ("hello <speak/>", 1, 1, "text before `<speak>`"),
            (
                "<speak>a</speak>\n<speak>b</speak>",
                2,
                1,
                "one root element",
            ),
            (
                "<speak>\n  <emphasis>hi</emphasis></speak>",
                2,
                3,
                "`<emphasis>` is not supported",
            ),
            (
                "<speak><say-as interpret-as=\"number\">5</say-as></speak>",
                1,
                16,
                "is not supported",
            ),
            (
                "<speak>\n<break time=\"11s\"/></speak>",
                2,
                8,
                "limit of 10s",
            ),
            (
                "<speak><prosody rate=\"5\">x</prosody></speak>",
                1,
                17,
                "out of range",
            ),
            (
                "<speak><prosody rate=\"fast\" pitch=\"high\">x</prosody></speak>",
                1,
                29,
                "not supported",
            ),
            (
                "<speak>é\n ü <foo/></speak>",
                2,
                4,
                "`<foo>` is not supported",
            ),
            ("<p>hi</p>", 1, 1, "must start with `<speak>`"),
            ("<speak><speak/></speak>", 1, 8, "cannot be nested"),
            (
                "<speak><s><p>x</p></s></speak>",
                1,
                11,
                "`<p>` cannot be inside",
            ),
            (
                "<speak><p><p>x</p></p></speak>",
                1,
                11,
                "`<p>` cannot be inside",
            ),
            (
                "<speak><s><s>x</s></s></speak>",
                1,
                11,
                "`<s>` cannot be inside",
            ),
            ("<speak>a &foo; b</speak>", 1, 10, "unknown entity `&foo;`"),
            ("<speak>a & b</speak>", 1, 10, "bare `&`"),
            ("<speak>&#1;</speak>", 1, 8, "not a character"),
            (
                "<speak><sub alias=\"a &x; b\">c</sub></speak>",
                1,
                13,
                "unknown entity",
            ),
            ("<speak a='1' a='2'/>", 1, 14, "given twice"),
            ("<speak><!-- no end</speak>", 1, 8, "comment is not closed"),
            (
                "<speak/>\n<?xml version=\"1.0\"?>",
                2,
                1,
                "can only open the document",
            ),
            ("<!DOCTYPE speak><speak/>", 1, 1, "DOCTYPE"),
            ("", 1, 1, "no `<speak>` element"),
            ("  \n ", 2, 2, "no `<speak>` element"),
        ];
        for &(input, line, column, expected) in cases {
            let error = error(input);
            assert!(error.message.contains(expected), "{input:?}: {error}");
            assert_eq!(
                (error.line, error.column),
                (line, column),
                "{input:?}: {error}"
            );
            assert_eq!(
                line_and_column(input, error.offset),
                (line, column),
                "{input:?}"
            );
        }
    }

    #[test]
    fn an_error_reads_with_its_position() {
        let error = error("<speak>\n  <emphasis/></speak>");
        assert_eq!(error.offset, 10);
        assert!(
            error
                .to_string()
                .starts_with("SSML error at line 2, column 3: `<emphasis>` is not supported"),
            "{error}"
        );
    }

    #[test]
    fn recognizes_ssml_documents() {
        let ssml = [
            "<speak>",
            "<speak/>",
            "  \n<speak>x</speak>",
            "<speak\txml:lang='en'>hi</speak>",
            "<?xml version=\"1.0\"?><speak/>",
            "\n<?xml version='1.0' encoding='UTF-8'?>\n  <speak version='1.1'>",
            "<speak",
            "<speak>unclosed <s>",
        ];
        for input in ssml {
            assert!(is_ssml(input), "{input:?} is SSML");
        }
        let not_ssml = [
            "",
            "   ",
            "hello",
            "speak",
            "<speaker>",
            "<SPEAK>",
            "<p>hi</p>",
            "hello <speak>",
            "&amp;<speak>",
            "<!-- c --><speak>",
            "<?xml version='1.0'?><?xml version='1.0'?><speak/>",
            "<?xml version='1.0'",
            "1 < 2 <speak>",
        ];
        for input in not_ssml {
            assert!(!is_ssml(input), "{input:?} is not SSML");
        }
    }

    const EVERYTHING: &str = r#"<?xml version="1.0"?>
<speak version="1.1" xml:lang="en-US">
  <p><s>Hello &amp; welcome, <sub alias="World Wide Web">WWW</sub>!</s>
  <s xml:lang="en-GB">It is <say-as interpret-as="date" format="mdy">12/25/2024</say-as>.</s></p>
  <break time="500ms"/><break strength="x-strong"/>
  <prosody rate="80%"><prosody rate="fast">Say <phoneme alphabet="ipa" ph="kˈOkəɹO">Kokoro</phoneme>
  <![CDATA[a < b]]> <!-- ignored --> <lang xml:lang="de-DE">Grüße</lang></prosody></prosody>
</speak>"#;

    #[test]
    fn the_fuzz_document_parses() {
        let all = pieces(EVERYTHING);
        assert_eq!(
            all.iter()
                .filter(|piece| matches!(piece, Piece::Break(_)))
                .count(),
            2
        );
        assert_eq!(spans(EVERYTHING).len(), 10);
    }

    #[test]
    fn every_truncation_is_an_error_and_never_a_panic() {
        for (end, _) in EVERYTHING.char_indices().skip(1) {
            let prefix = &EVERYTHING[..end];
            let error = error(prefix);
            assert!(error.offset <= prefix.len(), "{prefix:?}: {error}");
            assert_eq!(
                line_and_column(prefix, error.offset),
                (error.line, error.column)
            );
        }
    }

    #[test]
    fn damaged_documents_never_panic_and_keep_their_ranges_in_the_input() {
        let mut damaged = Vec::new();
        for (at, c) in EVERYTHING.char_indices() {
            let (before, after) = EVERYTHING.split_at(at);
            damaged.push(format!("{before}{}", &after[c.len_utf8()..]));
            for inserted in ['<', '>', '&', '"', '\'', '/', '='] {
                damaged.push(format!("{before}{inserted}{after}"));
            }
        }
        let mut parsed = 0;
        for input in &damaged {
            match parse(input) {
                Ok(pieces) => {
                    parsed += 1;
                    for piece in pieces {
                        if let Piece::Text(span) = piece {
                            assert!(
                                input.get(span.source.clone()).is_some(),
                                "{input:?}: {span:?}"
                            );
                            assert!(
                                !span.text.is_empty()
                                    || matches!(span.read_as, ReadAs::Phonemes(_))
                            );
                        }
                    }
                }
                Err(error) => assert!(error.offset <= input.len(), "{input:?}: {error}"),
            }
        }
        // Some damage (a `>` in text, a deleted letter) leaves a valid document.
        assert!(parsed > 0);
    }
}
