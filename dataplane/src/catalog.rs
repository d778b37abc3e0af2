//! The live Sigma catalogue: the bundled rules, the rules of `detection.sigma_rules_dirs` and the
//! operator's uploads, compiled into the [`RuleSet`] stage A evaluates.
//!
//! Why a catalogue and not a rule set: rules change while the service runs (an upload, a toggle),
//! and three parties must agree on what a rule number means: stage A (which reports matches by
//! number), stage B (which turns them into alerts) and the API (which lists rules). Detection
//! rules are therefore numbered in load order and never renumbered: uploads append, toggles flip
//! a flag. Each change compiles a new [`RuleSet`] and bumps [`Catalog::version`]; a stage A
//! worker checks the version once per batch (one relaxed atomic load) and takes the new set.
//!
//! Enabled flags live in the store's `rules` family, so a toggle survives restarts; uploads are
//! files in `detection.sigma_custom_upload_dir`, read back at start.

use crate::Error;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use watchpost_proto::Config;
use watchpost_rules::{
    BUNDLED, Body, Mapping, Origin, Plan, Rule, RuleEntry, RuleError, RuleSet, load_files,
    parse_rule, rule_files,
};
use watchpost_store::{Store, StoreError};

struct State {
    /// Detection rules, numbered as the compiled set numbers them.
    detection: Vec<Arc<RuleEntry>>,
    /// Per detection rule: removed from its folder by a reload. A removed rule keeps its
    /// number (switched off, listed nowhere), so a match stage A numbered before the reload
    /// still names the rule it matched; numbers are never reused.
    retired: Vec<bool>,
    /// Correlation rules.
    correlation: Vec<Arc<RuleEntry>>,
    compiled: Arc<RuleSet>,
    /// The enabled correlations, compiled against `compiled`'s numbering.
    plan: Arc<Plan>,
    /// The catalogue version that compiled `plan`: correlation hits carry it, so stage B reads
    /// their numbers with the plan that gave them.
    plan_version: u64,
}

/// The catalogue, shared by stage A, stage B and the API (`Arc<Catalog>`).
pub struct Catalog {
    state: RwLock<State>,
    version: AtomicU64,
    mapping: Mapping,
    custom_dir: PathBuf,
    custom_max: u32,
    /// `detection.sigma_custom_max_total_bytes`.
    custom_max_bytes: u64,
    store: Option<Arc<Store>>,
    /// Files that failed to load at start or at the last reload: (path, error).
    load_errors: std::sync::Mutex<Vec<(String, String)>>,
    /// Held by a reload and by an upload for their whole length: both change the rule folders'
    /// view, and a reload reads the folders before it takes the state's lock.
    changes: std::sync::Mutex<()>,
}

/// What a reload of the rule folders changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct CatalogReload {
    /// Rules loaded now (detection and correlation, bundled and custom included).
    pub rules: usize,
    /// Rules new since the last load.
    pub added: usize,
    /// Rules whose text changed.
    pub changed: usize,
    /// Rules no longer in any folder, switched off.
    pub removed: usize,
    /// Files that did not load: (path, error).
    pub errors: Vec<(String, String)>,
}

/// Key of an enabled flag in the `rules` family.
fn enabled_key(id: &str) -> Vec<u8> {
    let mut k = b"enabled:".to_vec();
    k.extend_from_slice(id.as_bytes());
    k
}

