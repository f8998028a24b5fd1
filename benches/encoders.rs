//! Every output format's encoder against real time: 10 s of a voice-like signal at the default
//! voice's rate, pushed sentence by sentence as a stream is, then finished. Encoding must
//! outpace synthesis by a wide margin; each format is also given as a ratio to `wav` (a copy
//! into 16-bit samples) measured in the same run (docs/performance.md §15).
//!
//! `cargo bench --bench encoders`

use std::time::Instant;

use omnivoice_server::audio::{stream_encoder, AudioFormat};

#[path = "../tests/common/signal.rs"]
mod signal;

use signal::voice_like;

const RATE: u32 = 22_050;
const SECONDS: f32 = 10.0;
const RUNS: usize = 7;

/// Median seconds to encode `input` as `format`, and the bytes it became.
fn encode(format: AudioFormat, input: &[f32]) -> (f64, usize) {
    let mut times = Vec::with_capacity(RUNS);
    let mut bytes = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut encoder = stream_encoder(format, RATE).expect("an encoder");
        bytes = 0;
        for sentence in input.chunks(RATE as usize * 3 / 2) {
            bytes += encoder.push(sentence).expect("encodes").len();
        }
        bytes += encoder.finish().expect("finishes").len();
        times.push(started.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    (times[RUNS / 2], bytes)
}

fn main() {
    let input = voice_like(SECONDS, RATE);
    let (wav, _) = encode(AudioFormat::Wav, &input);
    println!("| format | ms for {SECONDS} s | × real time | × wav's time | kbit/s |");
    println!("|---|---:|---:|---:|---:|");
    for format in AudioFormat::ALL {
        let (seconds, bytes) = encode(format, &input);
        println!(
            "| {format} | {:.1} | {:.0} | {:.1} | {:.0} |",
            seconds * 1e3,
            f64::from(SECONDS) / seconds,
            seconds / wav,
            bytes as f64 * 8.0 / f64::from(SECONDS) / 1e3
        );
    }
}
