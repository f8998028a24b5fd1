//! A request's text as the stretches it is read in: where the speed, the language or a pause
//! changes, a new [`Segment`] begins.
//!
//! Plain text (markdown and all) is one segment. An SSML document is as many as its markup
//! makes: each `<break>`, `<s>` and `<p>` ends one and says how long the silence after it is,
//! and text of another `<prosody rate>` or `xml:lang` is a segment of its own. What
//! `<phoneme>`, `<sub>` and `<say-as>` ask for rides in each segment's text as marked words
//! ([`inline::marked`]), so that it goes through sentence splitting exactly as inline phonemes
//! do and reaches the reader as [`Claim`](super::Claim)s on the words written.

use std::ops::Range;
use std::time::Duration;

use super::inline;
use super::normalize::{clean, normalize};
use super::pronunciation::Say;
use super::ssml::{self, Piece, ReadAs, SsmlError};

/// The most silence an SSML document's breaks may add up to: every second of it is held in
/// memory and sent, so a document of many long breaks must not become minutes of nothing.
pub const MAX_BREAKS_TOTAL: Duration = Duration::from_secs(60);

/// A request's text as it is read.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub segments: Vec<Segment>,
    /// Silence after the last segment (breaks that end an SSML document).
    pub trailing: Duration,
    /// For SSML, where text to speak is written in the input (the text between the tags):
    /// words are searched for there only, never in markup. `None` for plain text, all of
    /// which may hold words.
    pub text_ranges: Option<Vec<Range<usize>>>,
}

/// Text read at one speed, in one language, with nothing but sentence ends inside.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Normalized text, to be split into sentences; claimed words are marked.
    pub text: String,
    /// What comes between this segment and the one before it.
    pub before: Gap,
    /// Speed factor on top of the request's (SSML `<prosody rate>`).
    pub rate: f32,
    /// The language it is written in, where the markup says (`xml:lang`, as written).
    pub language: Option<String>,
}

/// What separates a segment from the one before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gap {
    /// Nothing: it is the first.
    Start,
    /// Nothing but a change of speed or language inside a sentence.
    Joined,
    /// The end of a sentence (`</s>`).
    Sentence,
    /// The end of a paragraph (`</p>`).
    Paragraph,
    /// A `<break>` (several in a row add up): exactly this much silence.
    Break(Duration),
}

/// Plain text: markdown read as [`normalize`] reads it, in one segment.
pub fn plain(input: &str) -> Document {
    Document {
        segments: vec![Segment {
            text: normalize(input),
            before: Gap::Start,
            rate: 1.0,
            language: None,
        }],
        trailing: Duration::ZERO,
        text_ranges: None,
    }
}

/// An SSML document ([`ssml::parse`]) in segments.
pub fn ssml(input: &str) -> Result<Document, SsmlError> {
    let pieces = ssml::parse(input)?;
    let mut document = Document {
        segments: Vec::new(),
        trailing: Duration::ZERO,
        text_ranges: Some(Vec::new()),
    };
    let mut ranges = Vec::new();
    let mut open: Option<Segment> = None;
    // Where the text of the open segment ends in the input.
    let mut last_end = 0;
    let mut gap = Gap::Start;
    let mut breaks = Duration::ZERO;
    for piece in pieces {
        match piece {
            Piece::Break(pause) => {
                document.segments.extend(open.take());
                breaks += pause;
                if breaks > MAX_BREAKS_TOTAL {
                    let at = ranges.last().map_or(0, |r: &Range<usize>| r.end);
                    return Err(too_much_silence(input, at));
                }
                gap = match gap {
                    Gap::Break(before) => Gap::Break(before + pause),
                    _ => Gap::Break(pause),
                };
            }
            Piece::Boundary { paragraph } => {
                document.segments.extend(open.take());
                gap = match gap {
                    // A break says itself how long the pause is; at the start there is none.
                    Gap::Break(_) | Gap::Start | Gap::Paragraph => gap,
                    _ if paragraph => Gap::Paragraph,
                    _ => Gap::Sentence,
                };
            }
            Piece::Text(span) => {
                let continues = open
                    .as_ref()
                    .is_some_and(|s| s.rate == span.rate && s.language == span.language);
                if !continues {
                    document.segments.extend(open.take());
                    open = Some(Segment {
                        text: String::new(),
                        before: gap,
                        rate: span.rate,
                        language: span.language.clone(),
                    });
                    gap = Gap::Joined;
                }
                let segment = open.as_mut().expect("a segment is open");
                if !segment.text.is_empty() && spaced(input, last_end, span.source.start) {
                    segment.text.push(' ');
                }
                segment.text.push_str(&words(input, &span));
                last_end = span.source.end;
                ranges.push(span.source);
            }
        }
    }
    document.segments.extend(open);
    // Breaks that end the document (or are all it holds: silence between the documents of a
    // stream) close it with their silence.
    if let Gap::Break(pause) = gap {
        document.trailing = pause;
    }
    document.text_ranges = Some(ranges);
    Ok(document)
}

