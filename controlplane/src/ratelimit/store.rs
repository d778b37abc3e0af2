//! Limits shared by several instances through Redis (`api_rate_limit_store_url`).
//!
//! Each check is one script call, so reading and moving a client's arrival time is atomic across
//! instances. The script takes the time from the store (`TIME`), not from the instance, so
//! instances whose clocks disagree still share one allowance.
//!
//! The client is the `redis` crate, as Redis users run it: `rediss://` with a private CA and a
//! client certificate, ACL users, and Sentinel, which names the master to connect to (and, after
//! a failover, the new one: a check that fails on the old master, gone or now a read-only
//! replica, drops the connection, and the next connection asks the sentinels again). One
//! multiplexed connection carries every check; [`redis::Script`] sends `EVALSHA`, and loads the
//! script again (`SCRIPT LOAD`) when the store has lost it (a restart, `SCRIPT FLUSH`).
//!
//! When the store cannot be reached (or answers too slowly), the API keeps serving: the check
//! falls back to the instance's own limiter, the store is reported degraded by `/health`, and
//! reconnection is tried at most once per [`RETRY_EVERY`], so an outage costs no request more
//! than one timed-out round trip.

use redis::aio::MultiplexedConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, ClientTlsConfig, ConnectionAddr, ConnectionInfo,
    IntoConnectionInfo, RedisConnectionInfo, TlsCertificates, TlsMode,
};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use watchpost_proto::store_url::{HostPort, StoreAddress, StoreUrl};

/// GCRA over microseconds of the store's clock. KEYS[1]: the client's key; ARGV[1]: emission
/// interval; ARGV[2]: burst tolerance (period minus one interval). Returns 0 when allowed, else
/// the microseconds to wait. The key expires when its allowance is full again.
const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local ahead = tat - now
if ahead > burst then return ahead - burst end
local next_tat = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', next_tat), 'PX', string.format('%.0f', math.ceil((next_tat - now) / 1000)))
return 0
";

/// Longest wait for one store round trip (or one connection, sentinels asked included) before
/// the check falls back.
pub const TIMEOUT: Duration = Duration::from_millis(250);

/// How often a lost store is tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(1);

/// Why the store could not be set up from the configuration (a TLS file that cannot be read).
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path:?}: {source}")]
pub struct StoreSetupError {
    /// The configuration key naming the file.
    pub key: &'static str,
    /// The file.
    pub path: String,
    /// Why.
    pub source: std::io::Error,
}

/// Why a round trip to the shared store gave no answer; the check falls back and `/health`
/// shows the text.
#[derive(Debug, thiserror::Error)]
enum CallError {
    /// A recent failure holds new connections back until [`RETRY_EVERY`] has passed.
    #[error("{0}")]
    Waiting(String),
    /// No connection could be opened (or the sentinels named no master).
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// Where.
        address: String,
        /// Why.
        source: redis::RedisError,
    },
    /// Connecting took longer than [`TIMEOUT`].
    #[error("cannot connect to {0} within 250 ms")]
    ConnectTimeout(String),
    /// The connection failed mid-call, or the store answered with an error.
    #[error("{0}")]
    Store(#[from] redis::RedisError),
    /// The call took longer than [`TIMEOUT`].
    #[error("no answer within 250 ms")]
    Timeout,
}

/// How connections are made: to one server, or to the master the sentinels name at the time.
enum Target {
    Server(Client),
    Sentinel(tokio::sync::Mutex<SentinelClient>),
}

/// The shared store and what is known of its health.
pub struct SharedStore {
    target: Target,
    /// Where it is, for `/health` (no credentials).
    display: String,
    script: redis::Script,
    /// The connection every check shares (cloning it is cheap: calls are multiplexed).
    connection: Mutex<Option<MultiplexedConnection>>,
    up: AtomicBool,
    last_error: Mutex<Option<String>>,
    /// No new connection is tried before this (after a failure).
    retry_at: Mutex<Option<Instant>>,
    /// Checks answered by the store.
    pub checks: AtomicU64,
    /// Checks that fell back to the instance's limiter.
    pub fallbacks: AtomicU64,
}

/// What `/health` reports of the store.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "RateLimitStoreState")]
pub struct StoreHealth {
    /// `ok` or `degraded`.
    pub status: &'static str,
    /// Host and port, socket path, or the master and its sentinels; `tls ` first over TLS.
    pub address: String,
    /// Why it is degraded.
    pub last_error: Option<String>,
    /// Checks answered by the store.
    pub checks: u64,
    /// Checks answered by the instance's own limiter while the store was out.
    pub fallbacks: u64,
}

