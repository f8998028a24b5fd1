//! Tests of the Piper engine and voice: the voices directory, phoneme types, and audio in
//! pieces that joins to the whole.

use std::path::Path;

use super::scan::voice_info;
use super::voice::{ids_per_pass, MIN_IDS_PER_PASS};
use super::*;
use crate::engine::{Pcm, SynthesisItem};
use crate::params::SynthesisParams;
use crate::text::phonemize::phonemize;
use omnivoice_models::vits::{Sampling, VitsInput};

/// Pieces of a long sentence, and of one split into several passes, joined equal the
/// whole-item audio with the same seed, and carry the same word timings at the end.
/// `item`'s audio computed whole.
fn whole_of(voice: &impl Voice, item: &SynthesisItem) -> Pcm {
    let mut whole = None;
    voice
        .synthesize_each(std::slice::from_ref(item), &mut |_, pcm| whole = Some(pcm))
        .unwrap();
    whole.expect("audio")
}

/// `item`'s audio computed in pieces, as a stream takes it.
fn pieces_of(voice: &impl Voice, item: &SynthesisItem) -> Vec<Pcm> {
    let mut pieces = Vec::new();
    voice
        .synthesize_in_pieces(item, &mut |pcm| {
            pieces.push(pcm);
            true
        })
        .unwrap();
    pieces
}

#[test]
fn pieces_join_to_the_whole_item_with_its_words() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/voices");
    let voice = PiperEngine::new(dir, Device::Cpu)
        .load("en_US-joe-medium")
        .expect("the default voice in voices/");
    let long = "The old lighthouse keeper walked slowly along the narrow rocky path that \
                wound its way up the steep green hill toward the tall white tower.";
    let many_passes = "word ".repeat(400);
    for (text, noise) in [
        (long, Some(0.0)),
        (long, None),
        (many_passes.as_str(), None),
    ] {
        let item = SynthesisItem {
            text: text.to_string(),
            params: SynthesisParams {
                seed: Some(7),
                noise_scale: noise,
                ..SynthesisParams::default()
            },
            word_timings: true,
            in_pieces: true,
            pronunciations: Vec::new(),
            language: None,
            continuation: Default::default(),
            phrase_end: None,
        };
        let whole = whole_of(&voice, &item);
        let pieces = pieces_of(&voice, &item);
        assert!(pieces.len() > 2, "{} pieces", pieces.len());
        let joined: Vec<f32> = pieces.iter().flat_map(|p| p.samples.clone()).collect();
        assert_eq!(joined.len(), whole.samples.len());
        let diff = joined
            .iter()
            .zip(&whole.samples)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-4, "largest difference {diff}");
        // One piece carries the words, as soon as the last pass's durations are known:
        // with the very first audio when the item is one pass.
        let carriers: Vec<usize> = (0..pieces.len())
            .filter(|&i| pieces[i].words.is_some())
            .collect();
        assert_eq!(carriers.len(), 1, "words on pieces {carriers:?}");
        let words = pieces[carriers[0]].words.clone();
        assert!(words.as_ref().is_some_and(|w| !w.is_empty()));
        assert_eq!(words, whole.words);
        if text == long {
            assert_eq!(carriers, [0]);
        } else {
            assert!(
                carriers[0] > 0,
                "a split item's words wait for its last pass"
            );
        }
    }
    // A listener that goes away stops the computation after its answer.
    let mut calls = 0;
    voice
        .synthesize_in_pieces(&SynthesisItem::new(long), &mut |_| {
            calls += 1;
            false
        })
        .unwrap();
    assert_eq!(calls, 1);
}

fn joe_config() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/voices/en_US-joe-medium.onnx.json"
    );
    read_json(Path::new(path)).expect("the default voice's config in voices/")
}

