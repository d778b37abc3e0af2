//! Reading a configuration file: every syntax, key and type problem of the file at once, each
//! named by its key and line, before the values are checked.
//!
//! Deserialising straight into [`Config`] stops at the first unknown key or wrong type, and its
//! message lists the expected keys on one line that had to be cut ("expected one of
//! `dashboard_port`, ..., `api_trust_proxy_he…"). So the file is first parsed with recovery
//! (every syntax error), then walked against the configuration's own JSON schema (derived from
//! the types, so it cannot drift from them): an unknown key is reported with the closest known
//! key and the table's whole list, a value of the wrong type or out of its type's range with
//! what was expected, and both are set aside; the rest is deserialised and validated, so one
//! pass over the file shows everything to fix.

use super::Config;
use super::problems::{ConfigError, ConfigProblem, clipped_lines};
use serde::Deserialize;
use serde_json::Value as Schema;
use std::fmt::Write as _;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// What a schema without a type admits: anything.
static ANY: Schema = Schema::Bool(true);

/// Parses `text` and checks every key and type; the configuration, or every problem found.
pub(super) fn read(text: &str) -> Result<Config, ConfigError> {
    let lines = Lines::new(text);
    let (mut root, syntax) = DeTable::parse_recoverable(text);
    // What recovery made of a line that does not parse (`port = 80 80` read as a string) is
    // not the operator's to fix twice: the walk says nothing more about those lines.
    let broken: Vec<usize> = syntax
        .iter()
        .filter_map(|e| e.span().map(|s| lines.line_of(s.start)))
        .collect();
    let mut problems: Vec<ConfigProblem> = syntax
        .iter()
        .map(|e| ConfigProblem {
            key: "(file)".into(),
            problem: clipped_lines(e.to_string().trim_end()),
        })
        .collect();
    let schema = schemars::schema_for!(Config);
    let schema = schema.as_value();
    let mut walk = Walk {
        defs: &schema["$defs"],
        lines: &lines,
        found: Vec::new(),
        known: known_keys(schema),
    };
    walk.table(root.get_mut(), schema, "");
    // In the order of the file.
    walk.found.sort_by_key(|(line, _)| *line);
    problems.extend(
        walk.found
            .into_iter()
            .filter(|(line, _)| !broken.contains(line))
            .map(|(_, p)| p),
    );
    // A file that does not parse is not used, even in part: what recovery made of it is a
    // guess, good enough to report its keys but not to run on.
    if !syntax.is_empty() {
        return Err(ConfigError { problems });
    }
    match Config::deserialize(toml::de::Deserializer::from(root)) {
        Ok(config) => {
            if let Err(e) = config.validate() {
                problems.extend(e.problems);
            }
            if problems.is_empty() {
                Ok(config)
            } else {
                Err(ConfigError { problems })
            }
        }
        // What the walk does not know of (a value its type refuses beyond the schema's words).
        Err(e) => {
            let at = e.span().map(|s| lines.line_of(s.start));
            problems.push(ConfigProblem {
                key: "(file)".into(),
                problem: match at {
                    Some(line) => format!("line {line}: {}", e.message()),
                    None => e.message().to_string(),
                },
            });
            Err(ConfigError { problems })
        }
    }
}

/// Line numbers of byte offsets.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Lines {
        Lines(
            std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .collect(),
        )
    }

    /// The 1-based line holding byte `offset`.
    fn line_of(&self, offset: usize) -> usize {
        self.0.partition_point(|&start| start <= offset).max(1)
    }
}

struct Walk<'a> {
    defs: &'a Schema,
    lines: &'a Lines,
    /// The problems found, with their lines.
    found: Vec<(usize, ConfigProblem)>,
    /// Every key of every table, dotted (`ueba.warmup_days`): for a key written in the wrong
    /// table.
    known: Vec<String>,
}

