//! `POST /v1/audio/phonemize` and Kokoro-FastAPI's `POST /dev/phonemize`: what a request would
//! be spoken as (its sentences, their spoken forms, phonemes and model ids) without speaking
//! it, so that users can see why a word comes out wrong.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::extract::ApiJson;
use super::schema::SpeechErrors;
use super::speech::{NormalizationOptions, VoiceField};
use super::{ApiError, AppState};
use crate::speech::Request;

/// The speech request's text fields; `model` and `voice` default to the server's.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"model": "kokoro", "voice": "af_heart", "input": "It costs $5.50."}))]
pub struct PhonemizeRequest {
    /// An engine, an OpenAI model name or an alias; the default engine when absent.
    #[serde(default)]
    pub model: Option<String>,
    /// The text, as `input` (ours) or `text` (Kokoro-FastAPI's).
    #[serde(default, alias = "text")]
    pub input: Option<String>,
    /// The default voice when absent.
    #[serde(default)]
    pub voice: Option<VoiceField>,
    #[serde(default)]
    pub normalization_options: Option<NormalizationOptions>,
    /// As for speech: the language the input is written in.
    #[serde(default, alias = "lang_code")]
    pub language: Option<String>,
    /// As for speech: `text` or `ssml`.
    #[serde(default)]
    pub input_format: Option<String>,
}

/// What the text will be spoken as.
#[derive(Debug, Serialize, ToSchema)]
pub struct PhonemizeResponse {
    /// Every sentence's phonemes, in order, joined by spaces (Kokoro-FastAPI's field).
    phonemes: String,
    /// Every sentence's model ids, in order (Kokoro-FastAPI's field).
    tokens: Vec<i64>,
    /// The engine and voice that would speak it (the first sentence's, when sentences in
    /// another language go to a voice of theirs).
    model: String,
    voice: String,
    /// The whole text as it is read: markup gone, numbers and symbols written out.
    normalized_text: String,
    sentences: Vec<PhonemizedSentence>,
}

/// One utterance: what the engine is given at a time.
#[derive(Debug, Serialize, ToSchema)]
pub struct PhonemizedSentence {
    /// As written, markup gone.
    text: String,
    /// As it is read.
    spoken: String,
    /// In the voice's symbols: espeak-ng IPA for Piper and espeak, misaki's for Kokoro.
    phonemes: String,
    /// The model's input ids with their framing; empty for espeak-ng.
    tokens: Vec<i64>,
    /// The voice that reads it: the request's, or one that speaks the sentence's language.
    voice: String,
}

/// Phonemize text
///
/// The sentences of `input`, each as it is read (numbers, money, dates and symbols written
/// out for English voices; see `normalization_options`) and as the voice's phonemes and
/// model ids. Nothing is synthesized.
#[utoipa::path(post, path = "/v1/audio/phonemize", tag = "speech",
    request_body = PhonemizeRequest,
    responses((status = 200, description = "The text as it will be spoken", body = PhonemizeResponse),
        SpeechErrors))]
pub async fn phonemize(
    State(state): State<Arc<AppState>>,
    _headers: HeaderMap,
    ApiJson(request): ApiJson<PhonemizeRequest>,
) -> Result<Json<PhonemizeResponse>, ApiError> {
    answer(&state, request).await
}

/// Phonemize text (Kokoro-FastAPI)
///
/// Kokoro-FastAPI's `/dev/phonemize`: `{"text": …}` answers `phonemes` and `tokens` (and
/// the rest of `POST /v1/audio/phonemize`'s answer). Its `language` field is ignored: the
/// voice decides.
#[utoipa::path(post, path = "/dev/phonemize", tag = "speech",
    request_body = PhonemizeRequest,
    responses((status = 200, description = "The text as it will be spoken", body = PhonemizeResponse),
        SpeechErrors))]
pub async fn dev_phonemize(
    State(state): State<Arc<AppState>>,
    _headers: HeaderMap,
    ApiJson(request): ApiJson<PhonemizeRequest>,
) -> Result<Json<PhonemizeResponse>, ApiError> {
    answer(&state, request).await
}

async fn answer(
    state: &AppState,
    request: PhonemizeRequest,
) -> Result<Json<PhonemizeResponse>, ApiError> {
    let options = request.normalization_options.unwrap_or_default();
    let job = state
        .speech
        .prepare(Request {
            model: request
                .model
                .unwrap_or_else(|| state.speech.default_engine()),
            // None: the default voice, which (as an alias would) hands text in a language
            // it cannot read to a voice that can.
            voice: request.voice.map(|v| v.0).unwrap_or_default(),
            input: request.input.unwrap_or_default(),
            normalize: options.normalize,
            date_order: options.date_order,
            language: request.language,
            input_format: request.input_format,
            ..Request::default()
        })
        .await?;
    let phonemized = state.speech.phonemize(&job).await?;
    let (model, voice) = match phonemized.sentences.first() {
        Some(first) => (first.engine.clone(), first.voice.clone()),
        None => (
            job.voice().key.engine().to_string(),
            job.voice().key.voice().to_string(),
        ),
    };
    let sentences: Vec<PhonemizedSentence> = phonemized
        .sentences
        .into_iter()
        .map(|s| PhonemizedSentence {
            text: s.text,
            spoken: s.spoken,
            phonemes: s.phonemes,
            tokens: s.ids,
            voice: s.voice,
        })
        .collect();
    let join = |part: fn(&PhonemizedSentence) -> &str| {
        sentences.iter().map(part).collect::<Vec<_>>().join(" ")
    };
    Ok(Json(PhonemizeResponse {
        phonemes: join(|s| &s.phonemes),
        tokens: sentences
            .iter()
            .flat_map(|s| s.tokens.iter().copied())
            .collect(),
        model,
        voice,
        normalized_text: join(|s| &s.spoken),
        sentences,
    }))
}
