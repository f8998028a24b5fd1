//! A streamed text against the official code: the official chunked path run with our split
//! (`stream.safetensors`, `scripts/omnivoice_paragraph_fixture.py`, greedy, the tiny checkpoint
//! `clone/` with the release's codec geometry), piece by piece: the same tokens and the same
//! audio before post-processing. And the stream's post-processing against the official one
//! where the two must agree.

use std::path::PathBuf;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};

use super::reference_tests::load;
use super::text::first_piece;
use super::text_tests::assert_close;
use super::{
    cross_fade, Decoding, Generation, PostProcess, Reference, Request, Streamed, Tts,
    FIRST_PIECE_MAX_CHARS, FIRST_PIECE_MIN_CHARS,
};

fn tts() -> Tts {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/omnivoice/clone");
    Tts::load(&dir, DType::F32, &Device::Cpu).unwrap()
}

fn first(text: &str) -> Option<(String, String)> {
    first_piece(text, FIRST_PIECE_MIN_CHARS, FIRST_PIECE_MAX_CHARS)
}

fn pair(a: &str, b: &str) -> Option<(String, String)> {
    Some((a.to_string(), b.to_string()))
}

#[test]
fn the_first_piece_is_the_first_sentence_or_its_first_clauses() {
    assert_eq!(
        first("Hello there. How are you?"),
        pair("Hello there.", "How are you?")
    );
    // Too short alone: the next sentence comes along.
    assert_eq!(
        first("Hi. Nice to see you. Bye."),
        pair("Hi. Nice to see you.", "Bye.")
    );
    // An abbreviation's period ends no sentence; closing marks stay with theirs.
    assert_eq!(
        first("Dr. Smith said \"wait here.\" Then he left."),
        pair("Dr. Smith said \"wait here.\"", "Then he left.")
    );
    // A long sentence is cut at its clauses, keeping what fits.
    let long = "When the long meeting finally ended, everyone stood up at once, \
                and the chairman, who had said nothing all afternoon, cleared his throat loudly. \
                Then silence.";
    let (head, rest) = first(long).unwrap();
    assert_eq!(
        head,
        "When the long meeting finally ended, everyone stood up at once, and the chairman,"
    );
    assert!(head.chars().count() <= FIRST_PIECE_MAX_CHARS);
    assert!(rest.starts_with("who had said nothing"), "{rest}");
    // Chinese punctuation ends sentences too.
    assert_eq!(
        first("你好，今天天气很好。我们去公园吧。"),
        pair("你好，今天天气很好。", "我们去公园吧。")
    );
    // One sentence, or none ended: nothing to cut.
    assert_eq!(first("Just one sentence here."), None);
    assert_eq!(first("no punctuation at all in this text"), None);
    assert_eq!(first(""), None);
}

struct Case {
    request: Request,
    pieces: Vec<String>,
    name: String,
}

fn cases() -> (Vec<Case>, std::collections::HashMap<String, Tensor>) {
    let (tensors, metadata) = load("stream.safetensors");
    let num_step: usize = metadata["num_step"].parse().unwrap();
    let reference = Arc::new(Reference {
        codes: tensors["clone.ref_codes"].clone(),
        text: metadata["ref_text"].clone(),
        rms: metadata["ref_rms"].parse().unwrap(),
    });
    let cases: Vec<serde_json::Value> = serde_json::from_str(&metadata["cases"]).unwrap();
    let cases = cases
        .into_iter()
        .map(|case| {
            let text = |k: &str| case.get(k).and_then(|v| v.as_str()).map(str::to_string);
            Case {
                name: text("name").unwrap(),
                pieces: serde_json::from_value(case["pieces"].clone()).unwrap(),
                request: Request {
                    text: text("text").unwrap(),
                    language: text("language"),
                    instruct: text("instruct"),
                    speed: case
                        .get("speed")
                        .map_or(1.0, |s| s.as_f64().unwrap() as f32),
                    duration: case.get("duration").map(|d| d.as_f64().unwrap() as f32),
                    generation: Generation {
                        decoding: Decoding {
                            num_step,
                            position_temperature: 0.0,
                            class_temperature: 0.0,
                            ..Decoding::default()
                        },
                        ..Generation::default()
                    },
                    reference: case.get("clone").map(|_| reference.clone()),
                    follows: None,
                },
            }
        })
        .collect();
    (cases, tensors)
}

