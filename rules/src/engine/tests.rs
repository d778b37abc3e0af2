use super::layout::{Layouts, Slot};
use super::values::FieldSlots;
use super::*;
use crate::mapping::FieldSource;
use crate::rule::parse_rule;
use watchpost_proto::PlainEvent;

fn set(yaml: &str) -> RuleSet {
    RuleSet::compile([Arc::new(parse_rule(yaml).unwrap())], &Mapping::bundled())
}

fn ev(source: &str, attrs: &[(&str, &str)]) -> PlainEvent {
    PlainEvent::with_attributes(source, attrs)
}

/// Whether `rules` match a Security record holding `attrs` besides its channel.
fn matches_security_record(rules: &RuleSet, attrs: &[(&str, &str)]) -> bool {
    let mut out = Vec::new();
    rules.matches(
        &ev("", &[&[("Channel", "Security")], attrs].concat()),
        &mut out,
    );
    !out.is_empty()
}

const PROC: &str = r#"title: t
id: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b
logsource: {product: windows, category: process_creation}
detection:
    selection:
        Image|endswith: '\vssadmin.exe'
        CommandLine|contains|all: [delete, shadows]
    filter:
        User|startswith: 'NT AUTHORITY'
    condition: selection and not filter
"#;

#[test]
fn logsource_field_mapping_and_condition() {
    let s = set(PROC);
    let mut out = Vec::new();
    let sysmon = ev(
        "Microsoft-Windows-Sysmon/Operational",
        &[
            ("Channel", "Microsoft-Windows-Sysmon/Operational"),
            ("EventID", "1"),
            ("Image", r"C:\Windows\System32\VSSADMIN.EXE"),
            ("CommandLine", "vssadmin Delete Shadows /all /quiet"),
            ("User", "CORP\\bob"),
        ],
    );
    s.matches(&sysmon, &mut out);
    assert_eq!(out, vec![0]);
    // Security 4688 names the image NewProcessName: the mapping finds it.
    let sec = ev(
        "Security",
        &[
            ("Channel", "Security"),
            ("EventID", "4688"),
            ("NewProcessName", r"C:\Windows\System32\vssadmin.exe"),
            ("CommandLine", "vssadmin delete shadows"),
        ],
    );
    out.clear();
    s.matches(&sec, &mut out);
    assert_eq!(out, vec![0]);
    // The filter, another logsource, and a missing word each keep it quiet.
    for e in [
        ev(
            "Microsoft-Windows-Sysmon/Operational",
            &[
                ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                ("EventID", "1"),
                ("Image", r"C:\x\vssadmin.exe"),
                ("CommandLine", "delete shadows"),
                ("User", "NT AUTHORITY\\SYSTEM"),
            ],
        ),
        ev(
            "Application",
            &[
                ("Channel", "Application"),
                ("EventID", "1"),
                ("Image", r"C:\x\vssadmin.exe"),
                ("CommandLine", "delete shadows"),
            ],
        ),
        ev(
            "Security",
            &[
                ("Channel", "Security"),
                ("EventID", "4688"),
                ("NewProcessName", r"C:\x\vssadmin.exe"),
                ("CommandLine", "list shadows"),
            ],
        ),
    ] {
        out.clear();
        s.matches(&e, &mut out);
        assert!(out.is_empty(), "{e:?}");
    }
}

#[test]
fn keywords_search_the_message_and_values() {
    let s = set(
        "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6c\nlogsource: {product: linux, service: sshd}\ndetection:\n  kw:\n    - 'Accepted password for root'\n  condition: kw\n",
    );
    let mut out = Vec::new();
    let mut e = ev("sshd", &[]);
    e.message = "Accepted password for ROOT from 1.2.3.4 port 22 ssh2".into();
    s.matches(&e, &mut out);
    assert_eq!(out, vec![0]);
    out.clear();
    e.source = "sudo".into();
    s.matches(&e, &mut out);
    assert!(out.is_empty());
}

/// An event laid out in one text, names between values, as the data plane's arena holds
/// it: keyword gates of a few literals search that text rather than the values.
struct InOneText {
    plain: PlainEvent,
    text: String,
}

impl InOneText {
    fn of(plain: PlainEvent) -> InOneText {
        let mut text = format!("{}{}", plain.source, plain.message);
        for (name, value) in &plain.attributes {
            text.push_str(name);
            text.push_str(value);
        }
        InOneText { plain, text }
    }
}

