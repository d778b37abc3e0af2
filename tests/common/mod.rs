//! Helpers shared by the integration tests: a free port, a minimal HTTP client, and the
//! `watchpost` service started as a child process.
#![allow(dead_code)]

pub mod nats;
pub mod provider;
pub mod receiver;
pub mod tls;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `watchpost` binary under test: the one cargo built, or `WATCHPOST_TEST_BIN` (the long
/// runs of `scripts/soak` and `scripts/crash-test` run a copy, so that a rebuild meanwhile does
/// not swap the binary between two of their restarts).
pub fn bin() -> Command {
    match std::env::var_os("WATCHPOST_TEST_BIN") {
        Some(path) => Command::new(path),
        None => Command::new(env!("CARGO_BIN_EXE_watchpost")),
    }
}

/// A port nothing listens on now, and not handed out before in this test binary. The kernel may
/// give a port it just gave to a test running alongside, whose service has not bound it yet: both
/// services then want it, one fails to start, and the other answers the first's requests.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A minimal HTTP/1.1 client: status and body.
pub fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let (status, head, body) = http_with_head(port, method, path, body);
    let _ = head;
    (status, body)
}

/// [`http`] with the response head (status line and headers) too.
pub fn http_with_head(port: u16, method: &str, path: &str, body: &str) -> (u16, String, String) {
    request(port, method, path, &[], body)
}

/// A request with extra headers; status, response head and body. The `Host` is
/// `127.0.0.1:<port>`, as curl sends it, unless `headers` name another.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    request_within(port, method, path, headers, body, Duration::from_secs(10))
}

/// [`http`] for answers that take long (a model generating on the test machine's CPU).
pub fn http_slow(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let (status, _, body) = request_within(port, method, path, &[], body, Duration::from_secs(300));
    (status, body)
}

/// [`request`] with a read timeout of `wait`.
fn request_within(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    wait: Duration,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    let mut extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        extra.insert_str(0, &format!("Host: 127.0.0.1:{port}\r\n"));
    }
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (status, head.to_string(), body.to_string())
}

/// The present time moved by `offset_s` seconds, as the RFC 3339 stamp of a log line (rsyslog's
/// form in the RFC 3164 position). Tests stamp their lines with the present: what is counted back
/// from now (fires in the last 24 hours, a dry run over recent events, retention) then sees them on
/// whatever day the suite runs, where a fixed date ages out of it. Keep `offset_s` at or below 0:
/// a line stamped ahead of the clock lies outside windows that end now (a dry run's).
pub fn stamp(offset_s: i64) -> String {
    let at = watchpost_proto::now_ns() + offset_s * 1_000_000_000;
    watchpost_normalize::Rfc3339(at).to_string()
}

/// Three SSH attempts for users that do not exist, from one address, stamped over the last
/// seconds: they fire the bundled Sigma rule `sshd_invalid_user.yml` (one alert, three fires).
pub fn invalid_user_lines() -> String {
    (0..3)
        .map(|i| {
            let t = stamp(i - 3);
            format!(
                "<38>{t} web-01 sshd[21{i}]: Invalid user oracle{i} from 203.0.113.9 port 4000{i}\n"
            )
        })
        .collect()
}

