//! A Sigma rule read from YAML and checked against the Sigma specification (v2): its metadata,
//! logsource, searches (values compiled with their modifiers) and condition.

use crate::condition::{self, Expr};
use crate::error::Pos;
use crate::error::{ErrorKind, RuleError};
use crate::pattern::{
    NumOp, Pattern, Place, base64, base64_offsets, compile_regex, compile_text, parse_cidr,
    parse_number, utf16, windash,
};
use crate::yaml::{Node, Value, parse_documents};

/// Severity of a rule, as Sigma names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Informational.
    Informational,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Critical.
    Critical,
}

impl Level {
    /// From its name.
    pub fn parse(text: &str) -> Option<Level> {
        Some(match text {
            "informational" => Level::Informational,
            "low" => Level::Low,
            "medium" => Level::Medium,
            "high" => Level::High,
            "critical" => Level::Critical,
            _ => return None,
        })
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Informational => "informational",
            Level::Low => "low",
            Level::Medium => "medium",
            Level::High => "high",
            Level::Critical => "critical",
        }
    }

    /// On Watchpost's severity scale (0 to 5): informational 1, low 2, medium 3, high 4,
    /// critical 5.
    pub fn severity(self) -> u8 {
        self as u8 + 1
    }
}

/// Which events a rule is about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Logsource {
    /// `product` (windows, linux...).
    pub product: Option<String>,
    /// `service` (security, sshd...).
    pub service: Option<String>,
    /// `category` (process_creation, webserver...).
    pub category: Option<String>,
}

impl Logsource {
    /// The keys it sets, in the specification's order: (`product`, value), (`service`, ...),
    /// (`category`, ...).
    pub fn parts(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("product", &self.product),
            ("service", &self.service),
            ("category", &self.category),
        ]
        .into_iter()
        .filter_map(|(key, value)| value.as_deref().map(|v| (key, v)))
    }
}

/// One field test of a search (or a keyword test when `field` is `None`).
#[derive(Clone, Debug)]
pub struct Item {
    /// The field as the rule names it; `None` for a keyword search.
    pub field: Option<String>,
    /// Alternatives: any may match, or all must (`all`).
    pub patterns: Vec<Pattern>,
    /// Every pattern must match.
    pub all: bool,
    /// Where the item is written.
    pub pos: Pos,
}

/// A named search of the detection section.
#[derive(Clone, Debug)]
pub struct Search {
    /// Its identifier.
    pub name: String,
    /// Alternatives (a list of maps, or a keyword list as one alternative of one item); each is
    /// a conjunction of items.
    pub any_of: Vec<Vec<Item>>,
    /// Where it is written.
    pub pos: Pos,
}

/// A Sigma correlation rule (its evaluation lives in the correlation engine).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Correlation {
    /// `event_count`, `value_count`, `temporal` or `temporal_ordered`.
    pub kind: String,
    /// The rules it joins (ids or names).
    pub rules: Vec<String>,
    /// Fields that group events.
    pub group_by: Vec<String>,
    /// Window, seconds.
    pub timespan_s: u64,
    /// Count condition: operators and bounds, all of which must hold (`gte: 10`, or a range
    /// `gt: 100, lte: 200`). For `temporal` types it counts distinct rules; empty means all.
    pub condition: Vec<(String, f64)>,
    /// The field counted by `value_count`.
    pub field: Option<String>,
    /// `aliases`: a group-by name that is not a field, and the field it stands for in each
    /// referenced rule (`alias -> [(rule, field)]`), so rules over different logsources join.
    pub aliases: Vec<(String, Vec<(String, String)>)>,
    /// `generate`: whether the referenced rules also alert on their own. The specification's
    /// default is false: a rule written as a building block only feeds its correlations.
    pub generate: bool,
}

/// What the rule detects with.
#[derive(Clone, Debug)]
pub enum Body {
    /// Searches over single events and a condition joining them.
    Detection {
        /// The searches, in document order.
        searches: Vec<Search>,
        /// The condition (several `condition` entries are joined with `or`).
        condition: Expr,
    },
    /// A correlation over other rules' matches.
    Correlation(Correlation),
}

/// A parsed, validated rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// `id` (a UUID by convention; any non-empty string is taken).
    pub id: String,
    /// `name` (v2: how correlation rules refer to it), if any.
    pub name: Option<String>,
    /// `title`.
    pub title: String,
    /// `status`.
    pub status: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `author`.
    pub author: Option<String>,
    /// `date`.
    pub date: Option<String>,
    /// `references`.
    pub references: Vec<String>,
    /// `tags` (ATT&CK tags among them: `attack.t1059.001`, `attack.execution`).
    pub tags: Vec<String>,
    /// `falsepositives`.
    pub falsepositives: Vec<String>,
    /// `level`.
    pub level: Option<Level>,
    /// `logsource`.
    pub logsource: Logsource,
    /// Detection or correlation.
    pub body: Body,
    /// Non-fatal findings (a deprecated form, a placeholder without a value).
    pub warnings: Vec<String>,
}

fn schema(pos: Pos, msg: impl Into<String>) -> RuleError {
    RuleError::at(pos, ErrorKind::Schema, msg)
}

