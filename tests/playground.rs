//! The playground page at `GET /`, served by the real binary: its headers and its
//! self-containment here, and its behaviour in a real headless Chromium through
//! `tests/browser/playground_test.py` (prepared by `scripts/browser-venv.sh`): streamed and
//! downloaded playback, errors, "Highlight words", whose read-along view must mark the
//! words of the input in order as they are heard, and Kokoro's voices (`voices/kokoro`, from
//! `scripts/kokoro-assets.sh`): listed under their engine by language, the ones the server
//! cannot speak marked, and blends typed or picked, sent and played. The voice studio around
//! it (`tests/browser/studio_test.py`): designs, clones, profiles, scripts and the request as
//! code with the small committed OmniVoice checkpoint, and its explanations without one.

mod common;

use std::path::Path;
use std::time::Duration;

use common::Binary;
use reqwest::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};

const API_KEY: &str = "playground-test-key";
const BROWSER_TIMEOUT: Duration = Duration::from_secs(300);

/// Every `src="…"` and `href="…"` value in `html`.
fn references(html: &str) -> Vec<String> {
    ["src=\"", "href=\""]
        .iter()
        .flat_map(|attribute| html.split(attribute).skip(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

async fn get(url: &str) -> reqwest::Response {
    let response = reqwest::get(url).await.expect("GET");
    assert_eq!(response.status(), 200, "GET {url}");
    response
}

fn header(response: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    response
        .headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
        .to_string()
}

/// The page is public (no key), self-contained and locked to its own origin.
async fn check_page(url: &str) {
    let page = get(&format!("{url}/")).await;
    assert!(header(&page, CONTENT_TYPE).starts_with("text/html"));
    let csp = header(&page, CONTENT_SECURITY_POLICY);
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
    ] {
        assert!(csp.contains(directive), "CSP lacks {directive}: {csp}");
    }
    assert!(
        !csp.contains("unsafe-") && !csp.contains("http") && !csp.contains('*'),
        "CSP allows more than this origin: {csp}"
    );
    assert!(!header(&page, CACHE_CONTROL).is_empty());
    let html = page.text().await.unwrap();
    assert!(html.contains("id=\"voice\""), "not the playground page");
    assert!(
        html.contains("id=\"blend\"") && html.contains("af_bella(2)+af_sky(1)"),
        "no blend field with its example"
    );
    for tab in ["speak", "design", "clone", "profiles", "script", "code"] {
        assert!(html.contains(&format!("id=\"tab-{tab}\"")), "no {tab} tab");
    }

    let local: Vec<String> = references(&html)
        .into_iter()
        .filter(|r| !r.starts_with("data:"))
        .collect();
    assert!(
        local.iter().any(|r| r.ends_with(".js")) && local.iter().any(|r| r.ends_with(".css")),
        "script and style not found among {local:?}"
    );
    let mut bodies = vec![html];
    for reference in &local {
        assert!(
            reference.starts_with('/') && !reference.starts_with("//"),
            "{reference} is not on this origin"
        );
        let asset = get(&format!("{url}{reference}")).await;
        let expected = if reference.ends_with(".js") {
            "text/javascript"
        } else {
            "text/css"
        };
        assert!(
            header(&asset, CONTENT_TYPE).starts_with(expected),
            "{reference}"
        );
        assert_eq!(header(&asset, CONTENT_SECURITY_POLICY), csp, "{reference}");
        bodies.push(asset.text().await.unwrap());
    }
    for body in &bodies {
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "the page refers to another origin"
        );
    }
}

#[tokio::test]
async fn playground_plays_streamed_speech_in_a_real_browser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".venv-browser/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/browser-venv.sh first",
        python.display()
    );
    assert!(
        root.join("voices/kokoro/kokoro-v1.0.int8.onnx").is_file(),
        "voices/kokoro lacks the Kokoro model: run scripts/kokoro-assets.sh"
    );
    // Piper stays the default (the harness's choice); Kokoro is found in voices/kokoro.
    let server = Binary::ready(&["--voices-dir", "voices", "--api-key", API_KEY]).await;
    check_page(&server.url).await;

    let screenshot = root.join("target/artifacts/playground.png");
    // A screenshot left by an earlier run must not pass for this one's.
    let _ = std::fs::remove_file(&screenshot);
    let run = tokio::process::Command::new(&python)
        .arg(root.join("tests/browser/playground_test.py"))
        .args([
            "--url",
            &server.url,
            "--api-key",
            API_KEY,
            "--expect-kokoro",
        ])
        .arg("--screenshot")
        .arg(&screenshot)
        .kill_on_drop(true)
        .status();
    let status = tokio::time::timeout(BROWSER_TIMEOUT, run)
        .await
        .expect("the browser test timed out")
        .expect("start the browser test");
    assert!(status.success(), "the browser test failed: {status}");
    assert!(
        screenshot.exists(),
        "no screenshot at {}",
        screenshot.display()
    );
    // Without an OmniVoice checkpoint the studio's OmniVoice tabs say why, and how to fix it.
    run_studio_test(&python, &server.url, &["--no-checkpoint"]).await;
}

