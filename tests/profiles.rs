//! Voice profiles through the real binary on a real port: the Python omnivoice-server's
//! routes and shapes, uploads of every bad kind, persistence across restarts, a kill in the
//! middle of an upload, concurrent changes, auth, and profiles the Python server itself wrote
//! (`tests/fixtures/python_profiles`, made by `scripts/python_profiles_fixture.py` with its
//! own `ProfileService`).

mod common;

use std::io::Write;
use std::path::Path;

use common::{get_json, openai_error, Binary};
use serde_json::Value;

/// Profiles need no model: espeak-ng, which is always there, is the default engine.
const NO_MODELS: [&str; 6] = [
    "--default-engine",
    "espeak",
    "--default-voice",
    "en-us",
    "--preload",
    "none",
];

const BOUNDARY: &str = "----omnivoice-test-boundary";

/// One part of a form: a text field, or a file.
enum Part<'a> {
    Text(&'a str, &'a str),
    File(&'a str, &'a [u8]),
}

/// A `multipart/form-data` body, as clients send a file named `audio` of no known type.
fn form(parts: &[Part]) -> Vec<u8> {
    let mut body = Vec::new();
    for part in parts {
        body.extend(format!("--{BOUNDARY}\r\n").bytes());
        match part {
            Part::Text(name, value) => {
                body.extend(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                        .bytes(),
                );
            }
            Part::File(name, bytes) => {
                body.extend(
                    format!(
                        "Content-Disposition: form-data; name=\"{name}\"; filename=\"audio\"\r\n\
                         Content-Type: application/octet-stream\r\n\r\n"
                    )
                    .bytes(),
                );
                body.extend_from_slice(bytes);
                body.extend(b"\r\n");
            }
        }
    }
    body.extend(format!("--{BOUNDARY}--\r\n").bytes());
    body
}

