//! Configuration reload without a restart: SIGHUP and `POST /config/reload` (docs/reload.md).
//!
//! The file is read and validated first; a file with a problem is refused whole, naming each
//! key and problem, and the running configuration stays. Then what operators change most is
//! applied: the Sigma rule folders are read again (and the bundled and custom rules), the IOC
//! folder is read again if a file changed, and the notification channels are replaced when
//! `[[notifications]]` changed. Keys that need a restart (listeners, cores, the store) are not
//! applied; the answer lists them.

use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use watchpost_dataplane::{Catalog, CatalogReload, IocFeed};
use watchpost_notify::{Notifier, NotifyError};
use watchpost_proto::{Config, config::ConfigError};

/// Keys a reload applies; any other key that changed waits for a restart.
pub const RELOADABLE: &[&str] = &["detection.sigma_rules_dirs", "notifications"];

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file does not parse or a value is wrong.
    #[error("{0}")]
    Invalid(ConfigError),
    /// A rule folder cannot be read.
    #[error("detection.sigma_rules_dirs: {0}")]
    Rules(watchpost_dataplane::Error),
    /// A notification channel cannot be set up (its CA file, its address).
    #[error("{0}")]
    Notify(NotifyError),
    /// The reading task failed.
    #[error("the reload did not finish: {0}")]
    Task(String),
}

impl ReloadError {
    /// Each problem as (key, problem).
    pub fn problems(&self) -> Vec<(String, String)> {
        match self {
            ReloadError::Invalid(e) => e
                .problems
                .iter()
                .map(|p| (p.key.clone(), p.problem.clone()))
                .collect(),
            ReloadError::Rules(e) => vec![("detection.sigma_rules_dirs".into(), e.to_string())],
            ReloadError::Notify(e) => {
                vec![(format!("notifications[{}]", e.index), e.why.to_string())]
            }
            ReloadError::Task(e) => vec![("(reload)".into(), e.clone())],
        }
    }
}

/// What a reload did.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ReloadReport {
    /// What was applied: `rules`, `iocs`, `notifications`.
    pub applied: Vec<String>,
    /// Keys that changed but are read only at start: restart to apply them.
    pub restart_required: Vec<String>,
    /// The rule folders read again.
    pub rules: Option<CatalogReload>,
    /// The IOC folder changed and was read again.
    pub iocs_reloaded: bool,
    /// Notification channels configured now.
    pub notification_channels: usize,
}

/// Reload counters, for `/stats`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ReloadStats {
    /// Reloads applied since start.
    pub reloads: u64,
    /// Reloads refused (a bad file).
    pub failures: u64,
    /// The last refusal, until a reload succeeds.
    pub last_error: Option<String>,
    /// Time of the last reload or refusal, ns (0 = none).
    pub last_ns: i64,
}

/// See the module's documentation.
pub struct Reloader {
    /// The configuration file (`--config`); `None`: the defaults.
    path: Option<PathBuf>,
    /// The running configuration: the start's, with what reloads applied.
    running: RwLock<Arc<Config>>,
    catalog: Arc<Catalog>,
    iocs: Arc<IocFeed>,
    notifier: Arc<Notifier>,
    /// One reload at a time.
    one: tokio::sync::Mutex<()>,
    reloads: AtomicU64,
    failures: AtomicU64,
    last: Mutex<(i64, Option<String>)>,
}

impl Reloader {
    /// A reloader of `path` for a service running `config`.
    pub fn new(
        path: Option<PathBuf>,
        config: Arc<Config>,
        catalog: Arc<Catalog>,
        iocs: Arc<IocFeed>,
        notifier: Arc<Notifier>,
    ) -> Reloader {
        Reloader {
            path,
            running: RwLock::new(config),
            catalog,
            iocs,
            notifier,
            one: tokio::sync::Mutex::new(()),
            reloads: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            last: Mutex::new((0, None)),
        }
    }