impl EventFields for InOneText {
    fn attribute(&self, name: &str) -> Option<&str> {
        self.plain.attribute(name)
    }
    fn source(&self) -> &str {
        self.plain.source()
    }
    fn host(&self) -> &str {
        self.plain.host()
    }
    fn message(&self) -> &str {
        self.plain.message()
    }
    fn any_value(&self, f: &mut dyn FnMut(&str) -> bool) -> bool {
        self.plain.any_value(f)
    }
    fn any_attribute<'a>(&'a self, f: &mut dyn FnMut(&'a str, &'a str) -> bool) -> bool {
        self.plain.any_attribute(f)
    }
    fn values_text(&self) -> Option<&[u8]> {
        Some(self.text.as_bytes())
    }
}

#[test]
fn a_keyword_in_the_events_text_matches_as_in_its_values() {
    let s = set(
        "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a8c\nlogsource: {product: windows, category: process_creation}\ndetection:\n  kw:\n    - '\\perfc.dat'\n  condition: kw\n",
    );
    let sysmon = |attrs: &[(&str, &str)]| {
        ev(
            "Microsoft-Windows-Sysmon/Operational",
            &[
                &[
                    ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                    ("EventID", "1"),
                ],
                attrs,
            ]
            .concat(),
        )
    };
    for (attrs, hit) in [
        (
            &[("CommandLine", r"rundll32 C:\Windows\PERFC.DAT,#1")][..],
            true,
        ),
        (&[("Image", r"C:\x\Perfc.dat")][..], true),
        (&[("CommandLine", r"C:\x\perfc.da")][..], false),
        // In the text, a value ends `\perf` and the next name starts `c.dat`: the gate
        // lets the rule through, its evaluation reads the values.
        (&[("A", r"x\perf"), ("c.dat", "y")][..], false),
    ] {
        let plain = sysmon(attrs);
        let (mut by_values, mut by_text) = (Vec::new(), Vec::new());
        s.matches(&plain, &mut by_values);
        s.matches(&InOneText::of(plain), &mut by_text);
        assert_eq!(by_values, by_text, "{attrs:?}");
        assert_eq!(!by_text.is_empty(), hit, "{attrs:?}");
    }
}

/// The event's text for keyword searches leaves out values shorter than every keyword
/// literal of the set, not of the first group that makes it: a short literal of another
/// group is still found.
#[test]
fn a_short_keyword_of_another_group_is_found_in_a_short_value() {
    let rules = [
        "title: a\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a8d\nlogsource: {product: windows, category: process_creation}\ndetection:\n  kw:\n    - 'longer-keyword'\n  condition: kw\n",
        "title: b\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a8e\nlogsource: {product: windows, service: sysmon}\ndetection:\n  kw:\n    - 'ab1'\n  condition: kw\n",
    ];
    let s = RuleSet::compile(
        rules.map(|r| Arc::new(parse_rule(r).unwrap())),
        &Mapping::bundled(),
    );
    let e = ev(
        "Microsoft-Windows-Sysmon/Operational",
        &[
            ("Channel", "Microsoft-Windows-Sysmon/Operational"),
            ("EventID", "1"),
            ("CommandLine", "run --longer-keyword"),
            ("Tag", "AB1"),
        ],
    );
    let mut out = Vec::new();
    s.matches(&e, &mut out);
    assert_eq!(out, [0, 1]);
}

#[test]
fn a_value_of_the_same_folded_hash_is_not_taken_for_the_rules_value() {
    // `\` and `|` differ in their `0x20` bit alone: their hashes meet (see
    // `gate::folded_hash`), and the rule's own comparison must tell them apart.
    let s = set(
        "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a71\nlogsource: {product: windows, service: security}\ndetection:\n  sel:\n    EventID: 4625\n    TargetUserName: 'corp\\adm'\n  condition: sel\n",
    );
    let mut out = Vec::new();
    for (user, hit) in [
        (r"corp\adm", true),
        (r"CORP\Adm", true),
        ("corp|adm", false),
        ("CORP|ADM", false),
    ] {
        let event = ev(
            "Security",
            &[
                ("Channel", "Security"),
                ("EventID", "4625"),
                ("TargetUserName", user),
            ],
        );
        out.clear();
        s.matches(&event, &mut out);
        assert_eq!(out.len(), usize::from(hit), "{user}");
        out.clear();
        s.clone().without_prefilter().matches(&event, &mut out);
        assert_eq!(out.len(), usize::from(hit), "without the index: {user}");
    }
}