impl Catalog {
    /// Loads the bundled rules, every folder of `detection.sigma_rules_dirs` and the custom
    /// uploads, with the enabled flags saved in `store`. A rule file that does not parse is
    /// logged and listed in [`Catalog::load_errors`] (a SigmaHQ checkout may hold rules of a
    /// newer specification); a configured folder that does not exist is an error.
    pub fn load(cfg: &Config, store: Option<Arc<Store>>) -> Result<Catalog, Error> {
        let mapping = Mapping::configured(
            &cfg.detection.sigma_field_mappings,
            &cfg.detection.sigma_logsource_mappings,
        )?;
        let custom_dir = cfg.sigma_custom_upload_dir();
        let (entries, mut errors) = gather(cfg, &mapping, &custom_dir, store.is_some())?;
        let mut state = State {
            detection: Vec::new(),
            retired: Vec::new(),
            correlation: Vec::new(),
            compiled: Arc::new(RuleSet::default()),
            plan: Arc::new(Plan::default()),
            plan_version: 1,
        };
        for e in entries {
            let id = e.rule.id.clone();
            let taken = state
                .detection
                .iter()
                .chain(&state.correlation)
                .any(|x| x.rule.id == id);
            if taken {
                errors.push((e.path.clone(), format!("duplicate rule id {id}: skipped")));
                continue;
            }
            saved_flag(store.as_deref(), &e)?;
            if e.is_detection() {
                state.detection.push(Arc::new(e));
                state.retired.push(false);
            } else {
                state.correlation.push(Arc::new(e));
            }
        }
        for (path, e) in &errors {
            tracing::warn!("sigma rule {path}: {e}");
        }
        state.compiled = Arc::new(compile(&state, &mapping));
        state.plan = Arc::new(compile_plan(&state, &mapping));
        for (id, e) in state.plan.errors() {
            tracing::warn!("correlation rule {id} is not evaluated: {e}");
        }
        Ok(Catalog {
            state: RwLock::new(state),
            version: AtomicU64::new(1),
            mapping,
            custom_dir,
            custom_max: cfg.detection.sigma_custom_max_rules,
            custom_max_bytes: cfg.detection.sigma_custom_max_total_bytes,
            store,
            load_errors: std::sync::Mutex::new(errors),
            changes: std::sync::Mutex::new(()),
        })
    }

    /// Files that failed to load at start or at the last reload: (path, error).
    pub fn load_errors(&self) -> Vec<(String, String)> {
        self.load_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reads the bundled rules, `cfg`'s `detection.sigma_rules_dirs` and the custom folder
    /// again and applies what changed (a configuration reload). Rules keep their numbers: a
    /// changed rule is replaced in place, a removed one is switched off, a new one is added at
    /// the end; enabled flags stay as saved. A folder that does not exist is an error and
    /// changes nothing. The field and logsource mappings are those of the start.
    pub fn reload(&self, cfg: &Config) -> Result<CatalogReload, Error> {
        // One change of the folders at a time: an upload that landed between this read of the
        // folders and the swap below would otherwise be undone.
        let _changing = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, mut errors) = gather(cfg, &self.mapping, &self.custom_dir, false)?;
        // A file that no longer parses keeps the rule it held as loaded (a typo in an edit
        // does not switch a working rule off); its error is reported.
        let failed: std::collections::HashSet<String> =
            errors.iter().map(|(path, _)| path.clone()).collect();
        let mut s = self.write();
        let mut report = CatalogReload::default();
        let mut detection = s.detection.clone();
        let mut retired: Vec<bool> = s
            .detection
            .iter()
            .zip(&s.retired)
            .map(|(e, was)| *was || !failed.contains(&e.path))
            .collect();
        let mut correlation: Vec<Arc<RuleEntry>> = s
            .correlation
            .iter()
            .filter(|e| failed.contains(&e.path))
            .cloned()
            .collect();
        let mut seen: std::collections::HashSet<String> = s
            .live()
            .chain(&s.correlation)
            .filter(|e| failed.contains(&e.path))
            .map(|e| e.rule.id.clone())
            .collect();
        // By id: the rule's number (detection rules), and the text it had.
        let mut number: std::collections::HashMap<String, usize> = detection
            .iter()
            .enumerate()
            .map(|(i, e)| (e.rule.id.clone(), i))
            .collect();
        let before: std::collections::HashMap<&str, &str> = s
            .live()
            .chain(&s.correlation)
            .map(|e| (e.rule.id.as_str(), e.yaml.as_str()))
            .collect();
        for e in entries {
            let id = e.rule.id.clone();
            if !seen.insert(id.clone()) {
                errors.push((e.path.clone(), format!("duplicate rule id {id}: skipped")));
                continue;
            }
            saved_flag(self.store.as_deref(), &e)?;
            match before.get(id.as_str()) {
                None => report.added += 1,
                Some(yaml) if *yaml != e.yaml => report.changed += 1,
                Some(_) => {}
            }
            if e.is_detection() {
                match number.get(&id) {
                    Some(&i) => {
                        detection[i] = Arc::new(e);
                        retired[i] = false;
                    }
                    None => {
                        number.insert(id, detection.len());
                        detection.push(Arc::new(e));
                        retired.push(false);
                    }
                }
            } else {
                correlation.push(Arc::new(e));
            }
        }
        report.removed = s
            .retired
            .iter()
            .zip(&retired)
            .filter(|(was, now)| !**was && **now)
            .count()
            + s.correlation
                .iter()
                .filter(|c| !seen.contains(&c.rule.id))
                .count();
        report.rules = seen.len();
        for (path, e) in &errors {
            tracing::warn!("sigma rule {path}: {e}");
        }
        report.errors = errors.clone();
        *self.load_errors.lock().unwrap_or_else(|p| p.into_inner()) = errors;
        if report.added + report.changed + report.removed == 0 {
            // Nothing changed: the compiled set, the plan and the open correlation windows of
            // stage B stay as they are.
            return Ok(report);
        }
        s.detection = detection;
        s.retired = retired;
        s.correlation = correlation;
        s.compiled = Arc::new(compile(&s, &self.mapping));
        s.plan = Arc::new(compile_plan(&s, &self.mapping));
        for (id, e) in s.plan.errors() {
            tracing::warn!("correlation rule {id} is not evaluated: {e}");
        }
        s.plan_version = self.version.fetch_add(1, Ordering::AcqRel) + 1;
        Ok(report)
    }

