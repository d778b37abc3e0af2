//! E-mail over SMTP with `lettre`: STARTTLS (required, never opportunistic: a server that does
//! not offer it fails the delivery rather than receiving the alert in clear), implicit TLS, or
//! plain SMTP to a loopback relay; AUTH when a user name is set.
//!
//! A message counts as delivered when the server has answered 250 to its DATA: it has taken
//! responsibility for it. The delivery id is the `Message-ID`, so a mailbox that gets a message
//! twice (a retry after a lost answer) can tell.

use super::{ChannelError, DeliveryError};
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::time::Duration;
use watchpost_proto::config::NotificationChannel;

/// An SMTP relay and the envelope.
pub(crate) struct EmailTransport {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    to: Vec<Mailbox>,
}

impl EmailTransport {
    /// The transport of an `email` channel; the error names what is wrong.
    pub(crate) fn new(
        c: &NotificationChannel,
        timeout: Duration,
    ) -> Result<EmailTransport, ChannelError> {
        let tls = if c.smtp_security == "none" {
            Tls::None
        } else {
            let mut params = TlsParameters::builder(c.smtp_host.clone());
            if !c.tls_ca_file.is_empty() {
                let pem = std::fs::read(&c.tls_ca_file).map_err(|source| ChannelError::CaFile {
                    path: c.tls_ca_file.clone(),
                    source,
                })?;
                let cert = Certificate::from_pem(&pem).map_err(|source| ChannelError::SmtpTls {
                    context: format!("tls_ca_file {}", c.tls_ca_file),
                    source,
                })?;
                params = params.add_root_certificate(cert);
            }
            let params = params
                .build_rustls()
                .map_err(|source| ChannelError::SmtpTls {
                    context: "TLS set-up".to_string(),
                    source,
                })?;
            if c.smtp_security == "tls" {
                Tls::Wrapper(params)
            } else {
                Tls::Required(params)
            }
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&c.smtp_host)
            .port(c.smtp_port())
            .tls(tls)
            .timeout(Some(timeout));
        if !c.smtp_username.is_empty() {
            builder = builder.credentials(Credentials::new(
                c.smtp_username.clone(),
                c.smtp_password.expose().to_string(),
            ));
        }
        let from: Mailbox = c.email_from.parse().map_err(ChannelError::From)?;
        let to = c
            .email_to
            .iter()
            .map(|t| {
                t.parse().map_err(|source| ChannelError::To {
                    value: t.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<Mailbox>, ChannelError>>()?;
        Ok(EmailTransport {
            transport: builder.build(),
            from,
            to,
        })
    }

    /// Sends one message within `deadline`.
    pub(crate) async fn send(
        &self,
        subject: &str,
        body: String,
        delivery: &str,
        deadline: Duration,
    ) -> Result<(), DeliveryError> {
        let mut message = Message::builder()
            .from(self.from.clone())
            .subject(subject)
            .message_id(Some(format!("<{delivery}@watchpost>")))
            .header(ContentType::TEXT_PLAIN);
        for to in &self.to {
            message = message.to(to.clone());
        }
        let message = message
            .body(body)
            .map_err(|e| DeliveryError::Refused(format!("the message cannot be built: {e}")))?;
        let sent = tokio::time::timeout(deadline, self.transport.send(message))
            .await
            .map_err(|_| DeliveryError::Timeout(deadline.as_secs_f64()))?;
        sent.map(|_| ()).map_err(|e| {
            let why = super::causes(&e);
            if e.is_permanent() {
                DeliveryError::Refused(format!("the SMTP server refused it: {why}"))
            } else {
                DeliveryError::Exchange(format!("SMTP: {why}"))
            }
        })
    }
}