/// The TLS files of the configuration, read: a private CA and a client certificate.
#[derive(Default)]
pub struct StoreTls {
    /// CA certificates (PEM); `None` = the system's roots.
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key (PEM).
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

impl StoreTls {
    /// Reads the files `api_rate_limit_store_{ca,cert,key}_file` name (validated at start).
    pub fn from_config(config: &watchpost_proto::Config) -> Result<StoreTls, StoreSetupError> {
        let read = |key: &'static str, path: &str| -> Result<Option<Vec<u8>>, StoreSetupError> {
            if path.is_empty() {
                return Ok(None);
            }
            std::fs::read(path)
                .map(Some)
                .map_err(|source| StoreSetupError {
                    key,
                    path: path.to_string(),
                    source,
                })
        };
        let ca = read(
            "api_rate_limit_store_ca_file",
            &config.api_rate_limit_store_ca_file,
        )?;
        let cert = read(
            "api_rate_limit_store_cert_file",
            &config.api_rate_limit_store_cert_file,
        )?;
        let key = read(
            "api_rate_limit_store_key_file",
            &config.api_rate_limit_store_key_file,
        )?;
        Ok(StoreTls {
            ca,
            client: cert.zip(key),
        })
    }

    fn certificates(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: self.client.as_ref().map(|(cert, key)| ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
            root_cert: self.ca.clone(),
        }
    }
}

/// The database and credentials the URL gives.
fn redis_settings(url: &StoreUrl) -> RedisConnectionInfo {
    let mut settings = RedisConnectionInfo::default().set_db(i64::from(url.db));
    if let Some(user) = &url.user {
        settings = settings.set_username(user);
    }
    if let Some(password) = &url.password {
        settings = settings.set_password(password);
    }
    settings
}

impl SharedStore {
    /// A store at `url` (nothing is connected yet). Fails only when the crate refuses the
    /// parameters (a certificate it cannot parse).
    pub fn new(url: StoreUrl, tls: &StoreTls) -> Result<SharedStore, redis::RedisError> {
        let display = url.display();
        let target = match &url.address {
            StoreAddress::Tcp(h) => {
                let info = tcp_addr(h, url.tls)
                    .into_connection_info()?
                    .set_redis_settings(redis_settings(&url));
                Target::Server(open_client(info, url.tls, tls)?)
            }
            StoreAddress::Unix(path) => {
                let info = ConnectionAddr::Unix(path.clone())
                    .into_connection_info()?
                    .set_redis_settings(redis_settings(&url));
                Target::Server(Client::open(info)?)
            }
            StoreAddress::Sentinel {
                sentinels,
                master,
                user: sentinel_user,
                password: sentinel_password,
            } => {
                let addrs = sentinels.iter().map(|s| tcp_addr(s, url.tls));
                let mut b = SentinelClientBuilder::new(addrs, master, SentinelServerType::Master)?
                    .set_client_to_redis_db(i64::from(url.db));
                if let Some(user) = &url.user {
                    b = b.set_client_to_redis_username(user);
                }
                if let Some(password) = &url.password {
                    b = b.set_client_to_redis_password(password);
                }
                if let Some(user) = sentinel_user {
                    b = b.set_client_to_sentinel_username(user);
                }
                if let Some(password) = sentinel_password {
                    b = b.set_client_to_sentinel_password(password);
                }
                if url.tls {
                    b = b
                        .set_client_to_redis_tls_mode(TlsMode::Secure)
                        .set_client_to_sentinel_tls_mode(TlsMode::Secure);
                    if tls.ca.is_some() || tls.client.is_some() {
                        b = b
                            .set_client_to_redis_certificates(tls.certificates())
                            .set_client_to_sentinel_certificates(tls.certificates());
                    }
                }
                Target::Sentinel(tokio::sync::Mutex::new(b.build()?))
            }
        };
        Ok(SharedStore {
            target,
            display,
            script: redis::Script::new(SCRIPT),
            connection: Mutex::new(None),
            // Unknown until the first round trip; optimistic so that start-up is not "degraded".
            up: AtomicBool::new(true),
            last_error: Mutex::new(None),
            retry_at: Mutex::new(None),
            checks: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        })
    }

