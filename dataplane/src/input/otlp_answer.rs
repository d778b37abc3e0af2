//! OTLP/HTTP's answers: which HTTP status and `google.rpc` code each outcome of a request gets,
//! so that exporters retry what they should (503 with `Retry-After`, which they honour) and drop
//! what they must not send again as it is (400, 404, 413, 415). The control plane's handler reads
//! the body and hands it on; what the protocol says about each outcome is decided here, beside
//! the decoder, so OTLP is one module pair of this crate.

use super::otlp::{OtlpEncoding, OtlpError, status_body, success_body};
use crate::Error;

/// The `google.rpc.Code` values OTLP/HTTP's error answers carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum RpcCode {
    /// The request is wrong: not to be sent again as it is.
    InvalidArgument = 3,
    /// Too large: not to be sent again as it is.
    ResourceExhausted = 8,
    /// This endpoint is off.
    Unimplemented = 12,
    /// Try again later.
    Unavailable = 14,
}

/// An answer to an OTLP/HTTP request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtlpAnswer {
    /// HTTP status.
    pub status: u16,
    /// The error's code; `None` for a success.
    pub code: Option<RpcCode>,
    /// The error's message (empty for a success).
    pub message: String,
    /// Seconds an exporter should wait before it sends again (`Retry-After`).
    pub retry_after_s: Option<u32>,
}

impl OtlpEncoding {
    /// The encoding a `Content-Type` (parameters and case ignored) names, if OTLP has it.
    pub fn from_content_type(content_type: &str) -> Option<OtlpEncoding> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        if media.eq_ignore_ascii_case("application/x-protobuf")
            || media.eq_ignore_ascii_case("application/protobuf")
        {
            Some(OtlpEncoding::Protobuf)
        } else if media.eq_ignore_ascii_case("application/json") {
            Some(OtlpEncoding::Json)
        } else {
            None
        }
    }

    /// The `Content-Type` of answers in this encoding.
    pub fn content_type(self) -> &'static str {
        match self {
            OtlpEncoding::Protobuf => "application/x-protobuf",
            OtlpEncoding::Json => "application/json",
        }
    }
}

/// Whether a body with this `Content-Encoding` is gzip (`None` or `identity`: not compressed);
/// another coding is refused.
pub fn otlp_gzip(content_encoding: Option<&str>) -> Result<bool, OtlpAnswer> {
    match content_encoding
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("identity") | Some("") => Ok(false),
        Some("gzip") => Ok(true),
        Some(other) => Err(OtlpAnswer::unsupported(&format!(
            "Content-Encoding `{other}` is not supported (gzip or none)"
        ))),
    }
}

impl OtlpAnswer {
    /// Every record taken: an `ExportLogsServiceResponse` with nothing rejected.
    pub fn ok() -> OtlpAnswer {
        OtlpAnswer {
            status: 200,
            code: None,
            message: String::new(),
            retry_after_s: None,
        }
    }

    fn error(status: u16, code: RpcCode, message: &str) -> OtlpAnswer {
        OtlpAnswer {
            status,
            code: Some(code),
            message: message.to_string(),
            retry_after_s: None,
        }
    }

    /// A body OTLP does not define (media type or coding): 415.
    pub fn unsupported(message: &str) -> OtlpAnswer {
        OtlpAnswer::error(415, RpcCode::InvalidArgument, message)
    }

    /// A `Content-Type` that is not OTLP's.
    pub fn unsupported_content_type() -> OtlpAnswer {
        OtlpAnswer::unsupported("Content-Type must be application/x-protobuf or application/json")
    }

    /// HTTP ingest is off: permanent until the configuration changes, so an exporter must not
    /// retry it (404).
    pub fn ingest_off() -> OtlpAnswer {
        OtlpAnswer::error(
            404,
            RpcCode::Unimplemented,
            "HTTP ingest is off (inputs.http.enabled = false)",
        )
    }

    /// Try again in `retry_after_s` seconds (503).
    pub fn unavailable(message: &str, retry_after_s: u32) -> OtlpAnswer {
        OtlpAnswer {
            retry_after_s: Some(retry_after_s),
            ..OtlpAnswer::error(503, RpcCode::Unavailable, message)
        }
    }

