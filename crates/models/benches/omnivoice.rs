//! Times OmniVoice at the released model's size (Qwen3-0.6B body, 8 × 1025 audio ids, the
//! Higgs-Audio-v2 codec with DAC ratios [8, 5, 4, 2, 3]) with seeded random weights made in
//! memory, so that no checkpoint is needed: the cost of a forward does not depend on the
//! weights' values. Prints one table: a 5 s design-mode utterance (a 40-token prompt and 125
//! frames) generated at 32 and 16 steps in `f32` and bf16, one packed forward, the host-side
//! decoding around it, the codec's decode, 8 utterances in one `generate` against 8 one after
//! another, and the peak RSS. All rows come from one run, so their ratios hold on a shared,
//! noisy machine even where the absolute times drift.
//!
//! `OMNIVOICE_BENCH_CLONE=1` times only a clone request's parts instead: the codec's encode of
//! a 5 s clip (what a first request adds), generation with the clip's frames in the prompt
//! against design mode's, and the decode.
//!
//! `OMNIVOICE_BENCH_JOIN=1` times step-level batching instead: a second utterance arriving
//! halfway through the first's `OMNIVOICE_BENCH_BATCH_STEPS` steps, generated after it or
//! joining it at the next step, in the precision a server on this CPU picks.
//!
//! `OMNIVOICE_BENCH_DEVICE=cuda` (built with `--features cuda`) times the model on the GPU
//! instead: first one packed forward on the CPU and the GPU from the same weights, compared
//! (relative error, argmax agreement), then per precision (`f32`, `f32` with TF32 products,
//! bf16 weights and activations) one forward, generation at 32 and 16 steps, and 1, 8 and 32
//! utterances in one `generate`; then the codec's decode.
//!
//! `OMNIVOICE_BENCH_QUICK=1` skips the full 32- and 16-step `f32` runs (≈ 1 min each on 2
//! cores) and times `f32` per forward only. `OMNIVOICE_BENCH_BATCH_STEPS` (default 4) sets the
//! steps of the batch rows. With `OMNIVOICE_REF_PYTHON` (a Python with the official
//! `omnivoice` package) it first runs `scripts/omnivoice_bench_reference.py`, the official
//! forward on the same shapes, so the ratio is taken in one run. `OMNIVOICE_BENCH_PROFILE=bf16` (or `f32`) only runs three
//! forwards, for a profiler.

use std::time::Instant;

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;
use omnivoice_models::kernels::Precision;
use omnivoice_models::omnivoice::{
    CodecConfig, CodecDecoder, CodecEncoder, Decoding, EncoderConfig, OmniVoice, Prompt,
};
use rand::{Rng, SeedableRng};

#[path = "common/random_omnivoice.rs"]
mod random_omnivoice;
use random_omnivoice::{random_vb, real_config, Random, CODEC_CONFIG};

/// A prompt of `text` random text tokens, `reference` frames of random codes (a clone's clip;
/// 0 in design mode), then `frames` target frames.
fn prompt(rng: &mut impl Rng, text: usize, reference: usize, frames: usize) -> Prompt {
    let len = text + reference + frames;
    let mut ids = vec![0u32; 8 * len];
    for (c, row) in ids.chunks_exact_mut(len).enumerate() {
        for (t, id) in row.iter_mut().enumerate() {
            *id = if t < text {
                if c == 0 {
                    rng.random_range(0..151_669)
                } else {
                    0
                }
            } else if t < text + reference {
                rng.random_range(0..1024)
            } else {
                1024
            };
        }
    }
    let audio: Vec<u8> = (0..len).map(|t| (t >= text) as u8).collect();
    Prompt {
        ids: Tensor::from_vec(ids, (8, len), &Device::Cpu).unwrap(),
        audio: Tensor::from_vec(audio, len, &Device::Cpu).unwrap(),
        frames,
    }
}

/// The released-size codec with seeded random weights, its convolutions in `precision`.
fn codec(precision: Precision) -> CodecDecoder {
    CodecDecoder::load(&CodecConfig::from_json(CODEC_CONFIG).unwrap(), random_vb())
        .unwrap()
        .with_precision(precision)
}

/// `frames` frames of random ids of the 8 codebooks, [8, frames].
fn random_codes(rng: &mut impl Rng, frames: usize, device: &Device) -> Tensor {
    let codes: Vec<u32> = (0..8 * frames).map(|_| rng.random_range(0..1024)).collect();
    Tensor::from_vec(codes, (8, frames), device).unwrap()
}

