//! The `watchpost` command: run the service, check and show its configuration, mine templates,
//! replay logs, check rules, and hunt through a running service.
//!
//! Only argument handling lives here; the service is wired from the crates' own entry points
//! (`controlplane::run` for the service; the data plane's own for the offline commands).

use clap::{Parser, Subcommand};
use mimalloc::MiMalloc;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use watchpost_proto::Config;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

#[derive(Parser)]
#[command(
    name = "watchpost",
    version,
    about = "Threat detection: ingest, score, detect, serve."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service (inputs, pipeline, store, API) until SIGINT or SIGTERM.
    Run {
        /// TOML configuration file; without one every default applies.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Check or show the configuration.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Run the whole detection stack over log files (syslog or JSON lines, `.evtx` exports),
    /// using the events' own timestamps as the clock; prints the alerts as JSON lines, a summary
    /// on stderr.
    Analyze {
        /// Log files, read in the order given; a folder stands for its `.evtx`, `.log`, `.json`,
        /// `.jsonl`, `.ndjson` and `.txt` files (recursively, in name order).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// TOML configuration (detection, UEBA and template settings).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Exceptions to apply: a JSON array of exceptions as `POST /exceptions` takes them, or
        /// as `GET /exceptions` lists them (its answer as a whole works too).
        #[arg(long)]
        exceptions: Option<PathBuf>,
    },
    /// Template mining tools.
    Templates {
        #[command(subcommand)]
        action: TemplateAction,
    },
    /// Sigma rule tools.
    Rules {
        #[command(subcommand)]
        action: RulesAction,
    },
    /// Ask the running service a hunting question (`POST /api/v1/hunt`): a question naming an IP
    /// address, an entity UUID or a known host is answered from that entity's timeline without
    /// the LLM; any other is translated by the LLM into an event query. Prints one event per
    /// line, newest first (`--json`: the whole answer); what ran goes to stderr.
    Hunt {
        /// The question (several words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Most events shown; defaults to the service's `llm.hunt_max_results`.
        #[arg(long)]
        limit: Option<u32>,
        /// The service's API, `http://host:port`; defaults to `$WATCHPOST_URL`, else
        /// `dashboard_bind_address` and `dashboard_port` of the configuration.
        #[arg(long)]
        url: Option<String>,
        /// Ask again even when the service has the answer cached.
        #[arg(long)]
        refresh: bool,
        /// Print the service's whole JSON answer instead of event lines.
        #[arg(long)]
        json: bool,
        /// TOML configuration (the API address, `llm.hunt_timeout_s`); defaults to
        /// `$WATCHPOST_CONFIG`, else `/etc/watchpost/watchpost.toml` when it exists (the
        /// package's), else the embedded defaults.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum RulesAction {
    /// Check rule files and folders against the Sigma specification: one JSON line per rule
    /// (`valid`, and the error's kind, line and column when it is not). Exit code 1 if any is
    /// invalid.
    Validate {
        /// Rule files, or folders searched for `.yml`/`.yaml`.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Match events against rules: one JSON line per match, `{"rule_id": ..., "file": ...,
    /// "line": N}` with N the 1-based line of the event file (of an `.evtx` file: the record's
    /// position in it).
    Test {
        /// Rule files or folders.
        #[arg(long, required = true, num_args = 1..)]
        rules: Vec<PathBuf>,
        /// Events: a file of JSON objects or syslog lines, one per line, an `.evtx` export, or a
        /// folder of them.
        #[arg(long)]
        events: PathBuf,
        /// TOML configuration (template settings).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ConfigAction {
    /// Validate a configuration file; every problem is listed with its key.
    Check {
        /// The file.
        file: PathBuf,
    },
    /// Print the effective configuration (defaults filled in, credentials masked).
    Show {
        /// TOML configuration file; without one, the defaults.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum TemplateAction {
    /// Mine a file's lines: prints `template_id<TAB>template` per input line.
    Mine {
        /// The file (`-` for standard input).
        file: PathBuf,
        /// TOML configuration (for `templates.extra_masks`).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Mine only the message of every line, read as syslog even without a header the
        /// parser recognises. By default a line's message is mined as the service mines it:
        /// a syslog line's MSG, a JSON line's `message` (or `msg`, `Message`, `log`, `text`),
        /// any other line whole.
        #[arg(long, conflicts_with = "raw")]
        syslog: bool,
        /// Mine every line whole, header and all.
        #[arg(long)]
        raw: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { config } => run(config),
        Command::Config {
            action: ConfigAction::Check { file },
        } => match load(Some(file.clone())) {
            Ok(_) => {
                println!("{}: ok", file.display());
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Config {
            action: ConfigAction::Show { config },
        } => match load(config) {
            Ok(cfg) => {
                print!("{}", cfg.masked_toml());
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Analyze {
            files,
            config,
            exceptions,
        } => match (load(config), load_exceptions(exceptions.as_deref())) {
            (Ok(cfg), Ok(book)) => match watchpost_dataplane::input_files(&files) {
                Ok(files) if files.is_empty() => {
                    eprintln!("no event files in the paths given");
                    ExitCode::from(2)
                }
                Ok(files) => analyze(&cfg, &files, &book),
                Err(e) => {
                    eprintln!("cannot read the paths given: {e}");
                    ExitCode::from(2)
                }
            },
            (Err(code), _) | (_, Err(code)) => code,
        },
        Command::Templates {
            action:
                TemplateAction::Mine {
                    file,
                    config,
                    syslog,
                    raw,
                },
        } => match load(config) {
            Ok(cfg) => mine(&cfg, &file, syslog, raw),
            Err(code) => code,
        },
        Command::Rules {
            action: RulesAction::Validate { paths },
        } => rules_validate(&paths),
        Command::Rules {
            action:
                RulesAction::Test {
                    rules,
                    events,
                    config,
                },
        } => match load(config) {
            Ok(cfg) => rules_test(&cfg, &rules, &events),
            Err(code) => code,
        },
        Command::Hunt {
            query,
            limit,
            url,
            refresh,
            json,
            config,
        } => {
            // The service's address: the command line's, the environment's, or that of the
            // configuration the service most likely runs with; said in any error, so that a
            // refused connection points at the setting to give.
            let (config, from) = hunt_config(config);
            match load(config) {
                Ok(cfg) => {
                    let (url, from) = match url.or_else(|| std::env::var("WATCHPOST_URL").ok()) {
                        Some(u) => (u, "--url or $WATCHPOST_URL".to_string()),
                        None => (api_url(&cfg), from),
                    };
                    hunt(&cfg, &query.join(" "), limit, (url, from), refresh, json)
                }
                Err(code) => code,
            }
        }
    }
}

/// The package's configuration file, where `watchpost hunt` looks when told of none.
const SYSTEM_CONFIG: &str = "/etc/watchpost/watchpost.toml";

/// The configuration `watchpost hunt` reads the service's address from, and what to call where
/// it came from: `--config`, `$WATCHPOST_CONFIG`, the package's file when it exists, or none
/// (the embedded defaults).
fn hunt_config(given: Option<PathBuf>) -> (Option<PathBuf>, String) {
    if let Some(path) = given {
        let from = format!("--config {}", path.display());
        return (Some(path), from);
    }
    if let Some(path) = std::env::var_os("WATCHPOST_CONFIG").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        let from = format!("$WATCHPOST_CONFIG={}", path.display());
        return (Some(path), from);
    }
    let system = PathBuf::from(SYSTEM_CONFIG);
    if system.is_file() {
        return (Some(system), SYSTEM_CONFIG.to_string());
    }
    (None, "the default configuration".into())
}

/// `http://host:port` of the API `cfg` serves.
fn api_url(cfg: &Config) -> String {
    let host = match cfg.dashboard_bind_address.as_str() {
        "0.0.0.0" | "" => "127.0.0.1".to_string(),
        "::" => "[::1]".to_string(),
        h if h.contains(':') => format!("[{h}]"),
        h => h.to_string(),
    };
    format!("http://{host}:{}", cfg.dashboard_port)
}

/// `watchpost hunt`: one `POST /api/v1/hunt` to the running service. Exit code 0 with an
/// answer (even an empty one), 1 when the service refused or failed the hunt, 2 on a usage or
/// connection problem.
fn hunt(
    cfg: &Config,
    query: &str,
    limit: Option<u32>,
    (url, url_from): (String, String),
    refresh: bool,
    as_json: bool,
) -> ExitCode {
    use watchpost_controlplane::{HttpClient, Method, Trust};
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        eprintln!("--url: {url:?} is not an http:// or https:// URL");
        return ExitCode::from(2);
    }
    let endpoint = format!("{}/api/v1/hunt", url.trim_end_matches('/'));
    let client = match HttpClient::new(Trust::System {
        extra_ca_file: None,
    }) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("cannot set up HTTPS: {why}");
            return ExitCode::from(2);
        }
    };
    // Without --limit the service applies its own llm.hunt_max_results: the default the spec
    // gives the option, and never over the service's cap even when this configuration differs.
    let mut body = serde_json::json!({"query": query, "refresh": refresh});
    if let Some(n) = limit {
        body["limit"] = n.into();
    }
    let body = body.to_string().into_bytes();
    // The service bounds the LLM by llm.hunt_timeout_s; the margin covers the store search.
    let deadline = std::time::Duration::from_secs_f64(cfg.llm.hunt_timeout_s.max(1.0) + 30.0);
    let answer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| {
            rt.block_on(client.send(Method::POST, &endpoint, &[], Some(body), deadline))
                .map_err(|e| e.to_string())
        });
    let answer = match answer {
        Ok(a) => a,
        Err(why) => {
            eprintln!(
                "cannot reach the service at {url} (from {url_from}): {why}; give the service's \
                 configuration with --config or $WATCHPOST_CONFIG, or its address with --url"
            );
            return ExitCode::from(2);
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    if answer.status != 200 {
        eprintln!(
            "hunt failed ({}): {}",
            answer.status,
            v["message"]
                .as_str()
                .unwrap_or(&String::from_utf8_lossy(&answer.body))
        );
        return ExitCode::from(1);
    }
    let mut out = std::io::stdout().lock();
    if as_json {
        let _ = writeln!(out, "{v}");
        return ExitCode::SUCCESS;
    }
    let shown = v["events"].as_array().map_or(0, Vec::len);
    let what = match v["mode"].as_str() {
        Some("entity") => format!(
            "events of {} (entity lookup, no LLM)",
            v["executed"]["entities"]
                .as_array()
                .map(|a| a
                    .iter()
                    .filter_map(|e| e.as_str())
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        ),
        _ => format!(
            "translated by {} into {}",
            v["model"].as_str().unwrap_or("the LLM"),
            v["executed"]
        ),
    };
    let total = v["total"].as_u64().unwrap_or(0);
    let bound = if v["total_exact"].as_bool() == Some(false) {
        "at least "
    } else {
        ""
    };
    let cached = if v["cached"].as_bool() == Some(true) {
        " (cached answer)"
    } else {
        ""
    };
    eprintln!("{what}: {shown} shown of {bound}{total}{cached}");
    for e in v["events"].as_array().into_iter().flatten() {
        let ts = e["timestamp_ns"].as_i64().unwrap_or(0);
        let _ = writeln!(
            out,
            "{}  {}  {}  {}",
            watchpost_controlplane::rfc3339(ts),
            e["source"].as_str().unwrap_or("-"),
            e["host"].as_str().unwrap_or("-"),
            e["message"].as_str().unwrap_or("")
        );
    }
    ExitCode::SUCCESS
}

/// The message of a JSON line, under the names the service reads it from (docs/event.md).
fn json_message_of(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    ["message", "msg", "Message", "log", "text"]
        .iter()
        .find_map(|k| v.get(*k).and_then(|m| m.as_str()).map(str::to_string))
}

/// `watchpost rules validate`.
fn rules_validate(paths: &[PathBuf]) -> ExitCode {
    let files = match watchpost_rules::rule_files(paths) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot read the rule paths: {e}");
            return ExitCode::from(2);
        }
    };
    let mapping = watchpost_rules::Mapping::bundled();
    let mut out = std::io::stdout().lock();
    let (mut valid, mut invalid) = (0usize, 0usize);
    for loaded in watchpost_rules::load_files(&files) {
        let path = &loaded.path;
        let line = match &loaded.rule {
            Ok(rule) => {
                valid += 1;
                let mapped = matches!(rule.body, watchpost_rules::Body::Correlation(_))
                    || mapping.shapes(&rule.logsource).is_some();
                let mut warnings = rule.warnings.clone();
                warnings.extend(mapping.field_warnings(rule));
                if !mapped {
                    warnings.push(
                        "logsource is not in the mapping table: the rule will match no events"
                            .into(),
                    );
                }
                serde_json::json!({
                    "path": path.display().to_string(),
                    "id": rule.id,
                    "title": rule.title,
                    "valid": true,
                    "warnings": warnings,
                })
            }
            Err(e) => {
                invalid += 1;
                serde_json::json!({
                    "path": path.display().to_string(),
                    "valid": false,
                    "error": e.kind.as_str(),
                    "line": e.line(),
                    "column": e.column(),
                    "message": e.message,
                })
            }
        };
        if writeln!(out, "{line}").is_err() {
            return ExitCode::from(2);
        }
    }
    eprintln!("{valid} valid, {invalid} invalid");
    if invalid > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `watchpost rules test`.
fn rules_test(cfg: &Config, rule_paths: &[PathBuf], events: &PathBuf) -> ExitCode {
    let files = match watchpost_rules::rule_files(rule_paths) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot read the rule paths: {e}");
            return ExitCode::from(2);
        }
    };
    let mapping = watchpost_rules::Mapping::bundled();
    let mut rules = Vec::new();
    for loaded in watchpost_rules::load_files(&files) {
        match loaded.rule {
            Ok(r) => {
                // A field no event of the rule's logsource carries is why a test finds nothing.
                for w in mapping.field_warnings(&r) {
                    eprintln!("{}: warning: {w}", loaded.path.display());
                }
                rules.push(Arc::new(r))
            }
            Err(e) => eprintln!("{}: skipped: {e}", loaded.path.display()),
        }
    }
    let set = Arc::new(watchpost_rules::RuleSet::compile(rules, &mapping));
    let mut matcher = match watchpost_normalize::LineMatcher::new(set.clone(), cfg) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("templates.extra_masks: {e}");
            return ExitCode::from(2);
        }
    };
    let event_files = match watchpost_dataplane::input_files(std::slice::from_ref(events)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{}: {e}", events.display());
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let mut matched = 0usize;
    let mut n = 0usize;
    let mut unreadable = 0usize;
    let mut line = Vec::with_capacity(4096);
    // Lines longer than `dataplane.max_line_bytes` are cut as live ingestion cuts them.
    let max = cfg.dataplane.max_line_bytes as usize;
    for path in &event_files {
        let mut reader: Box<dyn std::io::BufRead> = if watchpost_dataplane::is_evtx(path) {
            let mut text = Vec::new();
            match watchpost_dataplane::evtx_lines(path, &mut text) {
                Ok(read) if read.bad_records > 0 => eprintln!(
                    "{}: {} records could not be read",
                    path.display(),
                    read.bad_records
                ),
                Ok(_) => {}
                Err(e) => {
                    // The other files are still tested; the exit code says one was not.
                    eprintln!(
                        "{}: not a readable Windows event log: {e} (skipped)",
                        path.display()
                    );
                    unreadable += 1;
                    continue;
                }
            }
            Box::new(std::io::Cursor::new(text))
        } else {
            match std::fs::File::open(path) {
                Ok(f) => Box::new(std::io::BufReader::new(f)),
                Err(e) => {
                    eprintln!("{}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        };
        let mut line_no = 0usize;
        loop {
            match watchpost_dataplane::read_line(&mut reader, &mut line, max) {
                Ok((0, _)) => break,
                Ok(_) => {
                    n += 1;
                    line_no += 1;
                }
                Err(e) => {
                    eprintln!("{}: read error after line {line_no}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
            let text = line.strip_suffix(b"\r").unwrap_or(&line);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            for &r in matcher.matches(text) {
                matched += 1;
                let m = serde_json::json!({
                    "rule_id": set.rule(r).id,
                    "file": path.display().to_string(),
                    "line": line_no,
                });
                if writeln!(out, "{m}").is_err() {
                    return ExitCode::from(2);
                }
            }
        }
    }
    eprintln!("{} rules, {n} events, {matched} matches", set.len());
    if unreadable > 0 {
        eprintln!("{unreadable} unreadable event log files skipped");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Loads and validates, printing every problem; exit code 2 on a bad configuration.
fn load(path: Option<PathBuf>) -> Result<Config, ExitCode> {
    let mut cfg = Config::load(path.as_deref()).map_err(|e| {
        let name = path
            .as_ref()
            .map_or("configuration".into(), |p| p.display().to_string());
        eprintln!("{name}: invalid configuration:");
        for p in &e.problems {
            eprintln!("  {}: {}", p.key, p.problem);
        }
        ExitCode::from(2)
    })?;
    cfg.resolve_secrets().map_err(|e| {
        for p in &e.problems {
            eprintln!("  {}: {}", p.key, p.problem);
        }
        ExitCode::from(2)
    })?;
    Ok(cfg)
}

fn run(config: Option<PathBuf>) -> ExitCode {
    // SIGHUP's default action ends the process, and `systemctl reload` may send one while the
    // service starts, before the reload listener exists: ignored until then.
    // SAFETY: setting a signal's disposition to ignore; no handler runs.
    unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
    let config_path = config.clone();
    let cfg = match load(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    init_logging(&cfg);
    match watchpost_controlplane::run(cfg, config_path) {
        Ok(()) => ExitCode::SUCCESS,
        // The pipeline has logged what it could not store.
        Err(e @ watchpost_controlplane::ServiceError::Incomplete) => ExitCode::from(e.exit_code()),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The service's log: plain text on standard output at `log_level`.
fn init_logging(cfg: &Config) {
    let level = cfg.log_level.parse().unwrap_or(tracing::Level::INFO);
    // Colour codes only on a terminal: a log written to a file or the journal stays plain text.
    // llama.cpp (the local LLM runner) logs hundreds of lines per model load at its info level:
    // only its warnings and errors are kept.
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let targets = tracing_subscriber::filter::Targets::new()
        .with_default(level)
        .with_target("llama-cpp-2", tracing::Level::WARN.min(level));
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false)
        .with_ansi(std::io::stdout().is_terminal())
        .finish()
        .with(targets)
        .init();
}

/// The exceptions of `--exceptions`: drafts are checked as the API checks them (a refused one
/// names its position and field, exit code 2), listed ones are taken as they are.
fn load_exceptions(
    path: Option<&std::path::Path>,
) -> Result<watchpost_dataplane::ExceptionBook, ExitCode> {
    use watchpost_proto::{Exception, ExceptionDraft};
    let book = watchpost_dataplane::ExceptionBook::in_memory(Vec::new());
    let Some(path) = path else {
        return Ok(book);
    };
    let fail = |message: String| {
        eprintln!("{}: {message}", path.display());
        ExitCode::from(2)
    };
    let text = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| fail(format!("not JSON: {e}")))?;
    let items = match value {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Object(mut listing) => match listing.remove("items") {
            Some(serde_json::Value::Array(items)) => items,
            _ => {
                return Err(fail(
                    "expected an array of exceptions or a listing with `items`".into(),
                ));
            }
        },
        _ => return Err(fail("expected an array of exceptions".into())),
    };
    let mut listed = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if let Ok(mut e) = serde_json::from_value::<Exception>(item.clone()) {
            // The summary counts this run's hits, not the service's.
            e.hits = 0;
            e.last_hit_ns = None;
            listed.push(e);
            continue;
        }
        let draft: ExceptionDraft =
            serde_json::from_value(item).map_err(|e| fail(format!("exception {i}: {e}")))?;
        let made = book
            .create(draft, watchpost_proto::now_ns())
            .map_err(|e| fail(format!("exception {i}: {e}")))?;
        listed.push(made);
    }
    Ok(watchpost_dataplane::ExceptionBook::in_memory(listed))
}

fn analyze(
    cfg: &Config,
    files: &[PathBuf],
    exceptions: &watchpost_dataplane::ExceptionBook,
) -> ExitCode {
    use watchpost_dataplane::{analyze_with, write_alerts};
    let (alerts, summary) = match analyze_with(cfg, files, exceptions) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if write_alerts(&mut out, files, &alerts).is_err() || out.flush().is_err() {
        return ExitCode::from(1);
    }
    eprintln!("{}", serde_json::to_string(&summary).unwrap_or_default());
    // The others were analysed; the exit code still says that some input was not.
    for skipped in &summary.unreadable_files {
        eprintln!("{skipped} (skipped)");
    }
    if summary.unreadable_files.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn mine(cfg: &Config, file: &std::path::Path, syslog: bool, raw: bool) -> ExitCode {
    use watchpost_normalize::{MinerConfig, TemplateMiner};
    let mcfg = MinerConfig::from_config(&cfg.templates);
    let mut miner = match TemplateMiner::new(&mcfg) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("templates.extra_masks: {e}");
            return ExitCode::from(2);
        }
    };
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        match std::fs::File::open(file) {
            Ok(f) => Box::new(std::io::BufReader::new(f)),
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                return ExitCode::from(1);
            }
        }
    };
    let now = watchpost_proto::now_ns();
    let mut ids = Vec::new();
    for line in reader.split(b'\n') {
        let Ok(line) = line else { break };
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\r');
        let json_message;
        let msg = if raw {
            text
        } else if !syslog && text.trim_start().starts_with('{') {
            json_message = json_message_of(text);
            json_message.as_deref().unwrap_or(text)
        } else {
            // A header left in would be most of the template: every line of a host and
            // minute alike, `Accepted` and `Failed` merged for their shared prefix.
            let rec = watchpost_normalize::parse_syslog(text.as_bytes(), now);
            let structured = rec.format != watchpost_normalize::SyslogFormat::Unstructured;
            if syslog || structured {
                text.get(rec.msg).unwrap_or(text)
            } else {
                text
            }
        };
        ids.push(miner.mine(msg).id);
    }
    // Templates generalise as lines arrive: print each line's final template.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for id in ids {
        if writeln!(out, "{id:016x}\t{}", miner.template(id).unwrap_or("")).is_err() {
            break;
        }
    }
    let _ = out.flush();
    ExitCode::SUCCESS
}
