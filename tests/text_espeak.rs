//! The library-backed half of text preparation and the espeak engine, against the real
//! libespeak-ng: phonemes and ids must equal an independent reference, synthesis must produce
//! real speech, the global lock must make concurrent use safe, and no request may wait for
//! that lock before it is even accepted.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::thread;

use common::{openai_error, post_speech, InProcess};

use omnivoice_server::engine::espeak::EspeakEngine;
use omnivoice_server::engine::{Engine, EngineError, Pcm, SynthesisItem, Voice};
use omnivoice_server::espeak::{self, EspeakError};
use omnivoice_server::text::{phonemize, PhonemeIdMap};
use serde_json::json;

const VOICE_CONFIG: &str = "voices/en_US-joe-medium.onnx.json";

fn joe_id_map() -> PhonemeIdMap {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(VOICE_CONFIG);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is needed (run scripts/setup.sh): {e}", path.display()));
    let json: serde_json::Value = serde_json::from_str(&text).expect("voice config is JSON");
    PhonemeIdMap::from_voice_json(&json).expect("voice config has a phoneme table")
}

fn ids(list: &str) -> Vec<i64> {
    list.split(',').map(|id| id.parse().unwrap()).collect()
}

/// Expected values printed by the independent reference tool, which phonemizes with the
/// espeak-ng CLI clause by clause in Python (not with this crate):
/// `/work/.venv-ref/bin/python /work/shared/tools/piper_reference.py --onnx
/// voices/en_US-joe-medium.onnx --config voices/en_US-joe-medium.onnx.json --text "…" --repeat 1`
/// The first two are also in the voice notes (§2 and §8).
const REFERENCE: &[(&str, &str, &str)] = &[
    (
        "Hello world, this is a test of the speech server.",
        "həlˈoʊ wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌvðə spˈiːtʃ sˈɜːvɚ.",
        "1,0,20,0,59,0,24,0,120,0,27,0,100,0,3,0,35,0,120,0,62,0,122,0,24,0,17,0,8,0,3,0,41,0,74,0,31,0,3,0,74,0,38,0,3,0,50,0,3,0,32,0,120,0,61,0,31,0,32,0,3,0,102,0,34,0,41,0,59,0,3,0,31,0,28,0,120,0,21,0,122,0,32,0,96,0,3,0,31,0,120,0,62,0,122,0,34,0,60,0,10,0,2",
    ),
    (
        "Wait! Is it ready? Yes; mostly: it works.",
        "wˈeɪt! ɪz ɪt ɹˈɛdi? jˈɛs; mˈoʊstli: ɪt wˈɜːks.",
        "1,0,35,0,120,0,18,0,74,0,32,0,4,0,3,0,74,0,38,0,3,0,74,0,32,0,3,0,88,0,120,0,61,0,17,0,21,0,13,0,3,0,22,0,120,0,61,0,31,0,12,0,3,0,25,0,120,0,27,0,100,0,31,0,32,0,24,0,21,0,11,0,3,0,74,0,32,0,3,0,35,0,120,0,62,0,122,0,23,0,31,0,10,0,2",
    ),
    (
        "The quick brown fox jumps over the lazy dog.",
        "ðə kwˈɪk bɹˈaʊn fˈɑːks dʒˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ.",
        "1,0,41,0,59,0,3,0,23,0,35,0,120,0,74,0,23,0,3,0,15,0,88,0,120,0,14,0,100,0,26,0,3,0,19,0,120,0,51,0,122,0,23,0,31,0,3,0,17,0,108,0,120,0,102,0,25,0,28,0,31,0,3,0,121,0,27,0,100,0,34,0,60,0,3,0,41,0,59,0,3,0,24,0,120,0,18,0,74,0,38,0,21,0,3,0,17,0,120,0,51,0,122,0,66,0,10,0,2",
    ),
    (
        "She sells seashells by the seashore, doesn't she?",
        "ʃiː sˈɛlz sˈiːʃɛlz baɪ ðə sˈiːʃoːɹ, dˈʌzənt ʃiː?",
        "1,0,96,0,21,0,122,0,3,0,31,0,120,0,61,0,24,0,38,0,3,0,31,0,120,0,21,0,122,0,96,0,61,0,24,0,38,0,3,0,15,0,14,0,74,0,3,0,41,0,59,0,3,0,31,0,120,0,21,0,122,0,96,0,27,0,122,0,88,0,8,0,3,0,17,0,120,0,102,0,38,0,59,0,26,0,32,0,3,0,96,0,21,0,122,0,13,0,2",
    ),
    (
        // A clause ending inside quotes: the terminator is found behind the closing quote.
        "He said \"Stop!\" and left; nobody followed.",
        "hiː sˈɛd stˈɑːp! ænd lˈɛft; nˈoʊbɑːdi fˈɑːloʊd.",
        "1,0,20,0,21,0,122,0,3,0,31,0,120,0,61,0,17,0,3,0,31,0,32,0,120,0,51,0,122,0,28,0,4,0,3,0,39,0,26,0,17,0,3,0,24,0,120,0,61,0,19,0,32,0,12,0,3,0,26,0,120,0,27,0,100,0,15,0,51,0,122,0,17,0,21,0,3,0,19,0,120,0,51,0,122,0,24,0,27,0,100,0,17,0,10,0,2",
    ),
    (
        "Garçon, the façade needs work: paint, glass, and wood.",
        "ɡˈɑːɹsɑːn, ðə fəsˈɑːd nˈiːdz wˈɜːk: pˈeɪnt, ɡlˈæs, ænd wˈʊd.",
        "1,0,66,0,120,0,51,0,122,0,88,0,31,0,51,0,122,0,26,0,8,0,3,0,41,0,59,0,3,0,19,0,59,0,31,0,120,0,51,0,122,0,17,0,3,0,26,0,120,0,21,0,122,0,17,0,38,0,3,0,35,0,120,0,62,0,122,0,23,0,11,0,3,0,28,0,120,0,18,0,74,0,26,0,32,0,8,0,3,0,66,0,24,0,120,0,39,0,31,0,8,0,3,0,39,0,26,0,17,0,3,0,35,0,120,0,100,0,17,0,10,0,2",
    ),
];

