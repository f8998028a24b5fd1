//! The pronunciation dictionary and inline phonemes through the real binary: the API's round
//! trip, persistence across a restart, cached audio that a change affects (and only that),
//! auth, bad entries, and given IPA said by the real voices or refused by name.

mod common;

use common::{kokoro_dir, openai_error, post, post_speech, Binary};
use serde_json::{json, Value};

const PIPER: &str = "en_US-joe-medium";
const ESPEAK: &str = "en-us";

async fn put(url: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .put(format!("{url}/v1/audio/lexicon"))
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn delete(url: &str, query: &str) -> reqwest::Response {
    reqwest::Client::new()
        .delete(format!("{url}/v1/audio/lexicon{query}"))
        .send()
        .await
        .unwrap()
}

async fn lexicon(url: &str) -> Value {
    common::get_json(format!("{url}/v1/audio/lexicon")).await
}

/// The engine of the voices these tests use.
fn model_of(voice: &str) -> &'static str {
    if voice == PIPER {
        "piper"
    } else if voice == ESPEAK {
        "espeak"
    } else {
        "kokoro"
    }
}

async fn spoken(url: &str, voice: &str, input: &str) -> Value {
    let response = post(
        url,
        "/v1/audio/phonemize",
        &json!({"model": model_of(voice), "voice": voice, "input": input}),
    )
    .await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    response.json().await.unwrap()
}

