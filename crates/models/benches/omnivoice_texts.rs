//! Whole texts at the released model's size (seeded random weights made in memory, the
//! end-to-end fixture's tokenizer): a 3- and a 10-sentence text, each spoken three ways in one
//! run, with the time to its first audio and to its end, and the audio's length:
//! - `whole`: one pass, as the official `generate` and the server's response body speak it;
//! - `stream`: the server's stream, the first sentence alone and then the rest together with it
//!   as their reference ([`Tts::synthesize_streamed`]);
//! - `sentences`: how the server spoke a text before, every sentence an utterance of its own:
//!   the first alone, then the rest stepped together.
//!
//! In the precision a server on this CPU picks. `OMNIVOICE_BENCH_STEPS` (default 32) sets the
//! decoding steps.
//!
//! ```sh
//! cargo bench -p omnivoice-models --bench omnivoice_texts
//! ```

use std::path::PathBuf;
use std::time::Instant;

use omnivoice_models::kernels::Precision;
use omnivoice_models::omnivoice::{
    CodecConfig, CodecDecoder, Decoding, Generation, OmniVoice, Prepared, Request, Tts,
};

#[path = "common/random_omnivoice.rs"]
mod random_omnivoice;
use random_omnivoice::{random_vb, real_config, CODEC_CONFIG};

const THREE: &str = "Thanks for calling the front desk. Your room is ready on the fourth floor, \
                     and breakfast is served until ten. Let me know if you need anything else.";

const TEN: &str = "Good evening, and welcome aboard. My name is Anna, and I will be looking after \
                   you tonight. Our flight time is about two hours. The weather at our \
                   destination is mild, with light rain. Please keep your seat belt fastened \
                   while seated. Drinks and a light meal will be served shortly. Blankets are \
                   available on request. The toilets are at the front and the back of the cabin. \
                   If you need help, press the call button above your seat. Sit back, relax, and \
                   enjoy the flight.";

fn request(text: &str, steps: usize) -> Request {
    Request {
        text: text.to_string(),
        language: Some("en".into()),
        instruct: Some("female, moderate pitch".into()),
        speed: 1.0,
        duration: None,
        generation: Generation {
            decoding: Decoding {
                num_step: steps,
                ..Decoding::default()
            },
            ..Generation::default()
        },
        reference: None,
        follows: None,
    }
}

/// The text's sentences, as the server cut them before (at `. `, `? `, `! `).
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for word in text.split(' ') {
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(word);
        if word.ends_with(['.', '?', '!']) {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Seconds to the first audio and to the end, and seconds of audio.
struct Timing {
    first: f64,
    total: f64,
    audio: f64,
}

fn whole(tts: &Tts, item: &Prepared) -> Timing {
    let started = Instant::now();
    let audio = tts.synthesize(std::slice::from_ref(item), &[1]).unwrap();
    let total = started.elapsed().as_secs_f64();
    Timing {
        first: total,
        total,
        audio: audio[0].len() as f64 / f64::from(tts.sample_rate()),
    }
}

fn stream(tts: &Tts, item: &Prepared) -> Timing {
    let started = Instant::now();
    let mut first = None;
    let mut samples = 0;
    tts.synthesize_streamed(item, 1, tts.model(), &mut |audio, _| {
        first.get_or_insert_with(|| started.elapsed().as_secs_f64());
        samples += audio.len();
        true
    })
    .unwrap();
    Timing {
        first: first.unwrap(),
        total: started.elapsed().as_secs_f64(),
        audio: samples as f64 / f64::from(tts.sample_rate()),
    }
}

fn sentence_by_sentence(tts: &Tts, text: &str, steps: usize) -> Timing {
    let items: Vec<Prepared> = sentences(text)
        .iter()
        .map(|s| tts.check(&request(s, steps)).unwrap())
        .collect();
    let started = Instant::now();
    let head = tts.synthesize(&items[..1], &[1]).unwrap();
    let first = started.elapsed().as_secs_f64();
    let seeds: Vec<u64> = (2..=items.len() as u64).collect();
    let rest = tts.synthesize(&items[1..], &seeds).unwrap();
    let samples: usize = head.iter().chain(&rest).map(Vec::len).sum();
    Timing {
        first,
        total: started.elapsed().as_secs_f64(),
        // With the server's 0.2 s sentence pauses between them.
        audio: samples as f64 / f64::from(tts.sample_rate()) + 0.2 * rest.len() as f64,
    }
}

fn main() {
    let steps: usize = std::env::var("OMNIVOICE_BENCH_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let precision = Precision::auto();
    let model = OmniVoice::load(&real_config(), random_vb())
        .and_then(|m| m.with_precision(precision))
        .unwrap();
    let codec_config = CodecConfig::from_json(CODEC_CONFIG).unwrap();
    let codec = CodecDecoder::load(&codec_config, random_vb()).unwrap();
    let tokenizer = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/omnivoice/e2e/tokenizer.json");
    let tokenizer = tokenizers::Tokenizer::from_file(tokenizer).unwrap();
    let tts = Tts::from_parts(model, codec, tokenizer);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "OmniVoice texts, real size, seeded random weights, {steps} steps, guidance 2; {}; \
         {cores} cores",
        precision.describe()
    );
    println!(
        "{:<12} {:<10} {:>11} {:>9} {:>9}",
        "text", "how", "first (s)", "end (s)", "audio (s)"
    );
    for (name, text) in [("3 sentences", THREE), ("10 sentences", TEN)] {
        let item = tts.check(&request(text, steps)).unwrap();
        for (how, timing) in [
            ("whole", whole(&tts, &item)),
            ("stream", stream(&tts, &item)),
            ("sentences", sentence_by_sentence(&tts, text, steps)),
        ] {
            println!(
                "{name:<12} {how:<10} {:>11.2} {:>9.2} {:>9.2}",
                timing.first, timing.total, timing.audio
            );
        }
    }
}
