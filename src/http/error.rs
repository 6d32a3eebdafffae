//! [`ApiError`]: every refusal of the HTTP API as one JSON shape (SPEC §6),
//! `{"error":"<class>","code":"<STABLE_CODE>","message":"<one sentence>"}`, and the
//! fallbacks for unknown routes (404) and wrong methods (405).
//!
//! The `error` word follows the status: 400 `invalid_request`, 401 `unauthorized`,
//! 403 `forbidden`, 404 `not_found`, 405 `method_not_allowed`, 409 `conflict`,
//! 413 `payload_too_large`, 500 `internal`, 503 `unavailable`. A 500 never carries the
//! failure's detail (it may name files or database internals): the detail goes to the
//! log, the body says only that something failed inside cmdr.

use std::borrow::Cow;

use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use cmdr_executors::SubmitError;
use serde::Serialize;

use crate::service::{ErrorClass, ServiceError};

/// The message of every 500: the detail is in the server log only.
pub const INTERNAL_MESSAGE: &str = "cmdr failed internally; the details are in the server log";

/// An HTTP error answer: a status and the `{"error","code","message"}` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    code: Cow<'static, str>,
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
    /// An error with this status, stable code and message (the message is sent as is:
    /// it must not contain internals).
    pub fn new(
        status: StatusCode,
        code: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code: code.into(),
            message: message.into(),
        }
    }

    /// 400 `INVALID_REQUEST`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message)
    }

    /// 404 with this code.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 413 `PAYLOAD_TOO_LARGE`.
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 500 `INTERNAL_ERROR` with the generic message; `detail` is logged, never sent.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error answering an HTTP request");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL_ERROR",
            INTERNAL_MESSAGE,
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The message sent.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The `error` word of a status.
fn error_word(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "invalid_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::CONFLICT => "conflict",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        StatusCode::INTERNAL_SERVER_ERROR => "internal",
        _ => "error",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: error_word(self.status),
            code: &self.code,
            message: &self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

/// The message a service error may show: its own text, except for internal failures.
pub fn public_message(error: &ServiceError) -> String {
    match error.class() {
        ErrorClass::Internal => {
            tracing::error!(code = error.code(), error = %error, "internal error of the agent service");
            INTERNAL_MESSAGE.to_owned()
        }
        _ => error.to_string(),
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        let status = match error.class() {
            ErrorClass::NotFound => StatusCode::NOT_FOUND,
            ErrorClass::Invalid => StatusCode::BAD_REQUEST,
            ErrorClass::Conflict => StatusCode::CONFLICT,
            ErrorClass::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let message = public_message(&error);
        Self::new(status, error.code(), message)
    }
}

impl From<SubmitError> for ApiError {
    /// A command the registry refused: a duplicate in-flight id is 409
    /// `DUPLICATE_COMMAND_ID`, a registry shutting down 503 `SHUTTING_DOWN`, a command
    /// type nobody serves 400 `UNSUPPORTED_COMMAND_TYPE`.
    fn from(error: SubmitError) -> Self {
        let status = match error {
            SubmitError::DuplicateId(_) => StatusCode::CONFLICT,
            SubmitError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            SubmitError::NotRegistered(_) => StatusCode::BAD_REQUEST,
        };
        Self::new(status, error.code(), error.to_string())
    }
}

/// Fallback for paths no route serves: 404 `ROUTE_NOT_FOUND`.
pub async fn route_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(
        "ROUTE_NOT_FOUND",
        format!("no route for {method} {}", uri.path()),
    )
}

/// Fallback for a known path asked with a method it does not serve: 405
/// `METHOD_NOT_ALLOWED` (axum adds the `Allow` header).
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        format!("{} does not accept {method}", uri.path()),
    )
}
