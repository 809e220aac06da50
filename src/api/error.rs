//! The one place that decides HTTP status codes and the public error body
//! `{"detail": {"reason": "...", "errors": [...]}}`. Internal details go to
//! the log, never to the client.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use precedent_core::domain::Invalid;
use precedent_service::ServiceError;
use precedent_store::StoreError;

/// One field that failed validation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// Where in the body: `messages[2].role`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl From<Invalid> for FieldError {
    fn from(invalid: Invalid) -> FieldError {
        FieldError {
            field: invalid.field,
            message: invalid.reason,
        }
    }
}

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    reason: String,
    errors: Vec<FieldError>,
    retry_after_seconds: Option<u32>,
}

impl ApiError {
    /// An answer with a status and a reason.
    pub fn new(status: StatusCode, reason: impl Into<String>) -> ApiError {
        ApiError {
            status,
            reason: reason.into(),
            errors: Vec::new(),
            retry_after_seconds: None,
        }
    }

    /// 400: the body is not JSON.
    pub fn malformed_json(detail: impl std::fmt::Display) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, format!("malformed JSON: {detail}"))
    }

    /// 422 listing each bad field.
    pub fn invalid_fields(errors: Vec<FieldError>) -> ApiError {
        let listed: Vec<String> = errors
            .iter()
            .map(|error| format!("{}: {}", error.field, error.message))
            .collect();
        ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            reason: format!("invalid request: {}", listed.join("; ")),
            errors,
            retry_after_seconds: None,
        }
    }

    /// 401: no key, or a key that is not accepted. Never echoes the key.
    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing or invalid API key: send Authorization: Bearer <key>, Authorization: Token <key> or X-Api-Key: <key>",
        )
    }

    /// 503 with a `Retry-After`.
    pub fn unavailable(reason: impl Into<String>, retry_after_seconds: u32) -> ApiError {
        ApiError {
            retry_after_seconds: Some(retry_after_seconds),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, reason)
        }
    }

    /// The status this error answers with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The reason given in the body.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// 422: a value a `domain` check refused, such as an id in a path or a
/// query string.
impl From<Invalid> for ApiError {
    fn from(invalid: Invalid) -> ApiError {
        ApiError::invalid_fields(vec![invalid.into()])
    }
}

/// Seconds a client waits before retrying when the store is unreachable
/// (a database restart takes seconds).
const STORE_RETRY_AFTER_SECONDS: u32 = 2;

/// Seconds a client waits before retrying an Add of a user whose deletion
/// is under way (another node's; this node holds such Adds until it ends).
const USER_DELETION_RETRY_AFTER_SECONDS: u32 = 2;

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> ApiError {
        match error {
            ServiceError::Conflict { .. } => ApiError::new(StatusCode::CONFLICT, error.to_string()),
            ServiceError::SessionTooLarge { .. } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, error.to_string())
            }
            ServiceError::ShuttingDown => ApiError::unavailable("the service is shutting down", 1),
            ServiceError::NotYetSearchable(_) | ServiceError::WriteFailed(_) => {
                tracing::error!(%error, "add not completed");
                ApiError::unavailable("the add could not be completed now; retry it", 1)
            }
            ServiceError::Store(StoreError::UserBeingDeleted(_)) => {
                ApiError::unavailable(error.to_string(), USER_DELETION_RETRY_AFTER_SECONDS)
            }
            ServiceError::Store(store_error) if store_error.is_unavailable() => {
                tracing::error!(error = %store_error, "store unreachable");
                ApiError::unavailable(
                    "the store is unreachable; nothing was changed, retry later",
                    STORE_RETRY_AFTER_SECONDS,
                )
            }
            ServiceError::Store(_)
            | ServiceError::Encode(_)
            | ServiceError::Index(_)
            | ServiceError::Task { .. }
            | ServiceError::Locked(_)
            | ServiceError::DataDir { .. } => {
                tracing::error!(%error, "internal error");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            }
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    detail: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    reason: &'a str,
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    errors: &'a [FieldError],
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            detail: Detail {
                reason: &self.reason,
                errors: &self.errors,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after_seconds {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_failure_keeps_its_source_and_answers_without_it() {
        let not_json = serde_json::from_str::<u8>("x").unwrap_err();
        let thread = std::io::Error::other("no more threads");
        let retry = "the add could not be completed now; retry it";
        let cases = [
            (ServiceError::Encode(not_json), 500, "internal error"),
            (
                ServiceError::Task {
                    what: "cannot start a thread",
                    source: Some(Box::new(thread)),
                },
                500,
                "internal error",
            ),
            (
                ServiceError::NotYetSearchable(Arc::new(ServiceError::ShuttingDown)),
                503,
                retry,
            ),
            (
                ServiceError::WriteFailed(Arc::new(ServiceError::ShuttingDown)),
                503,
                retry,
            ),
        ];
        for (error, status, reason) in cases {
            let source = std::error::Error::source(&error).map(ToString::to_string);
            assert!(
                source.is_some_and(|source| error.to_string().ends_with(&source)),
                "{error}"
            );
            let answer = ApiError::from(error);
            assert_eq!(answer.status().as_u16(), status);
            assert_eq!(answer.reason(), reason);
        }
    }
}