/// joe's config as a `text` voice: its ids for the ASCII characters its IPA map has (the
/// letters but `g`, which IPA writes `ɡ`), so that letters are close to their sounds.
fn letters_config() -> serde_json::Value {
    let mut config = joe_config();
    let joe = config["phoneme_id_map"].as_object().unwrap().clone();
    let mut letters: serde_json::Map<String, serde_json::Value> = joe
        .iter()
        .filter(|(key, _)| key.is_ascii())
        .map(|(key, ids)| (key.clone(), ids.clone()))
        .collect();
    letters.insert("g".into(), joe["ɡ"].clone());
    config["phoneme_id_map"] = letters.into();
    config["phoneme_type"] = "text".into();
    config
}

/// A voices directory of joe's model (linked) under each name, with each one's config.
fn voices_with(configs: &[(&str, serde_json::Value)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/voices/en_US-joe-medium.onnx");
    for (name, config) in configs {
        std::os::unix::fs::symlink(model, dir.path().join(format!("{name}.onnx"))).unwrap();
        let json = dir.path().join(format!("{name}.onnx.json"));
        std::fs::write(json, config.to_string()).unwrap();
    }
    dir
}

fn with_type(phoneme_type: serde_json::Value) -> serde_json::Value {
    let mut config = joe_config();
    config["phoneme_type"] = phoneme_type;
    config
}

#[test]
fn phoneme_type_is_read_from_the_config() {
    let of = |config: serde_json::Value| PhonemeType::of(&config);
    assert_eq!(of(serde_json::json!({})), Ok(PhonemeType::Espeak));
    assert_eq!(
        of(serde_json::json!({"phoneme_type": "espeak"})),
        Ok(PhonemeType::Espeak)
    );
    assert_eq!(
        of(serde_json::json!({"phoneme_type": "text"})),
        Ok(PhonemeType::Text)
    );
    let pinyin = of(serde_json::json!({"phoneme_type": "pinyin"})).unwrap_err();
    assert!(
        pinyin.starts_with(
            "phoneme_type 'pinyin' is not supported by this server; the voice would be misread"
        ) && pinyin.contains("g2pW"),
        "{pinyin}"
    );
    for (name, reader) in [("japanese", "OpenJTalk"), ("hebrew", "Nakdimon")] {
        let why = of(serde_json::json!({ "phoneme_type": name })).unwrap_err();
        assert!(
            why.starts_with(&format!("phoneme_type '{name}' is not supported"))
                && why.contains(reader),
            "{why}"
        );
    }
    // Names are exact, and anything else is refused too: never read as espeak.
    for refused in [
        serde_json::json!("Espeak"),
        serde_json::json!("openjtalk"),
        serde_json::json!(""),
        serde_json::json!(null),
        serde_json::json!(3),
        serde_json::json!(["espeak"]),
    ] {
        let why = of(serde_json::json!({ "phoneme_type": refused })).unwrap_err();
        assert!(
            why.starts_with("phoneme_type ") && why.ends_with("the voice would be misread"),
            "{refused}: {why}"
        );
    }
    let long = "x\n".repeat(100);
    let why = of(serde_json::json!({ "phoneme_type": long })).unwrap_err();
    assert!(why.len() < 200 && !why.contains('\n'), "{why}");
}

#[test]
fn voices_of_other_phoneme_types_are_listed_but_never_loaded() {
    let mut no_type = joe_config();
    no_type.as_object_mut().unwrap().remove("phoneme_type");
    let dir = voices_with(&[
        ("espeak", with_type("espeak".into())),
        ("untyped", no_type),
        ("letters", letters_config()),
        ("zh", with_type("pinyin".into())),
        ("ja", with_type("japanese".into())),
        ("odd", with_type(7.into())),
    ]);
    let engine = PiperEngine::new(dir.path(), Device::Cpu);
    let listed: BTreeMap<String, Option<String>> = engine
        .voices()
        .into_iter()
        .map(|v| (v.id, v.unsupported))
        .collect();
    assert_eq!(listed.len(), 6, "{listed:?}");
    for id in ["espeak", "untyped", "letters"] {
        assert_eq!(listed[id], None, "{id}");
        assert!(engine.find_voice(id).is_some(), "{id}");
        assert_eq!(engine.why_unknown(id), None, "{id}");
    }
    assert!(listed["zh"]
        .as_ref()
        .unwrap()
        .starts_with("phoneme_type 'pinyin' is not supported"));
    assert!(listed["ja"]
        .as_ref()
        .unwrap()
        .starts_with("phoneme_type 'japanese'"));
    assert!(listed["odd"]
        .as_ref()
        .unwrap()
        .starts_with("phoneme_type 7 "));
    for id in ["zh", "ja", "odd"] {
        assert!(engine.find_voice(id).is_none(), "{id} resolves to nothing");
        let why = engine.why_unknown(id).unwrap();
        assert!(
            why.starts_with(&format!(
                "Piper voice '{id}' cannot be spoken: phoneme_type "
            )),
            "{why}"
        );
        let Err(e) = engine.load_voice(id) else {
            panic!("{id} loaded");
        };
        assert!(e.to_string().contains("phoneme_type"), "{e}");
    }
    assert_eq!(engine.why_unknown("nothing"), None);

    // A config changed to another type since the scan is refused by the load itself, and
    // the next rescan lists the voice as refused (and releases a loaded copy).
    let json = dir.path().join("letters.onnx.json");
    std::fs::write(&json, with_type("pinyin".into()).to_string()).unwrap();
    let Err(e) = engine.load_voice("letters") else {
        panic!("a voice turned pinyin loaded");
    };
    assert!(e.to_string().contains("phoneme_type 'pinyin'"), "{e}");
    let stale = engine.rescan();
    assert!(stale.contains(&"letters".to_string()), "{stale:?}");
    assert!(engine.find_voice("letters").is_none());
}

#[test]
fn unsayable_symbols_are_those_the_map_lacks_after_replacements() {
    let mut replaced = with_type("espeak".into());
    replaced["phoneme_map"] = serde_json::json!({"Q": ["k", "w"], "X": ["k", "Q"]});
    let dir = voices_with(&[("replaced", replaced)]);
    let voice = PiperEngine::new(dir.path(), Device::Cpu)
        .load("replaced")
        .unwrap();
    assert_eq!(voice.phoneme_type, PhonemeType::Espeak);
    assert_eq!(voice.unsayable("həlˈoʊ wˈɜːld", None), None);
    assert_eq!(
        voice.unsayable("Q", None),
        None,
        "replaced by phonemes joe has"
    );
    assert_eq!(
        voice.unsayable("X", None),
        Some('Q'),
        "replaced by one it lacks"
    );
    assert_eq!(voice.unsayable("hə\u{05D0}", None), Some('\u{05D0}'));
    // An espeak voice is given espeak-ng's IPA, as before.
    let text = "Hello world.";
    let ipa = phonemize(text, "en-us").unwrap();
    let read = voice.phonemes(text, &[], None).unwrap();
    assert_eq!(read.ids, voice.phonemes.ids(&ipa));
    assert_eq!(read.phonemes, ipa);
}

#[test]
fn a_text_voice_is_given_the_characters_of_the_text() {
    let dir = voices_with(&[("letters", letters_config())]);
    let voice = PiperEngine::new(dir.path(), Device::Cpu)
        .load("letters")
        .unwrap();
    assert_eq!(voice.phoneme_type, PhonemeType::Text);
    // The map has no capitals, so they are read in lower case; no espeak-ng IPA.
    let read = voice.phonemes("Hello, world", &[], None).unwrap();
    assert_eq!(read.phonemes, "hello, world");
    let joe = joe_config()["phoneme_id_map"].clone();
    let id = |c: char| joe[c.to_string()][0].as_i64().unwrap();
    let mut ids = vec![id('^'), id('_')];
    for c in "hello, world".chars() {
        ids.extend([id(c), id('_')]);
    }
    ids.push(id('$'));
    assert_eq!(read.ids, ids);
    assert_eq!(voice.unsayable("hello world", None), None);
    assert_eq!(
        voice.unsayable("həˈloʊ", None),
        Some('ə'),
        "IPA is no letter"
    );

    let item = SynthesisItem {
        word_timings: true,
        params: SynthesisParams {
            seed: Some(3),
            ..SynthesisParams::default()
        },
        ..SynthesisItem::new("Hello world, this is a test.")
    };
    let pcm = whole_of(&voice, &item);
    let seconds = pcm.duration_s();
    let rms = (pcm.samples.iter().map(|s| s * s).sum::<f32>() / pcm.samples.len() as f32).sqrt();
    assert!(
        (0.8..6.0).contains(&seconds) && rms > 0.02,
        "{seconds} s, rms {rms}"
    );
    let words = pcm.words.clone().expect("word timings");
    let texts: Vec<&str> = words.iter().map(|w| &item.text[w.text.clone()]).collect();
    assert_eq!(texts, ["Hello", "world", "this", "is", "a", "test"]);
    for pair in words.windows(2) {
        assert!(pair[0].end <= pair[1].start, "{words:?}");
    }
    assert!(words.iter().all(|w| w.start < w.end), "{words:?}");
    assert!(words.last().unwrap().end <= pcm.samples.len());
    // Computed in pieces, the same audio and words.
    let pieces = pieces_of(&voice, &item);
    let joined: Vec<f32> = pieces.iter().flat_map(|p| p.samples.clone()).collect();
    assert_eq!(joined.len(), pcm.samples.len());
    assert_eq!(pieces.iter().find_map(|p| p.words.clone()), pcm.words);
}

#[test]
fn voice_info_reads_language_rate_and_speakers_in_id_order() {
    let config = serde_json::json!({
        "language": {"code": "en_GB"},
        "audio": {"sample_rate": 16000},
        "speaker_id_map": {"b": 1, "a": 0, "c": 2}
    });
    let info = voice_info("x", &config);
    assert_eq!(info.language, "en-GB");
    assert_eq!(info.sample_rate, 16000);
    assert_eq!(info.speakers, vec!["a", "b", "c"]);
}

#[test]
fn scan_only_offers_voices_with_a_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lonely.onnx"), b"x").unwrap();
    std::fs::write(dir.path().join("ok.onnx"), b"x").unwrap();
    std::fs::write(
        dir.path().join("ok.onnx.json"),
        br#"{"audio":{"sample_rate":22050}}"#,
    )
    .unwrap();
    let engine = PiperEngine::new(dir.path(), Device::Cpu);
    let ids: Vec<String> = engine.voices().into_iter().map(|v| v.id).collect();
    assert_eq!(ids, vec!["ok"]);
    assert!(engine.find_voice("../ok").is_none());
    assert!(!engine.fingerprint("ok").is_empty());
}

