//! Whole-model speed of the native VITS against onnxruntime, measured in the same run, and
//! windowed synthesis against whole-utterance synthesis.
//!
//! One thread on one core, noise 0, the default voice: one sentence, and a padded batch of 8, in each
//! precision (`f32`, the reference; `bf16`; `int8`, measured but not offered by the server; a
//! row says when this CPU only emulates its precision), with each precision's distance from
//! the `f32` audio (worst item: SNR and log-mel distance, as in `tests/vits_precision.rs`).
//! onnxruntime runs through the reference tool when `OMNIVOICE_REF_PYTHON` names a Python with
//! onnxruntime (see `../shared/tools/piper_reference_setup.sh`); otherwise only candle runs.
//! Each case times onnxruntime once, right after candle's precisions, so every ratio compares
//! runs seconds apart.
//! The windowed cases (`-- windowed`) time the first chunk and the whole windowed run of a long
//! sentence without clause breaks (phonemized once with espeak-ng, untimed) and of a short one.
//!
//! `OMNIVOICE_REF_PYTHON=/path/venv/bin/python cargo bench --bench vits [-- NAME_FILTER]`

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use candle_core::Device;
use omnivoice_models::kernels::Precision;
use omnivoice_models::vits::{Sampling, Vits, VitsConfig, VitsInput, Weights};
use omnivoice_server::text::phonemize::{phonemize, PhonemeIdMap};

#[path = "../tests/audio_quality/mod.rs"]
mod audio_quality;

const RUNS: usize = 5;
/// The sentences of the reference fixtures; ids are read from the fixture files.
const SENTENCES: [&str; 4] = [
    "Hi.",
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, this is a test of the speech server.",
    "Wait! Is it ready? Yes; mostly: it works, and it sounds natural enough for a first try.",
];
const SINGLE: usize = 2;
/// One long sentence with no clause break, so a sentence splitter cannot shorten it.
const LONG_SENTENCE: &str = "The old lighthouse keeper walked along the narrow path beside the \
    cliffs every evening to watch the fishing boats return to the harbour while the sun sank \
    behind the distant hills and the gulls circled overhead calling to one another in the \
    fading light.";
/// Frames in the first window and in each later one.
const WINDOWS: [(usize, usize); 4] = [(8, 128), (16, 96), (16, 128), (16, 256)];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ids(i: usize) -> Vec<i64> {
    let path = root().join(format!("crates/models/tests/fixtures/vits/sentence{i}.ids"));
    let text = std::fs::read_to_string(&path).expect("fixture ids");
    text.trim().split(',').map(|x| x.parse().unwrap()).collect()
}

fn input(i: usize) -> VitsInput {
    VitsInput {
        ids: ids(i),
        length_scale: 1.0,
        sampling: Sampling {
            seed: 0,
            noise_scale: Some(0.0),
            noise_w: Some(0.0),
            ..Sampling::default()
        },
    }
}

/// Median seconds to the first chunk and to the end of a windowed run, and the whole-utterance
/// median, alternating the two so that machine load moves both alike.
fn time_windowed(model: &Vits, item: &VitsInput, first: usize, later: usize) -> (f64, f64, f64) {
    let mut firsts = Vec::new();
    let mut totals = Vec::new();
    let mut wholes = Vec::new();
    model
        .synthesize_windowed(item, first, later, &mut |_| true)
        .expect("windowed synthesis");
    for _ in 0..RUNS {
        let started = Instant::now();
        let mut first_at = None;
        model
            .synthesize_windowed(item, first, later, &mut |_| {
                first_at.get_or_insert_with(|| started.elapsed().as_secs_f64());
                true
            })
            .expect("windowed synthesis");
        totals.push(started.elapsed().as_secs_f64());
        firsts.push(first_at.expect("a chunk"));
        let started = Instant::now();
        model
            .synthesize(std::slice::from_ref(item))
            .expect("synthesis");
        wholes.push(started.elapsed().as_secs_f64());
    }
    (median(firsts), median(totals), median(wholes))
}