#[test]
fn phonemes_and_ids_match_the_reference_tool() {
    let map = joe_id_map();
    for &(text, expected_ipa, expected_ids) in REFERENCE {
        let ipa = phonemize(text, "en-us").unwrap();
        assert_eq!(ipa, expected_ipa, "phonemes of {text:?}");
        assert_eq!(map.ids(&ipa), ids(expected_ids), "ids of {text:?}");
    }
    let first = map.ids(&phonemize(REFERENCE[0].0, "en-us").unwrap());
    assert_eq!(first.len(), 103);
}

/// Where this crate deliberately differs from the reference tool. The tool cuts the text at
/// every `.` `,` `:` before calling espeak-ng, so it reads "3.14" as "three. fourteen"
/// (`ɪt kˈɔsts θɹˈiː. fˈoːɹtiːn dˈɑːlɚz.`), "5,000" and "10:30" as two numbers, "U.S." as
/// `jˈuː. ˈɛs.` and drops the "dot" of an e-mail address; espeak-ng's own clause detection,
/// used here (and by upstream Piper), keeps them whole.
#[test]
fn numbers_and_abbreviations_stay_whole() {
    assert_eq!(
        phonemize("It costs 3.14 dollars.", "en-us").unwrap(),
        "ɪt kˈɔsts θɹˈiː pɔɪnt wˈʌn fˈoːɹ dˈɑːlɚz."
    );
    let thousands = phonemize("It costs $5,000 today.", "en-us").unwrap();
    assert!(thousands.contains("θˈaʊzənd"), "{thousands}");
    assert!(!thousands.contains(','), "{thousands}");
    assert_eq!(
        phonemize("Is it 10:30 yet?", "en-us").unwrap(),
        "ɪz ɪt tˈɛn θˈɜːɾi jˈɛt?"
    );
    assert_eq!(
        phonemize("The U.S. economy grew.", "en-us").unwrap(),
        "ðə jˌuːˈɛs ɪkˈɑːnəmi ɡɹˈuː."
    );
}

