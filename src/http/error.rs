//! [`ApiError`]: every refusal of the HTTP API as one JSON shape (docs/contract.md §6),
//! `{"error":"<class>","code":"<STABLE_CODE>","message":"<one sentence>"}`, and the
//! fallbacks for unknown routes (404) and wrong methods (405).
//!
//! The `error` word follows the status: 400 `invalid_request`, 401 `unauthorized`,
//! 403 `forbidden`, 404 `not_found`, 405 `method_not_allowed`, 409 `conflict`,
//! 413 `payload_too_large`, 500 `internal`, 503 `unavailable`. A 500 never carries the
//! failure's detail (it may name files or database internals): the detail goes to the
//! log, the body says only that something failed inside cmdr.

use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use cmdr_executors::{ErrorClass, ErrorCode, SubmitError};
use serde::Serialize;

use crate::service::ServiceError;

/// The message of every 500: the detail is in the server log only.
pub const INTERNAL_MESSAGE: &str = "cmdr failed internally; the details are in the server log";

/// An HTTP error answer: the `{"error","code","message"}` body, with the status of the
/// code's class (`status_of`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
}

/// The body of every error answer.
#[derive(Serialize)]
struct Body<'a> {
    error: &'static str,
    code: &'a str,
    message: &'a str,
}

impl ApiError {
    /// An error with this stable code and message (the message is sent as is: it must not
    /// contain internals).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// 400 `INVALID_REQUEST`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// 413 `PAYLOAD_TOO_LARGE`.
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 500 `INTERNAL_ERROR` with the generic message; `detail` is logged, never sent.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error answering an HTTP request");
        Self::new(ErrorCode::InternalError, INTERNAL_MESSAGE)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        status_of(self.code.class())
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message sent.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The HTTP status of every class. `Failed` names how a command ended, never a refusal;
/// should one reach here, it is cmdr's fault (500).
pub fn status_of(class: ErrorClass) -> StatusCode {
    match class {
        ErrorClass::Invalid => StatusCode::BAD_REQUEST,
        ErrorClass::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorClass::Forbidden => StatusCode::FORBIDDEN,
        ErrorClass::NotFound => StatusCode::NOT_FOUND,
        ErrorClass::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorClass::Conflict => StatusCode::CONFLICT,
        ErrorClass::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorClass::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorClass::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorClass::Internal | ErrorClass::Failed => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The `error` word of a class.
fn error_word(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Invalid => "invalid_request",
        ErrorClass::Unauthorized => "unauthorized",
        ErrorClass::Forbidden => "forbidden",
        ErrorClass::NotFound => "not_found",
        ErrorClass::MethodNotAllowed => "method_not_allowed",
        ErrorClass::Conflict => "conflict",
        ErrorClass::PayloadTooLarge => "payload_too_large",
        ErrorClass::RequestTimeout => "request_timeout",
        ErrorClass::Unavailable => "unavailable",
        ErrorClass::Internal | ErrorClass::Failed => "internal",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let class = self.code.class();
        let body = Body {
            error: error_word(class),
            code: self.code.as_str(),
            message: &self.message,
        };
        (status_of(class), Json(body)).into_response()
    }
}

/// The message a service error may show: its own text, except for internal failures.
pub fn public_message(error: &ServiceError) -> String {
    match error.class() {
        ErrorClass::Internal => {
            tracing::error!(code = %error.code(), error = %error, "internal error of the agent service");
            INTERNAL_MESSAGE.to_owned()
        }
        _ => error.to_string(),
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        let message = public_message(&error);
        Self::new(error.code(), message)
    }
}

impl From<SubmitError> for ApiError {
    /// A command the registry refused: a duplicate in-flight id is 409
    /// `DUPLICATE_COMMAND_ID`, a registry shutting down 503 `SHUTTING_DOWN`, a command
    /// type nobody serves 400 `UNSUPPORTED_COMMAND_TYPE`.
    fn from(error: SubmitError) -> Self {
        Self::new(error.code(), error.to_string())
    }
}

/// Fallback for paths no route serves: 404 `ROUTE_NOT_FOUND`.
pub async fn route_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::RouteNotFound,
        format!("no route for {method} {}", uri.path()),
    )
}

/// Fallback for a known path asked with a method it does not serve: 405
/// `METHOD_NOT_ALLOWED` (axum adds the `Allow` header).
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{} does not accept {method}", uri.path()),
    )
}
