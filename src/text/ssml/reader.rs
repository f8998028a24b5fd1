//! The walk through the document's XML events: which elements may stand where, what each one
//! opens and closes, and the text between them.

use std::borrow::Cow;
use std::ops::Range;

use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::reader::Reader;

use super::attributes::find;
use super::errors::position;
use super::pieces::{decode_reference, is_blank, Fragment, InterpretAs, Piece, ReadAs, Span};
use super::SsmlError;

const KNOWN_ELEMENTS: &str =
    "`<speak>`, `<p>`, `<s>`, `<break>`, `<prosody>`, `<lang>`, `<say-as>`, `<phoneme>` and `<sub>`";

pub(super) struct Parser<'a> {
    pub(super) input: &'a str,
    pub(super) reader: Reader<&'a [u8]>,
    root: Root,
    /// The elements open inside the root, outermost first.
    open: Vec<Open>,
    /// Text read since the last tag, not yet made a piece. Kept as written fragments so that
    /// the piece's source can still be found in the input once entities are decoded.
    pub(super) run: Vec<Fragment<'a>>,
    pub(super) pieces: Vec<Piece>,
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

pub(super) enum Reading {
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

impl<'a> Parser<'a> {
    pub(super) fn new(input: &'a str) -> Self {
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

    pub(super) fn read_document(mut self) -> Result<Vec<Piece>, SsmlError> {
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
}
