//! `POST /v1/audio/speech/subtitles` from the real binary with the real Piper voice: WebVTT
//! and SubRip files that a strict reading here and the reference parsers (webvtt-py, srt, in
//! `.venv-api` from `scripts/api-venv.sh`) both accept; cues in order, never overlapping,
//! within the audio of `POST /v1/audio/speech` with the same seed and covering every word's
//! timestamp; and their text the input as written, every word in order.

mod common;

use std::path::Path;

use common::{openai_error, post, post_speech, read_wav, Binary};
use serde_json::{json, Value};

const VOICE: &str = "en_US-joe-medium";
/// A short first sentence with what WebVTT must escape, abbreviations and numbers, and a last
/// sentence too long for one cue.
const INPUT: &str = "Fish & chips <here>. Dr. Smith paid $100 for a naïve café, didn’t he? \
    Yes: 3.5% of the U.S. budget — in 2023, and the rest of the money went to a long list of \
    projects that nobody remembers any more!";
const MAX_LINE_CHARS: usize = 42;
const MAX_CUE_S: f64 = 5.0;
/// Times are written to the millisecond.
const MS: f64 = 0.0005;

fn request(extra: Value) -> Value {
    let mut body = json!({"model": "piper", "voice": VOICE, "input": INPUT,
                          "response_format": "wav", "seed": 11});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    body
}

/// The file and the answer's headers that matter, after checking its media type.
async fn subtitles(url: &str, body: &Value, media_type: &str, extension: &str) -> (String, f64) {
    let response = post(url, "/v1/audio/speech/subtitles", body).await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(
        headers["content-type"],
        format!("{media_type}; charset=utf-8").as_str()
    );
    let disposition = headers["content-disposition"].to_str().unwrap();
    assert!(
        disposition.contains(&format!("speech.{extension}")),
        "{disposition}"
    );
    let duration = headers["x-audio-duration-s"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    (response.text().await.unwrap(), duration)
}

#[derive(Debug, Clone, PartialEq)]
struct Cue {
    start: f64,
    end: f64,
    lines: Vec<String>,
}

/// `HH:MM:SS<sep>mmm`, nothing else.
fn stamp(text: &str, separator: char) -> f64 {
    let bytes = text.as_bytes();
    assert!(
        text.len() == 12
            && bytes[2] == b':'
            && bytes[5] == b':'
            && bytes[8] == separator as u8
            && [0, 1, 3, 4, 6, 7, 9, 10, 11]
                .iter()
                .all(|&i| bytes[i].is_ascii_digit()),
        "bad time {text:?}"
    );
    let number = |range: std::ops::Range<usize>| text[range].parse::<u32>().unwrap();
    let (h, m, s, ms) = (number(0..2), number(3..5), number(6..8), number(9..12));
    assert!(m < 60 && s < 60, "bad time {text:?}");
    f64::from(h * 3600 + m * 60 + s) + f64::from(ms) / 1000.0
}

/// The cue blocks of a file that, after any header, is blocks each ended by a blank line.
fn blocks<'a>(body: &'a str, what: &str) -> Vec<Vec<&'a str>> {
    assert!(
        body.ends_with("\n\n"),
        "{what} does not end with a blank line"
    );
    assert!(!body.contains('\r'), "{what} mixes line endings");
    let body = &body[..body.len() - 2];
    if body.is_empty() {
        return Vec::new();
    }
    body.split("\n\n")
        .map(|block| {
            let lines: Vec<&str> = block.split('\n').collect();
            assert!(
                lines.iter().all(|l| !l.trim().is_empty()),
                "blank line inside a {what} cue: {block:?}"
            );
            lines
        })
        .collect()
}

fn cue(time_line: &str, text: &[&str], separator: char) -> Cue {
    let (start, end) = time_line
        .split_once(" --> ")
        .unwrap_or_else(|| panic!("bad time line {time_line:?}"));
    assert!(
        (1..=2).contains(&text.len()),
        "{} lines in a cue",
        text.len()
    );
    Cue {
        start: stamp(start, separator),
        end: stamp(end, separator),
        lines: text.iter().map(|l| l.to_string()).collect(),
    }
}