fn string_of(n: &Node, what: &str) -> Result<String, RuleError> {
    n.as_str().map(str::to_string).ok_or_else(|| {
        schema(
            n.pos,
            format!("`{what}` must be a string, not {}", n.kind()),
        )
    })
}

fn strings_of(n: &Node, what: &str) -> Result<Vec<String>, RuleError> {
    match &n.value {
        Value::Scalar(s) if s.is_null() => Ok(Vec::new()),
        Value::Scalar(s) => Ok(vec![s.text.clone()]),
        Value::Seq(items) => items.iter().map(|i| string_of(i, what)).collect(),
        Value::Map(_) => Err(schema(n.pos, format!("`{what}` must be a list of strings"))),
    }
}

/// Most rules one correlation may reference. Public correlations reference two to five; the
/// bound keeps a reference's slot in a byte and an ordered chain's progress in a 64-bit mask.
pub const MAX_CORRELATION_RULES: usize = 64;

/// Status values of the specification.
const STATUSES: [&str; 5] = [
    "stable",
    "test",
    "experimental",
    "deprecated",
    "unsupported",
];

/// Largest rule text, in bytes: 30 times the largest public SigmaHQ rule (about 30 KB). Checked
/// before parsing, so that what a rule costs to parse, compile and hold stays bounded.
pub const MAX_RULE_BYTES: usize = 1 << 20;

/// Most scalars (field names and values) in one rule: ten times the largest public rule's. Each
/// value becomes a compiled pattern (a regex for wildcards, some kilobytes), so the bound is what
/// keeps one rule's memory in megabytes.
pub const MAX_RULE_VALUES: usize = 10_000;

/// Most regular expressions of its own ([`Rule::regex_values`]) an uploaded rule may hold: far
/// past SigmaHQ's most (single digits), far short of what hurt (sixteen uploads of 9,900 `re`
/// values each cut the rate of the whole pipeline from 200k to 62k events/s and took 838 MB).
pub const MAX_UPLOAD_REGEX_VALUES: usize = 1_000;

impl Rule {
    /// The regular expressions it writes itself (`re` values): unlike the literals and
    /// wildcards the engine gates, prefilters and joins, each is an expression of arbitrary cost
    /// to compile, hold and run.
    pub fn regex_values(&self) -> usize {
        let Body::Detection { searches, .. } = &self.body else {
            return 0;
        };
        searches
            .iter()
            .flat_map(|s| s.any_of.iter().flatten())
            .flat_map(|i| &i.patterns)
            .filter(|p| matches!(p, crate::pattern::Pattern::Regex(re) if re.is_written()))
            .count()
    }
}

/// Parses one rule from YAML text (one document; a second document is an error).
pub fn parse_rule(text: &str) -> Result<Rule, RuleError> {
    if text.len() > MAX_RULE_BYTES {
        return Err(RuleError {
            kind: ErrorKind::Schema,
            pos: None,
            message: format!("the rule is {} bytes; at most {MAX_RULE_BYTES}", text.len()),
        });
    }
    let docs = parse_documents(text)?;
    match docs.len() {
        0 => Err(RuleError {
            kind: ErrorKind::Schema,
            pos: None,
            message: "empty file: no rule".into(),
        }),
        1 => rule_of(&docs[0]),
        _ => Err(schema(
            docs[1].pos,
            "more than one YAML document: Sigma v2 has one rule per file (the old `action: global` \
             collections are not supported)",
        )),
    }
}

/// Where the scalar past [`MAX_RULE_VALUES`] stands in `doc`, if there is one.
fn past_value_bound(doc: &Node) -> Option<Pos> {
    let mut count = 0;
    let mut stack = vec![doc];
    while let Some(n) = stack.pop() {
        match &n.value {
            Value::Scalar(_) => {
                count += 1;
                if count > MAX_RULE_VALUES {
                    return Some(n.pos);
                }
            }
            Value::Seq(items) => stack.extend(items.iter().rev()),
            Value::Map(entries) => {
                stack.extend(entries.iter().rev().flat_map(|(k, v)| [v, k]));
            }
        }
    }
    None
}

