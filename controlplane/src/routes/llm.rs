//! The LLM routes: an alert's explanation, natural-language hunts, and Sigma rule suggestions,
//! each generated on request and cached (see [`crate::llm`]).

use super::read_body;
use crate::answer::Json;
use crate::error::ApiError;
use crate::query::{DEFAULT_LIMIT, MAX_LIMIT, Params, page_of};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde::Deserialize;
use std::sync::Arc;
use watchpost_llm::hunt::{self, HuntAnswer, HuntQuery};
use watchpost_llm::privacy::Sensitive;
use watchpost_llm::suggest::{self, Evidence, Pattern, Suggestion};
use watchpost_llm::usage::Feature;
use watchpost_llm::{Ask, Explanation, LlmError, grammar, prompt};
use watchpost_proto::{ListResponse, Uuid, now_ns};
use watchpost_store::{EntityFilter, EventPage, EventQuery, Store, StoreError};

impl From<LlmError> for ApiError {
    fn from(e: LlmError) -> ApiError {
        match e {
            LlmError::Disabled | LlmError::NotReady(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "llm_unavailable",
                e.to_string(),
            )
            .retry_after(30),
            LlmError::Upstream(_) => {
                ApiError::new(StatusCode::BAD_GATEWAY, "llm_failed", e.to_string())
            }
            LlmError::Busy(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "llm_busy", e.to_string())
                    .retry_after(5)
            }
        }
    }
}

/// The optional body of `POST /alerts/{id}/explain` and `POST /sigma/rule-suggestions/{key}`.
#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefreshBody {
    /// Ask the model again even when an answer is cached.
    #[serde(default)]
    refresh: bool,
}

impl RefreshBody {
    /// An empty body is `{}`.
    fn read(bytes: &[u8]) -> Result<RefreshBody, ApiError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(RefreshBody::default());
        }
        serde_json::from_slice(bytes).map_err(|e| {
            ApiError::invalid_body(
                "body",
                format!("the body must be empty, {{}} or {{\"refresh\": true}}: {e}"),
            )
        })
    }
}

/// An alert's explanation: the cached one while it lives, else a new one from the model.
pub async fn explain(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Body,
) -> Result<Json<Explanation>, ApiError> {
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let req = RefreshBody::read(&bytes)?;
    let llm = st.llm.clone();
    let limit = llm.config().explanation_max_contributing_events as usize;
    let store = st.store.clone();
    let key = id.clone();
    let (alert, events) =
        tokio::task::spawn_blocking(move || super::alerts::with_events(&store, &key, limit))
            .await
            .map_err(ApiError::internal)??
            .ok_or_else(|| ApiError::not_found(format!("no alert {id}")))?;
    if !req.refresh
        && let Some(cached) = llm.cached_explanation(&id)
    {
        return Ok(Json(cached));
    }
    llm.ready().await?;
    let cfg = llm.config();
    let p = prompt::explanation(&alert, &events, cfg.explanation_max_prompt_chars as usize);
    let sensitive = llm.sensitive(alert.entity.iter().chain(&alert.related_entities), &events);
    let markdown = llm
        .complete(Ask {
            feature: Feature::Explain,
            system: prompt::EXPLAIN_SYSTEM,
            user: &p.text,
            timeout_s: cfg.explanation_timeout_s,
            sensitive: &sensitive,
            grammar: None,
        })
        .await?;
    Ok(Json(llm.store_explanation(Explanation {
        alert_id: id,
        markdown,
        backend: cfg.backend.clone(),
        model: llm.model().to_string(),
        generated_ns: watchpost_proto::now_ns(),
        events_in_prompt: p.events,
        prompt_chars: p.text.chars().count(),
        cached: false,
        expires_in_s: 0,
    })))
}

/// The cached explanation only; never calls the model.
pub async fn explanation(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Explanation>, ApiError> {
    if !st.llm.enabled() {
        return Err(LlmError::Disabled.into());
    }
    if let Some(cached) = st.llm.cached_explanation(&id) {
        return Ok(Json(cached));
    }
    let store = st.store.clone();
    let key = id.clone();
    let exists = tokio::task::spawn_blocking(move || store.alert(&key))
        .await
        .map_err(ApiError::internal)??
        .is_some();
    Err(ApiError::not_found(if exists {
        format!(
            "no explanation of alert {id} is cached; POST /api/v1/alerts/{id}/explain makes one"
        )
    } else {
        format!("no alert {id}")
    }))
}

/// The body of `POST /hunt`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HuntBody {
    /// The question.
    query: String,
    /// Most events returned (1 to `llm.hunt_max_results`, the default).
    #[serde(default)]
    limit: Option<u32>,
    /// Run it again even when an answer is cached.
    #[serde(default)]
    refresh: bool,
}

