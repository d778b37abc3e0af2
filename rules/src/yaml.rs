//! A YAML document as a tree whose every node knows its line and column.
//!
//! Why a tree of our own rather than serde: every validation error of a rule must point at the
//! place in the file that is wrong (a bad modifier, a condition naming a missing search), and the
//! schema checks want the raw text of plain scalars (`0x17` must stay `0x17`, not become 23; `yes`
//! stays a string). saphyr's event parser gives spans; this module folds its events into nodes.

use crate::error::{ErrorKind, Pos, RuleError};
use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// Deepest nesting of lists and mappings in one document. Sigma rules nest five or six levels.
/// The bound keeps the tree shallow for everything that walks it recursively afterwards (the rule
/// schema, `Drop`, `Clone`): `[[[[...]]]]` a hundred thousand deep would overflow the stack of the
/// thread that validates an upload.
pub const MAX_YAML_DEPTH: usize = 64;

impl Pos {
    fn of(span: &Span) -> Pos {
        Pos {
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

/// A scalar: its text, and whether it was quoted (a quoted scalar is always a string).
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar {
    /// The text as written (escapes of quoted styles resolved).
    pub text: String,
    /// Plain (unquoted) style: may be a number, a boolean or null.
    pub plain: bool,
}

impl Scalar {
    /// A plain `null`, `~` or empty scalar.
    pub fn is_null(&self) -> bool {
        self.plain && matches!(self.text.as_str(), "" | "~" | "null" | "Null" | "NULL")
    }

    /// A plain boolean.
    pub fn as_bool(&self) -> Option<bool> {
        if !self.plain {
            return None;
        }
        match self.text.as_str() {
            "true" | "True" | "TRUE" => Some(true),
            "false" | "False" | "FALSE" => Some(false),
            _ => None,
        }
    }
}

/// What a node holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A scalar.
    Scalar(Scalar),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order (keys are scalars; duplicates are refused while parsing).
    Map(Vec<(Node, Node)>),
}

/// A node and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Where it starts.
    pub pos: Pos,
    /// What it holds.
    pub value: Value,
}

impl Node {
    /// The scalar text, if a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(s) => Some(&s.text),
            _ => None,
        }
    }

    /// The scalar, if one.
    pub fn as_scalar(&self) -> Option<&Scalar> {
        match &self.value {
            Value::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The entries, if a mapping.
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The items, if a sequence.
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(s) => Some(s),
            _ => None,
        }
    }

    /// The value under scalar key `key`, if a mapping holds it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// A short word for the node's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match &self.value {
            Value::Scalar(_) => "a scalar",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

enum Frame {
    Seq(Pos, Vec<Node>),
    /// Entries, the key waiting for its value, and the line of each key so far (duplicates are
    /// found by lookup: a scan of the entries was quadratic in the keys of a mapping).
    Map(
        Pos,
        Vec<(Node, Node)>,
        Option<Node>,
        std::collections::HashMap<String, usize>,
    ),
}

