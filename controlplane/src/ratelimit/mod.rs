//! Per-client rate limits of the API, in three families (the spec's Limits part):
//!
//! | family | default | routes |
//! |---|---|---|
//! | list | `api_list_rate_limit`, 60/minute | searches and lists: `/events`, `/alerts`, `/sigma/rules`, `/entities/search`, `/anomaly/timeline`, ... |
//! | detail | `api_detail_rate_limit`, 300/minute | one resource: `/alerts/{id}`, `/entities/{uuid}/...`, `/sigma/rules/{id}`, and every write (feedback, triage, rule upload and toggle, IOC reload) |
//! | coverage | `api_coverage_rate_limit`, 10/minute | `/attack/coverage` |
//!
//! Not limited: ingestion (`POST /ingest` has its own backpressure; refusing accepted data by rate
//! would lose it), the system routes (`/health`, `/stats`, `/config`, `/metrics`,
//! `/openapi.json`: probes and scrapers must never be told to wait) and the WebSocket upgrade
//! (bounded by `ws_max_connections`).
//!
//! The client is the peer address, or with `api_trust_proxy_headers` the last address of
//! `X-Forwarded-For` (the one the trusted proxy appended; earlier ones are the client's own word),
//! and whether the request comes from the dashboard page (the browser's `Sec-Fetch-Site:
//! same-origin`): a dashboard and a script behind one SSH tunnel share the address 127.0.0.1, and
//! one budget made them throttle each other (a script's 61st `/alerts` call in a minute answered
//! 429 while an analyst's board was open). The split is safe: a script that claims to be a page
//! gains one more budget, never more than two per address.
//! With `api_rate_limit_store_url` the allowance lives in Redis and holds across instances
//! ([`store`]); otherwise, and while the store is unreachable, in the process ([`gcra`]).

pub mod gcra;
pub mod store;

use crate::error::ApiError;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gcra::Limiter;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;
use store::{SharedStore, StoreTls};
use watchpost_proto::config::{ConfigError, ConfigProblem};
use watchpost_proto::{ParseError, RateLimit};

/// Who a request is counted against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// The address; `None` when unknown.
    pub addr: Option<IpAddr>,
    /// A request of a page served by this API (the dashboard), counted apart from the
    /// address's other clients.
    pub page: bool,
}

/// The three families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Lists and searches.
    List,
    /// Single resources and writes.
    Detail,
    /// `/attack/coverage`.
    Coverage,
}

impl Family {
    /// Its name in keys, messages and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Family::List => "list",
            Family::Detail => "detail",
            Family::Coverage => "coverage",
        }
    }

    /// The configuration key that sets it.
    pub fn key(self) -> &'static str {
        match self {
            Family::List => "api_list_rate_limit",
            Family::Detail => "api_detail_rate_limit",
            Family::Coverage => "api_coverage_rate_limit",
        }
    }
}

/// One family's limit: the rate (for messages) and the local limiter, whose GCRA constants the
/// shared store uses too.
struct FamilyLimit {
    rate: RateLimit,
    local: Limiter,
}

impl FamilyLimit {
    fn new(rate: RateLimit) -> FamilyLimit {
        FamilyLimit {
            rate,
            local: Limiter::new(rate),
        }
    }
}

/// The limits of the API.
pub struct RateLimits {
    list: FamilyLimit,
    detail: FamilyLimit,
    coverage: FamilyLimit,
    trust_proxy: bool,
    /// The shared store, when configured.
    pub store: Option<SharedStore>,
    /// Requests refused, per family (list, detail, coverage).
    pub refused: [std::sync::atomic::AtomicU64; 3],
}

impl RateLimits {
    /// From the configuration (validated at start); an unusable value is a configuration
    /// problem naming its key.
    pub fn from_config(config: &watchpost_proto::Config) -> Result<RateLimits, ConfigError> {
        let problem = |key: &str, error: ParseError| ConfigError {
            problems: vec![ConfigProblem {
                key: key.to_string(),
                problem: error.to_string(),
            }],
        };
        let rate = |key: &str, text: &str| RateLimit::parse(text).map_err(|e| problem(key, e));
        let store = if config.api_rate_limit_store_url.is_empty() {
            None
        } else {
            let url = watchpost_proto::store_url::StoreUrl::parse(&config.api_rate_limit_store_url)
                .map_err(|e| problem("api_rate_limit_store_url", e))?;
            let tls = StoreTls::from_config(config).map_err(|e| ConfigError {
                problems: vec![ConfigProblem {
                    key: e.key.to_string(),
                    problem: e.to_string(),
                }],
            })?;
            let store = SharedStore::new(url, &tls).map_err(|e| ConfigError {
                problems: vec![ConfigProblem {
                    key: "api_rate_limit_store_url".to_string(),
                    problem: format!("the Redis client refuses these settings: {e}"),
                }],
            })?;
            Some(store)
        };
        Ok(RateLimits {
            list: FamilyLimit::new(rate("api_list_rate_limit", &config.api_list_rate_limit)?),
            detail: FamilyLimit::new(rate(
                "api_detail_rate_limit",
                &config.api_detail_rate_limit,
            )?),
            coverage: FamilyLimit::new(rate(
                "api_coverage_rate_limit",
                &config.api_coverage_rate_limit,
            )?),
            trust_proxy: config.api_trust_proxy_headers,
            store,
            refused: Default::default(),
        })
    }

