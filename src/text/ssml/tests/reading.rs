//! Each part of the subset in turn: what documents are read as (pieces, settings, readings and
//! the source of every span), and what of each part is refused.

use std::time::Duration;

use super::*;

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
    let input = "<speak>\n  <p>\n    <s> One </s>\n    <s>Two</s>\n  </p>\n  <break/>\n</speak>";
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
    let input = r#"<speak><say-as interpret-as="date" format="dmy">25/12/2024</say-as></speak>"#;
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
        let input = format!(r#"<speak><phoneme{alphabet} ph="kˈOkəɹO">Kokoro</phoneme></speak>"#);
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
    let input = "<!-- before --><speak>Hel<!-- note -->lo <?tool x?>there</speak><!-- after -->";
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
