//! Listening to what the server says with independent ears: the reference Python scripts
//! (Whisper through `scripts/asr.py`, kokoro-onnx through `scripts/kokoro_onnx_speak.py`) run
//! in their pinned venvs, and the edit distance that turns what Whisper heard into an error
//! rate. Shared by the ASR tests of every language.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// A script of this repository, by its path from the root.
pub fn script(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Runs `python script args`, feeding `stdin`; its stdout, or a failure with its stderr.
pub fn run_python(python: &Path, script_path: &str, args: &[String], stdin: &str) -> Vec<u8> {
    let mut child = Command::new(python)
        .arg(script(script_path))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {script_path}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{script_path} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// What Whisper (`scripts/asr.py`, base model) hears in each of `files`, in order, told the
/// `language` (`en`, `zh`, `ja`) or `auto` to tell it itself: `{text, language, words}`.
pub async fn transcribe(language: &str, files: &[PathBuf]) -> Vec<Value> {
    let python = super::venv_python("asr");
    let mut args = vec!["--language".to_string(), language.to_string()];
    args.extend(files.iter().map(|p| p.display().to_string()));
    let heard =
        tokio::task::spawn_blocking(move || run_python(&python, "scripts/asr.py", &args, ""))
            .await
            .unwrap();
    serde_json::from_slice(&heard).expect("JSON from scripts/asr.py")
}

/// Substitutions, insertions and deletions that turn `a` into `b` (characters or words).
pub fn edit_distance<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(x != y);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// kokoro-onnx speaks each job (`{voice, lang?, text | phonemes, wav}`) into its WAV file,
/// through `scripts/kokoro_onnx_speak.py` on the server's int8 file and voice packs.
pub async fn kokoro_onnx_speak(jobs: &Value) {
    let python = super::venv_python("kokoro");
    let args = vec![
        "--kokoro-dir".to_string(),
        super::kokoro_dir().display().to_string(),
    ];
    let jobs = jobs.to_string();
    tokio::task::spawn_blocking(move || {
        run_python(&python, "scripts/kokoro_onnx_speak.py", &args, &jobs)
    })
    .await
    .unwrap();
}
