//! How a channel's messages travel: HTTP(S) for webhooks, Slack and Teams, SMTP for e-mail,
//! syslog for a SIEM. One attempt per call; the channel's task decides about retries.

use super::email::EmailTransport;
use super::message::{self, Payload};
use super::syslog::SyslogTransport;
use super::{ChannelError, DeliveryError};
use std::time::Duration;
use watchpost_outbound::Method;
use watchpost_outbound::{HttpClient, OutboundError, Trust};
use watchpost_proto::config::NotificationChannel;

/// Bytes of a receiver's error answer kept in the last error.
const ERROR_BODY_BYTES: usize = 200;

/// See the module's documentation.
pub(crate) enum Transport {
    Http {
        client: HttpClient,
        format: HttpFormat,
    },
    Syslog(SyslogTransport),
    Email(EmailTransport),
}

#[derive(Clone, Copy)]
pub(crate) enum HttpFormat {
    Webhook,
    Slack,
    Teams,
}

impl Transport {
    /// The transport of a validated channel; the error says what cannot be set up (a CA file
    /// that cannot be read, an address that does not parse).
    pub(crate) fn new(config: &NotificationChannel) -> Result<Transport, ChannelError> {
        let ca =
            (!config.tls_ca_file.is_empty()).then(|| std::path::PathBuf::from(&config.tls_ca_file));
        let http = |format| -> Result<Transport, ChannelError> {
            Ok(Transport::Http {
                client: HttpClient::new(Trust::System {
                    extra_ca_file: ca.clone(),
                })?,
                format,
            })
        };
        Ok(match config.kind.as_str() {
            "webhook" => http(HttpFormat::Webhook)?,
            "slack" => http(HttpFormat::Slack)?,
            "teams" => http(HttpFormat::Teams)?,
            "email" => Transport::Email(EmailTransport::new(
                config,
                Duration::from_secs_f64(config.timeout_s),
            )?),
            "syslog" => Transport::Syslog(SyslogTransport::new(
                &config.syslog_address,
                &config.syslog_transport,
                ca.as_deref(),
            )?),
            other => return Err(ChannelError::UnknownKind(other.to_string())),
        })
    }

    /// One delivery attempt of `payload`, within the channel's `timeout_s`.
    pub(crate) async fn deliver(
        &self,
        config: &NotificationChannel,
        payload: Payload<'_>,
    ) -> Result<(), DeliveryError> {
        let name = &config.name;
        let delivery = message::delivery_id(name, payload);
        let deadline = Duration::from_secs_f64(config.timeout_s);
        match self {
            Transport::Http { client, format } => {
                let body = match format {
                    HttpFormat::Webhook => message::webhook(name, &delivery, payload),
                    HttpFormat::Slack => message::slack(&delivery, payload),
                    HttpFormat::Teams => message::teams(&delivery, payload),
                };
                let mut headers: Vec<(&str, String)> = vec![
                    ("idempotency-key", delivery.clone()),
                    ("x-watchpost-delivery", delivery.clone()),
                ];
                if !config.secret.is_empty() {
                    let ts = (watchpost_proto::now_ns() / 1_000_000_000).to_string();
                    headers.push((
                        "x-watchpost-signature",
                        sign(config.secret.expose(), &ts, &body),
                    ));
                    headers.push(("x-watchpost-timestamp", ts));
                }
                let refs: Vec<(&str, &str)> =
                    headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let reply = client
                    .send(
                        Method::POST,
                        config.url.expose(),
                        &refs,
                        Some(body),
                        deadline,
                    )
                    .await
                    .map_err(outbound)?;
                if (200..300).contains(&reply.status) {
                    return Ok(());
                }
                let text = String::from_utf8_lossy(&reply.body);
                let mut end = text.len().min(ERROR_BODY_BYTES);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                Err(DeliveryError::Status {
                    status: reply.status,
                    body: text[..end].trim().to_string(),
                    retry_after: reply.retry_after,
                })
            }
            Transport::Syslog(t) => {
                let (severity, msg_id) = match payload {
                    Payload::Alert(a) => (a.severity, "alert"),
                    Payload::Digest(alerts) => (
                        alerts.iter().map(|a| a.severity).max().unwrap_or(0),
                        "digest",
                    ),
                    Payload::Test => (1, "test"),
                };
                let text = if config.syslog_format == "json" {
                    message::syslog_json(name, &delivery, payload)
                } else {
                    message::cef(&delivery, payload)
                };
                t.send(&text, severity, msg_id, deadline).await
            }
            Transport::Email(t) => {
                let (subject, body) = message::email(&delivery, payload);
                t.send(&subject, body, &delivery, deadline).await
            }
        }
    }
}

/// `sha256=<hex>` of the HMAC-SHA256 of `<timestamp>.<body>` under `secret`: the receiver
/// recomputes it, and the timestamp in the signed text stops a captured message being replayed
/// later.
fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(timestamp.as_bytes());
    ctx.update(b".");
    ctx.update(body);
    format!("sha256={}", watchpost_proto::to_hex(ctx.sign().as_ref()))
}

/// An outbound error as a delivery error, without the URL (a credential).
fn outbound(e: OutboundError) -> DeliveryError {
    match e {
        OutboundError::Url { why, .. } => {
            DeliveryError::Refused(format!("the URL cannot be used: {why}"))
        }
        OutboundError::Connect { target, why } => {
            DeliveryError::Connect(format!("{target}: {why}"))
        }
        OutboundError::Timeout(s) => DeliveryError::Timeout(s),
        OutboundError::Exchange { target, why } => {
            DeliveryError::Exchange(format!("{target}: {why}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_of_the_timestamp_and_body() {
        // What a receiver computes: one HMAC over `<timestamp>.<body>`.
        let joined = b"1700000000.{\"a\":1}";
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"s3cret");
        let want = watchpost_proto::to_hex(ring::hmac::sign(&key, joined).as_ref());
        assert_eq!(
            sign("s3cret", "1700000000", b"{\"a\":1}"),
            format!("sha256={want}")
        );
    }
}
