//! The third-party Python SDK of the Python omnivoice-server (`omnivoice-server-api`, pinned in
//! `tests/sdk/requirements.txt`, prepared by `scripts/sdk-venv.sh`), unchanged, against the
//! real binary with the small committed OmniVoice checkpoint: every one of its calls, its
//! `update_profile` without a clip over urlencoded and over multipart included
//! (`tests/sdk/sdk_test.py`).

mod common;

use std::path::Path;
use std::time::Duration;

/// The checkpoint with an audio tokenizer: it can clone.
const CHECKPOINT: &str = "crates/models/tests/fixtures/omnivoice/clone";
/// A clip and what it says (`tests/fixtures/omnivoice_clone/cases.json`).
const CLIP: &str = "tests/fixtures/omnivoice_clone/reference.wav";
const CLIP_TEXT: &str = "This is my own voice";
const SDK_TIMEOUT: Duration = Duration::from_secs(300);

#[tokio::test]
async fn every_call_of_the_python_sdk_works_unchanged() {
    let python = common::venv_python("sdk");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap();
    let server = common::omnivoice_f32(
        CHECKPOINT,
        &[
            "--default-engine",
            "omnivoice",
            "--data-dir",
            data_dir,
            "--no-cache",
        ],
    )
    .await;
    let run = tokio::process::Command::new(python)
        .arg(root.join("tests/sdk/sdk_test.py"))
        .args(["--url", &server.url, "--clip-text", CLIP_TEXT])
        .arg("--clip")
        .arg(root.join(CLIP))
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(SDK_TIMEOUT, run)
        .await
        .expect("the SDK test timed out")
        .expect("start the SDK test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the SDK failed a call:\n{stdout}{stderr}"
    );
    assert!(
        stdout.contains("\"calls\": 9"),
        "not every call ran:\n{stdout}"
    );
}
