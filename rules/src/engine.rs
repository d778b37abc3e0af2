//! The compiled rule set: rules grouped by the event shapes of their logsource, field names
//! resolved through the mapping once, and one pass over an event that reports every rule it
//! matches.
//!
//! Per event, each distinct logsource shape is tested once (there are a few dozen, however many
//! rules share them); only the rules of the shapes that hold are evaluated. Evaluation reads
//! fields through [`EventFields`], which the data plane implements over its in-place event
//! record, so matching allocates nothing.

use crate::condition::Expr;
use crate::mapping::{FieldSource, Mapping, Shape};
use crate::pattern::Pattern;
use crate::rule::{Body, Item, Rule};
use std::sync::Arc;

/// Read access to one event.
pub trait EventFields {
    /// The attribute named `name` (a producer field, flattened with dots).
    fn attribute(&self, name: &str) -> Option<&str>;
    /// The record's `source`.
    fn source(&self) -> &str;
    /// The record's `host`.
    fn host(&self) -> &str;
    /// The record's `message`.
    fn message(&self) -> &str;
    /// Calls `f` with the message and every attribute value until it returns true; says whether
    /// it did (keyword searches).
    fn any_value(&self, f: &mut dyn FnMut(&str) -> bool) -> bool;
    /// The canonical name of the first entity of `kind` (`ip`, `user`, `host`...) with `role`
    /// (`source`, `destination`...; `None`: any role). Events without entities have none.
    fn entity(&self, kind: &str, role: Option<&str>) -> Option<&str> {
        let _ = (kind, role);
        None
    }
}

/// A field reference resolved through the mapping.
#[derive(Clone, Debug)]
pub(crate) struct Field(Box<[FieldSource]>);

impl Field {
    #[inline]
    pub(crate) fn get<'e, E: EventFields>(&self, e: &'e E) -> Option<&'e str> {
        self.0.iter().find_map(|p| match p {
            FieldSource::Attr(name) => e.attribute(name),
            FieldSource::Source => Some(e.source()).filter(|s| !s.is_empty()),
            FieldSource::Host => Some(e.host()).filter(|s| !s.is_empty()),
            FieldSource::Message => Some(e.message()).filter(|s| !s.is_empty()),
            FieldSource::Entity { kind, role } => e.entity(kind, role.as_deref()),
        })
    }
}

#[derive(Clone, Debug)]
struct CItem {
    /// `None`: a keyword search over every value.
    field: Option<Field>,
    patterns: Vec<Pattern>,
    /// Resolved fields of `fieldref` patterns, by pattern index.
    refs: Vec<Option<Field>>,
    all: bool,
}

#[derive(Clone, Debug)]
struct CRule {
    rule: Arc<Rule>,
    /// Per search: alternatives of conjunctions.
    searches: Vec<Vec<Vec<CItem>>>,
    condition: Expr,
    enabled: bool,
}

/// A logsource shape compiled: every (field, allowed values) must hold.
#[derive(Clone, Debug)]
struct CShape(Vec<(Field, Vec<String>)>);

impl CShape {
    fn holds<E: EventFields>(&self, e: &E) -> bool {
        self.0.iter().all(|(f, values)| {
            f.get(e)
                .is_some_and(|v| values.iter().any(|w| w == "*" || v.eq_ignore_ascii_case(w)))
        })
    }
}

/// Compiled rules, ready to match events.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    rules: Vec<CRule>,
    shapes: Vec<CShape>,
    /// Rules by shape index.
    by_shape: Vec<Vec<u32>>,
    /// Rules whose logsource covers every event.
    everywhere: Vec<u32>,
    /// Rules whose logsource is not mapped (they match nothing), by index.
    unmapped: Vec<u32>,
}

pub(crate) fn resolve(mapping: &Mapping, name: &str) -> Field {
    Field(mapping.places(name).into_boxed_slice())
}

fn compile_item(mapping: &Mapping, item: &Item) -> CItem {
    CItem {
        field: item.field.as_deref().map(|f| resolve(mapping, f)),
        refs: item
            .patterns
            .iter()
            .map(|p| match p {
                Pattern::FieldRef { field, .. } => Some(resolve(mapping, field)),
                _ => None,
            })
            .collect(),
        patterns: item.patterns.clone(),
        all: item.all,
    }
}