/// Parses every document of `text`. Anchors and aliases are refused: Sigma rules do not use them,
/// and refusing them rules out alias bombs.
pub fn parse_documents(text: &str) -> Result<Vec<Node>, RuleError> {
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut done: Option<Node> = None;
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| {
            RuleError::at(
                Pos {
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                },
                ErrorKind::Yaml,
                e.info().to_string(),
            )
        })?;
        let pos = Pos::of(&span);
        let node = match ev {
            Event::Scalar(text, style, anchor, _) => {
                if anchor != 0 {
                    return Err(RuleError::at(
                        pos,
                        ErrorKind::Yaml,
                        "anchors and aliases are not supported in rules",
                    ));
                }
                Node {
                    pos,
                    value: Value::Scalar(Scalar {
                        text: text.into_owned(),
                        plain: style == ScalarStyle::Plain,
                    }),
                }
            }
            Event::Alias(_) => {
                return Err(RuleError::at(
                    pos,
                    ErrorKind::Yaml,
                    "anchors and aliases are not supported in rules",
                ));
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() == MAX_YAML_DEPTH => {
                return Err(RuleError::at(
                    pos,
                    ErrorKind::Yaml,
                    format!("lists and mappings nest deeper than {MAX_YAML_DEPTH} levels"),
                ));
            }
            Event::SequenceStart(..) => {
                stack.push(Frame::Seq(pos, Vec::new()));
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Frame::Map(pos, Vec::new(), None, Default::default()));
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(p, items)) => Node {
                    pos: p,
                    value: Value::Seq(items),
                },
                _ => continue,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(p, entries, _, _)) => Node {
                    pos: p,
                    value: Value::Map(entries),
                },
                _ => continue,
            },
            Event::DocumentEnd => {
                if let Some(d) = done.take() {
                    docs.push(d);
                }
                continue;
            }
            _ => continue,
        };
        match stack.last_mut() {
            None => done = Some(node),
            Some(Frame::Seq(_, items)) => items.push(node),
            Some(Frame::Map(_, entries, key, lines)) => match key.take() {
                None => {
                    let Some(text) = node.as_str() else {
                        return Err(RuleError::at(
                            node.pos,
                            ErrorKind::Yaml,
                            "mapping keys must be scalars",
                        ));
                    };
                    if let Some(first) = lines.get(text) {
                        return Err(RuleError::at(
                            node.pos,
                            ErrorKind::Yaml,
                            format!("duplicate key `{text}` (first at line {first})"),
                        ));
                    }
                    lines.insert(text.to_string(), node.pos.line);
                    *key = Some(node);
                }
                Some(k) => entries.push((k, node)),
            },
        }
    }
    if let Some(d) = done.take() {
        docs.push(d);
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_carry_positions_and_raw_plain_text() {
        let docs = parse_documents("a: 1\nb:\n  - 0x17\n  - 'q'\nc: {d: e}\n").unwrap();
        let d = &docs[0];
        let b = d.get("b").unwrap().as_seq().unwrap();
        assert_eq!(b[0].as_str(), Some("0x17"));
        assert!(b[0].as_scalar().unwrap().plain);
        assert!(!b[1].as_scalar().unwrap().plain);
        assert_eq!(b[0].pos, Pos { line: 3, column: 5 });
        assert_eq!(d.get("c").unwrap().get("d").unwrap().as_str(), Some("e"));
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse_documents("a: 1\nb: [1, 2\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Yaml);
        assert!(e.pos.unwrap().line >= 2, "{e:?}");
        let e = parse_documents("a: 1\na: 2\n").unwrap_err();
        assert_eq!(e.pos.unwrap().line, 2);
        assert!(e.message.contains("duplicate key"));
        assert!(parse_documents("a: &x 1\nb: *x\n").is_err());
    }

    #[test]
    fn nesting_is_bounded_with_the_place_it_goes_too_deep() {
        let flow = |depth: usize| format!("a: {}1{}\n", "[".repeat(depth), "]".repeat(depth));
        assert!(
            parse_documents(&flow(MAX_YAML_DEPTH - 1)).is_ok(),
            "the top mapping is a level"
        );
        let e = parse_documents(&flow(MAX_YAML_DEPTH)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Yaml);
        assert_eq!(
            e.pos,
            Some(Pos {
                line: 1,
                column: 4 + MAX_YAML_DEPTH - 1
            })
        );
        assert!(e.message.contains("nest deeper than 64"), "{e:?}");
        let block: String = (0..MAX_YAML_DEPTH + 1)
            .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
            .collect();
        let e = parse_documents(&block).unwrap_err();
        // Line n opens the n-th mapping (`k0` is in the top one): line 65 goes past the bound.
        assert_eq!(e.pos.unwrap().line, MAX_YAML_DEPTH + 1);
        for deep in [
            format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)),
            "{a: ".repeat(100_000),
            "- ".repeat(50_000),
        ] {
            assert!(parse_documents(&deep).is_err());
        }
    }

    #[test]
    fn several_documents() {
        let docs = parse_documents("a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 2);
    }
}
