//! Reading rules from files and folders.

use crate::error::RuleError;
use crate::rule::{Rule, parse_rule};
use std::path::{Path, PathBuf};

/// The outcome of reading one file.
#[derive(Debug)]
pub struct Loaded {
    /// The file.
    pub path: PathBuf,
    /// The rule, or why there is none.
    pub rule: Result<Rule, RuleError>,
    /// The file's text (empty when unreadable).
    pub text: String,
}

/// The rule files under `paths`: files as given, folders walked for `.yml`/`.yaml` in name order
/// (a stable order, so outputs compare across runs).
pub fn rule_files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "yml" || e == "yaml") {
            out.push(p);
        }
    }
    Ok(())
}

/// Reads and parses `files` on all cores, in their order. Parsing is most of the cost of loading
/// a large rule set (3,754 SigmaHQ rules), and files are independent.
pub fn load_files(files: &[PathBuf]) -> Vec<Loaded> {
    use rayon::prelude::*;
    files.par_iter().map(|f| load_file(f)).collect()
}

/// Reads and parses one file.
pub fn load_file(path: &Path) -> Loaded {
    match std::fs::read_to_string(path) {
        Ok(text) => Loaded {
            path: path.to_path_buf(),
            rule: parse_rule(&text),
            text,
        },
        Err(e) => Loaded {
            path: path.to_path_buf(),
            rule: Err(RuleError {
                kind: crate::error::ErrorKind::Yaml,
                pos: None,
                message: format!("cannot read: {e}"),
            }),
            text: String::new(),
        },
    }
}