impl CItem {
    #[inline]
    fn matches<E: EventFields>(&self, e: &E) -> bool {
        match &self.field {
            None => {
                let test = |p: &Pattern| e.any_value(&mut |v| p.test(Some(v), |_| None));
                if self.all {
                    self.patterns.iter().all(test)
                } else {
                    self.patterns.iter().any(test)
                }
            }
            Some(f) => {
                let v = f.get(e);
                let test = |(i, p): (usize, &Pattern)| {
                    let r = self.refs.get(i).and_then(Option::as_ref);
                    p.test(v, |_| r.and_then(|r| r.get(e)))
                };
                if self.all {
                    self.patterns.iter().enumerate().all(test)
                } else {
                    self.patterns.iter().enumerate().any(test)
                }
            }
        }
    }
}

impl CRule {
    #[inline]
    fn matches<E: EventFields>(&self, e: &E) -> bool {
        self.condition.eval(&mut |i| {
            self.searches[i]
                .iter()
                .any(|conj| conj.iter().all(|item| item.matches(e)))
        })
    }
}

impl RuleSet {
    /// Compiles `rules` (detection rules; correlation rules are skipped here) with `mapping`.
    pub fn compile(rules: impl IntoIterator<Item = Arc<Rule>>, mapping: &Mapping) -> RuleSet {
        let mut set = RuleSet::default();
        let mut shape_index: Vec<Shape> = Vec::new();
        for rule in rules {
            let Body::Detection {
                searches,
                condition,
            } = &rule.body
            else {
                continue;
            };
            let idx = set.rules.len() as u32;
            match mapping.shapes(&rule.logsource) {
                None => set.unmapped.push(idx),
                Some(shapes) if shapes.is_empty() => set.everywhere.push(idx),
                Some(shapes) => {
                    for shape in shapes {
                        let at = match shape_index.iter().position(|s| *s == shape) {
                            Some(at) => at,
                            None => {
                                set.shapes.push(CShape(
                                    shape
                                        .0
                                        .iter()
                                        .map(|(places, values)| {
                                            (
                                                Field(places.clone().into_boxed_slice()),
                                                values.clone(),
                                            )
                                        })
                                        .collect(),
                                ));
                                set.by_shape.push(Vec::new());
                                shape_index.push(shape);
                                shape_index.len() - 1
                            }
                        };
                        if !set.by_shape[at].contains(&idx) {
                            set.by_shape[at].push(idx);
                        }
                    }
                }
            }
            set.rules.push(CRule {
                searches: searches
                    .iter()
                    .map(|s| {
                        s.any_of
                            .iter()
                            .map(|conj| conj.iter().map(|i| compile_item(mapping, i)).collect())
                            .collect()
                    })
                    .collect(),
                condition: condition.clone(),
                enabled: true,
                rule,
            });
        }
        set
    }

    /// Rules compiled.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// No rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Rule number `i`.
    pub fn rule(&self, i: u32) -> &Arc<Rule> {
        &self.rules[i as usize].rule
    }

    /// Whether rule `i`'s logsource maps onto events.
    pub fn is_mapped(&self, i: u32) -> bool {
        !self.unmapped.contains(&i)
    }

    /// Turns rule `id` on or off; false when no rule has that id.
    pub fn set_enabled(&mut self, id: &str, on: bool) -> bool {
        let mut found = false;
        for r in self.rules.iter_mut().filter(|r| r.rule.id == id) {
            r.enabled = on;
            found = true;
        }
        found
    }

    /// Appends the index of every enabled rule that `e` matches to `out` (each once).
    pub fn matches<E: EventFields>(&self, e: &E, out: &mut Vec<u32>) {
        let start = out.len();
        for &i in &self.everywhere {
            let r = &self.rules[i as usize];
            if r.enabled && r.matches(e) {
                out.push(i);
            }
        }
        for (shape, rules) in self.shapes.iter().zip(&self.by_shape) {
            if !shape.holds(e) {
                continue;
            }
            for &i in rules {
                let r = &self.rules[i as usize];
                // A rule can sit under several shapes of which more than one hold.
                if r.enabled && !out[start..].contains(&i) && r.matches(e) {
                    out.push(i);
                }
            }
        }
    }
}

