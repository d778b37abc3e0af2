//! Reading feed files: plain lists, CSV and STIX 2.1, chosen by extension and content.
//!
//! A feed is third-party data: it may be half-written, in the wrong encoding or not a feed at
//! all. Nothing here fails a load; each unusable line becomes an [`IocError`] with its file and
//! line, and [`FileStats`] says what each file gave, so an operator can see that a feed went bad.

use super::csv::Records;
use super::file::{FileCtx, FileStats, Format, IocError};
use super::parse::{self, Hint};
use super::{IocSet, stix};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The result of [`IocSet::load_dir`]: the set, whatever went wrong, and what each file gave.
#[derive(Debug)]
pub struct IocLoad {
    /// Every indicator that loaded.
    pub set: IocSet,
    /// One entry per file read, in name order.
    pub files: Vec<FileStats>,
    /// Unusable entries, at most 100 per file.
    pub errors: Vec<IocError>,
}

fn format_of(name: &str, bytes: &[u8]) -> Format {
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        None | Some("txt" | "list") => Format::List,
        Some("csv") => Format::Csv,
        Some("json" | "stix") => Format::Stix,
        Some(_) => {
            let head = &bytes[..bytes.len().min(8192)];
            match head.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'{' | b'[') => Format::Stix,
                _ if head.contains(&0) => Format::Skipped,
                _ => Format::List,
            }
        }
    }
}

fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

impl IocSet {
    /// Reads every regular file of `dir` (not its subfolders; hidden files and `~` backups left
    /// out) in name order, so the first file to name an indicator is the one it is attributed
    /// to. STIX indicators whose `valid_until` is not after `now` are skipped.
    pub fn load_dir(dir: &Path, now: SystemTime) -> IocLoad {
        let mut set = IocSet::new();
        let mut files = Vec::new();
        let mut errors = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) => {
                errors.push(IocError {
                    file: dir.display().to_string(),
                    line: 0,
                    message: format!("cannot read the folder: {e}"),
                });
                return IocLoad { set, files, errors };
            }
        };
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.starts_with('.') || name.ends_with('~') || !path.is_file() {
                continue;
            }
            match std::fs::read(&path) {
                Ok(bytes) => {
                    let (stats, errs) = set.add_file(&name, &bytes, now);
                    files.push(stats);
                    errors.extend(errs);
                }
                Err(e) => {
                    files.push(FileStats {
                        file: name.clone(),
                        format: Format::Skipped,
                        added: 0,
                        duplicates: 0,
                        skipped: 0,
                        errors: 1,
                    });
                    errors.push(IocError {
                        file: name,
                        line: 0,
                        message: format!("cannot read: {e}"),
                    });
                }
            }
        }
        set.shrink_to_fit();
        IocLoad { set, files, errors }
    }

    /// Reads one feed file's contents, named `name` (its extension picks the format, else the
    /// content does), into the set.
    pub fn add_file(
        &mut self,
        name: &str,
        bytes: &[u8],
        now: SystemTime,
    ) -> (FileStats, Vec<IocError>) {
        let format = format_of(name, bytes);
        let mut ctx = FileCtx::new(self, name, format);
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        match format {
            Format::List => read_list(&mut ctx, &String::from_utf8_lossy(bytes)),
            Format::Csv => read_csv(&mut ctx, &String::from_utf8_lossy(bytes)),
            Format::Stix => stix::read(&mut ctx, bytes, unix_seconds(now)),
            Format::Skipped => ctx.error(0, "binary file, not read".to_string()),
        }
        ctx.finish()
    }
}

/// One indicator per line; `#` starts a comment (at the start of a line, or after a blank, so
/// URL fragments survive) and the comment becomes the label. Hosts-file lines
/// (`0.0.0.0 evil.com`) give their domain; other trailing text is taken as the label.
fn read_list(ctx: &mut FileCtx<'_>, text: &str) {
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("//") {
            continue;
        }
        let hash = line
            .as_bytes()
            .windows(2)
            .position(|w| w[0].is_ascii_whitespace() && w[1] == b'#')
            .map(|p| p + 1);
        let (body, comment) = match hash {
            Some(h) => (line[..h].trim(), Some(line[h + 1..].trim())),
            None => (line, None),
        };
        let comment = comment.filter(|c| !c.is_empty());
        let (mut value, mut rest) = first_word(body);
        if matches!(value, "0.0.0.0" | "127.0.0.1" | "::" | "::1") && !rest.is_empty() {
            (value, rest) = first_word(rest);
        }
        let label = comment.or(Some(rest).filter(|r| !r.is_empty()));
        ctx.add_at(n + 1, value, Hint::Auto, label, None);
    }
}

/// The first blank-separated word and the rest, trimmed.
fn first_word(s: &str) -> (&str, &str) {
    let s = s.trim();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim_start()),
        None => (s, ""),
    }
}

/// Column names, in order of preference, that hold the indicator.
const VALUE_COLUMNS: [&str; 4] = ["indicator", "value", "ioc", "observable"];

