//! Cloud and SaaS logsources select their providers' records, and only those: for each mapped
//! logsource a rule that matches any record holding a marker word, and one record per provider
//! in the shape it exports (flattened as the JSON normaliser flattens it). Each record must fire
//! exactly the rules of the logsources that cover it.

use std::sync::Arc;
use watchpost_rules::{Mapping, PlainEvent, RuleSet, parse_rule};

/// (product, service, category) of every cloud logsource the table maps.
const LOGSOURCES: &[(&str, &str, Option<&str>)] = &[
    ("aws", "cloudtrail", None),
    ("azure", "activitylogs", None),
    ("azure", "auditlogs", None),
    ("azure", "signinlogs", None),
    ("azure", "riskdetection", None),
    ("azure", "pim", None),
    ("okta", "okta", None),
    ("gcp", "gcp.audit", None),
    ("gcp", "google_workspace.admin", None),
    ("gcp", "google_workspace.login", None),
    ("m365", "audit", None),
    ("m365", "threat_management", None),
    ("m365", "threat_detection", None),
    ("github", "audit", None),
    ("bitbucket", "audit", None),
    ("kubernetes", "audit", None),
    ("kubernetes", "audit", Some("application")),
    ("opencanary", "", Some("application")),
    ("m365", "exchange", None),
    ("onelogin", "onelogin.events", None),
];

