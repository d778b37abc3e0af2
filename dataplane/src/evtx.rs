//! Windows event log files (`.evtx`), read as the events SigmaHQ rules expect.
//!
//! Chainsaw and Hayabusa users point their tools at `.evtx` exports; `watchpost analyze` and
//! `watchpost rules test` take them as they are. Each record becomes one flat JSON event: the
//! System fields by the names Sigma uses (`EventID`, `Channel`, `Provider_Name`, `Computer`,
//! `TimeCreated`, `Level`, ...) and the `EventData` (or `UserData`) fields at the top level, as
//! Windows event forwarding to JSON (Winlogbeat's `winlog.event_data`, NXLog) writes them. The
//! normaliser then reads it like any JSON line, so a record and its forwarded twin match the same
//! rules.
//!
//! Records the parser cannot read are counted (`bad_records`), never skipped in silence. The
//! parser reads chunks on `rayon`'s threads.

use serde_json::{Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};

/// What reading one file gave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvtxRead {
    /// Records turned into events.
    pub records: u64,
    /// Records the parser could not read (a damaged chunk, a bad template).
    pub bad_records: u64,
}

/// Whether `path` is an `.evtx` file: by its extension, or by its magic (`ElfFile\0`) for an
/// export saved under another name.
pub fn is_evtx(path: &Path) -> bool {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("evtx"))
    {
        return true;
    }
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"ElfFile\0")
}

/// The files named by `paths`, a folder standing for the event files under it (recursively, in
/// name order): `.evtx` exports and text logs (`.log`, `.json`, `.jsonl`, `.ndjson`, `.txt`);
/// anything else in a folder (a README, a picture) is passed over. Files are taken as given.
pub fn input_files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    const EXTENSIONS: [&str; 6] = ["evtx", "log", "json", "jsonl", "ndjson", "txt"];
    let mut out = Vec::new();
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        let mut folders = vec![path.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder)? {
                let p = entry?.path();
                if p.is_dir() {
                    folders.push(p);
                } else if p.extension().is_some_and(|e| {
                    EXTENSIONS
                        .iter()
                        .any(|x| e.eq_ignore_ascii_case(std::ffi::OsStr::new(x)))
                }) {
                    found.push(p);
                }
            }
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// Reads every record of the `.evtx` file at `path` into `out`, one flat JSON event per line.
pub fn evtx_lines(path: &Path, out: &mut Vec<u8>) -> Result<EvtxRead, evtx::err::EvtxError> {
    let mut parser = evtx::EvtxParser::from_path(path)?;
    let mut read = EvtxRead::default();
    for record in parser.records_json_value() {
        match record {
            Ok(r) => {
                let event = flat_event(&r.data);
                // A map of JSON values always serialises.
                if serde_json::to_writer(&mut *out, &event).is_ok() {
                    out.push(b'\n');
                    read.records += 1;
                } else {
                    read.bad_records += 1;
                }
            }
            Err(_) => read.bad_records += 1,
        }
    }
    Ok(read)
}

/// One record (`{"Event": {"System": ..., "EventData": ...}}` as the parser renders the XML) as
/// a flat event. `EventData` and `UserData` fields come first; the System fields win a clash,
/// since rules select on them.
pub fn flat_event(record: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let event = record.get("Event").unwrap_or(record);
    if let Some(data) = event.get("EventData") {
        put_data(data, &mut out);
    }
    // UserData holds one element named for the event (`LogFileCleared`), its fields inside.
    if let Some(Value::Object(user)) = event.get("UserData") {
        for (name, inner) in user {
            if name == "#attributes" {
                continue;
            }
            put_data(inner, &mut out);
        }
    }
    let Some(system) = event.get("System") else {
        return out;
    };
    let text = |v: &Value| -> Option<Value> {
        match v {
            Value::Null => None,
            Value::Object(m) => m.get("#text").cloned(),
            other => Some(other.clone()),
        }
    };
    let attribute = |v: Option<&Value>, name: &str| {
        v.and_then(|v| v.get("#attributes"))
            .and_then(|a| a.get(name))
            .cloned()
    };
    for name in [
        "EventID",
        "Version",
        "Level",
        "Task",
        "Opcode",
        "Keywords",
        "EventRecordID",
        "Channel",
        "Computer",
    ] {
        if let Some(v) = system.get(name).and_then(text) {
            out.insert(name.to_string(), v);
        }
    }
    let provider = system.get("Provider");
    for (attr, key) in [("Name", "Provider_Name"), ("Guid", "Provider_Guid")] {
        if let Some(v) = attribute(provider, attr) {
            out.insert(key.to_string(), v);
        }
    }
    if let Some(v) = attribute(system.get("TimeCreated"), "SystemTime") {
        out.insert("TimeCreated".to_string(), v);
    }
    if let Some(v) = attribute(system.get("Security"), "UserID") {
        out.insert("UserID".to_string(), v);
    }
    out
}

