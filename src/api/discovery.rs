//! What a client lists before it speaks: `GET /v1/models`, `GET /v1/models/{id}`,
//! `GET /v1/audio/models` (Open WebUI's shape) and `GET /v1/audio/voices`.
//!
//! Every body is a typed struct, so `/openapi.json` documents exactly what these handlers
//! send. With `--public-discovery` these routes need no key (Open WebUI asks without one).

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ErrorBody;
use super::{ApiError, AppState};
use crate::engine::registry::ModelInfo;
use crate::speech::{GenerationKnob, VoiceListing};

/// Models are static for the life of the process; OpenAI requires a creation time, so use a
/// fixed one rather than pretend each model was created at startup.
const MODEL_CREATED: u64 = 1_700_000_000;

/// One model in OpenAI's shape, plus the engine it runs on.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"id": "tts-1", "object": "model", "created": 1_700_000_000, "owned_by": "omnivoice", "engine": "piper"}))]
pub struct Model {
    /// What a speech request sends as `model`.
    id: String,
    /// Always `model`.
    object: &'static str,
    /// A fixed creation time (Unix seconds), as OpenAI's shape requires one.
    created: u64,
    /// Always `omnivoice`.
    owned_by: &'static str,
    /// The engine behind this id (`kokoro`, `piper`, `espeak`).
    engine: String,
}

impl From<ModelInfo> for Model {
    fn from(model: ModelInfo) -> Self {
        Self {
            id: model.id,
            object: "model",
            created: MODEL_CREATED,
            owned_by: "omnivoice",
            engine: model.engine,
        }
    }
}

/// OpenAI's model list.
#[derive(Serialize, ToSchema)]
pub struct ModelList {
    /// Always `list`.
    object: &'static str,
    data: Vec<Model>,
}

/// A speech model as Open WebUI lists them (`GET /v1/audio/models`).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"id": "tts-1", "name": "tts-1", "engine": "piper"}))]
pub struct AudioModel {
    /// What a speech request sends as `model`.
    id: String,
    /// Display name; the id itself.
    name: String,
    /// The engine behind this id.
    engine: String,
}

/// Every model id a speech request may send: engines, OpenAI names and configured aliases.
#[derive(Serialize, ToSchema)]
pub struct AudioModelList {
    models: Vec<AudioModel>,
}

/// One voice of one engine.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"id": "af_heart", "name": "af_heart", "engine": "kokoro", "language": "en-US", "sample_rate": 24000, "speakers": [], "aliases": ["alloy", "nova"], "loaded": true, "gender": "female", "supported": true}))]
pub struct Voice {
    /// What a speech request sends as `voice` (with a model of this engine).
    id: String,
    /// Display name; the id itself.
    name: String,
    engine: String,
    /// Language tag, e.g. `en_US` or `en-us`.
    language: String,
    /// Native output rate in Hz.
    sample_rate: u32,
    /// Speaker names of a multi-speaker voice, sent as `voice: "<id>:<speaker>"`; empty otherwise.
    speakers: Vec<String>,
    /// Other names that mean this voice (OpenAI voice names for the default voice, aliases).
    aliases: Vec<String>,
    /// Whether the voice is in memory now.
    loaded: bool,
    /// `female` or `male` where the voice's name says so (Kokoro: the second letter of
    /// `af_heart`); absent for Piper and espeak-ng voices.
    #[serde(skip_serializing_if = "Option::is_none")]
    gender: Option<String>,
    /// Whether a speech request may use this voice. Kokoro's Mandarin (`z…`) and Japanese
    /// (`j…`) packs are listed but `false` where their dictionaries are not installed
    /// (scripts/setup.sh installs both), and a request for one is a 400.
    supported: bool,
    /// Why `supported` is `false`, in a sentence; absent when it is `true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    unsupported_reason: Option<String>,
    /// The voice design an OmniVoice voice speaks with (its presets: the Python
    /// omnivoice-server's designs); absent for other engines and for `auto`.
    #[serde(skip_serializing_if = "Option::is_none")]
    design: Option<String>,
}

