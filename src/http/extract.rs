//! Extractors whose rejections are [`ApiError`]s: a JSON body ([`JsonBody`]), a raw body
//! ([`RawBody`]), path parameters ([`ApiPath`]) and the query string ([`ApiQuery`]).
//!
//! axum's own extractors answer malformed input with plain-text bodies; these answer
//! 400 `INVALID_REQUEST` naming the problem (`field `messages[1].role`: unknown variant
//! …`, `missing field `instruction``, `malformed JSON: …`) and 413 `PAYLOAD_TOO_LARGE`
//! past the body limit. No `Content-Type` is required (`curl -d` works); cross-site
//! browser requests are stopped by the origin guard instead (see `guard`).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::HttpState;

/// A request body decoded from JSON into `T`. Unknown fields are ignored.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

/// The request body as bytes, within the body limit.
#[derive(Debug, Clone)]
pub struct RawBody(pub Bytes);

/// Path parameters decoded into `T`.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

/// The query string decoded into `T`.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl FromRequest<HttpState> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &HttpState) -> Result<Self, ApiError> {
        // A body announced larger than the limit is refused before any of it is read.
        let announced = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if announced.is_some_and(|length| length > state.body_limit() as u64) {
            return Err(ApiError::payload_too_large(state.body_limit()));
        }
        match Bytes::from_request(request, state).await {
            Ok(bytes) => Ok(RawBody(bytes)),
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::payload_too_large(state.body_limit()))
            }
            Err(rejection) => {
                tracing::debug!(error = %rejection, "could not read a request body");
                Err(ApiError::invalid_request(
                    "the request body could not be read",
                ))
            }
        }
    }
}

impl<T: DeserializeOwned> FromRequest<HttpState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &HttpState) -> Result<Self, ApiError> {
        let RawBody(bytes) = RawBody::from_request(request, state).await?;
        decode_json(&bytes).map(JsonBody)
    }
}

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| ApiPath(value))
            .map_err(|rejection| ApiError::invalid_request(rejection.body_text()))
    }
}

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(value)| ApiQuery(value))
            .map_err(|rejection| ApiError::invalid_request(rejection.body_text()))
    }
}

/// Decodes a JSON object into `T`; errors name the field and say what is wrong.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        None => {
            return Err(ApiError::invalid_request(
                "the request body is empty; expected a JSON object",
            ))
        }
        Some(b'{') => {}
        Some(_) => {
            return Err(ApiError::invalid_request(
                "the request body must be a JSON object",
            ))
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::invalid_request(format!("malformed JSON: {inner}"));
        }
        let what = without_position(&inner);
        if path == "." {
            ApiError::invalid_request(what)
        } else {
            ApiError::invalid_request(format!("field `{path}`: {what}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::invalid_request(format!("malformed JSON: {e}")))?;
    Ok(value)
}

/// serde_json appends "at line L column C": useful for syntax errors, noise for fields.
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Shape {
        name: String,
        #[serde(default)]
        items: Vec<Item>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(expecting = "an item object")]
    #[allow(dead_code)]
    struct Item {
        n: u32,
    }

    fn message(json: &str) -> String {
        match decode_json::<Shape>(json.as_bytes()) {
            Ok(v) => panic!("expected an error, got {v:?}"),
            Err(e) => {
                assert_eq!(
                    (e.status(), e.code()),
                    (
                        StatusCode::BAD_REQUEST,
                        cmdr_executors::ErrorCode::InvalidRequest
                    )
                );
                e.message().to_owned()
            }
        }
    }

    #[test]
    fn errors_name_the_field_and_the_problem() {
        assert_eq!(
            message(""),
            "the request body is empty; expected a JSON object"
        );
        assert_eq!(message("[1]"), "the request body must be a JSON object");
        assert!(message("{\"name\":").starts_with("malformed JSON: "));
        assert!(message("{\"name\":\"a\"} x").starts_with("malformed JSON: trailing"));
        assert_eq!(message("{}"), "missing field `name`");
        assert_eq!(
            message(r#"{"name":5}"#),
            "field `name`: invalid type: integer `5`, expected a string"
        );
        assert_eq!(
            message(r#"{"name":"a","items":[{"n":1},{"n":"x"}]}"#),
            "field `items[1].n`: invalid type: string \"x\", expected u32"
        );
        assert_eq!(
            message(r#"{"name":"a","items":[3]}"#),
            "field `items[0]`: invalid type: integer `3`, expected an item object"
        );
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let shape: Shape = decode_json(br#"{"name":"a","extra":{"deep":[1]}}"#)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(shape.name, "a");
    }
}