impl Walk<'_> {
    fn add(&mut self, key: &str, span: std::ops::Range<usize>, problem: String) {
        let line = self.lines.line_of(span.start);
        self.found.push((
            line,
            ConfigProblem {
                key: if key.is_empty() {
                    "(file)".into()
                } else {
                    key.into()
                },
                problem: format!("line {line}: {problem}"),
            },
        ));
    }

    /// Checks the table `table` at `path` against `schema`; unknown keys and values of the wrong
    /// type are reported and removed, so the rest can still be read.
    fn table(&mut self, table: &mut DeTable<'_>, schema: &Schema, path: &str) {
        let schema = resolve(self.defs, schema);
        let properties = schema.get("properties").and_then(Schema::as_object);
        let extra = schema.get("additionalProperties");
        let mut remove = Vec::new();
        for (key, value) in table.iter_mut() {
            let name = key.get_ref().as_ref();
            let dotted = join(path, name);
            let field = properties.and_then(|p| p.get(name)).or(match extra {
                Some(Schema::Bool(false)) | None => None,
                Some(Schema::Bool(true)) => Some(&ANY),
                Some(s) => Some(s),
            });
            let Some(field) = field else {
                let problem = self.unknown(name, &dotted, properties);
                self.add(&dotted, key.span(), problem);
                remove.push(name.to_string());
                continue;
            };
            if !self.value(value, field, &dotted) {
                remove.push(name.to_string());
            }
        }
        for name in &remove {
            table.remove(name.as_str());
        }
    }

    /// Checks one value; false when it must be set aside (reported already).
    fn value(&mut self, value: &mut Spanned<DeValue<'_>>, schema: &Schema, path: &str) -> bool {
        let schema = resolve(self.defs, schema);
        if let Some(alternatives) = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Schema::as_array)
        {
            return match alternatives
                .iter()
                .find(|a| fits(self.defs, value.get_ref(), a))
            {
                Some(a) => self.value(value, a, path),
                None => {
                    let mut problem = format!(
                        "{} is not {}",
                        shown(value.get_ref()),
                        expectation(self.defs, schema)
                    );
                    // A misspelt word of a list (`sislog`): the closest one.
                    if let DeValue::String(written) = value.get_ref() {
                        let words = alternatives
                            .iter()
                            .filter_map(|a| resolve(self.defs, a).get("const")?.as_str());
                        if let Some(near) = closest(written, words) {
                            let _ = write!(problem, "; did you mean \"{near}\"?");
                        }
                    }
                    self.add(path, value.span(), problem);
                    false
                }
            };
        }
        let span = value.span();
        match value.get_mut() {
            DeValue::Table(t) if accepts(schema, "object") => {
                self.table(t, schema, path);
                true
            }
            DeValue::Array(items) if accepts(schema, "array") => {
                let item = schema.get("items").unwrap_or(&ANY);
                let mut ok = true;
                for (i, v) in items.iter_mut().enumerate() {
                    ok &= self.value(v, item, &format!("{path}[{i}]"));
                }
                ok
            }
            v => {
                if fits(self.defs, v, schema) {
                    true
                } else {
                    let problem = format!("{} is not {}", shown(v), expectation(self.defs, schema));
                    self.add(path, span, problem);
                    false
                }
            }
        }
    }

    /// What to say of an unknown key `name` (at `dotted`) in a table of `properties`: the closest
    /// key of the table, or the same key in another table, and the table's keys.
    fn unknown(
        &self,
        name: &str,
        dotted: &str,
        properties: Option<&serde_json::Map<String, Schema>>,
    ) -> String {
        let keys: Vec<&str> = properties
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut text = String::from("unknown key");
        if let Some(k) = closest(name, keys.iter().copied()) {
            let _ = write!(text, "; did you mean `{k}`?");
        } else if let Some(elsewhere) = self
            .known
            .iter()
            .find(|k| k.rsplit('.').next() == Some(name) && k.as_str() != dotted)
        {
            let _ = write!(text, "; `{elsewhere}` is a key (in another table)");
        }
        let table = match dotted.rsplit_once('.') {
            Some((table, _)) => format!("[{table}]"),
            None => "the top level".into(),
        };
        if keys.is_empty() {
            let _ = write!(text, ". {table} takes no keys");
        } else {
            let _ = write!(text, ". The keys of {table}: {}", keys.join(", "));
        }
        text
    }
}

