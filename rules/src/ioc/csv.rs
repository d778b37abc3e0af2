//! A small CSV reader (RFC 4180 with lenient edges): feeds are exported from spreadsheets and
//! threat platforms, with quoted fields holding commas, doubled quotes and line breaks, and this
//! is all the CSV the loader needs.

/// Reads records one at a time, remembering the line each starts on.
pub(crate) struct Records<'a> {
    s: &'a str,
    pos: usize,
    line: usize,
}

/// One record's place and whether it was well formed.
pub(crate) struct Record {
    /// 1-based line where the record starts.
    pub(crate) line: usize,
    /// False when a quoted field ran to the end of the input.
    pub(crate) closed: bool,
}

impl<'a> Records<'a> {
    pub(crate) fn new(s: &'a str) -> Records<'a> {
        Records { s, pos: 0, line: 1 }
    }

    /// Reads the next record's fields into `out` (cleared first); `None` at the end.
    pub(crate) fn next_into(&mut self, out: &mut Vec<String>) -> Option<Record> {
        let s = self.s;
        let b = s.as_bytes();
        if self.pos >= b.len() {
            return None;
        }
        out.clear();
        let start_line = self.line;
        let mut closed = true;
        let mut i = self.pos;
        let mut field = String::new();
        loop {
            let mut j = i;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                i = j + 1;
                loop {
                    match s[i..].find('"') {
                        None => {
                            field.push_str(&s[i..]);
                            self.line += s[i..].matches('\n').count();
                            i = b.len();
                            closed = false;
                            break;
                        }
                        Some(q) => {
                            let q = i + q;
                            field.push_str(&s[i..q]);
                            self.line += s[i..q].matches('\n').count();
                            if b.get(q + 1) == Some(&b'"') {
                                field.push('"');
                                i = q + 2;
                            } else {
                                i = q + 1;
                                break;
                            }
                        }
                    }
                }
            }
            // The unquoted field, or whatever follows a closing quote up to the separator.
            let end = s[i..].find([',', '\n']).map_or(b.len(), |e| i + e);
            let text = &s[i..end];
            field.push_str(text.strip_suffix('\r').unwrap_or(text));
            out.push(std::mem::take(&mut field));
            if end == b.len() {
                i = end;
                break;
            }
            i = end + 1;
            if b[end] == b'\n' {
                self.line += 1;
                break;
            }
        }
        self.pos = i;
        Some(Record {
            line: start_line,
            closed,
        })
    }
}
