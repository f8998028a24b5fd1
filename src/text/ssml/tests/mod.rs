//! Tests of reading SSML, and the helpers they share.

mod errors;
mod reading;

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
