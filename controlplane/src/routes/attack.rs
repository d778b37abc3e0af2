//! `GET /attack/coverage`: the ATT&CK Enterprise matrix with, per technique, the rules that
//! detect it and how often they fired.
//!
//! Rule counts come from the live catalogue (enabled rules only: a disabled rule covers
//! nothing); fire counts from the hourly rule series over `[since, until)`, 30 days by default.
//! Threat-intelligence matches have no rule but map to techniques too (contact with attacker
//! infrastructure is T1071): their alerts and signals first seen in the window count apart, as
//! `ioc_hits`, so that the heatmap shows Command and Control when only a feed saw it.
//! Techniques no rule maps to are listed too, with zeros: the gaps are what this view is for.

use crate::answer::Json;
use crate::error::ApiError;
use crate::query::Params;
use crate::state::AppState;
use axum::extract::{RawQuery, State};
use serde::Serialize;
use std::collections::HashMap;
use watchpost_proto::{AlertType, now_ns};
use watchpost_rules::Attack;
use watchpost_store::AlertQuery;

/// Threat-intelligence alerts, and signals, read per answer at most (the newest): one per
/// indicator and subject, each with its count, so a busy feed stays within it; the bound keeps an
/// answer's memory small whatever the window asked for.
const IOC_RECORDS_MAX: u32 = 10_000;

/// Default window: 30 days.
const DEFAULT_WINDOW_NS: i64 = 30 * 86_400_000_000_000;

/// One cell of the matrix.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct TechniqueCell {
    /// `T1110.001`.
    pub id: String,
    /// `Brute Force: Password Guessing`.
    pub name: String,
    /// Enabled rules mapped to it under this tactic.
    pub rules: u64,
    /// Their fires in the window.
    pub fires: u64,
    /// Threat-intelligence matches mapped to it in the window (alerts and signals, each with
    /// its occurrences).
    pub ioc_hits: u64,
    /// Ids of those rules.
    pub rule_ids: Vec<String>,
}

/// One column of the matrix.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct TacticColumn {
    /// `TA0006`.
    pub id: String,
    /// `Credential Access`.
    pub name: String,
    /// Enabled rules mapped to the tactic (with or without a technique).
    pub rules: u64,
    /// Their fires in the window.
    pub fires: u64,
    /// Threat-intelligence matches mapped to the tactic in the window.
    pub ioc_hits: u64,
    /// Every technique of the tactic, sub-techniques included, in id order.
    pub techniques: Vec<TechniqueCell>,
}

/// The answer.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Coverage {
    /// ATT&CK version of the embedded catalogue.
    pub attack_version: String,
    /// Window start, ns.
    pub since_ns: i64,
    /// Window end (exclusive), ns.
    pub until_ns: i64,
    /// Tactics in kill-chain order.
    pub tactics: Vec<TacticColumn>,
    /// Techniques with at least one rule, over all tactics (each technique once).
    pub techniques_covered: u64,
    /// Techniques in the catalogue.
    pub techniques_total: u64,
}

/// The matrix for `since`/`until` (ISO-8601; default the last 30 days).
pub async fn coverage(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Coverage>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let until_ns = p.time("until")?.unwrap_or_else(now_ns);
    let since_ns = p
        .time("since")?
        .unwrap_or(until_ns.saturating_sub(DEFAULT_WINDOW_NS));
    if since_ns >= until_ns {
        return Err(ApiError::invalid_parameter(
            "since",
            "since must be before until",
        ));
    }
    let cat = std::sync::Arc::clone(&st.catalog);
    let store = st.store.clone();
    let (rows, ioc) = tokio::task::spawn_blocking(move || {
        let rows = store.rule_fires(since_ns, until_ns)?;
        let query = AlertQuery {
            since_ns: Some(since_ns),
            until_ns: Some(until_ns),
            alert_type: Some(AlertType::Ioc),
            page: 1,
            limit: IOC_RECORDS_MAX,
            without_triage: true,
            ..AlertQuery::default()
        };
        let mut ioc = store.search_alerts(&query)?.items;
        ioc.extend(store.search_signals(&query)?.items);
        Ok::<_, watchpost_store::StoreError>((rows, ioc))
    })
    .await
    .map_err(ApiError::internal)??;
    // (tactic id, technique id or "") -> occurrences of threat-intelligence matches.
    let mut ioc_hits: HashMap<(String, String), u64> = HashMap::new();
    for a in &ioc {
        for m in &a.attack {
            *ioc_hits
                .entry((m.tactic_id.clone(), m.technique_id.clone()))
                .or_insert(0) += a.count.max(1);
        }
    }
    let mut fires: HashMap<u64, u64> = HashMap::new();
    for (rule, _, n) in rows {
        *fires.entry(rule).or_insert(0) += u64::from(n);
    }
    let attack = Attack::get();
    // (tactic id, technique id or "") -> (rule ids, fires)
    let mut cells: HashMap<(String, String), (Vec<String>, u64)> = HashMap::new();
    let mut by_tactic: HashMap<String, (Vec<String>, u64)> = HashMap::new();
    for e in cat.all().iter().filter(|e| e.enabled()) {
        let f = fires.get(&e.key).copied().unwrap_or(0);
        for m in &e.attack {
            let t = by_tactic.entry(m.tactic_id.clone()).or_default();
            if !t.0.contains(&e.rule.id) {
                t.0.push(e.rule.id.clone());
                t.1 += f;
            }
            if !m.technique_id.is_empty() {
                let c = cells
                    .entry((m.tactic_id.clone(), m.technique_id.clone()))
                    .or_default();
                c.0.push(e.rule.id.clone());
                c.1 += f;
            }
        }
    }
    let mut covered = std::collections::HashSet::new();
    let tactics = attack
        .tactics
        .iter()
        .map(|ta| {
            let techniques = attack
                .techniques
                .iter()
                .filter(|t| t.tactics.contains(&ta.shortname))
                .map(|t| {
                    let (rule_ids, f) = cells
                        .remove(&(ta.id.clone(), t.id.clone()))
                        .unwrap_or_default();
                    if !rule_ids.is_empty() {
                        covered.insert(t.id.clone());
                    }
                    TechniqueCell {
                        id: t.id.clone(),
                        name: attack.technique_name(t),
                        rules: rule_ids.len() as u64,
                        fires: f,
                        ioc_hits: ioc_hits
                            .get(&(ta.id.clone(), t.id.clone()))
                            .copied()
                            .unwrap_or(0),
                        rule_ids,
                    }
                })
                .collect();
            let (ids, f) = by_tactic.remove(&ta.id).unwrap_or_default();
            TacticColumn {
                id: ta.id.clone(),
                name: ta.name.clone(),
                rules: ids.len() as u64,
                fires: f,
                ioc_hits: ioc_hits
                    .iter()
                    .filter(|((tactic, _), _)| *tactic == ta.id)
                    .map(|(_, n)| n)
                    .sum(),
                techniques,
            }
        })
        .collect();
    Ok(Json(Coverage {
        attack_version: attack.version.clone(),
        since_ns,
        until_ns,
        tactics,
        techniques_covered: covered.len() as u64,
        techniques_total: attack.techniques.len() as u64,
    }))
}
