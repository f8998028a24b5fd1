//! Clients that are not the OpenAI SDK, over real HTTP against the real binary: Open WebUI's
//! exact calls, and `--public-discovery`, which lets it list models and voices without a key
//! while everything else under `/v1` still needs one.

mod common;

use common::decode::decode;
use common::{openai_error, Binary};
use omnivoice_server::audio::AudioFormat;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

const KEY: &str = "integration-key";

/// The routes `--public-discovery` opens.
const DISCOVERY: [&str; 4] = [
    "/v1/models",
    "/v1/models/tts-1",
    "/v1/audio/models",
    "/v1/audio/voices",
];

async fn call(method: Method, url: &str, key: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().request(method.clone(), url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if method == Method::POST {
        request = request.json(&json!({"model": "espeak", "voice": "en-us", "input": "Key?"}));
    }
    request.send().await.expect("request")
}

/// Routes under `/v1` that need the key whatever `--public-discovery` says.
fn guarded_routes() -> [(Method, &'static str); 3] {
    [
        (Method::POST, "/v1/audio/speech"),
        (Method::DELETE, "/v1/audio/cache"),
        (Method::POST, "/v1/voices/reload"),
    ]
}

#[tokio::test]
async fn without_public_discovery_every_v1_route_needs_the_key() {
    let server = Binary::ready(&["--api-key", KEY, "--preload", "espeak/en-us"]).await;
    let routes = DISCOVERY
        .iter()
        .map(|path| (Method::GET, *path))
        .chain(guarded_routes());
    for (method, path) in routes {
        let url = format!("{}{path}", server.url);
        let refused = call(method.clone(), &url, None).await;
        let error = openai_error(refused, 401).await;
        assert_eq!(error["code"], "invalid_api_key", "{method} {path}");
        let wrong = call(method.clone(), &url, Some("not-the-key")).await;
        openai_error(wrong, 401).await;
        let allowed = call(method.clone(), &url, Some(KEY)).await;
        assert_eq!(
            allowed.status(),
            StatusCode::OK,
            "{method} {path} with the key"
        );
    }
    // The document and the playground stay open: a client reads them before it has a key.
    for path in ["/openapi.json", "/", "/health"] {
        let open = call(Method::GET, &format!("{}{path}", server.url), None).await;
        assert_eq!(open.status(), StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn public_discovery_opens_the_lists_and_nothing_else() {
    let server = Binary::ready(&[
        "--api-key",
        KEY,
        "--public-discovery",
        "--preload",
        "espeak/en-us",
    ])
    .await;
    for path in DISCOVERY {
        let url = format!("{}{path}", server.url);
        let open = call(Method::GET, &url, None).await;
        assert_eq!(open.status(), StatusCode::OK, "{path} without a key");
        // A client that sends its key anyway is not refused.
        let keyed = call(Method::GET, &url, Some(KEY)).await;
        assert_eq!(keyed.status(), StatusCode::OK, "{path} with the key");
    }
    for (method, path) in guarded_routes() {
        let url = format!("{}{path}", server.url);
        let refused = call(method.clone(), &url, None).await;
        assert_eq!(
            openai_error(refused, 401).await["code"],
            "invalid_api_key",
            "{method} {path}"
        );
        let allowed = call(method.clone(), &url, Some(KEY)).await;
        assert_eq!(
            allowed.status(),
            StatusCode::OK,
            "{method} {path} with the key"
        );
    }
    // An unknown model is still a 404 in OpenAI's shape, not a 401.
    let missing = call(
        Method::GET,
        &format!("{}/v1/models/tts-9", server.url),
        None,
    )
    .await;
    openai_error(missing, 404).await;
    // Nor is an id that is not UTF-8 once decoded (axum's own answer would be plain text).
    let not_utf8 = call(Method::GET, &format!("{}/v1/models/%FF", server.url), None).await;
    openai_error(not_utf8, 404).await;
}

/// Open WebUI's TTS "OpenAI" engine: API base URL `http://host:port/v1`, a key, model `tts-1`.
/// It lists `{base}/audio/models` and `{base}/audio/voices` with no Authorization header,
/// posts `{base}/audio/speech` with the key and reads the whole body as mp3, and on an error
/// shows `res["error"]["message"]`.
#[tokio::test]
async fn open_webui_lists_without_a_key_and_speaks_with_one() {
    let server = Binary::ready(&[
        "--api-key",
        KEY,
        "--public-discovery",
        "--preload",
        "espeak/en-us",
    ])
    .await;
    let base = format!("{}/v1", server.url);
    let client = reqwest::Client::new();

    let models: Value = client
        .get(format!("{base}/audio/models"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    let models = models["models"].as_array().expect("a models array");
    let tts1 = models
        .iter()
        .find(|m| m["id"] == "tts-1")
        .unwrap_or_else(|| panic!("tts-1 in {models:?}"));
    assert_eq!(tts1["engine"], "piper", "{tts1}");
    assert!(tts1["name"].is_string(), "{tts1}");
    for engine in ["piper", "espeak"] {
        assert!(
            models
                .iter()
                .any(|m| m["id"] == engine && m["engine"] == engine),
            "{engine} in {models:?}"
        );
    }
    // The same ids as OpenAI's own list.
    let openai: Value = client
        .get(format!("{base}/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids = |list: &[Value]| {
        let mut ids: Vec<String> = list.iter().map(|m| m["id"].to_string()).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(models), ids(openai["data"].as_array().unwrap()));

    let voices: Value = client
        .get(format!("{base}/audio/voices"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    let voices = voices["voices"].as_array().expect("a voices array");
    // Open WebUI builds {id: name} from every entry: both must be strings.
    for voice in voices {
        assert!(
            voice["id"].is_string() && voice["name"].is_string(),
            "{voice}"
        );
    }
    let joe = voices
        .iter()
        .find(|v| v["id"] == "en_US-joe-medium")
        .expect("the default voice is listed");
    assert!(
        joe["aliases"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "alloy"),
        "alloy names the default voice: {joe}"
    );

    let speech = client
        .post(format!("{base}/audio/speech"))
        .header("Content-Type", "application/json")
        .header("Authorization", format!("Bearer {KEY}"))
        .json(&json!({"model": "tts-1", "voice": "alloy", "input": "Hello from Open WebUI.", "response_format": "mp3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(speech.status(), StatusCode::OK);
    assert_eq!(speech.headers()["content-type"], "audio/mpeg");
    let body = speech.bytes().await.unwrap();
    let audio = decode(AudioFormat::Mp3, &body);
    let seconds = audio.samples.len() as f64 / f64::from(audio.rate);
    assert!(
        (0.5..10.0).contains(&seconds),
        "a short sentence, {seconds} s"
    );
    let peak = audio.samples.iter().fold(0f32, |m, s| m.max(s.abs()));
    assert!(peak > 0.05, "audible, peak {peak}");

    // Errors: Open WebUI shows res["error"]["message"].
    let bad_voice = client
        .post(format!("{base}/audio/speech"))
        .bearer_auth(KEY)
        .json(&json!({"model": "tts-1", "voice": "no-such-voice", "input": "Hi.", "response_format": "mp3"}))
        .send()
        .await
        .unwrap();
    let error = openai_error(bad_voice, 400).await;
    assert!(
        error["message"].as_str().unwrap().contains("no-such-voice"),
        "{error}"
    );
    let no_key = client
        .post(format!("{base}/audio/speech"))
        .json(
            &json!({"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "mp3"}),
        )
        .send()
        .await
        .unwrap();
    let error = openai_error(no_key, 401).await;
    assert!(
        error["message"].as_str().unwrap().contains("Bearer"),
        "{error}"
    );
}

/// `voice` is a name or OpenAI's `{"id": ...}`; any other shape is a 400 naming `voice`.
#[tokio::test]
async fn voice_is_a_string_or_an_id_object_and_nothing_else() {
    let server = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let speak = |voice: Value| {
        let url = format!("{}/v1/audio/speech", server.url);
        async move {
            reqwest::Client::new()
                .post(url)
                .json(&json!({"model": "espeak", "voice": voice, "input": "Shapes.", "response_format": "wav", "stream": false}))
                .send()
                .await
                .unwrap()
        }
    };
    let as_string = speak(json!("en-us")).await;
    assert_eq!(as_string.status(), StatusCode::OK);
    let as_object = speak(json!({"id": "en-us"})).await;
    assert_eq!(as_object.status(), StatusCode::OK);
    // The same voice either way: with the cache on, the second is the first's audio.
    assert_eq!(as_object.headers()["x-cache"], "HIT");

    for bad in [
        json!(5),
        json!(null),
        json!(["en-us"]),
        json!({}),
        json!({"name": "en-us"}),
        json!({"id": 5}),
    ] {
        let error = openai_error(speak(bad.clone()).await, 400).await;
        assert_eq!(error["param"], "voice", "{bad} → {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("'voice'") && message.contains("\"id\""),
            "{bad}: the message should say which shapes work: {message}"
        );
    }
    // A well-formed id that names no voice is a different error.
    let unknown = openai_error(speak(json!({"id": "nobody"})).await, 400).await;
    assert_eq!(unknown["param"], "voice");
    assert_eq!(unknown["code"], "voice_not_found");
}
