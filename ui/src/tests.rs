//! What the content-security policy and the asset table rely on, checked on the files themselves:
//! a violation here would otherwise only show as a blank or broken page in a browser.

use super::*;
use std::collections::BTreeSet;

fn text(a: &Asset) -> &'static str {
    std::str::from_utf8(a.body).expect("assets are UTF-8 text")
}

/// The values of `attr="..."` in `html`.
fn attribute_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!(" {attr}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&needle) {
        rest = &rest[at + needle.len()..];
        let end = rest.find('"').expect("closed attribute");
        out.push(&rest[..end]);
        rest = &rest[end..];
    }
    out
}

#[test]
fn every_file_of_the_app_is_listed_and_every_listed_file_exists() {
    let dir = std::path::PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
    )
    .join("app");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let listed: BTreeSet<String> = ASSETS.iter().map(|a| a.name.to_string()).collect();
    assert_eq!(on_disk, listed, "ui/app/ and ASSETS differ");
    assert_eq!(listed.len(), ASSETS.len(), "an asset is listed twice");
    assert!(asset(INDEX).is_some());
    assert!(asset("../Cargo.toml").is_none() && asset("").is_none());
}

#[test]
fn content_types_follow_the_extension_and_tags_the_bytes() {
    let mut tags = BTreeSet::new();
    for a in &ASSETS {
        let want = match a.name.rsplit('.').next() {
            Some("html") => "text/html; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("svg") => "image/svg+xml",
            other => panic!("{}: no content type for {other:?}", a.name),
        };
        assert_eq!(a.content_type, want, "{}", a.name);
        assert_eq!(a.etag(), fnv1a(a.body));
        assert!(
            tags.insert(a.etag()),
            "{}: same tag as another asset",
            a.name
        );
    }
    assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
}

#[test]
fn the_page_loads_only_listed_assets_and_nothing_inline() {
    let html = text(asset(INDEX).unwrap());
    let mut referenced = attribute_values(html, "src");
    referenced.extend(attribute_values(html, "href"));
    assert!(referenced.len() >= 3, "{referenced:?}");
    for r in referenced {
        let name = r
            .strip_prefix("/assets/")
            .unwrap_or_else(|| panic!("{r}: the page loads only /assets/"));
        assert!(asset(name).is_some(), "{r} is not an asset");
    }
    // Blocked by `script-src 'self'` and `style-src 'self'`: inline code, handlers, styles.
    let lower = html.to_ascii_lowercase();
    assert_eq!(
        lower.matches("<script").count(),
        lower.matches("<script type=\"module\" src=").count()
    );
    for forbidden in ["<style", " style=", "javascript:"] {
        assert!(!lower.contains(forbidden), "index.html holds {forbidden}");
    }
    for word in lower.split_whitespace() {
        assert!(
            !(word.starts_with("on") && word.contains('=')),
            "index.html has an inline handler: {word}"
        );
    }
}

#[test]
fn scripts_import_only_listed_modules_and_never_write_html() {
    for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
        let js = text(a);
        for line in js.lines().filter(|l| l.starts_with("import ")) {
            let from = line
                .rsplit("from '")
                .next()
                .and_then(|s| s.strip_suffix("';"))
                .unwrap_or_else(|| panic!("{}: unusual import {line}", a.name));
            let name = from
                .strip_prefix("./")
                .unwrap_or_else(|| panic!("{}: imports {from}, not a sibling module", a.name));
            assert!(
                asset(name).is_some(),
                "{} imports {from}, which is not an asset",
                a.name
            );
        }
        // Trusted Types are enforced with no policy: these sinks would throw (or run strings as
        // code, which `script-src 'self'` refuses anyway).
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "createContextualFragment",
        ] {
            assert!(!js.contains(sink), "{} uses {sink}", a.name);
        }
    }
}
