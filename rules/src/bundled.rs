//! The rules written by this project, embedded at build time from `rules/sigma/` (see
//! `build.rs`), so the service loads them wherever it runs.

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

#[cfg(test)]
mod tests {
    use super::BUNDLED;

    /// The README's count of the bundled rules is the count that loads (it said 209 when 222
    /// loaded).
    #[test]
    fn the_readme_counts_the_bundled_rules_that_load() {
        let rules: Vec<crate::Rule> = BUNDLED
            .iter()
            .map(|(path, text)| crate::parse_rule(text).unwrap_or_else(|e| panic!("{path}: {e}")))
            .collect();
        let correlations = rules
            .iter()
            .filter(|r| matches!(r.body, crate::Body::Correlation(_)))
            .count();
        let detections = rules.len() - correlations;
        let readme = include_str!("../../README.md").replace('\n', " ");
        let said = format!(
            "Sigma rules ({} bundled: {detections} detection rules and {correlations} correlations;",
            rules.len()
        );
        assert!(readme.contains(&said), "the README should say: {said}");
    }
}