fn invalid_query(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
}

/// `POST /hunt`: a question answered with events. One naming an entity is that entity's events
/// without the LLM; any other is translated by the LLM into an event query, which then runs
/// against the store. Answers are cached per canonical question and limit.
pub async fn hunt(
    State(st): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Result<Json<HuntAnswer>, ApiError> {
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let req: HuntBody = serde_json::from_slice(&bytes).map_err(|e| {
        invalid_query(format!(
            "the body must be {{\"query\": \"...\", \"limit\": N, \"refresh\": false}}: {e}"
        ))
    })?;
    let llm = st.llm.clone();
    let cfg = llm.config();
    let query = req.query.trim();
    let chars = query.chars().count();
    if chars == 0 {
        return Err(invalid_query("the query is empty"));
    }
    if chars > cfg.hunt_max_query_chars as usize {
        return Err(invalid_query(format!(
            "the query has {chars} characters; llm.hunt_max_query_chars allows {}",
            cfg.hunt_max_query_chars
        )));
    }
    if query.chars().any(|c| c.is_control() && !c.is_whitespace()) {
        return Err(invalid_query("the query holds control characters"));
    }
    let max = cfg.hunt_max_results.max(1);
    let limit = req.limit.unwrap_or(max);
    if !(1..=max).contains(&limit) {
        return Err(invalid_query(format!(
            "`limit` must be 1 to {max} (llm.hunt_max_results)"
        )));
    }
    if let Some(targets) =
        crate::fanout::Fanout::targets(st.fanout.as_deref(), st.cluster.as_deref(), &headers)
    {
        return fleet_hunt(&st, targets, bytes.to_vec(), limit).await;
    }
    let key = format!("{}\n{limit}", hunt::canonical(query));
    if !req.refresh
        && let Some(cached) = llm.cached_hunt(&key)
    {
        return Ok(Json(cached));
    }
    let store = st.store.clone();
    let q = query.to_string();
    let entities = tokio::task::spawn_blocking(move || hunt::entity_tokens(&store, &q))
        .await
        .map_err(ApiError::internal)??;
    let now = now_ns();
    let (mode, executed, model) = if entities.is_empty() {
        llm.ready().await?;
        let store = st.store.clone();
        let sources = tokio::task::spawn_blocking(move || recent_sources(&store, now))
            .await
            .map_err(ApiError::internal)??;
        let prompt = hunt::translation_prompt(query, now, &sources);
        let text = llm
            .complete(Ask {
                feature: Feature::Hunt,
                system: hunt::HUNT_SYSTEM,
                user: &prompt,
                timeout_s: cfg.hunt_timeout_s,
                sensitive: &Sensitive::none(),
                grammar: Some(&grammar::hunt(&sources)),
            })
            .await?;
        let translated = hunt::parse_translation(&text, now).map_err(|why| {
            LlmError::Upstream(format!("the model's query translation was refused: {why}"))
        })?;
        ("llm", translated, Some(llm.model().to_string()))
    } else {
        let executed = HuntQuery {
            entities: entities.iter().map(|e| e.value.clone()).collect(),
            ..HuntQuery::default()
        };
        ("entity", executed, None)
    };
    let store = st.store.clone();
    let run = executed.clone();
    let found = entities.clone();
    let retention_days = st.config.storage.retention_days;
    let deadline = super::events::search_deadline(&st);
    let page = tokio::task::spawn_blocking(move || {
        let entity = if found.is_empty() {
            resolve_entities(&store, &run.entities)?
        } else {
            Some(hunt::entity_filter(&found))
        };
        if entity.as_ref().is_some_and(|f| f.alternatives.is_empty()) {
            // Entities were asked for and none exists: nothing can match.
            return Ok(EventPage {
                items: Vec::new(),
                total: 0,
                total_exact: true,
                timed_out: false,
            });
        }
        store
            .search_events(&EventQuery {
                since_ns: run.since_ns,
                until_ns: run.until_ns,
                source: run.source.clone(),
                min_severity: run.min_severity,
                entity,
                text: run.text.clone(),
                page: 1,
                limit,
                retention_days,
                deadline,
                ..EventQuery::default()
            })
            .map_err(ApiError::from)
    })
    .await
    .map_err(ApiError::internal)??;
    let answer = HuntAnswer {
        query: query.to_string(),
        mode: mode.to_string(),
        entities,
        executed,
        limit,
        events: page.items,
        total: page.total,
        total_exact: page.total_exact,
        timed_out: page.timed_out,
        backend: model.as_ref().map(|_| cfg.backend.clone()),
        model,
        generated_ns: now,
        cached: false,
        expires_in_s: 0,
        sensors: None,
    };
    Ok(Json(llm.store_hunt(&key, answer)))
}

/// A console's hunt: the question goes to every sensor, which answers it from its own store
/// (naming its entities, or translating it with its LLM), and the events come back merged
/// newest first. The answer's mode and query are those of the first sensor that found events.
async fn fleet_hunt(
    st: &AppState,
    targets: Vec<crate::fanout::Target>,
    body: Vec<u8>,
    limit: u32,
) -> Result<Json<HuntAnswer>, ApiError> {
    let fanout = super::console_fanout(st)?;
    let mut gathered = fanout
        .ask(
            targets,
            watchpost_outbound::Method::POST,
            "/api/v1/hunt",
            Some(body),
        )
        .await;
    let mut answers = gathered.parsed::<HuntAnswer>(&[]);
    let coverage = gathered.coverage;
    answers.sort_by_key(|(_, a)| a.events.is_empty());
    let Some((_, first)) = answers.first() else {
        let why: Vec<String> = coverage
            .missing
            .iter()
            .map(|m| format!("{}: {}", m.sensor, m.error))
            .collect();
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("no sensor answered the hunt ({})", why.join("; ")),
        ));
    };
    let mut answer = first.clone();
    answer.events = Vec::new();
    answer.total = 0;
    answer.total_exact = true;
    answer.timed_out = false;
    answer.cached = answers.iter().all(|(_, a)| a.cached);
    for (_, a) in &answers {
        answer.total += a.total;
        answer.total_exact &= a.total_exact;
        answer.timed_out |= a.timed_out;
        answer.expires_in_s = answer.expires_in_s.min(a.expires_in_s);
    }
    answer.events = crate::fanout::merge_events(
        answers.into_iter().map(|(s, a)| (s, a.events)),
        0,
        limit as usize,
    );
    answer.sensors = Some(coverage);
    Ok(Json(answer))
}