/// Parses a rule from its YAML document.
pub fn rule_of(doc: &Node) -> Result<Rule, RuleError> {
    let Some(map) = doc.as_map() else {
        return Err(schema(doc.pos, "a rule must be a mapping"));
    };
    if let Some(pos) = past_value_bound(doc) {
        return Err(schema(
            pos,
            format!("the rule holds more than {MAX_RULE_VALUES} names and values"),
        ));
    }
    let mut warnings = Vec::new();
    let title = doc
        .get("title")
        .ok_or_else(|| schema(doc.pos, "missing `title`"))?;
    let title = string_of(title, "title")?;
    if title.trim().is_empty() {
        return Err(schema(doc.pos, "`title` is empty"));
    }
    let id = match doc.get("id") {
        Some(n) => {
            let id = string_of(n, "id")?;
            if id.trim().is_empty() {
                return Err(schema(n.pos, "`id` is empty"));
            }
            if !looks_like_uuid(&id) {
                warnings.push(format!("`id` {id} is not a UUID"));
            }
            id
        }
        None => {
            return Err(schema(
                doc.pos,
                "missing `id`: every rule needs one to be managed",
            ));
        }
    };
    let opt = |k: &str| -> Result<Option<String>, RuleError> {
        doc.get(k).map(|n| string_of(n, k)).transpose()
    };
    let list = |k: &str| -> Result<Vec<String>, RuleError> {
        doc.get(k).map_or(Ok(Vec::new()), |n| strings_of(n, k))
    };
    let status = opt("status")?;
    if let (Some(s), Some(n)) = (&status, doc.get("status"))
        && !STATUSES.contains(&s.as_str())
    {
        return Err(schema(
            n.pos,
            format!(
                "unknown `status` {s:?}: one of stable, test, experimental, deprecated, unsupported"
            ),
        ));
    }
    let level = match doc.get("level") {
        None => None,
        Some(n) => {
            let s = string_of(n, "level")?;
            Some(Level::parse(&s).ok_or_else(|| {
                schema(
                    n.pos,
                    format!(
                        "unknown `level` {s:?}: one of informational, low, medium, high, critical"
                    ),
                )
            })?)
        }
    };
    let tags = list("tags")?;
    for (t, n) in tags
        .iter()
        .zip(doc.get("tags").and_then(Node::as_seq).unwrap_or(&[]))
    {
        if !t.contains('.') || t.starts_with('.') {
            return Err(schema(
                n.pos,
                format!("tag {t:?} must be `namespace.name` (e.g. attack.t1059)"),
            ));
        }
    }
    // ATT&CK ids no version knows are kept on alerts as written; the author hears of them here.
    warnings.extend(crate::attack::Attack::get().tag_warnings(&tags));
    for (k, _) in map {
        if k.as_str() == Some("action") {
            return Err(schema(
                k.pos,
                "`action` (rule collections) is not part of Sigma v2",
            ));
        }
    }
    let logsource = match doc.get("logsource") {
        Some(n) => logsource_of(n)?,
        None if doc.get("correlation").is_some() => Logsource::default(),
        None => return Err(schema(doc.pos, "missing `logsource`")),
    };
    let body = match (doc.get("detection"), doc.get("correlation")) {
        (Some(d), None) => detection_of(d, &mut warnings)?,
        (None, Some(c)) => Body::Correlation(correlation_of(c, doc)?),
        (Some(_), Some(c)) => {
            return Err(schema(
                c.pos,
                "a rule has `detection` or `correlation`, not both",
            ));
        }
        (None, None) => return Err(schema(doc.pos, "missing `detection`")),
    };
    Ok(Rule {
        id,
        name: opt("name")?,
        title,
        status,
        description: opt("description")?,
        author: opt("author")?,
        date: opt("date")?,
        references: list("references")?,
        tags,
        falsepositives: list("falsepositives")?,
        level,
        logsource,
        body,
        warnings,
    })
}

fn looks_like_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

fn logsource_of(n: &Node) -> Result<Logsource, RuleError> {
    let Some(map) = n.as_map() else {
        return Err(schema(n.pos, "`logsource` must be a mapping"));
    };
    let mut ls = Logsource::default();
    for (k, v) in map {
        let key = k.as_str().unwrap_or("");
        let val = || -> Result<Option<String>, RuleError> {
            Ok(Some(string_of(v, key)?.to_ascii_lowercase()))
        };
        match key {
            "product" => ls.product = val()?,
            "service" => ls.service = val()?,
            "category" => ls.category = val()?,
            "definition" => {}
            _ => {
                // The specification allows custom logsource keys; they narrow nothing here.
            }
        }
    }
    if ls.product.is_none() && ls.service.is_none() && ls.category.is_none() {
        return Err(schema(
            n.pos,
            "`logsource` needs at least one of product, service, category",
        ));
    }
    Ok(ls)
}

fn detection_of(d: &Node, warnings: &mut Vec<String>) -> Result<Body, RuleError> {
    let Some(map) = d.as_map() else {
        return Err(schema(d.pos, "`detection` must be a mapping"));
    };
    let mut searches = Vec::new();
    let mut conditions: Vec<(String, Pos)> = Vec::new();
    for (k, v) in map {
        let name = k.as_str().unwrap_or("");
        match name {
            "condition" => match &v.value {
                Value::Scalar(s) => conditions.push((s.text.clone(), v.pos)),
                Value::Seq(items) => {
                    for i in items {
                        conditions.push((string_of(i, "condition")?, i.pos));
                    }
                }
                Value::Map(_) => return Err(schema(v.pos, "`condition` must be a string")),
            },
            "timeframe" => warnings.push(
                "`timeframe` belongs to correlation rules in Sigma v2 and is ignored here".into(),
            ),
            _ => searches.push(search_of(name, k.pos, v)?),
        }
    }
    if conditions.is_empty() {
        return Err(schema(d.pos, "`detection` has no `condition`"));
    }
    if searches.is_empty() {
        return Err(schema(d.pos, "`detection` has no search identifiers"));
    }
    let names: Vec<&str> = searches.iter().map(|s| s.name.as_str()).collect();
    let mut alternatives = Vec::new();
    for (text, pos) in &conditions {
        alternatives.push(condition::parse(text, &names, *pos)?);
    }
    let condition = if alternatives.len() == 1 {
        alternatives.remove(0)
    } else {
        Expr::Or(alternatives)
    };
    Ok(Body::Detection {
        searches,
        condition,
    })
}

