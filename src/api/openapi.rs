//! The OpenAPI 3.1 document at `GET /openapi.json`, built from the code that serves the API.
//!
//! Routes are registered through `utoipa_axum`, so a route exists in the router exactly when
//! it exists in the document; request and response schemas are derived from the types the
//! handlers parse and serialize, and the answers they share are described once, in
//! [`super::schema`], which the handlers' annotations and this builder both read. What this
//! builder adds is what only the running server knows: the input limit from its settings, and
//! which routes need a key, from the router group that puts the key check in front of them
//! ([`require_key`]).
//! Describing this server as it runs (not a generic build) keeps a client or a fuzzer
//! reading it from meeting a rule the document does not state.

use axum::extract::Extension;
use axum::http::header;
use axum::response::IntoResponse;
use bytes::Bytes;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::schema::Object;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Components, Info, License, OpenApi, RefOr, Schema, Type};
use utoipa::ToSchema;

use super::headers::REQUEST_ID;
use super::schema::{add_referenced, error_response, required_header};
use super::speech::SpeechRequest;
use crate::config::Settings;

/// Name of the bearer scheme in `components.securitySchemes`.
const BEARER: &str = "bearer";

/// The document as served: rendered once at startup, since nothing in it changes while the
/// server runs.
#[derive(Clone)]
pub(super) struct Document(Bytes);

impl Document {
    /// Completes the document the router collected with what the annotations cannot know.
    pub(super) fn new(mut api: OpenApi, settings: &Settings) -> Self {
        api.info = Info::builder()
            .title(env!("CARGO_PKG_NAME"))
            .version(env!("CARGO_PKG_VERSION"))
            .description(Some(DESCRIPTION))
            .license(Some(
                License::builder()
                    .name(env!("CARGO_PKG_LICENSE"))
                    .identifier(Some(env!("CARGO_PKG_LICENSE")))
                    .build(),
            ))
            .build();
        let components = api.components.get_or_insert_with(Components::new);
        add_referenced(components);
        components.security_schemes.insert(
            BEARER.into(),
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A key given to the server with `--api-key`, sent as \
                         `Authorization: Bearer <key>`. Operations that list this scheme need \
                         it; the others are open. Without `--api-key` every operation is open; \
                         with `--public-discovery` the model and voice lists are.",
                    ))
                    .build(),
            )
            .into(),
        );
        limit_input(components, settings.max_input_chars);
        for item in api.paths.paths.values_mut() {
            for operation in operations(item) {
                for response in operation.responses.responses.values_mut() {
                    if let RefOr::T(response) = response {
                        response.headers.insert(
                            REQUEST_ID.to_string(),
                            required_header(
                                Object::with_type(Type::String),
                                "Identifies the request in the server's logs; a request's own \
                                 `X-Request-Id` is echoed back.",
                            )
                            .into(),
                        );
                    }
                }
            }
        }
        let json = serde_json::to_vec_pretty(&api).expect("the document serializes");
        Self(json.into())
    }
}

const DESCRIPTION: &str = "OpenAI-compatible text-to-speech: `POST /v1/audio/speech` with \
    Piper voices (native VITS) and espeak-ng. Errors are OpenAI-shaped: \
    `{\"error\": {\"message\", \"type\", \"param\", \"code\"}}`. The playground at `/` is a \
    client of this API.";

/// The OpenAPI document of this server
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "This document (OpenAPI 3.1)", body = serde_json::Value)))]
pub(super) async fn document(Extension(document): Extension<Document>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document.0)
}

/// Marks every operation of `api` as needing the bearer key, with its 401 answer. Called by
/// the router on exactly the groups it puts the key check in front of.
pub(super) fn require_key(api: &mut OpenApi) {
    for item in api.paths.paths.values_mut() {
        for operation in operations(item) {
            operation.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
            operation.responses.responses.insert(
                "401".into(),
                error_response("Missing or wrong API key").into(),
            );
        }
    }
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .flatten()
}

/// The longest input this server accepts, and in its description the default.
fn limit_input(components: &mut Components, max_input_chars: usize) {
    let Some(RefOr::T(Schema::Object(request))) =
        components.schemas.get_mut(SpeechRequest::name().as_ref())
    else {
        unreachable!("SpeechRequest is the speech route's request body");
    };
    let Some(RefOr::T(Schema::Object(input))) = request.properties.get_mut("input") else {
        unreachable!("SpeechRequest has an input");
    };
    input.max_length = Some(max_input_chars);
}
