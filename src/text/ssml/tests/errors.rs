//! Where errors point, what is not taken for SSML at all, and truncated or damaged documents,
//! which must be refused and never panic.

use super::*;
use crate::text::ssml::errors::line_and_column;

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
                            !span.text.is_empty() || matches!(span.read_as, ReadAs::Phonemes(_))
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
