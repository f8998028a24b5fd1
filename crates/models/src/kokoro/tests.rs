//! Kokoro stage by stage against onnxruntime: the fixtures in `tests/fixtures/kokoro/` come
//! from `scripts/kokoro_reference.py` (the all-f32 rewrite of the shipped int8 graph, with the
//! same dequantized weights this port loads), so the only differences left are the order of
//! floating-point operations. The model file comes from `OMNIVOICE_KOKORO_DIR` or
//! `<repo>/voices/kokoro` (`scripts/kokoro-assets.sh`); a missing one fails the tests.

use std::path::PathBuf;
use std::sync::OnceLock;

use candle_core::{DType, Device, Tensor};

use super::testing::model_path;
use super::{prosody, Kokoro};

fn model() -> &'static Kokoro {
    static MODEL: OnceLock<Kokoro> = OnceLock::new();
    MODEL.get_or_init(|| {
        let start = std::time::Instant::now();
        let m = Kokoro::load(&model_path(), &Device::Cpu).unwrap();
        eprintln!(
            "Kokoro::load: {:.0} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
        m
    })
}

/// One case of the oracle: its arrays by name.
struct Case {
    name: &'static str,
    arrays: Vec<(String, Tensor)>,
}

impl Case {
    fn load(name: &'static str) -> Self {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/kokoro")
            .join(format!("{name}.npz"));
        let arrays = Tensor::read_npz(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Self { name, arrays }
    }

    fn get(&self, key: &str) -> Tensor {
        self.arrays
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("{}.npz has no {key}", self.name))
    }

    fn has(&self, key: &str) -> bool {
        self.arrays.iter().any(|(k, _)| k == key)
    }

    /// The ids with their pads, as the model takes them.
    fn ids(&self) -> Tensor {
        self.get("tokens").to_dtype(DType::U32).unwrap()
    }

    fn style(&self) -> Tensor {
        self.get("style").reshape((1, 256)).unwrap()
    }

    fn speed(&self) -> f32 {
        self.get("speed").to_scalar::<f32>().unwrap()
    }

    fn durations(&self) -> Vec<u32> {
        let d = self.get("pred_dur").to_dtype(DType::U32).unwrap();
        d.to_vec1::<u32>().unwrap()
    }
}

const CASES: [&str; 2] = ["hello", "emma"];

/// Largest |ours − reference| over the reference's largest magnitude, and that magnitude.
fn relative_error(ours: &Tensor, reference: &Tensor) -> (f32, f32) {
    assert_eq!(ours.dims(), reference.dims(), "shapes differ");
    let ours = ours.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let reference = reference.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = ours
        .iter()
        .zip(&reference)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    (diff / scale, scale)
}

fn check(case: &Case, stage: &str, ours: &Tensor, tolerance: f32) {
    let (rel, scale) = relative_error(ours, &case.get(stage));
    eprintln!(
        "{}/{stage}: max error {rel:.2e} of max |ref| {scale:.3}",
        case.name
    );
    assert!(
        rel <= tolerance,
        "{}/{stage}: max error {rel:.2e} × max |ref| exceeds {tolerance:.0e}",
        case.name
    );
}

#[test]
fn albert_and_its_projection_match_the_oracle() {
    let m = model();
    for name in CASES {
        let case = Case::load(name);
        let ids = case.ids();
        if case.has("bert") {
            check(&case, "bert", &m.albert.forward(&ids).unwrap(), 1e-4);
        }
        check(&case, "bert_encoder", &m.bert(&ids).unwrap(), 1e-4);
    }
}

#[test]
fn text_encoder_matches_the_oracle() {
    let m = model();
    for name in CASES {
        let case = Case::load(name);
        let t_en = m
            .text_encoder
            .forward(&case.ids())
            .unwrap()
            .squeeze(0)
            .unwrap();
        check(&case, "t_en", &t_en, 1e-4);
    }
}

#[test]
fn durations_match_the_oracle_exactly() {
    let m = model();
    for name in CASES {
        let case = Case::load(name);
        let s = case.style().narrow(1, 128, 128).unwrap();
        let d = m.prosody.encode(&m.bert(&case.ids()).unwrap(), &s).unwrap();
        check(&case, "dur_encoder", &d, 1e-3);
        let logits = m.prosody.duration_logits(&d).unwrap();
        check(&case, "dur_logits", &logits, 1e-3);
        let durations = prosody::durations(&logits, case.speed()).unwrap();
        assert_eq!(durations, case.durations(), "{name}: durations");
    }
}

#[test]
fn pitch_energy_and_alignment_match_the_oracle() {
    let m = model();
    for name in CASES {
        let case = Case::load(name);
        let p = m.predict(&case.ids(), &case.style(), case.speed()).unwrap();
        assert_eq!(p.durations, case.durations(), "{name}: durations");
        check(&case, "f0", &p.f0, 1e-3);
        check(&case, "n", &p.n, 1e-3);
        if case.has("asr") {
            check(&case, "asr", &p.asr.squeeze(0).unwrap(), 1e-4);
        }
    }
}