#[test]
fn exact_values_are_indexed_and_still_compare_as_numbers() {
    let s = set(
        "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a70\nlogsource: {product: windows, service: security}\ndetection:\n  sel:\n    EventID: 4625\n    LogonType: 10\n  condition: sel\n",
    );
    let login = |id: &str, logon: &str| {
        ev(
            "Security",
            &[
                ("Channel", "Security"),
                ("EventID", id),
                ("LogonType", logon),
            ],
        )
    };
    let mut out = Vec::new();
    // `0x1211` is 4625 written in hex: the index finds the number, not only the text.
    for (id, logon, hit) in [
        ("4625", "10", true),
        ("0x1211", "10", true),
        ("4625", "010", true),
        ("4624", "10", false),
        ("4625", "2", false),
    ] {
        out.clear();
        s.matches(&login(id, logon), &mut out);
        assert_eq!(
            out.len(),
            usize::from(hit),
            "EventID {id}, LogonType {logon}"
        );
        out.clear();
        s.clone()
            .without_prefilter()
            .matches(&login(id, logon), &mut out);
        assert_eq!(
            out.len(),
            usize::from(hit),
            "without the index: {id} {logon}"
        );
    }
}

#[test]
fn linux_keyword_rules_leave_windows_records_alone() {
    let s = set(
        "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a71\nlogsource: {product: linux}\ndetection:\n  kw:\n    - 'chmod 777 /tmp'\n  condition: kw\n",
    );
    let mut out = Vec::new();
    let mut line = ev("bash", &[]);
    line.message = "user ran chmod 777 /tmp/x".into();
    s.matches(&line, &mut out);
    assert_eq!(out, vec![0], "a syslog line");
    out.clear();
    let windows = ev(
        "Microsoft-Windows-Sysmon/Operational",
        &[
            ("Channel", "Microsoft-Windows-Sysmon/Operational"),
            ("CommandLine", "wsl chmod 777 /tmp/x"),
        ],
    );
    s.matches(&windows, &mut out);
    assert!(out.is_empty(), "a Windows record is not a Linux log");
    // An ETW trace's record, exported to .evtx: a provider, no channel.
    let trace = ev(
        "",
        &[
            ("Provider_Name", "Microsoft-Windows-RPC"),
            ("Endpoint", "chmod 777 /tmp/x"),
        ],
    );
    s.matches(&trace, &mut out);
    assert!(out.is_empty(), "a Windows trace record is not a Linux log");
}

#[test]
fn an_antivirus_signature_is_defenders_threat_name() {
    let s = set(
        "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a72\nlogsource: {category: antivirus}\ndetection:\n  sel:\n    Signature|contains: 'Mimikatz'\n  condition: sel\n",
    );
    let mut out = Vec::new();
    let detected = ev(
        "Microsoft-Windows-Windows Defender/Operational",
        &[
            ("Channel", "Microsoft-Windows-Windows Defender/Operational"),
            ("EventID", "1116"),
            ("ThreatName", "HackTool:Win32/Mimikatz.D"),
        ],
    );
    s.matches(&detected, &mut out);
    assert_eq!(out, vec![0]);
}

/// Defender's events forwarded as JSON keep its field names word by word (`Threat Name`), where
/// the `.evtx` reader (and the Sigma taxonomy) write `ThreatName`: both spellings match.
#[test]
fn defenders_spaced_field_names_match_as_the_evtx_names_do() {
    let s = set(
        "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a7e\nlogsource: {product: windows, service: windefend}\ndetection:\n  sel:\n    EventID: 1116\n    ThreatName|contains: 'EICAR'\n    SourceName: 'Real-Time Protection'\n  condition: sel\n",
    );
    let defender = |threat: &str, source: &str| {
        ev(
            "Microsoft-Windows-Windows Defender/Operational",
            &[
                ("Channel", "Microsoft-Windows-Windows Defender/Operational"),
                ("EventID", "1116"),
                (threat, "Virus:DOS/EICAR_Test_File"),
                (source, "Real-Time Protection"),
            ],
        )
    };
    for (threat, source) in [("ThreatName", "SourceName"), ("Threat Name", "Source Name")] {
        let mut out = Vec::new();
        s.matches(&defender(threat, source), &mut out);
        assert_eq!(out, vec![0], "{threat}, {source}");
    }
    // Another name is not read as the field: no match.
    let mut out = Vec::new();
    s.matches(&defender("Threat Names", "Source Name"), &mut out);
    assert!(out.is_empty());
}