/// Time to the first chunk and the halo overhead, long and short sentence.
fn windowed_cases(model: &Vits, config: &serde_json::Value) {
    let field = model.receptive_field();
    println!(
        "\nreceptive field (frames each side): flow {:?}, decoder {:?}, together {:?}",
        field.flow, field.decoder, field.total
    );
    let espeak_voice = config["espeak"]["voice"].as_str().expect("espeak voice");
    let ipa = phonemize(LONG_SENTENCE, espeak_voice).expect("espeak-ng");
    let map = PhonemeIdMap::from_voice_json(config).expect("phoneme map");
    let long = VitsInput {
        ids: map.ids(&ipa),
        ..input(0)
    };
    println!(
        "| case | chars | audio s | windows | whole s | first chunk s | first / whole | windowed s | windowed / whole |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, chars, item) in [
        ("long sentence", LONG_SENTENCE.len(), &long),
        ("short sentence", SENTENCES[1].len(), &input(1)),
    ] {
        let audio = model
            .synthesize(std::slice::from_ref(item))
            .expect("synthesis")[0]
            .len() as f64
            / model.sample_rate() as f64;
        for (first, later) in WINDOWS {
            let (to_first, windowed, whole) = time_windowed(model, item, first, later);
            println!(
                "| {name} | {chars} | {audio:.2} | {first}/{later} | {whole:.3} | {to_first:.4} | {:.3} | {windowed:.3} | {:.3} |",
                to_first / whole,
                windowed / whole
            );
        }
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Median wall seconds and the audio seconds of one run.
fn time_candle(model: &Vits, batch: &[VitsInput]) -> (f64, f64) {
    let audio = model.synthesize(batch).expect("synthesis");
    let seconds: f64 =
        audio.iter().map(|a| a.len() as f64).sum::<f64>() / model.sample_rate() as f64;
    let walls = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            model.synthesize(batch).expect("synthesis");
            started.elapsed().as_secs_f64()
        })
        .collect();
    (median(walls), seconds)
}

/// onnxruntime's median wall seconds from the reference tool's report line.
fn time_onnxruntime(python: &str, voice: &Path, args: &[&str]) -> Option<f64> {
    let tool = std::env::var("OMNIVOICE_REF_TOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("../shared/tools/piper_reference.py"));
    let output = Command::new(python)
        .arg(tool)
        .arg("--onnx")
        .arg(voice.with_extension("onnx"))
        .arg("--config")
        .arg(voice.with_extension("onnx.json"))
        .args([
            "--noise-scale",
            "0",
            "--noise-w",
            "0",
            "--threads",
            "1",
            "--repeat",
            &RUNS.to_string(),
        ])
        .args(args)
        .output()
        .ok()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find(|l| l.starts_with("wall median"))?;
    let ms: f64 = line.split_whitespace().nth(2)?.parse().ok()?;
    Some(ms / 1000.0)
}

/// The worst item's SNR and log-mel distance from the reference, as table cells.
fn distance(reference: &[Vec<f32>], audio: &[Vec<f32>]) -> (String, String) {
    let pairs = || reference.iter().zip(audio);
    if pairs().all(|(r, a)| r == a) {
        return ("=".into(), "=".into());
    }
    let snr = pairs()
        .map(|(r, a)| audio_quality::snr_db(r, a))
        .fold(f64::INFINITY, f64::min);
    let mel = pairs()
        .map(|(r, a)| audio_quality::log_mel_distance_db(r, a))
        .fold(0.0, f64::max);
    (format!("{snr:.1} dB"), format!("{mel:.2} dB"))
}

/// Restricts this process to the CPU it runs on now.
fn pin_to_one_cpu() {
    // SAFETY: plain libc calls on a zeroed cpu_set_t that lives across them.
    unsafe {
        let cpu = libc::sched_getcpu().max(0) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!("could not pin to CPU {cpu}: the candle rows may use two cores");
        }
    }
}