/// The packed forward of one step (the conditional row, then the frames alone).
fn step_batch(p: &Prompt) -> (Tensor, Tensor, Vec<usize>) {
    let len = p.audio.dim(0).unwrap();
    let from = len - p.frames;
    let ids = Tensor::cat(&[&p.ids, &p.ids.narrow(1, from, p.frames).unwrap()], 1).unwrap();
    let audio = Tensor::cat(&[&p.audio, &p.audio.narrow(0, from, p.frames).unwrap()], 0).unwrap();
    (ids, audio, vec![len, p.frames])
}

/// `prompts` generated in one call at `steps` steps, the other settings the defaults, from a
/// fixed seed.
fn generate(m: &OmniVoice, prompts: &[Prompt], steps: usize) -> Result<Vec<Tensor>> {
    let decoding = Decoding {
        num_step: steps,
        ..Decoding::default()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    m.generate(prompts, &decoding, &mut rng)
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn secs(f: impl FnOnce()) -> f64 {
    let started = Instant::now();
    f();
    started.elapsed().as_secs_f64()
}

/// The best of `runs` timings of `f`.
fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| secs(&mut f))
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    // `cargo bench` passes `--bench`; anything else is a filter we do not use.
    let quick = std::env::var_os("OMNIVOICE_BENCH_QUICK").is_some();
    let batch_steps: usize = std::env::var("OMNIVOICE_BENCH_BATCH_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let (text, frames) = (40, 125);
    let audio_secs = frames as f64 / 25.0;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let one = prompt(&mut rng, text, 0, frames);
    let (ids, audio, segments) = step_batch(&one);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "OmniVoice, real size, seeded random weights; {text}-token prompt, {frames} frames \
         ({audio_secs} s); {cores} cores; bf16 is {}",
        Precision::Bf16.describe()
    );
    let mut rows: Vec<(String, f64, String)> = Vec::new();
    let mut row = |name: String, s: f64, note: String| {
        println!("{name:<52} {s:>9.3} s  {note}");
        rows.push((name, s, note));
    };

    let load = |p: Precision| {
        let started = Instant::now();
        let model = OmniVoice::load(&real_config(), random_vb())
            .and_then(|m| m.with_precision(p))
            .unwrap();
        println!(
            "({p} model built in {:.1} s)",
            started.elapsed().as_secs_f64()
        );
        model
    };
    let forward = |m: &OmniVoice| {
        let _c = omnivoice_models::spare::computing();
        let _l = omnivoice_models::spare::lending();
        m.forward(&ids, &audio, &segments).unwrap()
    };

    if let Ok(name) = std::env::var("OMNIVOICE_BENCH_DEVICE") {
        let device = match name.as_str() {
            "cuda" => Device::new_cuda(0),
            "metal" => Device::new_metal(0),
            other => panic!("OMNIVOICE_BENCH_DEVICE: {other}? (cuda or metal)"),
        }
        .expect("the device (built with its feature?)");
        on_device(&device, &one, &mut rng, &mut row);
        println!("peak RSS (VmHWM): {:.0} MiB", peak_rss_mib());
        return;
    }
    // For a profiler: only forwards of one precision.
    if let Ok(p) = std::env::var("OMNIVOICE_BENCH_PROFILE") {
        let named = |name: &str| {
            if name == "bf16" {
                Precision::Bf16
            } else {
                Precision::F32
            }
        };
        if let Some(precision) = p.strip_prefix("codec-") {
            let precision = named(precision);
            let codec = codec(precision);
            let codes = random_codes(&mut rng, 125, &Device::Cpu);
            for _ in 0..3 {
                let _c = omnivoice_models::spare::computing();
                let _l = omnivoice_models::spare::lending();
                let d = secs(|| drop(codec.decode(&codes).unwrap()));
                println!("{precision}: codec decode, 125 frames {d:.3} s");
            }
            return;
        }
        let precision = named(&p);
        let model = load(precision);
        for _ in 0..3 {
            let f = secs(|| drop(forward(&model)));
            println!("{precision}: one forward {f:.3} s");
        }
        return;
    }
    // Step-level batching: a second utterance arriving after `joined` steps of the first.
    // Whole-generation batching makes it wait for the first's last step; a scheduler lets it
    // in at the next step, the two then sharing each forward.
    if std::env::var_os("OMNIVOICE_BENCH_JOIN").is_some() {
        let steps = batch_steps.max(2);
        let joined = steps / 2;
        let precision = Precision::auto();
        let model = load(precision);
        forward(&model);
        let decoding = Decoding {
            num_step: steps,
            ..Decoding::default()
        };
        let second = prompt(&mut rng, text, 0, frames);
        let fresh = |p: &Prompt, seed| {
            let rng = rand::rngs::StdRng::seed_from_u64(seed);
            model.utterance(p, &decoding, rng).unwrap()
        };
        let _c = omnivoice_models::spare::computing();
        let _l = omnivoice_models::spare::lending();
        // Whole generations, one after the other.
        let started = Instant::now();
        drop(model.run_to_end(vec![fresh(&one, 1)]).unwrap());
        let first_done = started.elapsed().as_secs_f64();
        let arrived = first_done * joined as f64 / steps as f64;
        drop(model.run_to_end(vec![fresh(&second, 2)]).unwrap());
        let whole = started.elapsed().as_secs_f64();
        // Stepped: the second joins after `joined` steps.
        let started = Instant::now();
        let (mut a, mut b) = (fresh(&one, 1), fresh(&second, 2));
        for _ in 0..joined {
            model.step(&mut [&mut a]).unwrap();
        }
        let joined_at = started.elapsed().as_secs_f64();
        let mut a_done = f64::NAN;
        while !(a.is_done() && b.is_done()) {
            model.step(&mut [&mut a, &mut b]).unwrap();
            if a.is_done() && a_done.is_nan() {
                a_done = started.elapsed().as_secs_f64();
            }
        }
        let stepped = started.elapsed().as_secs_f64();
        row(
            format!("{precision}: whole generations, {steps} steps each, one after the other"),
            whole,
            format!(
                "first done {first_done:.1} s; second waits {:.1} s, done {:.1} s after it came",
                first_done - arrived,
                whole - arrived
            ),
        );
        row(
            format!("{precision}: stepped, the second joining after {joined} steps"),
            stepped,
            format!(
                "first done {a_done:.1} s; second done {:.1} s after it came; \
                 total stepped/whole {:.2}",
                stepped - joined_at,
                stepped / whole
            ),
        );
        return;
    }
    // A clone request's parts: the clip's encode (the first request), generation with its
    // frames in the prompt, and the decode (every request).
    if std::env::var_os("OMNIVOICE_BENCH_CLONE").is_some() {
        let steps = 16;
        let encoder = CodecEncoder::load(
            &CodecConfig::from_json(CODEC_CONFIG).unwrap(),
            &EncoderConfig::from_json(CODEC_CONFIG).unwrap(),
            random_vb(),
        )
        .unwrap();
        // 5 s at 24 kHz: a voiced buzz whose loudness moves at syllable rate.
        let clip: Vec<f32> = (0..120_000)
            .map(|i| {
                let t = i as f32 / 24_000.0;
                let buzz: f32 = (1..8)
                    .map(|h| (std::f32::consts::TAU * 140.0 * h as f32 * t).sin() / h as f32)
                    .sum();
                0.1 * buzz * (0.6 + 0.4 * (std::f32::consts::TAU * 4.0 * t).sin())
            })
            .collect();
        let encode = || {
            let _c = omnivoice_models::spare::computing();
            let _l = omnivoice_models::spare::lending();
            encoder.encode(&clip).unwrap()
        };
        let reference = encode().dim(1).unwrap();
        let e = best_of(2, || drop(encode()));
        row(
            format!("codec encode, a 5 s clip → {reference} frames (f32)"),
            e,
            String::new(),
        );
        drop(encoder);
        let codec = codec(Precision::F32);
        let codes = random_codes(&mut rng, frames, &Device::Cpu);
        let d = secs(|| drop(codec.decode(&codes).unwrap()));
        row(
            format!("codec decode, {frames} frames (f32)"),
            d,
            String::new(),
        );
        drop(codec);
        // What a server on this CPU runs: bf16 only where the hardware has it.
        let precision = Precision::auto();
        let model = load(precision);
        forward(&model);
        let design = secs(|| drop(generate(&model, std::slice::from_ref(&one), steps).unwrap()));
        row(
            format!("{precision}: design, generate {steps} steps"),
            design,
            format!("RTF {:.2}", design / audio_secs),
        );
        // The reference's transcript adds to the text: 20 tokens for a 5 s clip.
        let cloned = prompt(&mut rng, text + 20, reference, frames);
        let g = secs(|| drop(generate(&model, std::slice::from_ref(&cloned), steps).unwrap()));
        row(
            format!("{precision}: clone, generate {steps} steps ({reference} reference frames)"),
            g,
            format!("{:.2} × design", g / design),
        );
        let repeated = g + d;
        let first = e + repeated;
        row(
            "clone request, repeated (codes cached): generate + decode".into(),
            repeated,
            format!("RTF {:.2}", repeated / audio_secs),
        );
        row(
            "clone request, first: encode + generate + decode".into(),
            first,
            format!(
                "RTF {:.2}; the encode is {:.0} % of it; repeated/first {:.2}",
                first / audio_secs,
                100.0 * e / first,
                repeated / first
            ),
        );
        println!("peak RSS (VmHWM): {:.0} MiB", peak_rss_mib());
        return;
    }
    if let Some(python) = std::env::var_os("OMNIVOICE_REF_PYTHON") {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/omnivoice_bench_reference.py"
        );
        match std::process::Command::new(python).arg(script).output() {
            Ok(out) => print!("{}", String::from_utf8_lossy(&out.stdout)),
            Err(e) => println!("reference not run: {e}"),
        }
    }
    let mut forwards = Vec::new();
    for precision in [Precision::F32, Precision::Bf16] {
        let model = load(precision);
        forward(&model); // warm: first-touch of the weights, the helper thread.
        let f = best_of(3, || drop(forward(&model)));
        row(
            format!(
                "{precision}: one packed forward ({} positions)",
                segments.iter().sum::<usize>()
            ),
            f,
            String::new(),
        );
        forwards.push(f);
        for steps in [32, 16] {
            if precision == Precision::F32 && quick {
                row(
                    format!("{precision}: {steps} steps (forward × steps)"),
                    f * steps as f64,
                    format!("RTF {:.2}, estimated", f * steps as f64 / audio_secs),
                );
                continue;
            }
            let g = secs(|| drop(generate(&model, std::slice::from_ref(&one), steps).unwrap()));
            let host = (g - f * steps as f64) / steps as f64;
            row(
                format!("{precision}: generate, {steps} steps"),
                g,
                format!(
                    "RTF {:.2}; outside the forward ≈ {:.0} ms/step",
                    g / audio_secs,
                    host * 1e3
                ),
            );
        }
        if precision == Precision::Bf16 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(8);
            let eight: Vec<Prompt> = (0..8).map(|_| prompt(&mut rng, text, 0, frames)).collect();
            let batched = secs(|| drop(generate(&model, &eight, batch_steps).unwrap()));
            let sequential = secs(|| {
                for p in &eight {
                    drop(generate(&model, std::slice::from_ref(p), batch_steps).unwrap());
                }
            });
            row(
                format!("{precision}: 8 utterances in one generate, {batch_steps} steps"),
                batched,
                format!("{:.0} ms/step", batched / batch_steps as f64 * 1e3),
            );
            row(
                format!("{precision}: 8 utterances one after another, {batch_steps} steps"),
                sequential,
                format!(
                    "{:.0} ms/step; batched/sequential {:.2}",
                    sequential / batch_steps as f64 * 1e3,
                    batched / sequential
                ),
            );
        }
        drop(model);
    }
    row(
        "bf16/f32, one forward".into(),
        forwards[1] / forwards[0],
        String::new(),
    );

    let codes = random_codes(&mut rng, frames, &Device::Cpu);
    for precision in [Precision::F32, Precision::Bf16] {
        let codec = codec(precision);
        let decode = || {
            let _c = omnivoice_models::spare::computing();
            let _l = omnivoice_models::spare::lending();
            codec.decode(&codes).unwrap()
        };
        let samples = decode().dim(0).unwrap();
        let d = best_of(3, || drop(decode()));
        row(
            format!("codec decode, {frames} frames → {samples} samples ({precision})"),
            d,
            format!("RTF {:.3}", d / audio_secs),
        );
    }
    println!("peak RSS (VmHWM): {:.0} MiB", peak_rss_mib());
}