const NETWORK: &str = r#"title: t
id: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a73
logsource: {product: windows, category: network_connection}
detection:
    selection:
        Image|endswith: '\vssadmin.exe'
    condition: selection
"#;

/// Groups are remembered per combination of shape values: each event of a stream that
/// alternates event types (and spells the channel in other cases) still goes to its own
/// logsource's rules, and two sets used in turn on one thread keep their own choices.
#[test]
fn each_event_type_reaches_its_own_rules_however_the_stream_alternates() {
    let both = RuleSet::compile(
        [PROC, NETWORK].map(|y| Arc::new(parse_rule(y).unwrap())),
        &Mapping::bundled(),
    );
    let network_only = set(NETWORK);
    let sysmon = |channel: &str, id: &str| {
        ev(
            channel,
            &[
                ("Channel", channel),
                ("EventID", id),
                ("Image", r"C:\Windows\System32\vssadmin.exe"),
                ("CommandLine", "vssadmin delete shadows"),
            ],
        )
    };
    let channel = "Microsoft-Windows-Sysmon/Operational";
    let upper = channel.to_uppercase();
    let mut out = Vec::new();
    for round in 0..3 {
        for (event, want, want_network_only) in [
            (sysmon(channel, "1"), vec![0], vec![]),
            (sysmon(channel, "3"), vec![1], vec![0]),
            (sysmon(&upper, "1"), vec![0], vec![]),
            (sysmon(channel, "7"), vec![], vec![]),
            (ev("", &[("EventID", "1")]), vec![], vec![]),
        ] {
            out.clear();
            both.matches(&event, &mut out);
            assert_eq!(out, want, "round {round}: {event:?}");
            out.clear();
            network_only.matches(&event, &mut out);
            assert_eq!(
                out, want_network_only,
                "round {round}, other set: {event:?}"
            );
        }
    }
}

/// Process-creation rule number `i`, needing `literal` in the command line.
fn command_line_rule(i: usize, literal: &str) -> Arc<Rule> {
    Arc::new(
            parse_rule(&format!(
                "title: word {i}\nid: 00000000-0000-4000-8000-{i:012}\nlogsource: {{product: windows, category: process_creation}}\ndetection:\n    selection:\n        CommandLine|contains: '{literal}'\n    condition: selection\n"
            ))
            .unwrap(),
        )
}

/// A Sysmon process record of `command_line`.
fn process(command_line: &str) -> PlainEvent {
    ev(
        "Microsoft-Windows-Sysmon/Operational",
        &[
            ("Channel", "Microsoft-Windows-Sysmon/Operational"),
            ("EventID", "1"),
            ("CommandLine", command_line),
        ],
    )
}

#[test]
fn a_value_seen_again_reaches_the_rules_it_did_the_first_time() {
    // Forty rules, each needing its own word in the command line: past
    // `substrings::DFA_MAX_LITERALS` the gate finds them by grams and remembers recent
    // values (`gate::GateMemo`).
    let rules = (0..40).map(|i| command_line_rule(i, &format!("marker{i:02}x")));
    let set = RuleSet::compile(rules, &Mapping::bundled());
    let reference = set.clone().without_prefilter();
    let every_word: String = (0..12).map(|i| format!("marker{i:02}x ")).collect();
    let mut lines: Vec<String> = (0..200)
        .map(|i| format!("tool.exe --job {i} marker{:02}x", i % 40))
        .collect();
    lines.extend([
        // More words than a slot keeps.
        every_word.clone(),
        every_word.to_uppercase(),
        // Longer than a slot keeps, its word at the end.
        format!("{} marker39x", "a".repeat(600)),
        "no word at all".into(),
        "MARKER05X in capitals".into(),
    ]);
    let (mut got, mut want) = (Vec::new(), Vec::new());
    // Three rounds: the first fills the slots, the others find values in them, after
    // other values (200 of them in 64 slots) took some of their slots.
    for round in 0..3 {
        for line in &lines {
            let event = process(line);
            got.clear();
            want.clear();
            set.matches(&event, &mut got);
            reference.matches(&event, &mut want);
            assert_eq!(got, want, "round {round}: {line}");
        }
    }
    got.clear();
    set.matches(&process(&every_word), &mut got);
    assert_eq!(got, (0..12).collect::<Vec<u32>>());
    got.clear();
    set.matches(&process("tool.exe --job 7 marker07x"), &mut got);
    assert_eq!(got, vec![7]);
}

