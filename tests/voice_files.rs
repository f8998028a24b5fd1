//! Voice files (the Python omnivoice-server's `<name>.txt` designs) through the real binary and
//! a small OmniVoice checkpoint: a file's name is a voice that speaks its design with its
//! settings, a request's own settings win, an edited file is another voice (never the old
//! audio from the cache), a file outranks `instructions` and a preset of its name, a bad file
//! is refused with its reason, and `GET /v1/voices` lists the usable ones.

mod common;

use common::{openai_error, read_wav, Binary};
use serde_json::{json, Value};

const CHECKPOINT: &str = "crates/models/tests/fixtures/omnivoice/clone";
const TEXT: &str = "Good morning to you all.";

async fn server(files: &std::path::Path) -> Binary {
    Binary::ready(&[
        "--omnivoice-dir",
        CHECKPOINT,
        "--default-engine",
        "omnivoice",
        "--preload",
        "none",
        "--precision",
        "f32",
        "--voice-file-dir",
        files.to_str().unwrap(),
    ])
    .await
}

/// `GET /v1/voices`.
async fn listed(url: &str) -> Value {
    let response = reqwest::get(format!("{url}/v1/voices")).await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// The samples of `TEXT` spoken with `fields` added to the request.
async fn speak(url: &str, fields: Value) -> Vec<i16> {
    let mut body = json!({"model": "omnivoice", "input": TEXT, "response_format": "wav",
                          "stream": false});
    body.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    let response = common::post_speech(url, &body).await;
    let status = response.status();
    let bytes = response.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    read_wav(&bytes).1
}

#[tokio::test]
async fn a_voice_file_is_a_named_design_with_its_settings() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("narrator.txt");
    std::fs::write(
        &file,
        "# The narrator\nmale, low pitch\nseed: 11\nnum_step: 4\ndescription: Deep and calm\n",
    )
    .unwrap();
    let server = server(dir.path()).await;
    let url = server.url.as_str();

    let named = speak(url, json!({"voice": "narrator"})).await;
    let spelt_out = json!({"voice": "design:male, low pitch", "seed": 11, "num_step": 4});
    assert_eq!(
        named,
        speak(url, spelt_out).await,
        "the design and its settings"
    );
    // The request's own seed wins over the file's.
    let reseeded = speak(url, json!({"voice": "narrator", "seed": 12})).await;
    assert_ne!(reseeded, named);
    let spelt_out = json!({"voice": "design:male, low pitch", "seed": 12, "num_step": 4});
    assert_eq!(reseeded, speak(url, spelt_out).await);
    // A file outranks instructions, as in the Python server.
    let instructed = json!({"voice": "narrator", "instructions": "female, high pitch"});
    assert_eq!(speak(url, instructed).await, named);

    // Listed in the Python server's shape.
    let listed = listed(url).await;
    let files: Vec<&Value> = listed["voices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["type"] == "file")
        .collect();
    assert_eq!(files.len(), 1, "{listed}");
    assert_eq!(files[0]["id"], "narrator");
    assert_eq!(files[0]["description"], "Deep and calm");
    assert_eq!(files[0]["instructions"], "male, low pitch");
    assert_eq!(files[0]["params"], json!({"seed": 11, "num_step": 4}));

    // An edited file is another voice: the cache never answers with the old one.
    std::fs::write(&file, "female, high pitch\nseed: 11\nnum_step: 4\n").unwrap();
    let edited = speak(url, json!({"voice": "narrator"})).await;
    assert_ne!(edited, named, "the new design");
    let spelt_out = json!({"voice": "design:female, high pitch", "seed": 11, "num_step": 4});
    assert_eq!(edited, speak(url, spelt_out).await);

    // A file of a preset's name outranks the preset.
    let alloy = speak(url, json!({"voice": "alloy", "seed": 11, "num_step": 4})).await;
    std::fs::write(dir.path().join("alloy.txt"), "male, low pitch").unwrap();
    let overridden = speak(url, json!({"voice": "alloy", "seed": 11, "num_step": 4})).await;
    assert_ne!(overridden, alloy);
    assert_eq!(overridden, named, "the file's design, not the preset's");
}

#[tokio::test]
async fn a_voice_file_that_cannot_be_used_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("typo.txt"), "male, low ptich\n").unwrap();
    std::fs::write(dir.path().join("loud.txt"), "male\nvolume: 11\n").unwrap();
    let server = server(dir.path()).await;
    let url = server.url.as_str();
    for (voice, says) in [
        ("typo", "did you mean"),
        ("loud", "unknown setting 'volume'"),
    ] {
        let body = json!({"model": "omnivoice", "voice": voice, "input": TEXT});
        let error = openai_error(common::post_speech(url, &body).await, 400).await;
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(&format!("{voice}.txt")), "{message}");
        assert!(message.contains(says), "{message}");
    }
    let listed = listed(url).await;
    assert!(
        !listed["voices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["type"] == "file"),
        "{listed}"
    );
}

/// Two replicas on one data volume read the same voice files: a file written beside them is a
/// voice on both, speaking the same audio; an edit is heard on both; a deleted file is refused
/// by both. The files are read at every use, so there is nothing to keep in step.
#[tokio::test]
async fn replicas_on_one_voice_file_directory_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = tokio::join!(server(dir.path()), server(dir.path()));
    let file = dir.path().join("shared.txt");
    std::fs::write(
        &file,
        "female, high pitch\nseed: 5\nnum_step: 4\ndescription: One\n",
    )
    .unwrap();
    let on_a = speak(&a.url, json!({"voice": "shared"})).await;
    let on_b = speak(&b.url, json!({"voice": "shared"})).await;
    assert_eq!(on_a, on_b, "one file, one voice on both");

    std::fs::write(
        &file,
        "male, low pitch\nseed: 6\nnum_step: 4\ndescription: Two\n",
    )
    .unwrap();
    for url in [&a.url, &b.url] {
        let voices = listed(url).await;
        assert!(voices.to_string().contains("\"Two\""), "{voices}");
    }
    let edited = speak(&b.url, json!({"voice": "shared"})).await;
    assert_ne!(edited, on_a, "the edit is heard");
    assert_eq!(speak(&a.url, json!({"voice": "shared"})).await, edited);

    std::fs::remove_file(&file).unwrap();
    for url in [&a.url, &b.url] {
        let body = json!({"model": "omnivoice", "voice": "shared", "input": TEXT});
        let error = openai_error(common::post_speech(url, &body).await, 400).await;
        assert_eq!(error["param"], "voice", "{error}");
    }
}
