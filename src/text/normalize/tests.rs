//! Tests of the clean-up: markdown read as a reader says it, characters unified or dropped,
//! and no word of the original lost or reordered.

use super::normalize;

#[test]
fn strips_emphasis_and_code() {
    assert_eq!(
        normalize("This is **bold** and *it*."),
        "This is bold and it."
    );
    assert_eq!(normalize("__Under__ _score_ ~~gone~~"), "Under score gone");
    assert_eq!(normalize("Run `cargo test` now."), "Run cargo test now.");
    assert_eq!(normalize("***Both*** here"), "Both here");
}

#[test]
fn keeps_arithmetic_and_identifiers() {
    assert_eq!(normalize("2 * 3 = 6"), "2 * 3 = 6");
    assert_eq!(
        normalize("call snake_case_name please"),
        "call snake_case_name please"
    );
    assert_eq!(normalize("about ~5 km"), "about ~5 km");
    assert_eq!(normalize("a*b*c"), "a*b*c");
}

#[test]
fn links_keep_their_text() {
    assert_eq!(
        normalize("See [the docs](https://example.org/a_b) for more."),
        "See the docs for more."
    );
    assert_eq!(normalize("![a cat](cat.png) sleeps"), "a cat sleeps");
    assert_eq!(
        normalize("Mail <mailto:me@example.org> or <https://x.org>"),
        "Mail mailto:me@example.org or https://x.org"
    );
    assert_eq!(normalize("Use [brackets] freely"), "Use [brackets] freely");
    assert_eq!(normalize("[**bold link**](u)"), "bold link");
    assert_eq!(normalize("[docs](https://x.org \"The docs\")"), "docs");
    assert_eq!(normalize("[a](not a link) b"), "[a](not a link) b");
}

#[test]
fn headings_and_lists_become_phrases() {
    assert_eq!(
        normalize("# Title\nSome text.\n## Part two ##\n"),
        "Title. Some text. Part two."
    );
    assert_eq!(
        normalize("Shopping:\n- apples\n- pears!\n* plums\n+ figs\n  - [x] done"),
        "Shopping: apples. pears! plums. figs. done."
    );
    assert_eq!(normalize("> quoted line\n> more"), "quoted line more");
    assert_eq!(normalize("#hashtag stays"), "#hashtag stays");
}

#[test]
fn rules_and_fences_go_but_code_words_stay() {
    // A fence's info string ("rust") names a language: no text.
    assert_eq!(
        normalize("Intro\n\n---\n```rust\nlet x = 1;\n```\nEnd"),
        "Intro let x = 1; End"
    );
    // Read line by line, "---" is a rule, not the underline of a heading.
    assert_eq!(normalize("Intro\n---\nText"), "Intro Text");
}

/// (markdown, what is spoken) for each case of a table.
fn check(cases: &[(&str, &str)]) {
    for (markdown, spoken) in cases {
        assert_eq!(normalize(markdown), *spoken, "{markdown:?}");
    }
}

#[test]
fn tables_are_read_cell_by_cell_and_row_by_row() {
    check(&[
        (
            "| Name | Age |\n|------|----:|\n| Ann | 31 |\n| Bob | 42 |",
            "Name, Age. Ann, 31. Bob, 42.",
        ),
        (
            "Prices:\n\n| Item | Cost |\n| --- | --- |\n| Tea! | $3 |\n| | none |",
            "Prices: Item, Cost. Tea! $3. none.",
        ),
        (
            "| **bold** | [link](https://x.org) | `code` |\n|-|-|-|\n| a<br>b | c? | d. |",
            "bold, link, code. a b, c? d.",
        ),
    ]);
}

#[test]
fn links_speak_their_text_not_their_address() {
    check(&[
        (
            "Read [the guide](https://example.org/guide).",
            "Read the guide.",
        ),
        (
            "[ref link][1] here\n\n[1]: https://example.org/x",
            "ref link here",
        ),
        (
            "[collapsed][] too\n\n[collapsed]: /x \"T\"",
            "collapsed too",
        ),
        (
            "A [link with `code` and *emphasis*](/a) ok",
            "A link with code and emphasis ok",
        ),
        ("Mail <me@example.org> now", "Mail me@example.org now"),
        (
            "Plain https://example.org/a_b_c stays",
            "Plain https://example.org/a_b_c stays",
        ),
    ]);
}