    fn family(&self, f: Family) -> &FamilyLimit {
        match f {
            Family::List => &self.list,
            Family::Detail => &self.detail,
            Family::Coverage => &self.coverage,
        }
    }

    /// Takes one request of `client` in `family`: `Ok`, or `Err(seconds to wait)`.
    pub async fn check(&self, family: Family, client: Client) -> Result<(), u64> {
        let limit = self.family(family);
        if let Some(store) = &self.store {
            let page = if client.page { ":page" } else { "" };
            let key = match client.addr {
                Some(ip) => format!("watchpost:rl:{}:{ip}{page}", family.name()),
                None => format!("watchpost:rl:{}:unknown{page}", family.name()),
            };
            if let Some(answer) = store
                .check(&key, limit.local.interval(), limit.local.burst())
                .await
            {
                return answer;
            }
        }
        limit.local.check(client, Instant::now())
    }

    /// The client of a request: the peer, or the proxy's last `X-Forwarded-For` entry when
    /// proxy headers are trusted.
    pub fn client(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> Client {
        let page = headers
            .get("sec-fetch-site")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"same-origin"));
        let addr = match self.trust_proxy.then(|| forwarded_for(headers)).flatten() {
            Some(ip) => Some(ip),
            None => peer.map(|p| p.ip()),
        };
        Client { addr, page }
    }

    /// The 429 answer.
    fn refusal(&self, f: Family, wait: u64) -> ApiError {
        let r = self.family(f).rate;
        let per = match r.per_seconds {
            1 => "second",
            60 => "minute",
            _ => "hour",
        };
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "the {} routes allow {}/{per} per client ({}); retry in {wait} s",
                f.name(),
                r.count,
                f.key()
            ),
        )
        .with("family", f.name())
        .retry_after(wait)
    }
}

/// The last address of the last `X-Forwarded-For` header, when it parses.
fn forwarded_for(headers: &HeaderMap) -> Option<IpAddr> {
    let last = headers.get_all("x-forwarded-for").iter().next_back()?;
    let entry = last.to_str().ok()?.rsplit(',').next()?.trim();
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

async fn limit(limits: &RateLimits, f: Family, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let client = limits.client(req.headers(), peer);
    match limits.check(f, client).await {
        Ok(()) => next.run(req).await,
        Err(wait) => {
            limits.refused[f as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            limits.refusal(f, wait).into_response()
        }
    }
}

/// Middleware of the list family.
pub async fn list(State(limits): State<Arc<RateLimits>>, req: Request, next: Next) -> Response {
    limit(&limits, Family::List, req, next).await
}

/// Middleware of the detail family.
pub async fn detail(State(limits): State<Arc<RateLimits>>, req: Request, next: Next) -> Response {
    limit(&limits, Family::Detail, req, next).await
}

/// Middleware of the coverage family.
pub async fn coverage(State(limits): State<Arc<RateLimits>>, req: Request, next: Next) -> Response {
    limit(&limits, Family::Coverage, req, next).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 50, item 10: a dashboard and a script behind one SSH tunnel (both 127.0.0.1)
    /// throttled each other.
    #[test]
    fn the_page_and_a_script_on_one_address_have_a_budget_each_and_no_more() {
        let limits = RateLimits::from_config(&watchpost_proto::Config {
            api_list_rate_limit: "3/minute".into(),
            ..watchpost_proto::Config::default()
        })
        .unwrap();
        let peer: Option<SocketAddr> = Some("127.0.0.1:50000".parse().unwrap());
        let script = limits.client(&HeaderMap::new(), peer);
        let mut page_headers = HeaderMap::new();
        page_headers.insert("sec-fetch-site", "same-origin".parse().unwrap());
        let page = limits.client(&page_headers, peer);
        assert_ne!(script, page);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..3 {
                assert!(limits.check(Family::List, script).await.is_ok());
            }
            assert!(limits.check(Family::List, script).await.is_err());
            // The page's budget is its own...
            for _ in 0..3 {
                assert!(limits.check(Family::List, page).await.is_ok());
            }
            assert!(limits.check(Family::List, page).await.is_err());
            // ...and another connection of either is the same client.
            let other_port: Option<SocketAddr> = Some("127.0.0.1:50001".parse().unwrap());
            let again = limits.client(&page_headers, other_port);
            assert!(limits.check(Family::List, again).await.is_err());
        });
    }

    #[test]
    fn the_proxy_entry_is_the_last_one() {
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", "1.1.1.1, 2.2.2.2".parse().unwrap());
        h.append("x-forwarded-for", "6.6.6.6, 203.0.113.9".parse().unwrap());
        assert_eq!(forwarded_for(&h), Some("203.0.113.9".parse().unwrap()));
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", "[2001:db8::1]:443".parse().unwrap());
        assert_eq!(forwarded_for(&h), Some("2001:db8::1".parse().unwrap()));
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", "nonsense".parse().unwrap());
        assert_eq!(forwarded_for(&h), None);
    }
}
