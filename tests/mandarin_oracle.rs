//! Our Mandarin front end against misaki 0.9.4's, the one Kokoro v1.0's Mandarin voices were
//! trained with: the phonemes and Kokoro token ids of each sentence of
//! tests/fixtures/cjk/zh.tsv (written by scripts/cjk_oracle.py from the official packages),
//! without Python. At least 95 % of the sentences must be equal; every difference is printed.

use omnivoice_server::engine::kokoro::vocab::tokenize;
use omnivoice_server::text::mandarin;

const FIXTURE: &str = include_str!("fixtures/cjk/zh.tsv");

#[test]
fn mandarin_phonemes_and_token_ids_equal_misaki_s() {
    if let Some(why) = mandarin::missing() {
        panic!("{why}");
    }
    let mut total = 0;
    let mut differences = Vec::new();
    for line in FIXTURE.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [text, phonemes, ids] = fields[..] else {
            panic!("a row of three fields: {line:?}");
        };
        let ids: Vec<u32> = ids
            .split_whitespace()
            .map(|id| id.parse().unwrap())
            .collect();
        total += 1;
        let ours = mandarin::phonemize(text);
        let our_ids = tokenize(&ours);
        if ours != phonemes || our_ids != ids {
            differences.push(format!(
                "{text}\n  misaki: {phonemes}\n  ours:   {ours}\n  ids equal: {}",
                our_ids == ids
            ));
        }
    }
    assert!(total >= 60, "the corpus has {total} sentences");
    let equal = total - differences.len();
    println!(
        "{equal} of {total} sentences equal misaki's; differences:\n{}",
        differences.join("\n")
    );
    assert!(
        equal * 100 >= total * 95,
        "{equal} of {total} equal (95 % needed):\n{}",
        differences.join("\n")
    );
}
