"""OTLP/HTTP load: POSTs one ExportLogsServiceRequest of RECORDS log records (protobuf, built once
with the OpenTelemetry proto classes) to ENDPOINT from THREADS keep-alive connections for
SECONDS, and prints the records per second the service accepted (answered 200).

Usage: PYTHONPATH=~/.cache/watchpost/python-otel python3 otlp_load.py ENDPOINT [SECONDS]
       [THREADS] [RECORDS]
Each record: a time, WARN severity, a 90-character sshd-style body, four attributes; the
resource names a service and a host. Answers other than 200 are counted and reported.
"""

import http.client
import sys
import threading
import time
import urllib.parse

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

endpoint = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10
threads = int(sys.argv[3]) if len(sys.argv) > 3 else 4
records = int(sys.argv[4]) if len(sys.argv) > 4 else 1000


def kv(key, value):
    return KeyValue(key=key, value=AnyValue(string_value=value))


now = time.time_ns()
logs = [
    LogRecord(
        time_unix_nano=now + i,
        severity_number=13,
        severity_text="WARN",
        body=AnyValue(
            string_value=f"Failed password for invalid user u{i % 97} from 198.51.100.{i % 250} port {40000 + i % 20000} ssh2"
        ),
        attributes=[
            kv("user.name", f"u{i % 97}"),
            kv("source.ip", f"198.51.100.{i % 250}"),
            kv("event.action", "ssh_login"),
            kv("event.outcome", "failure"),
        ],
        trace_id=(i + 1).to_bytes(16, "big"),
        span_id=(i + 1).to_bytes(8, "big"),
    )
    for i in range(records)
]
request = ExportLogsServiceRequest(
    resource_logs=[
        ResourceLogs(
            resource=Resource(attributes=[kv("service.name", "sshd-gw"), kv("host.name", "bastion-01")]),
            scope_logs=[ScopeLogs(log_records=logs)],
        )
    ]
)
body = request.SerializeToString()
url = urllib.parse.urlparse(endpoint)
ok = [0] * threads
other = [0] * threads
deadline = time.time() + seconds


def run(n):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    while time.time() < deadline:
        conn.request("POST", url.path, body, {"Content-Type": "application/x-protobuf"})
        resp = conn.getresponse()
        resp.read()
        if resp.status == 200:
            ok[n] += 1
        else:
            other[n] += 1
            time.sleep(0.05)


started = time.time()
workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
elapsed = time.time() - started
accepted = sum(ok) * records
print(
    f"{accepted} records accepted in {elapsed:.1f} s: {accepted / elapsed:,.0f} records/s "
    f"({sum(ok)} requests of {len(body):,} bytes; {sum(other)} refused)"
)