fn main() {
    // One thread for candle, as for onnxruntime: the server runs one batch per worker thread.
    std::env::set_var("RAYON_NUM_THREADS", "1");
    // And one core: on an idle server a request also borrows spare cores (`kernels::spare`),
    // which would make this a comparison of two cores against one. onnxruntime's process
    // inherits the mask.
    pin_to_one_cpu();
    // The server's allocator settings, so the model is measured as the server runs it.
    omnivoice_server::allocator::tune();
    let voice = root().join("voices/en_US-joe-medium");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(voice.with_extension("onnx.json")).unwrap())
            .unwrap();
    let started = Instant::now();
    let load = || {
        let weights = Weights::from_onnx(&voice.with_extension("onnx"), &Device::Cpu)?;
        Vits::load(&VitsConfig::from_weights(&weights, &config)?, weights)
    };
    let model = load().expect("voice");
    println!(
        "load (onnx → candle): {:.3} s",
        started.elapsed().as_secs_f64()
    );

    // `cargo bench --bench vits -- sentence` runs only the cases whose name contains "sentence".
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.as_deref() == Some("windowed") {
        windowed_cases(&model, &config);
        return;
    }
    let single = vec![input(SINGLE)];
    let batch: Vec<VitsInput> = (0..8).map(|i| input(i % 4)).collect();
    let python = std::env::var("OMNIVOICE_REF_PYTHON").ok();
    let batch_file = std::env::temp_dir().join("omnivoice-bench-batch.txt");
    let texts: Vec<&str> = (0..8).map(|i| SENTENCES[i % 4]).collect();
    std::fs::write(&batch_file, texts.join("\n")).unwrap();
    let single_ids = ids(SINGLE)
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");

    let reduced = |p| load().and_then(|m| m.with_precision(p)).expect("voice");
    let (bf16_model, int8_model) = (reduced(Precision::Bf16), reduced(Precision::Int8));
    let models = [&model, &bf16_model, &int8_model];
    println!("| case | precision | audio s | candle wall s | candle RTF | onnxruntime wall s | candle / onnxruntime | SNR vs f32 | log-mel vs f32 |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let cases: [(&str, &[VitsInput], Vec<&str>); 2] = [
        ("one sentence", &single, vec!["--ids", &single_ids]),
        (
            "batch of 8",
            &batch,
            vec!["--batch-file", batch_file.to_str().unwrap()],
        ),
    ];
    for (name, inputs, ort_args) in cases {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let timed: Vec<(f64, f64)> = models.iter().map(|m| time_candle(m, inputs)).collect();
        let ort = python
            .as_deref()
            .and_then(|py| time_onnxruntime(py, &voice, &ort_args));
        let reference = model.synthesize(inputs).expect("synthesis");
        for (m, (wall, audio)) in models.iter().zip(timed) {
            let (ort_text, ratio) = match ort {
                Some(o) => (format!("{o:.3}"), format!("{:.2}×", wall / o)),
                None => ("not run".into(), "-".into()),
            };
            let (snr, mel) = distance(&reference, &m.synthesize(inputs).expect("synthesis"));
            println!(
                "| {name} | {} | {audio:.2} | {wall:.3} | {:.3} | {ort_text} | {ratio} | {snr} | {mel} |",
                m.precision().describe(),
                wall / audio
            );
        }
    }
    // The same 8 sentences one at a time: what a CPU worker does when it skips padding.
    if filter.is_none() {
        for m in models {
            let samples: usize = batch
                .iter()
                .map(|item| m.synthesize(std::slice::from_ref(item)).expect("synthesis")[0].len())
                .sum();
            let sequential_audio = samples as f64 / m.sample_rate() as f64;
            let walls: Vec<f64> = (0..RUNS)
                .map(|_| {
                    let started = Instant::now();
                    for item in &batch {
                        m.synthesize(std::slice::from_ref(item)).expect("synthesis");
                    }
                    started.elapsed().as_secs_f64()
                })
                .collect();
            let sequential = median(walls);
            println!(
                "| the same 8, one at a time | {} | {sequential_audio:.2} | {sequential:.3} | {:.3} | - | - | | |",
                m.precision().describe(),
                sequential / sequential_audio
            );
        }
    }
    if filter.is_none() {
        windowed_cases(&model, &config);
    }
}