/// A span's text as the segment holds it: cleaned, and marked when the markup claims it.
fn words(input: &str, span: &ssml::Span) -> String {
    let say = match &span.read_as {
        ReadAs::Plain => return clean(&span.text),
        ReadAs::Phonemes(ipa) => Say::Phonemes(ipa.clone()),
        ReadAs::Alias => Say::Alias(clean(&span.text)),
        ReadAs::SayAs {
            interpret_as,
            format,
        } => Say::Interpret {
            how: *interpret_as,
            format: format.clone(),
        },
    };
    // A `<sub>`'s span holds its alias: the words written are its content.
    let written = match span.read_as {
        ReadAs::Alias => clean(input.get(span.source.clone()).unwrap_or_default()),
        _ => clean(&span.text),
    };
    match (written.is_empty(), say) {
        // Nothing written to hang the claim on: what it says, said as it is.
        (true, Say::Phonemes(ipa)) => inline::marked(&ipa, &Say::Phonemes(ipa.clone())),
        (true, Say::Alias(alias)) => alias,
        (true, _) => String::new(),
        (false, say) => inline::marked(&written, &say),
    }
}

/// Whether whitespace stands between two pieces of text in the input, outside the tags
/// between them (`word <sub …>` is two words, `word</s>,` is not).
fn spaced(input: &str, from: usize, to: usize) -> bool {
    let Some(between) = input.get(from..to.max(from)) else {
        return true;
    };
    let mut in_tag = false;
    for c in between.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if c.is_whitespace() && !in_tag => return true,
            _ => {}
        }
    }
    false
}

fn too_much_silence(input: &str, at: usize) -> SsmlError {
    SsmlError::at(
        input,
        at,
        format!(
            "the breaks add up to more than {} s of silence",
            MAX_BREAKS_TOTAL.as_secs()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::inline::extract;
    use crate::text::ssml::InterpretAs;

    fn segments(input: &str) -> Vec<(String, Gap, f32, Option<String>)> {
        ssml(input)
            .unwrap()
            .segments
            .into_iter()
            .map(|s| (extract(&s.text).0, s.before, s.rate, s.language))
            .collect()
    }

    #[test]
    fn breaks_sentences_rates_and_languages_start_segments() {
        let input = "<speak>Hello <break time=\"700ms\"/>there. <s>One</s><s>two</s>\
            <p>Slow <prosody rate=\"slow\">down</prosody> now.</p>\
            <lang xml:lang=\"de-DE\">Guten Tag</lang></speak>";
        let got = segments(input);
        let ms = Duration::from_millis;
        let de = Some("de-DE".to_string());
        let slow = got[5].2;
        assert!(slow < 1.0, "slow is slower: {slow}");
        assert_eq!(
            got,
            [
                ("Hello".into(), Gap::Start, 1.0, None),
                ("there.".into(), Gap::Break(ms(700)), 1.0, None),
                ("One".into(), Gap::Sentence, 1.0, None),
                ("two".into(), Gap::Sentence, 1.0, None),
                ("Slow".into(), Gap::Paragraph, 1.0, None),
                ("down".into(), Gap::Joined, slow, None),
                ("now.".into(), Gap::Joined, 1.0, None),
                ("Guten Tag".into(), Gap::Paragraph, 1.0, de),
            ]
        );
    }

    #[test]
    fn breaks_add_up_and_trailing_ones_end_the_body() {
        let document = ssml(
            "<speak><break time=\"1s\"/>Hi<break time=\"1s\"/><break strength=\"weak\"/>\
             you.<break time=\"2s\"/></speak>",
        )
        .unwrap();
        let gaps: Vec<Gap> = document.segments.iter().map(|s| s.before).collect();
        assert_eq!(
            gaps,
            [
                Gap::Break(Duration::from_secs(1)),
                Gap::Break(Duration::from_millis(1200))
            ]
        );
        assert_eq!(document.trailing, Duration::from_secs(2));
        let many = format!("<speak>a{}</speak>", "<break time=\"10s\"/>".repeat(7));
        let error = ssml(&many).unwrap_err();
        assert!(error.message.contains("60 s"), "{}", error.message);
    }

    #[test]
    fn claims_ride_on_the_words_written() {
        let input = "<speak>See <sub alias=\"World Wide Web\">WWW</sub>, \
            <phoneme alphabet=\"ipa\" ph=\"kˈOkəɹO\">Kokoro</phoneme> and \
            <say-as interpret-as=\"date\" format=\"dmy\">12/01/2026</say-as>.</speak>";
        let document = ssml(input).unwrap();
        let [segment] = &document.segments[..] else {
            panic!("one segment: {:?}", document.segments)
        };
        let (text, claims) = extract(&segment.text);
        assert_eq!(text, "See WWW, Kokoro and 12/01/2026.");
        let said: Vec<(&str, &Say)> = claims
            .iter()
            .map(|c| (&text[c.written.clone()], &c.say))
            .collect();
        assert_eq!(
            said,
            [
                ("WWW", &Say::Alias("World Wide Web".into())),
                ("Kokoro", &Say::Phonemes("kˈOkəɹO".into())),
                (
                    "12/01/2026",
                    &Say::Interpret {
                        how: InterpretAs::Date,
                        format: Some("dmy".into())
                    }
                ),
            ]
        );
        // Each piece of text is where it was written.
        let ranges = document.text_ranges.unwrap();
        let written: Vec<&str> = ranges.iter().map(|r| &input[r.clone()]).collect();
        assert_eq!(
            written,
            ["See", "WWW", ",", "Kokoro", "and", "12/01/2026", "."]
        );
    }

    #[test]
    fn plain_text_is_one_segment_of_markdown_read_aloud() {
        let document = plain("**Bold** move.");
        assert_eq!(document.segments.len(), 1);
        assert_eq!(document.segments[0].text, "Bold move.");
        assert_eq!(document.text_ranges, None);
    }
}