#[test]
fn images_speak_their_alt_text() {
    check(&[
        ("![A red fox](fox.png \"Title\") runs.", "A red fox runs."),
        ("[![badge alt](b.svg)](https://ci)", "badge alt"),
        ("![](empty.png) Nothing before.", "Nothing before."),
    ]);
}

#[test]
fn code_spans_and_blocks_keep_their_words() {
    check(&[
        ("Type `ls -la` here.", "Type ls -la here."),
        ("Use ``a `tick` b`` then", "Use a `tick` b then"),
        ("```python\nprint('hi')\n```", "print('hi')"),
        ("~~~\nraw ~~text~~ **stays**\n~~~", "raw ~~text~~ **stays**"),
        (
            "Para.\n\n    indented code\n\nAfter.",
            "Para. indented code After.",
        ),
    ]);
}

#[test]
fn html_is_not_spoken() {
    check(&[
        ("Press <kbd>Ctrl</kbd> now", "Press Ctrl now"),
        ("one<br>two", "one two"),
        ("<div>\nhidden block\n</div>\n\nShown.", "Shown."),
        ("Before <!-- a comment --> after", "Before after"),
        ("<!--\nmulti\nline\n-->\nText", "Text"),
        (
            "<p align=\"center\">\n<img src=\"x\">\n</p>\n\nAfter",
            "After",
        ),
        ("Fish & chips <here>.", "Fish & chips <here>."),
        (
            "Dear <name>,\n\n<placeholder>\nstays",
            "Dear <name>, <placeholder> stays",
        ),
    ]);
}

#[test]
fn emphasis_marks_go() {
    check(&[
        (
            "*one* _two_ **three** __four__ ~~five~~",
            "one two three four five",
        ),
        ("A **bold _and italic_ mix**.", "A bold and italic mix."),
        ("un*believ*able and wo**r**d", "un*believ*able and wo**r**d"),
    ]);
}

#[test]
fn headings_lists_and_quotes_become_phrases() {
    check(&[
        // Lines are read on their own: the underline goes, the line above stays text.
        ("Title\n=====\nBody", "Title Body"),
        ("### Ends with? ###\nNext", "Ends with? Next"),
        ("1. first\n2. second\n3) no", "1. first. 2. second. 3) no."),
        ("7. seven\n8. eight", "7. seven. 8. eight."),
        ("- loose\n\n- items", "loose. items."),
        ("> # Quoted heading\n> text", "Quoted heading. text"),
    ]);
}

#[test]
fn nested_markup_is_read_in_order() {
    check(&[
        (
            "- outer\n  - inner *one*\n  - inner [two](/x)\n- last",
            "outer. inner one. inner two. last.",
        ),
        (
            "> - quoted item\n>   > deeper `code`",
            "quoted item. deeper code",
        ),
        (
            "1. step\n   ```\n   run it\n   ```\n2. done",
            "1. step. run it 2. done.",
        ),
        ("## A [**linked** head](/h)", "A linked head."),
    ]);
}

#[test]
fn plain_text_that_is_no_markdown_stays() {
    for text in [
        "3 * 4 = 12 and 2*3 too.",
        "a*b*c",
        "Write to first.last@example.org today.",
        "Use my_var_name here.",
        "#1 priority, issue #42.",
        "5 > 3, and x -> y.",
        "If a < b then b > a.",
        "2024. It was a good year.",
        "Price: $5 (or 4 €), 50% off!",
        "He said: 'fine' and left.",
    ] {
        assert_eq!(normalize(text), text);
    }
}

