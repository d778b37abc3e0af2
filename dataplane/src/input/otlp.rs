//! OTLP logs (`POST /v1/logs`, OTLP/HTTP 1.x): an `ExportLogsServiceRequest` in protobuf or in
//! OTLP's JSON encoding, gzip-compressed or not, turned into one JSON event per log record and
//! handed to HTTP ingest, so an OTLP record is acknowledged only once durable, as any ingested
//! event is (docs/otlp.md).
//!
//! A record becomes the fields the JSON normaliser already knows (`@timestamp`, `message`,
//! `service.name`, `host.name`, `watchpost.severity`, `log.level`, `trace.id`, `span.id`,
//! `log.logger`), plus every resource and record attribute under its own name, so entities are
//! extracted as for any JSON event (`user.name`, `source.ip`, `client.address`...).

use serde_json::{Map, Value};
use std::io::Read;

/// How the body is encoded (`Content-Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpEncoding {
    /// `application/x-protobuf`.
    Protobuf,
    /// `application/json`.
    Json,
}

/// Why a request body is refused (400; 413 for [`OtlpError::TooLarge`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OtlpError {
    /// The protobuf or JSON does not decode as an `ExportLogsServiceRequest`.
    #[error("not an OTLP ExportLogsServiceRequest: {0}")]
    Decode(String),
    /// The gzip stream is damaged.
    #[error("the gzip body does not decompress: {0}")]
    Gzip(String),
    /// Decompressed, it is larger than the limit.
    #[error("the body decompresses to more than {0} bytes (api_max_body_bytes)")]
    TooLarge(u64),
    /// It holds more messages (records, attributes, values) than one request may: decoded,
    /// each costs far more memory than its bytes on the wire.
    #[error("the request holds more than {0} records, attributes and values; send smaller batches")]
    TooMany(usize),
}

/// Messages (records, attributes, values, of any nesting) one request may hold. An empty log
/// record is 2 bytes of protobuf and about 200 decoded, so a body's size alone does not bound
/// what decoding it takes; this does (to about 100 MB). An SDK or collector batch of 8,192
/// records with a dozen attributes each holds about 100,000.
pub const MAX_MESSAGES: usize = 500_000;

/// The events of a request: JSON lines for [`super::HttpIngest::submit`].
#[derive(Debug, Default)]
pub struct OtlpEvents {
    /// One JSON object per line.
    pub lines: Vec<u8>,
    /// Log records in the request (= lines).
    pub records: u64,
}

/// Decompresses a gzip body, refusing one that grows past `limit` bytes (a small body can
/// inflate a thousandfold).
pub fn gunzip(body: &[u8], limit: u64) -> Result<Vec<u8>, OtlpError> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(body)
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| OtlpError::Gzip(e.to_string()))?;
    if out.len() as u64 > limit {
        return Err(OtlpError::TooLarge(limit));
    }
    Ok(out)
}

/// How many messages (records, attributes, values) decoding `body` builds, at most: a pass over
/// the bytes that allocates nothing, to refuse or budget a request before it is decoded. Counting
/// stops a little past the most any request may build (`MAX_MESSAGES`, 500,000).
pub fn otlp_messages(body: &[u8], encoding: OtlpEncoding) -> usize {
    match encoding {
        OtlpEncoding::Protobuf => wire_messages(body, 0),
        // Every JSON object opens with `{` (one in a string only overcounts).
        OtlpEncoding::Json => memchr::memchr_iter(b'{', body).count(),
    }
}

/// The events of an OTLP logs request body (already decompressed).
pub fn otlp_events(body: &[u8], encoding: OtlpEncoding) -> Result<OtlpEvents, OtlpError> {
    let messages = otlp_messages(body, encoding);
    if messages > MAX_MESSAGES {
        return Err(OtlpError::TooMany(MAX_MESSAGES));
    }
    let request: wire::ExportLogsServiceRequest = match encoding {
        OtlpEncoding::Protobuf => {
            prost::Message::decode(body).map_err(|e| OtlpError::Decode(e.to_string()))?
        }
        OtlpEncoding::Json => serde_json::from_slice::<json::ExportLogsServiceRequest>(body)
            .map_err(|e| OtlpError::Decode(e.to_string()))?
            .into_wire()?,
    };
    let mut out = OtlpEvents::default();
    let now = watchpost_proto::now_ns();
    for resource_logs in &request.resource_logs {
        let resource = resource_logs
            .resource
            .as_ref()
            .map(|r| r.attributes.as_slice())
            .unwrap_or_default();
        for scope_logs in &resource_logs.scope_logs {
            let scope = scope_logs.scope.as_ref();
            for record in &scope_logs.log_records {
                let event = event_of(record, resource, scope, now);
                serde_json::to_writer(&mut out.lines, &Value::Object(event))
                    .map_err(|e| OtlpError::Decode(e.to_string()))?;
                out.lines.push(b'\n');
                out.records += 1;
            }
        }
    }
    Ok(out)
}

