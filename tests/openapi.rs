//! `GET /openapi.json` of the real binary: what it states, checked here; its validity, checked
//! by a real OpenAPI 3.1 validator; and its truth, checked by a schema-driven fuzzer
//! (schemathesis) against the live server, which must see no 5xx and no answer that breaks the
//! document. Both tools live in `.venv-api`, made by `scripts/api-venv.sh`.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::Binary;
use omnivoice_server::audio::AudioFormat;
use omnivoice_server::params::{NOISE, SPEED};
use omnivoice_server::speech::SubtitleFormat;
use serde_json::Value;

const KEY: &str = "openapi-test-key";
/// A limit other than the default, so the document is seen to follow the setting.
const MAX_INPUT_CHARS: usize = 300;
/// Test cases per operation and phase; with a fixed seed a failure reproduces.
const FUZZ_EXAMPLES: &str = "60";
const FUZZ_SEED: &str = "20260513";
/// Not `missing_test_data`: random profile ids find no profile (a 404 is the right answer), and
/// the profile routes' real cases are in `tests/profiles.rs`.
const FUZZ_WARNINGS: &str = "missing_auth,base_url_mismatch,unused_openapi_auth,\
    unsupported_regex,method_not_allowed,unmatched_filter,unresolvable_reference,rate_limited,\
    dictionary_mismatch";
/// A bound against a hang, not a speed test: one run took 40–60 s on two busy cores once
/// scripts and cloning joined the document (a valid script is up to 100 lines to speak), and
/// over 180 s while a clean build of the workspace shared those cores.
const FUZZ_TIMEOUT: Duration = Duration::from_secs(360);

fn venv_tool(name: &str) -> PathBuf {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".venv-api/bin")
        .join(name);
    assert!(
        tool.exists(),
        "{} is missing: run scripts/api-venv.sh first",
        tool.display()
    );
    tool
}

async fn server(public_discovery: bool) -> Binary {
    let max = MAX_INPUT_CHARS.to_string();
    let mut args = vec![
        "--api-key",
        KEY,
        "--max-input-chars",
        &max,
        "--preload",
        "espeak/en-us",
    ];
    if public_discovery {
        args.push("--public-discovery");
    }
    Binary::ready(&args).await
}

/// The document, fetched without a key (it is public).
async fn document(url: &str) -> Value {
    let response = reqwest::get(format!("{url}/openapi.json")).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    response.json().await.expect("the document is JSON")
}

fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    let op = &doc["paths"][path][method];
    assert!(op.is_object(), "{method} {path} is not documented");
    op
}

fn needs_key(doc: &Value, method: &str, path: &str) -> bool {
    let op = operation(doc, method, path);
    match op.get("security") {
        None => false,
        Some(security) => {
            assert_eq!(security, &serde_json::json!([{"bearer": []}]), "{path}");
            assert!(op["responses"]["401"].is_object(), "{path} documents 401");
            true
        }
    }
}

