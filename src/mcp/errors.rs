//! How refusals become JSON-RPC errors (docs/contract.md §7): the stable code always travels in
//! `data.code`, the JSON-RPC `code` says what kind of refusal it is.
//!
//! | class of the code ([`ErrorClass`]) | JSON-RPC `code` |
//! |---|---|
//! | `Invalid`, `NotFound` (invalid arguments (schema), `INVALID_REQUEST`, `COMMAND_*`, `WORKING_FOLDER_*`, `AGENT_NOT_FOUND`, `CONVERSATION_NOT_FOUND`, `AGENT_MISMATCH`, …) | `-32602` (invalid params) |
//! | `Conflict` (`RUN_IN_PROGRESS`) | `409` |
//! | `Unavailable` (`LLM_UNAVAILABLE`) | `503` |
//! | `Internal` (`STORE_ERROR`, `IO_ERROR`, `INTERNAL_ERROR`) and the classes no service error has (`Unauthorized`, `Forbidden`, `MethodNotAllowed`, `PayloadTooLarge`, `Failed`) | `-32603` (internal error, generic message) |

use cmdr_executors::ErrorClass;
use rmcp::model::ErrorCode;
use rmcp::ErrorData;
use serde_json::json;

use crate::service::ServiceError;

/// JSON-RPC code of `RUN_IN_PROGRESS` (HTTP's "conflict", as docs/contract.md §7 asks).
pub const RUN_IN_PROGRESS: ErrorCode = ErrorCode(409);

/// JSON-RPC code of `LLM_UNAVAILABLE` (HTTP's "service unavailable", like the REST API).
pub const LLM_UNAVAILABLE: ErrorCode = ErrorCode(503);

/// `-32602` with `data.code = "INVALID_REQUEST"`: arguments that break the tool's schema,
/// an unknown tool.
pub fn invalid_params(message: impl Into<String>) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_PARAMS,
        message.into(),
        Some(json!({ "code": cmdr_executors::ErrorCode::InvalidRequest.as_str() })),
    )
}

/// The JSON-RPC error for a refusal of the agent service.
pub fn service_error(error: &ServiceError) -> ErrorData {
    let code = error.code().as_str();
    let data = Some(json!({ "code": code }));
    match error.class() {
        ErrorClass::NotFound | ErrorClass::Invalid => {
            ErrorData::new(ErrorCode::INVALID_PARAMS, error.to_string(), data)
        }
        ErrorClass::Conflict => ErrorData::new(RUN_IN_PROGRESS, error.to_string(), data),
        ErrorClass::Unavailable => ErrorData::new(LLM_UNAVAILABLE, error.to_string(), data),
        ErrorClass::Internal
        | ErrorClass::Unauthorized
        | ErrorClass::Forbidden
        | ErrorClass::MethodNotAllowed
        | ErrorClass::PayloadTooLarge
        | ErrorClass::RequestTimeout
        | ErrorClass::Failed => {
            tracing::error!(code, error = %error, "an MCP tool failed");
            internal(code)
        }
    }
}

/// `-32603` with `data.code`; the message names no internals (they are in the log).
pub fn internal(code: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::INTERNAL_ERROR,
        format!("cmdr failed internally ({code}); the details are in the server log"),
        Some(json!({ "code": code })),
    )
}
