//! Load generator for a running omnivoice-server: N speech requests at concurrency C.
//!
//! Performance claims in docs/performance.md come from this tool driving the real server over
//! HTTP, never from timed tests. It prints requests per second, seconds of audio produced per
//! wall-clock second, latency percentiles and time to first byte.
//!
//! Example: `cargo run --release --bin loadgen -- --url http://127.0.0.1:8880 -n 64 -c 16 --unique`
//!
//! Several replicas: `--url A,B` sends request i to the i-th URL in turn, and `--distinct K`
//! repeats K texts, so the `X-Cache`/`X-Cache-Layer` tally shows how often one replica's
//! synthesis answered another's request. Text i % K goes to URL i % N: pick K and N without
//! a common factor, or each text only ever reaches one replica.
//!
//! `--api piper` drives Piper's own HTTP server (`python -m piper.http_server`, `POST
//! /synthesize`) with the same texts, for the peer comparison of `scripts/bench-vs-piper.sh`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use futures::StreamExt;
use hdrhistogram::Histogram;

#[derive(Debug, Parser)]
#[command(
    name = "loadgen",
    about = "Drive an omnivoice-server with speech requests"
)]
struct Args {
    /// Base URL of the server; several (comma-separated) take requests in turn.
    #[arg(long, default_value = "http://127.0.0.1:8880", value_delimiter = ',')]
    url: Vec<String>,
    /// Total requests to send.
    #[arg(short = 'n', long, default_value_t = 32)]
    requests: usize,
    /// Requests in flight at once.
    #[arg(short = 'c', long, default_value_t = 4)]
    concurrency: usize,
    /// Make every request's text different (defeats the cache); otherwise all repeat one text.
    #[arg(long)]
    unique: bool,
    /// Cycle through this many different texts (a number is appended); overrides --unique.
    #[arg(long)]
    distinct: Option<usize>,
    /// Text to speak (a number is appended with --unique).
    #[arg(
        long,
        default_value = "The quick brown fox jumps over the lazy dog near the river bank."
    )]
    text: String,
    #[arg(long, default_value = "piper")]
    model: String,
    #[arg(long, default_value = "en_US-joe-medium")]
    voice: String,
    #[arg(long, default_value = "wav")]
    format: String,
    /// Ask for a chunked (streamed) response; time to first byte then shows early audio.
    #[arg(long)]
    stream: bool,
    /// Bearer token, if the server requires one.
    #[arg(long)]
    api_key: Option<String>,
    /// Requests sent (and not counted) before measuring, e.g. to fill the cache.
    #[arg(long, default_value_t = 0)]
    warmup: usize,
    /// Which server's request shape to send.
    #[arg(long, value_enum, default_value_t = Api::Openai)]
    api: Api,
}

/// The request shapes loadgen can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Api {
    /// This server's `POST /v1/audio/speech` (OpenAI's shape).
    Openai,
    /// Piper's HTTP server: `POST /synthesize` with `{"text"}`, answered with a WAV body in the
    /// voice's own settings (`--model`, `--voice`, `--format` and `--stream` do not apply).
    Piper,
}

struct Sample {
    latency: Duration,
    first_byte: Duration,
    audio_s: f64,
    ok: bool,
    /// `X-Cache`, with `/` and `X-Cache-Layer` when the answer names one.
    cache: String,
}

#[tokio::main]
async fn main() {
    let args = Arc::new(Args::parse());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()
        .expect("HTTP client");
    for i in 0..args.warmup {
        one_request(&client, &args, i).await;
    }

    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..args.concurrency.max(1))
        .map(|_| {
            let (client, args, next) = (client.clone(), args.clone(), next.clone());
            tokio::spawn(async move {
                let mut samples = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= args.requests {
                        return samples;
                    }
                    samples.push(one_request(&client, &args, i).await);
                }
            })
        })
        .collect();
    let mut samples = Vec::new();
    for worker in workers {
        samples.extend(worker.await.expect("worker"));
    }
    let wall = started.elapsed().as_secs_f64();
    report(&args, &samples, wall);
}

async fn one_request(client: &reqwest::Client, args: &Args, i: usize) -> Sample {
    let input = match (args.distinct, args.unique) {
        (Some(k), _) => format!("{} Number {}.", args.text, i % k.max(1)),
        (None, true) => format!("{} Number {i}.", args.text),
        (None, false) => args.text.clone(),
    };
    let url = &args.url[i % args.url.len()];
    let mut request = match args.api {
        Api::Openai => client
            .post(format!("{url}/v1/audio/speech"))
            .json(&serde_json::json!({
                "model": args.model, "voice": args.voice, "input": input,
                "response_format": args.format, "stream": args.stream,
            })),
        Api::Piper => client
            .post(format!("{url}/synthesize"))
            .json(&serde_json::json!({ "text": input })),
    };
    if let Some(key) = &args.api_key {
        request = request.bearer_auth(key);
    }
    let started = Instant::now();
    let failed = |started: Instant| Sample {
        latency: started.elapsed(),
        first_byte: started.elapsed(),
        audio_s: 0.0,
        ok: false,
        cache: String::new(),
    };
    let Ok(response) = request.send().await else {
        return failed(started);
    };
    if !response.status().is_success() {
        return failed(started);
    }
    let header_audio: Option<f64> = response
        .headers()
        .get("x-audio-duration-s")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let cache = match (header("x-cache"), header("x-cache-layer")) {
        (Some(status), Some(layer)) => format!("{status}/{layer}"),
        (status, _) => status.unwrap_or_else(|| "-".into()),
    };
    let bytes_per_second = match args.api {
        Api::Openai => bytes_per_audio_second(&args.format),
        Api::Piper => bytes_per_audio_second("wav"),
    };
    let mut first_byte = None;
    let mut bytes = 0usize;
    let mut head = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return failed(started);
        };
        first_byte.get_or_insert_with(|| started.elapsed());
        bytes += chunk.len();
        if head.len() < WAV_HEADER_BYTES {
            let take = chunk.len().min(WAV_HEADER_BYTES - head.len());
            head.extend_from_slice(&chunk[..take]);
        }
    }
    let latency = started.elapsed();
    // Streamed responses, and other servers' answers, carry no duration header; a WAV says its
    // own byte rate (a Kokoro voice is 24 kHz, a Piper voice 22.05 kHz), other uncompressed
    // formats give it by size.
    let audio_s = header_audio
        .or_else(|| wav_byte_rate(&head).map(|r| bytes.saturating_sub(WAV_HEADER_BYTES) as f64 / r))
        .or_else(|| bytes_per_second.map(|r| bytes as f64 / r))
        .unwrap_or(0.0);
    Sample {
        latency,
        first_byte: first_byte.unwrap_or(latency),
        audio_s,
        ok: true,
        cache,
    }
}

