//! Every response format, chunked streaming, SSE and long inputs over real HTTP with the real
//! Piper voice; every body is decoded by a real decoder.

mod common;

use std::time::Instant;

use base64::Engine as _;
use common::decode::decode;
use common::{openai_error, post_speech, read_wav, Binary};
use futures::StreamExt;
use omnivoice_server::audio::AudioFormat;
use serde_json::{json, Value};

const TEXT: &str = "Every format should carry the same speech. This is the second sentence of it.";

fn request(format: &str, stream: bool) -> Value {
    json!({"model": "piper", "voice": "en_US-joe-medium", "input": TEXT, "response_format": format,
           "seed": 5, "stream": stream})
}

fn expected_decoded_rate(format: AudioFormat) -> u32 {
    match format {
        AudioFormat::Opus => 48_000, // Opus always decodes at 48 kHz; OpusHead records 24 kHz
        AudioFormat::Pcm => 24_000,
        _ => 22_050,
    }
}

#[tokio::test]
async fn every_format_decodes_to_the_wav_duration_whole_and_streamed() {
    let server = Binary::ready(&["--no-cache"]).await;
    let wav = post_speech(&server.url, &request("wav", false)).await;
    assert_eq!(wav.status(), 200);
    let (rate, samples) = read_wav(&wav.bytes().await.unwrap());
    let reference = samples.len() as f64 / rate as f64;
    assert!(reference > 2.0, "{reference} s");

    for format in AudioFormat::ALL {
        for stream in [false, true] {
            let response = post_speech(&server.url, &request(format.as_str(), stream)).await;
            assert_eq!(response.status(), 200, "{format} stream={stream}");
            let headers = response.headers().clone();
            assert_eq!(headers["content-type"], format.content_type());
            assert!(headers["content-disposition"]
                .to_str()
                .unwrap()
                .contains(format.extension()));
            assert_eq!(
                stream,
                !headers.contains_key("content-length"),
                "{format}: chunked iff streamed"
            );
            let header_rate: u32 = headers["x-audio-sample-rate"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(header_rate, format.output_sample_rate(22_050), "{format}");
            let decoded = decode(format, &response.bytes().await.unwrap());
            assert_eq!(decoded.rate, expected_decoded_rate(format), "{format}");
            let duration = decoded.samples.len() as f64 / decoded.rate as f64;
            let error = (duration - reference).abs() / reference;
            assert!(
                error < 0.05,
                "{format} stream={stream}: {duration:.3} s vs WAV {reference:.3} s"
            );
            let peak = decoded.samples.iter().fold(0f32, |m, s| m.max(s.abs()));
            assert!(
                peak > 0.05,
                "{format} stream={stream}: speech, not silence (peak {peak})"
            );
        }
    }
}

fn long_input() -> String {
    let sentences = [
        "Streaming matters when the text is long.",
        "A listener should hear the first sentence while the rest is still being synthesized.",
        "That is what chunked transfer encoding gives an HTTP client.",
        "Each chunk is a piece of one valid audio file.",
        "When the stream ends, the pieces together are the whole file.",
    ];
    let mut text = String::new();
    while text.len() < 1000 {
        for s in sentences {
            text.push_str(s);
            text.push(' ');
        }
    }
    text.trim().to_string()
}

#[tokio::test]
async fn a_long_stream_starts_early_and_concatenates_to_a_valid_file() {
    let server = Binary::ready(&[]).await;
    let body = json!({"model": "piper", "voice": "en_US-joe-medium", "input": long_input(),
                      "response_format": "mp3", "seed": 1});
    let started = Instant::now();
    let response = post_speech(&server.url, &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["transfer-encoding"], "chunked");
    let mut chunks = response.bytes_stream();
    let mut first_byte = None;
    let mut file = Vec::new();
    let mut count = 0;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.unwrap();
        if !chunk.is_empty() {
            first_byte.get_or_insert_with(|| started.elapsed());
            count += 1;
        }
        file.extend_from_slice(&chunk);
    }
    let total = started.elapsed();
    let ratio = first_byte.unwrap().as_secs_f64() / total.as_secs_f64();
    assert!(
        ratio < 0.5,
        "first byte after {:?} of {total:?} (ratio {ratio:.2})",
        first_byte.unwrap()
    );
    assert!(count > 5, "{count} chunks");
    let decoded = decode(AudioFormat::Mp3, &file);
    let seconds = decoded.samples.len() as f64 / decoded.rate as f64;
    assert!(seconds > 40.0, "the whole text was spoken: {seconds:.1} s");

    // The completed stream was stored: a repeat is a cache hit with the same bytes.
    let again = post_speech(&server.url, &body).await;
    assert_eq!(again.headers()["x-cache"], "HIT");
    assert_eq!(again.bytes().await.unwrap().as_ref(), file.as_slice());
}