fn search_of(name: &str, pos: Pos, v: &Node) -> Result<Search, RuleError> {
    let any_of = match &v.value {
        Value::Map(entries) => vec![items_of(entries)?],
        Value::Seq(items) if items.iter().all(|i| i.as_map().is_some()) && !items.is_empty() => {
            items
                .iter()
                .map(|i| items_of(i.as_map().unwrap_or(&[])))
                .collect::<Result<_, _>>()?
        }
        Value::Seq(items) => {
            if let Some(bad) = items.iter().find(|i| i.as_scalar().is_none()) {
                return Err(schema(
                    bad.pos,
                    format!(
                        "search `{name}`: a list is either all keywords or all maps, not {}",
                        bad.kind()
                    ),
                ));
            }
            vec![vec![item_of(None, &[], items, v.pos)?]]
        }
        Value::Scalar(_) => vec![vec![item_of(None, &[], std::slice::from_ref(v), v.pos)?]],
    };
    Ok(Search {
        name: name.to_string(),
        any_of,
        pos,
    })
}

fn items_of(entries: &[(Node, Node)]) -> Result<Vec<Item>, RuleError> {
    let mut out = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let key = k.as_str().unwrap_or("");
        let mut parts = key.split('|');
        let field = parts.next().unwrap_or("");
        let mods: Vec<&str> = parts.collect();
        let values: &[Node] = match &v.value {
            Value::Seq(items) => items,
            _ => std::slice::from_ref(v),
        };
        if let Some(bad) = values.iter().find(|i| i.as_scalar().is_none()) {
            return Err(schema(
                bad.pos,
                format!(
                    "field `{field}`: values must be scalars, not {}",
                    bad.kind()
                ),
            ));
        }
        let field = (!field.is_empty()).then(|| field.to_string());
        out.push(item_of(field, &mods, values, k.pos)?);
    }
    Ok(out)
}

/// The modifiers of one field item, checked.
#[derive(Default)]
struct Mods {
    place: Option<Place>,
    all: bool,
    cased: bool,
    re: bool,
    re_i: bool,
    re_m: bool,
    re_s: bool,
    cidr: bool,
    exists: bool,
    fieldref: bool,
    number: Option<NumOp>,
    neq: bool,
    /// Value transformations in order.
    transforms: Vec<&'static str>,
}

