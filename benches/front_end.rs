//! The text front end's share of a synthesis: markdown clean-up, sentence splitting, English
//! normalization and espeak-ng phonemization per 1,000 characters, before normalization existed
//! ("before": the same steps without it) and with it ("after"), against the Piper synthesis of
//! the same text at bf16 on one core, all measured in one run (docs/performance.md §12), for
//! news-style text, an agent's reply as language models write it, and plain prose. Two
//! more rows price the newer parts against the same synthesis: an SSML document read through
//! its markup, and plain prose looked up in a 1,000-entry pronunciation dictionary.
//!
//! `cargo bench --bench front_end`

use std::time::Instant;

use omnivoice_models::kernels::Precision;
use omnivoice_server::engine::piper::PiperEngine;
use omnivoice_server::engine::{Engine, SynthesisItem};
use omnivoice_server::text::english::{read, read_claimed, ReadingOptions};
use omnivoice_server::text::lexicon::{Entry, Lexicon};
use omnivoice_server::text::phonemize::phonemize_with;
use omnivoice_server::text::{document, inline, normalize, phonemize, split_sentences};

/// News-style text with every family of the normalizer in it, about 1,000 characters.
const NUMBERS: &str = "On 2026-12-01 at 3:30pm, Dr. Smith said the fund grew 3.5% to $5.2bn, \
    up from $4.75bn in 2025. Call 555-123-4567 or visit www.example.org for details. \
    The 1990s saw 1,234,567 visitors; Henry VIII's palace took 5 kg of gold, etc. \
    Temperatures hit 72°F, and the car reached 100 km/h in 4.2 s. Chapter IV opens on \
    Dec. 1, 2026, with 3/4 of the 21st-century readers. Tickets cost €20, £3.50 or USD 40. \
    The meeting moved to 12/01/2026 at 14:05, room #12. R&D spent ~30% more, i.e. $12k. \
    Mr. Jones lives at 221 Baker St. and drives 60 mph. It was 2 + 2 = 4 all along. \
    Read report.pdf and email jane.doe@example.com by 11 a.m. tomorrow, please. \
    Prices ranged 10-20% higher than the 1,990 people expected in Q3, and the rest, 5.5 GB, \
    arrived on the 1st of May at 9:00.";

/// An agent's reply of about the same length, as language models write (issue #50): counts,
/// identifiers, scores, ranges, shortcuts, short forms.
const REPLY: &str = "Sure! Here's a quick summary. Your flight 1492 now leaves from gate 214 \
    at 7:45am, and the 2:30pm call moved to Thu 4/9 in room 305. The Pixel 9 scores 4.6/5 from \
    1200 reviews, and critics rated it 9/10; the Xbox 360 got 7/10. Since 2019, 2048 teams \
    have used the app on macOS 15 and Windows 11. Support is open Mon-Fri, 9am-5pm, at \
    +49 30 1234 5678 or 1-800-555-0199. The plan costs $12/user/month, incl. tax, and renews \
    3/1; est. delivery is 3-5 business days. Press Cmd+S to save or Ctrl+Shift+T to reopen a \
    tab. GPT-5 and Python 3.12 are supported in v2.1, and Q1 revenue rose 15% YoY. The pilot \
    runs Apr-Jun, with the fair on Sep 12-14. He's 6'2\" and uses a 27\" monitor. Add 2/3 cup \
    of sugar, not 3/4. The aspect ratio is 16:9, the Lakers won 112-104, and FY2026 looks \
    strong. Let me know if you have any other questions, and thanks for reaching out!";

/// Plain prose of about the same length: what most requests are.
const PROSE: &str = "The evening light fell softly across the harbour as the fishing boats \
    came home one by one. Children ran along the sea wall, calling to each other, while their \
    parents talked quietly about the weather and the price of bread. Somewhere a dog barked, \
    and a gull answered it from the top of a mast. The old lighthouse keeper climbed his \
    stairs slowly, as he had done every night for forty years, and lit the lamp that would \
    guide the last boats in. Nobody in the village could remember a time before him. When the \
    wind turned cold, the cafés pulled in their chairs and the streets emptied. Only the \
    sound of the waves remained, steady and patient, washing over the stones of the little \
    beach below the church. Tomorrow the market would fill the square again, and the whole \
    town would wake to the smell of coffee and fresh fish, as it always had.";

/// An SSML document of about 1,000 characters that uses every tag of the subset.
const SSML: &str = r#"<speak><p><s>Welcome back to the <sub alias="World Wide Web Consortium">W3C</sub>
    briefing for <say-as interpret-as="date" format="mdy">12/01/2026</say-as>.</s>
    <s>Your code is <say-as interpret-as="characters">XK7</say-as>, and your number is
    <say-as interpret-as="telephone">555-123-4567</say-as>.</s></p>
    <break time="300ms"/><p><prosody rate="slow">Please listen carefully, because the options
    have changed since your last call.</prosody> The <phoneme alphabet="ipa" ph="kˈoʊkəɹoʊ">Kokoro</phoneme>
    voices are now the default, and the meeting starts at <say-as interpret-as="time">3:30pm</say-as>
    in room <say-as interpret-as="cardinal">12</say-as>, on the <say-as interpret-as="ordinal">21</say-as>
    floor.</p><p><lang xml:lang="en-GB">The colour of the harbour at dusk is worth the trip.</lang>
    <break strength="strong"/>For the record, the digits are <say-as interpret-as="digits">2026</say-as>,
    and the total came to $5.50 per person, up 3.5% on last year. Thank you for calling, and
    goodbye.</p></speak>"#;

