//! The English front end through the real binary: numbers, money and dates written out before
//! the real voices phonemize them, `/v1/audio/phonemize` showing it, word timestamps that still
//! point at what was written, the per-request options, and the cache keyed by them.

mod common;

use common::{kokoro_dir, openai_error, post, post_speech, Binary};
use serde_json::{json, Value};

const PIPER: &str = "en_US-joe-medium";

async fn phonemize(url: &str, body: &Value) -> Value {
    let response = post(url, "/v1/audio/phonemize", body).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn phonemize_shows_the_spoken_text_and_the_voices_ids() {
    let server = Binary::ready(&[]).await;
    let answer = phonemize(
        &server.url,
        &json!({"model": "piper", "voice": PIPER,
                "input": "It costs $5.50. Call 555-0123 on 2026-12-01!"}),
    )
    .await;
    assert_eq!(answer["model"], "piper");
    assert_eq!(answer["voice"], PIPER);
    let sentences = answer["sentences"].as_array().unwrap();
    let spoken: Vec<&str> = sentences
        .iter()
        .map(|s| s["spoken"].as_str().unwrap())
        .collect();
    assert_eq!(
        spoken,
        [
            "It costs five dollars fifty cents.",
            "Call five five five, oh one two three on December first, twenty twenty-six!"
        ]
    );
    assert_eq!(sentences[0]["text"], "It costs $5.50.");
    assert_eq!(answer["normalized_text"], spoken.join(" "));
    // espeak-ng's IPA for "dollars", and Piper ids framed by ^ (1) … $ (2).
    let phonemes = sentences[0]["phonemes"].as_str().unwrap();
    assert!(phonemes.contains("dˈɑːlɚz"), "{phonemes}");
    let ids: Vec<i64> = sentences[0]["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(ids.first(), Some(&1));
    assert_eq!(ids.last(), Some(&2));
    let all = answer["tokens"].as_array().unwrap().len();
    let per_sentence: usize = sentences
        .iter()
        .map(|s| s["tokens"].as_array().unwrap().len())
        .sum();
    assert_eq!(all, per_sentence);

    // Turned off, the text goes to espeak-ng as written.
    let verbatim = phonemize(
        &server.url,
        &json!({"model": "piper", "voice": PIPER, "input": "It costs $5.50.",
                "normalization_options": {"normalize": false}}),
    )
    .await;
    assert_eq!(verbatim["normalized_text"], "It costs $5.50.");
    assert_ne!(verbatim["phonemes"], answer["sentences"][0]["phonemes"]);

    // The date order, per request.
    let dates = |order: &'static str| {
        json!({"model": "piper", "voice": PIPER, "input": "Due 12/01/2026.",
               "normalization_options": {"date_order": order}})
    };
    let mdy = phonemize(&server.url, &dates("mdy")).await;
    let dmy = phonemize(&server.url, &dates("dmy")).await;
    assert_eq!(
        mdy["normalized_text"],
        "Due December first, twenty twenty-six."
    );
    assert_eq!(
        dmy["normalized_text"],
        "Due the twelfth of January, twenty twenty-six."
    );

    // Non-English voices keep espeak-ng's own reading.
    let german = phonemize(
        &server.url,
        &json!({"model": "espeak", "voice": "de", "input": "Es kostet 5 Euro."}),
    )
    .await;
    assert_eq!(german["normalized_text"], "Es kostet 5 Euro.");
    assert!(german["tokens"].as_array().unwrap().is_empty());

    // Kokoro-FastAPI's route and body.
    let kokoro_shape = post(
        &server.url,
        "/dev/phonemize",
        &json!({"text": "Hello $1.", "language": "a"}),
    )
    .await;
    assert_eq!(kokoro_shape.status(), 200);
    let kokoro_shape: Value = kokoro_shape.json().await.unwrap();
    assert_eq!(kokoro_shape["normalized_text"], "Hello one dollar.");
    assert!(kokoro_shape["phonemes"]
        .as_str()
        .unwrap()
        .contains("dˈɑːlɚ"));

    // Bad requests are 400s that name the field.
    let missing = post(&server.url, "/v1/audio/phonemize", &json!({"voice": PIPER})).await;
    assert_eq!(openai_error(missing, 400).await["param"], "input");
    let order = post(
        &server.url,
        "/v1/audio/phonemize",
        &json!({"input": "12/01", "normalization_options": {"date_order": "ymd"}}),
    )
    .await;
    let error = openai_error(order, 400).await;
    assert_eq!(error["param"], "normalization_options.date_order");
    assert!(error["message"].as_str().unwrap().contains("mdy"));
}

#[tokio::test]
async fn kokoro_reads_the_same_spoken_text_in_its_own_symbols() {
    let dir = kokoro_dir();
    let server = Binary::ready(&["--kokoro-dir", dir.to_str().unwrap()]).await;
    let answer = phonemize(
        &server.url,
        &json!({"model": "kokoro", "voice": "af_heart", "input": "Chapter IV costs $2bn."}),
    )
    .await;
    assert_eq!(
        answer["normalized_text"],
        "Chapter four costs two billion dollars."
    );
    // misaki's symbols: "dollars" has no length mark and an `əɹ` for espeak-ng's `ɚ`; the ids are framed
    // by Kokoro's pad (0).
    let phonemes = answer["phonemes"].as_str().unwrap();
    assert!(phonemes.contains("dˈɑləɹz"), "{phonemes}");
    let ids = answer["tokens"].as_array().unwrap();
    assert_eq!(ids.first(), Some(&json!(0)));
    assert_eq!(ids.last(), Some(&json!(0)));
    assert!(ids.len() > 20);
}

#[tokio::test]
async fn timestamps_report_rewritten_words_as_written() {
    let server = Binary::ready(&[]).await;
    let input = "It costs $5.50 on 2026-12-01 at 3:30pm, Dr. Smith.";
    let body = json!({"model": "piper", "voice": PIPER, "input": input,
                      "response_format": "wav", "seed": 1});
    let response = post(&server.url, "/v1/audio/speech/timestamps", &body).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    let words = answer["words"].as_array().unwrap();
    let written: Vec<&str> = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
    assert_eq!(
        written,
        [
            "It",
            "costs",
            "$5.50",
            "on",
            "2026-12-01",
            "at",
            "3:30pm",
            "Dr",
            "Smith"
        ]
    );
    common::words_at_their_offsets(input, words);
    // A rewrite is timed over all the words it became: "December first, twenty
    // twenty-six" takes far longer than "on".
    let length = |w: &Value| w["end"].as_f64().unwrap() - w["start"].as_f64().unwrap();
    assert!(
        length(&words[4]) > 3.0 * length(&words[3]),
        "{} vs {}",
        words[4],
        words[3]
    );
    assert!(length(&words[2]) > 3.0 * length(&words[3]));
}

#[tokio::test]
async fn the_reading_options_are_part_of_the_cache_key() {
    let server = Binary::ready(&[]).await;
    let speak = |order: &'static str| {
        json!({"model": "piper", "voice": PIPER, "input": "Due 12/01/2026.",
               "response_format": "wav", "seed": 5,
               "normalization_options": {"date_order": order}})
    };
    let first = post_speech(&server.url, &speak("mdy")).await;
    assert_eq!(first.headers()["x-cache"], "MISS");
    let mdy = first.bytes().await.unwrap();
    let again = post_speech(&server.url, &speak("mdy")).await;
    assert_eq!(again.headers()["x-cache"], "HIT");
    let other = post_speech(&server.url, &speak("dmy")).await;
    assert_eq!(
        other.headers()["x-cache"],
        "MISS",
        "another reading is other audio"
    );
    let dmy = other.bytes().await.unwrap();
    assert_ne!(mdy, dmy);
    // "the twelfth of January" is longer than "December first".
    assert!(dmy.len() > mdy.len());
}

#[tokio::test]
async fn the_server_setting_turns_it_off_and_a_request_back_on() {
    let server = Binary::ready(&["--normalize", "false", "--date-order", "dmy"]).await;
    let off = phonemize(
        &server.url,
        &json!({"voice": PIPER, "input": "Pay $5 on 12/01/2026."}),
    )
    .await;
    assert_eq!(off["normalized_text"], "Pay $5 on 12/01/2026.");
    let on = phonemize(
        &server.url,
        &json!({"voice": PIPER, "input": "Pay $5 on 12/01/2026.",
                "normalization_options": {"normalize": true}}),
    )
    .await;
    assert_eq!(
        on["normalized_text"],
        "Pay five dollars on the twelfth of January, twenty twenty-six."
    );
}
