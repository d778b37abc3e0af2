//! A hosted LLM provider on loopback, over HTTPS with a certificate from a CA made for the test
//! (written to a PEM file the service can be told to trust), speaking the OpenAI-style chat
//! completions or the Anthropic-style messages protocol: their paths, headers, request and
//! answer JSON and error bodies. It records every request as it arrived, after TLS, so that
//! tests can assert on the bytes that left the service.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Which protocol the provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `POST /v1/chat/completions`, `Authorization: Bearer`.
    OpenAi,
    /// `POST /v1/messages`, `x-api-key`, `anthropic-version`.
    Anthropic,
}

/// A request as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// `GET`, `POST`.
    pub method: String,
    /// The path.
    pub path: String,
    /// Headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body's bytes.
    pub body: Vec<u8>,
}

impl Received {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A scripted answer to the next chat request.
#[derive(Clone, Debug)]
pub struct Scripted {
    /// HTTP status.
    pub status: u16,
    /// Extra headers (`Retry-After`).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Scripted {
    /// An error in the provider's shape.
    pub fn error(status: u16, kind: &str, message: &str) -> Scripted {
        Scripted {
            status,
            headers: Vec::new(),
            body: serde_json::json!({"type": "error", "error": {"type": kind, "message": message}})
                .to_string(),
        }
    }

    /// A successful answer in `kind`'s shape whose text is `text`.
    pub fn reply(kind: Kind, text: &str) -> Scripted {
        success_with(kind, text)
    }

    /// With `Retry-After: seconds`.
    pub fn retry_after(mut self, seconds: u32) -> Scripted {
        self.headers
            .push(("Retry-After".into(), seconds.to_string()));
        self
    }
}

/// See the module's documentation.
pub struct Provider {
    /// The HTTPS port.
    pub port: u16,
    /// The CA's certificate (PEM), for `llm.tls_ca_file`.
    pub ca_file: PathBuf,
    received: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<VecDeque<Scripted>>>,
}

impl Provider {
    /// Starts one speaking `kind`, its CA written into `dir`.
    pub fn start(dir: &Path, kind: Kind) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let ca = super::tls::TestCa::new(dir, &format!("provider-{port}"));
        let (tls, ca_file) = (ca.server, ca.ca_file);
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let (r, s) = (received.clone(), script.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (tls, r, s) = (tls.clone(), r.clone(), s.clone());
                std::thread::spawn(move || serve(conn, tls, kind, &r, &s));
            }
        });
        Provider {
            port,
            ca_file,
            received,
            script,
        }
    }

    /// The API base URL, for `llm.cloud_url`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/v1", self.port)
    }

    /// Queues answers to the next chat requests (after them: a success).
    pub fn script(&self, answers: Vec<Scripted>) {
        let mut q = self.script.lock().unwrap();
        q.clear();
        q.extend(answers);
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The chat requests received so far.
    pub fn chats(&self) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.method == "POST")
            .collect()
    }
}

fn serve(
    tcp: TcpStream,
    tls: Arc<rustls::ServerConfig>,
    kind: Kind,
    received: &Mutex<Vec<Received>>,
    script: &Mutex<VecDeque<Scripted>>,
) {
    let Ok(conn) = rustls::ServerConnection::new(tls) else {
        return;
    };
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    // A client that refuses the certificate ends here, with nothing received.
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    received.lock().unwrap().push(request.clone());
    // A key the provider has revoked: refused with the key quoted, as real providers do.
    let offered = request
        .header("authorization")
        .map(|v| v.trim_start_matches("Bearer ").to_string())
        .or_else(|| request.header("x-api-key").map(str::to_string))
        .unwrap_or_default();
    let key_ok = !offered.contains("revoked")
        && match kind {
            Kind::OpenAi => request
                .header("authorization")
                .is_some_and(|v| v.starts_with("Bearer sk-")),
            Kind::Anthropic => {
                request
                    .header("x-api-key")
                    .is_some_and(|v| v.starts_with("sk-"))
                    && request.header("anthropic-version") == Some("2023-06-01")
            }
        };
    let answer = if !key_ok {
        Scripted::error(
            401,
            "authentication_error",
            &format!("Incorrect API key provided: {offered}"),
        )
    } else {
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/v1/models") => Scripted {
                status: 200,
                headers: Vec::new(),
                body: r#"{"data":[{"id":"model-test","object":"model"}]}"#.into(),
            },
            ("POST", "/v1/chat/completions") if kind == Kind::OpenAi => script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| success(kind, &request)),
            ("POST", "/v1/messages") if kind == Kind::Anthropic => script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| success(kind, &request)),
            _ => Scripted::error(404, "not_found_error", "no such route"),
        }
    };
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.body.len()
    );
    for (k, v) in &answer.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(answer.body.as_bytes());
    let _ = stream.flush();
    stream.conn.send_close_notify();
    let _ = stream.flush();
}

/// A success whose text names the first pseudonym of the prompt (`user-…`), as a model that
/// follows the actor would, so that mapping it back shows.
fn success(kind: Kind, request: &Received) -> Scripted {
    let prompt = String::from_utf8_lossy(&request.body);
    let actor = prompt
        .find("user-")
        .map(|at| prompt[at..at + 15.min(prompt.len() - at)].to_string())
        .unwrap_or_else(|| "the actor".into());
    let text = format!("## Summary\nSSH user names are being guessed; {actor} was tried.\n");
    success_with(kind, &text)
}

/// A successful answer in `kind`'s shape with `text`.
fn success_with(kind: Kind, text: &str) -> Scripted {
    let body = match kind {
        Kind::OpenAi => serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "model-test",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
        }),
        Kind::Anthropic => serde_json::json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "model-test",
            "stop_reason": "end_turn",
            "content": [{"type": "text", "text": text}],
        }),
    };
    Scripted {
        status: 200,
        headers: Vec::new(),
        body: body.to_string(),
    }
}

/// One HTTP/1.1 request: head and `Content-Length` body.
pub fn read_request(stream: &mut impl Read) -> Option<Received> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split_whitespace();
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = raw[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}
