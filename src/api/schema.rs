//! What the speech handlers and the OpenAPI document share: the request fields' schemas and
//! the answers' descriptions.
//!
//! The handlers' types name these in their annotations (`schema_with`, `responses(...)`) and
//! the document builder reads the same answers, so each description has one source. Numbers
//! and names that have their source elsewhere are read from there: ranges from
//! [`crate::params`], formats and content types from [`AudioFormat`], cache outcomes from
//! [`CacheStatus`], header names from [`super::headers`], the default input limit from the
//! `--max-input-chars` flag. This module imports no handler, so data flows one way: handlers
//! and document builder both depend on it.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::LazyLock;

use axum::http::header;
use clap::CommandFactory;
use utoipa::openapi::content::Content;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::header::Header;
use utoipa::openapi::response::Response;
use utoipa::openapi::schema::{
    KnownFormat, Object, ObjectBuilder, OneOfBuilder, SchemaFormat, SchemaType,
};
use utoipa::openapi::{Components, Ref, RefOr, ResponseBuilder, Schema, Type};
use utoipa::{IntoResponses, ToSchema};

use super::error::ErrorBody;
use super::headers::{
    X_CACHE, X_CACHE_LAYER, X_DURATION, X_LATENCY, X_NO_SPEECH_DETECTED, X_SAMPLE_RATE,
    X_UNKNOWN_NONVERBAL_TAGS,
};
use super::sse::{SpeechAudioDelta, SpeechAudioDone, SpeechAudioTimestamps};
use crate::audio::AudioFormat;
use crate::cache::CacheStatus;
use crate::config::Cli;
use crate::params::{NOISE, SPEED};
use crate::speech::SubtitleFormat;

/// Adds the schemas that the answers below refer to by name (rather than through an
/// annotation, which would add them itself).
pub(super) fn add_referenced(components: &mut Components) {
    add_schema::<ErrorBody>(components);
    add_schema::<SpeechAudioDelta>(components);
    add_schema::<SpeechAudioDone>(components);
    add_schema::<SpeechAudioTimestamps>(components);
}

/// `T`'s schema and those it refers to.
fn add_schema<T: ToSchema>(components: &mut Components) {
    let mut schemas = vec![(T::name().into_owned(), T::schema())];
    T::schemas(&mut schemas);
    components.schemas.extend(schemas);
}

/// An OpenAI-shaped error answer.
pub(super) fn error_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name(ErrorBody::name()))),
        )
        .build()
}

/// utoipa's `Header` has no `required` field (OpenAPI's Header Object does), so it travels as
/// an extension, which serializes as a plain key.
pub(super) fn required_header(schema: impl Into<RefOr<Schema>>, description: &str) -> Header {
    let mut header = Header::new(schema);
    header.description = Some(description.into());
    header.extensions = Some(Extensions::from_iter([("required", true)]));
    header
}

/// The default of `--max-input-chars`, read from the flag itself.
static DEFAULT_MAX_INPUT_CHARS: LazyLock<String> = LazyLock::new(|| {
    Cli::command()
        .get_arguments()
        .find(|arg| arg.get_id() == "max_input_chars")
        .and_then(|arg| arg.get_default_values().first())
        .map_or_else(String::new, |v| v.to_string_lossy().into_owned())
});

/// `input`: text with something besides whitespace, up to the server's limit (set per server
/// by [`limit_input`]).
pub(super) fn input_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(format!(
            "The text to speak: 1 to `max_input_chars` characters (this server's limit is \
             `maxLength`; the default is {}), not only whitespace.",
            *DEFAULT_MAX_INPUT_CHARS
        )))
        .min_length(Some(1))
        .pattern(Some(r"\S"))
        .examples(["Hello from my own server!"])
        .build()
}

/// `voice`: a name, or OpenAI's object form.
pub(super) fn voice_schema() -> RefOr<Schema> {
    let name = ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(
            "A voice id from `GET /v1/audio/voices` (`<voice>:<speaker>` for a speaker of a \
             multi-speaker voice), an OpenAI voice name (`alloy`, `nova`, ...: the default \
             voice) or a configured alias.",
        ))
        .examples(["alloy"]);
    let object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("id", Object::with_type(Type::String))
        .required("id")
        .description(Some("OpenAI's object form: `{\"id\": \"<voice>\"}`."));
    OneOfBuilder::new()
        .item(name)
        .item(object)
        .description(Some("The voice, as a string or as `{\"id\": ...}`."))
        .into()
}

/// `response_format`: one of the encoders' names, or null for the default.
pub(super) fn response_format_schema() -> Object {
    let mut names: Vec<serde_json::Value> =
        AudioFormat::ALL.iter().map(|f| f.as_str().into()).collect();
    names.push(serde_json::Value::Null);
    ObjectBuilder::new()
        .schema_type(
            [Type::String, Type::Null]
                .into_iter()
                .collect::<SchemaType>(),
        )
        .enum_values(Some(names))
        .default(Some(AudioFormat::default().as_str().into()))
        .description(Some("Audio format of the answer; `mp3` when absent."))
        .build()
}