    /// Bumped on every change of the compiled set.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The compiled set of the current version.
    pub fn current(&self) -> Arc<RuleSet> {
        self.read().compiled.clone()
    }

    /// The compiled correlations and the version that compiled them.
    pub fn plan(&self) -> (u64, Arc<Plan>) {
        let s = self.read();
        (s.plan_version, s.plan.clone())
    }

    /// The version with its rule set and correlation plan, read together (a change bumps the
    /// version while it holds the lock, so they always agree).
    pub fn snapshot(&self) -> (u64, Arc<RuleSet>, (u64, Arc<Plan>)) {
        let s = self.read();
        (
            self.version(),
            s.compiled.clone(),
            (s.plan_version, s.plan.clone()),
        )
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-changed (every change
        // builds the new set before swapping it in), so a poisoned lock is safe to keep using.
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Detection rule number `index` (as the compiled set and stage A number it).
    pub fn detection(&self, index: u32) -> Option<Arc<RuleEntry>> {
        self.read().detection.get(index as usize).cloned()
    }

    /// Every rule: detection rules in number order, then correlation rules.
    pub fn all(&self) -> Vec<Arc<RuleEntry>> {
        let s = self.read();
        s.live().chain(&s.correlation).cloned().collect()
    }

    /// The correlation rules.
    pub fn correlations(&self) -> Vec<Arc<RuleEntry>> {
        self.read().correlation.clone()
    }

    /// The rule with this id.
    pub fn find(&self, id: &str) -> Option<Arc<RuleEntry>> {
        let s = self.read();
        s.live()
            .chain(&s.correlation)
            .find(|e| e.rule.id == id)
            .cloned()
    }

    /// Turns a rule on or off, persistently. `Ok(None)` when no rule has that id.
    pub fn set_enabled(&self, id: &str, on: bool) -> Result<Option<Arc<RuleEntry>>, StoreError> {
        let mut s = self.write();
        let Some(e) = s
            .live()
            .chain(&s.correlation)
            .find(|e| e.rule.id == id)
            .cloned()
        else {
            return Ok(None);
        };
        if let Some(store) = &self.store {
            store.put_rule_flag(&enabled_key(id), if on { b"1" } else { b"0" })?;
        }
        if e.enabled() != on {
            e.set_enabled(on);
            if e.is_detection() {
                let mut set = (*s.compiled).clone();
                set.set_enabled(id, on);
                s.compiled = Arc::new(set);
                self.version.fetch_add(1, Ordering::AcqRel);
            } else {
                s.plan = Arc::new(compile_plan(&s, &self.mapping));
                s.plan_version = self.version.fetch_add(1, Ordering::AcqRel) + 1;
            }
        }
        Ok(Some(e))
    }

    /// Checks `yaml` as an upload would (valid, no id collision, room in the folder) without
    /// storing anything: dry runs.
    pub fn check_upload(&self, yaml: &str) -> Result<Rule, Error> {
        let rule = parse_rule(yaml).map_err(Error::InvalidRule)?;
        self.admit(&self.read(), rule, yaml).map(|(rule, _)| rule)
    }

    /// How `rule` would be listed once uploaded.
    pub fn preview(&self, rule: Rule, yaml: String) -> RuleEntry {
        RuleEntry::new(rule, yaml, Origin::Custom, String::new(), &self.mapping)
    }

    /// The logsource and field tables rules are compiled with.
    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }

    /// A one-rule set of `rule`, compiled as the live set would compile it (for dry runs).
    pub fn compile_one(&self, rule: Rule) -> RuleSet {
        RuleSet::compile([Arc::new(rule)], &self.mapping)
    }

    /// The checks of an uploaded rule against state `s`: the rule and the file it would be
    /// stored in. The rule is parsed before, outside the catalogue's lock: parsing a large rule
    /// takes a while, and matching and listing wait for the lock meanwhile.
    fn admit(&self, s: &State, rule: Rule, yaml_text: &str) -> Result<(Rule, PathBuf), Error> {
        let yaml_len = yaml_text.len();
        if let Err(why) = check_rule_id(&rule.id) {
            let pos = watchpost_rules::Pos {
                line: rule_id_line(yaml_text).unwrap_or(1),
                column: 1,
            };
            return Err(Error::InvalidRule(RuleError::at(
                pos,
                watchpost_rules::ErrorKind::Schema,
                format!(
                    "id {:?}: {why}",
                    rule.id.chars().take(80).collect::<String>()
                ),
            )));
        }
        let regexes = rule.regex_values();
        if regexes > watchpost_rules::MAX_UPLOAD_REGEX_VALUES {
            return Err(Error::InvalidRule(RuleError::at(
                watchpost_rules::Pos { line: 1, column: 1 },
                watchpost_rules::ErrorKind::Value,
                format!(
                    "rule {} compiles to {regexes} regular expressions, more than an upload may \
                     ({}): each costs memory and, on every event it is not ruled out for, time; \
                     use `contains`, `startswith` or `endswith` lists, or split the rule",
                    rule.id,
                    watchpost_rules::MAX_UPLOAD_REGEX_VALUES
                ),
            )));
        }
        let loaded = s.live().chain(&s.correlation).any(|e| e.rule.id == rule.id);
        // A checked id is its own file name: two ids never share one (sanitising made `a/b`
        // and `a_b` one file, refused as "already loaded" though no rule had that id).
        let path = self.custom_dir.join(format!("{}.yml", rule.id));
        if loaded {
            return Err(Error::RuleCollision(rule.id));
        }
        if path.exists() {
            // A file of that name that did not load (a rule that failed to parse, a file put
            // there by hand): not replaced by an upload.
            return Err(Error::RuleFileTaken(path));
        }
        let (files, bytes) = custom_files(&self.custom_dir).map_err(Error::WriteRule)?;
        if files >= self.custom_max as usize {
            return Err(Error::RulesFull(self.custom_max));
        }
        // The rules' text bounds what they cost compiled (each value a pattern): a bound on the
        // folder's bytes is a bound on the custom rules' memory, which up to
        // `sigma_custom_max_rules` rules of the largest size each would not be.
        if bytes + yaml_len as u64 > self.custom_max_bytes {
            return Err(Error::RulesTooLarge {
                stored: bytes,
                upload: yaml_len as u64,
                max: self.custom_max_bytes,
            });
        }
        if let Body::Correlation(_) = &rule.body {
            // A correlation that cannot be evaluated (an unknown rule, a cycle) is refused
            // rather than stored to do nothing.
            let mut correlations: Vec<Arc<Rule>> =
                s.correlation.iter().map(|e| e.rule.clone()).collect();
            correlations.push(Arc::new(rule.clone()));
            let detections: Vec<Arc<Rule>> = s.detection.iter().map(|e| e.rule.clone()).collect();
            let plan = Plan::compile(&detections, &correlations, &self.mapping);
            if let Some((_, e)) = plan.errors().iter().find(|(id, _)| *id == rule.id) {
                let pos = watchpost_rules::Pos { line: 1, column: 1 };
                return Err(Error::InvalidRule(RuleError::at(
                    pos,
                    watchpost_rules::ErrorKind::Schema,
                    format!("correlation cannot be evaluated: {e}"),
                )));
            }
        }
        Ok((rule, path))
    }

    /// Validates and stores an upload as `<id>.yml` in the custom folder, and applies it at
    /// once.
    pub fn upload(&self, yaml: &str) -> Result<Arc<RuleEntry>, Error> {
        let rule = parse_rule(yaml).map_err(Error::InvalidRule)?;
        let _changing = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        // Held across the check and the write: two uploads of one id cannot both pass.
        let mut s = self.write();
        let (rule, path) = self.admit(&s, rule, yaml)?;
        // Written aside then renamed: a crash leaves the old state or the new, never half a file.
        let tmp = path.with_extension("yml.tmp");
        std::fs::write(&tmp, yaml)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(Error::WriteRule)?;
        let entry = Arc::new(RuleEntry::new(
            rule,
            yaml.to_string(),
            Origin::Custom,
            path.display().to_string(),
            &self.mapping,
        ));
        if entry.is_detection() {
            // The id of a rule a reload removed takes its number back: two entries of one id
            // would be switched off together.
            match s.detection.iter().position(|e| e.rule.id == entry.rule.id) {
                Some(i) => {
                    s.detection[i] = entry.clone();
                    s.retired[i] = false;
                }
                None => {
                    s.detection.push(entry.clone());
                    s.retired.push(false);
                }
            }
            s.compiled = Arc::new(compile(&s, &self.mapping));
        } else {
            s.correlation.push(entry.clone());
        }
        s.plan = Arc::new(compile_plan(&s, &self.mapping));
        s.plan_version = self.version.fetch_add(1, Ordering::AcqRel) + 1;
        Ok(entry)
    }
}

impl State {
    /// The detection rules not retired by a reload.
    fn live(&self) -> impl Iterator<Item = &Arc<RuleEntry>> {
        self.detection
            .iter()
            .zip(&self.retired)
            .filter(|(_, retired)| !**retired)
            .map(|(e, _)| e)
    }
}

/// Compiles the detection rules, keeping each disabled or retired one switched off.
fn compile(s: &State, mapping: &Mapping) -> RuleSet {
    let mut set = RuleSet::compile(s.detection.iter().map(|e| e.rule.clone()), mapping);
    for (e, retired) in s.detection.iter().zip(&s.retired) {
        if *retired || !e.enabled() {
            set.set_enabled(&e.rule.id, false);
        }
    }
    set
}

/// Applies the enabled flag saved for `e`'s rule, when there is one.
fn saved_flag(store: Option<&Store>, e: &RuleEntry) -> Result<(), Error> {
    if let Some(s) = store
        && let Some(v) =
            s.rule_flag(&enabled_key(&e.rule.id))
                .map_err(|source| Error::RuleFlag {
                    rule_id: e.rule.id.clone(),
                    source,
                })?
    {
        e.set_enabled(v == b"1");
    }
    Ok(())
}

/// Longest rule id an upload may have: a UUID is 36 characters; SigmaHQ's longest name is 60.
pub const MAX_RULE_ID_CHARS: usize = 128;

/// Checks an uploaded rule's id: 1 to [`MAX_RULE_ID_CHARS`] characters of `A-Z a-z 0-9 . _ -`,
/// not starting with `.` and without `..`, so that it is a file name of its own, in no other
/// folder, and safe in a log line (docs/sigma.md, "Uploads"). An id of 251 characters or more
/// failed with "File name too long" as a 500; `..`, `/`, NUL and newlines were accepted.
pub fn check_rule_id(id: &str) -> Result<(), RuleIdError> {
    let chars = id.chars().count();
    if chars == 0 || chars > MAX_RULE_ID_CHARS {
        return Err(RuleIdError::Length(chars));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(RuleIdError::Character(c));
    }
    if id.starts_with('.') || id.contains("..") {
        return Err(RuleIdError::Dots);
    }
    Ok(())
}

/// Why an uploaded rule's id cannot be its file name ([`check_rule_id`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleIdError {
    /// Empty or longer than [`MAX_RULE_ID_CHARS`] (the count it has).
    #[error("must be 1 to {MAX_RULE_ID_CHARS} characters (it has {0})")]
    Length(usize),
    /// A character outside the alphabet.
    #[error(
        "{0:?} is not allowed: an uploaded rule's id is made of A-Z, a-z, 0-9, '.', '_' and '-'"
    )]
    Character(char),
    /// A leading `.` or a `..`.
    #[error("must not start with '.' or hold '..'")]
    Dots,
}