/// How many length-delimited fields `body` holds, at any depth where they parse as messages:
/// an upper bound on the messages decoding it allocates (strings and bytes count once). Wire
/// format that does not parse ends the count; prost's decoder then refuses it.
fn wire_messages(body: &[u8], depth: u32) -> usize {
    fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*at)?;
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
    if depth > 32 {
        return 0;
    }
    let (mut at, mut count) = (0usize, 0usize);
    while at < body.len() {
        let Some(key) = varint(body, &mut at) else {
            return count;
        };
        let skip = match key & 7 {
            0 => varint(body, &mut at).map(|_| 0),
            1 => Some(8),
            5 => Some(4),
            2 => varint(body, &mut at).and_then(|n| usize::try_from(n).ok()),
            _ => None,
        };
        let Some(len) = skip else {
            return count;
        };
        let Some(end) = at.checked_add(len).filter(|&e| e <= body.len()) else {
            return count;
        };
        if key & 7 == 2 {
            count += 1 + wire_messages(&body[at..end], depth + 1);
            if count > MAX_MESSAGES {
                return count;
            }
        }
        at = end;
    }
    count
}

/// One record as a JSON event. The fields mapped from the record's own (time, body, severity,
/// ids) go first and win over attributes of the same name: the normaliser takes the first of
/// equally ranked fields, and an attribute `level: 30` (pino's number) must not outrank
/// `severityNumber`.
fn event_of(
    record: &wire::LogRecord,
    resource: &[wire::KeyValue],
    scope: Option<&wire::InstrumentationScope>,
    now: i64,
) -> Map<String, Value> {
    let mut e = Map::new();
    let time = [record.time_unix_nano, record.observed_time_unix_nano]
        .into_iter()
        .find(|&t| t > 0)
        .map_or(now, |t| i64::try_from(t).unwrap_or(i64::MAX));
    e.insert(
        "@timestamp".into(),
        watchpost_normalize::Rfc3339(time).to_string().into(),
    );
    let message = match record.body.as_ref() {
        Some(body) => match value_of(body) {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        },
        None => String::new(),
    };
    if !message.is_empty() {
        e.insert("message".into(), message.into());
    }
    // On Watchpost's scale, under the one name the normaliser reads on that scale: an
    // `event.severity` is on its source's own (docs/event.md, "Severity").
    if let Some(sev) = severity(record.severity_number) {
        e.insert("watchpost.severity".into(), sev.into());
    }
    if !record.severity_text.is_empty() {
        e.insert("log.level".into(), record.severity_text.clone().into());
    }
    for (key, id) in [("trace.id", &record.trace_id), ("span.id", &record.span_id)] {
        if !id.is_empty() && id.iter().any(|&b| b != 0) {
            e.insert(key.into(), watchpost_proto::to_hex(id).into());
        }
    }
    if !record.event_name.is_empty() {
        e.insert("event.name".into(), record.event_name.clone().into());
    }
    if let Some(scope) = scope.filter(|s| !s.name.is_empty()) {
        e.insert("log.logger".into(), scope.name.clone().into());
    }
    let mapped: Vec<String> = e.keys().cloned().collect();
    // Then resource attributes, then the record's: a record's attribute of the same name is
    // the more specific.
    for kv in resource.iter().chain(&record.attributes) {
        if let Some(v) = kv.value.as_ref()
            && !mapped.contains(&kv.key)
        {
            e.insert(kv.key.clone(), value_of(v));
        }
    }
    e
}

/// A `google.rpc.Status` body (what OTLP/HTTP answers with a 4xx or 5xx) in `encoding`.
pub fn status_body(code: i32, message: &str, encoding: OtlpEncoding) -> Vec<u8> {
    match encoding {
        OtlpEncoding::Protobuf => prost::Message::encode_to_vec(&wire::Status {
            code,
            message: message.to_string(),
        }),
        OtlpEncoding::Json => {
            serde_json::to_vec(&serde_json::json!({"code": code, "message": message}))
                .unwrap_or_default()
        }
    }
}

