//! The DNSMOS part of the Kokoro precision gate: what `--precision auto` makes Kokoro say must
//! score no lower than kokoro-onnx (its int8 file, the model people actually run) on the same
//! 3 voices × 20 sentences, minus 0.05.
//!
//! A reduced precision is not judged by its distance from our own `f32` (int8 is far from it,
//! and so is kokoro-onnx) but by the peer's quality. kokoro-onnx's scores are a committed
//! fixture (`tests/fixtures/kokoro_gate/kokoro-onnx.json`, written by
//! `scripts/kokoro-gate.sh --write-fixture`, which also measures DistillMOS and Whisper, the
//! gate's other two judges, too heavy for a test); ours are measured here, through the real
//! binary on a real port, with DNSMOS (`scripts/dnsmos.py` in `.venv-mos`, made by
//! `scripts/mos-venv.sh`, run by `scripts/test.sh`).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{post_speech, read_wav, Binary};
use serde_json::{json, Value};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kokoro_gate/kokoro-onnx.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("the gate's fixture")).unwrap()
}

/// DNSMOS's overall MOS of each file, in order.
fn dnsmos_overall(files: &[PathBuf]) -> Vec<f64> {
    let output = Command::new(common::venv_python("mos"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/dnsmos.py"))
        .args(files)
        .output()
        .expect("run scripts/dnsmos.py");
    assert!(
        output.status.success(),
        "scripts/dnsmos.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let scores: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(scores.len(), files.len());
    scores.iter().map(|s| s["ovrl"].as_f64().unwrap()).collect()
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auto_precision_scores_within_the_dnsmos_gate_of_kokoro_onnx() {
    common::venv_python("mos");
    let fixture = fixture();
    let voices: Vec<&str> = fixture["voices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[0].as_str().unwrap())
        .collect();
    let sentences: Vec<&str> = fixture["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let peer: Vec<f64> = fixture["dnsmos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ovrl"].as_f64().unwrap())
        .collect();
    let margin = fixture["margin"].as_f64().unwrap();
    // The minimum: at least 3 voices × 20 sentences, one peer score each.
    assert!(voices.len() >= 3 && sentences.len() >= 20);
    assert_eq!(peer.len(), voices.len() * sentences.len());

    let dir = tempfile::tempdir().unwrap();
    // The server as users run it with Kokoro installed: its default precision, cache off.
    let server = Binary::ready(&["--no-cache", "--kokoro-dir", "voices/kokoro"]).await;
    let mut files = Vec::new();
    for voice in &voices {
        for (i, sentence) in sentences.iter().enumerate() {
            let body = json!({"model": "kokoro", "voice": voice, "input": sentence,
                              "response_format": "wav", "stream": false});
            let response = post_speech(&server.url, &body).await;
            assert_eq!(response.status(), 200, "{voice} {sentence}");
            let bytes = response.bytes().await.unwrap();
            assert_eq!(read_wav(&bytes).0, 24_000, "{voice}");
            let file = dir.path().join(format!("{voice}-{i:02}.wav"));
            std::fs::write(&file, bytes).unwrap();
            files.push(file);
        }
    }
    drop(server);
    let ours = dnsmos_overall(&files);
    for (v, voice) in voices.iter().enumerate() {
        let range = v * sentences.len()..(v + 1) * sentences.len();
        eprintln!(
            "{voice}: DNSMOS overall ours {:.3}, kokoro-onnx {:.3}",
            mean(&ours[range.clone()]),
            mean(&peer[range])
        );
    }
    let (ours, peer) = (mean(&ours), mean(&peer));
    eprintln!("all voices: DNSMOS overall ours {ours:.3}, kokoro-onnx {peer:.3}");
    assert!(
        ours >= peer - margin,
        "DNSMOS overall {ours:.3} is below kokoro-onnx's {peer:.3} minus {margin}"
    );
}