/// A dictionary of `n` made-up names and phrases, a few of which the prose uses.
fn lexicon(n: usize) -> Lexicon {
    let mut entries: Vec<Entry> = (0..n)
        .map(|i| Entry {
            word: format!("Zorb{i}ax"),
            ipa: (i % 2 == 0).then(|| "zˈɔɹblæks".to_string()),
            alias: (i % 2 == 1).then(|| format!("zorb {i} ax")),
            language: None,
            case_sensitive: false,
        })
        .collect();
    for (word, alias) in [
        ("harbour", "harbor"),
        ("lighthouse keeper", "keeper"),
        ("cafés", "cafes"),
    ] {
        entries.push(Entry {
            word: word.into(),
            ipa: None,
            alias: Some(alias.into()),
            language: None,
            case_sensitive: false,
        });
    }
    Lexicon::new(entries).expect("valid entries")
}

/// The front end as a request runs it: segments, sentences, marked words and dictionary
/// claims, English readings, phonemes.
fn read_document(document: &document::Document, lexicon: &Lexicon) -> usize {
    let options = ReadingOptions::default();
    let mut phonemes = 0;
    for segment in &document.segments {
        for sentence in split_sentences(&segment.text, 400) {
            let (written, mut claims) = inline::extract(&sentence);
            claims.extend(lexicon.claims(&written, "en-US"));
            claims.sort_by_key(|c| c.written.start);
            claims.dedup_by(|b, a| b.written.start < a.written.end);
            let spoken = read_claimed(&written, Some(&options), &claims);
            phonemes += phonemize_with(&spoken.text, &spoken.pronunciations, "en-us")
                .expect("espeak-ng")
                .len();
        }
    }
    phonemes
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Median seconds of `work` over `runs` runs.
fn time(runs: usize, mut work: impl FnMut()) -> f64 {
    work();
    median(
        (0..runs)
            .map(|_| {
                let started = Instant::now();
                work();
                started.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn front_end(text: &str, normalizing: bool) -> usize {
    let options = ReadingOptions::default();
    let mut phonemes = 0;
    for sentence in split_sentences(&normalize(text), 400) {
        let spoken = if normalizing {
            read(&sentence, &options).text
        } else {
            sentence
        };
        phonemes += phonemize(&spoken, "en-us").expect("espeak-ng").len();
    }
    phonemes
}

fn main() {
    std::env::set_var("RAYON_NUM_THREADS", "1");
    let voices = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("voices");
    let engine =
        PiperEngine::new(&voices, candle_core::Device::Cpu).with_precision(Some(Precision::Bf16));
    let voice = engine
        .load_voice("en_US-joe-medium")
        .expect("the default voice (scripts/setup.sh installs it)");
    println!("| text | chars | normalize only | front end before | front end after | Piper bf16 | after / Piper |");
    println!("|---|---|---|---|---|---|---|");
    for (name, text) in [("numbers", NUMBERS), ("reply", REPLY), ("prose", PROSE)] {
        let per_k = 1000.0 / text.chars().count() as f64;
        let options = ReadingOptions::default();
        let sentences = split_sentences(&normalize(text), 400);
        let read_only = time(50, || {
            for s in &sentences {
                std::hint::black_box(read(s, &options));
            }
        });
        let before = time(20, || {
            std::hint::black_box(front_end(text, false));
        });
        let after = time(20, || {
            std::hint::black_box(front_end(text, true));
        });
        let items: Vec<SynthesisItem> = sentences
            .iter()
            .map(|s| SynthesisItem::new(&read(s, &options).text))
            .collect();
        let synthesis = time(3, || {
            voice
                .synthesize_each(&items, &mut |_, pcm| {
                    std::hint::black_box(pcm);
                })
                .expect("synthesis");
        });
        println!(
            "| {name} | {} | {:.3} ms | {:.2} ms | {:.2} ms | {:.0} ms | {:.2} % |",
            text.chars().count(),
            read_only * per_k * 1e3,
            before * per_k * 1e3,
            after * per_k * 1e3,
            synthesis * per_k * 1e3,
            100.0 * after / synthesis,
        );
    }

    // The newer parts, each against its plain-text twin and the synthesis of what it says.
    println!();
    println!("| text | chars | front end | Piper bf16 | front end / Piper |");
    println!("|---|---|---|---|---|");
    let empty = Lexicon::new(Vec::new()).expect("empty");
    let dictionary = lexicon(1000);
    let ssml = document::ssml(SSML).expect("valid SSML");
    let prose = document::plain(PROSE);
    for (name, chars, document, lexicon) in [
        ("ssml", SSML.chars().count(), &ssml, &empty),
        (
            "prose, no dictionary",
            PROSE.chars().count(),
            &prose,
            &empty,
        ),
        (
            "prose, 1,000-entry dictionary",
            PROSE.chars().count(),
            &prose,
            &dictionary,
        ),
    ] {
        let per_k = 1000.0 / chars as f64;
        let front = time(20, || {
            std::hint::black_box(read_document(document, lexicon));
        });
        let items: Vec<SynthesisItem> = document
            .segments
            .iter()
            .flat_map(|s| split_sentences(&s.text, 400))
            .map(|s| SynthesisItem::new(inline::extract(&s).0))
            .collect();
        let synthesis = time(3, || {
            voice
                .synthesize_each(&items, &mut |_, pcm| {
                    std::hint::black_box(pcm);
                })
                .expect("synthesis");
        });
        println!(
            "| {name} | {chars} | {:.2} ms | {:.0} ms | {:.2} % |",
            front * per_k * 1e3,
            synthesis * per_k * 1e3,
            100.0 * front / synthesis,
        );
    }
}
