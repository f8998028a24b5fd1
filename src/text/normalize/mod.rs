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

mod characters;
mod context;
mod html;
mod markdown;
#[cfg(test)]
mod tests;

use unicode_normalization::UnicodeNormalization;

use super::inline;
use characters::unify;

pub(crate) use context::Context;

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