#[test]
fn two_sets_in_turn_on_one_thread_keep_to_their_own_rules() {
    // Two sets over the same field, their literals numbered otherwise (the second has one
    // more, first in order) and tied to other rules, matched alternately on one thread: a
    // value one set's gate remembers must not admit the other's rules.
    let mapping = Mapping::bundled();
    let straight = RuleSet::compile(
        (0..30).map(|i| command_line_rule(i, &format!("marker{i:02}x"))),
        &mapping,
    );
    let shifted = RuleSet::compile(
        (0..30)
            .map(|i| command_line_rule(i, &format!("marker{:02}x", (i + 7) % 30)))
            .chain([command_line_rule(30, "ma0")]),
        &mapping,
    );
    let mut out = Vec::new();
    for round in 0..3 {
        for word in 0..30u32 {
            let event = process(&format!("tool --job marker{word:02}x"));
            out.clear();
            straight.matches(&event, &mut out);
            assert_eq!(out, vec![word], "round {round}");
            out.clear();
            shifted.matches(&event, &mut out);
            assert_eq!(out, vec![(word + 23) % 30], "round {round}, the other set");
        }
    }
}

#[test]
fn attribute_names_are_found_whole_whatever_their_length() {
    // Names of every length to 40 bytes, sharing first and last bytes, some differing only
    // in the middle (past sixteen bytes the middle is compared on its own).
    let names: Vec<String> = (1..=40)
        .flat_map(|len| {
            let base: String = "ParentCommandLineImageLoadedTargetObject"[..len].into();
            let mut middle = base.clone().into_bytes();
            middle[len / 2] ^= 0x20;
            let mut last = base.clone().into_bytes();
            last[len - 1] ^= 0x20;
            [
                base,
                String::from_utf8(middle).unwrap(),
                String::from_utf8(last).unwrap(),
            ]
        })
        .collect();
    let kept: Vec<&String> = names.iter().step_by(3).collect();
    let fields: Vec<Field> = kept
        .iter()
        .map(|n| Field(vec![FieldSource::Attr(n.as_str().into())].into_boxed_slice()))
        .collect();
    let table = NameTable::build(&fields);
    for (i, name) in kept.iter().enumerate() {
        assert_eq!(table.fields_of(name.as_bytes()), &[(i as u32, 0)], "{name}");
    }
    for name in names.iter().filter(|n| !kept.contains(n)) {
        assert_eq!(
            table.fields_of(name.as_bytes()),
            &[],
            "{name} is not in the table"
        );
    }
    assert_eq!(table.fields_of(b""), &[]);
    assert_eq!(table.fields_of(b"ParentCommandLineX"), &[]);
}

/// A field whose places mix attributes and an entity (`User`: `User`, `SubjectUserName`,
/// `user.name`, then the user entity) reads its first place the event has, whichever the
/// attribute pass filled in and whichever it left to read at each use.
#[test]
fn a_field_of_attributes_and_an_entity_reads_its_first_present_place() {
    let rules = set(
        "title: t\nid: u1\nlogsource: {product: windows, service: security}\ndetection:\n    \
                         s:\n        User: alice\n    condition: s\n",
    );
    let test = |attrs: &[(&str, &str)], user: Option<&str>| {
        let mut e = ev("", &[&[("Channel", "Security")], attrs].concat());
        if let Some(user) = user {
            e.entities.push(("user".into(), String::new(), user.into()));
        }
        let mut out = Vec::new();
        rules.matches(&e, &mut out);
        !out.is_empty()
    };
    assert!(test(&[("User", "alice")], None));
    assert!(test(&[("SubjectUserName", "alice")], Some("bob")));
    assert!(test(&[("user.name", "ALICE"), ("Other", "x")], None));
    assert!(test(&[], Some("alice")), "the entity, with no attribute");
    // The first present place wins: a later one is never read.
    assert!(!test(
        &[("User", "bob"), ("SubjectUserName", "alice")],
        None
    ));
    assert!(!test(&[("SubjectUserName", "bob")], Some("alice")));
    assert!(!test(&[], None));
}

