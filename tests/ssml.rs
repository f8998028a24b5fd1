//! SSML input and languages through the real binary and real voices: every tag, nesting,
//! malformed markup (a 400 that says where), timestamps that point at the text between the
//! tags, breaks of the stated length (the silence measured), speed per span, `<lang>` read by
//! a voice of that language (one of another engine and another sample rate, too), the
//! `language` field, and `--language-detect` on a mixed-language document.

mod common;

use common::{kokoro_dir, openai_error, post, post_speech, read_wav, Binary};
use serde_json::{json, Value};

const PIPER: &str = "en_US-joe-medium";

fn speech(input: &str) -> Value {
    json!({"model": "piper", "voice": PIPER, "input": input, "response_format": "wav",
           "stream": false, "seed": 7})
}

/// The WAV body of a whole (unstreamed) answer, with its `Content-Language`.
async fn wav(url: &str, body: &Value) -> (Vec<i16>, String) {
    let response = post_speech(url, body).await;
    let status = response.status();
    let language = response
        .headers()
        .get("content-language")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = response.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    let (rate, samples) = read_wav(&bytes);
    // The voice asked for (or chosen for the language) sets the rate: others are resampled.
    assert!(rate == 22_050 || rate == 24_000, "{rate} Hz");
    (samples, language)
}

/// The sentences of a request as the voice reads them (`/v1/audio/phonemize`).
async fn phonemized(url: &str, body: &Value) -> Vec<Value> {
    let response = post(url, "/v1/audio/phonemize", body).await;
    let status = response.status();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{answer}");
    answer["sentences"].as_array().unwrap().clone()
}

fn spoken(sentences: &[Value]) -> Vec<&str> {
    sentences
        .iter()
        .map(|s| s["spoken"].as_str().unwrap())
        .collect()
}

/// `body` as raw `pcm`, uncached: streamed, and as one whole body.
async fn streamed_and_whole(url: &str, mut body: Value) -> (Vec<u8>, Vec<u8>) {
    body["response_format"] = json!("pcm");
    body["cache"] = json!(false);
    let mut bodies = Vec::new();
    for stream in [true, false] {
        body["stream"] = json!(stream);
        let response = post_speech(url, &body).await;
        assert_eq!(response.status(), 200);
        bodies.push(response.bytes().await.unwrap().to_vec());
    }
    let whole = bodies.pop().unwrap();
    (bodies.pop().unwrap(), whole)
}