/// The body of a successful answer: an `ExportLogsServiceResponse` with nothing rejected,
/// which encodes as no bytes in protobuf and `{}` in JSON.
pub fn success_body(encoding: OtlpEncoding) -> Vec<u8> {
    match encoding {
        OtlpEncoding::Protobuf => Vec::new(),
        OtlpEncoding::Json => b"{}".to_vec(),
    }
}

/// OTLP's severity number (1-24) on Watchpost's scale (0-5): TRACE and DEBUG debug, INFO
/// informational, WARN medium (as syslog's warning), ERROR high, FATAL critical.
fn severity(number: i32) -> Option<u8> {
    match number {
        1..=8 => Some(0),
        9..=12 => Some(1),
        13..=16 => Some(3),
        17..=20 => Some(4),
        21..=24 => Some(5),
        _ => None,
    }
}

/// An `AnyValue` as JSON: a key-value list as an object (the normaliser flattens it into
/// dotted names), bytes as base64.
fn value_of(v: &wire::AnyValue) -> Value {
    use base64::Engine;
    use wire::any_value::Value as V;
    match &v.value {
        None => Value::Null,
        Some(V::String(s)) => s.clone().into(),
        Some(V::Bool(b)) => (*b).into(),
        Some(V::Int(i)) => (*i).into(),
        Some(V::Double(d)) => serde_json::Number::from_f64(*d).map_or(Value::Null, Value::Number),
        Some(V::Array(a)) => Value::Array(a.values.iter().map(value_of).collect()),
        Some(V::Kvlist(l)) => Value::Object(
            l.values
                .iter()
                .filter_map(|kv| kv.value.as_ref().map(|v| (kv.key.clone(), value_of(v))))
                .collect(),
        ),
        Some(V::Bytes(b)) => base64::engine::general_purpose::STANDARD.encode(b).into(),
    }
}

