//! Logsources of application logs and of the Windows Kernel-File provider: SigmaHQ's
//! framework and runtime rules (`category: application` with `product: jvm`, `spring`,
//! `velocity`, `django`, `python`, `nodejs`, `ruby_on_rails`, `sql`), its database rule
//! (`category: database`), and its Windows `file_access` and `file_rename` rules
//! (Microsoft-Windows-Kernel-File, by provider name). Each record must fire exactly the rules
//! of the logsources that cover it (docs/sigma.md, "Logsources and fields").

use std::sync::Arc;
use watchpost_rules::{Mapping, PlainEvent, RuleSet, parse_rule};

/// (logsource, detection) of each rule, in the form SigmaHQ writes them.
const RULES: &[(&str, &str)] = &[
    (
        "category: application, product: jvm",
        "keywords:\n    - 'com.sun.jndi.ldap.'\n  condition: keywords",
    ),
    (
        "category: application, product: spring",
        "keywords:\n    - 'InvalidCsrfTokenException'\n  condition: keywords",
    ),
    (
        "category: application, product: velocity",
        "keywords:\n    - 'ParseErrorException'\n  condition: keywords",
    ),
    (
        "category: application, product: django",
        "keywords:\n    - 'DisallowedHost'\n  condition: keywords",
    ),
    (
        "category: application, product: python",
        "keywords:\n    - 'IntegrityError'\n  condition: keywords",
    ),
    (
        "category: application, product: nodejs",
        "keywords:\n    - 'node:child_process'\n  condition: keywords",
    ),
    (
        "category: application, product: ruby_on_rails",
        "keywords:\n    - 'ActionController::InvalidAuthenticityToken'\n  condition: keywords",
    ),
    (
        "category: application, product: sql",
        "keywords:\n    - 'You have an error in your SQL syntax'\n  condition: keywords",
    ),
    (
        "category: database",
        "keywords:\n    - 'truncate'\n  condition: keywords",
    ),
    (
        "product: windows, category: file_access",
        "sel:\n    FileName|contains: '\\Microsoft\\Protect\\S-1-5-18\\'\n  condition: sel",
    ),
    (
        "product: windows, category: file_rename",
        "sel:\n    FileName|endswith: '.locked'\n  condition: sel",
    ),
];

const JVM: u32 = 0;
const SPRING: u32 = 1;
const VELOCITY: u32 = 2;
const DJANGO: u32 = 3;
const PYTHON: u32 = 4;
const NODEJS: u32 = 5;
const RAILS: u32 = 6;
const SQL: u32 = 7;
const DATABASE: u32 = 8;
const FILE_ACCESS: u32 = 9;
const FILE_RENAME: u32 = 10;

fn set() -> RuleSet {
    let rules = RULES.iter().enumerate().map(|(i, (logsource, detection))| {
        let yaml = format!(
            "title: t{i}\nid: 7b2c3d4e-0000-4000-8000-{:012}\nlogsource: {{{logsource}}}\ndetection:\n  {detection}\n",
            100 + i
        );
        Arc::new(parse_rule(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}")))
    });
    let set = RuleSet::compile(rules, &Mapping::bundled());
    for i in 0..set.len() as u32 {
        assert!(
            set.is_mapped(i),
            "rule {i} ({}) has no mapping",
            RULES[i as usize].0
        );
    }
    set
}

/// A syslog or JSON line of program `source` whose message is `message`.
fn line(source: &str, message: &str) -> PlainEvent {
    PlainEvent {
        source: source.into(),
        message: message.into(),
        ..PlainEvent::default()
    }
}

/// A Microsoft-Windows-Kernel-File record, as the EVTX reader flattens its Analytic channel.
fn kernel_file(event_id: &str, file_name: &str) -> PlainEvent {
    PlainEvent::with_attributes(
        "Microsoft-Windows-Kernel-File/Analytic",
        &[
            ("Channel", "Microsoft-Windows-Kernel-File/Analytic"),
            ("Provider_Name", "Microsoft-Windows-Kernel-File"),
            ("EventID", event_id),
            ("FileName", file_name),
        ],
    )
}

#[test]
fn application_and_kernel_file_records_fire_their_own_logsources_rules_only() {
    let set = set();
    let jndi = "javax.naming.CommunicationException at com.sun.jndi.ldap.LdapCtx.connect";
    let masterkey = r"\Device\HarddiskVolume3\Windows\System32\Microsoft\Protect\S-1-5-18\User\k";
    let cases: Vec<(&str, PlainEvent, Vec<u32>)> = vec![
        ("Tomcat's log", line("catalina", jndi), vec![JVM]),
        (
            "a Java process under its own tag",
            line("java", jndi),
            vec![JVM],
        ),
        (
            "the same text from a program that is no JVM",
            line("sshd", jndi),
            vec![],
        ),
        (
            "Spring Boot (a JVM too)",
            line(
                "spring-boot",
                "o.s.s.w.csrf.InvalidCsrfTokenException: bad token",
            ),
            vec![SPRING],
        ),
        (
            "Velocity in Tomcat",
            line(
                "tomcat",
                "org.apache.velocity.exception.ParseErrorException: x",
            ),
            vec![VELOCITY],
        ),
        (
            "Django behind gunicorn (a Python server)",
            line(
                "gunicorn",
                "django.core.exceptions.DisallowedHost: Invalid HTTP_HOST",
            ),
            vec![DJANGO],
        ),
        (
            "Python",
            line("python3", "sqlalchemy.exc.IntegrityError: duplicate key"),
            vec![PYTHON],
        ),
        (
            "Node",
            line("node", "Error: spawn at node:child_process:420"),
            vec![NODEJS],
        ),
        (
            "Rails under puma",
            line("puma", "ActionController::InvalidAuthenticityToken"),
            vec![RAILS],
        ),
        (
            "MySQL's error",
            line(
                "mysqld",
                "ERROR 1064: You have an error in your SQL syntax near",
            ),
            vec![SQL],
        ),
        (
            "a query log",
            line("postgres", "LOG: statement: TRUNCATE TABLE audit"),
            vec![DATABASE],
        ),
        (
            "the same statement from a shell is no database log",
            line("bash", "psql -c 'TRUNCATE TABLE audit'"),
            vec![],
        ),
        (
            "Kernel-File Create",
            kernel_file("12", masterkey),
            vec![FILE_ACCESS],
        ),
        (
            "Kernel-File CreateNewFile",
            kernel_file("30", masterkey),
            vec![FILE_ACCESS],
        ),
        (
            "Kernel-File Close is no access",
            kernel_file("14", masterkey),
            vec![],
        ),
        (
            "Kernel-File Rename",
            kernel_file(
                "19",
                r"\Device\HarddiskVolume3\Users\ann\report.docx.locked",
            ),
            vec![FILE_RENAME],
        ),
        (
            "Kernel-File RenamePath",
            kernel_file(
                "27",
                r"\Device\HarddiskVolume3\Users\ann\report.docx.locked",
            ),
            vec![FILE_RENAME],
        ),
        (
            "a Sysmon file creation is neither",
            PlainEvent::with_attributes(
                "Microsoft-Windows-Sysmon/Operational",
                &[
                    ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                    ("EventID", "11"),
                    ("FileName", masterkey),
                ],
            ),
            vec![],
        ),
    ];
    let mut out = Vec::new();
    for (what, event, want) in cases {
        out.clear();
        set.matches(&event, &mut out);
        assert_eq!(out, want, "{what}");
    }
}
