//! The API's JSON answer: axum's `Json`, written with the readable sibling of every nanosecond
//! field ([`crate::times`]) in the one pass that serialises it.
//!
//! Which fields are nanosecond ones is the OpenAPI document's to say (its schemas are derived
//! from the answers' types), and the router, which serves that document, tells this module
//! once ([`learn_time_names`]). The document is not read from here because it is built from the
//! routes' types, and the routes answer with this module's [`Json`].

use crate::times::{TimeNames, WithReadableTimes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::OnceLock;

static TIME_NAMES: OnceLock<TimeNames> = OnceLock::new();

/// Sets the `_ns` field names of the answers, from the first router built (every router
/// describes the same types, so later calls change nothing).
pub(crate) fn learn_time_names(names: impl FnOnce() -> HashSet<String>) {
    TIME_NAMES.get_or_init(|| TimeNames::new(names()));
}

/// A JSON answer.
pub(crate) struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(128);
        let written = match TIME_NAMES.get() {
            Some(names) => serde_json::to_writer(
                &mut body,
                &WithReadableTimes {
                    value: &self.0,
                    names,
                },
            ),
            // No router has been built: nothing serves this answer to a client yet.
            None => serde_json::to_writer(&mut body, &self.0),
        };
        let status = match written {
            Ok(()) => StatusCode::OK,
            // As axum's own `Json` answers: a type that cannot be written (a map with keys
            // that are not text) is the code's fault, and the client gets a 500.
            Err(e) => {
                tracing::error!(error = %e, "an API answer could not be written as JSON");
                body = br#"{"error":"internal","message":"internal error; see the service log"}"#
                    .to_vec();
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let json = HeaderValue::from_static("application/json");
        (status, [(header::CONTENT_TYPE, json)], body).into_response()
    }
}