/// A field the previous event had and this one lacks reads as absent: the per-thread slots
/// are not cleared between events, their epoch tells; when the epoch wraps they are.
#[test]
fn a_field_of_the_previous_event_is_never_read_for_the_next() {
    // `ShareName` is one attribute (the pass fills it whole), `User` three and an entity.
    let rules = set(
        "title: t\nid: u2\nlogsource: {product: windows, service: security}\n\
             detection:\n    s:\n        ShareName: alice\n    u:\n        User: bob\n    \
             condition: s or u\n",
    );
    let matched = |attrs: &[(&str, &str)]| matches_security_record(&rules, attrs);
    for _ in 0..3 {
        assert!(matched(&[("ShareName", "alice")]));
        assert!(!matched(&[("Other", "alice")]));
        assert!(matched(&[("User", "bob")]));
        assert!(!matched(&[("Other", "bob")]));
        assert!(!matched(&[]));
    }
    let mut slots = FieldSlots {
        epoch: u32::MAX,
        slots: vec![
            Slot {
                filled: 7,
                hashed: 7,
                ..Slot::default()
            };
            4
        ],
        layouts: Layouts::default(),
    };
    let (fresh, epoch, _) = slots.next_event(4);
    assert_eq!(epoch, 1);
    assert!(fresh.iter().all(|s| s.filled == 0 && s.hashed == 0));
}

/// An event is read through the layout kept for its names only when it has those names:
/// long names that share their first and last eight bytes and length but not their middle
/// are another layout, as is another order; a repeated name keeps its first value from a
/// kept layout too; an event with more names than a layout keeps is read name by name.
#[test]
fn a_kept_layout_serves_only_events_with_its_names() {
    let rules = set(
        "title: t\nid: l1\nlogsource: {product: windows, service: security}\n\
             detection:\n    s:\n        Account_Name_Of_Target: alice\n    \
             t:\n        Image: x.exe\n    condition: s or t\n",
    );
    let matched = |attrs: &[(&str, &str)]| matches_security_record(&rules, attrs);
    let crowd: Vec<(String, String)> = (0..80).map(|i| (format!("F{i}"), "v".into())).collect();
    let crowded = |last: (&str, &str)| {
        let mut attrs: Vec<(&str, &str)> = crowd
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        attrs.push(last);
        matched(&attrs)
    };
    for round in 0..3 {
        assert!(matched(&[("Account_Name_Of_Target", "alice")]), "{round}");
        // Same first and last eight bytes and length, another middle.
        assert!(!matched(&[("Account_Xame_Of_Target", "alice")]), "{round}");
        assert!(matched(&[("Account_Name_Of_Target", "alice")]), "{round}");
        assert!(
            matched(&[("Image", "x.exe"), ("Image", "y.exe")]),
            "{round}"
        );
        assert!(
            !matched(&[("Image", "y.exe"), ("Image", "x.exe")]),
            "{round}"
        );
        assert!(matched(&[("Other", "1"), ("Image", "x.exe")]), "{round}");
        assert!(!matched(&[("Image", "1"), ("Other", "x.exe")]), "{round}");
        assert!(crowded(("Image", "x.exe")), "{round}");
        assert!(!crowded(("Image", "y.exe")), "{round}");
    }
}

/// A layout's gates are those its names can fill: events of two layouts in turn, each
/// holding the field of one rule's gate, each match their own rule, every round, and an
/// event of a third layout holding both fields matches both.
#[test]
fn each_layout_reads_the_gates_of_the_fields_it_holds() {
    let rules = RuleSet::compile(
        [
            "title: a\nid: p1\nlogsource: {product: windows, service: security}\n\
                 detection:\n    s:\n        ShareName|contains: admin\n    condition: s\n",
            "title: b\nid: p2\nlogsource: {product: windows, service: security}\n\
                 detection:\n    s:\n        RelativeTargetName: secret.txt\n    condition: s\n",
        ]
        .map(|yaml| Arc::new(parse_rule(yaml).unwrap())),
        &Mapping::bundled(),
    );
    let matched = |attrs: &[(&str, &str)]| {
        let mut out = Vec::new();
        rules.matches(
            &ev("", &[&[("Channel", "Security")], attrs].concat()),
            &mut out,
        );
        out
    };
    for round in 0..3 {
        assert_eq!(
            matched(&[("ShareName", "\\\\h\\ADMIN$")]),
            vec![0],
            "{round}"
        );
        assert_eq!(
            matched(&[("RelativeTargetName", "Secret.txt")]),
            vec![1],
            "{round}"
        );
        assert_eq!(
            matched(&[("ShareName", "c$")]),
            Vec::<u32>::new(),
            "{round}"
        );
        assert_eq!(
            matched(&[
                ("RelativeTargetName", "Secret.txt"),
                ("ShareName", "admin$")
            ]),
            vec![0, 1],
            "{round}"
        );
    }
}

