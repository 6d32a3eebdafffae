//! The web UI (`web/` in the repository), embedded in the binary: `GET /` serves
//! `index.html`, `GET /assets/{*path}` the style sheet and the JavaScript modules. No file
//! is read at run time and nothing is built: the assets are plain HTML, CSS and ES
//! modules (`web/js/*.js`, no framework, no npm), included with `include_bytes!`.
//!
//! Every answer carries `Cache-Control: no-cache` (the browser revalidates, so a new
//! binary's UI is picked up at once) and an `ETag` (a hash of the content) so
//! revalidation is a `304`; the page gets a strict `Content-Security-Policy` (its own
//! scripts, styles and origin only). The UI talks to the REST/SSE API of [`crate::http`]
//! with relative URLs (it also works under a path prefix behind a proxy); it must be
//! merged next to that router, outside the token check: a browser cannot send a bearer
//! token when it loads a page, so the page asks for the token when the API answers 401
//! and sends it with its API calls.
//!
//! ## How the page uses the API (decisions)
//! - **Chat** (`POST /agents/:agent/stream`): events are rendered as they arrive; each
//!   `<shell>` command is its own part, found by `commandId` (never by its text), with a
//!   status badge (queued → running → completed / failed / stopped / skipped), live
//!   output, exit status and duration; long output is collapsed behind "Show all".
//!   Stop aborts the fetch; the server stops the run and stores it as `stopped`.
//! - **Transcript from persisted turns** (`GET /conversations/:id/turns`): the same
//!   bubbles as live; a `tool` turn is split back into one part per entry of its
//!   `toolRuns` (each block is `$ <command>\n<result>`, found by the run's command, since
//!   results may contain blank lines). Durations are not persisted, so re-hydrated parts
//!   show the exit status only. Stored content is never altered: Markdown and `<shell>`
//!   terminal blocks are rendering only (an escaping renderer, `web/js/markdown.js`).
//! - **Agent command runs** (`POST /agents/:agent/commands/run`) answer only at the end,
//!   so progress comes from the persisted turns: while the request is open the page
//!   polls the conversation's turns every 0.7 s and appends new ones (each step's prompt,
//!   replies and results, with `Command run: <name> (k/n)`) under a "step k of n" line.
//!   For a run that creates a conversation the id is only in the answer, so the page
//!   polls `GET /conversations?agentName=` for a conversation that was not there when
//!   the run started and follows it (the answer's id wins at the end, should another
//!   tab have created one meanwhile). Stop aborts the request; the turns the server
//!   stores as the run winds down are picked up for a few seconds after.
//! - **User input**: the page polls `GET /commands/inputs` (0.7 s during a run, 1.5 s
//!   otherwise, only while visible) and shows every waiting `REQUEST_USER_INPUT` as an
//!   inline prompt at the end of the transcript; the answer goes to
//!   `POST /commands/:id/input`. Agent runs only run `BASH_EXEC`, so today questions
//!   come from raw commands (`POST /commands`, MCP, NATS producers).
//! - **Location**: `#agent=<name>&c=<conversation id>`, so a reload (or a link) opens
//!   the same conversation.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $content_type:literal) => {
        Asset {
            path: $path,
            content_type: $content_type,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/web/", $path)),
        }
    };
}

/// Everything under `/assets/`, by path relative to `web/`.
const ASSETS: &[Asset] = &[
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("js/app.js", "text/javascript; charset=utf-8"),
    asset!("js/api.js", "text/javascript; charset=utf-8"),
    asset!("js/dom.js", "text/javascript; charset=utf-8"),
    asset!("js/markdown.js", "text/javascript; charset=utf-8"),
    asset!("js/processes.js", "text/javascript; charset=utf-8"),
    asset!("js/transcript.js", "text/javascript; charset=utf-8"),
];

/// The page itself.
const INDEX: Asset = asset!("index.html", "text/html; charset=utf-8");

/// `GET /` (the page) and `GET /assets/{*path}` (its files); unknown assets are 404.
pub fn router() -> Router {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/assets/{*path}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.path == path) {
        Some(asset) => serve(asset, &headers),
        None => (
            StatusCode::NOT_FOUND,
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            "not found",
        )
            .into_response(),
    }
}

fn serve(asset: &Asset, headers: &HeaderMap) -> Response {
    let etag = etag(asset.bytes);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    let common = [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::ETAG,
            HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"0\"")),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
    ];
    if fresh {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        common,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            // The page only loads its own files and talks to its own origin.
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'self'; img-src 'self' data:; style-src 'self'; \
                     script-src 'self'; connect-src 'self'; object-src 'none'; \
                     base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
                ),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        asset.bytes,
    )
        .into_response()
}

/// A strong validator: FNV-1a of the content (stable across builds of the same file).
fn etag(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("\"{hash:016x}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        for asset in ASSETS.iter().filter(|a| a.path.ends_with(".js")) {
            let source = std::str::from_utf8(asset.bytes).unwrap_or_default();
            for line in source.lines().filter(|l| l.contains(" from './")) {
                let Some(name) = line.split("from './").nth(1) else {
                    continue;
                };
                let file = name.trim_end_matches(['\'', ';']);
                assert!(
                    ASSETS.iter().any(|a| a.path == format!("js/{file}")),
                    "{file} is imported but not embedded"
                );
            }
        }
    }

    #[test]
    fn etags_differ_by_content() {
        assert_ne!(etag(b"a"), etag(b"b"));
        assert_eq!(etag(b"a"), etag(b"a"));
    }
}