/// An event held as plain fields, for tests and tools.
#[derive(Clone, Debug, Default)]
pub struct PlainEvent {
    /// `source`.
    pub source: String,
    /// `host`.
    pub host: String,
    /// `message`.
    pub message: String,
    /// Attributes.
    pub attributes: Vec<(String, String)>,
}

impl EventFields for PlainEvent {
    fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn source(&self) -> &str {
        &self.source
    }
    fn host(&self) -> &str {
        &self.host
    }
    fn message(&self) -> &str {
        &self.message
    }
    fn any_value(&self, f: &mut dyn FnMut(&str) -> bool) -> bool {
        f(&self.message) || self.attributes.iter().any(|(_, v)| f(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::parse_rule;

    fn set(yaml: &str) -> RuleSet {
        RuleSet::compile([Arc::new(parse_rule(yaml).unwrap())], &Mapping::bundled())
    }

    fn ev(source: &str, attrs: &[(&str, &str)]) -> PlainEvent {
        PlainEvent {
            source: source.into(),
            attributes: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..PlainEvent::default()
        }
    }

    const PROC: &str = r#"title: t
id: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b
logsource: {product: windows, category: process_creation}
detection:
    selection:
        Image|endswith: '\vssadmin.exe'
        CommandLine|contains|all: [delete, shadows]
    filter:
        User|startswith: 'NT AUTHORITY'
    condition: selection and not filter
"#;

    #[test]
    fn logsource_field_mapping_and_condition() {
        let s = set(PROC);
        let mut out = Vec::new();
        let sysmon = ev(
            "Microsoft-Windows-Sysmon/Operational",
            &[
                ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                ("EventID", "1"),
                ("Image", r"C:\Windows\System32\VSSADMIN.EXE"),
                ("CommandLine", "vssadmin Delete Shadows /all /quiet"),
                ("User", "CORP\\bob"),
            ],
        );
        s.matches(&sysmon, &mut out);
        assert_eq!(out, vec![0]);
        // Security 4688 names the image NewProcessName: the mapping finds it.
        let sec = ev(
            "Security",
            &[
                ("Channel", "Security"),
                ("EventID", "4688"),
                ("NewProcessName", r"C:\Windows\System32\vssadmin.exe"),
                ("CommandLine", "vssadmin delete shadows"),
            ],
        );
        out.clear();
        s.matches(&sec, &mut out);
        assert_eq!(out, vec![0]);
        // The filter, another logsource, and a missing word each keep it quiet.
        for e in [
            ev(
                "Microsoft-Windows-Sysmon/Operational",
                &[
                    ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                    ("EventID", "1"),
                    ("Image", r"C:\x\vssadmin.exe"),
                    ("CommandLine", "delete shadows"),
                    ("User", "NT AUTHORITY\\SYSTEM"),
                ],
            ),
            ev(
                "Application",
                &[
                    ("Channel", "Application"),
                    ("EventID", "1"),
                    ("Image", r"C:\x\vssadmin.exe"),
                    ("CommandLine", "delete shadows"),
                ],
            ),
            ev(
                "Security",
                &[
                    ("Channel", "Security"),
                    ("EventID", "4688"),
                    ("NewProcessName", r"C:\x\vssadmin.exe"),
                    ("CommandLine", "list shadows"),
                ],
            ),
        ] {
            out.clear();
            s.matches(&e, &mut out);
            assert!(out.is_empty(), "{e:?}");
        }
    }

    #[test]
    fn keywords_search_the_message_and_values() {
        let s = set(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6c\nlogsource: {product: linux, service: sshd}\ndetection:\n  kw:\n    - 'Accepted password for root'\n  condition: kw\n",
        );
        let mut out = Vec::new();
        let mut e = ev("sshd", &[]);
        e.message = "Accepted password for ROOT from 1.2.3.4 port 22 ssh2".into();
        s.matches(&e, &mut out);
        assert_eq!(out, vec![0]);
        out.clear();
        e.source = "sudo".into();
        s.matches(&e, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn disabled_rules_do_not_match() {
        let mut s = set(PROC);
        assert!(s.set_enabled("5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b", false));
        let e = ev(
            "Security",
            &[
                ("Channel", "Security"),
                ("EventID", "4688"),
                ("NewProcessName", r"C:\x\vssadmin.exe"),
                ("CommandLine", "delete shadows"),
            ],
        );
        let mut out = Vec::new();
        s.matches(&e, &mut out);
        assert!(out.is_empty());
    }
}
