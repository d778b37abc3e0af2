//! The one HTTP client of the process, for every call it makes out: the model daemon, the cloud
//! LLM providers, and later webhooks. hyper's own client (the server side already builds hyper)
//! over rustls with the `ring` provider, certificates verified against the system's roots plus
//! any the operator adds (a TLS-inspecting proxy's CA).
//!
//! Each request gets a deadline over the whole exchange and a cap on the answer's size; a model's
//! reply is a few kilobytes of text. Connections are not pooled: a call takes seconds, a
//! handshake milliseconds, and a pooled connection the far end has dropped (a daemon restarted
//! while a model loads) would cost a failed call.

pub use hyper::http::uri::InvalidUri;
pub use hyper::{Method, Uri};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Largest answer body read.
pub const MAX_ANSWER_BYTES: usize = 4 << 20;

/// Why a call gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OutboundError {
    /// The URL cannot be used.
    #[error("bad URL {url:?}: {why}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// No connection: refused, unreachable, name unknown, or the TLS handshake failed (an
    /// untrusted certificate among them).
    #[error("cannot connect to {target}: {why}")]
    Connect {
        /// `host:port`.
        target: String,
        /// The cause, with its causes.
        why: String,
    },
    /// The deadline passed first.
    #[error("no answer within {0:.1} s")]
    Timeout(f64),
    /// The exchange failed after connecting, or the answer was too large.
    #[error("the exchange with {target} failed: {why}")]
    Exchange {
        /// `host:port`.
        target: String,
        /// The cause.
        why: String,
    },
}

/// Why a client could not be built: the roots it was told to trust do not load.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The CA file cannot be read or is not PEM.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls::pki_types::pem::Error,
    },
    /// The CA file holds no certificate.
    #[error("{}: no PEM certificate in it", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A certificate of the CA file is not one rustls accepts as a root.
    #[error("{}: {source}", path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls::Error,
    },
    /// The TLS provider refused the protocol versions (a build without TLS 1.2 and 1.3).
    #[error("TLS set-up: {0}")]
    Tls(rustls::Error),
}

/// An answer.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// `Retry-After` in seconds, when the answer carries one (429, 503).
    pub retry_after: Option<Duration>,
    /// The body.
    pub body: Vec<u8>,
}

/// Which certificates a TLS peer must chain to.
#[derive(Debug, Clone)]
pub enum Trust {
    /// The system's roots, and those of a PEM file when given.
    System {
        /// Extra roots (PEM), e.g. a TLS-inspecting proxy's CA.
        extra_ca_file: Option<std::path::PathBuf>,
    },
    /// These roots only (tests).
    Only(RootCertStore),
}

/// See the module's documentation. Cheap to clone.
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl HttpClient {
    /// A client trusting `trust`; the error names what could not be read.
    pub fn new(trust: Trust) -> Result<HttpClient, TrustError> {
        let roots = match trust {
            Trust::Only(roots) => roots,
            Trust::System { extra_ca_file } => roots(extra_ca_file.as_deref())?,
        };
        let tls = tls_client_config(roots)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        Ok(HttpClient { client })
    }

    /// Sends `method url` with `headers` and an optional JSON body; reads the whole answer,
    /// all within `deadline`.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        json_body: Option<Vec<u8>>,
        deadline: Duration,
    ) -> Result<Reply, OutboundError> {
        let uri: hyper::Uri = url.parse().map_err(|e| OutboundError::Url {
            url: url.to_string(),
            why: format!("{e}"),
        })?;
        let target = match (uri.host(), uri.port_u16()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            _ => {
                return Err(OutboundError::Url {
                    url: url.to_string(),
                    why: "no host".into(),
                });
            }
        };
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(uri)
            .header(
                "user-agent",
                concat!("watchpost/", env!("CARGO_PKG_VERSION")),
            )
            .header("accept", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if json_body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(json_body.unwrap_or_default())))
            .map_err(|e| OutboundError::Url {
                url: url.to_string(),
                // A header value with a line break, say; the value itself is not echoed.
                why: format!("the request cannot be built: {e}"),
            })?;
        let exchange = async {
            let answer = self.client.request(request).await.map_err(|e| {
                let why = causes(&e);
                if e.is_connect() {
                    OutboundError::Connect {
                        target: target.clone(),
                        why,
                    }
                } else {
                    OutboundError::Exchange {
                        target: target.clone(),
                        why,
                    }
                }
            })?;
            let status = answer.status().as_u16();
            let retry_after = answer
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(retry_after);
            let body = Limited::new(answer.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| OutboundError::Exchange {
                    target: target.clone(),
                    why: if e.is::<http_body_util::LengthLimitError>() {
                        format!("the answer is larger than {MAX_ANSWER_BYTES} bytes")
                    } else {
                        format!("reading the answer: {}", causes(e.as_ref()))
                    },
                })?
                .to_bytes()
                .to_vec();
            Ok(Reply {
                status,
                retry_after,
                body,
            })
        };
        tokio::time::timeout(deadline, exchange)
            .await
            .map_err(|_| OutboundError::Timeout(deadline.as_secs_f64()))?
    }
}

/// A `Retry-After` value: seconds, or an HTTP date (RFC 9110), as the wait from now.
fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// The TLS client settings of every outbound connection (HTTP calls, syslog over TLS): rustls
/// with the `ring` provider, its safe protocol versions, peers checked against `roots`.
pub fn tls_client_config(roots: RootCertStore) -> Result<rustls::ClientConfig, TrustError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TrustError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The system's roots, and those of a PEM file when given.
pub fn roots(extra_ca_file: Option<&Path>) -> Result<RootCertStore, TrustError> {
    let mut roots = RootCertStore::empty();
    // Unreadable system certificates are skipped, as every TLS client does; an empty store
    // fails each TLS connection with an unknown-issuer error that says so.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra_ca_file {
        for cert in read_pem_certificates(path)? {
            roots.add(cert).map_err(|source| TrustError::Certificate {
                path: path.to_path_buf(),
                source,
            })?;
        }
    }
    Ok(roots)
}

/// The certificates of a PEM file.
fn read_pem_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let read = |source| TrustError::Read {
        path: path.to_path_buf(),
        source,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<_, _>>()
        .map_err(read)?;
    if certs.is_empty() {
        return Err(TrustError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// An error and its causes, outermost first: hyper's own message ("client error (Connect)")
/// says little; the TLS cause ("invalid peer certificate: UnknownIssuer") says what to fix.
pub fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

#[cfg(test)]
mod retry_after_tests {
    use super::retry_after;
    use std::time::{Duration, SystemTime};

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        assert_eq!(retry_after(" 120 "), Some(Duration::from_secs(120)));
        let later = SystemTime::now() + Duration::from_secs(90);
        let wait = retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(
            wait > Duration::from_secs(80) && wait <= Duration::from_secs(90),
            "{wait:?}"
        );
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon"), None);
        assert_eq!(retry_after("-5"), None);
    }
}