fn mods_of(mods: &[&str], pos: Pos) -> Result<Mods, RuleError> {
    let mut m = Mods::default();
    let bad = |msg: String| RuleError::at(pos, ErrorKind::Modifier, msg);
    // Each modifier at most once. A transform applied again multiplies the variants of every
    // value (`base64offset` thrice, `windash` five times, each time): eighteen `base64offset`s
    // in a 234-byte key asked for gigabytes. The check ends at the first repeat, and every
    // modifier before it is a distinct known name, so it costs nothing for long chains.
    let mut seen: Vec<&str> = Vec::new();
    for &name in mods {
        if seen.contains(&name) {
            return Err(bad(format!("modifier `{name}` is given twice")));
        }
        seen.push(name);
        let prev_re = m.re;
        match name {
            "contains" | "startswith" | "endswith" => {
                if m.place.is_some() {
                    return Err(bad(format!(
                        "`{name}` cannot follow another of contains/startswith/endswith"
                    )));
                }
                m.place = Some(match name {
                    "contains" => Place::Contains,
                    "startswith" => Place::Prefix,
                    _ => Place::Suffix,
                });
            }
            "all" => m.all = true,
            "cased" => m.cased = true,
            "re" => m.re = true,
            "i" if prev_re => m.re_i = true,
            "m" if prev_re => m.re_m = true,
            "s" if prev_re => m.re_s = true,
            "i" | "m" | "s" => {
                return Err(bad(format!(
                    "`{name}` is a flag of `re` and must follow it"
                )));
            }
            "cidr" => m.cidr = true,
            "exists" => m.exists = true,
            "fieldref" => m.fieldref = true,
            // Placeholders (`%admin_users%`) need values a deployment defines; none can be
            // configured yet, so the value matches its own text (docs/sigma.md).
            "expand" => {}
            "neq" => m.neq = true,
            "gt" | "gte" | "lt" | "lte" => {
                if m.number.is_some() {
                    return Err(bad("only one of gt, gte, lt, lte".into()));
                }
                m.number = Some(match name {
                    "gt" => NumOp::Gt,
                    "gte" => NumOp::Gte,
                    "lt" => NumOp::Lt,
                    _ => NumOp::Lte,
                });
            }
            "base64" | "base64offset"
                if seen.contains(&"base64") && seen.contains(&"base64offset") =>
            {
                return Err(bad("only one of base64 and base64offset".into()));
            }
            "base64" => m.transforms.push("base64"),
            "base64offset" => m.transforms.push("base64offset"),
            "utf16le" | "wide" | "utf16be" | "utf16"
                if m.transforms.iter().any(|t| t.starts_with("utf16")) =>
            {
                return Err(bad("only one of utf16le (wide), utf16be and utf16".into()));
            }
            "utf16le" | "wide" => m.transforms.push("utf16le"),
            "utf16be" => m.transforms.push("utf16be"),
            "utf16" => m.transforms.push("utf16"),
            "windash" => m.transforms.push("windash"),
            "" => return Err(bad("empty modifier (`||` in the field name)".into())),
            other => {
                return Err(bad(format!(
                    "unknown modifier `{other}` (known: contains, startswith, endswith, all, re \
                     (i, m, s), base64, base64offset, utf16le, utf16be, utf16, wide, windash, \
                     cidr, exists, fieldref, gt, gte, lt, lte, expand, cased, neq)"
                )));
            }
        }
    }
    let kinds = [m.re, m.cidr, m.exists, m.fieldref, m.number.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if kinds > 1 {
        return Err(bad(
            "re, cidr, exists, fieldref and gt/gte/lt/lte cannot be combined".into(),
        ));
    }
    if kinds == 1 && !m.transforms.is_empty() {
        return Err(bad(format!(
            "`{}` turns the value into text to search for and cannot feed re, cidr, exists, \
             fieldref or a comparison",
            m.transforms[0]
        )));
    }
    if (m.re || m.cidr || m.exists || m.number.is_some()) && m.place.is_some() {
        return Err(bad(
            "contains/startswith/endswith apply to text values, not to re, cidr, exists or \
             comparisons"
                .into(),
        ));
    }
    let utf = m.transforms.iter().rposition(|t| t.starts_with("utf16"));
    let b64 = m.transforms.iter().position(|t| t.starts_with("base64"));
    if let (Some(u), Some(b)) = (utf, b64)
        && u > b
    {
        return Err(bad(
            "utf16 encodings must come before base64/base64offset".into()
        ));
    }
    if utf.is_some() && b64.is_none() {
        return Err(bad(
            "utf16le/utf16be/utf16/wide produce bytes and must be followed by base64 or \
             base64offset"
                .into(),
        ));
    }
    Ok(m)
}

fn item_of(
    field: Option<String>,
    mods: &[&str],
    values: &[Node],
    pos: Pos,
) -> Result<Item, RuleError> {
    let m = mods_of(mods, pos)?;
    if m.exists && field.is_none() {
        return Err(RuleError::at(
            pos,
            ErrorKind::Modifier,
            "`exists` needs a field",
        ));
    }
    if m.fieldref && field.is_none() {
        return Err(RuleError::at(
            pos,
            ErrorKind::Modifier,
            "`fieldref` needs a field",
        ));
    }
    let mut patterns = Vec::new();
    for v in values {
        let s = v
            .as_scalar()
            .ok_or_else(|| schema(v.pos, "values must be scalars"))?;
        if s.is_null() && !m.exists {
            if m.place.is_some() || !m.transforms.is_empty() || m.re {
                return Err(RuleError::at(
                    v.pos,
                    ErrorKind::Value,
                    "null cannot be combined with text modifiers",
                ));
            }
            if field.is_none() {
                return Err(RuleError::at(
                    v.pos,
                    ErrorKind::Value,
                    "a keyword cannot be null",
                ));
            }
            patterns.push(Pattern::Null);
            continue;
        }
        let text = s.text.as_str();
        if m.exists {
            let b = s.as_bool().ok_or_else(|| {
                RuleError::at(v.pos, ErrorKind::Value, "`exists` takes true or false")
            })?;
            patterns.push(Pattern::Exists(b));
            continue;
        }
        if let Some(op) = m.number {
            let n = parse_number(text).ok_or_else(|| {
                RuleError::at(v.pos, ErrorKind::Value, format!("`{text}` is not a number"))
            })?;
            patterns.push(Pattern::Number(op, n));
            continue;
        }
        if m.cidr {
            let (net, bits) = parse_cidr(text).ok_or_else(|| {
                RuleError::at(
                    v.pos,
                    ErrorKind::Value,
                    format!("`{text}` is not a CIDR network"),
                )
            })?;
            patterns.push(Pattern::Cidr { net, bits });
            continue;
        }
        if m.fieldref {
            patterns.push(Pattern::FieldRef {
                field: text.to_string(),
                place: m.place.unwrap_or(Place::Exact),
                cased: m.cased,
            });
            continue;
        }
        if m.re {
            patterns.push(compile_regex(text, m.re_i, m.re_m, m.re_s, v.pos)?);
            continue;
        }
        // Keywords search anywhere; fields compare whole values unless told otherwise.
        let place = m.place.unwrap_or(if field.is_none() {
            Place::Contains
        } else {
            Place::Exact
        });
        for variant in transformed(text, &m.transforms) {
            // A transformed (encoded) value is literal text: its wildcards are escaped.
            let literal = !m.transforms.is_empty();
            let value = if literal {
                variant
                    .replace('\\', "\\\\")
                    .replace('*', "\\*")
                    .replace('?', "\\?")
            } else {
                variant
            };
            let plain_number = s.plain && m.transforms.is_empty();
            patterns.push(compile_text(&value, place, m.cased, plain_number, v.pos)?);
        }
    }
    if m.neq {
        patterns = vec![Pattern::Not(patterns)];
    }
    Ok(Item {
        field,
        patterns,
        all: m.all,
        pos,
    })
}

/// Applies the value transformations in order; each may give several variants.
fn transformed(value: &str, transforms: &[&str]) -> Vec<String> {
    let mut texts = vec![value.to_string()];
    let mut bytes: Option<Vec<Vec<u8>>> = None;
    for t in transforms {
        match *t {
            "windash" => {
                texts = texts.iter().flat_map(|s| windash(s)).collect();
            }
            "utf16le" | "utf16be" | "utf16" => {
                let little = *t != "utf16be";
                bytes = Some(
                    texts
                        .iter()
                        .map(|s| {
                            let mut b = if *t == "utf16" {
                                vec![0xff, 0xfe]
                            } else {
                                Vec::new()
                            };
                            b.extend(utf16(s, little));
                            b
                        })
                        .collect(),
                );
            }
            "base64" => {
                let src = bytes
                    .take()
                    .unwrap_or_else(|| texts.iter().map(|s| s.as_bytes().to_vec()).collect());
                texts = src.iter().map(|b| base64(b)).collect();
            }
            "base64offset" => {
                let src = bytes
                    .take()
                    .unwrap_or_else(|| texts.iter().map(|s| s.as_bytes().to_vec()).collect());
                texts = src.iter().flat_map(|b| base64_offsets(b)).collect();
            }
            _ => {}
        }
    }
    texts.dedup();
    texts
}

fn correlation_of(c: &Node, doc: &Node) -> Result<Correlation, RuleError> {
    let kind_node = c
        .get("type")
        .ok_or_else(|| schema(c.pos, "correlation needs `type`"))?;
    let kind = string_of(kind_node, "type")?;
    if !["event_count", "value_count", "temporal", "temporal_ordered"].contains(&kind.as_str()) {
        return Err(schema(
            kind_node.pos,
            format!(
                "unknown correlation type {kind:?}: event_count, value_count, temporal or temporal_ordered"
            ),
        ));
    }
    let rules = match c.get("rules") {
        Some(n) => strings_of(n, "rules")?,
        None => return Err(schema(c.pos, "correlation needs `rules`")),
    };
    if rules.is_empty() {
        return Err(schema(c.pos, "correlation `rules` is empty"));
    }
    // Each reference feeds the correlation once: a rule listed twice would feed it twice, and
    // chains of such lists double the work of one event at every level.
    if rules.len() > MAX_CORRELATION_RULES {
        return Err(schema(
            c.pos,
            format!(
                "correlation `rules` lists {} rules; at most {MAX_CORRELATION_RULES}",
                rules.len()
            ),
        ));
    }
    if let Some((i, r)) = rules
        .iter()
        .enumerate()
        .find(|(i, r)| rules[..*i].contains(r))
    {
        let at = c
            .get("rules")
            .and_then(Node::as_seq)
            .and_then(|s| s.get(i))
            .map_or(c.pos, |n| n.pos);
        return Err(schema(at, format!("correlation `rules` lists `{r}` twice")));
    }
    let group_by = c
        .get("group-by")
        .map_or(Ok(Vec::new()), |n| strings_of(n, "group-by"))?;
    let ts = c
        .get("timespan")
        .ok_or_else(|| schema(c.pos, "correlation needs `timespan`"))?;
    let timespan_s = parse_timespan(ts.as_str().unwrap_or("")).ok_or_else(|| {
        schema(
            ts.pos,
            "`timespan` must be a number with a unit: 30s, 5m, 1h, 2d, 1w",
        )
    })?;
    let mut condition = Vec::new();
    let mut field = None;
    if let Some(cond) = c.get("condition") {
        let Some(map) = cond.as_map() else {
            return Err(schema(
                cond.pos,
                "correlation `condition` must be a mapping such as {gte: 10}",
            ));
        };
        for (k, v) in map {
            let key = k.as_str().unwrap_or("");
            match key {
                "gt" | "gte" | "lt" | "lte" | "eq" | "neq" => {
                    let n = v.as_str().and_then(parse_number).ok_or_else(|| {
                        RuleError::at(v.pos, ErrorKind::Value, "the bound must be a number")
                    })?;
                    condition.push((key.to_string(), n));
                }
                "field" => field = Some(string_of(v, "field")?),
                _ => {
                    return Err(schema(
                        k.pos,
                        format!("unknown correlation condition key `{key}`"),
                    ));
                }
            }
        }
    }
    if matches!(kind.as_str(), "event_count" | "value_count") && condition.is_empty() {
        return Err(schema(
            c.pos,
            format!("`{kind}` needs a `condition` such as {{gte: 10}}"),
        ));
    }
    if kind == "value_count" && field.is_none() {
        return Err(schema(c.pos, "`value_count` needs `condition.field`"));
    }
    let mut aliases = Vec::new();
    if let Some(a) = c.get("aliases") {
        let Some(map) = a.as_map() else {
            return Err(schema(
                a.pos,
                "`aliases` must map each alias to {rule: field} entries",
            ));
        };
        for (alias, per_rule) in map {
            let name = string_of(alias, "alias")?;
            let Some(entries) = per_rule.as_map() else {
                return Err(schema(
                    per_rule.pos,
                    format!("alias `{name}` must map rule names to field names"),
                ));
            };
            let mut fields = Vec::new();
            for (rule, field) in entries {
                let rule_name = string_of(rule, "rule name")?;
                if !rules.contains(&rule_name) {
                    return Err(schema(
                        rule.pos,
                        format!("alias `{name}` names `{rule_name}`, which is not in `rules`"),
                    ));
                }
                fields.push((rule_name, string_of(field, "field")?));
            }
            aliases.push((name, fields));
        }
    }
    // The specification lists `generate` among the rule's top-level attributes; pySigma reads
    // it inside the section too. Either place is taken.
    let generate = match c.get("generate").or_else(|| doc.get("generate")) {
        None => false,
        Some(g) => match g.as_str() {
            Some("true" | "True" | "TRUE") => true,
            Some("false" | "False" | "FALSE") => false,
            _ => return Err(schema(g.pos, "`generate` must be true or false")),
        },
    };
    Ok(Correlation {
        kind,
        rules,
        group_by,
        timespan_s,
        condition,
        field,
        aliases,
        generate,
    })
}

/// `30s`, `5m`, `1h`, `2d`, `1w` (and `1M`, `1y` as 30 and 365 days) in seconds.
pub fn parse_timespan(text: &str) -> Option<u64> {
    let text = text.trim();
    let unit = text.chars().last()?;
    let n: u64 = text[..text.len() - unit.len_utf8()].parse().ok()?;
    let mult = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        'M' => 30 * 86_400,
        'y' => 365 * 86_400,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&v| v > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"title: Test
id: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b
status: test
logsource:
    product: windows
    category: process_creation
detection:
    selection:
        Image|endswith: '\cmd.exe'
        CommandLine|contains|all:
            - '/c'
            - 'whoami'
    filter:
        User: SYSTEM
    keywords:
        - evil
    condition: selection and not filter or keywords
level: high
tags:
    - attack.execution
    - attack.t1059.003
"#;

    #[test]
    fn a_full_rule_parses() {
        let r = parse_rule(GOOD).unwrap();
        assert_eq!(r.level, Some(Level::High));
        assert_eq!(r.logsource.category.as_deref(), Some("process_creation"));
        let Body::Detection { searches, .. } = &r.body else {
            panic!()
        };
        assert_eq!(searches.len(), 3);
        assert!(searches[0].any_of[0][1].all);
        assert!(r.warnings.is_empty());
    }

    fn err(text: &str) -> RuleError {
        parse_rule(text).unwrap_err()
    }

    #[test]
    fn errors_say_what_and_where() {
        let e = err(&GOOD.replace("endswith", "endwith"));
        assert_eq!((e.kind, e.line(), e.column()), (ErrorKind::Modifier, 9, 9));
        assert!(e.message.contains("unknown modifier `endwith`"), "{e}");
        let e = err(&GOOD.replace("and not filter", "and not fliter"));
        assert_eq!((e.kind, e.line()), (ErrorKind::Condition, 17));
        assert!(e.message.contains("fliter"), "{e}");
        let e = err(&GOOD.replace("level: high", "level: severe"));
        assert_eq!((e.kind, e.line()), (ErrorKind::Schema, 18));
        let e = err(&GOOD.replace("Image|endswith: '\\cmd.exe'", "Image|re: '(unclosed'"));
        assert_eq!((e.kind, e.line()), (ErrorKind::Regex, 9));
        let e = err(&GOOD.replace("title: Test\n", ""));
        assert_eq!(e.kind, ErrorKind::Schema);
        let e = err("title: x\nid: [1\n");
        assert_eq!(e.kind, ErrorKind::Yaml);
        let e = err(&GOOD.replace("User: SYSTEM", "SourceIp|cidr: 10.0.0.0/33"));
        assert_eq!((e.kind, e.line()), (ErrorKind::Value, 14));
    }

    #[test]
    fn a_modifier_is_given_once_so_values_have_few_variants() {
        for (mods, why) in [
            (&["base64offset", "base64offset"][..], "given twice"),
            (&["contains", "windash", "windash"][..], "given twice"),
            (&["all", "all"][..], "given twice"),
            (
                &["base64", "base64offset"][..],
                "only one of base64 and base64offset",
            ),
            (&["wide", "utf16be"][..], "only one of utf16le"),
        ] {
            let e = mods_of(mods, Pos { line: 4, column: 9 }).err().unwrap();
            assert!(e.message.contains(why), "{mods:?}: {e}");
            assert_eq!((e.kind, e.line(), e.column()), (ErrorKind::Modifier, 4, 9));
        }
        // A chain long enough to be quadratic to check ends at its first repeat.
        let long: Vec<&str> = std::iter::repeat_n("all", 200_000).collect();
        assert!(mods_of(&long, Pos::default()).is_err());
        // The most variants one value can have: windash (5) then base64offset (3).
        let v = transformed("-enc x", &["windash", "utf16le", "base64offset"]);
        assert!(v.len() <= 15, "{}", v.len());
    }

    #[test]
    fn a_rule_is_bounded_in_bytes_values_and_condition_length() {
        let e = err(&format!("{GOOD}# {}\n", "x".repeat(MAX_RULE_BYTES)));
        assert_eq!(e.kind, ErrorKind::Schema);
        assert!(e.message.contains("at most 1048576"), "{e}");
        let many: String = (0..MAX_RULE_VALUES)
            .map(|i| format!("            - 'v{i}'\n"))
            .collect();
        let e = err(&GOOD.replace("        User: SYSTEM\n", &format!("        User:\n{many}")));
        assert_eq!(e.kind, ErrorKind::Schema);
        assert!(e.message.contains("more than 10000"), "{e}");
        assert!(e.line() > 14, "points into the list: {e}");
        let long = format!("selection{}", " or selection".repeat(6_000));
        let e = err(&GOOD.replace("selection and not filter or keywords", &long));
        assert_eq!((e.kind, e.line()), (ErrorKind::Condition, 17));
        assert!(e.message.contains("at most 65536"), "{e}");
    }

    #[test]
    fn wide_rules_parse_and_compile_in_linear_time() {
        // Thousands of keys in one mapping (duplicates looked up, fields interned by hash) and
        // a condition naming one long list thousands of times (literals borrowed, not copied).
        let keys: String = (0..3_000)
            .map(|i| format!("        F{i}: 'v{i}'\n"))
            .collect();
        let values: String = (0..3_000)
            .map(|i| format!("            - 'value{i}'\n"))
            .collect();
        let cond = format!("big{}", " or big".repeat(2_000));
        let text = format!(
            "title: Wide\nid: 6b1f0c2e-3d4a-4b5c-8d9e-0f1a2b3c4d5e\nlogsource:\n    product: linux\ndetection:\n    sel:\n{keys}    big:\n        Message|contains:\n{values}    condition: sel or {cond}\n"
        );
        let r = std::sync::Arc::new(parse_rule(&text).unwrap());
        let set = crate::RuleSet::compile([r], &crate::Mapping::bundled());
        assert_eq!(set.len(), 1);
        let dup = "title: x\nid: y\nlogsource: {product: linux}\ndetection:\n  sel:\n    a: 1\n    b: 2\n    a: 3\n  condition: sel\n";
        let e = err(dup);
        assert_eq!((e.kind, e.line()), (ErrorKind::Yaml, 8));
        assert!(e.message.contains("first at line 6"), "{e}");
    }

    #[test]
    fn modifier_chains_transform_values() {
        let v = transformed("ping", &["utf16le", "base64offset"]);
        assert_eq!(v.len(), 3);
        assert!(v.contains(&"cABpAG4AZw".to_string()), "{v:?}");
        assert!(mods_of(&["base64offset", "utf16le"], Pos::default()).is_err());
        assert!(mods_of(&["contains", "startswith"], Pos::default()).is_err());
        assert!(mods_of(&["re", "i"], Pos::default()).is_ok());
        assert!(mods_of(&["i"], Pos::default()).is_err());
    }

    #[test]
    fn correlations_validate() {
        let r = parse_rule(
            "title: Brute force\nid: 0b5f6a8e-1c2d-4e3f-8a9b-0c1d2e3f4a5b\ncorrelation:\n  type: event_count\n  rules: [failed_logon]\n  group-by: [IpAddress]\n  timespan: 5m\n  condition: {gte: 10}\n",
        )
        .unwrap();
        let Body::Correlation(c) = r.body else {
            panic!()
        };
        assert_eq!(
            (c.timespan_s, c.condition, c.generate),
            (300, vec![("gte".into(), 10.0)], false)
        );
        let r = parse_rule(
            "title: Chain\nid: c1\ngenerate: true\ncorrelation:\n  type: temporal\n  rules: [a, b]\n  group-by: [ip]\n  timespan: 10s\n  condition: {gt: 1, lte: 2}\n  aliases:\n    ip:\n      a: destination.ip\n      b: source.ip\n",
        )
        .unwrap();
        let Body::Correlation(c) = r.body else {
            panic!()
        };
        assert!(c.generate);
        assert_eq!(c.condition.len(), 2);
        assert_eq!(
            c.aliases,
            vec![(
                "ip".to_string(),
                vec![
                    ("a".to_string(), "destination.ip".to_string()),
                    ("b".to_string(), "source.ip".to_string())
                ]
            )]
        );
        let bad = parse_rule(
            "title: x\nid: a\ncorrelation:\n  type: temporal\n  rules: [a]\n  timespan: 5m\n  aliases:\n    ip:\n      zzz: source.ip\n",
        );
        assert!(bad.unwrap_err().message.contains("not in `rules`"));
        assert!(parse_rule("title: x\nid: a\ncorrelation:\n  type: event_count\n  rules: [a]\n  timespan: 5x\n  condition: {gte: 1}\n").is_err());
    }
}