/// Word timestamps look each word of the result up in the original, in order: every word
/// of the result must be found there after the previous one.
#[test]
fn spoken_words_appear_in_the_original_in_order() {
    let text = "# Intro\n\nSee [the *docs*](https://x.org/docs) and ![a cat](c.png).\n\n\
                | k | v |\n|---|---|\n| 1 | one |\n\n3. three\n4. four\n\n\
                > quoted `code` <b>bold</b>\n\n```sh\nrun --fast\n```";
    let mut rest = text;
    for word in normalize(text).split_whitespace() {
        let word = word.trim_matches(|c: char| matches!(c, '.' | ',' | '—'));
        let at = rest
            .find(word)
            .unwrap_or_else(|| panic!("{word:?} not found in {rest:?}"));
        rest = &rest[at + word.len()..];
    }
}

#[test]
fn drops_emoji_and_control_characters() {
    assert_eq!(normalize("Great job 👍🏽! 🎉🎉"), "Great job !");
    assert_eq!(normalize("flag 🇩🇪 and ❤️ love"), "flag and love");
    assert_eq!(normalize("a\u{0007}b\u{200B}c\u{FEFF}"), "abc");
    assert_eq!(normalize("keycap 1\u{FE0F}\u{20E3} done"), "keycap 1 done");
}

#[test]
fn unifies_quotes_dashes_and_ellipses() {
    assert_eq!(
        normalize("“Hi,” she said… ‘ok’"),
        "\"Hi,\" she said... 'ok'"
    );
    assert_eq!(normalize("don’t"), "don't");
    assert_eq!(
        normalize("one – two — three ― four"),
        "one — two — three — four"
    );
    assert_eq!(normalize("1990–1995"), "1990-1995");
    assert_eq!(normalize("wait--what"), "wait—what");
    assert_eq!(normalize("−5 degrees"), "-5 degrees");
}

#[test]
fn keeps_numbers_dates_and_currency() {
    let text = "On 2024-05-17 it cost $3.50 (€3,20) at 10:30, i.e. 15% off.";
    assert_eq!(normalize(text), text);
}

#[test]
fn collapses_whitespace() {
    assert_eq!(normalize("  a \t b\n\n\nc\u{00A0}d  "), "a b c d");
    assert_eq!(normalize(""), "");
    assert_eq!(normalize(" \n\t "), "");
}

#[test]
fn composes_decomposed_text() {
    assert_eq!(normalize("cafe\u{0301}"), "café");
}

#[test]
fn survives_generated_markup() {
    let tokens = [
        "**",
        "*",
        "_",
        "__",
        "~~",
        "`",
        "```",
        "[",
        "](",
        ")",
        "![",
        "<https://a.b>",
        "<",
        ">",
        "#",
        "\n",
        "- ",
        "word",
        "Ünï",
        "👍",
        "\u{200D}",
        "“",
        "’",
        "–",
        "--",
        "…",
        " ",
        "\t",
        "3.5",
        "\u{0007}",
    ];
    // Tokens that can make a code fence's info string or an HTML tag around a word, which
    // are not spoken: with them, words may go, but never come from nowhere or move.
    let hiding = ["```", "~~", "<"];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for round in 0..1000 {
        let pool: Vec<&str> = tokens
            .iter()
            .copied()
            .filter(|t| round % 2 == 0 || !hiding.contains(t))
            .collect();
        let mut text = String::new();
        for _ in 0..(round / 2 % 40) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(pool[(state % pool.len() as u64) as usize]);
        }
        let out = normalize(&text);
        assert_eq!(out.trim(), out, "{text:?}");
        assert!(
            !out.contains("  ") && !out.contains('\n'),
            "{text:?} -> {out:?}"
        );
        assert!(!out.contains('👍') && !out.contains('\u{0007}'), "{text:?}");
        let mut written = text.chars().filter(|c| c.is_alphanumeric());
        assert!(
            out.chars()
                .filter(|c| c.is_alphanumeric())
                .all(|c| written.any(|w| w == c)),
            "{text:?} -> {out:?}: letters as written, in order"
        );
        if round % 2 == 1 {
            assert_eq!(
                out.matches("word").count(),
                text.matches("word").count(),
                "{text:?} -> {out:?}"
            );
        }
    }
}

#[test]
fn never_drops_words() {
    let text = "**Note:** see [link](http://a.b) - then `run` it; 3 * 4 is _twelve_.";
    let words = |s: &str| {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty() && *w != "http" && *w != "a" && *w != "b")
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(words(&normalize(text)), words(text));
}