/// Two smaller differences, both on the side of what Piper voices were trained with (espeak's
/// in-process phonemizer): a clause whose only word has secondary stress keeps it (the CLI's
/// synthesis path promotes it to primary: `wˈʌt?`), and a text ending in a closing quote gets
/// no trailing space (the tool appends one for the empty clause after the quote).
#[test]
fn in_process_details_differ_from_the_cli() {
    assert_eq!(phonemize("What?!", "en-us").unwrap(), "wˌʌt?");
    assert_eq!(
        phonemize("She asked, \"Where are you going?\"", "en-us").unwrap(),
        "ʃiː ˈæskt, wˌɛɹ ɑːɹ juː ɡˈoʊɪŋ?"
    );
}

#[test]
fn clauses_report_their_punctuation() {
    let clauses = espeak::text_to_phoneme_clauses("Hello!! Yes?! (Really.) Done", "en-us").unwrap();
    let terminators: Vec<Option<char>> = clauses.iter().map(|(_, t)| *t).collect();
    assert_eq!(terminators, [Some('!'), Some('?'), Some('.'), None]);
    assert_eq!(clauses[3].0, "dˈʌn");
}

#[test]
fn phonemizes_other_languages_and_switches_back() {
    let english = phonemize("Good morning.", "en-us").unwrap();
    let german = phonemize("Guten Morgen, wie geht es dir?", "de").unwrap();
    assert!(german.ends_with('?') && german.contains(", "), "{german}");
    assert_ne!(german, english);
    // English words in German text come back without espeak's "(en)…(de)" markers.
    let mixed = phonemize("Ich mag Software.", "de").unwrap();
    assert!(
        !mixed.contains('(') && mixed.contains("sˈɒftweə"),
        "{mixed}"
    );
    assert_eq!(phonemize("Good morning.", "en-us").unwrap(), english);
}

#[test]
fn unknown_voices_are_errors_not_crashes() {
    assert_eq!(
        phonemize("hello", "xx-nothing"),
        Err(EspeakError::UnknownVoice("xx-nothing".into()))
    );
    assert!(matches!(
        espeak::synthesize("hello", "no-such-voice", 175),
        Err(EspeakError::UnknownVoice(_))
    ));
    // The library still works afterwards.
    assert_eq!(phonemize("hello", "en-us").unwrap(), "həlˈoʊ");
}

#[test]
fn voice_list_has_the_common_languages() {
    let voices = espeak::list_voices();
    assert!(voices.len() > 50, "only {} voices", voices.len());
    for name in ["en-us", "de", "fr"] {
        assert!(voices.iter().any(|v| v.name == name), "no {name}");
    }
    let us = voices.iter().find(|v| v.name == "en-us").unwrap();
    assert_eq!(us.languages.first().map(String::as_str), Some("en-us"));
}

fn rms(samples: &[i16]) -> f64 {
    let sum: f64 = samples.iter().map(|&s| f64::from(s).powi(2)).sum();
    (sum / samples.len().max(1) as f64).sqrt()
}

#[test]
fn synthesis_is_speech_whose_length_follows_text_and_rate() {
    let short = espeak::synthesize("Hello there.", "en-us", 175).unwrap();
    let long = espeak::synthesize(
        "Hello there. This sentence is quite a bit longer than the first one.",
        "en-us",
        175,
    )
    .unwrap();
    let fast = espeak::synthesize(
        "Hello there. This sentence is quite a bit longer than the first one.",
        "en-us",
        350,
    )
    .unwrap();
    let seconds = |s: &[i16]| s.len() as f64 / f64::from(espeak::SAMPLE_RATE);
    eprintln!(
        "short {:.2} s, long {:.2} s, long at 2x {:.2} s, rms {:.0}",
        seconds(&short),
        seconds(&long),
        seconds(&fast),
        rms(&long)
    );
    assert!(seconds(&short) > 0.4, "{} s", seconds(&short));
    assert!(rms(&short) > 500.0 && rms(&long) > 500.0);
    assert!(long.len() as f64 > 2.5 * short.len() as f64);
    assert!(long.len() as f64 >= 1.5 * fast.len() as f64);
    assert!(rms(&fast) > 500.0);
}