#[test]
fn slow_speech_gets_fewer_ids_per_pass() {
    assert_eq!(ids_per_pass(1.0, 1.0, 0.8), MAX_IDS_PER_PASS);
    assert_eq!(ids_per_pass(4.0, 1.0, 0.0), MAX_IDS_PER_PASS);
    assert_eq!(ids_per_pass(0.5, 1.0, 0.8), MAX_IDS_PER_PASS / 2);
    assert_eq!(ids_per_pass(1.0, 2.0, 0.5), MAX_IDS_PER_PASS / 2);
    assert_eq!(ids_per_pass(1.0, 1.0, 1.8), MAX_IDS_PER_PASS / 2);
    assert_eq!(ids_per_pass(0.25, 100.0, 2.0), MIN_IDS_PER_PASS);
}

/// Peak resident memory of this process so far, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// What [`MAX_IDS_PER_PASS`] is chosen from: phoneme ids per second of audio with the real
/// default voice, and the wall time and peak memory of passes around the limit. Run:
/// `RAYON_NUM_THREADS=1 cargo test --lib measure_ids_per_second -- --ignored --nocapture`
#[test]
#[ignore = "a measurement with the real voice in voices/, not a check"]
fn measure_ids_per_second_of_audio() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/voices");
    let voice = PiperEngine::new(dir, Device::Cpu)
        .load("en_US-joe-medium")
        .expect("the default voice in voices/");
    let pass_with = |ids: Vec<i64>, speed: f32, noise_w: f32| {
        let input = VitsInput {
            ids,
            length_scale: voice.length_scale,
            sampling: Sampling {
                speed,
                seed: 1,
                noise_w: Some(noise_w),
                ..Sampling::default()
            },
        };
        let started = std::time::Instant::now();
        let audio = voice.model.synthesize(&[input]).unwrap().remove(0);
        let seconds = audio.len() as f64 / f64::from(voice.model.sample_rate());
        (seconds, started.elapsed().as_secs_f64())
    };
    let pass = |ids, speed| pass_with(ids, speed, voice.model.config().noise_w);
    let ids_of = |text: &str| voice.phonemes.ids(&phonemize(text, "en-us").unwrap());
    let english = [
        "Hello world, this is a test of the speech server.",
        "The quick brown fox jumps over the lazy dog.",
        "Please call Stella and ask her to bring these things with her from the store.",
        "It was the best of times, it was the worst of times, it was the age of wisdom, \
         it was the age of foolishness.",
        "Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack \
         for her brother Bob.",
        "In the beginning the universe was created; this has made a lot of people very \
         angry and been widely regarded as a bad move.",
        "We also need a small plastic snake and a big toy frog for the kids.",
        "Speech synthesis turns written text into audio that sounds like a person reading \
         it aloud, one sentence at a time.",
    ];
    let (mut ids_total, mut seconds_total) = (0, 0.0);
    for text in english {
        let ids = ids_of(text);
        let n = ids.len();
        let (seconds, wall) = pass(ids, 1.0);
        println!(
            "{n:5} ids {seconds:6.2} s audio {:5.1} ids/s  {wall:5.2} s wall  {text:.40}",
            n as f64 / seconds
        );
        ids_total += n;
        seconds_total += seconds;
    }
    println!(
        "English: {ids_total} ids, {seconds_total:.2} s, {:.1} ids per second of audio",
        ids_total as f64 / seconds_total
    );

    // What one 400-character utterance of hostile text becomes, and its rate.
    let hostile = [
        ("CJK (read as \"Chinese letter\")", "中文字".repeat(134)),
        ("digits", "7".repeat(400)),
        ("one long word", "a".repeat(400)),
        ("punctuation", "!?.,;".repeat(80)),
        ("emoji", "😀🎉👍".repeat(67)),
        ("Arabic", "مرحبا بالعالم ".repeat(28)),
    ];
    for (name, text) in &hostile {
        let ipa = phonemize(&text.chars().take(400).collect::<String>(), "en-us").unwrap();
        let all = voice.phonemes.ids(&ipa).len();
        let first = voice.phonemes.pieces(&ipa, MAX_IDS_PER_PASS).remove(0);
        let n = first.len();
        let (seconds, wall) = pass(first, 1.0);
        println!(
            "{name}: 400 chars = {all} ids; first piece {n} ids {seconds:.2} s audio \
             ({:.1} ids/s) {wall:.2} s wall",
            n as f64 / seconds
        );
    }

    // Passes of growing size: time and peak memory (VmHWM only grows, so go up in size).
    let text = english.join(" ").repeat(8);
    let all = ids_of(&text);
    println!("peak RSS with the voice loaded: {:.0} MiB", peak_rss_mib());
    let limit = MAX_IDS_PER_PASS;
    let w = voice.model.config().noise_w;
    let cases = [
        (ids_per_pass(0.25, 1.0, w), 0.25, w),
        (limit, 1.0, w),
        (ids_per_pass(1.0, 1.0, 2.0), 1.0, 2.0),
        (ids_per_pass(0.25, 1.0, 2.0), 0.25, 2.0),
        (limit, 1.0, 2.0),
        (2 * limit, 1.0, w),
        (4 * limit, 1.0, w),
    ];
    for (n, speed, noise_w) in cases {
        let mut ids = all[..n - 1].to_vec();
        ids.push(all[all.len() - 1]);
        let (seconds, wall) = pass_with(ids, speed, noise_w);
        println!(
            "{n:5} ids at speed {speed}, noise_w {noise_w}: {seconds:6.2} s audio, \
             {wall:6.2} s wall, peak RSS {:.0} MiB",
            peak_rss_mib()
        );
    }
}