/// `seed`: any u64 (the schema's default `int64` format would stop at half of it).
pub(super) fn seed_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(
            [Type::Integer, Type::Null]
                .into_iter()
                .collect::<SchemaType>(),
        )
        .minimum(Some(0))
        .maximum(Some(u64::MAX))
        .description(Some("Fixed seed: the same request gives the same audio."))
        .build()
}

pub(super) fn speed_schema() -> Object {
    ranged(&SPEED, "Speaking rate; 1.0 when absent.")
}

pub(super) fn noise_schema() -> Object {
    ranged(
        &NOISE,
        "VITS sampling noise; the voice's own value when absent.",
    )
}

/// OmniVoice's generation fields, each a nullable number in the range the server checks.
pub(super) mod generation {
    use super::ranged;
    use crate::params::generation::*;
    use utoipa::openapi::schema::Object;

    pub fn num_step() -> Object {
        let mut o = ranged(&NUM_STEP, "Decoding steps (OmniVoice); 32 when absent.");
        o.schema_type = [utoipa::openapi::Type::Integer, utoipa::openapi::Type::Null]
            .into_iter()
            .collect();
        o
    }
    pub fn guidance_scale() -> Object {
        ranged(
            &GUIDANCE_SCALE,
            "Classifier-free guidance (OmniVoice); 2 when absent.",
        )
    }
    pub fn t_shift() -> Object {
        ranged(&T_SHIFT, "Time-step shift (OmniVoice); 0.1 when absent.")
    }
    pub fn position_temperature() -> Object {
        ranged(
            &POSITION_TEMPERATURE,
            "Noise on which positions are decoded first (OmniVoice); 5 when absent.",
        )
    }
    pub fn class_temperature() -> Object {
        ranged(
            &CLASS_TEMPERATURE,
            "Sampling temperature of the audio tokens (OmniVoice); 0 (greedy) when absent.",
        )
    }
    pub fn layer_penalty_factor() -> Object {
        ranged(
            &LAYER_PENALTY_FACTOR,
            "How much earlier codebooks are decoded first (OmniVoice); 5 when absent.",
        )
    }
    pub fn duration() -> Object {
        ranged(
            &DURATION,
            "Seconds of the whole answer (OmniVoice), whose text is one utterance (an SSML \
             document's parts share it by length); overrides speed.",
        )
    }
    pub fn audio_chunk_duration() -> Object {
        ranged(
            &AUDIO_CHUNK_DURATION,
            "Seconds of one chunk of a long sentence (OmniVoice); 15 when absent.",
        )
    }
    pub fn audio_chunk_threshold() -> Object {
        ranged(
            &AUDIO_CHUNK_THRESHOLD,
            "Sentences estimated longer than this many seconds are chunked (OmniVoice); 30 \
             when absent.",
        )
    }
}

/// A nullable number within `range`, from the range the server checks.
fn ranged(range: &RangeInclusive<f32>, description: &str) -> Object {
    ObjectBuilder::new()
        .schema_type(
            [Type::Number, Type::Null]
                .into_iter()
                .collect::<SchemaType>(),
        )
        .minimum(Some(*range.start()))
        .maximum(Some(*range.end()))
        .description(Some(description))
        .build()
}

/// One server-sent event of a speech answer, as OpenAPI 3.1 tools read an event stream's
/// schema: the event's fields, with `data` holding one of the JSON events.
fn sse_event() -> Object {
    let events = OneOfBuilder::new()
        .item(Ref::from_schema_name(SpeechAudioDelta::name()))
        .item(Ref::from_schema_name(SpeechAudioTimestamps::name()))
        .item(Ref::from_schema_name(SpeechAudioDone::name()));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "data",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .content_media_type("application/json")
                .content_schema(Some(events)),
        )
        .required("data")
        .property("event", Object::with_type(Type::String))
        .property("id", Object::with_type(Type::String))
        .property("retry", Object::with_type(Type::Integer))
        .build()
}

/// Every answer of `POST /v1/audio/speech`.
pub(super) struct SpeechResponses;