    /// Takes one request of `key` under a limit of `interval` per request with `burst` tolerance:
    /// `Some(Ok(()))`, `Some(Err(seconds to wait))`, or `None` when the store could not answer.
    pub async fn check(
        &self,
        key: &str,
        interval: Duration,
        burst: Duration,
    ) -> Option<Result<(), u64>> {
        let call = async {
            let mut c = self.connection().await?;
            let mut invocation = self.script.key(key);
            invocation
                .arg(interval.as_micros() as u64)
                .arg(burst.as_micros() as u64);
            match tokio::time::timeout(TIMEOUT, invocation.invoke_async::<i64>(&mut c)).await {
                Ok(reply) => Ok(reply?),
                Err(_) => Err(CallError::Timeout),
            }
        };
        match call.await {
            Ok(wait_us) => {
                self.recovered();
                self.checks.fetch_add(1, Ordering::Relaxed);
                if wait_us <= 0 {
                    return Some(Ok(()));
                }
                let wait = Duration::from_micros(wait_us as u64);
                Some(Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0)))
            }
            Err(e) => {
                self.failed(e);
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// A `PING` round trip (for `/health`), which also reconnects a lost store.
    pub async fn ping(&self) -> StoreHealth {
        let call = async {
            let mut c = self.connection().await?;
            let ping = redis::cmd("PING");
            match tokio::time::timeout(TIMEOUT, ping.query_async::<String>(&mut c)).await {
                Ok(reply) => Ok(reply?),
                Err(_) => Err(CallError::Timeout),
            }
        };
        match call.await {
            Ok(_) => self.recovered(),
            Err(e) => self.failed(e),
        }
        self.health()
    }

    /// The last known state, without a round trip.
    pub fn health(&self) -> StoreHealth {
        let up = self.up.load(Ordering::Relaxed);
        StoreHealth {
            status: if up { "ok" } else { "degraded" },
            address: self.display.clone(),
            last_error: if up {
                None
            } else {
                self.last_error.lock().ok().and_then(|e| e.clone())
            },
            checks: self.checks.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
        }
    }

    /// The shared connection, or a new one unless a recent failure asks to wait.
    async fn connection(&self) -> Result<MultiplexedConnection, CallError> {
        if let Some(c) = self.connection.lock().ok().and_then(|c| c.clone()) {
            return Ok(c);
        }
        if let Ok(mut at) = self.retry_at.lock() {
            match *at {
                Some(t) if Instant::now() < t => {
                    return Err(CallError::Waiting(
                        self.last_error
                            .lock()
                            .ok()
                            .and_then(|e| e.clone())
                            .unwrap_or_else(|| "store unavailable".into()),
                    ));
                }
                _ => *at = None,
            }
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        let open = async {
            match &self.target {
                Target::Server(client) => {
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                }
                Target::Sentinel(sentinel) => {
                    sentinel
                        .lock()
                        .await
                        .get_async_connection_with_config(&config)
                        .await
                }
            }
        };
        let c = match tokio::time::timeout(TIMEOUT, open).await {
            Ok(Ok(c)) => c,
            Ok(Err(source)) => {
                return Err(CallError::Connect {
                    address: self.display.clone(),
                    source,
                });
            }
            Err(_) => return Err(CallError::ConnectTimeout(self.display.clone())),
        };
        if let Ok(mut slot) = self.connection.lock() {
            *slot = Some(c.clone());
        }
        Ok(c)
    }

    fn recovered(&self) {
        if !self.up.swap(true, Ordering::Relaxed) {
            tracing::info!("rate-limit store {} is reachable again", self.display);
        }
    }

    fn failed(&self, e: CallError) {
        // Held back by an earlier failure: nothing new is known, and moving the retry time
        // again would keep a busy API from ever trying the store again.
        if matches!(e, CallError::Waiting(_)) {
            return;
        }
        let e = e.to_string();
        if self.up.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                "rate-limit store {} failed ({e}); limits hold per instance until it is back",
                self.display
            );
        }
        if let Ok(mut c) = self.connection.lock() {
            // A broken connection stays broken, and after a failover the master it reached
            // is a read-only replica: the next check connects again (asking the sentinels).
            *c = None;
        }
        if let Ok(mut at) = self.retry_at.lock() {
            *at = Some(Instant::now() + RETRY_EVERY);
        }
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(e);
        }
    }
}

/// A server's (or a sentinel's) address, over TLS (verified: there is no setting to skip it)
/// or not.
fn tcp_addr(h: &HostPort, tls: bool) -> ConnectionAddr {
    if tls {
        ConnectionAddr::TcpTls {
            host: h.host.clone(),
            port: h.port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(h.host.clone(), h.port)
    }
}

/// A client for one server, over TLS with the configured CA and client certificate when given.
fn open_client(info: ConnectionInfo, tls: bool, files: &StoreTls) -> redis::RedisResult<Client> {
    if tls && (files.ca.is_some() || files.client.is_some()) {
        Client::build_with_tls(info, files.certificates())
    } else {
        Client::open(info)
    }
}
