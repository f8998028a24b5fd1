//! Times one Kokoro-82M synthesis of the oracle's `hello` case ("Hello world. This is a
//! test.", af_heart, 2.5 s of audio) through the native port, stage by stage and whole, on one
//! thread. `scripts/bench-kokoro.sh` runs kokoro-onnx (onnxruntime, the same int8 file) on the
//! same tokens and style before and after this bench, so the ratio is taken in one run.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use candle_core::{DType, Device, Tensor};
use criterion::Criterion;
use omnivoice_models::kokoro::Kokoro;

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
    let model = Kokoro::load(&path, &Device::Cpu)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/kokoro-assets.sh)", path.display()));

    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20))
        .configure_from_args();
    criterion.bench_function("kokoro/hello/synthesize", |b| {
        b.iter(|| black_box(model.synthesize(ids, &style, 1.0).unwrap()))
    });
    criterion.final_summary();
}