    /// The running configuration (what `GET /config` shows).
    pub fn running(&self) -> Arc<Config> {
        Arc::clone(&self.running.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Counters for `/stats`.
    pub fn stats(&self) -> ReloadStats {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        ReloadStats {
            reloads: self.reloads.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            last_error: last.1,
            last_ns: last.0,
        }
    }

    /// Reads, validates and applies the file; logs the outcome.
    pub async fn reload(&self) -> Result<ReloadReport, ReloadError> {
        let _one = self.one.lock().await;
        let result = self.apply().await;
        let now = watchpost_proto::now_ns();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match &result {
            Ok(report) => {
                self.reloads.fetch_add(1, Ordering::Relaxed);
                *last = (now, None);
                tracing::info!(
                    applied = ?report.applied,
                    restart_required = ?report.restart_required,
                    "configuration reloaded"
                );
            }
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                *last = (now, Some(e.to_string()));
                tracing::error!(
                    "configuration reload refused, the running configuration is kept: {e}"
                );
            }
        }
        result
    }

    async fn apply(&self) -> Result<ReloadReport, ReloadError> {
        let path = self.path.clone();
        let fresh = tokio::task::spawn_blocking(move || -> Result<Config, ConfigError> {
            let mut c = Config::load(path.as_deref())?;
            c.resolve_secrets()?;
            Ok(c)
        })
        .await
        .map_err(|e| ReloadError::Task(e.to_string()))?
        .map_err(ReloadError::Invalid)?;
        let old = self.running();
        let changed = changed_keys(&old, &fresh);
        let restart_required: Vec<String> = changed
            .iter()
            .filter(|k| !RELOADABLE.contains(&k.as_str()))
            .cloned()
            .collect();
        let channels_changed = changed.iter().any(|k| k == "notifications");
        // Everything that can fail is done before anything is applied: the channels are set
        // up here and swapped in last (which cannot fail); the rule folders are read and
        // compiled before the catalogue swaps its set (a failure leaves it as it was).
        let channels = if channels_changed {
            Some(
                self.notifier
                    .prepare(&fresh.notifications)
                    .map_err(ReloadError::Notify)?,
            )
        } else {
            None
        };
        let mut applied = Vec::new();
        let (catalog, cfg) = (Arc::clone(&self.catalog), fresh.clone());
        let rules = tokio::task::spawn_blocking(move || catalog.reload(&cfg))
            .await
            .map_err(|e| ReloadError::Task(e.to_string()))?
            .map_err(ReloadError::Rules)?;
        applied.push("rules".to_string());
        let iocs = Arc::clone(&self.iocs);
        let iocs_reloaded = tokio::task::spawn_blocking(move || iocs.reload_if_changed())
            .await
            .map_err(|e| ReloadError::Task(e.to_string()))?;
        if iocs_reloaded {
            applied.push("iocs".into());
        }
        if let Some(channels) = channels {
            self.notifier.replace(channels).await;
            applied.push("notifications".into());
        }
        let mut running = (*old).clone();
        running.detection.sigma_rules_dirs = fresh.detection.sigma_rules_dirs.clone();
        running.notifications = fresh.notifications.clone();
        let notification_channels = running.notifications.len();
        *self.running.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(running);
        Ok(ReloadReport {
            applied,
            restart_required,
            rules: Some(rules),
            iocs_reloaded,
            notification_channels,
        })
    }
}

/// The dotted keys whose values differ between `a` and `b`: a table's keys one by one (`ueba`
/// gives `ueba.enabled`...), top-level values and arrays (`notifications`) whole.
fn changed_keys(a: &Config, b: &Config) -> Vec<String> {
    let (a, b) = (
        serde_json::to_value(a).unwrap_or_default(),
        serde_json::to_value(b).unwrap_or_default(),
    );
    let mut out = Vec::new();
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return out;
    };
    for (key, av) in a {
        let bv = &b[key];
        match (av.as_object(), bv.as_object()) {
            (Some(at), Some(bt)) => {
                for (sub, x) in at {
                    if bt.get(sub) != Some(x) {
                        out.push(format!("{key}.{sub}"));
                    }
                }
            }
            _ if av != bv => out.push(key.clone()),
            _ => {}
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys_name_table_keys_and_whole_arrays() {
        let a = Config::default();
        let mut b = Config {
            dashboard_port: 9999,
            ..Config::default()
        };
        b.detection.sigma_rules_dirs = vec!["/srv/rules".into()];
        b.inputs.syslog_udp.recv_buffer_bytes = 1;
        b.notifications.push(Default::default());
        assert_eq!(
            changed_keys(&a, &b),
            [
                "dashboard_port",
                "detection.sigma_rules_dirs",
                "inputs.syslog_udp",
                "notifications"
            ]
        );
        assert!(changed_keys(&a, &a.clone()).is_empty());
    }
}