/// The filter of the entity names a translation gave: every kind each name can be. `None` when
/// it gave none; an empty filter when none of them is a valid name.
fn resolve_entities(store: &Store, names: &[String]) -> Result<Option<EntityFilter>, StoreError> {
    if names.is_empty() {
        return Ok(None);
    }
    let mut alternatives = Vec::new();
    for n in names {
        if let Some(f) = super::events::entity_filter(store, n)? {
            alternatives.extend(f.alternatives);
        }
    }
    Ok(Some(EntityFilter { alternatives }))
}

/// Distinct log sources of the last day's events (at most 50, from at most 5,000 events), so the
/// model names sources that exist.
fn recent_sources(store: &Store, now: i64) -> Result<Vec<String>, ApiError> {
    let mut out: Vec<String> = Vec::new();
    store.scan_events(now - 86_400_000_000_000, now + 1, 5_000, |_, e| {
        if !out.contains(&e.source) {
            out.push(e.source);
        }
        out.len() < 50
    })?;
    out.sort();
    Ok(out)
}

/// The eligible patterns of the settings now.
async fn eligible(st: &AppState) -> Result<Vec<Pattern>, ApiError> {
    let store = st.store.clone();
    let cfg = st.llm.config().clone();
    let mut all = tokio::task::spawn_blocking(move || {
        suggest::patterns(
            &store,
            cfg.rule_suggestion_min_tp,
            cfg.rule_suggestion_window_days,
            now_ns(),
        )
    })
    .await
    .map_err(ApiError::internal)??;
    for p in &mut all {
        p.suggestion_cached = st.llm.has_suggestion(&p.pattern_key);
    }
    Ok(all)
}