impl IntoResponses for SpeechResponses {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let audio = || {
            Content::new(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary))),
            ))
        };
        let mut ok = ResponseBuilder::new().description(
            "Audio in `response_format` (chunked unless `\"stream\": false`), or with \
             `\"stream_format\": \"sse\"` server-sent events: `speech.audio.delta` events with \
             base64 `audio`, then one `speech.audio.done` with `usage` (`input_tokens` = input \
             characters, `output_tokens` = audio samples sent).",
        );
        for format in AudioFormat::ALL {
            ok = ok.content(format.content_type(), audio());
        }
        let cache_outcomes = [
            CacheStatus::Hit,
            CacheStatus::Miss,
            CacheStatus::Coalesced,
            CacheStatus::Bypass,
        ];
        let ok = ok
            .content("text/event-stream", Content::new(Some(sse_event())))
            .header(
                X_CACHE.as_str(),
                required_header(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(cache_outcomes.map(CacheStatus::as_str))),
                    "Whether the audio came from the cache (`HIT`), was synthesized (`MISS`), \
                     joined an identical synthesis in progress (`COALESCED`) or skipped the \
                     cache (`BYPASS`).",
                ),
            )
            .header(
                X_SAMPLE_RATE.as_str(),
                required_header(
                    Object::with_type(Type::Integer),
                    "Sample rate of the audio in Hz.",
                ),
            )
            .header(
                X_LATENCY.as_str(),
                required_header(
                    Object::with_type(Type::Number),
                    "Seconds from the request to the answer's headers.",
                ),
            )
            .header(
                X_CACHE_LAYER.as_str(),
                Header::builder()
                    .schema(Some(
                        ObjectBuilder::new()
                            .schema_type(Type::String)
                            .enum_values(Some(["memory", "redis"])),
                    ))
                    .description(Some(
                        "On cache hits: which layer answered, this replica's memory or the \
                         Redis cache shared by replicas (`--redis-url`).",
                    ))
                    .build(),
            )
            .header(
                X_DURATION.as_str(),
                Header::builder()
                    .schema(Some(Object::with_type(Type::Number)))
                    .description(Some(
                        "Length of the audio in seconds; on whole bodies (`\"stream\": false`) \
                         only.",
                    ))
                    .build(),
            )
            .header(
                X_UNKNOWN_NONVERBAL_TAGS.as_str(),
                Header::builder()
                    .schema(Some(Object::with_type(Type::String)))
                    .description(Some(
                        "OmniVoice: bracketed tags in the input that look like sound cues but \
                         that it reads as words (`[laugh]` for `[laughter]`), comma-separated; \
                         absent when there are none.",
                    ))
                    .build(),
            )
            .header(
                X_NO_SPEECH_DETECTED.as_str(),
                Header::builder()
                    .schema(Some(
                        ObjectBuilder::new()
                            .schema_type(Type::String)
                            .enum_values(Some(["true"])),
                    ))
                    .description(Some(
                        "`true` when at least a second of audio came out and under 15 % of its \
                         audible quarter-seconds cross zero as speech does: a steady drone, not \
                         a voice (OmniVoice can make one from several sound cues in one short \
                         sentence). Absent otherwise, and on streams.",
                    ))
                    .build(),
            )
            .build();
        std::iter::once(("200", ok))
            .chain(speech_errors())
            .map(|(status, response)| (status.to_string(), response.into()))
            .collect()
    }
}

/// The answer of `POST /v1/audio/speech/subtitles`: the file, in each format's media type.
pub(super) struct SubtitleResponses;

impl IntoResponses for SubtitleResponses {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let mut ok = ResponseBuilder::new().description(
            "The subtitle file in `subtitle_format`, UTF-8 (`charset=utf-8` is sent with the \
             media type).",
        );
        for format in SubtitleFormat::ALL {
            ok = ok.content(
                format.media_type(),
                Content::new(Some(Object::with_type(Type::String))),
            );
        }
        let ok = ok
            .header(
                X_DURATION.as_str(),
                required_header(
                    Object::with_type(Type::Number),
                    "Length in seconds of the audio the cues belong to.",
                ),
            )
            .build();
        BTreeMap::from([("200".to_string(), ok.into())])
    }
}

/// The error answers of a speech request, for routes that document their success beside it.
pub(super) struct SpeechErrors;

impl IntoResponses for SpeechErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        speech_errors()
            .into_iter()
            .map(|(status, response)| (status.to_string(), response.into()))
            .collect()
    }
}

/// The error answers of a speech request, whatever its success looks like.
fn speech_errors() -> [(&'static str, Response); 7] {
    let mut overloaded = error_response("The queue is full; retry after `Retry-After`");
    overloaded.headers.insert(
        header::RETRY_AFTER.to_string(),
        required_header(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1)),
            "Seconds until the queue should have room again.",
        )
        .into(),
    );
    [
        (
            "400",
            error_response(
                "A field is missing, of the wrong type or out of range; `param` names it",
            ),
        ),
        (
            "413",
            error_response(&format!(
                "The body is larger than {} bytes",
                super::MAX_BODY_BYTES
            )),
        ),
        ("415", error_response("The body is not `application/json`")),
        ("429", overloaded),
        ("500", error_response("Synthesis or encoding failed")),
        (
            "503",
            error_response("The server is shutting down or its queue has stopped"),
        ),
        (
            "504",
            error_response("Synthesis did not finish within `--request-timeout-s`"),
        ),
    ]
}
