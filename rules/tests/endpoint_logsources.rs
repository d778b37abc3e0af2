//! Endpoint logsources beyond Sysmon and 4688: macOS and Linux process and file events as ECS
//! sends them (Elastic Defend, Auditbeat), 4688's integrity level SID read as Sysmon's name, the
//! RPC Firewall's channel, and Windows network connections from Sysmon 3 but not from Security
//! 5156, whose device paths would defeat the rules' filters (docs/sigma.md). Each record, flattened as the JSON and EVTX readers flatten it,
//! must fire exactly the rules of the logsources that cover it, through the field names
//! SigmaHQ's rules use (`Image`, `CommandLine`, `DestinationPort`...).

use std::sync::Arc;
use watchpost_rules::{Mapping, PlainEvent, RuleSet, parse_rule};

/// (logsource, detection) of each rule, in the form SigmaHQ writes them.
const RULES: &[(&str, &str)] = &[
    (
        "product: macos, category: process_creation",
        "sel:\n    Image|endswith: '/osascript'\n    CommandLine|contains: ' -e '\n  condition: sel",
    ),
    (
        "product: macos, category: file_event",
        "sel:\n    TargetFilename|contains: '/Library/LaunchAgents/'\n  condition: sel",
    ),
    (
        "product: linux, category: process_creation",
        "sel:\n    Image|endswith: '/curl'\n    CommandLine|contains: ' -o /tmp/'\n  condition: sel",
    ),
    (
        "product: linux, category: file_event",
        "sel:\n    TargetFilename|startswith: '/etc/cron.d/'\n  condition: sel",
    ),
    (
        "product: windows, category: network_connection",
        "sel:\n    Image|endswith: '\\rundll32.exe'\n    Initiated: 'true'\n    DestinationPort: 443\n    DestinationIp|startswith: '203.0.113.'\n  condition: sel",
    ),
    (
        "product: rpc_firewall, category: application",
        "sel:\n    EventLog: RPCFW\n    EventID: 3\n    InterfaceUuid: 367abb81-9844-35f1-ad32-98f038001003\n  condition: sel",
    ),
    (
        "product: windows, category: process_creation",
        "sel:\n    Image|endswith: '\\whoami.exe'\n    IntegrityLevel: High\n  condition: sel",
    ),
];

const MACOS_PROCESS: u32 = 0;
const MACOS_FILE: u32 = 1;
const LINUX_PROCESS: u32 = 2;
const LINUX_FILE: u32 = 3;
const WINDOWS_NETWORK: u32 = 4;
const RPC_FIREWALL: u32 = 5;
const WINDOWS_PROCESS: u32 = 6;