/// The fields of an `EventData`-like element into `out`: named ones by name, an unnamed list of
/// values as `Data` (the classic-log form), attributes and nulls left out. A name with spaces
/// loses them: Defender writes `Threat Name` and `Source Name`, and the Sigma taxonomy (and
/// every SigmaHQ `windefend` rule) reads `ThreatName` and `SourceName`.
fn put_data(data: &Value, out: &mut Map<String, Value>) {
    match data {
        Value::Object(fields) => {
            for (name, value) in fields {
                let spaced;
                let name = if name.contains(' ') {
                    spaced = name.replace(' ', "");
                    &spaced
                } else {
                    name
                };
                match (name.as_str(), value) {
                    ("#attributes", _) | (_, Value::Null) => {}
                    ("#text", v) => {
                        out.insert("Data".to_string(), joined(v));
                    }
                    (_, Value::Object(inner)) if inner.contains_key("#text") => {
                        out.insert(name.clone(), joined(&inner["#text"]));
                    }
                    _ => {
                        out.insert(name.clone(), joined(value));
                    }
                }
            }
        }
        Value::Null => {}
        other => {
            out.insert("Data".to_string(), joined(other));
        }
    }
}

/// Separates the values of a classic log's unnamed `Data` list in the one `Data` field, as
/// Hayabusa shows them: a character no Windows path or command line holds.
pub const DATA_SEPARATOR: &str = "\u{a6}";

/// A classic log's unnamed `Data` list as one text, its values joined by [`DATA_SEPARATOR`],
/// so that `Data|contains: '\Temp\'` reads the values as written. Left as a JSON array, the
/// list was matched as JSON text, with every backslash doubled and quotes around each value:
/// SigmaHQ's "MSI Installation From Suspicious Locations" (`'\\'` for a UNC path) fired on 298
/// of the 351 MsiInstaller records of an EVTX-ATTACK-SAMPLES export, and single-backslash
/// patterns never matched.
fn joined(value: &Value) -> Value {
    let Value::Array(items) = value else {
        return value.clone();
    };
    let texts: Vec<String> = items
        .iter()
        .map(|item| match item {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            Value::Object(m) => m
                .get("#text")
                .map(|t| t.as_str().map_or_else(|| t.to_string(), str::to_string))
                .unwrap_or_default(),
            other => other.to_string(),
        })
        .collect();
    Value::String(texts.join(DATA_SEPARATOR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_becomes_the_flat_event_sigma_rules_read() {
        let record = serde_json::json!({"Event": {
            "#attributes": {"xmlns": "http://schemas.microsoft.com/win/2004/08/events/event"},
            "System": {
                "Provider": {"#attributes": {"Name": "Microsoft-Windows-Security-Auditing", "Guid": "{5484}"}},
                "EventID": 4720, "Version": 0, "Level": 0, "Task": 13824, "Opcode": 0,
                "Keywords": "0x8020000000000000",
                "TimeCreated": {"#attributes": {"SystemTime": "2013-10-23T16:22:39.9735000Z"}},
                "EventRecordID": 112, "Correlation": null,
                "Execution": {"#attributes": {"ProcessID": 508, "ThreadID": 1032}},
                "Channel": "Security", "Computer": "IE8Win7", "Security": null
            },
            "EventData": {"TargetUserName": "IEUser", "SubjectUserName": "WIN$", "Channel": "spoof",
                          "Threat Name": "Tool:Win32/EICAR_Test_File"}
        }});
        let e = flat_event(&record);
        assert_eq!(e["EventID"], 4720);
        assert_eq!(e["Channel"], "Security", "System wins a clash");
        assert_eq!(e["Provider_Name"], "Microsoft-Windows-Security-Auditing");
        assert_eq!(e["TimeCreated"], "2013-10-23T16:22:39.9735000Z");
        assert_eq!(e["Computer"], "IE8Win7");
        assert_eq!(e["TargetUserName"], "IEUser");
        assert_eq!(
            e["ThreatName"], "Tool:Win32/EICAR_Test_File",
            "spaces dropped"
        );
        assert!(!e.contains_key("Execution") && !e.contains_key("Correlation"));
    }

    #[test]
    fn user_data_qualified_ids_and_classic_data_are_flattened_too() {
        let record = serde_json::json!({"Event": {
            "System": {"EventID": {"#attributes": {"Qualifiers": 16384}, "#text": 7045},
                       "Channel": "System", "Computer": "dc-01"},
            "UserData": {"LogFileCleared": {"#attributes": {"xmlns": "x"},
                         "SubjectUserName": "alice", "SubjectDomainName": "CORP"}}
        }});
        let e = flat_event(&record);
        assert_eq!(e["EventID"], 7045);
        assert_eq!(e["SubjectUserName"], "alice");
        let classic = serde_json::json!({"Event": {"System": {"EventID": 1},
            "EventData": {"Data": ["a", "b"], "Binary": null}}});
        assert_eq!(
            flat_event(&classic)["Data"],
            format!("a{DATA_SEPARATOR}b"),
            "one text, each value as written"
        );
        let paths = serde_json::json!({"Event": {"System": {"EventID": 1040},
            "EventData": {"Data": [r"C:\Program Files\x.msi", "", 7]}}});
        assert_eq!(
            flat_event(&paths)["Data"],
            format!(r"C:\Program Files\x.msi{DATA_SEPARATOR}{DATA_SEPARATOR}7")
        );
    }
}