/// `GET /sigma/rule-suggestions`: the patterns eligible for drafting, most confirmed first. It
/// needs no LLM, so operators see what is building up even with the LLM off.
pub async fn suggestions(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListResponse<Pattern>>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let page = p.int("page", 1, 1, 1_000_000)?;
    let limit = p.int("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
    Ok(Json(page_of(eligible(&st).await?, page, limit)))
}

/// The rule id a pattern's drafts carry: the same for every draft of it, so uploading two drafts
/// of one pattern is a collision (409) rather than two rules.
fn draft_rule_id(pattern_key: &str) -> String {
    Uuid::new_v5(
        &Uuid::NAMESPACE_URL,
        format!("watchpost.rule-suggestion.{pattern_key}").as_bytes(),
    )
    .to_string()
}

/// `POST /sigma/rule-suggestions/{key}`: a validated Sigma draft for an eligible pattern, with
/// its evidence. 404 once the pattern is no longer eligible (its cached draft is dropped then).
pub async fn draft(
    State(st): State<AppState>,
    Path(key): Path<String>,
    body: Body,
) -> Result<Json<Suggestion>, ApiError> {
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let req = RefreshBody::read(&bytes)?;
    let llm = st.llm.clone();
    let cfg = llm.config();
    let Some(pattern) = eligible(&st)
        .await?
        .into_iter()
        .find(|p| p.pattern_key == key)
    else {
        llm.forget_suggestion(&key);
        return Err(ApiError::not_found(format!(
            "pattern {key} is not eligible: it needs {} alerts confirmed as true positives{}",
            cfg.rule_suggestion_min_tp,
            match cfg.rule_suggestion_window_days {
                0 => String::new(),
                d => format!(" within {d} days"),
            }
        )));
    };
    if !req.refresh
        && let Some(cached) = llm.cached_suggestion(&key)
    {
        return Ok(Json(cached));
    }
    llm.ready().await?;
    let catalog = Arc::clone(&st.catalog);
    let store = st.store.clone();
    let p = pattern.clone();
    let events = tokio::task::spawn_blocking(move || suggest::evidence_events(&store, &p))
        .await
        .map_err(ApiError::internal)??;
    let logsources = catalog.mapping().logsources_naming_source(&pattern.source);
    let prompt = suggest::draft_prompt(
        &pattern,
        &draft_rule_id(&key),
        &logsources,
        &events,
        cfg.explanation_max_prompt_chars as usize,
    );
    let timeout = cfg.rule_suggestion_timeout_s;
    let sensitive = llm.sensitive([], &events);
    // A grammar holds a local model to a rule of this id, a covering logsource and keywords the
    // pattern's template holds, so that even a small model's draft passes the checks below.
    let keywords = pattern
        .template
        .as_deref()
        .map(grammar::template_keywords)
        .unwrap_or_default();
    let shape = grammar::sigma_draft(&draft_rule_id(&key), &logsources, &keywords);
    let ask = |user| Ask {
        feature: Feature::RuleSuggestion,
        system: suggest::SUGGEST_SYSTEM,
        user,
        timeout_s: timeout,
        sensitive: &sensitive,
        grammar: shape.as_ref(),
    };
    let first = suggest::extract_yaml(&llm.complete(ask(&prompt)).await?);
    // Checked off the async threads: a model's draft is untrusted text (the evidence it was
    // shown is ingested log data), and parsing and compiling a large rule takes a while.
    let events = Arc::new(events);
    let check = |yaml: String| {
        let (catalog, events) = (catalog.clone(), events.clone());
        async move {
            tokio::task::spawn_blocking(move || suggest::check_draft(&catalog, &yaml, &events))
                .await
                .map_err(ApiError::internal)
        }
    };
    let (draft, repaired) = match check(first.clone()).await? {
        Ok(d) => (d, false),
        Err(why) => {
            tracing::info!("rule suggestion {key}: first draft refused ({why}); asking again");
            let again = suggest::repair_prompt(&prompt, &first, &why.to_string());
            let second = suggest::extract_yaml(&llm.complete(ask(&again)).await?);
            let d = check(second).await?.map_err(|why| {
                LlmError::Upstream(format!(
                    "the model's draft is not a usable Sigma rule, even after one \
                         correction: {why}"
                ))
            })?;
            (d, true)
        }
    };
    let evidence = Evidence {
        feedback: pattern.feedback.clone(),
        events: Arc::unwrap_or_clone(events),
    };
    Ok(Json(llm.store_suggestion(Suggestion {
        pattern_key: key,
        pattern,
        draft,
        evidence,
        repaired,
        backend: cfg.backend.clone(),
        model: llm.model().to_string(),
        generated_ns: now_ns(),
        cached: false,
        expires_in_s: 0,
    })))
}

/// `DELETE /sigma/rule-suggestions/{key}`: drops the cached draft (204), or 404 when none is
/// cached.
pub async fn forget(
    State(st): State<AppState>,
    Path(key): Path<String>,
) -> Result<StatusCode, ApiError> {
    if st.llm.forget_suggestion(&key) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!(
            "no draft of pattern {key} is cached"
        )))
    }
}