/// `path.name`, or `name` at the top.
fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `schema` with its `$ref` followed (one level; the derived schemas do not chain them).
fn resolve<'a>(defs: &'a Schema, schema: &'a Schema) -> &'a Schema {
    match schema
        .get("$ref")
        .and_then(Schema::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        Some(name) => defs.get(name).unwrap_or(schema),
        None => schema,
    }
}

/// Whether `schema`'s `type` (one or a list) allows `kind`.
fn accepts(schema: &Schema, kind: &str) -> bool {
    match schema.get("type") {
        Some(Schema::String(t)) => t == kind,
        Some(Schema::Array(ts)) => ts.iter().any(|t| t == kind),
        // No type: anything (`true`, or a `const` or `enum` judged on its own).
        _ => !(schema.get("const").is_some() || schema.get("enum").is_some()),
    }
}

/// Whether `value` fits `schema` entirely (unknown keys of tables included); no reporting.
fn fits(defs: &Schema, value: &DeValue<'_>, schema: &Schema) -> bool {
    let schema = resolve(defs, schema);
    if let Schema::Bool(b) = schema {
        return *b;
    }
    if let Some(alternatives) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Schema::as_array)
    {
        return alternatives.iter().any(|a| fits(defs, value, a));
    }
    if let Some(c) = schema.get("const") {
        return matches!(value, DeValue::String(s) if c.as_str() == Some(s.as_ref()));
    }
    if let Some(options) = schema.get("enum").and_then(Schema::as_array) {
        return matches!(value, DeValue::String(s) if options.iter().any(|o| o.as_str() == Some(s.as_ref())));
    }
    match value {
        DeValue::String(_) => accepts(schema, "string"),
        DeValue::Boolean(_) => accepts(schema, "boolean"),
        DeValue::Integer(i) => {
            if accepts(schema, "number") {
                return true;
            }
            if !accepts(schema, "integer") {
                return false;
            }
            let Ok(n) = i128::from_str_radix(&i.as_str().replace('_', ""), i.radix()) else {
                return false;
            };
            let (lo, hi) = integer_range(schema);
            (lo..=hi).contains(&n)
        }
        DeValue::Float(_) => accepts(schema, "number"),
        DeValue::Datetime(_) => false,
        DeValue::Array(items) => {
            accepts(schema, "array") && {
                let item = schema.get("items").unwrap_or(&ANY);
                items.iter().all(|v| fits(defs, v.get_ref(), item))
            }
        }
        DeValue::Table(t) => {
            accepts(schema, "object") && {
                let properties = schema.get("properties").and_then(Schema::as_object);
                let extra = schema.get("additionalProperties");
                t.iter().all(|(k, v)| {
                    let field =
                        properties
                            .and_then(|p| p.get(k.get_ref().as_ref()))
                            .or(match extra {
                                Some(Schema::Bool(false)) | None => None,
                                Some(s) => Some(s),
                            });
                    field.is_some_and(|f| fits(defs, v.get_ref(), f))
                })
            }
        }
    }
}

/// The integers an integer schema admits, from its `format` and bounds.
fn integer_range(schema: &Schema) -> (i128, i128) {
    let (mut lo, mut hi) = match schema.get("format").and_then(Schema::as_str) {
        Some("uint8") => (0, i128::from(u8::MAX)),
        Some("uint16") => (0, i128::from(u16::MAX)),
        Some("uint32") => (0, i128::from(u32::MAX)),
        Some("uint64" | "uint") => (0, i128::from(u64::MAX)),
        Some("int8") => (i128::from(i8::MIN), i128::from(i8::MAX)),
        Some("int16") => (i128::from(i16::MIN), i128::from(i16::MAX)),
        Some("int32") => (i128::from(i32::MIN), i128::from(i32::MAX)),
        _ => (i128::from(i64::MIN), i128::from(i64::MAX)),
    };
    if let Some(m) = schema.get("minimum").and_then(Schema::as_i64) {
        lo = lo.max(i128::from(m));
    }
    if let Some(m) = schema.get("maximum").and_then(Schema::as_u64) {
        hi = hi.min(i128::from(m));
    }
    (lo, hi)
}

