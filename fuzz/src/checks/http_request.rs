//! `http_request`: the REST request decoding of `cmdr serve` — every JSON body
//! (`cmdr::http::decode_json` into `RunRequest`, `CommandRunRequest`, `StreamRequest`,
//! `StatelessRequest`, `InputAnswer`) and the query strings (`ListQuery`, `RunQuery`, as
//! the `ApiQuery` extractor reads them). `POST /commands` bodies are the `decode_command`
//! target's.
//!
//! Properties:
//! - nothing panics;
//! - a refusal is 400 `INVALID_REQUEST` with a message that names no Rust type
//!   (`struct …`, `enum …`, `::`, the request types' names) unless the input itself
//!   holds that text (serde quotes offending values);
//! - an accepted body is one JSON object and nothing after it, decoded the same way twice.

use axum::extract::Query;
use axum::http::{StatusCode, Uri};
use cmdr::http::{
    decode_json, ApiError, CommandRunRequest, InputAnswer, ListQuery, RunQuery, RunRequest,
    StatelessRequest, StreamRequest,
};
use serde::de::{DeserializeOwned, IgnoredAny};

/// Text that would reveal Rust internals in an error message.
const INTERNAL_NAMES: [&str; 11] = [
    "struct ",
    "enum ",
    "::",
    "RunRequest",
    "CommandRunRequest",
    "StreamRequest",
    "StatelessRequest",
    "ClientMessage",
    "InputAnswer",
    "ListQuery",
    "RunQuery",
];

/// Checks every property on one input.
pub fn check(data: &[u8]) {
    body::<RunRequest>(data);
    body::<CommandRunRequest>(data);
    body::<StreamRequest>(data);
    body::<StatelessRequest>(data);
    body::<InputAnswer>(data);
    query(data);
}

/// One body type.
fn body<T: DeserializeOwned + std::fmt::Debug>(data: &[u8]) {
    match decode_json::<T>(data) {
        Ok(value) => {
            let first = data.iter().find(|b| !b.is_ascii_whitespace());
            assert_eq!(first, Some(&b'{'), "accepted a body that is not an object");
            if let Err(e) = serde_json::from_slice::<IgnoredAny>(data) {
                panic!("accepted a body that is not one JSON value: {e}");
            }
            let again = decode_json::<T>(data).map(|v| format!("{v:?}"));
            assert_eq!(again.ok(), Some(format!("{value:?}")));
        }
        Err(e) => check_refusal(&e, data),
    }
}

/// The query string `?…` of `GET /conversations` and `POST /commands`.
fn query(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(uri) = Uri::try_from(format!("/conversations?{text}")) else {
        return;
    };
    for result in [
        Query::<ListQuery>::try_from_uri(&uri).map(|q| format!("{:?}", q.0)),
        Query::<RunQuery>::try_from_uri(&uri).map(|q| format!("{:?}", q.0)),
    ] {
        if let Err(rejection) = result {
            assert!(
                !rejection.body_text().is_empty(),
                "a rejection without text"
            );
            check_refusal(&ApiError::invalid_request(rejection.body_text()), data);
        }
    }
}

fn check_refusal(e: &ApiError, input: &[u8]) {
    assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    assert_eq!(e.code(), cmdr::executors::ErrorCode::InvalidRequest);
    let message = e.message();
    assert!(!message.is_empty(), "a refusal without a message");
    for internal in INTERNAL_NAMES {
        let echoed = input
            .windows(internal.len())
            .any(|w| w == internal.as_bytes());
        assert!(
            echoed || !message.contains(internal),
            "a refusal names a Rust type: {message}"
        );
    }
}