/// The line of a rule's `id:` key in its YAML, for an error placed on it.
fn rule_id_line(yaml: &str) -> Option<usize> {
    yaml.lines()
        .position(|l| l.trim_start().starts_with("id:"))
        .map(|i| i + 1)
}

/// Rules read, and the files that failed to load: (path, error).
type Gathered = (Vec<RuleEntry>, Vec<(String, String)>);

/// The bundled rules, the rule folders' and the custom folder's, and the files that failed.
/// Creates the custom folder when `create` (the live service) and it is missing.
fn gather(
    cfg: &Config,
    mapping: &Mapping,
    custom_dir: &Path,
    create: bool,
) -> Result<Gathered, Error> {
    let mut errors = Vec::new();
    let mut entries: Vec<RuleEntry> = Vec::new();
    for (path, text) in BUNDLED {
        match parse_rule(text) {
            Ok(r) => entries.push(RuleEntry::new(
                r,
                text.to_string(),
                Origin::Bundled,
                path.to_string(),
                mapping,
            )),
            Err(e) => errors.push((path.to_string(), e.to_string())),
        }
    }
    for dir in &cfg.detection.sigma_rules_dirs {
        let dir = PathBuf::from(dir);
        if !dir.is_dir() {
            return Err(Error::RulesDir(dir));
        }
        read_folder(&dir, Origin::Directory, mapping, &mut entries, &mut errors)?;
    }
    if custom_dir.is_dir() {
        read_folder(
            custom_dir,
            Origin::Custom,
            mapping,
            &mut entries,
            &mut errors,
        )?;
    } else if create {
        // The live service creates the folder; offline tools only read it when it exists.
        std::fs::create_dir_all(custom_dir).map_err(|source| Error::Content {
            context: format!(
                "detection.sigma_custom_upload_dir: cannot create {}",
                custom_dir.display()
            ),
            source,
        })?;
    }
    Ok((entries, errors))
}

