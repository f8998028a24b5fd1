//! `GET`, `PUT` and `DELETE /v1/audio/lexicon`: the pronunciation dictionary over HTTP.
//!
//! Changes are saved (`--lexicon`) before they answer, and heard from the next request on.
//! They change what every client hears, so the routes sit behind the API key with speech.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::ErrorBody;
use super::extract::{ApiJson, ApiQuery};
use super::{ApiError, AppState};
use crate::speech::LexiconView;
use crate::text::lexicon::Entry;

/// One word or phrase and how to say it: `ipa` or `alias`, exactly one.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"word": "Kokoro", "ipa": "kˈoʊkəɹoʊ"}))]
pub struct LexiconEntry {
    /// As written; matched as whole words, ignoring case unless `case_sensitive`. Spaces in
    /// a phrase match any whitespace.
    word: String,
    /// How it is said, in IPA as espeak-ng writes it (stress `ˈ` `ˌ`, length `ː`); slashes
    /// around it are allowed. A symbol the voice cannot say makes the request a 400.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ipa: Option<String>,
    /// Words said in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alias: Option<String>,
    /// Only for voices of this language (`en` covers `en-US` and `en-GB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    language: Option<String>,
    #[serde(default)]
    case_sensitive: bool,
}

impl From<LexiconEntry> for Entry {
    fn from(e: LexiconEntry) -> Self {
        Entry {
            word: e.word,
            ipa: e.ipa,
            alias: e.alias,
            language: e.language,
            case_sensitive: e.case_sensitive,
        }
    }
}

impl From<Entry> for LexiconEntry {
    fn from(e: Entry) -> Self {
        Self {
            word: e.word,
            ipa: e.ipa,
            alias: e.alias,
            language: e.language,
            case_sensitive: e.case_sensitive,
        }
    }
}

/// The whole dictionary.
#[derive(Debug, Serialize, ToSchema)]
pub struct Lexicon {
    /// A digest of the entries: it changes with every change, and equal dictionaries have
    /// equal versions (replicas can compare theirs).
    version: String,
    /// Whether changes are saved to a file (`--lexicon`); otherwise they last until the
    /// server stops.
    persistent: bool,
    entries: Vec<LexiconEntry>,
}

impl From<LexiconView> for Lexicon {
    fn from(view: LexiconView) -> Self {
        Self {
            version: view.version,
            persistent: view.persistent,
            entries: view.entries.into_iter().map(Into::into).collect(),
        }
    }
}

/// Entries to put in.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"entries": [{"word": "nginx", "alias": "engine x"}]}))]
pub struct LexiconChange {
    /// Each replaces the entry for the same word and language, if there is one.
    entries: Vec<LexiconEntry>,
    /// `true` makes `entries` the whole dictionary instead.
    #[serde(default)]
    replace: bool,
}

/// Which entries to remove.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LexiconRemoval {
    /// The word or phrase whose entries go.
    word: Option<String>,
    /// Only its entry for this language.
    language: Option<String>,
    /// `true` (and no `word`) empties the dictionary.
    #[serde(default)]
    all: bool,
}

/// The pronunciation dictionary
#[utoipa::path(get, path = "/v1/audio/lexicon", tag = "lexicon",
    responses((status = 200, description = "Every entry", body = Lexicon)))]
pub async fn get_lexicon(State(state): State<Arc<AppState>>) -> Json<Lexicon> {
    Json(state.speech.lexicon().await.into())
}

/// Add or change entries
///
/// Checked, saved, then heard from the next request on. Cached audio of text that used a
/// changed entry is not served again.
#[utoipa::path(put, path = "/v1/audio/lexicon", tag = "lexicon",
    request_body = LexiconChange,
    responses(
        (status = 200, description = "The dictionary after the change", body = Lexicon),
        (status = 400, description = "A bad entry; `param` names it (`entries[2].ipa`)", body = ErrorBody),
        (status = 413, description = "The body is larger than the server accepts", body = ErrorBody),
        (status = 415, description = "The body is not JSON", body = ErrorBody),
        (status = 500, description = "The change could not be saved, and was not made", body = ErrorBody),
    ))]
pub async fn put_lexicon(
    State(state): State<Arc<AppState>>,
    ApiJson(change): ApiJson<LexiconChange>,
) -> Result<Json<Lexicon>, ApiError> {
    let entries = change.entries.into_iter().map(Into::into).collect();
    let view = state.speech.put_lexicon(entries, change.replace).await?;
    Ok(Json(view.into()))
}

/// Remove entries
///
/// `?word=…` (with `&language=…` for one language's entry only), or `?all=true`.
#[utoipa::path(delete, path = "/v1/audio/lexicon", tag = "lexicon",
    params(LexiconRemoval),
    responses(
        (status = 200, description = "The dictionary after the change", body = Lexicon),
        (status = 400, description = "Neither `word` nor `all=true`", body = ErrorBody),
        (status = 404, description = "No entry for that word", body = ErrorBody),
        (status = 500, description = "The change could not be saved, and was not made", body = ErrorBody),
    ))]
pub async fn delete_lexicon(
    State(state): State<Arc<AppState>>,
    ApiQuery(removal): ApiQuery<LexiconRemoval>,
) -> Result<Json<Lexicon>, ApiError> {
    let view = match (&removal.word, removal.all) {
        (Some(word), false) => {
            state
                .speech
                .remove_from_lexicon(word, removal.language.as_deref())
                .await?
        }
        (None, true) if removal.language.is_none() => state.speech.clear_lexicon().await?,
        _ => {
            return Err(ApiError::invalid(
                "word",
                "Name the entry to remove with ?word=… (and optionally &language=…), or empty the dictionary with ?all=true alone.",
            ))
        }
    };
    Ok(Json(view.into()))
}
