//! Limits shared by several instances through Redis (`api_rate_limit_store_url`).
//!
//! Each check is one script call, so reading and moving a client's arrival time is atomic across
//! instances. The script takes the time from the store (`TIME`), not from the instance, so
//! instances whose clocks disagree still share one allowance.
//!
//! When the store cannot be reached (or answers too slowly), the API keeps serving: the check
//! falls back to the instance's own limiter, the store is reported degraded by `/health`, and
//! reconnection is tried at most once per [`RETRY_EVERY`], so an outage costs no request more
//! than one timed-out round trip.

use super::resp::{Connection, Reply, ok_or_error};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use watchpost_proto::store_url::StoreUrl;

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

/// Longest wait for one store round trip before the check falls back.
pub const TIMEOUT: Duration = Duration::from_millis(250);

/// How often a lost store is tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(1);

/// Idle connections kept for reuse.
const POOL: usize = 8;

/// Why a round trip to the shared store gave no answer; the check falls back and `/health`
/// shows the text.
#[derive(Debug, thiserror::Error)]
enum CallError {
    /// A recent failure holds new connections back until [`RETRY_EVERY`] has passed.
    #[error("{0}")]
    Waiting(String),
    /// No connection could be opened.
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// Where.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// Connecting took longer than [`TIMEOUT`].
    #[error("cannot connect to {0} within 250 ms")]
    ConnectTimeout(String),
    /// The connection failed mid-call, or the store answered with an error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The call took longer than [`TIMEOUT`].
    #[error("no answer within 250 ms")]
    Timeout,
}

/// The shared store and what is known of its health.
pub struct SharedStore {
    url: StoreUrl,
    /// Where it is, for `/health` (no credentials).
    display: String,
    pool: Mutex<Vec<(Connection, String)>>,
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
    /// Host and port or socket path.
    pub address: String,
    /// Why it is degraded.
    pub last_error: Option<String>,
    /// Checks answered by the store.
    pub checks: u64,
    /// Checks answered by the instance's own limiter while the store was out.
    pub fallbacks: u64,
}

impl SharedStore {
    /// A store at `url` (nothing is connected yet).
    pub fn new(url: StoreUrl) -> SharedStore {
        let display = match &url.address {
            watchpost_proto::store_url::StoreAddress::Tcp(a) => a.clone(),
            watchpost_proto::store_url::StoreAddress::Unix(p) => p.display().to_string(),
        };
        SharedStore {
            url,
            display,
            pool: Mutex::new(Vec::new()),
            // Unknown until the first round trip; optimistic so that start-up is not "degraded".
            up: AtomicBool::new(true),
            last_error: Mutex::new(None),
            retry_at: Mutex::new(None),
            checks: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        }
    }

    /// Takes one request of `key` under a limit of `interval` per request with `burst` tolerance:
    /// `Some(Ok(()))`, `Some(Err(seconds to wait))`, or `None` when the store could not answer.
    pub async fn check(
        &self,
        key: &str,
        interval: Duration,
        burst: Duration,
    ) -> Option<Result<(), u64>> {
        let interval = interval.as_micros().to_string();
        let burst = burst.as_micros().to_string();
        let args: [&[u8]; 4] = [b"1", key.as_bytes(), interval.as_bytes(), burst.as_bytes()];
        match self.eval(&args).await {
            Ok(Reply::Int(0)) => {
                self.checks.fetch_add(1, Ordering::Relaxed);
                Some(Ok(()))
            }
            Ok(Reply::Int(wait_us)) => {
                self.checks.fetch_add(1, Ordering::Relaxed);
                let wait = Duration::from_micros(wait_us.max(0) as u64);
                Some(Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0)))
            }
            Ok(other) => {
                self.failed(format!("unexpected reply {other:?}"));
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                None
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
        match self.connection().await {
            Ok((mut c, sha)) => match tokio::time::timeout(TIMEOUT, c.call(&[b"PING"])).await {
                Ok(Ok(Reply::Simple(_))) => {
                    self.put_back(c, sha);
                    self.recovered();
                }
                Ok(Ok(r)) => {
                    self.failed(format!("PING answered {r:?}"));
                }
                Ok(Err(e)) => {
                    self.failed(e);
                }
                Err(_) => {
                    self.failed("no answer within 250 ms");
                }
            },
            Err(e) => {
                self.failed(e);
            }
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

    async fn eval(&self, args: &[&[u8]]) -> Result<Reply, CallError> {
        let (mut c, sha) = self.connection().await?;
        let mut call: Vec<&[u8]> = Vec::with_capacity(args.len() + 2);
        call.push(b"EVALSHA");
        call.push(sha.as_bytes());
        call.extend_from_slice(args);
        let reply = match tokio::time::timeout(TIMEOUT, c.call(&call)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(CallError::Timeout),
        };
        let reply = match reply {
            // The store lost its script cache (restart, SCRIPT FLUSH): load it again, once.
            Reply::Error(e) if e.starts_with("NOSCRIPT") => {
                let sha = load_script(&mut c).await?;
                call[1] = sha.as_bytes();
                let r = tokio::time::timeout(TIMEOUT, c.call(&call))
                    .await
                    .map_err(|_| CallError::Timeout)??;
                self.put_back(c, sha.clone());
                self.recovered();
                return Ok(ok_or_error(r)?);
            }
            r => r,
        };
        self.put_back(c, sha);
        self.recovered();
        Ok(ok_or_error(reply)?)
    }

    /// A pooled connection, or a new one unless a recent failure asks to wait.
    async fn connection(&self) -> Result<(Connection, String), CallError> {
        if let Some(c) = self.pool.lock().ok().and_then(|mut p| p.pop()) {
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
        let open = async {
            let mut c = Connection::open(&self.url).await?;
            let sha = load_script(&mut c).await?;
            Ok::<_, std::io::Error>((c, sha))
        };
        match tokio::time::timeout(TIMEOUT, open).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(source)) => Err(CallError::Connect {
                address: self.display.clone(),
                source,
            }),
            Err(_) => Err(CallError::ConnectTimeout(self.display.clone())),
        }
    }

    fn put_back(&self, c: Connection, sha: String) {
        if let Ok(mut p) = self.pool.lock()
            && p.len() < POOL
        {
            p.push((c, sha));
        }
    }

    fn recovered(&self) {
        if !self.up.swap(true, Ordering::Relaxed) {
            tracing::info!("rate-limit store {} is reachable again", self.display);
        }
    }

    fn failed(&self, e: impl std::fmt::Display) {
        let e = e.to_string();
        if self.up.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                "rate-limit store {} failed ({e}); limits hold per instance until it is back",
                self.display
            );
        }
        if let Ok(mut p) = self.pool.lock() {
            // A failure may have left a connection mid-reply; start over with fresh ones.
            p.clear();
        }
        if let Ok(mut at) = self.retry_at.lock() {
            *at = Some(Instant::now() + RETRY_EVERY);
        }
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(e);
        }
    }
}

async fn load_script(c: &mut Connection) -> std::io::Result<String> {
    match ok_or_error(c.call(&[b"SCRIPT", b"LOAD", SCRIPT.as_bytes()]).await?)? {
        Reply::Bulk(Some(sha)) => String::from_utf8(sha)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad script hash")),
        r => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("SCRIPT LOAD answered {r:?}"),
        )),
    }
}