const DISCOVERY: [(&str, &str); 4] = [
    ("get", "/v1/models"),
    ("get", "/v1/models/{id}"),
    ("get", "/v1/audio/models"),
    ("get", "/v1/audio/voices"),
];
const GUARDED: [(&str, &str); 20] = [
    ("post", "/v1/audio/speech"),
    ("post", "/v1/audio/speech/clone"),
    ("post", "/v1/audio/script"),
    ("post", "/v1/audio/phonemize"),
    ("post", "/dev/phonemize"),
    ("get", "/v1/audio/speech/stream"),
    ("post", "/v1/audio/speech/timestamps"),
    ("post", "/v1/audio/speech/subtitles"),
    ("post", "/dev/captioned_speech"),
    ("delete", "/v1/audio/cache"),
    ("post", "/v1/voices/reload"),
    ("get", "/v1/audio/lexicon"),
    ("put", "/v1/audio/lexicon"),
    ("delete", "/v1/audio/lexicon"),
    ("get", "/v1/voices"),
    ("post", "/v1/voices/profiles"),
    ("get", "/v1/voices/profiles/{profile_id}"),
    ("patch", "/v1/voices/profiles/{profile_id}"),
    ("delete", "/v1/voices/profiles/{profile_id}"),
    ("get", "/v1/voices/profiles/{profile_id}/audio"),
];
const OPEN: [(&str, &str); 10] = [
    ("get", "/"),
    ("get", "/health"),
    ("get", "/health/live"),
    ("get", "/health/ready"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("get", "/playground/app.js"),
    ("get", "/playground/style.css"),
    ("get", "/playground/studio.js"),
    ("get", "/playground/workshop.js"),
];

#[tokio::test]
async fn the_document_states_the_contract_from_its_sources() {
    let server = server(false).await;
    let doc = document(&server.url).await;
    assert_eq!(doc["openapi"], "3.1.0");

    let documented: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|item| item.as_object().unwrap().len())
        .sum();
    assert_eq!(
        documented,
        DISCOVERY.len() + GUARDED.len() + OPEN.len(),
        "every route once"
    );
    for (method, path) in DISCOVERY.iter().chain(&GUARDED) {
        assert!(
            needs_key(&doc, method, path),
            "{method} {path} needs the key"
        );
    }
    for (method, path) in OPEN {
        assert!(!needs_key(&doc, method, path), "{method} {path} is open");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );

    let request = &doc["components"]["schemas"]["SpeechRequest"];
    let mut required: Vec<&str> = request["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort();
    // `model` and `voice` have defaults, as in the Python omnivoice-server.
    assert_eq!(required, ["input"]);
    let field = |name: &str| &request["properties"][name];
    assert_eq!(field("input")["maxLength"], MAX_INPUT_CHARS);
    assert!(
        field("input")["description"]
            .as_str()
            .unwrap()
            .contains("default is 4096"),
        "{}",
        field("input")
    );
    assert_eq!(field("speed")["minimum"], f64::from(*SPEED.start()));
    assert_eq!(field("speed")["maximum"], f64::from(*SPEED.end()));
    for noise in ["noise_scale", "noise_w"] {
        assert_eq!(field(noise)["minimum"], f64::from(*NOISE.start()));
        assert_eq!(field(noise)["maximum"], f64::from(*NOISE.end()));
    }
    let formats: Vec<&str> = field("response_format")["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let expected: Vec<&str> = AudioFormat::ALL.iter().map(|f| f.as_str()).collect();
    assert_eq!(formats, expected);
    assert_eq!(
        doc["components"]["schemas"]["StreamFormat"]["enum"],
        serde_json::json!(["audio", "sse"])
    );
    let schemas = &doc["components"]["schemas"];
    assert_eq!(field("voice")["$ref"], "#/components/schemas/SpeechVoice");
    let voice = &schemas["SpeechVoice"]["oneOf"];
    assert_eq!(voice[0]["type"], "string");
    assert_eq!(voice[1]["required"], serde_json::json!(["id"]));
    // A listed voice is its own schema, not the request's voice shape.
    let listed = &schemas["VoiceList"]["properties"]["voices"]["items"]["$ref"];
    assert_eq!(listed, "#/components/schemas/Voice");
    for key in [
        "id",
        "name",
        "engine",
        "language",
        "sample_rate",
        "loaded",
        "gender",
        "supported",
        "unsupported_reason",
    ] {
        assert!(
            schemas["Voice"]["properties"][key].is_object(),
            "Voice.{key}"
        );
    }
    // Every voice says whether it can be spoken; gender and reason only where there is one.
    let required = schemas["Voice"]["required"].as_array().unwrap();
    assert!(
        required.contains(&serde_json::json!("supported")),
        "{required:?}"
    );
    assert!(
        !required.contains(&serde_json::json!("gender")),
        "{required:?}"
    );
    let listing = operation(&doc, "get", "/v1/audio/voices")["description"]
        .as_str()
        .unwrap_or_default();
    assert!(
        listing.contains("supported: false") && listing.contains("af_bella(2)+af_sky(1)"),
        "the voice list's description: {listing}"
    );

    let speech = &operation(&doc, "post", "/v1/audio/speech")["responses"];
    let content = speech["200"]["content"].as_object().unwrap();
    for format in AudioFormat::ALL {
        assert!(
            content.contains_key(format.content_type()),
            "{}",
            format.content_type()
        );
    }
    assert!(content.contains_key("text/event-stream"));
    let headers = &speech["200"]["headers"];
    for name in [
        "x-cache",
        "x-audio-sample-rate",
        "x-synthesis-latency-s",
        "x-request-id",
    ] {
        assert_eq!(headers[name]["required"], true, "{name}");
    }
    assert!(headers["x-audio-duration-s"].is_object());
    assert_eq!(speech["429"]["headers"]["retry-after"]["required"], true);
    for status in ["400", "401", "413", "415", "429", "500", "503", "504"] {
        assert_eq!(
            speech[status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody",
            "{status}"
        );
    }
    // Subtitles: the speech request plus the format, answered as the file in its media type.
    let subtitles = operation(&doc, "post", "/v1/audio/speech/subtitles");
    let body = &subtitles["requestBody"]["content"]["application/json"]["schema"];
    let body = if let Some(reference) = body["$ref"].as_str() {
        &schemas[reference.rsplit('/').next().unwrap()]
    } else {
        body
    };
    assert_eq!(
        body["allOf"][0]["$ref"], "#/components/schemas/SpeechRequest",
        "{body}"
    );
    let subtitle_format = &body["allOf"][1]["properties"]["subtitle_format"];
    let mut names: Vec<Value> = SubtitleFormat::ALL
        .iter()
        .map(|f| f.as_str().into())
        .collect();
    names.push(Value::Null);
    assert_eq!(subtitle_format["enum"], Value::Array(names));
    assert_eq!(
        subtitle_format["default"],
        SubtitleFormat::default().as_str()
    );
    let answer = &subtitles["responses"]["200"];
    for format in SubtitleFormat::ALL {
        assert_eq!(
            answer["content"][format.media_type()]["schema"]["type"],
            "string",
            "{}",
            format.media_type()
        );
    }
    assert_eq!(answer["headers"]["x-audio-duration-s"]["required"], true);
    for status in ["400", "429", "504"] {
        assert!(subtitles["responses"][status].is_object(), "{status}");
    }

    let error = &doc["components"]["schemas"]["ErrorDetail"]["properties"];
    for key in ["message", "type", "param", "code"] {
        assert!(error[key].is_object(), "error.{key}");
    }

    // With --public-discovery, exactly the lists are documented as open.
    let public = server_doc(true).await;
    for (method, path) in DISCOVERY {
        assert!(!needs_key(&public, method, path), "{path} is open");
    }
    for (method, path) in GUARDED {
        assert!(
            needs_key(&public, method, path),
            "{path} still needs the key"
        );
    }
}

async fn server_doc(public_discovery: bool) -> Value {
    let server = server(public_discovery).await;
    document(&server.url).await
}

#[tokio::test]
async fn the_document_passes_a_real_openapi_validator() {
    let validator = venv_tool("openapi-spec-validator");
    for public_discovery in [false, true] {
        let doc = server_doc(public_discovery).await;
        let file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
        std::fs::write(file.path(), doc.to_string()).unwrap();
        let output = std::process::Command::new(&validator)
            .args(["--schema", "3.1", "--validation-errors", "all"])
            .arg(file.path())
            .output()
            .expect("run openapi-spec-validator");
        assert!(
            output.status.success(),
            "openapi-spec-validator rejected the document:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Every check schemathesis has, but one: `positive_data_acceptance` expects every
/// schema-valid body to succeed, and a valid body may still name a model or voice that this
/// server does not have (a 400 the schema cannot rule out, since voices change on reload).
#[tokio::test]
async fn a_schema_fuzzer_finds_no_5xx_and_no_answer_off_the_document() {
    let schemathesis = venv_tool("schemathesis");
    for public_discovery in [false, true] {
        let server = server(public_discovery).await;
        let report = tempfile::tempdir().unwrap();
        let run = tokio::process::Command::new(&schemathesis)
            .arg("run")
            .arg(format!("{}/openapi.json", server.url))
            .args(["--header", &format!("Authorization: Bearer {KEY}")])
            .args([
                "--checks",
                "all",
                "--exclude-checks",
                "positive_data_acceptance",
            ])
            // A WebSocket handshake is no request an HTTP fuzzer can make; tests/ws_stream.rs
            // drives that route with a real WebSocket client.
            .args(["--exclude-path", "/v1/audio/speech/stream"])
            .args(["--max-examples", FUZZ_EXAMPLES, "--seed", FUZZ_SEED])
            // Every warning but three: `validation_mismatch` and `low_valid_rate` are
            // `positive_data_acceptance` again (a schema-valid body still names models and
            // voices this server lacks, so some routes see mostly 400s, depending on the seed
            // and the schema's shape), and `missing_deserializer` says that the tool cannot
            // read the NDJSON streams of the timestamp routes.
            .args(["--warnings", FUZZ_WARNINGS])
            .args(["--generation-database", "none", "--request-timeout", "30"])
            .args(["--workers", "2", "--no-color"])
            .current_dir(report.path())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(FUZZ_TIMEOUT, run)
            .await
            .expect("schemathesis finished within its time bound")
            .expect("run schemathesis");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "schemathesis found problems (public discovery {public_discovery}):\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains("No issues found"),
            "schemathesis ran no test:\n{stdout}"
        );
        let generated = stdout
            .lines()
            .find_map(|l| l.trim().split_once(" generated"))
            .and_then(|(n, _)| n.trim().parse::<u32>().ok())
            .unwrap_or_else(|| panic!("no test-case count in:\n{stdout}"));
        assert!(generated >= 200, "only {generated} test cases:\n{stdout}");
    }
}