/// The GPU table (`OMNIVOICE_BENCH_DEVICE`): agreement with the CPU first, then timings.
fn on_device(
    device: &Device,
    one: &Prompt,
    rng: &mut rand::rngs::StdRng,
    row: &mut impl FnMut(String, f64, String),
) {
    let (ids, audio, segments) = step_batch(one);
    let frames = one.frames;
    let audio_secs = frames as f64 / 25.0;
    let cpu = OmniVoice::load(&real_config(), random_vb()).unwrap();
    let expected: Vec<f32> = {
        let _c = omnivoice_models::spare::computing();
        let _l = omnivoice_models::spare::lending();
        let logits = cpu.forward(&ids, &audio, &segments).unwrap();
        logits.flatten_all().unwrap().to_vec1().unwrap()
    };
    drop(cpu);
    let (ids, audio) = (
        ids.to_device(device).unwrap(),
        audio.to_device(device).unwrap(),
    );
    let sync = || device.synchronize().unwrap();
    let many: Vec<Prompt> = (0..32).map(|_| prompt(rng, 40, 0, frames)).collect();
    for (label, dtype, tf32) in [
        ("f32", DType::F32, false),
        ("f32, TF32 products", DType::F32, true),
        ("bf16", DType::BF16, false),
    ] {
        #[cfg(feature = "cuda")]
        candle_core::cuda::set_gemm_reduced_precision_f32(tf32);
        #[cfg(not(feature = "cuda"))]
        let _ = tf32;
        let started = Instant::now();
        let vb = VarBuilder::from_backend(Box::new(Random), dtype, device.clone());
        let timed = OmniVoice::load(&real_config(), vb).and_then(|model| {
            println!(
                "({label} model built in {:.1} s)",
                started.elapsed().as_secs_f64()
            );
            let got: Vec<f32> = model
                .forward(&ids, &audio, &segments)?
                .to_dtype(DType::F32)?
                .flatten_all()?
                .to_vec1()?;
            let (error, agree) = agreement(&expected, &got, 1025);
            let f = best_of(5, || {
                drop(model.forward(&ids, &audio, &segments).unwrap());
                sync();
            });
            row(
                format!(
                    "{label}: one packed forward ({} positions)",
                    segments.iter().sum::<usize>()
                ),
                f,
                format!("against the CPU: relative error {error:.1e}, argmax agreement {agree:.4}"),
            );
            drop(generate(&model, std::slice::from_ref(one), 4)?); // warm
            for steps in [32, 16] {
                let started = Instant::now();
                drop(generate(&model, std::slice::from_ref(one), steps)?);
                let g = started.elapsed().as_secs_f64();
                row(
                    format!("{label}: generate, {steps} steps"),
                    g,
                    format!(
                        "RTF {:.3}; outside the forward ≈ {:.1} ms/step",
                        g / audio_secs,
                        (g - f * steps as f64) / steps as f64 * 1e3
                    ),
                );
            }
            let started = Instant::now();
            drop(generate(&model, &many[..1], 32)?);
            let single = started.elapsed().as_secs_f64();
            for n in [8, 32] {
                let started = Instant::now();
                drop(generate(&model, &many[..n], 32)?);
                let g = started.elapsed().as_secs_f64();
                row(
                    format!("{label}: {n} utterances in one generate, 32 steps"),
                    g,
                    format!(
                        "{:.1}× one's time for {n}× the audio; RTF per utterance {:.4}",
                        g / single,
                        g / (n as f64 * audio_secs)
                    ),
                );
            }
            Ok(())
        });
        if let Err(e) = timed {
            println!("{label}: failed: {e}");
        }
    }
    let vb = VarBuilder::from_backend(Box::new(Random), DType::F32, device.clone());
    let codec = CodecDecoder::load(&CodecConfig::from_json(CODEC_CONFIG).unwrap(), vb).unwrap();
    let codes = random_codes(rng, frames, device);
    let decode = || {
        let samples = codec.decode(&codes).unwrap();
        sync();
        samples
    };
    let samples = decode().dim(0).unwrap();
    let d = best_of(3, || drop(decode()));
    row(
        format!("codec decode on the device, {frames} frames → {samples} samples (f32)"),
        d,
        format!("RTF {:.4}", d / audio_secs),
    );
}

/// `‖got − expected‖ / ‖expected‖`, and the share of rows of `vocab` logits whose argmax
/// agrees.
fn agreement(expected: &[f32], got: &[f32], vocab: usize) -> (f64, f64) {
    assert_eq!(expected.len(), got.len(), "the logits' sizes differ");
    let (mut diff, mut norm) = (0f64, 0f64);
    for (e, g) in expected.iter().zip(got) {
        diff += ((e - g) as f64).powi(2);
        norm += (*e as f64).powi(2);
    }
    let argmax = |r: &[f32]| {
        r.iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i)
    };
    let rows = expected.len() / vocab;
    let same = expected
        .chunks_exact(vocab)
        .zip(got.chunks_exact(vocab))
        .filter(|(e, g)| argmax(e) == argmax(g))
        .count();
    ((diff / norm).sqrt(), same as f64 / rows as f64)
}