/// A strict WebVTT reading: the header, then cues of a time line and one or two text lines,
/// with `&`, `<` and `>` only as character references. The text comes back unescaped.
fn parse_vtt(body: &str) -> Vec<Cue> {
    let rest = body
        .strip_prefix("WEBVTT\n\n")
        .expect("the WEBVTT header and a blank line");
    blocks(rest, "WebVTT")
        .iter()
        .map(|block| {
            let mut cue = cue(block[0], &block[1..], '.');
            for line in &mut cue.lines {
                assert!(!line.contains(['<', '>']), "unescaped markup in {line:?}");
                let unescaped = line
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&");
                assert_eq!(
                    unescaped.matches('&').count(),
                    line.matches("&amp;").count(),
                    "a bare & in {line:?}"
                );
                *line = unescaped;
            }
            cue
        })
        .collect()
}

/// A strict SubRip reading: cues numbered from 1, each a number, a time line and text.
fn parse_srt(body: &str) -> Vec<Cue> {
    blocks(body, "SubRip")
        .iter()
        .enumerate()
        .map(|(i, block)| {
            assert_eq!(block[0], (i + 1).to_string(), "cue number");
            cue(block[1], &block[2..], ',')
        })
        .collect()
}

/// The cues as the reference parser for `extension` reads them.
fn reference_parse(body: &str, extension: &str) -> Vec<Cue> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".venv-api/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/api-venv.sh first",
        python.display()
    );
    let file = tempfile::Builder::new()
        .suffix(&format!(".{extension}"))
        .tempfile()
        .unwrap();
    std::fs::write(file.path(), body).unwrap();
    let output = std::process::Command::new(python)
        .arg(root.join("tests/api-tools/read_subtitles.py"))
        .arg(file.path())
        .output()
        .expect("run the reference parser");
    assert!(
        output.status.success(),
        "the {extension} parser rejected the file:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cues: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    cues.iter()
        .map(|c| Cue {
            start: c["start"].as_f64().unwrap(),
            end: c["end"].as_f64().unwrap(),
            lines: c["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_string())
                .collect(),
        })
        .collect()
}

fn same_cues(ours: &[Cue], theirs: &[Cue], what: &str) {
    assert_eq!(ours.len(), theirs.len(), "{what}: cue count");
    for (a, b) in ours.iter().zip(theirs) {
        assert!(
            (a.start - b.start).abs() < 1e-6 && (a.end - b.end).abs() < 1e-6,
            "{what}: {a:?} vs {b:?}"
        );
        assert_eq!(a.lines, b.lines, "{what}");
    }
}

#[tokio::test]
async fn subtitles_are_valid_files_whose_cues_follow_the_words_and_the_input() {
    let server = Binary::ready(&[]).await;
    let (vtt, vtt_duration) = subtitles(&server.url, &request(json!({})), "text/vtt", "vtt").await;
    let (srt, srt_duration) = subtitles(
        &server.url,
        &request(json!({"subtitle_format": "srt"})),
        "application/x-subrip",
        "srt",
    )
    .await;
    let cues = parse_vtt(&vtt);
    assert_eq!(
        parse_srt(&srt),
        cues,
        "SubRip and WebVTT give the same cues"
    );
    assert_eq!(srt_duration, vtt_duration);

    // Parsers we did not write read the same cues (webvtt-py keeps the escapes).
    let escaped: Vec<Cue> = vtt
        .split("\n\n")
        .skip(1)
        .filter(|b| !b.is_empty())
        .map(|b| {
            let lines: Vec<&str> = b.split('\n').collect();
            cue(lines[0], &lines[1..], '.')
        })
        .collect();
    same_cues(&reference_parse(&vtt, "vtt"), &escaped, "webvtt-py");
    same_cues(&reference_parse(&srt, "srt"), &cues, "srt");

    // The audio they belong to: the plain request with the same seed.
    let mut plain = request(json!({}));
    plain["stream"] = json!(false);
    let audio = post_speech(&server.url, &plain)
        .await
        .bytes()
        .await
        .unwrap();
    let (rate, samples) = read_wav(&audio);
    let duration = samples.len() as f64 / f64::from(rate);
    assert!(
        (duration - vtt_duration).abs() < 0.002,
        "{duration} vs {vtt_duration}"
    );
    let timed: Value = post(
        &server.url,
        "/v1/audio/speech/timestamps",
        &request(json!({})),
    )
    .await
    .json()
    .await
    .unwrap();
    let words = timed["words"].as_array().unwrap();
    assert!(words.len() > 30, "{} words", words.len());

    // In order, never overlapping, within the audio, none too long.
    for cue in &cues {
        assert!(cue.start < cue.end, "{cue:?}");
        assert!(
            cue.end - cue.start <= MAX_CUE_S + MS,
            "{cue:?} lasts too long"
        );
    }
    for pair in cues.windows(2) {
        assert!(pair[0].end <= pair[1].start, "{pair:?} overlap");
    }
    let time = |w: &Value, key: &str| w[key].as_f64().unwrap();
    let first_word = &words[0];
    let last_word = words.last().unwrap();
    assert!((cues[0].start - time(first_word, "start")).abs() <= MS);
    assert!(cues[0].start < 0.3, "{:?}", cues[0]);
    let last = cues.last().unwrap();
    assert!(last.end <= duration + MS && last.end >= time(last_word, "end") - MS);
    // Every word is heard while a cue is up.
    for word in words {
        assert!(
            cues.iter()
                .any(|c| c.start <= time(word, "start") + MS && time(word, "end") <= c.end + MS),
            "no cue shows {word}"
        );
    }

    // The text: the input as written, at most two lines of 42 characters, every word in order.
    let collapsed = INPUT.split_whitespace().collect::<Vec<_>>().join(" ");
    for cue in &cues {
        for line in &cue.lines {
            assert!(line.chars().count() <= MAX_LINE_CHARS, "{line:?}");
        }
        let text = cue.lines.join(" ");
        assert!(collapsed.contains(&text), "{text:?} is not in the input");
    }
    assert_eq!(cues[0].lines, ["Fish & chips <here>."]);
    assert!(vtt.contains("\nFish &amp; chips &lt;here&gt;.\n"), "{vtt}");
    assert!(cues.iter().any(|c| c.lines.len() == 2), "{cues:?}");
    let all = cues
        .iter()
        .map(|c| c.lines.join(" "))
        .collect::<Vec<_>>()
        .join(" ");
    let mut rest = all.as_str();
    for word in words {
        let word = word["word"].as_str().unwrap();
        let at = rest
            .find(word)
            .unwrap_or_else(|| panic!("{word:?} missing or out of order in {all:?}"));
        rest = &rest[at + word.len()..];
    }
    // Sentences never share a cue.
    for cue in &cues {
        let text = cue.lines.join(" ");
        assert!(
            !text.contains("he? Yes") && !text.contains("<here>. Dr"),
            "{text:?}"
        );
    }
}

#[tokio::test]
async fn bad_subtitle_requests_name_their_parameter() {
    let server = Binary::ready(&[]).await;
    let path = "/v1/audio/speech/subtitles";
    let bad_format = post(
        &server.url,
        path,
        &request(json!({"subtitle_format": "ass"})),
    )
    .await;
    let error = openai_error(bad_format, 400).await;
    assert_eq!(error["param"], "subtitle_format");
    assert_eq!(error["code"], "invalid_value");
    // A bad field of the shared speech request is still named as such.
    let bad_speed = post(&server.url, path, &request(json!({"speed": "fast"}))).await;
    assert_eq!(openai_error(bad_speed, 400).await["param"], "speed");
    let empty = post(&server.url, path, &request(json!({"input": "  "}))).await;
    assert_eq!(openai_error(empty, 400).await["param"], "input");
    let mut no_input = request(json!({}));
    no_input.as_object_mut().unwrap().remove("input");
    let missing = post(&server.url, path, &no_input).await;
    assert_eq!(openai_error(missing, 400).await["param"], "input");
    // `null` is the default, WebVTT.
    let (body, _) = subtitles(
        &server.url,
        &request(json!({"subtitle_format": null, "input": "Hello there."})),
        "text/vtt",
        "vtt",
    )
    .await;
    assert_eq!(parse_vtt(&body).len(), 1, "{body}");
}
