//! An incoming-webhook receiver on loopback over HTTPS (Slack's, Teams' and most webhook
//! endpoints are HTTPS), with a certificate from a CA made for the test: it records every
//! request with the time it arrived and answers with the status it is set to, so that tests can
//! take a receiver down (503) and bring it back.

use super::provider::{Received, read_request};
use super::tls::TestCa;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// See the module's documentation.
pub struct Receiver {
    /// Its HTTPS port.
    pub port: u16,
    /// Its CA's certificate (PEM), for a channel's `tls_ca_file`.
    pub ca_file: PathBuf,
    received: Arc<Mutex<Vec<(Instant, Received)>>>,
    status: Arc<AtomicU16>,
}

impl Receiver {
    /// Starts one answering 200, its CA written into `dir`.
    pub fn start(dir: &Path) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let ca = TestCa::new(dir, &format!("receiver-{port}"));
        let received = Arc::new(Mutex::new(Vec::new()));
        let status = Arc::new(AtomicU16::new(200));
        let (tls, r, s) = (ca.server, received.clone(), status.clone());
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (tls, r, s) = (tls.clone(), r.clone(), s.clone());
                std::thread::spawn(move || {
                    let Ok(conn) = rustls::ServerConnection::new(tls) else {
                        return;
                    };
                    let mut stream = rustls::StreamOwned::new(conn, tcp);
                    let Some(request) = read_request(&mut stream) else {
                        return;
                    };
                    let status = s.load(Ordering::Relaxed);
                    if status == 200 {
                        r.lock().unwrap().push((Instant::now(), request));
                    }
                    let body = if status == 200 { "ok" } else { "receiver down" };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {status} X\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.flush();
                    stream.conn.send_close_notify();
                    let _ = stream.flush();
                });
            }
        });
        Receiver {
            port,
            ca_file: ca.ca_file,
            received,
            status,
        }
    }

    /// The URL of `path` on it.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// Answers every request with `status` from now on (only 200s are recorded).
    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::Relaxed);
    }

    /// The requests it took (answered 200), in arrival order, with their arrival times.
    pub fn taken(&self) -> Vec<(Instant, Received)> {
        self.received.lock().unwrap().clone()
    }

    /// The requests it took on `path`.
    pub fn on(&self, path: &str) -> Vec<Received> {
        self.taken()
            .into_iter()
            .filter(|(_, r)| r.path == path)
            .map(|(_, r)| r)
            .collect()
    }

    /// Waits up to `within` for `n` requests on `path`; returns them.
    pub fn wait_for(&self, path: &str, n: usize, within: Duration) -> Vec<Received> {
        let t = Instant::now();
        loop {
            let got = self.on(path);
            if got.len() >= n || t.elapsed() > within {
                return got;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
