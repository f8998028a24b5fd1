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

mod attributes;
mod errors;
mod pieces;
mod reader;
#[cfg(test)]
mod tests;

use quick_xml::events::Event;
use quick_xml::reader::Reader;

pub use errors::SsmlError;
pub use pieces::{InterpretAs, Piece, ReadAs, Span};

use errors::position;
use pieces::is_blank;
use reader::Parser;

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

fn starts_with_speak_tag(text: &str) -> bool {
    text.strip_prefix("<speak").is_some_and(|rest| {
        rest.chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '>' || c == '/')
    })
}