    /// A body the service would not read, answered `status` by the body guard: too large (413,
    /// not to be sent again as it is) or too slow (408, which exporters retry).
    pub fn unread(status: u16, message: &str) -> OtlpAnswer {
        let code = if status == 413 {
            RpcCode::ResourceExhausted
        } else {
            RpcCode::Unavailable
        };
        OtlpAnswer::error(status, code, message)
    }

    /// A body that does not decode (400), or decodes too large (413).
    pub fn undecodable(error: &OtlpError) -> OtlpAnswer {
        match error {
            OtlpError::TooLarge(_) | OtlpError::TooMany(_) => {
                OtlpAnswer::error(413, RpcCode::ResourceExhausted, &error.to_string())
            }
            _ => OtlpAnswer::error(400, RpcCode::InvalidArgument, &error.to_string()),
        }
    }

    /// More log records than one request may carry (`api_ingest_max_events`): 413.
    pub fn too_many_records(records: u64, max: u64) -> OtlpAnswer {
        OtlpAnswer::error(
            413,
            RpcCode::ResourceExhausted,
            &format!(
                "the request carries {records} log records, more than one request may carry \
                 (api_ingest_max_events, {max}); send smaller batches"
            ),
        )
    }

    /// Why HTTP ingest did not take the records; what an exporter cannot act on is logged and
    /// answered as an internal error.
    pub fn not_ingested(error: &Error) -> OtlpAnswer {
        match error {
            Error::IngestBusy => {
                OtlpAnswer::unavailable("ingestion is saturated; retry shortly", 1)
            }
            Error::NotDurable(m) => {
                OtlpAnswer::unavailable(&format!("nothing was accepted: {m}"), 5)
            }
            Error::Stopped => OtlpAnswer::unavailable("the service is shutting down", 5),
            other => OtlpAnswer::internal(other),
        }
    }

    /// A failure of the service itself, logged; the exporter retries later.
    pub fn internal(error: &dyn std::fmt::Display) -> OtlpAnswer {
        tracing::error!("OTLP ingest: {error}");
        OtlpAnswer::unavailable("internal error; see the service log", 5)
    }

    /// The body of the answer in `encoding`: an `ExportLogsServiceResponse` for a success, a
    /// `google.rpc.Status` otherwise.
    pub fn body(&self, encoding: OtlpEncoding) -> Vec<u8> {
        match self.code {
            None => success_body(encoding),
            Some(code) => status_body(code as i32, &self.message, encoding),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_read_as_otlp_names_them() {
        for (ct, encoding) in [
            ("application/x-protobuf", Some(OtlpEncoding::Protobuf)),
            ("Application/Protobuf", Some(OtlpEncoding::Protobuf)),
            ("application/json; charset=utf-8", Some(OtlpEncoding::Json)),
            ("text/plain", None),
            ("", None),
        ] {
            assert_eq!(OtlpEncoding::from_content_type(ct), encoding, "{ct}");
        }
    }

    #[test]
    fn what_an_exporter_must_not_resend_is_never_a_retryable_status() {
        let permanent = [
            OtlpAnswer::unsupported_content_type(),
            OtlpAnswer::ingest_off(),
            OtlpAnswer::undecodable(&OtlpError::Decode("x".into())),
            OtlpAnswer::undecodable(&OtlpError::TooMany(5)),
            OtlpAnswer::too_many_records(10, 5),
            otlp_gzip(Some("br")).unwrap_err(),
        ];
        for a in permanent {
            assert!(matches!(a.status, 400 | 404 | 413 | 415), "{a:?}");
            assert_eq!(a.retry_after_s, None);
        }
        for e in [Error::IngestBusy, Error::Stopped] {
            let a = OtlpAnswer::not_ingested(&e);
            assert_eq!((a.status, a.code), (503, Some(RpcCode::Unavailable)));
            assert!(a.retry_after_s.is_some());
        }
        assert_eq!(otlp_gzip(Some(" GZIP ")), Ok(true));
        assert_eq!(otlp_gzip(None), Ok(false));
    }
}