/// Compiles the enabled correlation rules of `s` against its detection numbering.
fn compile_plan(s: &State, mapping: &Mapping) -> Plan {
    let detections: Vec<Arc<Rule>> = s.detection.iter().map(|e| e.rule.clone()).collect();
    let correlations: Vec<Arc<Rule>> = s
        .correlation
        .iter()
        .filter(|e| e.enabled())
        .map(|e| e.rule.clone())
        .collect();
    Plan::compile(&detections, &correlations, mapping)
}

fn read_folder(
    dir: &Path,
    origin: Origin,
    mapping: &Mapping,
    entries: &mut Vec<RuleEntry>,
    errors: &mut Vec<(String, String)>,
) -> Result<(), Error> {
    let files = rule_files(&[dir.to_path_buf()]).map_err(|source| Error::Content {
        context: format!("cannot read rule folder {}", dir.display()),
        source,
    })?;
    for l in load_files(&files) {
        let f = l.path.display().to_string();
        match l.rule {
            Ok(r) => entries.push(RuleEntry::new(r, l.text, origin, f, mapping)),
            Err(e) => errors.push((f, e.to_string())),
        }
    }
    Ok(())
}

/// The custom rule files: how many, and their bytes together.
fn custom_files(dir: &Path) -> std::io::Result<(usize, u64)> {
    let files = rule_files(&[dir.to_path_buf()])?;
    let mut bytes = 0;
    for f in &files {
        bytes += std::fs::metadata(f)?.len();
    }
    Ok((files.len(), bytes))
}

/// Stage B names the rules stage A reports through the catalogue.
impl watchpost_detect::RuleBook for Catalog {
    fn plan(&self) -> (u64, Arc<Plan>) {
        Catalog::plan(self)
    }
    fn detection(&self, index: u32) -> Option<Arc<RuleEntry>> {
        Catalog::detection(self, index)
    }
    fn detection_count(&self) -> u32 {
        self.read().detection.len() as u32
    }
    fn find(&self, rule_id: &str) -> Option<Arc<RuleEntry>> {
        Catalog::find(self, rule_id)
    }
    fn version(&self) -> u64 {
        Catalog::version(self)
    }
}
