//! Grammars (llama.cpp's GBNF) that hold a model's answer to the shape a feature can use: a hunt
//! translation is a JSON object of the hunt's keys, a rule draft is YAML of the Sigma shape with
//! the rule id it was given and keywords its evidence holds. The `local_runner` backend samples
//! under them, so a small model's answer always parses; the other backends get the same
//! instructions in words and are checked after the fact.

use std::fmt::Write;
use watchpost_rules::Logsource;

/// A grammar's text, with `root` as its start rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grammar(pub String);

/// Most names in a translation's `entities`.
const MAX_GRAMMAR_ENTITIES: usize = 4;

/// Characters of a string value in a translation.
const MAX_GRAMMAR_STRING: usize = 64;

/// Keywords a draft chooses from.
const MAX_KEYWORDS: usize = 8;

/// The hunt translation: `{"entities": [...], "source": ..., "min_severity": 0-5, "text": ...,
/// "last_hours": N}`, each key optional; `source` one of `sources` when any are known.
pub fn hunt(sources: &[String]) -> Grammar {
    let known: Vec<String> = sources
        .iter()
        .filter(|s| !s.is_empty() && s.len() <= MAX_GRAMMAR_STRING && s.chars().all(plain_char))
        .map(|s| format!("\"\\\"{s}\\\"\""))
        .collect();
    let source = if known.is_empty() {
        "string".to_string()
    } else {
        known.join(" | ")
    };
    let mut g = String::new();
    let _ = writeln!(
        g,
        r#"root ::= "{{" ws pair ( ws "," ws pair ){{0,4}} ws "}}""#
    );
    let _ = writeln!(g, "pair ::= entities | source | severity | text | hours");
    let _ = writeln!(
        g,
        r#"entities ::= "\"entities\"" ws ":" ws "[" ws string ( ws "," ws string ){{0,{}}} ws "]""#,
        MAX_GRAMMAR_ENTITIES - 1
    );
    let _ = writeln!(g, r#"source ::= "\"source\"" ws ":" ws ( {source} )"#);
    let _ = writeln!(g, r#"severity ::= "\"min_severity\"" ws ":" ws [0-5]"#);
    let _ = writeln!(g, r#"text ::= "\"text\"" ws ":" ws string"#);
    let _ = writeln!(
        g,
        r#"hours ::= "\"last_hours\"" ws ":" ws [1-9] [0-9]{{0,3}}"#
    );
    let _ = writeln!(
        g,
        r#"string ::= "\"" [a-zA-Z0-9 ._:/@-]{{1,{MAX_GRAMMAR_STRING}}} "\"""#
    );
    let _ = writeln!(g, r#"ws ::= " "?"#);
    Grammar(g)
}

/// A character a name may hold in a grammar literal as it is (no quoting needed in JSON, in
/// GBNF or in single-quoted YAML).
fn plain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | ':' | '/' | '@' | '-')
}

/// A Sigma detection rule with the id `rule_id`, one of `logsources` (`{product: linux}` when
/// none is known), keywords chosen from `keywords`, and a level. `None` without keywords to
/// offer: the draft is then free text, checked after the fact.
pub fn sigma_draft(
    rule_id: &str,
    logsources: &[Logsource],
    keywords: &[String],
) -> Option<Grammar> {
    let choices: Vec<String> = keywords
        .iter()
        .filter(|k| k.chars().all(plain_char) && !k.trim().is_empty())
        .take(MAX_KEYWORDS)
        .map(|k| format!("\"'{}'\"", k.trim()))
        .collect();
    if choices.is_empty() || !rule_id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    let mut blocks: Vec<String> = logsources
        .iter()
        .filter_map(|l| {
            let mut block = String::new();
            for (key, value) in l.parts() {
                if !value.chars().all(plain_char) {
                    return None;
                }
                let _ = write!(block, "    {key}: {value}\\n");
            }
            (!block.is_empty()).then(|| format!("\"{block}\""))
        })
        .collect();
    if blocks.is_empty() {
        blocks.push("\"    product: linux\\n\"".into());
    }
    let mut g = String::new();
    let _ = writeln!(
        g,
        r#"root ::= "title: " title "\n" "id: {rule_id}\n" "status: experimental\n" "description: " title "\n" "logsource:\n" logsource "detection:\n" "    keywords:\n" "        - " first "\n" keyword? keyword? "    condition: keywords\n" "level: " level "\n""#
    );
    let _ = writeln!(g, r#"title ::= [A-Z] [a-zA-Z0-9 ,()-]{{4,70}}"#);
    let _ = writeln!(g, "logsource ::= {}", blocks.join(" | "));
    let _ = writeln!(g, r#"keyword ::= "        - " choice "\n""#);
    // The first keyword is the longest (the template's most specific run); others may follow.
    let _ = writeln!(g, "first ::= {}", choices[0]);
    let _ = writeln!(g, "choice ::= {}", choices.join(" | "));
    let _ = writeln!(g, r#"level ::= "low" | "medium" | "high" | "critical""#);
    Some(Grammar(g))
}

/// The literal runs of a mined template, between its masks (`<*>`, `<IP>`, `<NUM>`...), longest
/// first: `Invalid user <*> from <IP> port <NUM>` gives `Invalid user`, `from`, `port`, words
/// every event of the pattern holds.
pub fn template_keywords(template: &str) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    let mut rest = template;
    loop {
        let (run, after) = match mask_at(rest) {
            Some((start, end)) => (&rest[..start], Some(&rest[end..])),
            None => (rest, None),
        };
        let run = run
            .trim()
            .trim_matches(|c: char| !c.is_ascii_alphanumeric());
        if run.len() >= 3 && run.len() <= 60 && !runs.iter().any(|r| r == run) {
            runs.push(run.to_string());
        }
        match after {
            Some(after) => rest = after,
            None => break,
        }
    }
    runs.sort_by_key(|run| std::cmp::Reverse(run.len()));
    runs
}

/// Where the first mask of a template sits: `<` then `*` or capitals and `_`, then `>`.
fn mask_at(text: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(open) = text[from..].find('<').map(|i| from + i) {
        let inner_end = text[open + 1..].find('>').map(|i| open + 1 + i)?;
        let inner = &text[open + 1..inner_end];
        if !inner.is_empty()
            && inner
                .chars()
                .all(|c| c == '*' || c.is_ascii_uppercase() || c == '_')
        {
            return Some((open, inner_end + 1));
        }
        from = open + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logsource(product: &str, service: Option<&str>) -> Logsource {
        Logsource {
            product: Some(product.into()),
            service: service.map(str::to_string),
            ..Logsource::default()
        }
    }

    #[test]
    fn the_hunt_grammar_offers_the_known_sources_only_when_there_are_any() {
        let g = hunt(&["sshd".into(), "nginx".into(), "bad\"name".into()]);
        assert!(
            g.0.contains(r#"source ::= "\"source\"" ws ":" ws ( "\"sshd\"" | "\"nginx\"" )"#),
            "{}",
            g.0
        );
        assert!(!g.0.contains("bad"), "{}", g.0);
        for key in ["entities", "min_severity", "text", "last_hours"] {
            assert!(g.0.contains(&format!(r#""\"{key}\"""#)), "{key}: {}", g.0);
        }
        let free = hunt(&[]);
        assert!(free.0.contains(r#"ws ( string )"#), "{}", free.0);
    }

    #[test]
    fn a_draft_grammar_fixes_the_id_the_logsources_and_the_keywords() {
        let keywords = template_keywords("Invalid user <*> from <IP> port <NUM> ssh2");
        assert_eq!(keywords, ["Invalid user", "from", "port", "ssh2"]);
        assert_eq!(template_keywords("<*>"), Vec::<String>::new());
        assert_eq!(template_keywords("a <b> literal <*>"), ["a <b> literal"]);
        let id = "5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b";
        let g = sigma_draft(id, &[logsource("linux", Some("sshd"))], &keywords).unwrap();
        assert!(g.0.contains(&format!("\"id: {id}\\n\"")), "{}", g.0);
        assert!(
            g.0.contains(r#"logsource ::= "    product: linux\n    service: sshd\n""#),
            "{}",
            g.0
        );
        assert!(
            g.0.contains(r#"choice ::= "'Invalid user'" | "'from'" | "'port'""#),
            "{}",
            g.0
        );
        // No logsource known: the generic one; no keywords or an odd id: no grammar.
        let g = sigma_draft(id, &[], &keywords).unwrap();
        assert!(
            g.0.contains(r#"logsource ::= "    product: linux\n""#),
            "{}",
            g.0
        );
        assert!(sigma_draft(id, &[], &[]).is_none());
        assert!(sigma_draft("x\" | y", &[], &keywords).is_none());
    }
}
