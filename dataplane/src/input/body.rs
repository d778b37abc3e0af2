//! Splitting an ingest body into events: a JSON array of objects (its elements' byte ranges,
//! brackets and strings checked, each element validated later by a worker) or JSON lines.

/// Why an ingest body does not split into events: not a JSON array of objects (JSON lines are
/// split by newline and checked by the workers, line by line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Nothing but white space.
    #[error("empty body")]
    Empty,
    /// Split as an array, but it does not start with `[`.
    #[error("expected a JSON array")]
    NotArray,
    /// An element that is not an object, at this byte.
    #[error("array element at byte {0} is not an object")]
    NotObject(usize),
    /// A `}` closing nothing, at this byte.
    #[error("unbalanced `}}` at byte {0}")]
    Unbalanced(usize),
    /// The array never closes.
    #[error("unterminated JSON array")]
    Unterminated,
    /// Something after the closing `]`, at this byte.
    #[error("unexpected data after the array at byte {0}")]
    Trailing(usize),
}

pub(super) fn first_non_space(b: &[u8]) -> Option<u8> {
    b.iter().copied().find(|c| !c.is_ascii_whitespace())
}

pub(super) fn trim(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b
        && first.is_ascii_whitespace()
    {
        b = rest;
    }
    while let [rest @ .., last] = b
        && last.is_ascii_whitespace()
    {
        b = rest;
    }
    b
}

/// Splits a JSON array into the byte ranges of its elements (each must be an object), checking
/// brackets and strings but leaving full validation of each element to the worker.
#[cfg(test)]
fn split_array(body: &[u8]) -> Result<Vec<std::ops::Range<usize>>, BodyError> {
    let mut out = Vec::new();
    for_each_element(body, &mut |r| out.push(r))?;
    Ok(out)
}

/// An ingest body read once: its events counted and, for a JSON array, its elements checked.
/// The control plane refuses a body for its count and hands it over without a copy, and the
/// ingest thread splits it without checking it again.
#[derive(Debug)]
pub struct CheckedBody {
    bytes: bytes::Bytes,
    events: usize,
}

impl CheckedBody {
    /// Counts and checks `bytes` (see [`ingest_events`]).
    pub fn new(bytes: impl Into<bytes::Bytes>) -> Result<CheckedBody, BodyError> {
        let bytes = bytes.into();
        let events = ingest_events(&bytes)?;
        Ok(CheckedBody { bytes, events })
    }

    /// Its events.
    pub fn events(&self) -> usize {
        self.events
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Nothing in it.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The body.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The events of an ingest body: the elements of a JSON array, or the non-empty lines of JSON
/// lines; an error for an array that does not split. Reads the body once and allocates nothing,
/// so a body can be refused for its count before anything is built for each event (5.5 million
/// empty objects in 16.5 MB took 240 MB to split).
pub fn ingest_events(body: &[u8]) -> Result<usize, BodyError> {
    if first_non_space(body) == Some(b'[') {
        let mut n = 0;
        for_each_element(body, &mut |_| n += 1)?;
        Ok(n)
    } else {
        Ok(body
            .split(|&b| b == b'\n')
            .filter(|l| !trim(l).is_empty())
            .count())
    }
}

/// Calls `f` with the byte range of each element of a JSON array (see [`split_array`]).
pub(super) fn for_each_element(
    body: &[u8],
    f: &mut dyn FnMut(std::ops::Range<usize>),
) -> Result<(), BodyError> {
    let mut i = body
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .ok_or(BodyError::Empty)?;
    if body[i] != b'[' {
        return Err(BodyError::NotArray);
    }
    i += 1;
    let mut depth = 0usize;
    let mut in_str = false;
    let mut esc = false;
    let mut start: Option<usize> = None;
    let mut closed = false;
    while i < body.len() {
        let c = body[i];
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' | b'[' => {
                    if depth == 0 {
                        if c != b'{' {
                            return Err(BodyError::NotObject(i));
                        }
                        start = Some(i);
                    }
                    depth += 1;
                }
                b'}' | b']' => {
                    if depth == 0 {
                        if c == b']' {
                            closed = true;
                            i += 1;
                            break;
                        }
                        return Err(BodyError::Unbalanced(i));
                    }
                    depth -= 1;
                    if depth == 0
                        && let Some(s) = start.take()
                    {
                        f(s..i + 1);
                    }
                }
                b',' if depth == 0 => {}
                c if depth == 0 && !c.is_ascii_whitespace() => {
                    return Err(BodyError::NotObject(i));
                }
                _ => {}
            }
        }
        i += 1;
    }
    if !closed {
        return Err(BodyError::Unterminated);
    }
    if body[i..].iter().any(|c| !c.is_ascii_whitespace()) {
        return Err(BodyError::Trailing(i));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_split_into_objects() {
        let b = br#" [ {"a":"x]}"}, {"b":{"c":[1,2]}} ] "#;
        let r = split_array(b).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(&b[r[0].clone()], br#"{"a":"x]}"}"#);
        assert_eq!(&b[r[1].clone()], br#"{"b":{"c":[1,2]}}"#);
        assert_eq!(split_array(b"[]").unwrap().len(), 0);
    }

    #[test]
    fn bad_arrays_are_refused_with_a_reason() {
        assert_eq!(split_array(b"[1,2]"), Err(BodyError::NotObject(1)));
        assert_eq!(split_array(b"[{\"a\":1}"), Err(BodyError::Unterminated));
        assert_eq!(split_array(b"[{}] x"), Err(BodyError::Trailing(4)));
        assert!(split_array(b"[}]").is_err());
        assert_eq!(
            split_array(b"[1,2]").unwrap_err().to_string(),
            "array element at byte 1 is not an object"
        );
    }
}