/// Loudness per 10 ms frame: a fingerprint of an utterance that tolerates espeak's jitter.
fn envelope(samples: &[i16]) -> Vec<f64> {
    samples.chunks(1102).map(rms).collect()
}

/// Best Pearson correlation over small shifts (±3 windows): espeak's runs differ by a few
/// percent in timing, and such a shift must not read as a different utterance.
fn correlation(a: &[f64], b: &[f64]) -> f64 {
    (0..=3)
        .flat_map(|shift| [(shift, 0), (0, shift)])
        .map(|(skip_a, skip_b)| pearson(&a[skip_a.min(a.len())..], &b[skip_b.min(b.len())..]))
        .fold(f64::MIN, f64::max)
}

fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mean = |x: &[f64]| x.iter().sum::<f64>() / n as f64;
    let (ma, mb) = (mean(a), mean(b));
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let var = |x: &[f64], m: f64| x.iter().map(|v| (v - m).powi(2)).sum::<f64>();
    cov / (var(a, ma) * var(b, mb)).sqrt()
}

/// espeak-ng 1.51 is not bit-reproducible within a process: its pitch flutter advances a
/// function-local static phase (`AdvanceParameters` in wavegen.c) that no API resets, so even
/// two sequential calls differ in waveform and by up to ~3 % in length. What the lock must
/// guarantee is that concurrent calls neither crash nor mix their audio or phonemes: every
/// concurrent result must have its own sequential result's phonemes, length (±6 %) and a
/// loudness envelope (50 ms windows, best of small shifts) clearly closer to its own than to
/// any other job's.
#[test]
fn concurrent_synthesis_matches_sequential() {
    let jobs: Vec<(&str, &str)> = vec![
        ("The first thread speaks English.", "en-us"),
        ("Der zweite Faden spricht Deutsch, ganz langsam.", "de"),
        ("Le troisième parle français.", "fr"),
        (
            "And the fourth one, English again, is the longest of all four.",
            "en-us",
        ),
    ];
    let run = |text: &str, voice: &str| {
        (
            espeak::synthesize(text, voice, 175).unwrap(),
            phonemize(text, voice).unwrap(),
        )
    };
    let sequential: Vec<(Vec<i16>, String)> = jobs.iter().map(|&(t, v)| run(t, v)).collect();
    let concurrent: Vec<Vec<(Vec<i16>, String)>> = thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|&(text, voice)| scope.spawn(move || (0..3).map(|_| run(text, voice)).collect()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let envelopes: Vec<Vec<f64>> = sequential.iter().map(|(s, _)| envelope(s)).collect();
    for (job, runs) in concurrent.iter().enumerate() {
        let (expected_audio, expected_phonemes) = &sequential[job];
        for (audio, phonemes) in runs {
            assert_eq!(phonemes, expected_phonemes);
            let ratio = audio.len() as f64 / expected_audio.len() as f64;
            assert!(
                (0.94..=1.06).contains(&ratio),
                "job {job}: length ratio {ratio}"
            );
            // Mixed-up audio would resemble another job's envelope at least as much as its own.
            let own = correlation(&envelope(audio), &envelopes[job]);
            let foreign = envelopes
                .iter()
                .enumerate()
                .filter(|(other, _)| *other != job)
                .map(|(_, other)| correlation(&envelope(audio), other))
                .fold(f64::MIN, f64::max);
            assert!(
                own > 0.75 && own > foreign + 0.1,
                "job {job}: correlation {own} with its own envelope, {foreign} with another"
            );
        }
    }
}

#[test]
fn engine_lists_and_loads_voices() {
    let engine = EspeakEngine::new();
    assert_eq!(engine.id(), "espeak");
    let voices = engine.voices();
    let us = voices
        .iter()
        .find(|v| v.id == "en-us")
        .expect("en-us listed");
    assert_eq!(us.language, "en-US");
    assert_eq!(us.engine, "espeak");
    assert_eq!(us.sample_rate, 22050);
    assert!(us.speakers.is_empty());
    assert!(voices.iter().any(|v| v.id == "de" && v.language == "de"));
    assert!(voices.iter().any(|v| v.id == "fr"));

    assert!(matches!(
        engine.load_voice("klingon"),
        Err(EngineError::UnknownVoice(v)) if v == "klingon"
    ));
    let voice = engine.load_voice("EN-US").unwrap();
    assert_eq!(voice.info(), us);
}

#[test]
fn engine_synthesizes_a_batch_with_speed() {
    let voice = EspeakEngine::new().load_voice("en-us").unwrap();
    let text = "Speed changes how long this sentence takes to say.";
    let mut fast = SynthesisItem::new(text);
    fast.params.speed = 2.0;
    let batch = [SynthesisItem::new("Hi."), SynthesisItem::new(text), fast];
    let pcm = synthesize_all(voice.as_ref(), &batch);
    assert_eq!(pcm.len(), 3);
    for p in &pcm {
        assert_eq!(p.sample_rate, 22050);
        assert!(p.samples.iter().all(|s| (-1.0..=1.0).contains(s)));
        assert!(p.samples.iter().any(|s| s.abs() > 0.05));
    }
    eprintln!(
        "Hi. {:.2} s, sentence {:.2} s, at speed 2 {:.2} s",
        pcm[0].duration_s(),
        pcm[1].duration_s(),
        pcm[2].duration_s()
    );
    assert!(pcm[1].duration_s() > 2.0 * pcm[0].duration_s());
    assert!(pcm[1].duration_s() >= 1.5 * pcm[2].duration_s());
    assert!(synthesize_all(voice.as_ref(), &[]).is_empty());
}

/// Every item's audio, checking that each was handed over exactly once.
fn synthesize_all(voice: &dyn Voice, batch: &[SynthesisItem]) -> Vec<Pcm> {
    let mut audio = vec![None; batch.len()];
    voice
        .synthesize_each(batch, &mut |index, pcm| {
            assert!(audio[index].replace(pcm).is_none(), "item {index} twice");
        })
        .unwrap();
    audio
        .into_iter()
        .map(|pcm| pcm.expect("every item delivered"))
        .collect()
}

#[test]
fn empty_and_symbol_only_text() {
    assert_eq!(phonemize("", "en-us").unwrap(), "");
    assert_eq!(phonemize("   \n ", "en-us").unwrap(), "");
    assert_eq!(phonemize("?!...", "en-us").unwrap(), "");
    assert_eq!(
        phonemize("a\0b", "en-us").unwrap(),
        phonemize("a b", "en-us").unwrap()
    );
    assert!(espeak::synthesize("", "en-us", 175).unwrap().len() < 2205);
}

/// espeak holds its process-wide lock for a whole synthesis; validating a request (is this an
/// espeak voice?) runs on the async runtime and must not wait for it. The server takes the
/// lock once per sentence, so a long request would free it between sentences; one long call
/// straight into the library (the same process-wide lock: the server runs in this process)
/// holds it for its whole text instead. A request refused at validation must be answered
/// while that call still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_does_not_wait_for_a_running_espeak_synthesis() {
    let args = [
        "--default-engine",
        "espeak",
        "--default-voice",
        "en-us",
        "--preload",
        "none",
        "--no-cache",
    ];
    let engines: Vec<Arc<dyn Engine>> = vec![Arc::new(EspeakEngine::new())];
    let server = InProcess::start(&args, engines).await;

    let text = "The lighthouse keeper walked along the narrow path up the hill. ".repeat(500);
    let (started, synthesis_started) = tokio::sync::oneshot::channel();
    let long = thread::spawn(move || {
        let _ = started.send(());
        espeak::synthesize(&text, "en-us", 175)
    });
    synthesis_started.await.unwrap();
    let refused = post_speech(
        &server.url,
        &json!({"model": "espeak", "voice": "klingon", "input": "Hello there."}),
    )
    .await;
    let synthesis_still_running = !long.is_finished();
    let error = openai_error(refused, 400).await;
    assert_eq!(error["param"], "voice", "{error}");
    assert!(
        synthesis_still_running,
        "the refusal waited for the synthesis to give up the espeak lock"
    );
    assert!(!long.join().unwrap().unwrap().is_empty());
    server.stop().await;
}