/// The longest run of near-silent samples, in seconds.
fn longest_silence(samples: &[i16], rate: f64) -> f64 {
    let mut longest = 0;
    let mut run = 0;
    for &sample in samples {
        if sample.unsigned_abs() < 40 {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    f64::from(longest) / rate
}

#[tokio::test]
async fn breaks_are_silence_of_the_stated_length() {
    let server = Binary::ready(&[]).await;
    let with_break = |time: &str| {
        speech(&format!(
            "<speak>The first part.<break time=\"{time}\"/>The second part.</speak>"
        ))
    };
    let (short, _) = wav(&server.url, &with_break("300ms")).await;
    let (long, _) = wav(&server.url, &with_break("1800ms")).await;
    // The same sentences with the same seed: the bodies differ by the breaks alone.
    let extra = (long.len() as f64 - short.len() as f64) / 22_050.0;
    assert!((extra - 1.5).abs() < 0.002, "1.5 s more, got {extra:.4} s");
    let silence = longest_silence(&long, 22_050.0);
    assert!(
        (1.8..2.3).contains(&silence),
        "a silence of 1.8 s and the voice's own edges: {silence:.3} s"
    );
    // A strength is a pause of its own length; a break opening or ending the body is silence
    // there.
    let (strong, _) = wav(
        &server.url,
        &speech("<speak>The first part.<break strength=\"x-strong\"/>The second part.</speak>"),
    )
    .await;
    let extra = (strong.len() as f64 - short.len() as f64) / 22_050.0;
    assert!((extra - 0.7).abs() < 0.002, "x-strong is 1 s: {extra:.4}");
    let (framed, _) = wav(
        &server.url,
        &speech("<speak><break time=\"1s\"/>The first part.<break time=\"2s\"/></speak>"),
    )
    .await;
    let (bare, _) = wav(&server.url, &speech("The first part.")).await;
    let extra = (framed.len() as f64 - bare.len() as f64) / 22_050.0;
    assert!((extra - 3.0).abs() < 0.002, "3 s around it: {extra:.4}");
    assert!(
        framed[..22_050].iter().all(|s| *s == 0),
        "a second of silence first"
    );
    // A stream has the same silences, in place: the same samples as the whole body.
    let (streamed, whole) = streamed_and_whole(&server.url, with_break("1800ms")).await;
    assert_eq!(streamed.len(), whole.len());
    // Seeded, the same samples: bit for bit where the CPU has AVX-512; without it the stream's
    // windowed decoder sums in another order, and a few samples in ten thousand round one step
    // apart (measured: 11 of 88,897, by 1).
    let samples = |pcm: &[u8]| -> Vec<i16> {
        pcm.chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect()
    };
    let (streamed, whole) = (samples(&streamed), samples(&whole));
    let apart = streamed.iter().zip(&whole).filter(|(a, b)| a != b).count();
    let worst = streamed
        .iter()
        .zip(&whole)
        .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
        .max()
        .unwrap_or(0);
    assert!(
        worst <= 1 && apart * 1000 < whole.len(),
        "seeded: the same samples ({apart} apart, by up to {worst})"
    );
}

#[tokio::test]
async fn prosody_rate_sets_the_speed_of_its_span() {
    let server = Binary::ready(&[]).await;
    let sentence = "Speaking slowly takes a good deal longer.";
    let (normal, _) = wav(&server.url, &speech(&format!("<speak>{sentence}</speak>"))).await;
    let (slow, _) = wav(
        &server.url,
        &speech(&format!(
            "<speak><prosody rate=\"50%\">{sentence}</prosody></speak>"
        )),
    )
    .await;
    let ratio = slow.len() as f64 / normal.len() as f64;
    assert!(
        (1.8..2.2).contains(&ratio),
        "half speed is twice as long: {ratio:.3}"
    );
    // Nested rates multiply, and the request's speed applies on top.
    let mut fast = speech(&format!(
        "<speak><prosody rate=\"2\"><prosody rate=\"x-slow\">{sentence}</prosody></prosody></speak>"
    ));
    fast["speed"] = json!(2.0);
    let (doubled, _) = wav(&server.url, &fast).await;
    let ratio = doubled.len() as f64 / normal.len() as f64;
    assert!((0.4..0.6).contains(&ratio), "2 × 0.5 × 2: {ratio:.3}");
}

#[tokio::test]
async fn every_reading_tag_reads_as_it_says() {
    let server = Binary::ready(&[]).await;
    let input = "<speak><p><s>Visit the <sub alias=\"World Wide Web\">WWW</sub> today.</s>\
        <s>Order <say-as interpret-as=\"digits\">1990</say-as>, not \
        <say-as interpret-as=\"cardinal\">1990</say-as>.</s></p>\
        <p>It is the <say-as interpret-as=\"ordinal\">21</say-as> time, \
        <say-as interpret-as=\"characters\">abc</say-as>, \
        <say-as interpret-as=\"spell-out\">NASA</say-as>, \
        <say-as interpret-as=\"date\" format=\"dmy\">12/01/2026</say-as> at \
        <say-as interpret-as=\"time\">3:30pm</say-as>; call \
        <say-as interpret-as=\"telephone\">555-0123</say-as>. Say \
        <phoneme alphabet=\"ipa\" ph=\"təmˈɑːtoʊ\">tomato</phoneme>.</p></speak>";
    let sentences = phonemized(
        &server.url,
        &json!({"model": "piper", "voice": PIPER, "input": input}),
    )
    .await;
    let said = spoken(&sentences);
    assert_eq!(
        said,
        [
            "Visit the World Wide Web today.",
            "Order one nine nine zero, not one thousand nine hundred ninety.",
            "It is the twenty-first time, A B C, N A S A, the twelfth of January, twenty \
             twenty-six at three thirty p.m.; call five five five, oh one two three.",
            "Say tomato."
        ]
    );
    let written: Vec<&str> = sentences
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        written[0], "Visit the WWW today.",
        "the sub's words as written"
    );
    // The phonemes are the ones given, not espeak-ng's own "təmˈeɪɾoʊ".
    let phonemes = sentences[3]["phonemes"].as_str().unwrap();
    assert!(phonemes.contains("təmˈɑːtoʊ"), "{phonemes}");
}

#[tokio::test]
async fn timestamps_point_at_the_text_between_the_tags() {
    let server = Binary::ready(&[]).await;
    let input = "<speak>Please <break time=\"200ms\"/>speak <sub alias=\"World Wide Web\">\
        WWW</sub> <s>slowly</s> <prosody rate=\"slow\">now</prosody>.</speak>";
    let mut body = speech(input);
    body["stream"] = json!(false);
    let response = post(&server.url, "/v1/audio/speech/timestamps", &body).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    let words = answer["words"].as_array().unwrap();
    let found = common::words_at_their_offsets(input, words);
    let mut last_end = 0.0;
    for word in words {
        let start_s = word["start"].as_f64().unwrap();
        assert!(start_s >= last_end - 1e-9, "times go forward: {words:?}");
        last_end = word["end"].as_f64().unwrap();
    }
    // `speak` is the word, never the tag; the alias's words are the one word written.
    assert_eq!(found, ["Please", "speak", "WWW", "slowly", "now"]);
    let speak = &words[1];
    let chars: Vec<char> = input.chars().collect();
    assert!(
        chars[..speak["char_start"].as_u64().unwrap() as usize]
            .iter()
            .collect::<String>()
            .ends_with("/>"),
        "the second word is the one after the break"
    );
}

#[tokio::test]
async fn malformed_or_unknown_markup_is_a_400_that_says_where() {
    let server = Binary::ready(&[]).await;
    for (input, line, column, says) in [
        (
            "<speak>Hello <b>there</b></speak>",
            1,
            14,
            "`<b>` is not supported",
        ),
        ("<speak>Hello\n<break time=\"fast\"/></speak>", 2, 8, "time"),
        ("<speak>Unclosed <s>sentence</speak>", 1, 28, "</speak>"),
        (
            "<speak><prosody pitch=\"high\">x</prosody></speak>",
            1,
            17,
            "pitch",
        ),
        ("<speak>a &nbsp; b</speak>", 1, 10, "&"),
    ] {
        let response = post_speech(&server.url, &speech(input)).await;
        let error = openai_error(response, 400).await;
        let message = error["message"].as_str().unwrap();
        assert_eq!(error["param"], "input", "{input}: {error}");
        assert!(message.contains(says), "{input}: {message}");
        assert_eq!(error["code"], "invalid_ssml", "{input}");
        let at = format!("line {line}, column {column}");
        assert!(message.contains(&at), "{input}: {message} (expected {at})");
    }
    // Well-formed, but in a language no voice here speaks.
    let klingon = speech("<speak><lang xml:lang=\"tlh\">Qapla'</lang></speak>");
    let error = openai_error(post_speech(&server.url, &klingon).await, 400).await;
    assert!(
        error["message"].as_str().unwrap().contains("'tlh'"),
        "{error}"
    );
    // `input_format` decides where the input does not say.
    let as_text =
        json!({"model": "piper", "voice": PIPER, "input": "<speak>x &", "input_format": "text"});
    assert_eq!(phonemized(&server.url, &as_text).await.len(), 1);
    let forced =
        json!({"model": "piper", "voice": PIPER, "input": "Hello", "input_format": "ssml"});
    let error = openai_error(post(&server.url, "/v1/audio/phonemize", &forced).await, 400).await;
    assert!(
        error["message"].as_str().unwrap().contains("<speak>"),
        "{error}"
    );
    let unknown = json!({"model": "piper", "voice": PIPER, "input": "Hi", "input_format": "html"});
    let error = openai_error(post_speech(&server.url, &unknown).await, 400).await;
    assert_eq!(error["param"], "input_format");
}

/// A config file that names voices per language, for a server with `extra` flags.
async fn multilingual(extra: &[&str]) -> (Binary, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let kokoro = kokoro_dir();
    std::fs::write(
        &config,
        format!(
            "default_engine = \"piper\"\nkokoro_dir = \"{}\"\n\
             [voices.by_language]\nde = \"espeak/de\"\nfr = \"kokoro/ff_siwis\"\n",
            kokoro.display()
        ),
    )
    .unwrap();
    let mut args = vec!["--config", config.to_str().unwrap()];
    args.extend_from_slice(extra);
    (Binary::ready(&args).await, dir)
}

#[tokio::test]
async fn lang_switches_to_a_voice_of_that_language() {
    let (server, _dir) = multilingual(&[]).await;
    let input =
        "<speak>Good morning. <lang xml:lang=\"de-DE\">Guten Morgen, wie geht es dir?</lang> \
        <lang xml:lang=\"fr\">Bonjour à tous.</lang></speak>";
    let body = json!({"model": "piper", "voice": PIPER, "input": input});
    let sentences = phonemized(&server.url, &body).await;
    assert_eq!(sentences.len(), 3);
    // espeak-ng's German, not English letter-by-letter guesses: "guten" has its long u.
    let german = sentences[1]["phonemes"].as_str().unwrap();
    assert!(german.contains("ɡˈuːtən"), "{german}");
    // Kokoro's ids for the French sentence.
    assert!(!sentences[2]["tokens"].as_array().unwrap().is_empty());
    // Kokoro speaks at 24 kHz: its sentence is resampled into the Piper voice's body.
    let (samples, language) = wav(&server.url, &speech(input)).await;
    assert_eq!(language, "en-US, de, fr");
    assert!(
        samples.len() > 3 * 22_050,
        "three sentences: {}",
        samples.len()
    );
    // Streamed, the body is the same length: the stream joins behind the same pauses.
    let (streamed, whole) = streamed_and_whole(&server.url, speech(input)).await;
    // Within a few samples (the sentences the stream computes apart may end a hair apart).
    let apart = (streamed.len() as f64 - whole.len() as f64).abs() / 2.0 / 24_000.0;
    assert!(
        apart < 0.005,
        "{} and {} bytes",
        streamed.len(),
        whole.len()
    );
    // A language no voice speaks is refused by name.
    let error = openai_error(
        post_speech(
            &server.url,
            &speech("<speak><lang xml:lang=\"sw\">Habari</lang></speak>"),
        )
        .await,
        400,
    )
    .await;
    assert!(
        error["message"].as_str().unwrap().contains("'sw'"),
        "{error}"
    );
}

/// A Wyoming client that names only a language gets the voice HTTP's `language` would choose
/// (the configured one first); a voice named with it speaks its own language, as a name wins
/// over a language in the reference server.
#[tokio::test]
async fn wyoming_reads_a_language_in_the_configured_voice() {
    use common::wyoming::{synthesize_as, Spoken};

    let (server, _dir) = multilingual(&["--wyoming-port", "0"]).await;
    let address = server.wyoming.clone().expect("the Wyoming address");
    let text = "Bonjour à tous.";
    let body = json!({"model": "kokoro", "voice": "ff_siwis", "input": text,
                      "response_format": "wav", "stream": false});
    let (http, _) = wav(&server.url, &body).await;
    match synthesize_as(&address, text, json!({"language": "fr_FR"})).await {
        Spoken::Audio { rate, samples } => {
            assert_eq!(rate, 24_000, "Kokoro's rate: the configured voice");
            assert_eq!(samples, http, "the configured voice's audio");
        }
        Spoken::Error(e) => panic!("Wyoming refused French: {e}"),
    }
    match synthesize_as(
        &address,
        "Hello.",
        json!({"name": PIPER, "language": "fr_FR"}),
    )
    .await
    {
        Spoken::Audio { rate, .. } => assert_eq!(rate, 22_050, "the named Piper voice"),
        Spoken::Error(e) => panic!("Wyoming refused a named voice: {e}"),
    }
    match synthesize_as(&address, "Qapla.", json!({"language": "tlh_QQ"})).await {
        Spoken::Error(e) => assert!(e.contains("tlh_QQ"), "{e}"),
        Spoken::Audio { .. } => panic!("a language no voice speaks was spoken"),
    }
}

#[tokio::test]
async fn the_language_field_chooses_the_voice_for_an_alias() {
    let (server, _dir) = multilingual(&[]).await;
    let body = json!({"model": "tts-1", "voice": "alloy", "input": "Guten Morgen.",
                      "language": "de", "response_format": "wav", "stream": false});
    let (_, language) = wav(&server.url, &body).await;
    assert_eq!(language, "de");
    // Kokoro-FastAPI's name for it.
    let mut kokoro_named = body.clone();
    kokoro_named.as_object_mut().unwrap().remove("language");
    kokoro_named["lang_code"] = json!("fr");
    let (_, language) = wav(&server.url, &kokoro_named).await;
    assert_eq!(language, "fr");
    let fine = json!({"model": "piper", "voice": PIPER, "input": "Hello.", "language": "en-US",
                      "response_format": "wav", "stream": false});
    assert_eq!(wav(&server.url, &fine).await.1, "en-US");
    let bad = json!({"model": "piper", "voice": PIPER, "input": "Hello.", "language": "e n"});
    let error = openai_error(post_speech(&server.url, &bad).await, 400).await;
    assert_eq!(error["param"], "language");
}

#[tokio::test]
async fn a_voice_named_outright_reads_the_language_in_its_own_timbre() {
    let (server, _dir) = multilingual(&[]).await;
    // Piper's English voice, given German: espeak-ng's German phonemes, in joe's voice (his
    // rate, not the configured German espeak voice's).
    let named = json!({"model": "piper", "voice": PIPER, "input": "Guten Morgen, schöne Grüße.",
                       "language": "de", "response_format": "wav", "stream": false});
    let (_, language) = wav(&server.url, &named).await;
    assert_eq!(language, "de");
    let response = post_speech(&server.url, &named).await;
    assert_eq!(read_wav(&response.bytes().await.unwrap()).0, 22_050);
    let german = phonemized(&server.url, &named).await;
    let phonemes = german[0]["phonemes"].as_str().unwrap();
    assert!(phonemes.contains("ʃˈøːnə"), "German: {phonemes}");
    let mut english = named.clone();
    english.as_object_mut().unwrap().remove("language");
    let own = phonemized(&server.url, &english).await;
    assert_ne!(own[0]["phonemes"], german[0]["phonemes"]);

    // Kokoro's American voice, given Spanish by Kokoro-FastAPI's lang_code: Spanish phonemes
    // in misaki's symbols, and the cache tells the two readings apart.
    let spanish = json!({"model": "kokoro", "voice": "af_heart", "input": "Hola, ¿qué tal?",
                         "lang_code": "e", "response_format": "wav", "stream": false});
    let (samples, language) = wav(&server.url, &spanish).await;
    assert_eq!(language, "es");
    let mut as_english = spanish.clone();
    as_english.as_object_mut().unwrap().remove("lang_code");
    let (english_samples, language) = wav(&server.url, &as_english).await;
    assert_eq!(language, "en-US");
    assert_ne!(samples, english_samples);
    let read = phonemized(&server.url, &spanish).await;
    assert!(
        read[0]["phonemes"].as_str().unwrap().contains("ˈola"),
        "{}",
        read[0]["phonemes"]
    );

    // A language the voice's engine cannot read is refused, naming the field.
    // (Japanese and Mandarin are Kokoro's own now; Korean is not.)
    let korean = json!({"model": "kokoro", "voice": "af_heart", "input": "Hello.",
                        "language": "ko"});
    let error = openai_error(post_speech(&server.url, &korean).await, 400).await;
    assert_eq!(error["param"], "language");
    assert!(
        error["message"].as_str().unwrap().contains("'ko'"),
        "{error}"
    );
}

#[tokio::test]
async fn detected_languages_are_read_by_their_voices() {
    let document = "The weather is lovely today, and we are going for a long walk in the park. \
        Das Wetter ist heute wirklich schön, und wir gehen lange im Park spazieren. \
        After that we will have dinner with some old friends of ours.";
    let (detecting, _dir) = multilingual(&["--language-detect"]).await;
    let body = json!({"model": "piper", "voice": PIPER, "input": document,
                      "response_format": "wav", "stream": false});
    let (_, language) = wav(&detecting.url, &body).await;
    assert_eq!(language, "en-US, de");
    let sentences = phonemized(&detecting.url, &body).await;
    let phonemes: Vec<&str> = sentences
        .iter()
        .map(|s| s["phonemes"].as_str().unwrap())
        .collect();
    assert!(phonemes[1].contains("ʃˈøːn"), "German: {}", phonemes[1]);
    assert!(!phonemes[0].contains('ø'), "English: {}", phonemes[0]);
    // Without detection, the requested voice reads it all.
    let (plain, _dir) = multilingual(&[]).await;
    let (_, language) = wav(&plain.url, &body).await;
    assert_eq!(language, "en-US");
}
