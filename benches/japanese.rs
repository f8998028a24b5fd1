//! The Japanese front end (src/text/japanese/) against misaki 0.9.4's, in the same run: the
//! dictionary's open time and the memory it takes, and the time per sentence over the 64
//! sentences of tests/fixtures/cjk/ja-corpus.txt (median of 7 passes each side; misaki through
//! scripts/cjk_oracle_ja.py in .venv-cjk-ja, made by scripts/cjk-ja-venv.sh). With a file
//! argument, prints our phonemes of each of its lines instead (to compare with
//! `cjk_oracle_ja.py --stdin` by hand). docs/performance.md §19.
//!
//! `cargo bench --bench japanese` (needs scripts/japanese-dictionary.sh's dictionary)

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use omnivoice_server::text::japanese::JapaneseG2p;

const PASSES: usize = 7;

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// This process's resident memory in KiB (Linux).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// misaki's median seconds for one pass over `sentences`, as its script reports it.
fn misaki_pass(root: &Path, sentences: &[&str]) -> Option<f64> {
    let python = root.join(".venv-cjk-ja/bin/python");
    if !python.is_file() {
        eprintln!("no .venv-cjk-ja: run scripts/cjk-ja-venv.sh for misaki's side");
        return None;
    }
    let mut child = Command::new(python)
        .arg(root.join("scripts/cjk_oracle_ja.py"))
        .arg("--stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    use std::io::Write as _;
    child
        .stdin
        .take()?
        .write_all(sentences.join("\n").as_bytes())
        .ok()?;
    let output = child.wait_with_output().ok()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("misaki: "))
        .and_then(|l| l.split(" in ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|s| s.parse().ok())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("voices/kokoro/japanese");
    let rss_before = rss_kib();
    let mut opens = Vec::new();
    let mut g2p = None;
    for _ in 0..PASSES {
        let started = Instant::now();
        g2p = Some(JapaneseG2p::open(&dir).expect("run scripts/japanese-dictionary.sh"));
        opens.push(started.elapsed().as_secs_f64());
    }
    let g2p = g2p.unwrap();
    let rss_open = rss_kib();

    if let Some(file) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            println!("{}", g2p.phonemize(line));
        }
        return;
    }

    let corpus = std::fs::read_to_string(root.join("tests/fixtures/cjk/ja-corpus.txt")).unwrap();
    let sentences: Vec<&str> = corpus.lines().filter(|l| !l.trim().is_empty()).collect();
    g2p.phonemize(sentences[0]);
    let passes: Vec<f64> = (0..PASSES)
        .map(|_| {
            let started = Instant::now();
            for sentence in &sentences {
                std::hint::black_box(g2p.phonemize(sentence));
            }
            started.elapsed().as_secs_f64()
        })
        .collect();
    let ours = median(passes) / sentences.len() as f64;
    let rss_used = rss_kib();

    println!(
        "dictionary: {:.0} MiB mapped, {} whole words; open {:.1} ms (median of {PASSES})",
        g2p.dictionary_bytes() as f64 / (1 << 20) as f64,
        g2p.whole_words(),
        median(opens) * 1e3
    );
    println!(
        "resident: +{:.1} MiB after open, +{:.1} MiB after the corpus",
        (rss_open.saturating_sub(rss_before)) as f64 / 1024.0,
        (rss_used.saturating_sub(rss_before)) as f64 / 1024.0
    );
    println!(
        "ours: {:.1} µs per sentence ({} sentences, median of {PASSES} passes)",
        ours * 1e6,
        sentences.len()
    );
    if let Some(pass) = misaki_pass(root, &sentences) {
        let theirs = pass / sentences.len() as f64;
        println!(
            "misaki 0.9.4: {:.1} µs per sentence; ours takes {:.2}× its time",
            theirs * 1e6,
            ours / theirs
        );
    }
}
