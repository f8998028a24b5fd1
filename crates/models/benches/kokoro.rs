//! Times one Kokoro-82M synthesis of the oracle's `hello` case ("Hello world. This is a
//! test.", af_heart, 2.5 s of audio) through the native port, in `f32`, bf16 and int8 (with
//! the SNR of each against `f32`), on the cores the process may use. `scripts/bench-kokoro.sh` runs kokoro-onnx (onnxruntime, the same int8 file) on the
//! same tokens and style before and after this bench, so the ratio is taken in one run.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use candle_core::{DType, Device, Tensor};
use criterion::Criterion;
use omnivoice_models::kernels::Precision;
use omnivoice_models::kokoro::{Config, Kokoro, Weights};

fn model_path() -> PathBuf {
    let dir = std::env::var_os("OMNIVOICE_KOKORO_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../voices/kokoro"));
    dir.join("kokoro-v1.0.int8.onnx")
}

fn main() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kokoro/hello.npz");
    let arrays = Tensor::read_npz(&fixture).expect("hello.npz");
    let get = |name: &str| {
        arrays
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("hello.npz has no {name}"))
    };
    let tokens: Vec<u32> = get("tokens")
        .to_dtype(DType::U32)
        .unwrap()
        .to_vec1()
        .unwrap();
    let ids = &tokens[1..tokens.len() - 1];
    let style: Vec<f32> = get("style").to_vec1().unwrap();
    let path = model_path();
    let model = Weights::from_onnx(&path, &Device::Cpu)
        .and_then(|weights| Kokoro::load(&Config::v1_0(), weights))
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/kokoro-assets.sh)", path.display()));

    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20))
        .configure_from_args();
    // The cores this process may run on: one under `taskset -c 0`, all of them otherwise (the
    // model lends idle cores to its kernels, as in the server with one request in flight).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let reference = model.synthesize(ids, &style, 1.0).unwrap().audio;
    criterion.bench_function(&format!("kokoro/hello/f32/{cores}-core"), |b| {
        b.iter(|| black_box(model.synthesize(ids, &style, 1.0).unwrap()))
    });
    let bf16 = model.with_precision(Precision::Bf16);
    let audio = bf16.synthesize(ids, &style, 1.0).unwrap().audio;
    println!(
        "bf16 against f32: SNR {:.1} dB ({})",
        snr_db(&reference, &audio),
        Precision::Bf16.describe()
    );
    criterion.bench_function(&format!("kokoro/hello/bf16/{cores}-core"), |b| {
        b.iter(|| black_box(bf16.synthesize(ids, &style, 1.0).unwrap()))
    });
    let int8 = bf16.with_precision(Precision::Int8);
    let audio = int8.synthesize(ids, &style, 1.0).unwrap().audio;
    assert_eq!(audio.len(), reference.len(), "int8 keeps the f32 durations");
    println!(
        "int8 against f32: SNR {:.1} dB ({})",
        snr_db(&reference, &audio),
        Precision::Int8.describe()
    );
    criterion.bench_function(&format!("kokoro/hello/int8/{cores}-core"), |b| {
        b.iter(|| black_box(int8.synthesize(ids, &style, 1.0).unwrap()))
    });
    criterion.final_summary();
}

/// `10·log10(Σ reference² / Σ (signal − reference)²)`.
fn snr_db(reference: &[f32], signal: &[f32]) -> f64 {
    let power: f64 = reference.iter().map(|&v| f64::from(v).powi(2)).sum();
    let noise: f64 = reference
        .iter()
        .zip(signal)
        .map(|(&r, &s)| (f64::from(s) - f64::from(r)).powi(2))
        .sum();
    10.0 * (power / noise.max(1e-30)).log10()
}
