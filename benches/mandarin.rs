//! The Mandarin front end (`text::mandarin`): its dictionaries' load time and resident size,
//! and its time per sentence over the oracle corpus (tests/fixtures/cjk/zh-corpus.txt), for
//! scripts/bench-mandarin.sh, which times misaki 0.9.4 on the same sentences in the same run.
//! Prints one `key: value` line per figure.

use std::time::Instant;

use omnivoice_server::text::mandarin;

const CORPUS: &str = include_str!("../tests/fixtures/cjk/zh-corpus.txt");
const ROUNDS: usize = 21;

/// The process's resident set, in bytes (Linux).
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let sentences: Vec<&str> = CORPUS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let before = resident_bytes();
    let started = Instant::now();
    mandarin::preload().expect("the pinyin tables (scripts/mandarin-assets.sh)");
    let load = started.elapsed().as_secs_f64();
    let after = resident_bytes();
    println!("dictionary load: {:.1} ms", load * 1e3);
    println!(
        "dictionary resident: {:.1} MiB",
        (after.saturating_sub(before)) as f64 / (1 << 20) as f64
    );
    let mut per_sentence = Vec::with_capacity(ROUNDS);
    let mut symbols = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for sentence in &sentences {
            symbols += std::hint::black_box(mandarin::phonemize(sentence)).len();
        }
        per_sentence.push(started.elapsed().as_secs_f64() / sentences.len() as f64);
    }
    assert!(symbols > 0);
    println!("sentences: {}", sentences.len());
    println!(
        "per sentence (median of {ROUNDS} rounds): {:.1} µs",
        median(per_sentence) * 1e6
    );
}