/// What `schema` expects, in words.
fn expectation(defs: &Schema, schema: &Schema) -> String {
    let schema = resolve(defs, schema);
    if let Some(c) = schema.get("const") {
        return format!("{c}");
    }
    if let Some(options) = schema.get("enum").and_then(Schema::as_array) {
        let names: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        return format!("one of {}", names.join(", "));
    }
    if let Some(alternatives) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Schema::as_array)
    {
        // A list of words (an enum): "one of", as for `enum`.
        let words: Option<Vec<String>> = alternatives
            .iter()
            .map(|a| resolve(defs, a).get("const").map(|c| c.to_string()))
            .collect();
        if let Some(words) = words {
            return format!("one of {}", words.join(", "));
        }
        let parts: Vec<String> = alternatives.iter().map(|a| expectation(defs, a)).collect();
        return parts.join(" or ");
    }
    let kinds: Vec<&str> = match schema.get("type") {
        Some(Schema::String(t)) => vec![t.as_str()],
        Some(Schema::Array(ts)) => ts.iter().filter_map(Schema::as_str).collect(),
        _ => vec![],
    };
    let words: Vec<String> = kinds
        .iter()
        .filter(|k| **k != "null")
        .map(|k| match *k {
            "integer" => {
                let (lo, hi) = integer_range(schema);
                format!("an integer from {lo} to {hi}")
            }
            "number" => "a number".into(),
            "string" => "a string".into(),
            "boolean" => "true or false".into(),
            "array" => "an array".into(),
            "object" => "a table".into(),
            other => other.to_string(),
        })
        .collect();
    if words.is_empty() {
        "a valid value".into()
    } else {
        words.join(" or ")
    }
}

/// A value as a problem shows it: its kind and, for scalars, itself.
fn shown(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => {
            let s: String = s.chars().take(60).collect();
            format!("the string {s:?}")
        }
        DeValue::Integer(i) => format!("the integer {i}"),
        DeValue::Float(f) => format!("the number {}", f.as_str()),
        DeValue::Boolean(b) => format!("{b}"),
        DeValue::Datetime(d) => format!("the date-time {d}"),
        DeValue::Array(_) => "an array".into(),
        DeValue::Table(_) => "a table".into(),
    }
}

/// Every table key of the schema, dotted.
fn known_keys(root: &Schema) -> Vec<String> {
    fn walk(defs: &Schema, schema: &Schema, path: &str, out: &mut Vec<String>, depth: usize) {
        let schema = resolve(defs, schema);
        if depth > 8 {
            return;
        }
        if let Some(p) = schema.get("properties").and_then(Schema::as_object) {
            for (k, v) in p {
                let dotted = join(path, k);
                out.push(dotted.clone());
                walk(defs, v, &dotted, out, depth + 1);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root["$defs"], root, "", &mut out, 0);
    out
}

/// The word of `words` closest to `written`, when one is close enough to be a misspelling: at
/// most a third of its letters edited (one at least).
fn closest<'a>(written: &str, words: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    words
        .map(|w| (edit_distance(written, w), w))
        .filter(|(d, w)| *d <= (w.len().max(written.len()) / 3).max(1))
        .min()
        .map(|(_, w)| w)
}

/// Levenshtein distance between `a` and `b`, counting a swap of neighbours as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("warmup_dayz", "warmup_days"), 1);
        assert_eq!(edit_distance("wramup_days", "warmup_days"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn lines() {
        let l = Lines::new("a\nbb\n\nc");
        assert_eq!([0, 1, 2, 4, 5, 6].map(|o| l.line_of(o)), [1, 1, 2, 2, 3, 4]);
    }
}