fn rules() -> Vec<Arc<watchpost_rules::Rule>> {
    RULES
        .iter()
        .enumerate()
        .map(|(i, (logsource, detection))| {
            let yaml = format!(
                "title: t{i}\nid: 7b2c3d4e-0000-4000-8000-{i:012}\nlogsource: {{{logsource}}}\ndetection:\n  {detection}\n"
            );
            Arc::new(parse_rule(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}")))
        })
        .collect()
}

fn record(source: &str, attrs: &[(&str, &str)]) -> PlainEvent {
    PlainEvent::with_attributes(source, attrs)
}

/// An ECS process start as Elastic Defend sends it; arrays arrive as JSON text.
fn ecs_process(os: &str, event_type: &str, executable: &str, command_line: &str) -> PlainEvent {
    record(
        "elastic-endpoint",
        &[
            ("host.os.type", os),
            ("event.category", "[\"process\"]"),
            ("event.type", event_type),
            ("event.action", "exec"),
            ("process.executable", executable),
            ("process.command_line", command_line),
            ("process.parent.executable", "/bin/zsh"),
        ],
    )
}

fn ecs_file(os: &str, event_type: &str, path: &str) -> PlainEvent {
    record(
        "elastic-endpoint",
        &[
            ("host.os.type", os),
            ("event.category", "[\"file\"]"),
            ("event.type", event_type),
            ("file.path", path),
        ],
    )
}

/// Security 5156 as the EVTX reader flattens it: System fields and EventData side by side.
fn security_wfp() -> PlainEvent {
    record(
        "Security",
        &[
            ("Channel", "Security"),
            ("EventID", "5156"),
            (
                "Application",
                "\\device\\harddiskvolume2\\windows\\system32\\rundll32.exe",
            ),
            ("Direction", "%%14593"),
            ("SourceAddress", "10.0.0.5"),
            ("SourcePort", "50112"),
            ("DestAddress", "203.0.113.7"),
            ("DestPort", "443"),
            ("Protocol", "6"),
        ],
    )
}

#[test]
fn endpoint_records_fire_their_own_logsources_rules_only() {
    let set = RuleSet::compile(rules(), &Mapping::bundled());
    let osascript = "osascript -e 'do shell script \"id\"'";
    let curl = "curl -s https://203.0.113.7/x -o /tmp/x";
    let cases: Vec<(&str, PlainEvent, Vec<u32>)> = vec![
        (
            "macOS process start",
            ecs_process("macos", "[\"start\"]", "/usr/bin/osascript", osascript),
            vec![MACOS_PROCESS],
        ),
        (
            "macOS process start, ECS's scalar form",
            ecs_process("macos", "start", "/usr/bin/osascript", osascript),
            vec![MACOS_PROCESS],
        ),
        (
            "macOS process end",
            ecs_process("macos", "[\"end\"]", "/usr/bin/osascript", osascript),
            vec![],
        ),
        (
            "the same command on Linux is not a macOS event",
            ecs_process("linux", "[\"start\"]", "/usr/bin/osascript", osascript),
            vec![],
        ),
        (
            "Linux process start",
            ecs_process("linux", "[\"start\"]", "/usr/bin/curl", curl),
            vec![LINUX_PROCESS],
        ),
        (
            "macOS file creation",
            ecs_file(
                "macos",
                "[\"creation\"]",
                "/Users/ann/Library/LaunchAgents/com.x.plist",
            ),
            vec![MACOS_FILE],
        ),
        (
            "macOS file deletion",
            ecs_file(
                "macos",
                "[\"deletion\"]",
                "/Users/ann/Library/LaunchAgents/com.x.plist",
            ),
            vec![],
        ),
        (
            "Linux file creation",
            ecs_file("linux", "[\"creation\"]", "/etc/cron.d/backdoor"),
            vec![LINUX_FILE],
        ),
        (
            "Security 5156 is not a network connection of Sysmon's shape",
            security_wfp(),
            vec![],
        ),
        (
            "Sysmon 3",
            record(
                "Microsoft-Windows-Sysmon/Operational",
                &[
                    ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                    ("EventID", "3"),
                    ("Image", "C:\\Windows\\System32\\rundll32.exe"),
                    ("Initiated", "true"),
                    ("DestinationIp", "203.0.113.7"),
                    ("DestinationPort", "443"),
                ],
            ),
            vec![WINDOWS_NETWORK],
        ),
        (
            "Security 4688, its integrity level a SID",
            record(
                "Security",
                &[
                    ("Channel", "Security"),
                    ("EventID", "4688"),
                    ("NewProcessName", "C:\\Windows\\System32\\whoami.exe"),
                    ("MandatoryLabel", "S-1-16-12288"),
                ],
            ),
            vec![WINDOWS_PROCESS],
        ),
        (
            "Security 4688 at medium integrity",
            record(
                "Security",
                &[
                    ("Channel", "Security"),
                    ("EventID", "4688"),
                    ("NewProcessName", "C:\\Windows\\System32\\whoami.exe"),
                    ("MandatoryLabel", "S-1-16-8192"),
                ],
            ),
            vec![],
        ),
        (
            "Sysmon 1 at high integrity",
            record(
                "Microsoft-Windows-Sysmon/Operational",
                &[
                    ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                    ("EventID", "1"),
                    ("Image", "C:\\Windows\\System32\\whoami.exe"),
                    ("IntegrityLevel", "High"),
                ],
            ),
            vec![WINDOWS_PROCESS],
        ),
        (
            "RPC Firewall audit event",
            record(
                "RPCFW",
                &[
                    ("Channel", "RPCFW"),
                    ("EventID", "3"),
                    ("InterfaceUuid", "367ABB81-9844-35F1-AD32-98F038001003"),
                ],
            ),
            vec![RPC_FIREWALL],
        ),
    ];
    let mut out = Vec::new();
    for (name, event, want) in cases {
        out.clear();
        set.matches(&event, &mut out);
        assert_eq!(out, want, "{name}");
    }
}