#[test]
fn streamed_pieces_are_the_official_chunked_path_with_our_split() {
    let tts = tts();
    let (cases, official) = cases();
    assert_eq!(cases.len(), 3);
    for case in cases {
        let item = tts.check(&case.request).unwrap();
        let pieces = tts.stream_pieces(&item);
        assert_eq!(pieces, case.pieces, "{}", case.name);
        let mut seen = 0;
        tts.synthesize_pieces(&item, &pieces, 5, tts.model(), &mut |k, codes, audio| {
            let what = format!("{} piece {k}", case.name);
            let tokens = &official[&format!("{}.tokens_{k}", case.name)];
            assert_eq!(
                codes
                    .to_dtype(DType::I64)
                    .unwrap()
                    .to_vec2::<i64>()
                    .unwrap(),
                tokens.to_vec2::<i64>().unwrap(),
                "{what}: tokens"
            );
            let expected: Vec<f32> = official[&format!("{}.audio_{k}", case.name)]
                .to_vec1()
                .unwrap();
            assert_close(&audio, &expected, &what);
            seen += 1;
            true
        })
        .unwrap();
        assert_eq!(seen, pieces.len(), "{}", case.name);
    }
}

/// Speech-like bursts between pauses, peaking at `peak`.
fn bursts(rate: u32, seconds: f32, peak: f32, seed: u32) -> Vec<f32> {
    let n = (rate as f32 * seconds) as usize;
    (0..n)
        .map(|i| {
            let t = i as f32 / rate as f32;
            let gate = ((t * 3.0 + seed as f32 * 0.37).sin() > 0.2) as u8 as f32;
            let edge = (t.min(seconds - t) * 8.0).min(1.0);
            peak * gate * edge * (t * (180.0 + seed as f32 * 20.0) * std::f32::consts::TAU).sin()
        })
        .collect()
}

fn streamed(post: &PostProcess, rms: Option<f32>, pieces: &[Vec<f32>], rate: u32) -> Vec<f32> {
    let mut stream = Streamed::new(post.clone(), rate, rms);
    let last = pieces.len() - 1;
    pieces
        .iter()
        .enumerate()
        .flat_map(|(k, p)| stream.piece(p, k == 0, k == last))
        .collect()
}

#[test]
fn a_stream_is_processed_as_the_whole_where_nothing_depends_on_what_comes_later() {
    let rate = 24_000;
    let pieces = [
        bursts(rate, 1.3, 0.8, 1),
        bursts(rate, 2.1, 0.6, 2),
        bursts(rate, 0.9, 0.5, 3),
    ];
    let untrimmed = PostProcess {
        trim_silence: false,
        ..PostProcess::default()
    };
    let whole = |post: &PostProcess, rms| post.apply(&cross_fade(&pieces, rate), rate, rms);
    // The joins and the ends: exact, with the level of a loud reference (none set) or a
    // quiet one (a fixed scale), or the first piece the loudest (its level is the whole's).
    for rms in [Some(0.3), Some(0.04), None] {
        assert_eq!(
            streamed(&untrimmed, rms, &pieces, rate),
            whole(&untrimmed, rms),
            "{rms:?}"
        );
    }
    // One piece is the whole, trimmed too.
    let post = PostProcess::default();
    let one = &pieces[1..2];
    assert_eq!(
        streamed(&post, None, one, rate),
        post.apply(&one[0], rate, None)
    );
    // A later piece louder than the first is brought down to the whole's ceiling, not over.
    let louder = [bursts(rate, 1.0, 0.2, 4), bursts(rate, 1.0, 0.8, 5)];
    let out = streamed(&untrimmed, None, &louder, rate);
    let peak = out.iter().fold(0f32, |m, x| m.max(x.abs()));
    assert!((peak - 0.5).abs() < 1e-6, "{peak}");
    // Trimmed: a join keeps a pause, and the stream is about as long as the whole.
    let trimmed = streamed(&post, None, &pieces, rate);
    let expected = whole(&post, None).len() as f32;
    assert!(
        (trimmed.len() as f32 / expected - 1.0).abs() < 0.1,
        "{} of {expected}",
        trimmed.len()
    );
}