/// Parses a body, failing the test with the body when it is not JSON.
pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// Polls `path` until `done` holds (or 30 s pass) and returns the last body.
pub fn wait_for(
    api: u16,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let (status, body) = http(api, "GET", path, "");
        if status == 200 {
            let v = json(&body);
            if done(&v) {
                return v;
            }
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{path}: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of response header `name` (case-insensitive) in `head`.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A real `redis-server` on a free loopback port, without persistence, killed when dropped.
pub struct Redis {
    child: Child,
    /// Its port.
    pub port: u16,
    _dir: tempfile::TempDir,
}

/// How a [`Redis`] listens.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RedisKind {
    /// Plain TCP.
    Plain,
    /// TLS only (`tls-port`; the configuration lines give the certificates).
    Tls,
    /// A Sentinel (`--sentinel`; the lines give what it monitors).
    Sentinel,
}

impl Redis {
    /// Starts one and waits until it answers. `scripts/setup` installs `redis-server`.
    pub fn start() -> Redis {
        Redis::start_on(free_port())
    }

    /// Starts one on `port` (to bring a stopped store back at the same address).
    pub fn start_on(port: u16) -> Redis {
        Redis::start_configured(port, "", RedisKind::Plain)
    }

    /// Starts one on `port` with `lines` added to its configuration file (TLS files, ACL users,
    /// `requirepass`, `replicaof`, or a Sentinel's `sentinel monitor ...`), and waits until it
    /// listens.
    pub fn start_configured(port: u16, lines: &str, kind: RedisKind) -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let listen = match kind {
            RedisKind::Tls => format!("port 0\ntls-port {port}\n"),
            RedisKind::Plain | RedisKind::Sentinel => format!("port {port}\n"),
        };
        let persistence = match kind {
            RedisKind::Sentinel => "",
            RedisKind::Plain | RedisKind::Tls => "save \"\"\nappendonly no\n",
        };
        // A Sentinel rewrites its file (what it learns of the replicas), so it lives in `dir`.
        let config = dir.path().join("redis.conf");
        std::fs::write(
            &config,
            format!(
                "{listen}bind 127.0.0.1\ndir {}\n{persistence}{lines}\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let mut command = Command::new("redis-server");
        command.arg(&config);
        if kind == RedisKind::Sentinel {
            command.arg("--sentinel");
        }
        let child = command
            // scripts/test runs the suite a second time under libfaketime, whose preload
            // redis-server's allocator cannot start with; the store keeps the real clock.
            .env_remove("LD_PRELOAD")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("redis-server is needed (scripts/setup installs it): {e}"));
        let t = Instant::now();
        loop {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                // Over TLS, listening is all that can be seen without a handshake; in plain
                // text any answer to PING will do (`-NOAUTH` from a server with a password).
                let mut pong = [0u8; 7];
                if kind == RedisKind::Tls
                    || (s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut pong).is_ok())
                {
                    break;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis {
            child,
            port,
            _dir: dir,
        }
    }

    /// Runs `redis-cli` against it in plain text with `args` (authentication first, when
    /// needed) and gives its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "--no-auth-warning"])
            .args(args)
            .env_remove("LD_PRELOAD")
            .output()
            .expect("redis-cli (scripts/setup installs redis-server with it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Posts `body` to `POST /api/v1/ingest` and tells whether the service answered 202 (anything
/// else, a reset connection included, is no acknowledgement).
pub fn ingest_acknowledged(api: u16, body: &str) -> bool {
    let attempt = || -> std::io::Result<bool> {
        let mut s = TcpStream::connect(("127.0.0.1", api))?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        write!(
            s,
            "POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out.starts_with("HTTP/1.1 202"))
    };
    attempt().unwrap_or(false)
}

/// Waits until the service has stored everything it took in: the spool replayed and the
/// pipeline idle (the stored count unchanged for a second).
pub fn settle(api: u16) {
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(1000));
        let stored = json(&http(api, "GET", "/api/v1/stats", "").1)["stored_total"]
            .as_u64()
            .unwrap();
        if stored == last {
            return;
        }
        last = stored;
    }
}

/// Writes `lines` to a TCP input on `port` in one connection.
pub fn send_lines(port: u16, lines: &str) {
    TcpStream::connect(("127.0.0.1", port))
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
}

/// The key that makes low Sigma rules alert directly, as the suites' alert source needs.
pub const LOW_ALERTS: &str = "detection.sigma_alert_min_level = \"low\"";

/// Writes `DIR/watchpost.toml` for a service with its API on `api`, no probe listener, unlimited
/// list and detail rates, unpinned workers, and syslog over TCP on `syslog_tcp` as the only input
/// (none when `None`); `extra` top-level keys go first. Low Sigma rules alert (the suites use the
/// bundled low rule `sshd_invalid_user` as their alert source; by default its matches are
/// signals, which `tests/risk.rs` covers). Returns the file's path.
pub fn syslog_config(dir: &Path, api: u16, syslog_tcp: Option<u16>, extra: &str) -> PathBuf {
    let syslog = match syslog_tcp {
        Some(port) => format!("address = \"127.0.0.1:{port}\""),
        None => "enabled = false".into(),
    };
    let path = dir.join("watchpost.toml");
    std::fs::write(
        &path,
        format!(
            "{extra}\n{LOW_ALERTS}\ndashboard_port = {api}\nhealth_port = 0\napi_list_rate_limit = \"100000/minute\"\napi_detail_rate_limit = \"100000/minute\"\n[inputs.syslog_udp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[inputs.syslog_tcp]\n{syslog}\n[dataplane]\npin_workers = false\n"
        ),
    )
    .unwrap();
    path
}

/// Adds the RELP input on `port` to the configuration file at `config`.
pub fn enable_relp(config: &Path, port: u16) {
    let text = std::fs::read_to_string(config).unwrap();
    std::fs::write(
        config,
        format!("{text}[inputs.relp]\nenabled = true\naddress = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
}

/// Whether the API on `api` answers an HTTP request (any status).
fn answers(api: u16) -> bool {
    let attempt = || -> std::io::Result<bool> {
        let mut s = TcpStream::connect(("127.0.0.1", api))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        write!(
            s,
            "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\nConnection: close\r\n\r\n"
        )?;
        let mut head = [0u8; 9];
        s.read_exact(&mut head)?;
        Ok(&head == b"HTTP/1.1 ")
    };
    attempt().unwrap_or(false)
}

/// The service, killed when dropped.
pub struct Service(Child);

impl Service {
    /// Starts `watchpost run --config CONFIG` in DIR and waits for the API port.
    pub fn start(dir: &Path, config: &Path, api: u16) -> Service {
        Service::start_logging_to(dir, config, api, Stdio::null())
    }

    /// [`Service::start`], its log (standard output) going to `log`.
    pub fn start_logging_to(dir: &Path, config: &Path, api: u16, log: impl Into<Stdio>) -> Service {
        let child = bin()
            .args(["run", "--config"])
            .arg(config)
            .current_dir(dir)
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = child;
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", api)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the service exited at start ({status}); is port {api} taken?");
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "service did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The API port is bound before the pipeline starts (its inputs bind then): the service is
        // up once the API answers, whatever it answers.
        while !answers(api) {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the service exited at start ({status})");
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the service did not answer"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Service(child)
    }

    /// Stops it with SIGTERM, as an operator would.
    pub fn stop(mut self) -> std::process::ExitStatus {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        self.0.wait().unwrap()
    }
}

impl Service {
    /// Its process id, to signal it.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Waits for it to exit by itself.
    pub fn wait(mut self) -> std::process::ExitStatus {
        self.0.wait().unwrap()
    }

    /// Kills it with SIGKILL, as a crash or the OOM killer would, and reaps it.
    pub fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        // Reap it: the kernel releases the store's lock only once the process is gone, and a
        // test that starts the service again on the same directory must not race that.
        let _ = self.0.wait();
    }
}

/// A RELP sender as rsyslog's `omrelp` is one: opens a session, sends messages with up to
/// `window` unanswered, and returns the indexes of the messages answered `200 OK` before the
/// session ended (all of them, or up to where the service went away).
pub fn relp_send(port: u16, messages: &[String], window: usize) -> Vec<usize> {
    use std::io::BufRead;
    let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return Vec::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone().unwrap();
    let mut reader = std::io::BufReader::new(stream);
    let offers = "relp_version=0\nrelp_software=watchpost-test\ncommands=syslog";
    if writeln!(writer, "1 open {} {offers}", offers.len()).is_err() {
        return Vec::new();
    }
    // Reads one answer: its transaction number and whether it says 200.
    let read_answer = |reader: &mut std::io::BufReader<TcpStream>| -> Option<(usize, bool)> {
        let mut head = Vec::new();
        for _ in 0..3 {
            let mut field = Vec::new();
            reader.read_until(b' ', &mut field).ok()?;
            if field.is_empty() {
                return None;
            }
            head.push(String::from_utf8_lossy(&field).trim().to_string());
            if head.len() == 3 || field.last() != Some(&b' ') {
                break;
            }
        }
        let txnr: usize = head.first()?.parse().ok()?;
        let len: usize = head.get(2)?.trim_end_matches('\n').parse().ok()?;
        let mut data = vec![0u8; len + 1];
        if len == 0 {
            data.truncate(0);
        }
        reader.read_exact(&mut data).ok()?;
        Some((txnr, data.starts_with(b"200")))
    };
    if !matches!(read_answer(&mut reader), Some((1, true))) {
        return Vec::new();
    }
    let mut acked = Vec::new();
    let mut sent = 0usize;
    let mut answered = 0usize;
    while answered < messages.len() {
        while sent < messages.len() && sent - answered < window {
            let m = &messages[sent];
            if writeln!(writer, "{} syslog {} {m}", sent + 2, m.len()).is_err() {
                return acked;
            }
            sent += 1;
        }
        match read_answer(&mut reader) {
            Some((txnr, ok)) if txnr >= 2 && txnr - 2 < messages.len() => {
                if ok {
                    acked.push(txnr - 2);
                }
                answered += 1;
            }
            // The server closed the session (`0 serverclose`), or went away.
            _ => return acked,
        }
    }
    let _ = writeln!(writer, "{} close 0", messages.len() + 2);
    acked
}

/// Node, playwright-core (`npm ci --prefix ui`) and Chromium, when all are here: the `ui/`
/// folder and Chromium's path.
pub fn browser_tools() -> Option<(PathBuf, PathBuf)> {
    let ui = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("ui");
    let chromium = PathBuf::from(std::env::var("CHROMIUM").unwrap_or("/usr/bin/chromium".into()));
    let node_ok = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let ready = node_ok && chromium.exists() && ui.join("node_modules/playwright-core").is_dir();
    ready.then_some((ui, chromium))
}

/// `rsyslogd` in the foreground with its own configuration file, killed when dropped.
pub struct Rsyslog(Child);

impl Drop for Rsyslog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Rsyslog {
    /// Starts rsyslog with `conf` (its pid file in `dir`) and waits until each of `tcp_ports`
    /// takes connections; `packages` names what `scripts/setup` installs for it.
    pub fn start(dir: &Path, conf: &Path, tcp_ports: &[u16], packages: &str) -> Rsyslog {
        // Debian installs it in /usr/sbin, which a user's PATH may not hold.
        let program = ["/usr/sbin/rsyslogd", "/sbin/rsyslogd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("rsyslogd");
        let child = Command::new(program)
            .arg("-n")
            .arg("-f")
            .arg(conf)
            .arg("-i")
            .arg(dir.join("rsyslog.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("rsyslogd runs (scripts/setup installs {packages}): {e}"));
        let rsyslog = Rsyslog(child);
        let t = Instant::now();
        for &port in tcp_ports {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "rsyslogd did not listen on {port}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        rsyslog
    }
}