/// One rule per logsource: any record with the marker word.
fn rules() -> Vec<Arc<watchpost_rules::Rule>> {
    LOGSOURCES
        .iter()
        .enumerate()
        .map(|(i, (product, service, category))| {
            let mut logsource = format!("product: {product}");
            if !service.is_empty() {
                logsource.push_str(&format!(", service: {service}"));
            }
            if let Some(c) = category {
                logsource.push_str(&format!(", category: {c}"));
            }
            let yaml = format!(
                "title: t{i}\nid: 6a1b2c3d-0000-4000-8000-{i:012}\nlogsource: {{{logsource}}}\ndetection:\n  kw:\n    - 'marker-7f3a'\n  condition: kw\n"
            );
            Arc::new(parse_rule(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}")))
        })
        .collect()
}

fn record(source: &str, attrs: &[(&str, &str)]) -> PlainEvent {
    let mut event = PlainEvent::with_attributes(source, attrs);
    event.attributes.push(("note".into(), "marker-7f3a".into()));
    event
}

#[test]
fn each_providers_record_fires_its_own_logsources_rules_only() {
    let set = RuleSet::compile(rules(), &Mapping::bundled());
    let n = |product: &str, service: &str, category: Option<&str>| {
        LOGSOURCES
            .iter()
            .position(|l| *l == (product, service, category))
            .unwrap() as u32
    };
    let cases: Vec<(&str, PlainEvent, Vec<u32>)> = vec![
        (
            "CloudTrail",
            record(
                "aws",
                &[
                    ("eventSource", "iam.amazonaws.com"),
                    ("eventName", "CreateUser"),
                    ("awsRegion", "us-east-1"),
                ],
            ),
            vec![n("aws", "cloudtrail", None)],
        ),
        (
            "Azure activity, Event Hub export",
            record(
                "azure",
                &[
                    ("operationName", "MICROSOFT.COMPUTE/VIRTUALMACHINES/WRITE"),
                    ("category", "Administrative"),
                    ("resourceId", "/subscriptions/x"),
                ],
            ),
            vec![n("azure", "activitylogs", None)],
        ),
        (
            "Azure activity, AzureActivity table",
            record(
                "azure",
                &[
                    (
                        "OperationNameValue",
                        "Microsoft.Compute/virtualMachines/write",
                    ),
                    ("CategoryValue", "Administrative"),
                ],
            ),
            vec![n("azure", "activitylogs", None)],
        ),
        (
            "Entra ID audit",
            record(
                "azure",
                &[
                    ("category", "AuditLogs"),
                    ("operationName", "Add member to role"),
                ],
            ),
            vec![n("azure", "auditlogs", None)],
        ),
        (
            "Entra ID sign-in, SigninLogs table",
            record(
                "azure",
                &[("ResultType", "50053"), ("AppDisplayName", "Azure Portal")],
            ),
            vec![n("azure", "signinlogs", None)],
        ),
        (
            "Identity Protection",
            record("azure", &[("riskEventType", "anomalousToken")]),
            vec![n("azure", "riskdetection", None), n("azure", "pim", None)],
        ),
        (
            "Okta System Log",
            record(
                "okta",
                &[
                    ("eventType", "user.session.start"),
                    ("published", "2026-11-27T06:00:00Z"),
                ],
            ),
            vec![n("okta", "okta", None)],
        ),
        (
            "GCP audit, Logging export",
            record(
                "gcp",
                &[
                    ("protoPayload.serviceName", "iam.googleapis.com"),
                    ("protoPayload.methodName", "SetIamPolicy"),
                ],
            ),
            vec![n("gcp", "gcp.audit", None)],
        ),
        (
            "Workspace admin",
            record(
                "gcp",
                &[
                    ("eventService", "admin.googleapis.com"),
                    ("eventName", "DELETE_ROLE"),
                ],
            ),
            vec![n("gcp", "google_workspace.admin", None)],
        ),
        (
            "Workspace login",
            record(
                "gcp",
                &[
                    ("protoPayload.serviceName", "login.googleapis.com"),
                    ("protoPayload.metadata.event.eventName", "login_failure"),
                ],
            ),
            // A Workspace login record is a Cloud Audit Logs record too.
            vec![
                n("gcp", "gcp.audit", None),
                n("gcp", "google_workspace.login", None),
            ],
        ),
        (
            "Microsoft 365 management activity",
            record(
                "m365",
                &[("Workload", "Exchange"), ("Operation", "New-InboxRule")],
            ),
            vec![n("m365", "audit", None), n("m365", "exchange", None)],
        ),
        (
            "Exchange record in SigmaHQ's form",
            record(
                "m365",
                &[
                    ("eventSource", "Exchange"),
                    ("eventName", "Add-FederatedDomain"),
                    ("status", "success"),
                ],
            ),
            vec![n("m365", "exchange", None)],
        ),
        (
            "SharePoint management activity",
            record(
                "m365",
                &[("Workload", "SharePoint"), ("Operation", "FileDownloaded")],
            ),
            vec![n("m365", "audit", None)],
        ),
        (
            "OneLogin event",
            record(
                "onelogin",
                &[
                    ("event_type_id", "3"),
                    ("account_id", "40012"),
                    ("user_name", "ann"),
                ],
            ),
            vec![n("onelogin", "onelogin.events", None)],
        ),
        (
            "Security & Compliance Center alert",
            record(
                "m365",
                &[
                    ("eventSource", "SecurityComplianceCenter"),
                    ("eventName", "Activity from suspicious IP addresses"),
                ],
            ),
            vec![
                n("m365", "threat_management", None),
                n("m365", "threat_detection", None),
            ],
        ),
        (
            "GitHub audit",
            record(
                "github",
                &[
                    ("action", "org.remove_member"),
                    ("actor", "alice"),
                    ("org", "corp"),
                ],
            ),
            vec![n("github", "audit", None)],
        ),
        (
            "Bitbucket audit",
            record(
                "bitbucket",
                &[
                    ("auditType.action", "Full data export triggered"),
                    ("auditType.category", "Data pipeline"),
                ],
            ),
            vec![n("bitbucket", "audit", None)],
        ),
        (
            "Kubernetes audit",
            record(
                "kube-apiserver",
                &[
                    ("kind", "Event"),
                    ("apiVersion", "audit.k8s.io/v1"),
                    ("verb", "create"),
                ],
            ),
            vec![
                n("kubernetes", "audit", None),
                n("kubernetes", "audit", Some("application")),
            ],
        ),
        (
            "OpenCanary",
            record(
                "opencanary",
                &[("logtype", "2000"), ("node_id", "canary-1")],
            ),
            vec![n("opencanary", "", Some("application"))],
        ),
        (
            "a Windows record",
            record("Security", &[("Channel", "Security"), ("EventID", "4624")]),
            vec![],
        ),
        ("a syslog line", record("sshd", &[]), vec![]),
    ];
    let mut out = Vec::new();
    for (name, event, mut want) in cases {
        out.clear();
        set.matches(&event, &mut out);
        want.sort_unstable();
        assert_eq!(out, want, "{name}");
    }
}
