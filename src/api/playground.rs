//! The browser playground at `GET /`: one page to try voices, formats and streaming by ear,
//! and the voice studio around it (design, cloning, profiles, scripts, the request as code).
//!
//! It is compiled into the binary (no build step, no CDN), so a server with no network still
//! serves it. The page is only a client of the public API: it needs no key to load and sends
//! the key its user types, so it lives outside the API-key layer. Its Content-Security-Policy
//! allows nothing but this origin, which keeps a page that handles API keys from loading or
//! sending anything elsewhere.

use axum::http::header;
use axum::response::IntoResponse;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

const INDEX_HTML: &str = include_str!("playground/index.html");
const APP_JS: &str = include_str!("playground/app.js");
const STUDIO_JS: &str = include_str!("playground/studio.js");
const WORKSHOP_JS: &str = include_str!("playground/workshop.js");
const STYLE_CSS: &str = include_str!("playground/style.css");

/// Scripts, styles and requests from this origin only; no inline code, no plugins, no frames.
/// `blob:` media is the downloaded (non-PCM) audio the page plays; `data:` images are its empty
/// favicon.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; media-src 'self' blob:; img-src 'self' data:; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Revalidate every time: the files change with the binary, and they are small.
const CACHE_CONTROL: &str = "no-cache";

/// The playground page
#[utoipa::path(get, path = "/", tag = "playground",
    responses((status = 200, description = "The playground page", body = String, content_type = "text/html")))]
async fn index() -> impl IntoResponse {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// The playground's script
#[utoipa::path(get, path = "/playground/app.js", tag = "playground",
    responses((status = 200, description = "The page's script", body = String, content_type = "text/javascript")))]
async fn app_js() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// The studio's script: tabs, OmniVoice's knobs, design, code and the blend builder
#[utoipa::path(get, path = "/playground/studio.js", tag = "playground",
    responses((status = 200, description = "The studio's script", body = String, content_type = "text/javascript")))]
async fn studio_js() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", STUDIO_JS)
}

/// The workshop's script: the Clone, Profiles and Script tabs
#[utoipa::path(get, path = "/playground/workshop.js", tag = "playground",
    responses((status = 200, description = "The workshop's script", body = String, content_type = "text/javascript")))]
async fn workshop_js() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", WORKSHOP_JS)
}

/// The playground's style sheet
#[utoipa::path(get, path = "/playground/style.css", tag = "playground",
    responses((status = 200, description = "The page's style sheet", body = String, content_type = "text/css")))]
async fn style_css() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

/// The page and its assets; merged into the main router without the API-key layer.
pub fn routes<S: Clone + Send + Sync + 'static>() -> OpenApiRouter<S> {
    OpenApiRouter::default()
        .routes(routes!(index))
        .routes(routes!(app_js))
        .routes(routes!(studio_js))
        .routes(routes!(workshop_js))
        .routes(routes!(style_css))
}

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::CACHE_CONTROL, CACHE_CONTROL),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
}