/// The protobuf messages of `opentelemetry/proto/collector/logs/v1` and the messages they use,
/// with their field numbers; fields Watchpost does not read are skipped by the decoder.
mod wire {
    /// `google.rpc.Status`, the body of an OTLP error answer.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        #[prost(int32, tag = "1")]
        pub code: i32,
        #[prost(string, tag = "2")]
        pub message: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportLogsServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub resource_logs: Vec<ResourceLogs>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceLogs {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_logs: Vec<ScopeLogs>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeLogs {
        #[prost(message, optional, tag = "1")]
        pub scope: Option<InstrumentationScope>,
        #[prost(message, repeated, tag = "2")]
        pub log_records: Vec<LogRecord>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InstrumentationScope {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct LogRecord {
        #[prost(fixed64, tag = "1")]
        pub time_unix_nano: u64,
        #[prost(fixed64, tag = "11")]
        pub observed_time_unix_nano: u64,
        #[prost(int32, tag = "2")]
        pub severity_number: i32,
        #[prost(string, tag = "3")]
        pub severity_text: String,
        #[prost(message, optional, tag = "5")]
        pub body: Option<AnyValue>,
        #[prost(message, repeated, tag = "6")]
        pub attributes: Vec<KeyValue>,
        #[prost(bytes = "vec", tag = "9")]
        pub trace_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "10")]
        pub span_id: Vec<u8>,
        #[prost(string, tag = "12")]
        pub event_name: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7")]
        pub value: Option<any_value::Value>,
    }

    pub mod any_value {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            #[prost(string, tag = "1")]
            String(String),
            #[prost(bool, tag = "2")]
            Bool(bool),
            #[prost(int64, tag = "3")]
            Int(i64),
            #[prost(double, tag = "4")]
            Double(f64),
            #[prost(message, tag = "5")]
            Array(super::ArrayValue),
            #[prost(message, tag = "6")]
            Kvlist(super::KeyValueList),
            #[prost(bytes = "vec", tag = "7")]
            Bytes(Vec<u8>),
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ArrayValue {
        #[prost(message, repeated, tag = "1")]
        pub values: Vec<AnyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValueList {
        #[prost(message, repeated, tag = "1")]
        pub values: Vec<KeyValue>,
    }
}

/// OTLP's JSON encoding: protobuf's JSON mapping with lowerCamelCase names (snake_case taken as
/// well, as protobuf's JSON parsers do), 64-bit integers as strings or numbers, trace and span
/// ids as hex (OTLP's one departure from the mapping), enums as numbers.
mod json {
    use super::{OtlpError, wire};
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ExportLogsServiceRequest {
        #[serde(default, alias = "resource_logs")]
        resource_logs: Vec<ResourceLogs>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ResourceLogs {
        #[serde(default)]
        resource: Option<Resource>,
        #[serde(default, alias = "scope_logs")]
        scope_logs: Vec<ScopeLogs>,
    }

    #[derive(Deserialize)]
    struct Resource {
        #[serde(default)]
        attributes: Vec<KeyValue>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ScopeLogs {
        #[serde(default)]
        scope: Option<Scope>,
        #[serde(default, alias = "log_records")]
        log_records: Vec<LogRecord>,
    }

    #[derive(Deserialize)]
    struct Scope {
        #[serde(default)]
        name: String,
        #[serde(default)]
        version: String,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct LogRecord {
        #[serde(default, alias = "time_unix_nano")]
        time_unix_nano: Option<Integer>,
        #[serde(default, alias = "observed_time_unix_nano")]
        observed_time_unix_nano: Option<Integer>,
        #[serde(default, alias = "severity_number")]
        severity_number: Option<Integer>,
        #[serde(default, alias = "severity_text")]
        severity_text: Option<String>,
        #[serde(default)]
        body: Option<AnyValue>,
        #[serde(default)]
        attributes: Vec<KeyValue>,
        #[serde(default, alias = "trace_id")]
        trace_id: Option<String>,
        #[serde(default, alias = "span_id")]
        span_id: Option<String>,
        #[serde(default, alias = "event_name")]
        event_name: Option<String>,
    }

    #[derive(Deserialize)]
    struct KeyValue {
        key: String,
        #[serde(default)]
        value: Option<AnyValue>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct AnyValue {
        #[serde(default, alias = "string_value")]
        string_value: Option<String>,
        #[serde(default, alias = "bool_value")]
        bool_value: Option<bool>,
        #[serde(default, alias = "int_value")]
        int_value: Option<Integer>,
        #[serde(default, alias = "double_value")]
        double_value: Option<f64>,
        #[serde(default, alias = "array_value")]
        array_value: Option<Values>,
        #[serde(default, alias = "kvlist_value")]
        kvlist_value: Option<KeyValues>,
        #[serde(default, alias = "bytes_value")]
        bytes_value: Option<String>,
    }

    #[derive(Deserialize)]
    struct Values {
        #[serde(default)]
        values: Vec<AnyValue>,
    }

    #[derive(Deserialize)]
    struct KeyValues {
        #[serde(default)]
        values: Vec<KeyValue>,
    }

    /// A 64-bit integer: a JSON number or a decimal string.
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Integer {
        Number(serde_json::Number),
        Text(String),
    }

    impl Integer {
        fn i128(&self, field: &str) -> Result<i128, OtlpError> {
            let text = match self {
                Integer::Number(n) => n.to_string(),
                Integer::Text(t) => t.clone(),
            };
            text.trim()
                .parse()
                .map_err(|_| OtlpError::Decode(format!("{field}: `{text}` is not an integer")))
        }

        fn u64(&self, field: &str) -> Result<u64, OtlpError> {
            u64::try_from(self.i128(field)?)
                .map_err(|_| OtlpError::Decode(format!("{field}: out of range")))
        }
    }

    fn id(text: &str, bytes: usize, field: &str) -> Result<Vec<u8>, OtlpError> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        if text.len() != 2 * bytes || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(OtlpError::Decode(format!(
                "{field}: `{text}` is not {bytes} bytes of hex"
            )));
        }
        Ok((0..bytes)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap_or(0))
            .collect())
    }

    impl ExportLogsServiceRequest {
        pub fn into_wire(self) -> Result<wire::ExportLogsServiceRequest, OtlpError> {
            Ok(wire::ExportLogsServiceRequest {
                resource_logs: self
                    .resource_logs
                    .into_iter()
                    .map(ResourceLogs::into_wire)
                    .collect::<Result<_, _>>()?,
            })
        }
    }

    impl ResourceLogs {
        fn into_wire(self) -> Result<wire::ResourceLogs, OtlpError> {
            Ok(wire::ResourceLogs {
                resource: self
                    .resource
                    .map(|r| -> Result<_, OtlpError> {
                        Ok(wire::Resource {
                            attributes: key_values(r.attributes)?,
                        })
                    })
                    .transpose()?,
                scope_logs: self
                    .scope_logs
                    .into_iter()
                    .map(|s| -> Result<_, OtlpError> {
                        Ok(wire::ScopeLogs {
                            scope: s.scope.map(|s| wire::InstrumentationScope {
                                name: s.name,
                                version: s.version,
                            }),
                            log_records: s
                                .log_records
                                .into_iter()
                                .map(LogRecord::into_wire)
                                .collect::<Result<_, _>>()?,
                        })
                    })
                    .collect::<Result<_, _>>()?,
            })
        }
    }

    impl LogRecord {
        fn into_wire(self) -> Result<wire::LogRecord, OtlpError> {
            let time = |v: &Option<Integer>, f| v.as_ref().map_or(Ok(0), |i| i.u64(f));
            Ok(wire::LogRecord {
                time_unix_nano: time(&self.time_unix_nano, "timeUnixNano")?,
                observed_time_unix_nano: time(
                    &self.observed_time_unix_nano,
                    "observedTimeUnixNano",
                )?,
                severity_number: match &self.severity_number {
                    Some(n) => i32::try_from(n.i128("severityNumber")?)
                        .map_err(|_| OtlpError::Decode("severityNumber: out of range".into()))?,
                    None => 0,
                },
                severity_text: self.severity_text.unwrap_or_default(),
                body: self.body.map(AnyValue::into_wire).transpose()?,
                attributes: key_values(self.attributes)?,
                trace_id: id(self.trace_id.as_deref().unwrap_or(""), 16, "traceId")?,
                span_id: id(self.span_id.as_deref().unwrap_or(""), 8, "spanId")?,
                event_name: self.event_name.unwrap_or_default(),
            })
        }
    }

    fn key_values(list: Vec<KeyValue>) -> Result<Vec<wire::KeyValue>, OtlpError> {
        list.into_iter()
            .map(|kv| {
                Ok(wire::KeyValue {
                    key: kv.key,
                    value: kv.value.map(AnyValue::into_wire).transpose()?,
                })
            })
            .collect()
    }

    impl AnyValue {
        fn into_wire(self) -> Result<wire::AnyValue, OtlpError> {
            use base64::Engine;
            use wire::any_value::Value as V;
            let value = if let Some(s) = self.string_value {
                Some(V::String(s))
            } else if let Some(b) = self.bool_value {
                Some(V::Bool(b))
            } else if let Some(i) = self.int_value {
                Some(V::Int(i64::try_from(i.i128("intValue")?).map_err(
                    |_| OtlpError::Decode("intValue: out of range".into()),
                )?))
            } else if let Some(d) = self.double_value {
                Some(V::Double(d))
            } else if let Some(a) = self.array_value {
                Some(V::Array(wire::ArrayValue {
                    values: a
                        .values
                        .into_iter()
                        .map(AnyValue::into_wire)
                        .collect::<Result<_, _>>()?,
                }))
            } else if let Some(l) = self.kvlist_value {
                Some(V::Kvlist(wire::KeyValueList {
                    values: key_values(l.values)?,
                }))
            } else if let Some(b) = self.bytes_value {
                Some(V::Bytes(
                    base64::engine::general_purpose::STANDARD
                        .decode(b.trim())
                        .map_err(|e| OtlpError::Decode(format!("bytesValue: {e}")))?,
                ))
            } else {
                None
            };
            Ok(wire::AnyValue { value })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn kv(key: &str, value: wire::any_value::Value) -> wire::KeyValue {
        wire::KeyValue {
            key: key.into(),
            value: Some(wire::AnyValue { value: Some(value) }),
        }
    }

    fn text(s: &str) -> wire::any_value::Value {
        wire::any_value::Value::String(s.into())
    }

    fn request() -> wire::ExportLogsServiceRequest {
        wire::ExportLogsServiceRequest {
            resource_logs: vec![wire::ResourceLogs {
                resource: Some(wire::Resource {
                    attributes: vec![
                        kv("service.name", text("checkout")),
                        kv("host.name", text("web-07")),
                    ],
                }),
                scope_logs: vec![wire::ScopeLogs {
                    scope: Some(wire::InstrumentationScope {
                        name: "app.auth".into(),
                        version: String::new(),
                    }),
                    log_records: vec![wire::LogRecord {
                        time_unix_nano: 1_700_000_000_123_000_000,
                        severity_number: 13,
                        severity_text: "WARN".into(),
                        body: Some(wire::AnyValue {
                            value: Some(text("login failed for root")),
                        }),
                        attributes: vec![
                            kv("user.name", text("root")),
                            kv("source.ip", text("203.0.113.9")),
                            kv("attempt", wire::any_value::Value::Int(3)),
                        ],
                        trace_id: (1..=16).collect(),
                        span_id: (1..=8).collect(),
                        ..Default::default()
                    }],
                }],
            }],
        }
    }

    fn event(lines: &[u8]) -> Value {
        serde_json::from_slice(lines.split(|&b| b == b'\n').next().unwrap()).unwrap()
    }

    #[test]
    fn a_protobuf_record_becomes_a_json_event_with_its_resource() {
        let got = otlp_events(&request().encode_to_vec(), OtlpEncoding::Protobuf).unwrap();
        assert_eq!(got.records, 1);
        let e = event(&got.lines);
        assert_eq!(e["@timestamp"], "2023-11-14T22:13:20.123000000Z");
        assert_eq!(e["message"], "login failed for root");
        assert_eq!(e["service.name"], "checkout");
        assert_eq!(e["host.name"], "web-07");
        assert_eq!(e["watchpost.severity"], 3);
        assert_eq!(e["log.level"], "WARN");
        assert_eq!(e["trace.id"], "0102030405060708090a0b0c0d0e0f10");
        assert_eq!(e["span.id"], "0102030405060708");
        assert_eq!(e["user.name"], "root");
        assert_eq!(e["attempt"], 3);
        assert_eq!(e["log.logger"], "app.auth");
    }

    #[test]
    fn the_json_encoding_gives_the_same_event() {
        let body = br#"{"resourceLogs":[{"resource":{"attributes":[
            {"key":"service.name","value":{"stringValue":"checkout"}},
            {"key":"host.name","value":{"stringValue":"web-07"}}]},
          "scopeLogs":[{"scope":{"name":"app.auth"},"logRecords":[{
            "timeUnixNano":"1700000000123000000","severityNumber":13,"severityText":"WARN",
            "body":{"stringValue":"login failed for root"},
            "attributes":[{"key":"user.name","value":{"stringValue":"root"}},
                          {"key":"source.ip","value":{"stringValue":"203.0.113.9"}},
                          {"key":"attempt","value":{"intValue":"3"}}],
            "traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708"}]}]}]}"#;
        let json = otlp_events(body, OtlpEncoding::Json).unwrap();
        let proto = otlp_events(&request().encode_to_vec(), OtlpEncoding::Protobuf).unwrap();
        assert_eq!(event(&json.lines), event(&proto.lines));
    }

    #[test]
    fn structured_bodies_and_odd_values_are_kept_readable() {
        let body = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[
            {"body":{"kvlistValue":{"values":[{"key":"action","value":{"stringValue":"delete"}}]}},
             "attributes":[{"key":"blob","value":{"bytesValue":"AAEC"}},
                           {"key":"tags","value":{"arrayValue":{"values":[{"stringValue":"a"},{"boolValue":true}]}}}],
             "observedTimeUnixNano":1700000000000000000}]}]}]}"#;
        let e = event(&otlp_events(body, OtlpEncoding::Json).unwrap().lines);
        assert_eq!(e["message"], r#"{"action":"delete"}"#);
        assert_eq!(e["blob"], "AAEC");
        assert_eq!(e["tags"], serde_json::json!(["a", true]));
        assert_eq!(e["@timestamp"], "2023-11-14T22:13:20.000000000Z");
        assert!(e.get("watchpost.severity").is_none());
    }

    #[test]
    fn bad_bodies_are_errors_never_panics() {
        for (body, encoding) in [
            (&b"\xff\xff\xff"[..], OtlpEncoding::Protobuf),
            (&b"{\"resourceLogs\": 5}"[..], OtlpEncoding::Json),
            (
                &br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"xyz"}]}]}]}"#[..],
                OtlpEncoding::Json,
            ),
            (
                &br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"-1"}]}]}]}"#[..],
                OtlpEncoding::Json,
            ),
        ] {
            assert!(matches!(
                otlp_events(body, encoding),
                Err(OtlpError::Decode(_))
            ));
        }
        // Every prefix of a valid message: an error or fewer records, never a panic.
        let full = request().encode_to_vec();
        for cut in 0..full.len() {
            let _ = otlp_events(&full[..cut], OtlpEncoding::Protobuf);
        }
        // Deep nesting is refused by the decoders' recursion limits.
        let mut deep = request();
        let mut v = wire::AnyValue {
            value: Some(text("x")),
        };
        for _ in 0..200 {
            v = wire::AnyValue {
                value: Some(wire::any_value::Value::Array(wire::ArrayValue {
                    values: vec![v],
                })),
            };
        }
        deep.resource_logs[0].scope_logs[0].log_records[0].body = Some(v);
        assert!(otlp_events(&deep.encode_to_vec(), OtlpEncoding::Protobuf).is_err());
    }

    #[test]
    fn an_error_status_is_google_rpc_status() {
        let body = status_body(3, "bad", OtlpEncoding::Protobuf);
        assert_eq!(body, [0x08, 3, 0x12, 3, b'b', b'a', b'd']);
        assert_eq!(
            status_body(14, "busy", OtlpEncoding::Json),
            br#"{"code":14,"message":"busy"}"#
        );
    }

    #[test]
    fn a_body_of_millions_of_tiny_messages_is_refused_before_decoding() {
        // 600,000 empty log records: 1.2 MB on the wire, about 120 MB decoded.
        let mut scope = Vec::new();
        for _ in 0..600_000 {
            scope.extend_from_slice(&[0x12, 0x00]);
        }
        let mut resource_logs = vec![0x12];
        prost::encoding::encode_varint(scope.len() as u64, &mut resource_logs);
        resource_logs.extend_from_slice(&scope);
        let mut body = vec![0x0a];
        prost::encoding::encode_varint(resource_logs.len() as u64, &mut body);
        body.extend_from_slice(&resource_logs);
        assert_eq!(
            otlp_events(&body, OtlpEncoding::Protobuf).unwrap_err(),
            OtlpError::TooMany(MAX_MESSAGES)
        );
        let json = format!(
            r#"{{"resourceLogs":[{{"scopeLogs":[{{"logRecords":[{}{{}}]}}]}}]}}"#,
            "{},".repeat(600_000)
        );
        assert_eq!(
            otlp_events(json.as_bytes(), OtlpEncoding::Json).unwrap_err(),
            OtlpError::TooMany(MAX_MESSAGES)
        );
        // A real batch counts far below the bound.
        let one = wire_messages(&request().encode_to_vec(), 0);
        assert!((20..60).contains(&one), "{one}");
    }

    #[test]
    fn the_records_own_fields_win_over_attributes_of_the_same_name() {
        let mut r = request();
        let record = &mut r.resource_logs[0].scope_logs[0].log_records[0];
        record
            .attributes
            .push(kv("event.severity", wire::any_value::Value::Int(30)));
        record.attributes.push(kv("message", text("not the body")));
        let e = event(
            &otlp_events(&r.encode_to_vec(), OtlpEncoding::Protobuf)
                .unwrap()
                .lines,
        );
        // The record's own severity on Watchpost's scale; the attribute stays as sent, on its
        // source's scale.
        assert_eq!(e["watchpost.severity"], 3);
        assert_eq!(e["event.severity"], 30);
        assert_eq!(e["message"], "login failed for root");
        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "@timestamp", "mapped fields first: {keys:?}");
    }

    #[test]
    fn json_nulls_are_absent_values() {
        let body = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":null,"severityText":null,"body":{"stringValue":"x"}}]}]}]}"#;
        let e = event(&otlp_events(body, OtlpEncoding::Json).unwrap().lines);
        assert_eq!(e["message"], "x");
        assert!(e.get("trace.id").is_none());
    }

    #[test]
    fn gzip_bodies_are_inflated_within_the_limit() {
        use std::io::Write;
        let raw = request().encode_to_vec();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw).unwrap();
        let packed = gz.finish().unwrap();
        assert_eq!(gunzip(&packed, 1 << 20).unwrap(), raw);
        assert_eq!(gunzip(&packed, 10), Err(OtlpError::TooLarge(10)));
        assert!(matches!(
            gunzip(b"not gzip", 1 << 20),
            Err(OtlpError::Gzip(_))
        ));
    }
}
