//! Embeds the bundled Sigma rules: every `.yml` under `sigma/` becomes an entry of
//! `BUNDLED` (path relative to `sigma/`, text), in path order, so the binary carries its rules and
//! runs from any directory.

use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "yml") {
            out.push(p);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let sigma = root.join("sigma");
    println!("cargo:rerun-if-changed=sigma");
    let mut files = Vec::new();
    walk(&sigma, &mut files);
    let mut code = String::from("/// Bundled rules: (path under `rules/sigma/`, YAML text).\n");
    code.push_str("pub static BUNDLED: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f
            .strip_prefix(&sigma)
            .unwrap_or(f)
            .to_string_lossy()
            .replace('\\', "/");
        code.push_str(&format!(
            "    ({rel:?}, include_str!({:?})),\n",
            f.display().to_string()
        ));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("bundled.rs");
    std::fs::write(out, code).expect("OUT_DIR is writable");
}