/// The canonical PCM WAV header: `RIFF`, `WAVE`, a 16-byte `fmt ` chunk, then `data`.
const WAV_HEADER_BYTES: usize = 44;

/// Bytes per second of audio from a canonical WAV header, if `head` starts with one.
fn wav_byte_rate(head: &[u8]) -> Option<f64> {
    if head.len() < WAV_HEADER_BYTES || &head[..4] != b"RIFF" || &head[8..12] != b"WAVE" {
        return None;
    }
    let rate = u32::from_le_bytes(head[28..32].try_into().ok()?);
    (rate > 0).then_some(f64::from(rate))
}

fn bytes_per_audio_second(format: &str) -> Option<f64> {
    match format {
        "wav" => Some(22050.0 * 2.0),
        "pcm" => Some(24000.0 * 2.0),
        _ => None,
    }
}

fn report(args: &Args, samples: &[Sample], wall: f64) {
    let ok: Vec<&Sample> = samples.iter().filter(|s| s.ok).collect();
    let mut latency = Histogram::<u64>::new(3).expect("histogram");
    let mut ttfb = Histogram::<u64>::new(3).expect("histogram");
    for s in &ok {
        latency
            .record(s.latency.as_micros() as u64)
            .expect("latency fits");
        ttfb.record(s.first_byte.as_micros() as u64)
            .expect("ttfb fits");
    }
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let audio: f64 = ok.iter().map(|s| s.audio_s).sum();
    println!(
        "requests={} concurrency={} unique={} stream={} format={} ok={} failed={}",
        args.requests,
        args.concurrency,
        args.unique,
        args.stream,
        args.format,
        ok.len(),
        samples.len() - ok.len()
    );
    println!(
        "wall_s={wall:.3} req_per_s={:.2} audio_s_per_wall_s={:.2}",
        ok.len() as f64 / wall,
        audio / wall
    );
    println!(
        "latency_ms p50={:.1} p95={:.1} p99={:.1} | ttfb_ms p50={:.1} p95={:.1} p99={:.1}",
        ms(&latency, 0.5),
        ms(&latency, 0.95),
        ms(&latency, 0.99),
        ms(&ttfb, 0.5),
        ms(&ttfb, 0.95),
        ms(&ttfb, 0.99)
    );
    // Per request: how far into the response its first byte came (the streaming goal).
    let mut fractions: Vec<f64> = ok
        .iter()
        .map(|s| s.first_byte.as_secs_f64() / s.latency.as_secs_f64().max(1e-9))
        .collect();
    fractions.sort_by(f64::total_cmp);
    if let (Some(&min), Some(&max)) = (fractions.first(), fractions.last()) {
        println!(
            "first_byte_fraction p50={:.3} min={min:.3} max={max:.3}",
            fractions[fractions.len() / 2]
        );
    }
    let mut tally = BTreeMap::<&str, usize>::new();
    for s in &ok {
        *tally.entry(s.cache.as_str()).or_default() += 1;
    }
    let tally: Vec<String> = tally.iter().map(|(k, n)| format!("{k}={n}")).collect();
    println!("cache {}", tally.join(" "));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(rate: u32, channels: u16) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(b"RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0");
        h.extend_from_slice(&channels.to_le_bytes());
        h.extend_from_slice(&rate.to_le_bytes());
        h.extend_from_slice(&(rate * 2 * u32::from(channels)).to_le_bytes());
        h.extend_from_slice(&(2 * channels).to_le_bytes());
        h.extend_from_slice(b"\x10\0data\0\0\0\0");
        h
    }

    #[test]
    fn a_wav_header_gives_its_own_byte_rate() {
        assert_eq!(header(24_000, 1).len(), WAV_HEADER_BYTES);
        assert_eq!(wav_byte_rate(&header(24_000, 1)), Some(48_000.0));
        assert_eq!(wav_byte_rate(&header(22_050, 2)), Some(88_200.0));
        assert_eq!(wav_byte_rate(&header(24_000, 1)[..40]), None);
        assert_eq!(wav_byte_rate(&[0u8; 44]), None);
    }
}