/// A keyword gate is skipped when every rule it could admit waits on another clause that
/// no earlier gate found; a rule with both clauses among the keywords is never left out.
#[test]
fn a_keyword_waiting_on_another_clause_is_searched_only_when_that_clause_was_found() {
    let waits = set(
        "title: t\nid: k1\nlogsource: {product: windows, service: security}\n\
                         detection:\n    selection:\n        EventID: [4727, 4728]\n    \
                         keywords:\n        - 'ESX Admins'\n    condition: selection and keywords\n",
    );
    let both = set(
        "title: t\nid: k2\nlogsource: {product: windows, service: security}\n\
                        detection:\n    first:\n        - 'ESX Admins'\n    second:\n        \
                        - 'domain'\n    condition: first and second\n",
    );
    let matched = |rules: &RuleSet, attrs: &[(&str, &str)]| {
        let mut out = Vec::new();
        let event = ev("", &[&[("Channel", "Security")], attrs].concat());
        rules.matches(&event, &mut out);
        !out.is_empty()
    };
    for _ in 0..2 {
        let group = ("TargetUserName", "ESX Admins");
        assert!(matched(&waits, &[("EventID", "4728"), group]));
        assert!(!matched(&waits, &[("EventID", "4624"), group]));
        assert!(!matched(
            &waits,
            &[("EventID", "4728"), ("TargetUserName", "x")]
        ));
        assert!(matched(&both, &[group, ("SubjectDomainName", "DOMAIN")]));
        assert!(!matched(&both, &[group]));
    }
}

/// An empty text in a `contains` list is in every value, the empty one too, as it is
/// tested alone: the list's automaton would find nothing in an empty value.
#[test]
fn an_empty_text_in_a_contains_list_matches_an_empty_value() {
    let rules = set(
        "title: t\nid: e1\nlogsource: {product: windows, service: security}\n\
                         detection:\n    s:\n        ShareName|contains: ['', 'abc', 'def']\n    \
                         condition: s\n",
    );
    for (value, want) in [("", true), ("x", true), ("xABCx", true)] {
        let mut out = Vec::new();
        let event = ev("", &[("Channel", "Security"), ("ShareName", value)]);
        rules.matches(&event, &mut out);
        assert_eq!(!out.is_empty(), want, "{value:?}");
    }
}

/// A keyword search reads the event's values as one text: a keyword must still sit
/// inside one value, never across two, in any case.
#[test]
fn a_keyword_never_matches_across_two_values() {
    let s = set(
        "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a74\nlogsource: {product: windows, service: security}\ndetection:\n  kw:\n    - 'mimikatz'\n  condition: kw\n",
    );
    let record = |values: &[(&str, &str)]| {
        let mut attrs = vec![("Channel", "Security"), ("EventID", "4688")];
        attrs.extend_from_slice(values);
        ev("Security", &attrs)
    };
    let mut out = Vec::new();
    s.matches(&record(&[("A", "run mimi"), ("B", "katz now")]), &mut out);
    assert!(out.is_empty(), "split over two values");
    let mut split_by_host = record(&[("A", "katz")]);
    split_by_host.host = "mimi".into();
    s.matches(&split_by_host, &mut out);
    assert!(out.is_empty(), "split between the host and a value");
    s.matches(
        &record(&[("A", "x"), ("B", r"C:\t\MimiKatz.exe")]),
        &mut out,
    );
    assert_eq!(out, vec![0], "inside one value, another case");
}

#[test]
fn disabled_rules_do_not_match() {
    let mut s = set(PROC);
    assert!(s.set_enabled("5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b", false));
    let e = ev(
        "Security",
        &[
            ("Channel", "Security"),
            ("EventID", "4688"),
            ("NewProcessName", r"C:\x\vssadmin.exe"),
            ("CommandLine", "delete shadows"),
        ],
    );
    let mut out = Vec::new();
    s.matches(&e, &mut out);
    assert!(out.is_empty());
}