impl From<VoiceListing> for Voice {
    fn from(v: VoiceListing) -> Self {
        Self {
            name: v.info.id.clone(),
            id: v.info.id,
            engine: v.info.engine,
            language: v.info.language,
            sample_rate: v.info.sample_rate,
            speakers: v.info.speakers,
            aliases: v.aliases,
            loaded: v.loaded,
            gender: v.info.gender,
            supported: v.info.unsupported.is_none(),
            unsupported_reason: v.info.unsupported,
            design: v.info.design,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct VoiceList {
    /// Always `list`.
    object: &'static str,
    voices: Vec<Voice>,
    /// With OmniVoice: the attributes a design (`voice: "design:…"`, or `instructions`) may
    /// combine, by category, at most one of each; absent without OmniVoice.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, example = json!({"gender": ["male", "female"], "pitch": ["low pitch", "high pitch"]}))]
    design_attributes: Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// With OmniVoice: the knobs a speech request may set for it (`num_step`,
    /// `guidance_scale`, …), each with its range; absent without OmniVoice.
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_parameters: Option<Vec<GenerationParameter>>,
}

/// One OmniVoice knob a request may set: its range, and its default.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"name": "num_step", "minimum": 1.0, "maximum": 64.0, "integer": true, "default": 32.0}))]
pub struct GenerationParameter {
    /// The speech request's field.
    name: &'static str,
    minimum: f32,
    maximum: f32,
    /// Whole numbers only.
    integer: bool,
    /// What the model uses when a request sets none; absent where it depends on the input
    /// (`duration`).
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<f32>,
}

impl From<GenerationKnob> for GenerationParameter {
    fn from(knob: GenerationKnob) -> Self {
        Self {
            name: knob.name,
            minimum: knob.minimum,
            maximum: knob.maximum,
            integer: knob.whole,
            default: knob.default,
        }
    }
}

/// List models
///
/// Engines, OpenAI's model names and configured aliases, in OpenAI's list shape.
#[utoipa::path(get, path = "/v1/models", tag = "discovery",
    responses((status = 200, description = "Every model id a speech request may send", body = ModelList)))]
pub async fn list_models(State(state): State<Arc<AppState>>) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: state.speech.models().into_iter().map(Model::from).collect(),
    })
}

/// Get one model
#[utoipa::path(get, path = "/v1/models/{id}", tag = "discovery",
    params(("id" = String, Path, description = "A model id, e.g. `tts-1` or `espeak`")),
    responses(
        (status = 200, description = "The model", body = Model),
        (status = 404, description = "No such model", body = ErrorBody),
    ))]
pub async fn get_model(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Model>, ApiError> {
    // A path that is not UTF-8 once decoded names no model; axum's own rejection is plain text.
    let Ok(Path(id)) = id else {
        return Err(ApiError::not_found("No model has that id.").with_param("model"));
    };
    let model = state.speech.model(&id).ok_or_else(|| {
        ApiError::not_found(format!("The model '{id}' does not exist.")).with_param("model")
    })?;
    Ok(Json(model.into()))
}

/// List speech models (Open WebUI)
///
/// The same ids as `GET /v1/models`, in the `{"models": [...]}` shape Open WebUI reads.
#[utoipa::path(get, path = "/v1/audio/models", tag = "discovery",
    responses((status = 200, description = "Every model id a speech request may send", body = AudioModelList)))]
pub async fn list_audio_models(State(state): State<Arc<AppState>>) -> Json<AudioModelList> {
    let models = state
        .speech
        .models()
        .into_iter()
        .map(|m| AudioModel {
            name: m.id.clone(),
            id: m.id,
            engine: m.engine,
        })
        .collect();
    Json(AudioModelList { models })
}

/// List voices
///
/// Every voice of every engine. Open WebUI reads `voices[].id` and `voices[].name`.
///
/// Kokoro lists every voice pack of its directory, with the language and gender its id names
/// (`af_heart`: American English, female; `a` en-US, `b` en-GB, `e` es, `f` fr, `h` hi, `i` it,
/// `j` ja, `p` pt-BR, `z` zh). Japanese packs are listed with `supported: false` and an
/// `unsupported_reason`. Kokoro also speaks blends of its packs, which are not listed:
/// send `voice: "af_bella(2)+af_sky(1)"` (weights normalised by their total) or
/// `"af_bella+af_sky-af_nicole"`.
#[utoipa::path(get, path = "/v1/audio/voices", tag = "discovery",
    responses((status = 200, description = "Every voice", body = VoiceList)))]
pub async fn list_voices(State(state): State<Arc<AppState>>) -> Json<VoiceList> {
    Json(VoiceList {
        object: "list",
        voices: state
            .speech
            .voices()
            .await
            .into_iter()
            .map(Voice::from)
            .collect(),
        design_attributes: state.speech.design_attributes(),
        generation_parameters: state
            .speech
            .generation_knobs()
            .map(|knobs| knobs.into_iter().map(GenerationParameter::from).collect()),
    })
}