#[tokio::test]
async fn sse_events_carry_base64_audio_and_end_with_usage() {
    let server = Binary::ready(&[]).await;
    let mut body = request("pcm", true);
    body["stream_format"] = json!("sse");
    let response = post_speech(&server.url, &body).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let text = response.text().await.unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("each event is JSON"))
        .collect();
    let (done, deltas) = events.split_last().expect("events");
    assert_eq!(done["type"], "speech.audio.done");
    assert!(done["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(
        deltas.len() >= 2,
        "one delta per sentence at least: {}",
        deltas.len()
    );
    let mut pcm = Vec::new();
    for delta in deltas {
        assert_eq!(delta["type"], "speech.audio.delta");
        pcm.extend(
            base64::engine::general_purpose::STANDARD
                .decode(delta["audio"].as_str().unwrap())
                .unwrap(),
        );
    }
    let decoded = decode(AudioFormat::Pcm, &pcm);
    let seconds = decoded.samples.len() as f64 / 24_000.0;
    assert!(seconds > 2.0, "{seconds} s of audio in the events");
    // Usage counts what these engines have: input characters and output samples.
    let output = done["usage"]["output_tokens"].as_u64().unwrap() as f64;
    let sent = decoded.samples.len() as f64;
    assert!(
        (output - sent).abs() <= sent * 0.01,
        "output_tokens {output} vs {sent} samples sent"
    );
    assert_eq!(
        done["usage"]["total_tokens"].as_u64().unwrap(),
        done["usage"]["input_tokens"].as_u64().unwrap() + output as u64
    );
}

#[tokio::test]
async fn input_at_the_limit_is_spoken_and_one_more_character_is_a_400() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let sentence = "Long inputs are split into sentences before synthesis. ";
    let mut input: String = sentence.repeat(4096 / sentence.len() + 1);
    input.truncate(4096);
    let body = |input: &str| json!({"model": "espeak", "voice": "en-us", "input": input, "response_format": "wav", "stream": false});
    let response = post_speech(&server.url, &body(&input)).await;
    assert_eq!(response.status(), 200);
    let (rate, samples) = read_wav(&response.bytes().await.unwrap());
    assert!(
        samples.len() as f64 / rate as f64 > 120.0,
        "all of it was spoken"
    );
    input.push('x');
    let error = openai_error(post_speech(&server.url, &body(&input)).await, 400).await;
    assert_eq!(error["param"], "input");
}

/// A single long sentence streamed arrives in several pieces before its end is computed, and
/// the pieces are the same audio as the whole body with the same seed (windowed synthesis
/// of one utterance equals whole-utterance synthesis).
#[tokio::test]
async fn a_long_sentence_streams_in_pieces_that_equal_the_whole_body() {
    let server = Binary::ready(&["--no-cache"]).await;
    let sentence = "The old lighthouse keeper walked slowly along the narrow rocky path that \
                    wound its way up the steep green hill toward the tall white tower where he \
                    had spent nearly forty years watching the great ships pass by at night";
    let body = |stream: bool| {
        json!({"model": "piper", "voice": "en_US-joe-medium", "input": sentence,
               "response_format": "wav", "seed": 11, "stream": stream})
    };
    let whole = post_speech(&server.url, &body(false)).await;
    let (rate, whole) = read_wav(&whole.bytes().await.unwrap());
    // Read off the wire: the chunked framing keeps the server's pieces apart, however TCP
    // and the client group the bytes.
    let (status, chunks) = chunked_post(&server.url, "/v1/audio/speech", &body(true)).await;
    assert_eq!(status, 200);
    let arrivals = chunks.iter().filter(|c| !c.is_empty()).count();
    // 16 frames first, then 128 at a time: a 9-second sentence is more than five pieces.
    assert!(arrivals > 5, "only {arrivals} chunks for one long sentence");
    let bytes: Vec<u8> = chunks.concat();
    // A streamed WAV header cannot know its length: a real decoder reads it to the end.
    let streamed = decode(AudioFormat::Wav, &bytes);
    assert_eq!(streamed.rate, rate);
    assert_eq!(streamed.samples.len(), whole.len());
    let lsb = 1.0 / 32768.0;
    let largest = streamed
        .samples
        .iter()
        .zip(&whole)
        .map(|(a, b)| (a - f32::from(*b) * lsb).abs())
        .fold(0.0f32, f32::max);
    assert!(
        largest <= 1.5 * lsb,
        "streamed and whole samples differ by {} LSB",
        largest / lsb
    );
}

/// POSTs `body` over a plain HTTP/1.1 connection and returns the status and the chunks of
/// its chunked body, as the server framed them.
async fn chunked_post(url: &str, path: &str, body: &Value) -> (u16, Vec<Vec<u8>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(host).await.unwrap();
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    socket.read_to_end(&mut raw).await.unwrap();
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block")
        + 4;
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let status: u16 = head[9..12].parse().unwrap();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let mut chunks = Vec::new();
    let mut at = head_end;
    loop {
        let line_end = at + raw[at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = String::from_utf8_lossy(&raw[at..line_end]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        at = line_end + 2;
        if size == 0 {
            return (status, chunks);
        }
        chunks.push(raw[at..at + size].to_vec());
        at += size + 2;
    }
}