/// Runs `tests/browser/studio_test.py` against `url` with `args`; its output is printed.
async fn run_studio_test(python: &Path, url: &str, args: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = tokio::process::Command::new(python)
        .arg(root.join("tests/browser/studio_test.py"))
        .args(["--url", url, "--api-key", API_KEY])
        .args(args)
        .kill_on_drop(true)
        .status();
    let status = tokio::time::timeout(BROWSER_TIMEOUT, run)
        .await
        .expect("the studio test timed out")
        .expect("start the studio test");
    assert!(status.success(), "the studio test failed: {status}");
}

/// `GET /v1/audio/voices` lists OmniVoice's knobs with the ranges the server checks, which
/// the page builds its fields from; a value just past a listed maximum is refused.
async fn check_listed_knobs(url: &str) {
    let listing: serde_json::Value = reqwest::Client::new()
        .get(format!("{url}/v1/audio/voices"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = listing["generation_parameters"]
        .as_array()
        .expect("generation_parameters with OmniVoice");
    let knobs = omnivoice_server::params::generation::KNOBS;
    assert_eq!(listed.len(), knobs.len(), "{listed:?}");
    for (name, range, whole) in knobs {
        let knob = listed
            .iter()
            .find(|k| k["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not listed"));
        // Sent as the f32 they are (0.1, not 0.10000000149011612).
        let as_f32 = |field: &str| knob[field].as_f64().map(|v| v as f32);
        assert_eq!(as_f32("minimum"), Some(*range.start()), "{name}");
        assert_eq!(as_f32("maximum"), Some(*range.end()), "{name}");
        assert_eq!(knob["integer"], whole, "{name}");
        let past = f64::from(*range.end()) + 1.0;
        let response = reqwest::Client::new()
            .post(format!("{url}/v1/audio/speech"))
            .bearer_auth(API_KEY)
            .json(&serde_json::json!({"model": "omnivoice", "input": "Hi.", name: past}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{name} = {past}");
    }
}

/// The studio with the small committed OmniVoice checkpoint: a designed voice, a clip
/// uploaded, spoken and saved as a profile, a two-speaker script, the Code tab's curl line
/// giving the bytes the page played, a bad design's message at its field; and a screenshot of
/// each tab at desktop and phone widths, under `target/playground-screenshots`.
#[tokio::test]
async fn the_studio_designs_clones_and_scripts_in_a_real_browser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = common::venv_python("browser");
    let data = tempfile::tempdir().unwrap();
    // No cache: the curl line must give the same bytes by the seed, not by a cache hit.
    let server = common::omnivoice_f32(
        "crates/models/tests/fixtures/omnivoice/clone",
        &[
            "--default-engine",
            "omnivoice",
            "--data-dir",
            data.path().to_str().unwrap(),
            "--no-cache",
            "--api-key",
            API_KEY,
        ],
    )
    .await;
    check_page(&server.url).await;
    check_listed_knobs(&server.url).await;
    let screenshots = root.join("target/playground-screenshots");
    // Screenshots left by an earlier run must not pass for this one's.
    let _ = std::fs::remove_dir_all(&screenshots);
    run_studio_test(
        &python,
        &server.url,
        &[
            "--screenshots",
            screenshots.to_str().unwrap(),
            "--clip",
            root.join("tests/fixtures/omnivoice_clone/reference.wav")
                .to_str()
                .unwrap(),
            "--clip-text",
            "This is my own voice",
        ],
    )
    .await;
    for tab in ["speak", "design", "clone", "profiles", "script", "code"] {
        for width in ["desktop", "phone"] {
            let shot = screenshots.join(format!("{tab}-{width}.png"));
            assert!(shot.is_file(), "no screenshot at {}", shot.display());
        }
    }
    println!("studio screenshots: {}", screenshots.display());
}