async fn send(
    method: reqwest::Method,
    url: &str,
    parts: &[Part<'_>],
    key: Option<&str>,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .request(method, url)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(form(parts));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.expect("request")
}

async fn create(url: &str, parts: &[Part<'_>]) -> reqwest::Response {
    send(
        reqwest::Method::POST,
        &format!("{url}/v1/voices/profiles"),
        parts,
        None,
    )
    .await
}

async fn patch(url: &str, id: &str, parts: &[Part<'_>]) -> reqwest::Response {
    send(
        reqwest::Method::PATCH,
        &format!("{url}/v1/voices/profiles/{id}"),
        parts,
        None,
    )
    .await
}

/// A mono 16-bit WAV of `seconds` of a tone at `rate`.
fn wav(seconds: f64, rate: u32) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut file = std::io::Cursor::new(Vec::new());
    let mut writer = hound::WavWriter::new(&mut file, spec).unwrap();
    for i in 0..(seconds * f64::from(rate)) as usize {
        let v = (i as f64 * 0.07).sin() * 8000.0;
        writer.write_sample(v as i16).unwrap();
    }
    writer.finalize().unwrap();
    file.into_inner()
}

async fn server(data_dir: &Path, extra: &[&str]) -> Binary {
    let mut args = vec!["--data-dir", data_dir.to_str().unwrap()];
    args.extend_from_slice(&NO_MODELS);
    args.extend_from_slice(extra);
    Binary::ready(&args).await
}

async fn json(response: reqwest::Response, status: u16) -> Value {
    let code = response.status().as_u16();
    let body = response.text().await.unwrap();
    assert_eq!(code, status, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn clones(voices: &Value) -> Vec<String> {
    voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["type"] == "clone")
        .map(|v| v["profile_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn create_get_change_delete_and_survive_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let server = server(data.path(), &[]).await;
    let url = server.url.as_str();
    let clip = wav(1.0, 16_000);

    let made = json(
        create(
            url,
            &[
                Part::Text("profile_id", "anna"),
                Part::Text("ref_text", "Hello, this is Anna."),
                Part::File("ref_audio", &clip),
            ],
        )
        .await,
        201,
    )
    .await;
    assert_eq!(made["profile_id"], "anna");
    assert_eq!(made["name"], "anna");
    assert_eq!(made["ref_text"], "Hello, this is Anna.");
    let created_at = made["created_at"].as_str().unwrap().to_string();
    assert!(created_at.ends_with("+00:00"), "{created_at}");
    // Where the Python server keeps them, in its layout.
    let dir = data.path().join("profiles/anna");
    assert!(dir.join("ref_audio.wav").is_file() && dir.join("meta.json").is_file());

    let again = create(
        url,
        &[
            Part::Text("profile_id", "anna"),
            Part::File("ref_audio", &clip),
        ],
    )
    .await;
    let error = openai_error(again, 409).await;
    assert_eq!(error["param"], "profile_id");
    let replaced = json(
        create(
            url,
            &[
                Part::Text("profile_id", "anna"),
                Part::Text("overwrite", "true"),
                Part::Text("name", "Anna K."),
                Part::Text("ref_text", "Hello again."),
                Part::File("ref_audio", &clip),
            ],
        )
        .await,
        201,
    )
    .await;
    assert_eq!(replaced["name"], "Anna K.");

    let got = json(
        reqwest::get(format!("{url}/v1/voices/profiles/anna"))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(got, replaced);

    let changed = json(
        patch(url, "anna", &[Part::Text("ref_text", "New words.")]).await,
        200,
    )
    .await;
    assert_eq!(changed["ref_text"], "New words.");
    assert_eq!(changed["name"], "Anna K.");
    assert_eq!(changed["created_at"], replaced["created_at"], "kept");
    let empty = patch(url, "anna", &[]).await;
    assert_eq!(
        openai_error(empty, 400).await["code"],
        "missing_required_parameter"
    );
    let missing = patch(url, "nobody", &[Part::Text("ref_text", "x")]).await;
    assert_eq!(openai_error(missing, 404).await["param"], "profile_id");

    let voices = json(reqwest::get(format!("{url}/v1/voices")).await.unwrap(), 200).await;
    let ids: Vec<&str> = voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap())
        .collect();
    assert_eq!(&ids[..3], ["auto", "design:<attributes>", "alloy"]);
    assert!(
        ids.contains(&"clone:anna") && ids.contains(&"verse"),
        "{ids:?}"
    );
    assert_eq!(voices["total"], ids.len());
    assert!(voices["design_attributes"]["gender"].is_array(), "{voices}");
    let anna = voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == "clone:anna")
        .unwrap();
    assert_eq!(anna["ref_text"], "New words.");

    drop(server);
    let server = self::server(data.path(), &[]).await;
    let url = server.url.as_str();
    let after = json(
        reqwest::get(format!("{url}/v1/voices/profiles/anna"))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(after, changed, "the same after a restart");

    let deleted = reqwest::Client::new()
        .delete(format!("{url}/v1/voices/profiles/anna"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert!(!dir.exists());
    let gone = reqwest::get(format!("{url}/v1/voices/profiles/anna"))
        .await
        .unwrap();
    openai_error(gone, 404).await;
    let gone = reqwest::Client::new()
        .delete(format!("{url}/v1/voices/profiles/anna"))
        .send()
        .await
        .unwrap();
    openai_error(gone, 404).await;
}

#[tokio::test]
async fn bad_ids_and_bad_uploads_are_4xx_naming_the_field() {
    let data = tempfile::tempdir().unwrap();
    let server = server(data.path(), &["--max-upload-bytes", "100000"]).await;
    let url = server.url.as_str();
    let good = wav(1.0, 16_000);

    for bad in ["a b", "x/../y", "é", &"x".repeat(65), ""] {
        let response = create(
            url,
            &[
                Part::Text("profile_id", bad),
                Part::File("ref_audio", &good),
            ],
        )
        .await;
        assert_eq!(
            openai_error(response, 400).await["param"],
            "profile_id",
            "{bad:?}"
        );
    }
    let response = reqwest::get(format!("{url}/v1/voices/profiles/a%20b"))
        .await
        .unwrap();
    assert_eq!(openai_error(response, 400).await["param"], "profile_id");
    let response = create(url, &[Part::File("ref_audio", &good)]).await;
    assert_eq!(openai_error(response, 400).await["param"], "profile_id");
    let response = create(url, &[Part::Text("profile_id", "a")]).await;
    assert_eq!(openai_error(response, 400).await["param"], "ref_audio");

    let mut truncated = good.clone();
    truncated.truncate(30);
    let too_big = wav(4.0, 16_000); // 128 kB > 100 kB
    let cases: [(&str, Vec<u8>, u16); 6] = [
        (
            "garbage",
            b"this is no audio at all, just text".to_vec(),
            415,
        ),
        ("truncated", truncated, 400),
        ("4 kHz", wav(1.0, 4_000), 400),
        ("too short", wav(0.2, 16_000), 400),
        ("too big", too_big, 413),
        ("empty", Vec::new(), 400),
    ];
    for (what, bytes, status) in cases {
        let response = create(
            url,
            &[
                Part::Text("profile_id", "p"),
                Part::File("ref_audio", &bytes),
            ],
        )
        .await;
        let error = openai_error(response, status).await;
        assert_eq!(error["param"], "ref_audio", "{what}: {error}");
    }
    // Not a form at all.
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/voices/profiles"))
        .json(&serde_json::json!({"profile_id": "p"}))
        .send()
        .await
        .unwrap();
    openai_error(response, 415).await;
    // A declared length over the limit is refused before the body is read.
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/voices/profiles"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(vec![b'x'; 1_200_000])
        .send()
        .await
        .unwrap();
    openai_error(response, 413).await;
    let listed = json(reqwest::get(format!("{url}/v1/voices")).await.unwrap(), 200).await;
    assert!(clones(&listed).is_empty(), "nothing was saved");
}

/// A refused upload is heard: the server reads what the client is still sending before it
/// answers, so the client gets its 413 and not a reset, every time, on every upload route.
/// An urlencoded body (what FastAPI's `Form` also reads, and what clients send for a form
/// without a file).
async fn send_urlencoded(method: reqwest::Method, url: &str, body: &str) -> reqwest::Response {
    reqwest::Client::new()
        .request(method, url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_string())
        .send()
        .await
        .expect("request")
}

#[tokio::test]
async fn a_change_without_a_clip_may_be_urlencoded() {
    let data = tempfile::tempdir().unwrap();
    let server = server(data.path(), &[]).await;
    let url = server.url.as_str();
    let clip = wav(1.0, 16_000);
    let created = create(
        url,
        &[
            Part::Text("profile_id", "anna"),
            Part::File("ref_audio", &clip),
        ],
    )
    .await;
    json(created, 201).await;
    let profile = format!("{url}/v1/voices/profiles/anna");

    // Percent-encoded and `+` for spaces, as browsers and httpx write them.
    let changed = send_urlencoded(
        reqwest::Method::PATCH,
        &profile,
        "ref_text=Caf%C3%A9+%26+tea&name=Anna+B&unknown=x",
    )
    .await;
    let changed = json(changed, 200).await;
    assert_eq!(changed["ref_text"], "Café & tea");
    assert_eq!(changed["name"], "Anna B");
    assert_eq!(get_json(&profile).await["ref_text"], "Café & tea");

    // No field to change; a field sent twice; a clip, which needs multipart.
    let cases = [
        ("unknown=x", "ref_audio"),
        ("ref_text=a&ref_text=b", "ref_text"),
        ("ref_audio=UklGRg", "ref_audio"),
    ];
    for (body, param) in cases {
        let response = send_urlencoded(reqwest::Method::PATCH, &profile, body).await;
        let error = openai_error(response, 400).await;
        assert_eq!(error["param"], param, "{body}: {error}");
    }
    // Creating a profile needs its clip, so an urlencoded form is told which field it lacks.
    let response = send_urlencoded(
        reqwest::Method::POST,
        &format!("{url}/v1/voices/profiles"),
        "profile_id=b&ref_text=hi",
    )
    .await;
    assert_eq!(openai_error(response, 400).await["param"], "ref_audio");
    // A text field longer than a form's text may be.
    let long = format!("ref_text={}", "a".repeat(70_000));
    let response = send_urlencoded(reqwest::Method::PATCH, &profile, &long).await;
    assert_eq!(openai_error(response, 400).await["param"], "ref_text");
    // A body over what the text of a form may be is refused, not buffered.
    let huge = format!("ref_text={}", "a".repeat(1_100_000));
    let response = send_urlencoded(reqwest::Method::PATCH, &profile, &huge).await;
    openai_error(response, 413).await;
    // Neither kind of form.
    let response = reqwest::Client::new()
        .patch(&profile)
        .header("content-type", "text/plain")
        .body("ref_text=x")
        .send()
        .await
        .unwrap();
    openai_error(response, 415).await;
    assert_eq!(get_json(&profile).await["ref_text"], "Café & tea");
}

#[tokio::test]
async fn an_oversized_upload_gets_its_413_not_a_reset() {
    let data = tempfile::tempdir().unwrap();
    let server = server(data.path(), &["--max-upload-bytes", "100000"]).await;
    let url = server.url.as_str();
    // The clip is refused after 100 kB, with 900 kB still to come.
    let clip = vec![7u8; 1_000_000];
    let client = reqwest::Client::new();
    let post = |path: &str, parts: &[Part]| {
        client
            .post(format!("{url}{path}"))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(form(parts))
    };
    for round in 0..6 {
        let requests = [
            (
                "create",
                post(
                    "/v1/voices/profiles",
                    &[
                        Part::Text("profile_id", "p"),
                        Part::File("ref_audio", &clip),
                    ],
                ),
            ),
            (
                "change",
                client
                    .patch(format!("{url}/v1/voices/profiles/p"))
                    .header(
                        "content-type",
                        format!("multipart/form-data; boundary={BOUNDARY}"),
                    )
                    .body(form(&[Part::File("ref_audio", &clip)])),
            ),
            (
                "clone",
                post(
                    "/v1/audio/speech/clone",
                    &[
                        Part::Text("text", "Hello"),
                        Part::Text("ref_text", "Hi"),
                        Part::File("ref_audio", &clip),
                    ],
                ),
            ),
            (
                // A declared length over the form's limit: refused before it is parsed.
                "declared",
                post(
                    "/v1/voices/profiles",
                    &[
                        Part::Text("profile_id", "p"),
                        Part::File("ref_audio", &[7u8; 1_500_000]),
                    ],
                ),
            ),
        ];
        for (what, request) in requests {
            let response = request
                .send()
                .await
                .unwrap_or_else(|e| panic!("{what}, round {round}: no answer: {e:?}"));
            let error = openai_error(response, 413).await;
            assert_eq!(error["param"], "ref_audio", "{what}: {error}");
        }
    }
    let listed = json(reqwest::get(format!("{url}/v1/voices")).await.unwrap(), 200).await;
    assert!(clones(&listed).is_empty(), "nothing was saved");
}

#[tokio::test]
async fn the_key_guards_every_profile_route() {
    let data = tempfile::tempdir().unwrap();
    let server = server(data.path(), &["--api-key", "sesame"]).await;
    let url = server.url.as_str();
    let clip = wav(1.0, 16_000);
    let parts = [
        Part::Text("profile_id", "k"),
        Part::File("ref_audio", &clip),
    ];
    let create_url = format!("{url}/v1/voices/profiles");
    let post = |key| send(reqwest::Method::POST, &create_url, &parts, key);
    openai_error(post(None).await, 401).await;
    openai_error(post(Some("wrong")).await, 401).await;
    assert_eq!(post(Some("sesame")).await.status(), 201);
    for path in ["/v1/voices", "/v1/voices/profiles/k"] {
        let open = reqwest::get(format!("{url}{path}")).await.unwrap();
        openai_error(open, 401).await;
        let keyed = reqwest::Client::new()
            .get(format!("{url}{path}"))
            .bearer_auth("sesame")
            .send()
            .await
            .unwrap();
        assert_eq!(keyed.status(), 200, "{path}");
    }
    let delete = reqwest::Client::new()
        .delete(format!("{url}/v1/voices/profiles/k"))
        .send()
        .await
        .unwrap();
    openai_error(delete, 401).await;
}

#[tokio::test]
async fn concurrent_changes_leave_one_of_them_whole() {
    let data = tempfile::tempdir().unwrap();
    let server = server(data.path(), &[]).await;
    let url = server.url.clone();
    let clip = wav(1.0, 16_000);
    let made = create(
        &url,
        &[
            Part::Text("profile_id", "p"),
            Part::File("ref_audio", &clip),
        ],
    )
    .await;
    assert_eq!(made.status(), 201);

    // Change i: name n<i>, transcript t<i>, and a clip of 1 + i/4 seconds.
    let changes = (1..=8).map(|i| {
        let url = url.clone();
        tokio::spawn(async move {
            let clip = wav(1.0 + f64::from(i) / 4.0, 16_000);
            let name = format!("n{i}");
            let text = format!("t{i}");
            let response = patch(
                &url,
                "p",
                &[
                    Part::Text("name", &name),
                    Part::Text("ref_text", &text),
                    Part::File("ref_audio", &clip),
                ],
            )
            .await;
            assert_eq!(response.status(), 200);
        })
    });
    for change in futures::future::join_all(changes).await {
        change.unwrap();
    }
    let got = json(
        reqwest::get(format!("{url}/v1/voices/profiles/p"))
            .await
            .unwrap(),
        200,
    )
    .await;
    let i: f64 = got["name"].as_str().unwrap()[1..].parse().unwrap();
    assert_eq!(got["ref_text"], format!("t{i}"));
    let audio = std::fs::read(data.path().join("profiles/p/ref_audio.wav")).unwrap();
    let (rate, samples) = common::read_wav(&audio);
    assert_eq!(rate, 16_000);
    assert_eq!(
        samples.len(),
        ((1.0 + i / 4.0) * 16_000.0) as usize,
        "clip of change {i}"
    );
}

/// SIGKILL while an upload is arriving: the next server lists nothing half-made, and the
/// profile directory holds only what was whole before.
#[tokio::test]
async fn a_kill_during_an_upload_leaves_no_half_profile() {
    let data = tempfile::tempdir().unwrap();
    let mut server = server(data.path(), &[]).await;
    let url = server.url.clone();
    let clip = wav(1.0, 16_000);
    assert_eq!(
        create(
            &url,
            &[
                Part::Text("profile_id", "whole"),
                Part::File("ref_audio", &clip)
            ]
        )
        .await
        .status(),
        201
    );

    let big = wav(30.0, 16_000);
    let body = form(&[
        Part::Text("profile_id", "half"),
        Part::File("ref_audio", &big),
    ]);
    let address = url.strip_prefix("http://").unwrap().to_string();
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    write!(
        stream,
        "POST /v1/voices/profiles HTTP/1.1\r\nHost: {address}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(&body[..body.len() / 2]).unwrap();
    stream.flush().unwrap();
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(stream);

    let server = self::server(data.path(), &[]).await;
    let listed = json(
        reqwest::get(format!("{}/v1/voices", server.url))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(clones(&listed), ["whole"]);
    let mut entries: Vec<String> = std::fs::read_dir(data.path().join("profiles"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert!(
        entries == [".staging", "whole"] || entries == ["whole"],
        "{entries:?}"
    );
    let staging = data.path().join("profiles/.staging");
    assert!(
        !staging.exists() || std::fs::read_dir(&staging).unwrap().next().is_none(),
        "leftovers are cleared at start"
    );
}

/// Profiles written by the Python server's own `ProfileService` are read as they are, and
/// reading them changes no byte.
#[tokio::test]
async fn profiles_the_python_server_wrote_are_read_unchanged() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python_profiles");
    let copy = tempfile::tempdir().unwrap();
    let profiles = copy.path().join("python-profiles");
    let mut originals = Vec::new();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let from = entry.unwrap().path();
        let to = profiles.join(from.file_name().unwrap());
        std::fs::create_dir_all(&to).unwrap();
        for file in ["meta.json", "ref_audio.wav"] {
            let bytes = std::fs::read(from.join(file)).unwrap();
            std::fs::write(to.join(file), &bytes).unwrap();
            originals.push((to.join(file), bytes));
        }
    }
    let mut args = vec!["--profile-dir", profiles.to_str().unwrap()];
    args.extend_from_slice(&NO_MODELS);
    let server = Binary::ready(&args).await;
    let url = server.url.as_str();

    let listed = json(reqwest::get(format!("{url}/v1/voices")).await.unwrap(), 200).await;
    assert_eq!(clones(&listed), ["flac-inside", "narrator", "no_text"]);
    for id in ["flac-inside", "narrator", "no_text"] {
        let written: Value =
            serde_json::from_slice(&std::fs::read(fixture.join(id).join("meta.json")).unwrap())
                .unwrap();
        let got = json(
            reqwest::get(format!("{url}/v1/voices/profiles/{id}"))
                .await
                .unwrap(),
            200,
        )
        .await;
        assert_eq!(got["profile_id"], id);
        for key in ["name", "ref_text", "created_at"] {
            assert_eq!(got[key], written[key], "{id}.{key}");
        }
    }
    for (path, bytes) in originals {
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{}", path.display());
    }
}