/// Column names that hold an indicator of a known kind, for exports without a value column
/// (abuse.ch, blocklists).
const TYPED_COLUMNS: [(&str, Hint); 14] = [
    ("url", Hint::Url),
    ("domain", Hint::Domain),
    ("hostname", Hint::Domain),
    ("host", Hint::Domain),
    ("ip", Hint::Ip),
    ("ip_address", Hint::Ip),
    ("dst_ip", Hint::Ip),
    ("cidr", Hint::Ip),
    ("md5", Hint::Md5),
    ("md5_hash", Hint::Md5),
    ("sha1", Hint::Sha1),
    ("sha1_hash", Hint::Sha1),
    ("sha256", Hint::Sha256),
    ("sha256_hash", Hint::Sha256),
];

const TYPE_COLUMNS: [&str; 4] = ["type", "indicator_type", "ioc_type", "kind"];
const LABEL_COLUMNS: [&str; 4] = ["description", "comment", "comments", "label"];
const CONFIDENCE_COLUMNS: [&str; 2] = ["confidence", "confidence_level"];

struct Columns {
    value: usize,
    /// The kind the value column's name implies, when it is not a generic one.
    implied: Hint,
    kind: Option<usize>,
    label: Option<usize>,
    confidence: Option<usize>,
}

fn columns(header: &[String]) -> Option<Columns> {
    let names: Vec<String> = header
        .iter()
        .map(|h| h.trim().trim_start_matches('#').trim().to_ascii_lowercase())
        .collect();
    let find = |wanted: &[&str]| {
        wanted
            .iter()
            .find_map(|w| names.iter().position(|n| n == w))
    };
    let (value, implied) = match find(&VALUE_COLUMNS) {
        Some(i) => (i, Hint::Auto),
        None => TYPED_COLUMNS
            .iter()
            .find_map(|(w, h)| names.iter().position(|n| n == w).map(|i| (i, *h)))?,
    };
    Some(Columns {
        value,
        implied,
        kind: find(&TYPE_COLUMNS),
        label: find(&LABEL_COLUMNS),
        confidence: find(&CONFIDENCE_COLUMNS),
    })
}

/// A header row names the indicator column; `#` lines before it are comments, and the last of
/// them is taken as the header when the first row names no known column (abuse.ch writes its
/// header as a comment).
fn read_csv(ctx: &mut FileCtx<'_>, text: &str) {
    let mut records = Records::new(text);
    let mut fields = Vec::new();
    let mut last_comment: Option<Vec<String>> = None;
    let mut cols: Option<Columns> = None;
    while let Some(rec) = records.next_into(&mut fields) {
        if !rec.closed {
            ctx.error(rec.line, "a quoted field is not closed".to_string());
        }
        let blank = fields.iter().all(|f| f.trim().is_empty());
        let comment = fields
            .first()
            .is_some_and(|f| f.trim_start().starts_with('#'));
        if blank {
            continue;
        }
        if cols.is_none() {
            if comment {
                last_comment = Some(fields.clone());
                continue;
            }
            if let Some(c) = columns(&fields) {
                cols = Some(c);
                continue;
            }
            match last_comment.as_deref().and_then(columns) {
                // The row is data under a commented header.
                Some(c) => cols = Some(c),
                None => {
                    let wanted = VALUE_COLUMNS.join("`, `");
                    ctx.error(
                        rec.line,
                        format!("the header names no indicator column (one of `{wanted}`)"),
                    );
                    return;
                }
            }
        } else if comment {
            continue;
        }
        if let Some(c) = &cols {
            read_row(ctx, c, rec.line, &fields);
        }
    }
}

fn read_row(ctx: &mut FileCtx<'_>, cols: &Columns, line: usize, fields: &[String]) {
    let Some(value) = fields.get(cols.value) else {
        ctx.error(
            line,
            format!(
                "the row has {} fields; the indicator is field {}",
                fields.len(),
                cols.value + 1
            ),
        );
        return;
    };
    let hint = match cols.kind.and_then(|k| fields.get(k)) {
        Some(t) if !t.trim().is_empty() => match parse::type_hint(t) {
            Some(h) => h,
            None => {
                ctx.stats.skipped += 1;
                return;
            }
        },
        _ => cols.implied,
    };
    let label = cols.label.and_then(|l| fields.get(l)).map(String::as_str);
    let confidence = match cols
        .confidence
        .and_then(|c| fields.get(c))
        .map(|c| c.trim())
    {
        None | Some("") => None,
        Some(text) => match parse::confidence(text) {
            Some(c) => Some(c),
            None => {
                // The indicator still counts (at full weight): a feed's typo must not hide it.
                ctx.error(
                    line,
                    format!(
                        "confidence `{}` is not 0 to 100 or high, medium, low (the indicator is kept without one)",
                        parse::short(text)
                    ),
                );
                None
            }
        },
    };
    ctx.add_at(line, value, hint, label, confidence);
}