fn words(entries: &Value) -> Vec<&str> {
    entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["word"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_dictionary_round_trips_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lexicon.toml");
    let path = file.to_str().unwrap();
    let server = Binary::ready(&["--lexicon", path]).await;
    let empty = lexicon(&server.url).await;
    assert_eq!(words(&empty), Vec::<&str>::new());
    assert_eq!(empty["persistent"], true);

    let response = put(
        &server.url,
        &json!({"entries": [
            {"word": "nginx", "alias": "engine x"},
            {"word": "Kokoro", "ipa": "/kˈoʊkəɹoʊ/", "language": "en"},
            {"word": "US", "alias": "United States", "case_sensitive": true}
        ]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let after: Value = response.json().await.unwrap();
    assert_eq!(words(&after), ["nginx", "Kokoro", "US"]);
    assert_eq!(after["entries"][1]["ipa"], "kˈoʊkəɹoʊ", "slashes dropped");
    assert_ne!(after["version"], empty["version"]);
    assert_eq!(lexicon(&server.url).await, after);
    // The file on disk is what was saved, in TOML.
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(
        saved.contains("[[entries]]") && saved.contains("engine x"),
        "{saved}"
    );

    // Heard from the next request on.
    let answer = spoken(&server.url, PIPER, "Ask NGINX in the US, not us.").await;
    assert_eq!(
        answer["sentences"][0]["spoken"],
        "Ask engine x in the United States, not us."
    );

    let gone = delete(&server.url, "?word=NGINX").await;
    assert_eq!(gone.status(), 200);
    let gone: Value = gone.json().await.unwrap();
    assert_eq!(words(&gone), ["Kokoro", "US"]);
    let missing = openai_error(delete(&server.url, "?word=nginx").await, 404).await;
    assert!(missing["message"].as_str().unwrap().contains("nginx"));
    let neither = openai_error(delete(&server.url, "").await, 400).await;
    assert_eq!(neither["param"], "word");
    let odd = openai_error(delete(&server.url, "?word=a&bogus=1").await, 400).await;
    assert_eq!(odd["param"], "query");
    server.terminate();

    let again = Binary::ready(&["--lexicon", path]).await;
    assert_eq!(
        lexicon(&again.url).await,
        gone,
        "the same entries and version"
    );
    let cleared = delete(&again.url, "?all=true").await;
    assert_eq!(cleared.status(), 200);
    assert_eq!(words(&lexicon(&again.url).await), Vec::<&str>::new());
    again.terminate();

    // A file with a bad entry stops the server at startup, naming the file and the field.
    std::fs::write(&file, "[[entries]]\nword = \"x\"\nipa = \"k1\"\n").unwrap();
    let output = common::server_command()
        .args(["--port", "0", "--lexicon", path])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(path) && stderr.contains("entries[0].ipa"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_change_makes_only_the_audio_it_affects_miss() {
    let server = Binary::ready(&[]).await;
    assert_eq!(lexicon(&server.url).await["persistent"], false);
    let speak = |input: &'static str| {
        json!({"model": "piper", "voice": PIPER, "input": input,
               "response_format": "wav", "seed": 3})
    };
    let put_alias = |alias: &'static str| json!({"entries": [{"word": "Zorblax", "alias": alias}]});
    assert_eq!(put(&server.url, &put_alias("banana")).await.status(), 200);
    let first = post_speech(&server.url, &speak("Zorblax is here.")).await;
    assert_eq!(first.headers()["x-cache"], "MISS");
    let first = first.bytes().await.unwrap();
    let other = post_speech(&server.url, &speak("Nobody is here.")).await;
    assert_eq!(other.headers()["x-cache"], "MISS");
    // Read to its end: a stream is cached when it completes, and until then a repeat waits on
    // it (COALESCED) rather than hitting.
    other.bytes().await.unwrap();
    let hit = post_speech(&server.url, &speak("Zorblax is here.")).await;
    assert_eq!(hit.headers()["x-cache"], "HIT");

    // Changing the entry the text uses: a miss, and other audio.
    assert_eq!(
        put(&server.url, &put_alias("pineapple")).await.status(),
        200
    );
    let changed = post_speech(&server.url, &speak("Zorblax is here.")).await;
    assert_eq!(changed.headers()["x-cache"], "MISS");
    let changed = changed.bytes().await.unwrap();
    assert_ne!(changed, first);
    // An entry that the other text does not use leaves its audio cached.
    let untouched = post_speech(&server.url, &speak("Nobody is here.")).await;
    assert_eq!(untouched.headers()["x-cache"], "HIT");
}

#[tokio::test]
async fn bad_entries_are_refused_by_field() {
    let server = Binary::ready(&[]).await;
    let cases = [
        (
            json!({"entries": [{"word": "a", "ipa": "k1t"}]}),
            "entries[0].ipa",
        ),
        (
            json!({"entries": [{"word": "ok", "alias": "fine"}, {"word": "a", "ipa": "x", "alias": "y"}]}),
            "entries[1].ipa",
        ),
        (
            json!({"entries": [{"word": "", "alias": "y"}]}),
            "entries[0].word",
        ),
        (
            json!({"entries": [{"word": "a", "alias": "y", "language": "english!"}]}),
            "entries[0].language",
        ),
        (
            json!({"entries": [{"word": "a", "alias": "y", "colour": 1}]}),
            "entries[0]",
        ),
        (json!({"entries": {"word": "a"}}), "entries"),
    ];
    for (body, field) in cases {
        let error = openai_error(put(&server.url, &body).await, 400).await;
        let param = error["param"].as_str().unwrap_or_default();
        assert!(param.starts_with(field), "{body}: {error}");
    }
    assert_eq!(words(&lexicon(&server.url).await), Vec::<&str>::new());
}

#[tokio::test]
async fn changing_the_dictionary_needs_the_key() {
    let server = Binary::ready(&["--api-key", "sesame"]).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/audio/lexicon", server.url);
    let refused = client.get(&url).send().await.unwrap();
    openai_error(refused, 401).await;
    let body = json!({"entries": [{"word": "a", "alias": "b"}]});
    let refused = client.put(&url).json(&body).send().await.unwrap();
    openai_error(refused, 401).await;
    let allowed = client
        .put(&url)
        .bearer_auth("sesame")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
}

#[tokio::test]
async fn given_ipa_is_said_by_piper_kokoro_and_espeak_or_refused_by_name() {
    let kokoro = kokoro_dir();
    let server = Binary::ready(&[
        "--kokoro-dir",
        kokoro.to_str().unwrap(),
        "--default-engine",
        "piper",
    ])
    .await;
    let entry = json!({"entries": [{"word": "Zorblax", "ipa": "zˈɔɹblæks"}]});
    let before = spoken(&server.url, PIPER, "Zorblax waits.").await;
    assert_eq!(put(&server.url, &entry).await.status(), 200);

    // Piper: espeak-ng's reading of the word is replaced by the entry's IPA (NFD, as the
    // voice's map reads it), the rest of the sentence as before.
    let piper = spoken(&server.url, PIPER, "Zorblax waits.").await;
    let phonemes = piper["sentences"][0]["phonemes"].as_str().unwrap();
    assert!(phonemes.starts_with("zˈɔɹblæks "), "{phonemes}");
    assert_ne!(
        piper["sentences"][0]["phonemes"],
        before["sentences"][0]["phonemes"]
    );
    // Kokoro: the same IPA in misaki's symbols.
    let kokoro = spoken(&server.url, "af_heart", "Zorblax waits.").await;
    let symbols = kokoro["sentences"][0]["phonemes"].as_str().unwrap();
    assert!(symbols.starts_with("zˈɔɹblæks "), "{symbols}");
    // espeak-ng: the same IPA, which it is given in its own phoneme names.
    let espeak = spoken(&server.url, ESPEAK, "Zorblax waits.").await;
    let ipa = espeak["sentences"][0]["phonemes"].as_str().unwrap();
    assert!(ipa.starts_with("zˈɔɹblæks "), "{ipa}");

    // Inline phonemes too, and they win over the dictionary at their place.
    let inline = spoken(&server.url, "af_heart", "Say [Zorblax](/kˈoʊkəɹoʊ/) now.").await;
    assert_eq!(inline["sentences"][0]["text"], "Say Zorblax now.");
    let symbols = inline["sentences"][0]["phonemes"].as_str().unwrap();
    assert!(symbols.contains("kˈOkəɹO"), "{symbols}");

    // All of them speak it.
    for voice in [PIPER, "af_heart", ESPEAK] {
        let response = post_speech(
            &server.url,
            &json!({"model": model_of(voice), "voice": voice,
                    "input": "Say [Zorblax](/kˈoʊkəɹoʊ/) now, Zorblax.", "stream": false,
                    "response_format": "wav"}),
        )
        .await;
        assert_eq!(response.status(), 200, "{voice}");
        let (_, samples) = common::read_wav(&response.bytes().await.unwrap());
        assert!(
            samples.iter().any(|s| s.unsigned_abs() > 3000),
            "{voice}: silent"
        );
    }

    // A symbol the voice has no phoneme for is refused, naming it and the word.
    let odd = json!({"entries": [{"word": "Zorblax", "ipa": "zʬa"}]});
    assert_eq!(put(&server.url, &odd).await.status(), 200);
    for voice in [PIPER, "af_heart", ESPEAK] {
        let response = post_speech(
            &server.url,
            &json!({"model": model_of(voice), "voice": voice, "input": "Zorblax waits."}),
        )
        .await;
        let error = openai_error(response, 400).await;
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains('ʬ') && message.contains("Zorblax"),
            "{voice}: {message}"
        );
        assert_eq!(error["param"], "input");
    }
}

#[tokio::test]
async fn timestamps_name_the_written_words_of_entries_and_inline_phonemes() {
    let server = Binary::ready(&[]).await;
    let entry = json!({"entries": [{"word": "nginx", "alias": "engine x"}]});
    assert_eq!(put(&server.url, &entry).await.status(), 200);
    let input = "Run nginx and [Kokoro](/kˈoʊkəɹoʊ/) today.";
    for voice in [PIPER, ESPEAK] {
        let body = json!({"model": model_of(voice), "voice": voice, "input": input,
                          "response_format": "wav", "seed": 1});
        let response = post(&server.url, "/v1/audio/speech/timestamps", &body).await;
        assert_eq!(response.status(), 200, "{voice}");
        let answer: Value = response.json().await.unwrap();
        let words = answer["words"].as_array().unwrap();
        let written: Vec<&str> = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
        assert_eq!(
            written,
            ["Run", "nginx", "and", "Kokoro", "today"],
            "{voice}"
        );
        common::words_at_their_offsets(input, words);
        for word in words {
            let length = word["end"].as_f64().unwrap() - word["start"].as_f64().unwrap();
            assert!(length > 0.05, "{voice}: {word}");
        }
    }
}

/// Two replicas on one data volume share the dictionary's file: a change through one is
/// heard, and listed, by the other at its next request; changes made through both at once all
/// land (each takes the file's lock, reads the latest and saves before the other starts).
#[tokio::test]
async fn replicas_sharing_the_file_hear_each_others_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lexicon.toml");
    let path = file.to_str().unwrap();
    let args = ["--lexicon", path];
    let (a, b) = tokio::join!(Binary::ready(&args), Binary::ready(&args));
    let response = put(
        &a.url,
        &json!({"entries": [{"word": "nginx", "alias": "engine x"}]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let on_a: Value = response.json().await.unwrap();
    assert_eq!(
        lexicon(&b.url).await,
        on_a,
        "the same entries and version on B"
    );
    let answer = spoken(&b.url, PIPER, "Ask nginx.").await;
    assert_eq!(answer["sentences"][0]["spoken"], "Ask engine x.");

    assert_eq!(delete(&b.url, "?word=nginx").await.status(), 200);
    let answer = spoken(&a.url, PIPER, "Ask nginx.").await;
    assert_ne!(
        answer["sentences"][0]["spoken"], "Ask engine x.",
        "removed on B, not said on A"
    );

    let changes = (0..6).map(|i| {
        let url = if i % 2 == 0 {
            a.url.clone()
        } else {
            b.url.clone()
        };
        async move {
            let body = json!({"entries": [{"word": format!("word{i}"), "alias": "x"}]});
            put(&url, &body).await.status()
        }
    });
    let statuses = futures::future::join_all(changes).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    for url in [&a.url, &b.url] {
        let mut heard: Vec<String> = words(&lexicon(url).await)
            .iter()
            .map(|w| w.to_string())
            .collect();
        heard.sort();
        assert_eq!(
            heard,
            (0..6).map(|i| format!("word{i}")).collect::<Vec<_>>(),
            "no change lost"
        );
    }
    a.terminate();
    b.terminate();
}
