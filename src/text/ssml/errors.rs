//! What is wrong with a document, in words, and where: quick-xml's errors told as the writer
//! of the markup would understand them, pointing at a line and column.

use quick_xml::events::attributes::AttrError;
use quick_xml::reader::Reader;

use super::reader::Parser;

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

impl Parser<'_> {
    pub(super) fn xml_error(&self, error: &quick_xml::Error) -> SsmlError {
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

    pub(super) fn attribute_error(&self, error: &AttrError, tag_start: usize) -> SsmlError {
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

    pub(super) fn error(&self, offset: usize, message: impl Into<String>) -> SsmlError {
        SsmlError::at(self.input, offset, message)
    }
}

/// How far the reader has read, as a byte offset into `input`.
pub(super) fn position(reader: &Reader<&[u8]>, input: &str) -> usize {
    usize::try_from(reader.buffer_position())
        .unwrap_or(usize::MAX)
        .min(input.len())
}

/// Where `part`, a slice of `input`, begins in it. quick-xml hands attributes back as slices of
/// the input but without their positions, and errors about them should point at them.
pub(super) fn offset_within(input: &str, part: &str) -> Option<usize> {
    let offset = (part.as_ptr() as usize).checked_sub(input.as_ptr() as usize)?;
    (offset.checked_add(part.len())? <= input.len()).then_some(offset)
}

pub(super) fn line_and_column(input: &str, offset: usize) -> (usize, usize) {
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
